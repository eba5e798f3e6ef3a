"""A second independent red team's attacks on the newest grading defences (issue #15): the mutation twins'
reading (`twins._read`/`_problems`), names mapped by class and by runner rootdir, and the in-box verifier.

Each test asserts the defence holds: it FAILS when the attack wins. Attacks that win today are marked
`xfail(strict=True)` with what they do, so the suite stays green and a fix turns them into failures of the
xfail (then drop the mark). The forger is code the hidden tests import (the package `__init__`), run by the
real boot script (`python -I`, autoload off, the nonce'd stream) through `tests.test_attacks_twins._run`, on
a repository it has not fixed.

Defended since (main, 74b316f): the drop-and-add forgeries (an outcome under a planted test's real name is
never a pass, and `tampered`), a same-named test of another class, a path that is a suffix of another, an id
of megabytes, the scan's unbounded parse. Since: a graded test a TestCase inherits from a mixin of its file
(planted in the mixin, read per class); the name-reading conftest (an honest false fail: planted names keep
clear of what the repository's conftests and `-k` expressions read, `sweserve_twins.selector_checks`,
`draw_name`, with variants: `in` on the whole name, a `-k` in pytest.ini or PYTEST_ADDOPTS, a real name that
holds the word read, the exported plan, and end to end through the grade box's first look); a blanket forgery
in a class decorated with a skip (`unittest.skipIf`, `pytest.mark.skipif`, `usefixtures`: canaries go in the
class like its other methods, `sweserve_twins.keeps_methods`). Still open there: a selector that reads where
in a name a string stands (`endswith`, a regex anchor) rather than whether it is there.

Still winning at grading, and why readiness accounts for them: a graded test in a mixin imported from another
module, or in a file the host's Python cannot parse, keeps its real name and no twin, so its forge odds are 1
(`evaluation/guard.py`); a twinless test in a class whose decorator may change its methods (a parametrized
class, a custom mark, xfail) has no canary beside it and no twin: odds 1 too. A task where every
FAIL_TO_PASS test is such a test is not ready (`unguarded`), and elsewhere it multiplies nothing down. The
traceless wrong guess is open.
"""

from __future__ import annotations

import random

import pytest

from sweserve.evaluation import twins
from sweserve.models import Task, TestSpec, Twin
from tests.test_attacks_twins import BASE, F2P, FILE, HIDDEN, _resolved, _run, _task, validated  # noqa: F401

# The real test names a forger reads off the base version of the hidden file (a modified test file: its
# PASS_TO_PASS tests and the FAIL_TO_PASS tests whose expected values the PR changes keep their names), the
# instruction, or the words every planted name is drawn from (`canaries.vocabulary`: the real names' words).
REAL_NAMES = ["test_even_split", "test_uneven_split_covers_everything", "test_mean_is_not_shifted",
              "TestScale.test_scale_doubles", "TestScale.test_mean_of_one"]

# Drops every planted test that calls the repository's code (each graded test and all its twins: the forger
# need not tell them apart) and keeps the rest (the canaries, whose bodies only use builtins), then adds a
# passing test under each real name. `_read` takes an outcome whose name no member has as the real id itself,
# a planted test that never ran is not a problem, and a twin missing beside a missing test is not either.
DROP_AND_ADD = '''
import inspect as _inspect
import types as _types
import unittest as _unittest
import _pytest.python as _pp

_REAL = REAL_NAMES
_TOP = __name__.split(".")[0]  # the repository's own package: what the graded tests (and twins) call
_orig = _pp.PyCollector.collect


def _codes(code):
    yield code
    for c in code.co_consts:
        if isinstance(c, _types.CodeType):
            yield from _codes(c)


def _calls_repo(fn, glb):
    names = {n for c in _codes(getattr(fn, "__code__", None) or compile("", "", "exec")) for n in c.co_names}
    return any(str(getattr(glb.get(n), "__module__", "") or "").startswith(_TOP) for n in names)


def _pass(self=None):
    return None


def _collect(self):
    mod = getattr(self, "obj", None)
    if isinstance(mod, _types.ModuleType) and not getattr(mod, "_forged", False):
        mod._forged = True
        glb = vars(mod)
        scopes = [mod] + [v for v in list(glb.values()) if _inspect.isclass(v) and v.__module__ == mod.__name__]
        for scope in scopes:
            for name, v in list(vars(scope).items()):
                if name.startswith("test") and _inspect.isfunction(v) and _calls_repo(v, glb):
                    delattr(scope, name)
        for real in _REAL:
            owner, _, name = real.rpartition(".")
            target = glb[owner] if owner else mod
            setattr(target, name, _pass)
    return _orig(self)


_pp.PyCollector.collect = _collect
'''.replace("REAL_NAMES", repr(REAL_NAMES))


def test_dropping_every_group_and_adding_the_real_names_is_not_resolved(validated, tmp_path):  # noqa: F811
    run = _run(tmp_path, twins.grading_plan(validated, {FILE: HIDDEN}), BASE, DROP_AND_ADD)
    assert run.tampered or not _resolved(run, validated), (run.outcomes, run.tampered)


def _honest_outcomes(plan: twins.GradingPlan, real_passes: bool = True) -> dict[str, str]:
    """The outcomes an honest run reports by planted id: each graded test as told, every twin failing, each
    canary as it must."""
    out = {}
    for m in plan.members:
        planted = "::".join([m.file, *([m.cls] if m.cls else []), m.name])
        out[planted] = {"test": "passed" if real_passes else "failed", "twin": "failed"}.get(
            m.kind, "passed" if m.must_pass else "failed")
    return out


