"""Least privilege at grading (issue 15, point 3): code under test rewriting what the tests read, or the runner.

The hidden tests run as an unprivileged user over a repository, an interpreter and a harness that are root's
and read-only to them (`harness/sweserve_drop.py`). Each attack here is code in the package the
hidden tests import; none fixes the bug. Before that defence (tests as root over a writable tree) each of them
graded `resolved`, `tampered` or `error` where the honest grade is `failed`; now each grades `failed`.

The task is the demo's distributed one with a second hidden file whose test compares the code's output with a
fixture, `test/srt/data/shards.json` (as real tests load recorded outputs): collection imports the code under
test while the first file is collected, before the second file is read.
"""

import os
import stat
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from sweserve.agents.command import CommandAgent
from sweserve.agents.reference import OracleAgent
from sweserve.evaluation.trial import evaluate_task, grade_submission
from sweserve.harness import sweserve_drop

DIST = "sweserve-demo__sglang-mini-103"
PKG = "python/sglang/srt/distributed/__init__.py"  # imported while test_parallel_state.py is collected
DATA_TEST = "test/srt/test_shards_data.py::test_shards_match_the_recorded_split"
P2P = "test/srt/test_parallel_state.py::test_even_split"

FIXTURE_FILES = '''diff --git a/test/srt/data/shards.json b/test/srt/data/shards.json
new file mode 100644
--- /dev/null
+++ b/test/srt/data/shards.json
@@ -0,0 +1 @@
+[[0, 3], [3, 6], [6, 8], [8, 10]]
diff --git a/test/srt/test_shards_data.py b/test/srt/test_shards_data.py
new file mode 100644
--- /dev/null
+++ b/test/srt/test_shards_data.py
@@ -0,0 +1,11 @@
+import json
+from pathlib import Path
+
+from sglang.srt.distributed.parallel_state import shard_range
+
+EXPECTED = Path(__file__).parent / "data" / "shards.json"
+
+
+def test_shards_match_the_recorded_split():
+    shards = [list(shard_range(10, 4, r)) for r in range(4)]
+    assert shards == json.loads(EXPECTED.read_text())
'''

# what every payload starts from: the buggy code's own output, which the forged fixture would record
_BUGGY = '''
def _sweserve_buggy():
    import json
    from sglang.srt.distributed.parallel_state import shard_range
    return json.dumps([list(shard_range(10, 4, r)) for r in range(4)])


_FIXTURE = __import__("os").path.join(__import__("os").getcwd(), "test/srt/data/shards.json")
'''

ATTACKS = {
    # the attack: the fixture rewritten in flight
    "rewrite-fixture": _BUGGY + '''
try:
    with open(_FIXTURE, "w") as _fh:
        _fh.write(_sweserve_buggy())
except OSError:
    pass
''',
    # a file the tests read, replaced through its directory (a rename needs no write on the file itself)
    "replace-fixture-by-rename": _BUGGY + '''
try:
    with open(_FIXTURE + ".new", "w") as _fh:
        _fh.write(_sweserve_buggy())
    __import__("os").replace(_FIXTURE + ".new", _FIXTURE)
except OSError:
    pass
''',
    # chmod the read-only file back first
    "chmod-back-then-rewrite": _BUGGY + '''
try:
    __import__("os").chmod(_FIXTURE, 0o666)
    __import__("os").chmod(__import__("os").path.dirname(_FIXTURE), 0o777)
    with open(_FIXTURE, "w") as _fh:
        _fh.write(_sweserve_buggy())
except OSError:
    pass
''',
    # the second test module's pytest cache: a compiled module without the fixture's assertion, which pytest's
    # assertion rewriter loads (it reads a valid cached .pyc even when it writes none); the canaries stay
    "forge-pyc-of-a-test-module": '''
def _sweserve_forge_pyc():
    import ast, importlib.util, inspect, marshal, os, sys
    import _pytest.assertion.rewrite as rw
    import pytest
    src = os.path.join(os.getcwd(), "test/srt/test_shards_data.py")
    text = open(src, "rb").read()
    tree = ast.parse(text)
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef) and "EXPECTED" in ast.unparse(node):
            node.body = [ast.copy_location(ast.Pass(), node.body[0])]
    code = compile(tree, src, "exec", dont_inherit=True)
    if "source_hash" in inspect.getsource(rw._read_pyc):
        head = b"\\x03\\x00\\x00\\x00" + importlib.util.source_hash(text)[:8]
    else:
        st = os.stat(src)
        head = (b"\\x00\\x00\\x00\\x00" + (int(st.st_mtime) & 0xFFFFFFFF).to_bytes(4, "little")
                + (st.st_size & 0xFFFFFFFF).to_bytes(4, "little"))
    cache = os.path.join(os.path.dirname(src), "__pycache__")
    os.makedirs(cache, exist_ok=True)
    name = "test_shards_data." + sys.implementation.cache_tag + "-pytest-" + pytest.__version__ + ".pyc"
    with open(os.path.join(cache, name), "wb") as fh:
        fh.write(importlib.util.MAGIC_NUMBER + head + marshal.dumps(code))


try:
    _sweserve_forge_pyc()
except Exception:
    pass
''',
}

