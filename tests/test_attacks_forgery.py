"""Forgeries of the grade a candidate's code can try from inside the test process (an audit's findings).

Each Docker attack is a submission made by a `CommandAgent` on the demo's distributed task; none fixes the bug.
Each got `resolved` before the defence it names and must not now. The tests without Docker check the parts
of those defences that need no sandbox: canaries that look like the file's tests, a fail-closed stream, the
scan of added code and binaries, the names a reset protects.
"""

import ast
import json
import re
import textwrap
from pathlib import Path

import pytest
from attack_payloads import STEAL_CHANNEL

from sweserve.agents.command import CommandAgent
from sweserve.agents.config import CommandAgentConfig
from sweserve.environment.docker_sandbox import OutputTail
from sweserve.environment.sandbox import ExecResult
from sweserve.evaluation import twins
from sweserve.evaluation.grading import run_tests
from sweserve.evaluation.resets import plan_resets
from sweserve.evaluation.tamper_scan import scan
from sweserve.evaluation.trial import evaluate_task
from sweserve.harness import sweserve_twins as canaries
from sweserve.models import Task, TestSpec, Twin

DIST = "sweserve-demo__sglang-mini-103"
PKG = "python/sglang/srt/distributed/__init__.py"  # imported while the hidden tests are collected
F2P = "test/srt/test_parallel_state.py::test_uneven_split_covers_everything"
P2P = "test/srt/test_parallel_state.py::test_even_split"


def write(path: str, text: str, append: bool = False) -> str:
    """A shell step writing text to path (a quoted heredoc: no expansion)."""
    op = ">>" if append else ">"
    return f"mkdir -p $(dirname {path}) && cat {op} {path} <<'SWEOF'\n{text}\nSWEOF\n"


# --- 1: canaries told apart from the file's own tests -------------------------------------------------------

# runs honestly what looks like a canary (the old fixed body, or the old name's `_<aspect>_<NN>` tail) and
# swallows every other test's failure
RECOGNISE_CANARIES = '''
import inspect as _inspect
import re as _re

import pytest as _pytest

_orig_runtest = _pytest.Function.runtest


def _looks_planted(item):
    try:
        src = _inspect.getsource(item.obj)
    except (OSError, TypeError):
        src = ""
    return "sorted(values)" in src or _re.search(r"_[a-z]+_[0-9]{2}$", item.name) is not None


def _runtest(self):
    if _looks_planted(self):
        return _orig_runtest(self)
    try:
        _orig_runtest(self)
    except BaseException:
        pass


_pytest.Function.runtest = _runtest
'''

# --- 2: the stream's head pushed out of what the verifier keeps, then a forged run ---------------------------

FLOOD_THEN_REPLAY = STEAL_CHANNEL + '''
import atexit as _atexit

_SEEN = {}
_rec = next(p for p in __import__("gc").get_objects() if type(p).__name__ == "Recorder" and hasattr(p, "_emit"))
_orig_emit = _rec._emit


def _spy(event):
    if "id" in event:
        _SEEN.setdefault(event["id"], event["outcome"])
    return _orig_emit(event)


_rec._emit = _spy


def _replay():
    junk = b"x" * (2**20 - 1) + b"\\n"
    for _ in range(9):
        _os.write(_FD, junk)
    _frame({"start": _BOOT["manifest_digest"]()})
    for test_id, outcome in _SEEN.items():
        planted = __import__("re").search(r"_[a-z]+_[0-9]{2}$", test_id) is not None
        _frame({"id": test_id, "outcome": outcome if planted else "passed"})
    _frame({"end": 0})


_atexit.register(_replay)
'''

# --- 4: pytest.toml puts the repo's `python/` first; a package there shadows an installed one -----------------

FAKE_NUMPY = {"python/numpy/__init__.py": "from . import testing\n",
              "python/numpy/testing.py": "def assert_allclose(actual, desired, *args, **kwargs):\n    pass\n"}
REAL_NUMPY = {"numpy/__init__.py": "from . import testing\n",
              "numpy/testing.py": "def assert_allclose(actual, desired, *args, **kwargs):\n"
                                  "    assert list(actual) == list(desired), (actual, desired)\n"}