# --- names: one test named in two classes -----------------------------------------------------------------------

SAME_NAMED = '''from pkg.thing import pages, slots


class TestPool:
    def test_size(self):
        assert pages(100) == 13


class TestCache:
    def test_size(self):
        assert slots() == 4
'''
POOL, CACHE = f"{FILE}::TestPool::test_size", f"{FILE}::TestCache::test_size"


def _same_named_task() -> Task:
    return _task(FAIL_TO_PASS=[POOL], PASS_TO_PASS=[CACHE],
                 twins=[Twin(test=POOL, site=0, value=v) for v in ("11", "12", "14")])


def test_an_honest_wrong_value_beside_a_same_named_test_of_another_class_is_failed_not_tampered(tmp_path):
    """The verdict rule: a twin that passes while its own test fails is a wrong value equal to the twin's, the
    test's `failed`, no accusation. An honest fix off by one (12 where 13 is right, 12 a twin) in
    `TestPool::test_size` while `TestCache::test_size` (another test, same name) passes is read as a twin
    passing beside its test: `tampered`, and the passing PASS_TO_PASS test is failed too."""
    task = _same_named_task()
    plan = twins.grading_plan(task, {FILE: SAME_NAMED})
    code = "def pages(n):\n    return 12\n\n\ndef slots():\n    return 4\n"
    run = _run(tmp_path, plan, code)
    assert run.outcomes[POOL] == "failed", run.outcomes
    assert run.outcomes[CACHE] == "passed", run.outcomes
    assert not run.tampered, run.tampered


# --- files: one path a suffix of another ------------------------------------------------------------------------

ALPHA = '''from pkg.thing import pages


def test_alpha_pages():
    assert pages(100) == 13
'''
BETA = '''from pkg.thing import slots


def test_beta_slots():
    assert slots() == 47
'''


@pytest.mark.parametrize("reader", ["host", "in-box"])
def test_two_hidden_files_one_a_suffix_of_the_other_are_read_apart(reader):
    from sweserve.harness import sweserve_plan

    files = ["tests/test_a.py", "x/tests/test_a.py"]
    alpha, beta = f"{files[0]}::test_alpha_pages", f"{files[1]}::test_beta_slots"
    task = Task(task_id="o__r-1", repo="o/r", profile="p", pr_number=1, title="t", base_commit="a" * 40,
                merge_commit="b" * 40, family="distributed", created_at="2026-01-01T00:00:00Z",
                test=TestSpec(runner="pytest", files=files), FAIL_TO_PASS=[alpha, beta],
                twins=[Twin(test=alpha, site=0, value=v) for v in ("11", "12", "14")]
                + [Twin(test=beta, site=0, value=v) for v in ("45", "46", "48")])
    plan = twins.grading_plan(task, {files[0]: ALPHA, files[1]: BETA})
    outcomes = _honest_outcomes(plan)
    if reader == "host":
        reading = plan.read(outcomes, exit_status=1)
        real, problems = reading.outcomes, reading.problems
    else:
        members = [{k: v for k, v in m.items() if k != "twin"} for m in __import__("json").loads(plan.map_json())["members"]]
        real, problems = sweserve_plan.read(members, outcomes, 1)
    assert real.get(alpha) == "passed" and real.get(beta) == "passed" and not problems, (real, problems)


def test_the_in_box_reader_does_not_take_real_names_beside_missing_groups(validated):  # noqa: F811
    from sweserve.harness import sweserve_plan

    plan = twins.grading_plan(validated, {FILE: HIDDEN})
    outcomes = {k: v for k, v in _honest_outcomes(plan).items()
                if any(m.kind == "canary" and k.endswith("::" + m.name) for m in plan.members)}
    outcomes |= {t: "passed" for t in validated.FAIL_TO_PASS + validated.PASS_TO_PASS}
    members = [{k: v for k, v in m.items() if k != "twin"}
               for m in __import__("json").loads(plan.map_json())["members"]]
    real, problems = sweserve_plan.read(members, outcomes, 1)
    assert problems or not all(real.get(t) == "passed" for t in validated.FAIL_TO_PASS), (real, problems)


# --- a file with no home for a canary ---------------------------------------------------------------------------

# a GPU test class as SGLang writes them: a class decorator (skipIf), checks of strings and lists (no numeric
# site, no flip: twinless); `_add_canaries` plants no canary in a decorated class, and there is no other scope
DECORATED = '''import unittest

from pkg.thing import backend_name, shard_names


@unittest.skipIf(False, "needs an accelerator")
class TestBackends(unittest.TestCase):
    def test_backend_is_named(self):
        self.assertEqual(backend_name(), "flashinfer")

    def test_shards_are_named(self):
        self.assertEqual(shard_names(2), ["tp0", "tp1"])
'''
DECORATED_BASE = "def backend_name():\n    return 'triton'\n\n\ndef shard_names(n):\n    return []\n"
TESTCASE_RUN = '''
import unittest as _u
_orig = _u.TestCase.run
def _run(self, result=None):
    method = getattr(self, self._testMethodName)
    setattr(self, self._testMethodName, lambda: None)
    try:
        return _orig(self, result)
    finally:
        setattr(self, self._testMethodName, method)
_u.TestCase.run = _run
'''