# the runner itself and the interpreter's paths, rewritten while the tests run: they act on the next run (the
# verifier runs the tests more than once, validation does twice), or on any interpreter the tests start
RUNNER_ATTACKS = {
    "append-to-the-boot-script": '''
try:
    import __main__ as _m
    with open(_m.__file__, "a") as _fh:
        _fh.write("\\n# changed\\n")
except OSError:
    pass
''',
    "rewrite-a-pytest-file": '''
try:
    import _pytest.skipping as _s
    with open(_s.__file__, "a") as _fh:
        _fh.write("\\n# changed\\n")
except OSError:
    pass
''',
    "pth-in-site-packages": '''
try:
    import site as _site
    for _d in _site.getsitepackages():
        with open(_d + "/zz_sweserve_forge.pth", "w") as _fh:
            _fh.write("import os; os._exit(0)\\n")
except OSError:
    pass
''',
    # a conftest beside the hidden tests, forcing every report to pass from the next run on
    "conftest-written-in-flight": '''
try:
    import os as _os
    with open("test/srt/conftest.py", "w") as _fh:
        _fh.write("import pytest\\n@pytest.hookimpl(hookwrapper=True)\\ndef pytest_runtest_makereport(item, call):\\n"
                  "    out = yield\\n    r = out.get_result()\\n    r.outcome = 'passed'\\n")
except OSError:
    pass
''',
}


def append(path: str, text: str) -> str:
    return f"cat >> {path} <<'SWEOF'\n{text}\nSWEOF\n"


@pytest.fixture(scope="module")
def data_task(demo):
    """DIST with the fixture-reading hidden test as its FAIL_TO_PASS; the oracle resolves it."""
    bundle = demo.bundle(DIST).model_copy(deep=True)
    bundle.tests_patch = bundle.tests_patch + FIXTURE_FILES
    task = bundle.task
    task.test.files = ["test/srt/test_parallel_state.py", "test/srt/test_shards_data.py"]
    task.FAIL_TO_PASS, task.PASS_TO_PASS = [DATA_TEST], [P2P]
    r = evaluate_task(demo.ctx, bundle, OracleAgent())
    assert r.status == "resolved", (r.reason, r.tests)
    return bundle


def test_payloads_are_well_formed():
    for text in (*ATTACKS.values(), *RUNNER_ATTACKS.values()):
        compile(textwrap.dedent(text), "<payload>", "exec")


@pytest.mark.docker
@pytest.mark.parametrize("name", sorted(ATTACKS))
def test_code_under_test_cannot_rewrite_what_the_tests_read(demo, data_task, name):
    r = evaluate_task(demo.ctx, data_task, CommandAgent(append(PKG, ATTACKS[name]), name=f"priv-{name}"))
    assert r.agent_run.exit_code == 0, r.agent_run.log_tail
    assert r.status == "failed", (name, r.status, r.reason, r.tests)
    assert r.tests.fail_to_pass == {DATA_TEST: "failed"} and r.tests.pass_to_pass == {P2P: "passed"}, r.tests