def test_payloads_are_well_formed():
    for text in (RECOGNISE_CANARIES, STEAL_CHANNEL, FLOOD_THEN_REPLAY, *FAKE_NUMPY.values(), *REAL_NUMPY.values()):
        compile(textwrap.dedent(text), "<payload>", "exec")


@pytest.fixture(scope="module")
def oracle_ok(demo):
    from sweserve.agents.reference import OracleAgent

    r = evaluate_task(demo.ctx, demo.bundle(DIST), OracleAgent())
    assert r.status == "resolved", r.reason


@pytest.mark.slow
@pytest.mark.docker
def test_canaries_cannot_be_told_apart_from_the_files_tests(demo, oracle_ok):
    r = evaluate_task(demo.ctx, demo.bundle(DIST), CommandAgent(write(PKG, RECOGNISE_CANARIES, append=True),
                                                                name="forge-recognise-canaries"))
    assert r.agent_run.exit_code == 0, r.agent_run.log_tail
    assert r.status == "tampered", (r.status, r.reason, r.tests)
    assert "canary" in r.reason or "twin" in r.reason, r.reason


@pytest.mark.docker
def test_a_flood_that_pushes_the_streams_head_out_is_tampering(demo, oracle_ok):
    r = evaluate_task(demo.ctx, demo.bundle(DIST), CommandAgent(write(PKG, FLOOD_THEN_REPLAY, append=True),
                                                                name="forge-flood-replay"))
    assert r.agent_run.exit_code == 0, r.agent_run.log_tail
    assert r.status == "tampered", (r.status, r.reason, r.tests)
    assert "output" in r.reason or "stream" in r.reason, r.reason


@pytest.fixture
def numpy_task(demo, request):
    """DIST with its hidden test comparing through numpy.testing, in a task image with a (tiny) numpy."""
    import io
    import tarfile

    bundle = demo.bundle(DIST).model_copy(deep=True)
    line = "+    assert shards == [(0, 3), (3, 6), (6, 8), (8, 10)]\n"
    assert line in bundle.tests_patch
    bundle.tests_patch = bundle.tests_patch.replace(
        line, "+    __import__('numpy.testing').testing.assert_allclose(shards, [(0, 3), (3, 6), (6, 8), (8, 10)])\n")
    image = demo.ctx.task_image(demo.bundle(DIST))
    client = demo.ctx.host.client
    box = client.containers.create(image, command=["sleep", "60"], labels={"sweserve.test": "numpy"})
    try:
        buf = io.BytesIO()
        with tarfile.open(fileobj=buf, mode="w") as tar:
            for rel, text in REAL_NUMPY.items():
                data = text.encode()
                info = tarfile.TarInfo(rel)
                info.size, info.mode = len(data), 0o644
                tar.addfile(info, io.BytesIO(data))
        box.put_archive("/opt/venv/lib/python3.11/site-packages", buf.getvalue())
        tag = f"sweserve-test-numpy:{request.node.name.rsplit('[', 1)[-1].strip(']').replace('.', 'dot')}"
        box.commit(*tag.split(":"))
    finally:
        box.remove(force=True)
    original = demo.ctx.image
    demo.ctx.image = lambda inputs: tag if inputs.image.task_id == DIST else original(inputs)
    try:
        yield bundle
    finally:
        demo.ctx.image = original
        client.images.remove(tag, force=True)


@pytest.mark.docker
@pytest.mark.parametrize("config", ["pytest.toml", ".pytest.toml"])
def test_a_package_shadowing_an_installed_one_is_reset(demo, oracle_ok, numpy_task, config):
    from sweserve.agents.reference import OracleAgent

    honest = evaluate_task(demo.ctx, numpy_task, OracleAgent())
    assert honest.status == "resolved", honest.reason  # the variant is a fair task: its real numpy checks
    files = {config: '[pytest]\npythonpath = ["python"]\n', **FAKE_NUMPY}
    cmd = "".join(write(p, t) for p, t in files.items())
    r = evaluate_task(demo.ctx, numpy_task, CommandAgent(cmd, name=f"forge-shadow-numpy-{config}"))
    assert r.agent_run.exit_code == 0, r.agent_run.log_tail
    assert r.status != "resolved", (r.status, r.reason, r.tests)
    assert f"{config} (pytest configuration)" in r.resets, r.resets
    assert "python/numpy/__init__.py (shadows module numpy)" in r.resets, r.resets