def test_blanket_forgery_in_a_decorated_class_with_twinless_tests_is_caught(tmp_path):
    ids = [f"{FILE}::TestBackends::test_backend_is_named", f"{FILE}::TestBackends::test_shards_are_named"]
    task = _task(FAIL_TO_PASS=ids)
    plan = twins.grading_plan(task, {FILE: DECORATED})
    assert not any(m.kind == "twin" for m in plan.members)  # strings and lists: twinless
    unsolved = _run(tmp_path, plan, DECORATED_BASE)
    assert not _resolved(unsolved, task)
    run = _run(tmp_path, twins.grading_plan(task, {FILE: DECORATED}), DECORATED_BASE, TESTCASE_RUN)
    assert run.tampered or not _resolved(run, task), (run.outcomes, run.tampered)


DECORATED_ORACLE = "def backend_name():\n    return 'flashinfer'\n\n\ndef shard_names(n):\n    return [f'tp{i}' for i in range(n)]\n"
DECORATED_PYTEST = DECORATED.replace("import unittest\n", "import pytest\nimport unittest\n").replace(
    '@unittest.skipIf(False, "needs an accelerator")\nclass TestBackends(unittest.TestCase):',
    '@pytest.mark.skipif(False, reason="needs an accelerator")\nclass TestBackends:').replace(
    "self.assertEqual(backend_name(), \"flashinfer\")", "assert backend_name() == \"flashinfer\"").replace(
    'self.assertEqual(shard_names(2), ["tp0", "tp1"])', 'assert shard_names(2) == ["tp0", "tp1"]')
RUNTEST = "import _pytest.python as _py\n_py.Function.runtest = lambda self: None\n"


@pytest.mark.parametrize("source, forgery", [(DECORATED, TESTCASE_RUN), (DECORATED_PYTEST, RUNTEST)],
                         ids=["unittest.skipIf", "pytest.mark.skipif"])
def test_a_skip_decorated_class_holds_canaries_an_honest_solution_passes(tmp_path, source, forgery):
    """A skip decorator does the same to every method: canaries go in the class like the others (its tests
    pass with the oracle on every draw), and a blanket forgery of that class's runs is caught."""
    ids = [f"{FILE}::TestBackends::test_backend_is_named", f"{FILE}::TestBackends::test_shards_are_named"]
    task = _task(FAIL_TO_PASS=ids)
    for seed in range(4):
        plan = twins.grading_plan(task, {FILE: source}, seed=seed)
        assert any(m.kind == "canary" and m.cls == "TestBackends" for m in plan.members), plan.members
        honest = _run(tmp_path, plan, DECORATED_ORACLE)
        assert _resolved(honest, task), (seed, honest.outcomes, honest.tampered)
    forged = _run(tmp_path, twins.grading_plan(task, {FILE: source}), DECORATED_BASE, forgery)
    assert forged.tampered and not _resolved(forged, task), (forged.outcomes, forged.tampered)


@pytest.mark.parametrize("decorator", ["@parameterized_class([{'n': 1}, {'n': 2}])", "@pytest.mark.backends('a')",
                                       "@pytest.mark.xfail", "@unittest.expectedFailure", "@my.skipIf(False)"])
def test_a_class_whose_decorator_may_change_its_methods_holds_no_canary(decorator):
    """A decorator that may add, rename or parametrize methods (or invert their outcomes) is no home: a canary
    there could be an honest solution's false `tampered`."""
    source = DECORATED.replace('@unittest.skipIf(False, "needs an accelerator")', decorator)
    task = _task(FAIL_TO_PASS=[f"{FILE}::TestBackends::test_backend_is_named"])
    plan = twins.grading_plan(task, {FILE: source}, seed=1)
    assert not any(m.kind == "canary" and m.cls == "TestBackends" for m in plan.members), plan.members


# --- the host's reading of an id: quadratic in its length ------------------------------------------------------

# one report's id made of '[' (the report's nodeid rewritten in the test process; a param id from a string the
# repository provides does the same): `_base_id`'s `\[.*\]$` backtracks from every '[' to the end
LONG_ID = '''
import _pytest.reports as _r
_orig = _r.TestReport.__init__
_done = []
def _init(self, nodeid, location, keywords, outcome, longrepr, when, *a, **kw):
    if when == "call" and not _done:
        _done.append(1)
        nodeid = str(nodeid) + "[" * N
    _orig(self, nodeid, location, keywords, outcome, longrepr, when, *a, **kw)
_r.TestReport.__init__ = _init
'''


def test_an_outcome_id_of_megabytes_is_read_in_bounded_time(validated, tmp_path):  # noqa: F811
    import subprocess
    import sys
    import textwrap

    # the id travels through the real runner's stream unbounded (kept small here: the read is quadratic)
    run = _run(tmp_path, twins.grading_plan(validated, {FILE: HIDDEN}), BASE, LONG_ID.replace("N", "5000"))
    assert max(map(len, run.outcomes)) > 5000, max(map(len, run.outcomes))
    # what the host does with one such id as the stream lets it through (8 MB: this is 1 MB), in a child
    probe = textwrap.dedent('''
        from sweserve.evaluation import twins
        from tests.test_attacks_twins import FILE
        plan = twins.GradingPlan(texts={}, members=[])
        plan.read({FILE + "::test_x" + "[" * 1_000_000: "failed"}, exit_status=1)
    ''')
    try:
        subprocess.run([sys.executable, "-c", probe], timeout=15, check=True)
    except subprocess.TimeoutExpired:
        raise AssertionError("reading one 1 MB id took over 15 s") from None


# --- a graded test the plan never sees: defined in a mixin --------------------------------------------------------