def _diff(repo: Path, base: str, path: str, text: str, tmp: Path) -> str:
    work = tmp / "work"
    subprocess.run(["git", "clone", "-q", str(repo), str(work)], check=True)
    subprocess.run(["git", "checkout", "-q", base], cwd=work, check=True)
    with open(work / path, "a") as fh:
        fh.write(text)
    return subprocess.run(["git", "diff"], cwd=work, capture_output=True, text=True, check=True).stdout


@pytest.mark.docker
@pytest.mark.parametrize("name", sorted(RUNNER_ATTACKS))
def test_code_under_test_cannot_rewrite_the_runner_for_the_next_run(demo, data_task, name, tmp_path):
    patch = _diff(demo.repo, data_task.task.base_commit, PKG, RUNNER_ATTACKS[name], tmp_path)
    graded = grade_submission(demo.ctx, data_task, demo.ctx.task_image(data_task), patch, [], runs=2)
    assert not graded.tampered, graded.tampered
    for run in graded.runs:
        assert run.outcomes[DATA_TEST] == "failed" and run.outcomes[P2P] == "passed", run.outcomes


# --- the drop itself, without Docker (the host's tests run as root, as the grade sandbox does) -------------

needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="the privilege drop needs root")


@needs_root
def test_lock_makes_a_tree_roots_and_read_only_to_others(tmp_path):
    tree = tmp_path / "repo"
    (tree / "pkg" / "__pycache__").mkdir(parents=True)
    (tree / "pkg" / "data.json").write_text("{}")
    os.chmod(tree / "pkg" / "data.json", 0o666 | stat.S_ISUID)
    os.chmod(tree / "pkg", 0o777)
    os.chown(tree / "pkg" / "__pycache__", 65534, 65534)
    (tree / "link").symlink_to("/etc/passwd")
    sweserve_drop.lock([str(tree)])
    for path in (tree, tree / "pkg", tree / "pkg" / "__pycache__", tree / "pkg" / "data.json"):
        st = path.lstat()
        assert st.st_uid == 0 and not st.st_mode & (stat.S_IWGRP | stat.S_IWOTH | stat.S_ISUID), path
    assert stat.S_IMODE((tree / "pkg" / "data.json").stat().st_mode) == 0o644
    assert stat.S_IMODE(Path("/etc/passwd").stat().st_mode) & 0o777 == 0o644  # a link is not followed


@needs_root
def test_dropped_process_cannot_write_back_or_regain_root(tmp_path):
    tree = tmp_path / "repo"
    tree.mkdir()
    (tree / "fixture.json").write_text("[1]")
    sweserve_drop.lock([str(tmp_path)])
    os.chmod(tmp_path, 0o755)
    probe = textwrap.dedent(f'''
        import os, sys
        sys.path.insert(0, {str(Path(sweserve_drop.__file__).parent)!r})
        import sweserve_drop
        env = sweserve_drop.drop()
        tries = []
        for step in (lambda: open({str(tree / "fixture.json")!r}, "w"),
                     lambda: os.chmod({str(tree / "fixture.json")!r}, 0o666),
                     lambda: open({str(tree / "conftest.py")!r}, "w"),
                     lambda: os.setuid(0)):
            try:
                step()
                tries.append("ok")
            except OSError:
                tries.append("denied")
        open(os.path.join(env["HOME"], "cache"), "w").write("x")  # its own HOME is writable
        print(os.getuid(), tries, open("/proc/self/status").read().count("NoNewPrivs:\\t1"))
    ''')
    out = subprocess.run([sys.executable, "-I", "-c", probe], capture_output=True, text=True, check=True).stdout
    assert out.split() [0] == "65534" and "['denied', 'denied', 'denied', 'denied'] 1" in out, out