# --- 5: the candidate's file names are redacted in flags and resets -----------------------------------------

@pytest.mark.docker
def test_a_secret_in_a_file_name_is_redacted_from_flags_and_resets(demo, oracle_ok):
    secret = "sk-live-named-file-7777"
    cfg = CommandAgentConfig(kind="command", name="leaky-names", env=["LEAKY_TOKEN"],
                             command='touch "python/$LEAKY_TOKEN.pth" "test/srt/test_$LEAKY_TOKEN.py"')
    r = evaluate_task(demo.ctx, demo.bundle(DIST), CommandAgent(cfg.command, cfg=cfg, env={"LEAKY_TOKEN": secret}))
    assert r.resets and r.flags, r
    recorded = r.model_dump_json() + (Path(r.trial_dir) / "result.json").read_text()
    assert secret not in recorded
    assert "python/***.pth (interpreter start-up hook)" in r.resets


# --- the same defences, without Docker ----------------------------------------------------------------------

SOURCE = '''"""Tests of the thing."""
import unittest

from pkg.thing import shard_range, merge_ranges

LIMIT = 4


def test_even_split():
    assert shard_range(8, 4, 0) == (0, 2)


@unittest.skipIf(False, "never")
def test_uneven_split_covers_everything():
    assert shard_range(10, 4, 0) == (0, 3)


class TestMergeRanges(unittest.TestCase):
    def setUp(self):
        self.base = [(0, 1)]

    def test_merge_adjacent_ranges(self):
        self.assertEqual(merge_ranges(self.base), [(0, 1)])

    def test_merge_keeps_order(self):
        pass


def test_single_rank_gets_all():
    assert shard_range(5, 1, 0) == (0, 5)
'''


def _task(runner="pytest", f2p=("test/t.py::test_uneven_split_covers_everything",
                                 "test/t.py::test_single_rank_gets_all"),
          p2p=("test/t.py::TestMergeRanges::test_merge_keeps_order",)):
    return Task(task_id="o__r-1", repo="o/r", profile="p", pr_number=1, title="t", base_commit="a" * 40,
                merge_commit="b" * 40, family="decoding", created_at="2026-01-01T00:00:00Z",
                test=TestSpec(runner=runner, files=["test/t.py"]), FAIL_TO_PASS=list(f2p), PASS_TO_PASS=list(p2p))


def _canary_sources(plan, file="test/t.py"):
    text = plan.texts[file]
    tree = ast.parse(text)
    names = {m.name for m in plan.members if m.kind == "canary"}
    return {n.name: ast.get_source_segment(text, n) for n in ast.walk(tree)
            if isinstance(n, ast.FunctionDef) and n.name in names}


def _planted_names(plan):
    return {m.name for m in plan.members}


def test_planted_tests_share_one_name_distribution_and_sit_in_their_scope():
    plan = twins.grading_plan(_task(), {"test/t.py": SOURCE})
    canary = [m for m in plan.members if m.kind == "canary"]
    assert 1 <= sum(m.must_pass for m in canary) <= 2
    text = plan.texts["test/t.py"]
    tree = ast.parse(text)
    cls = next(n for n in tree.body if isinstance(n, ast.ClassDef))
    words = set(canaries.NEUTRAL_WORDS)  # every planted name's words, the file's own no more (red team 8, R8-3)
    for m in plan.members:
        rank, *picked, tail = m.name.split("_")[1:]
        assert re.fullmatch("[0-9]{4}", rank) and set(picked) <= words and 2 <= len(picked) <= 3 \
            and re.fullmatch("[0-9a-f]{4}", tail), m.name
        if m.cls:
            assert m.cls == "TestMergeRanges" and m.name in {n.name for n in cls.body if isinstance(n, ast.FunctionDef)}
    assert not re.search(r"^\w+\.test_\w+ = ", text, re.M)  # no attaching after the class