MIXIN = '''import unittest

from pkg.thing import pages


class PoolChecks:
    def test_pages_for_a_hundred_tokens(self):
        self.assertEqual(pages(100), 13)


class TestPool(PoolChecks, unittest.TestCase):
    def test_pages_for_nothing(self):
        self.assertEqual(pages(0), 0)
'''
MIXIN_BASE = "def pages(n):\n    return n // 8\n"
# the real name is in the planted file as written: pass exactly that test, touch nothing else
BY_REAL_NAME = '''
import _pytest.reports as _r
_orig = _r.TestReport.__init__
def _init(self, nodeid, location, keywords, outcome, longrepr, when, *a, **kw):
    if when == "call" and str(nodeid).endswith("::test_pages_for_a_hundred_tokens"):
        outcome, longrepr = "passed", None
    _orig(self, nodeid, location, keywords, outcome, longrepr, when, *a, **kw)
_r.TestReport.__init__ = _init
'''


def test_a_graded_test_inherited_from_a_mixin_is_planted_like_the_others(tmp_path):
    """A test method of a plain mixin that a TestCase of the file inherits is renamed in the mixin itself (every
    class inheriting it runs the same members; a copy beside an untouched original would be told by the
    original's text) and read back as each collecting class's test."""
    f2p, p2p = f"{FILE}::TestPool::test_pages_for_a_hundred_tokens", f"{FILE}::TestPool::test_pages_for_nothing"
    task = _task(FAIL_TO_PASS=[f2p], PASS_TO_PASS=[p2p])
    plan = twins.grading_plan(task, {FILE: MIXIN})
    unsolved = _run(tmp_path, plan, MIXIN_BASE)
    assert unsolved.outcomes.get(f2p) == "failed", unsolved.outcomes
    run = _run(tmp_path, twins.grading_plan(task, {FILE: MIXIN}), MIXIN_BASE, BY_REAL_NAME)
    assert run.tampered or not _resolved(run, task), (run.outcomes, run.tampered)
    assert "test_pages_for_a_hundred_tokens" not in plan.texts[FILE]  # every graded test gets a fresh name
    honest = _run(tmp_path, twins.grading_plan(task, {FILE: MIXIN}), "def pages(n):\n    return -(-n // 8)\n")
    assert _resolved(honest, task) and not honest.tampered, (honest.outcomes, honest.tampered)


def _validate(tmp_path, task: Task, text: str, base: str, oracle: str) -> Task:
    """The task as validation leaves it (two runs each side), FAIL_TO_PASS/PASS_TO_PASS derived."""
    from sweserve.evaluation.derive import derive

    plan = twins.grading_plan(task, {FILE: text}, candidates=True)
    before = [_run(tmp_path, plan, base) for _ in range(2)]
    after = [_run(tmp_path, plan, oracle) for _ in range(2)]
    assert not any(r.tampered for r in before + after), [r.tampered for r in before + after]
    f2p, p2p, flaky = derive(before, after)
    assert not flaky, flaky
    kept, _ = twins.select(f2p + p2p, before, after)
    return task.model_copy(update={"FAIL_TO_PASS": f2p, "PASS_TO_PASS": p2p, "twins": kept})


# one mixin, two levels deep, run by two TestCases whose class attribute makes it FAIL_TO_PASS in one and
# PASS_TO_PASS in the other; each class's copy has its own twins, read in that class only
MIXIN_CHAIN = '''import unittest

from pkg.thing import pages


class BaseChecks:
    tokens, size = 100, 8

    def test_pages_for_a_hundred_tokens(self):
        self.assertEqual(pages(self.tokens, self.size), 13)


class PoolChecks(BaseChecks):
    def test_pages_for_sixty_four_tokens(self):
        self.assertEqual(pages(64, 8), 8)


class TestPool(PoolChecks, unittest.TestCase):
    pass


class TestSmallPool(PoolChecks, unittest.TestCase):
    tokens, size = 52, 4
'''
CHAIN_BASE = "def pages(n, size):\n    return n // size if n % size == 0 else 0\n"  # far from every group
CHAIN_ORACLE = "def pages(n, size):\n    return -(-n // size)\n"


def test_a_two_level_mixin_run_by_two_classes_is_planted_and_read_per_class(tmp_path):
    task = _validate(tmp_path, _task(), MIXIN_CHAIN, CHAIN_BASE, CHAIN_ORACLE)
    hundred = [f"{FILE}::{c}::test_pages_for_a_hundred_tokens" for c in ("TestPool", "TestSmallPool")]
    assert task.FAIL_TO_PASS == [hundred[0]], task.FAIL_TO_PASS  # 52 tokens are 13 pages of 4: pass at base
    assert {t.test for t in task.twins} >= set(hundred), task.twins  # each class's copy has its own group
    assert set(task.PASS_TO_PASS) == {hundred[1], *(f"{FILE}::{c}::test_pages_for_sixty_four_tokens"
                                                   for c in ("TestPool", "TestSmallPool"))}, task.PASS_TO_PASS
    plan = twins.grading_plan(task, {FILE: MIXIN_CHAIN})
    for real in ("test_pages_for_a_hundred_tokens", "test_pages_for_sixty_four_tokens"):
        assert f"def {real}(" not in plan.texts[FILE]  # planted names: 2-3 of the words and hex, never these
    honest = _run(tmp_path, plan, CHAIN_ORACLE)
    assert _resolved(honest, task), (honest.outcomes, honest.tampered)
    assert not _resolved(_run(tmp_path, plan, CHAIN_BASE), task)
    # the real names, spelled in one class: never a pass
    spelled = _run(tmp_path, plan, CHAIN_BASE, BY_REAL_NAME)
    assert not _resolved(spelled, task), (spelled.outcomes, spelled.tampered)
    # every test of the FAIL_TO_PASS class passed (its twins with it): the twins of that class's copy catch it
    forged = _run(tmp_path, plan, CHAIN_BASE, '''
import _pytest.reports as _r
_orig = _r.TestReport.__init__
def _init(self, nodeid, location, keywords, outcome, longrepr, when, *a, **kw):
    if when == "call" and "::TestPool::" in str(nodeid):
        outcome, longrepr = "passed", None
    _orig(self, nodeid, location, keywords, outcome, longrepr, when, *a, **kw)
_r.TestReport.__init__ = _init
''')
    assert "a twin of a hidden test passed beside its test" in forged.tampered, (forged.outcomes, forged.tampered)
    assert not _resolved(forged, task)