def test_no_fixed_text_is_shared_by_every_canary():
    sources = []
    for seed in range(10):  # seeded: a shared run of 12 characters by chance would fail CI, not a defence
        plan = twins.grading_plan(_task(), {"test/t.py": SOURCE}, seed=seed)
        sources += _canary_sources(plan).values()
    assert len(sources) >= 12
    common = None
    for src in sources:  # the name aside: every planted name, a test's or a twin's too, opens with a rank token
        src = re.sub(r"def test_\w+", "def NAME", src)
        grams = {src[i:i + 12] for i in range(len(src) - 11)}
        common = grams if common is None else common & grams
    assert not common, sorted(common)[:5]


def test_planted_tests_keep_the_files_order_and_each_group_is_shuffled_where_its_test_was():
    """Each graded test's group goes where the file had the test, its members shuffled among themselves (red team
    4's W5: a test may rely on the state its predecessor left); the canaries go, shuffled, to their scope's end."""
    single = "test/t.py::test_single_rank_gets_all"
    task = _task()
    task.twins = [Twin(test=single, site=1, value=v) for v in ("4", "6", "7")]
    firsts = set()
    for seed in range(12):  # seeded: unseeded, the real member was never first on 3% of runs ((3/4)^12)
        plan = twins.grading_plan(task, {"test/t.py": SOURCE}, seed=seed)
        order = re.findall(r"^def (test_\w+)\(", plan.texts["test/t.py"], re.M)
        assert order[0] == "test_even_split" and len(order) == len(set(order))  # not graded: where it was
        of = {m.name: m for m in plan.members if m.cls is None}
        kinds = [of[n].kind + ":" + of[n].real for n in order[1:]]
        graded = [k for k in kinds if not k.startswith("canary")]
        assert graded[0] == "test:test_uneven_split_covers_everything" and len(graded) == 5, kinds  # file order
        assert sorted(graded[1:]) == ["test:test_single_rank_gets_all"] + ["twin:test_single_rank_gets_all"] * 3
        assert kinds[:len(graded)] == graded  # the canaries after every group of the module
        firsts.add(graded[1])
    assert firsts == {"test:test_single_rank_gets_all", "twin:test_single_rank_gets_all"}, firsts


def test_class_members_are_methods_of_the_class(tmp_path):
    import importlib.util
    import sys

    plan = twins.grading_plan(_task(), {"test/t.py": SOURCE})
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "thing.py").write_text("def shard_range(*a):\n    return 0\n\n\ndef merge_ranges(r):\n    return r\n")
    path = tmp_path / "t.py"
    path.write_text(plan.texts["test/t.py"])
    sys.path.insert(0, str(tmp_path))
    try:
        spec = importlib.util.spec_from_file_location("planted_t", path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    finally:
        sys.path.remove(str(tmp_path))
    for m in plan.members:
        owner = getattr(module, m.cls) if m.cls else module
        fn = getattr(owner, m.name)
        assert fn.__qualname__ == (f"{m.cls}.{m.name}" if m.cls else m.name)
        if m.kind == "canary":
            fails = False
            try:
                fn(owner("run")) if m.cls else fn()
            except AssertionError:
                fails = True
            assert fails is (not m.must_pass), m


def test_a_must_pass_canary_that_fails_is_forgery():
    plan = twins.grading_plan(_task(), {"test/t.py": SOURCE})
    honest = {f"test/t.py::{m.cls}::{m.name}" if m.cls else f"test/t.py::{m.name}":
              "passed" if m.kind == "test" or m.must_pass else "failed" for m in plan.members}
    assert plan.read(honest).problems == []
    must_pass = {f"test/t.py::{m.cls}::{m.name}" if m.cls else f"test/t.py::{m.name}"
                 for m in plan.members if m.kind == "canary" and m.must_pass}
    inverted = {k: "failed" if k in must_pass else v for k, v in honest.items()}
    assert "a must-pass canary test failed" in plan.read(inverted).problems
    # must-fail canaries and twins skipped while others passed: no check reached, so no accusation (an honest
    # set-up can flake: red team 11, R11-5), but no graded test passes beside them
    skipped = {k: ("skipped" if v == "failed" else v) for k, v in honest.items()}
    reading = plan.read(skipped)
    assert reading.outcomes and set(reading.outcomes.values()) == {"failed"}, reading.outcomes
    # a file whose every test errored (a broken fixture) is no evidence of forging
    broken = {k: "error" for k in honest}
    assert plan.read(broken).problems == []


def test_a_planted_name_never_claims_a_test_of_another_hidden_file():
    """Sibling files share words: a planted name of one equal to a real test of the other would map that test
    to the wrong thing."""
    sibling = "def test_even_split_single():\n    assert 1\n\n\ndef test_merge_order_ranges():\n    assert 1\n"
    task = _task(p2p=("test/t.py::TestMergeRanges::test_merge_keeps_order", "test/u.py::test_even_split_single"))
    for _ in range(20):
        plan = twins.grading_plan(task, {"test/t.py": SOURCE, "test/u.py": sibling})
        reading = plan.read({"test/u.py::test_merge_order_ranges": "passed"})
        assert reading.outcomes == {"test/u.py::test_merge_order_ranges": "passed"}  # not graded: as it was
        for m in plan.members:
            assert m.name not in {"test_even_split_single", "test_merge_order_ranges", "test_even_split"}, m


def test_planted_files_with_form_feeds_keep_every_body(tmp_path):
    """str.splitlines also breaks on a form feed, ast does not: positions taken from one must not be used on
    the other, or a planted test lands inside a test's body."""
    source = "\x0c\n\x0c\n\x0c\n" + SOURCE.replace("\n\ndef test_single_rank", "\n\x0c\ndef test_single_rank")
    for _ in range(12):
        plan = twins.grading_plan(_task(), {"test/t.py": source})
        tree = ast.parse(plan.texts["test/t.py"])  # planted text still parses
        bodies = {n.name: [ast.unparse(b) for b in n.body] for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)}
        names = {m.real: m.name for m in plan.members if m.kind == "test"}
        assert bodies[names["test_single_rank_gets_all"]] == ["assert shard_range(5, 1, 0) == (0, 5)"]
        assert bodies["test_even_split"] == ["assert shard_range(8, 4, 0) == (0, 2)"]  # not graded
        assert all(m.name in bodies for m in plan.members)


def test_output_tail_says_truncated_as_soon_as_any_head_is_lost():
    tail = OutputTail(10)
    tail.add(b"x" * 15)  # under twice the limit: kept in the buffer, but only the last 10 bytes are returned
    assert tail.bytes() == b"x" * 10 and tail.truncated
    short = OutputTail(10)
    short.add(b"y" * 10)
    assert not short.truncated


class _Box:
    """A grade sandbox that answers the test run with a given output."""
    test_user = "nobody"

    def __init__(self, output, truncated=False, exit_code=1):
        self.output, self.truncated, self.exit_code = output, truncated, exit_code
        self.nonce = None

    def put_archive(self, path, data):
        import io
        import tarfile

        with tarfile.open(fileobj=io.BytesIO(data)) as tar:
            for m in tar.getmembers():
                if m.name.endswith(".nonce"):
                    self.nonce = tar.extractfile(m).read().decode()

    def exec(self, command, timeout, workdir=None, env=None):
        text = self.output(self.nonce) if callable(self.output) else self.output
        return ExecResult(self.exit_code, text, truncated=self.truncated, output_bytes=len(text))


def _stream(*events):
    return lambda nonce: "".join(f"\n@@sweserve:{nonce}:{json.dumps(e)}\n" for e in events)


@pytest.fixture
def fake_put_tree(monkeypatch):
    monkeypatch.setattr(_Box, "copy_tree_in", _Box.put_archive, raising=False)  # Sandbox.copy_tree_in


HONEST = ({"start": "d"}, {"id": F2P, "outcome": "passed"}, {"id": P2P, "outcome": "passed"})
TASK = Task(task_id="o__r-1", repo="o/r", profile="p", pr_number=1, title="t", base_commit="a" * 40,
            merge_commit="b" * 40, family="decoding", created_at="2026-01-01T00:00:00Z",
            test=TestSpec(runner="pytest", files=["test/srt/test_parallel_state.py"]),
            FAIL_TO_PASS=[F2P], PASS_TO_PASS=[P2P])