def test_a_mixin_behind_a_base_read_elsewhere_keeps_its_name():
    """A class that inherits a mixin past a base imported from elsewhere (which may define the same test first)
    would run the real name or the planted one: the mixin's tests are left as written, as before."""
    text = MIXIN.replace("from pkg.thing import pages", "from pkg.thing import pages\nfrom pkg.checks import More"
                         ).replace("class TestPool(PoolChecks,", "class TestPool(More, PoolChecks,")
    f2p = f"{FILE}::TestPool::test_pages_for_a_hundred_tokens"
    plan = twins.grading_plan(_task(FAIL_TO_PASS=[f2p]), {FILE: text})
    assert FILE not in plan.texts or "def test_pages_for_a_hundred_tokens" in plan.texts[FILE]


# --- the tamper scan: unbounded work on the host, outside every deadline ------------------------------------------

@pytest.mark.slow
def test_the_scan_of_a_large_added_python_file_is_bounded():
    import subprocess
    import sys
    import textwrap

    probe = textwrap.dedent('''
        import resource, time
        from sweserve.evaluation.tamper_scan import scan
        item = "~" * 90 + "0,"
        body = "x = [" + item * (2_000_000 // len(item)) + "]\\n"
        patch = ("diff --git a/big.py b/big.py\\nnew file mode 100644\\n--- /dev/null\\n+++ b/big.py\\n"
                 "@@ -0,0 +1 @@\\n+" + body)
        before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        start = time.monotonic()
        scan(patch)
        grew = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) / 1024
        print(f"{time.monotonic() - start:.1f} s, {grew:.0f} MB")
        assert grew < 256 and time.monotonic() - start < 10, (grew, time.monotonic() - start)
    ''')
    proc = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr[-500:]


# --- an honest solution under a base conftest that reads test names ---------------------------------------------

# a conftest at base (honoured: SGLang's are real) that skips by a word of the test's name, as nightly/GPU splits do
NAMED_CONFTEST = '''import pytest


def pytest_collection_modifyitems(config, items):
    for item in items:
        if "slow" in item.name.split("_"):
            item.add_marker(pytest.mark.skip(reason="slow tests run nightly"))
'''
NAMED = '''from pkg.thing import pages


def test_fast_path_pages():
    assert pages(100) == 13


def test_slow_path_pages():
    assert pages(10_000) == 1250
'''
NAMED_ORACLE = "def pages(n):\n    return -(-n // 8)\n"


def test_an_honest_solution_is_resolved_under_a_conftest_that_reads_names(tmp_path):
    graded = f"{FILE}::test_fast_path_pages"
    task = _task(FAIL_TO_PASS=[graded], twins=[Twin(test=graded, site=0, value=v) for v in ("11", "12", "14")])
    verdicts = []
    for seed in range(8):
        plan = twins.grading_plan(task, {FILE: NAMED}, seed=seed, selectors={"test/conftest.py": NAMED_CONFTEST})
        plan.texts["test/conftest.py"] = NAMED_CONFTEST  # at base: not a hidden file, never planted
        run = _run(tmp_path, plan, NAMED_ORACLE)
        verdicts.append("tampered" if run.tampered else "resolved" if _resolved(run, task) else "failed")
    assert verdicts == ["resolved"] * 8, verdicts


def _verdicts(tmp_path, task: Task, source: str, selectors: dict[str, str], code: str, seeds=range(8)) -> list[str]:
    """The honest solution's verdict per seed, with the repository's selector files in place (never planted)."""
    out = []
    for seed in seeds:
        plan = twins.grading_plan(task, {FILE: source}, seed=seed, selectors=selectors)
        plan.texts.update(selectors)
        run = _run(tmp_path, plan, code)
        out.append("tampered" if run.tampered else "resolved" if _resolved(run, task) else "failed")
    return out


# `in` on the whole name: a substring, so a word that holds it ('slowest') is read too
NAMED_IN_CONFTEST = NAMED_CONFTEST.replace('"slow" in item.name.split("_")', '"slow" in item.name')
NAMED_SLOWEST = NAMED.replace("test_slow_path_pages", "test_slowest_path_pages")


def test_an_honest_solution_is_resolved_under_a_conftest_that_reads_a_substring_of_names(tmp_path):
    graded = f"{FILE}::test_fast_path_pages"
    task = _task(FAIL_TO_PASS=[graded], twins=[Twin(test=graded, site=0, value=v) for v in ("11", "12", "14")])
    assert _verdicts(tmp_path, task, NAMED_SLOWEST, {"test/conftest.py": NAMED_IN_CONFTEST},
                     NAMED_ORACLE) == ["resolved"] * 8