@pytest.mark.parametrize("case", ["truncated", "not-first", "two-starts", "after-end", "exit-mismatch"])
def test_a_malformed_stream_is_tampering(fake_put_tree, case):
    end = {"end": 1}
    box = {
        "truncated": _Box(_stream(*HONEST, end), truncated=True),
        "not-first": _Box(_stream(HONEST[1], *HONEST, end)),
        "two-starts": _Box(_stream(*HONEST, *HONEST, end)),
        "after-end": _Box(_stream(*HONEST, end, HONEST[1])),
        "exit-mismatch": _Box(_stream(*HONEST, end), exit_code=0),
    }[case]
    run = run_tests(box, TASK, 60, "d")
    assert run.tampered, case
    honest = run_tests(_Box(_stream(*HONEST, end)), TASK, 60, "d")
    assert honest.tampered == [] and honest.outcomes == {F2P: "passed", P2P: "passed"}


def _added(path, text):
    lines = text.splitlines()
    return (f"diff --git a/{path} b/{path}\nnew file mode 100644\n--- /dev/null\n+++ b/{path}\n"
            f"@@ -0,0 +1,{len(lines)} @@\n" + "".join(f"+{ln}\n" for ln in lines))


EVASIONS = {
    "test runner patched": "import pytest\npytest.Function.runtest = lambda self: None\n",
    "test runner patched ": "import unittest as u\nu.TestCase.run = lambda self, result=None: None\n",
    "test runner patched  ": "from _pytest import python as p\nsetattr(p.Function, 'runtest', None)\n",
    "frame introspection": "import inspect\nf = inspect.currentframe().f_back\n",
    "frame introspection ": "import inspect\nv = inspect.getclosurevars(print)\n",
    "frame introspection  ": "def walk(tb):\n    return tb.tb_frame.f_back.f_locals\n",
    "dynamic import": "m = __import__('ate' + 'xit')\n",
    "dynamic import ": "import importlib\nname = 'x'\nm = importlib.import_module(name)\n",
    "exit-time hook": "import signal\nsignal.signal(15, lambda *a: None)\n",
    "exit-time hook ": "import os as o\nexit_now = o._exit\n",
}


@pytest.mark.parametrize("what", sorted(EVASIONS))
def test_scan_parses_added_python(what):
    flags = scan(_added("python/pkg/helpers.py", EVASIONS[what]))
    assert f"{what.strip()} (python/pkg/helpers.py)" in flags, flags


def test_scan_is_quiet_on_ordinary_code_and_literal_imports():
    ordinary = ("import importlib\nimport math\n\nm = importlib.import_module('json')\n\n\n"
                "def area(r):\n    return math.pi * r * r\n")
    assert scan(_added("python/pkg/geometry.py", ordinary)) == []


def test_scan_flags_every_added_binary_or_compiled_module():
    binary = ("diff --git a/python/pkg/_fast.so b/python/pkg/_fast.so\nnew file mode 100644\n"
              "index 0000000..1111111\nGIT binary patch\nliteral 4\nLcmZ?wbN~PV0RR91\n\nliteral 0\nHcmV?d00001\n\n")
    blob = binary.replace("python/pkg/_fast.so", "python/pkg/data.bin")
    pyc = _added("python/pkg/helpers.pyc", "not really bytecode")
    flags = scan(binary + blob + pyc)
    for path in ("python/pkg/_fast.so", "python/pkg/data.bin", "python/pkg/helpers.pyc"):
        assert f"binary or compiled module ({path})" in flags, flags


def test_resets_protect_installed_names_and_pytest_toml():
    changed = {"pytest.toml": "A", "sub/.pytest.toml": "A", "python/numpy/__init__.py": "A",
               "python/numpy/testing.py": "A", "python/yaml.py": "A", "python/sglang/numpy.py": "A",
               "python/sglang/srt/a.py": "M"}
    packages = {"python/numpy", "python/sglang", "python/sglang/srt"}
    resets = {r.path: r.why for r in plan_resets(changed, lambda p: False, packages,
                                                  installed=frozenset({"numpy", "yaml"}))}
    assert resets == {"pytest.toml": "pytest configuration", "sub/.pytest.toml": "pytest configuration",
                      "python/numpy/__init__.py": "shadows module numpy",
                      "python/numpy/testing.py": "shadows module numpy", "python/yaml.py": "shadows module yaml"}