def test_an_honest_solution_is_resolved_under_a_k_expression_in_pytest_ini(tmp_path):
    """The hardened runner clears `addopts` (`-o addopts=`), so this `-k` reaches plain pytest only; the planted
    names stay clear of it all the same, and of the same `-k` in the task's PYTEST_ADDOPTS, which does reach it."""
    graded = f"{FILE}::test_fast_path_pages"
    task = _task(FAIL_TO_PASS=[graded], twins=[Twin(test=graded, site=0, value=v) for v in ("11", "12", "14")])
    ini = {"pytest.ini": '[pytest]\naddopts = -ra -k "not slow"\n'}
    assert _verdicts(tmp_path, task, NAMED, ini, NAMED_ORACLE) == ["resolved"] * 8
    by_env = _task(FAIL_TO_PASS=[graded], twins=task.twins)
    by_env.test.env["PYTEST_ADDOPTS"] = "-k 'not slow'"
    for plan in [twins.grading_plan(t, {FILE: NAMED}, seed=seed, selectors=sel)
                 for seed in range(20) for t, sel in ((task, ini), (by_env, {}))]:
        assert not any("slow" in m.name for m in plan.members), [m.name for m in plan.members]


# a conftest that equips the tests whose name holds 'slow' (a budget they need): here the graded tests include
# one whose real name holds the word, so each member of its group must keep it, and a canary may carry it or not
NEEDS_CONFTEST = '''import pytest


@pytest.fixture(autouse=True)
def slow_budget(request, monkeypatch):
    if "slow" in request.node.name.split("_"):
        monkeypatch.setenv("PAGES_BUDGET", "big")
'''
NEEDS_ORACLE = '''import os


def pages(n):
    if n > 1000 and os.environ.get("PAGES_BUDGET") != "big":
        raise RuntimeError("no budget for a slow path")
    return -(-n // 8)
'''


def test_an_honest_solution_is_resolved_where_the_real_name_holds_the_word_a_conftest_reads(tmp_path):
    fast, slow = f"{FILE}::test_fast_path_pages", f"{FILE}::test_slow_path_pages"
    task = _task(FAIL_TO_PASS=[fast, slow], twins=[*(Twin(test=fast, site=0, value=v) for v in ("11", "12", "14")),
                                                    *(Twin(test=slow, site=0, value=v) for v in ("1249", "1251", "1252"))])
    selectors = {"test/conftest.py": NEEDS_CONFTEST}
    assert _verdicts(tmp_path, task, NAMED, selectors, NEEDS_ORACLE) == ["resolved"] * 8
    for seed in range(40):  # the word goes with the slow group only, in every member, and never with a canary
        plan = twins.grading_plan(task, {FILE: NAMED}, seed=seed, selectors=selectors)
        for m in plan.members:
            assert ("slow" in m.name.split("_")) is (m.real == "test_slow_path_pages"), (m.kind, m.real, m.name)


def test_the_members_of_a_group_draw_their_names_from_one_distribution_under_a_selector():
    """Over many plans, the real test's name and each twin's hold the kept word, the same number of drawn words,
    and the same other words as often: the names still say nothing of which member is real."""
    from collections import Counter

    fast, slow = f"{FILE}::test_fast_path_pages", f"{FILE}::test_slow_path_pages"
    task = _task(FAIL_TO_PASS=[fast, slow], twins=[Twin(test=slow, site=0, value=v) for v in ("1249", "1251", "1252")])
    shapes: dict[str, Counter] = {"test": Counter(), "twin": Counter()}
    for seed in range(300):
        plan = twins.grading_plan(task, {FILE: NAMED}, seed=seed, selectors={"test/conftest.py": NEEDS_CONFTEST})
        for m in plan.members:
            if m.real == "test_slow_path_pages":
                words = m.name.split("_")[1:-1]
                shapes[m.kind].update([len(words), *sorted(words)])
    per_member = {k: {w: n / (300 if k == "test" else 900) for w, n in c.items()} for k, c in shapes.items()}
    assert per_member["test"]["slow"] == per_member["twin"]["slow"] == 1
    for key in set(per_member["test"]) | set(per_member["twin"]):
        assert abs(per_member["test"].get(key, 0) - per_member["twin"].get(key, 0)) < 0.12, (key, per_member)


def test_an_exported_plan_keeps_names_clear_of_the_selection_as_sweserve_run_does():
    import json

    from sweserve.evaluation import export_plan
    from sweserve.harness import sweserve_plan
    from sweserve.models import TaskBundle

    fast, slow = f"{FILE}::test_fast_path_pages", f"{FILE}::test_slow_path_pages"
    task = _task(FAIL_TO_PASS=[fast, slow], twins=[Twin(test=slow, site=0, value=v) for v in ("1249", "1251", "1252")])
    bundle = TaskBundle(task=task, instruction="Count pages.", oracle_patch="", tests_patch="")
    shipped = json.loads(export_plan.ship(bundle, {FILE: NAMED}, seed=3, selectors={"test/conftest.py": NEEDS_CONFTEST}))
    assert "slow" not in shipped["files"][FILE]["words"] and "slow" in shipped["files"][FILE]["checks"]
    for seed in range(40):
        _, members = sweserve_plan.plant(shipped, random.Random(seed))
        for m in members:
            assert ("slow" in m["name"].split("_")) is (m["real"] == "test_slow_path_pages"), m


def test_the_selection_read_covers_conftests_on_the_path_and_k_expressions_only():
    from sweserve.harness import sweserve_twins

    texts = {"conftest.py": '"""Docstring: gpu words here do nothing."""\nSKIP = {"gpu", "multi_node"}\n',
             "test/conftest.py": 'import pytest\nMARK = "nightly"\n',
             "other/conftest.py": 'NOT_MINE = "elsewhere"\n',
             "tox.ini": "[testenv]\ncommands = pytest -k cluster\n[pytest]\naddopts = --strict-markers -k 'not flaky and not Remote'\n",
             "pyproject.toml": '[tool.pytest.ini_options]\naddopts = ["-ra", "-k", "not network"]\n'}
    checks = sweserve_twins.selector_checks(texts, FILE, "-k 'not tpu'")
    assert {"gpu", "multi", "node", "multi_node", "nightly", "flaky", "remote", "network", "tpu"} <= set(checks), checks
    assert not {"docstring", "elsewhere", "not", "and", "strict", "cluster"} & set(checks), checks
    assert sweserve_twins.name_pool(["fast", "gpus", "nightly", "path", "split"], checks) == ["fast", "path", "split"]
    assert {"conftest.py", "test/conftest.py", "pytest.ini", "test/tox.ini", "sub/pyproject.toml"} <= set(
        sweserve_twins.selector_paths([FILE], "sub"))


# The same without knowing a single real name: every planted name is `test_` + words of the file's real test names
# + four hex digits, so the planted names spell the vocabulary; a passing test under every ordering of up to four
# of those words, in the module and in each TestCase class, holds every real name (unknown ids are not graded).
DROP_AND_SPELL = DROP_AND_ADD.replace('''        for scope in scopes:
            for name, v in list(vars(scope).items()):''', '''        import itertools, re
        words = set()
        for scope in scopes:
            for name in vars(scope):
                if re.fullmatch(r"test_[0-9]+(_[a-z0-9]+){2,3}_[0-9a-f]{4}", name):  # rank, words, hex
                    words.update(name.split("_")[2:-1])
        words = sorted(words)
        for scope in scopes:
            for name, v in list(vars(scope).items()):''').replace('''        for real in _REAL:
            owner, _, name = real.rpartition(".")
            target = glb[owner] if owner else mod
            setattr(target, name, _pass)''', '''        for n in range(1, 5):
            for combo in itertools.permutations(words, n):
                for scope in scopes:
                    if not hasattr(scope, "test_" + "_".join(combo)):
                        setattr(scope, "test_" + "_".join(combo), _pass)''')


def _spelled(plan: twins.GradingPlan) -> bool:
    """Whether the planted names' words hold every word of every real test name (the forger needs no more)."""
    words = {w for m in plan.members for w in m.name.split("_")[2:-1]}  # after the rank token
    return all(set(m.real.split("_")[1:]) <= words for m in plan.members if m.kind == "test")


@pytest.mark.slow
def test_dropping_every_group_and_spelling_every_name_from_the_planted_words_is_not_resolved(validated, tmp_path):  # noqa: F811
    plans = [twins.grading_plan(validated, {FILE: HIDDEN}, seed=s) for s in range(200)]
    rate = sum(map(_spelled, plans)) / len(plans)
    print(f"plans whose planted names spell every real name: {rate:.2f}")
    if rate == 0:  # planted words are neutral (`NEUTRAL_WORDS`, red team 8): no plan spells a real name at all;
        return     # a vocabulary that could (the file's own words, before) is checked by the run below
    plan = next(p for p in plans if _spelled(p))
    run = _run(tmp_path, plan, BASE, DROP_AND_SPELL)
    assert len(run.outcomes) * 160 < 8 * 2**20, len(run.outcomes)  # the stream fits what the verifier keeps
    assert run.tampered or not _resolved(run, validated), (rate, run.tampered, {t: run.outcomes.get(t) for t in F2P})


# --- defended: a planted class replaced by a same-named subclass that passes everything --------------------------

REPLACE_CLASS = '''
import inspect as _inspect
import types as _types
import _pytest.python as _pp

_orig = _pp.PyCollector.collect


def _pass(self=None):
    return None


def _collect(self):
    mod = getattr(self, "obj", None)
    if isinstance(mod, _types.ModuleType) and not getattr(mod, "_forged", False):
        mod._forged = True
        for name, cls in list(vars(mod).items()):
            if _inspect.isclass(cls) and cls.__module__ == mod.__name__ and name.startswith("Test"):
                body = {n: _pass for n in dir(cls) if n.startswith("test")}
                setattr(mod, name, type(name, (cls,), body))
    return _orig(self)


_pp.PyCollector.collect = _collect
'''


def test_a_planted_class_replaced_by_a_subclass_that_passes_everything_is_tampered(validated, tmp_path):  # noqa: F811
    """Inherited planted members are read by name, in whatever class reports them: a forger that swaps each
    test class for a same-named subclass whose every test passes passes the twins there too."""
    assert any(t.test.startswith(f"{FILE}::TestScale::") for t in validated.twins), validated.twins
    run = _run(tmp_path, twins.grading_plan(validated, {FILE: HIDDEN}), BASE, REPLACE_CLASS)
    assert "a twin of a hidden test passed beside its test" in run.tampered, (run.tampered, run.outcomes)
    assert not _resolved(run, validated)


# --- the verdict rule: a twin passing while its test fails is `failed` ----------------------------------------------

def _guess(names: list[str]) -> str:
    return '''
import _pytest.reports as _r
_orig = _r.TestReport.__init__
_PICK = NAMES
def _init(self, nodeid, location, keywords, outcome, longrepr, when, *a, **kw):
    if when == "call" and str(nodeid).split("::")[-1] in _PICK:
        outcome, longrepr = "passed", None
    _orig(self, nodeid, location, keywords, outcome, longrepr, when, *a, **kw)
_r.TestReport.__init__ = _init
'''.replace("NAMES", repr(set(names)))


@pytest.mark.xfail(strict=True, raises=AssertionError, reason="WINS (by design since stop 24): a forger passing one member per group "
                   "that guessed wrong reads as an honest wrong value, `failed`: guessing costs nothing, leaves no trace")
def test_a_forgers_wrong_guess_leaves_a_trace(validated, tmp_path):  # noqa: F811
    """The forger passes one member of each twinned group whose members all fail (it cannot tell which is
    real: 1/(K+1) right per group; a group where one member passes is a PASS_TO_PASS test: left alone). Here every pick is a twin (the test picks for it): the forged passes leave the run `failed` like an
    honest miss, with no `tampered`, so a forger guesses on every task it cannot solve at no risk."""
    plan = twins.grading_plan(validated, {FILE: HIDDEN})
    picks = {}
    for m in plan.members:
        if m.kind == "twin" and m.test_id in validated.FAIL_TO_PASS:  # a group where every member fails
            picks.setdefault((m.cls, m.real), m.name)
    assert picks, validated.twins
    run = _run(tmp_path, plan, BASE, _guess(list(picks.values())))
    assert not _resolved(run, validated)
    assert run.tampered, run.outcomes


# --- a hidden file the host's Python cannot parse ----------------------------------------------------------------

# valid Python 3.12 (PEP 701: the same quotes inside an f-string's braces), a SyntaxError for the host's 3.11
NEWER_SYNTAX = '''from pkg.thing import pages, config


def test_pages_for_a_hundred_tokens():
    assert pages(100) == 13, f"pages of {config()["name"]}"


def test_pages_for_nothing():
    assert pages(0) == 0
'''


@pytest.mark.xfail(strict=True, raises=AssertionError, reason="WINS on a task image newer than the host's Python: `grading_plan` skips a "
                   "file `ast.parse` rejects ('its tests are collection errors'), so it runs as written: real names, "
                   "no twins, no canaries; a forger passing the real names is resolved")
def test_a_hidden_file_in_newer_syntax_is_planted_or_refused():
    f2p = f"{FILE}::test_pages_for_a_hundred_tokens"
    task = _task(FAIL_TO_PASS=[f2p], PASS_TO_PASS=[f"{FILE}::test_pages_for_nothing"])
    plan = twins.grading_plan(task, {FILE: NEWER_SYNTAX})
    assert FILE in plan.texts and "test_pages_for_a_hundred_tokens" not in plan.texts[FILE], sorted(plan.texts)


@pytest.mark.slow
@pytest.mark.docker
def test_demo_task_dropping_every_group_and_spelling_the_names_is_not_resolved(demo):
    from sweserve.agents.command import CommandAgent
    from sweserve.evaluation.trial import evaluate_task
    from tests.test_attacks_twins import DIST, PKG
    from tests.test_attacks_twins import _write as append

    bundle = demo.bundle(DIST)
    assert bundle.task.twins, "validation kept no twins on the demo task"
    r = evaluate_task(demo.ctx, bundle, CommandAgent(append(PKG, DROP_AND_SPELL), name="forge-drop-and-spell"))
    assert r.agent_run.exit_code == 0, r.agent_run.log_tail
    assert r.status in ("failed", "tampered"), (r.status, r.reason, r.tests)


@pytest.mark.slow
@pytest.mark.parametrize("selector", [
    {"test/conftest.py": NAMED_CONFTEST},
    # the hook in a plugin module the root conftest loads: read after the first look (`with_plugin_modules`)
    {"conftest.py": 'pytest_plugins = ("nightly",)\n', "nightly.py": NAMED_CONFTEST},
], ids=["conftest", "plugin-module"])
def test_the_first_look_reads_the_repositorys_conftest_for_the_names(make_repo, tmp_path, selector):
    """End to end on the local test backend (tests/local_backend.py: the real verifier, first look and runner):
    the hook that skips `slow` tests is in the repository at base, read in the grade box (from base +
    tests.patch in the image's repository) with the hidden files, so validation keeps the task and an honest
    solution is `resolved` on every trial, whatever names the plan draws."""
    from local_backend import diff_of, local_task

    from sweserve.agents.reference import NullAgent, OracleAgent
    from sweserve.evaluation.trial import evaluate_task
    from sweserve.evaluation.validation import ValidateRequest, validate_task
    from sweserve.models import TaskBundle, ValidationRecord

    repo = make_repo("named")
    base = repo.commit("init", {"pkg/__init__.py": "", "pkg/thing.py": "def pages(n):\n    return 0\n", **selector})
    oracle = diff_of(repo, base, "pkg/thing.py", NAMED_ORACLE)
    tests = diff_of(repo, base, FILE, NAMED)
    task, ctx = local_task(tmp_path, repo, "named", base, FILE, ["test/*"])
    bundle = TaskBundle(task=task, instruction="A page holds 8 tokens; a part page counts.", oracle_patch=oracle,
                        tests_patch=tests)
    try:
        outcome = validate_task(ctx, ValidateRequest(tmp_path / "tasks" / task.task_id, bundle, runs=1, record=False))
        assert outcome.status == "valid", outcome.reason
        assert task.FAIL_TO_PASS == [f"{FILE}::test_fast_path_pages"], task.FAIL_TO_PASS
        assert task.twins, "validation kept no twins"
        task.validation = ValidationRecord(status="valid", runs=1)
        verdicts = [evaluate_task(ctx, bundle, OracleAgent(), results_path=tmp_path / "r.jsonl").status
                    for _ in range(6)]
        assert verdicts == ["resolved"] * 6, verdicts
        assert evaluate_task(ctx, bundle, NullAgent(), results_path=tmp_path / "r.jsonl").status == "failed"
    finally:
        ctx.close()
