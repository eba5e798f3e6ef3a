"""A third red team's attacks on the newest grading defences: mixin planting (`twins.collectors`, `_mro`,
`_aliases`, `_shared_group`, `Member.alias`/`unread`), selector-aware names (`sweserve_twins.selector_checks`,
`draw_name`) and canaries in skip-decorated classes (`sweserve_twins.keeps_methods`).

Each test asserts the defence holds: it FAILS when the attack wins. Attacks that win today are marked
`xfail(strict=True)` with what they do. The forger is code the hidden tests import (the package `__init__`),
run by the real boot script through `tests.test_attacks_twins._run`, on a repository it has not fixed.

Defended since (the fixes that followed this red team):

- forged failures under a shadow id (`_read`, and the in-box `sweserve_plan.read`): the forger passed every
  test that calls the repository, and for each one also sent a *failed* report under another id that the
  reader mapped to the same planted member: the planted id with parameters appended (`name[zz]`: `_base_id`
  strips them, so a twin's outcome was the worst of its pass and this failure, while the test's failure went to
  a parametrized real id no one grades), or a class that does not exist (`by_name`'s "a planted member a
  subclass inherits" fallback). Every twin read `failed`, every graded test `passed`: `resolved`, no trace, on
  any twinned task. Now a must-fail member (twin, margin, must-fail canary) passed under any id is passed.
- (task side, not the candidate's) `_mro` recomputed every base's order without memo: a hidden file with a
  chain of classes each inheriting the two before it took exponential time in `grading_plan`. Memoized.
- honest `tampered` from a real name left reachable in the graded class: a class that overrides a mixin's
  test (or inherits a same-named test from a second mixin later in its MRO) kept the mixin's definition under
  the real name when the only other class collecting it was not graded (skipped without an accelerator), and
  the oracle's run reported the real name. Now every definition of a graded test's name in the graded class's
  MRO is planted (`twins._reachable`).

- honest fails from name-based selection in a module a conftest loads (`pytest_plugins`, or a configuration's
  `-p`): planted names drew the word, canaries were skipped beside passing neighbours (`tampered`), graded tests
  skipped (`failed`). The plugin modules the selector files load are read now, from base + tests.patch, in the
  grade box after its first look and in the exporter's clone (`sweserve_twins.with_plugins`). (A hidden file that
  skips its own tests by a word of their name, an autouse fixture reading `request.node.name` or a `setUp`
  reading `_testMethodName`, is read too: `sweserve_twins.own_checks`.)

Defended: a forger passing only the classes whose twins are unread (guard counts those tests as odds 1),
outcomes reported under the mixin's own class, a forger using the words a conftest reads to find the groups,
an honest solution beside a skip-decorated heir of a mixin and beside a `__test__ = False` base class, and
odd ids in both readers.
"""

from __future__ import annotations

import json
import random

import pytest

from sweserve.evaluation import guard, twins
from sweserve.models import Task, Twin
from tests.test_attacks_redteam2 import (
    CHAIN_BASE,
    CHAIN_ORACLE,
    MIXIN,
    MIXIN_BASE,
    MIXIN_CHAIN,
    NAMED,
    NAMED_CONFTEST,
    NAMED_ORACLE,
    NEEDS_CONFTEST,
    NEEDS_ORACLE,
    _honest_outcomes,
    _validate,
)
from tests.test_attacks_twins import BASE, FILE, HIDDEN, ORACLE, _resolved, _run, _task


def _verdict(run, task: Task) -> str:
    return "tampered" if run.tampered else "resolved" if _resolved(run, task) else "failed"


# --- forged failures under a shadow id ---------------------------------------------------------------------------

# Every test whose function calls the repository's package passes (its body is not run), and for each a failed
# report goes out first under SHADOW_ID: read as the same planted member (a twin then reads its worst outcome,
# failed), but as another real id than the graded one (a test's failure lands there). Canaries run as written.
SHADOW = '''
import types as _types
import _pytest.python as _pp
import _pytest.reports as _rep
import _pytest.unittest as _pu

_TOP = __name__.split(".")[0]


def _codes(code):
    yield code
    for c in code.co_consts:
        if isinstance(c, _types.CodeType):
            yield from _codes(c)


def _calls_repo(fn):
    fn = getattr(fn, "__func__", fn)
    code = getattr(fn, "__code__", None)
    if code is None:
        return False
    glb = getattr(fn, "__globals__", {})
    names = {n for c in _codes(code) for n in c.co_names}
    return any(str(getattr(glb.get(n), "__module__", "") or "").startswith(_TOP) for n in names)


def _wrap(orig):
    def runtest(self):
        if not _calls_repo(getattr(self, "obj", None)):
            return orig(self)
        file, *rest = self.nodeid.split("::")
        fake = _rep.TestReport(nodeid=SHADOW_ID, location=self.location, keywords={}, outcome="failed",
                               longrepr="AssertionError", when="call")
        self.ihook.pytest_runtest_logreport(report=fake)
        return None
    return runtest


_pp.Function.runtest = _wrap(_pp.Function.runtest)
_pu.TestCaseFunction.runtest = _wrap(_pu.TestCaseFunction.runtest)
'''
BY_PARAMS = 'self.nodeid + "[zz]"'
BY_CLASS = '"::".join([file, "ZzShadow", rest[-1]])'

PLAIN_F2P = [f"{FILE}::test_uneven_split_covers_everything", f"{FILE}::test_mean_is_not_shifted",
             f"{FILE}::TestScale::test_mean_of_one"]


def _plain_task() -> Task:
    """The shards task as validation would leave it, twins written out (numbers off the real 2.5 and 7.5)."""
    return _task(FAIL_TO_PASS=PLAIN_F2P,
                 PASS_TO_PASS=[f"{FILE}::test_even_split", f"{FILE}::TestScale::test_scale_doubles"],
                 twins=[Twin(test=PLAIN_F2P[1], site=0, value=v) for v in ("2.3", "2.4", "2.6")]
                 + [Twin(test=PLAIN_F2P[2], site=0, value=v) for v in ("7.3", "7.4", "7.6")])


HUNDRED = [f"{FILE}::{c}::test_pages_for_a_hundred_tokens" for c in ("TestPool", "TestSmallPool")]
SIXTY = [f"{FILE}::{c}::test_pages_for_sixty_four_tokens" for c in ("TestPool", "TestSmallPool")]


def _chain_task() -> Task:
    return _task(FAIL_TO_PASS=[HUNDRED[0]], PASS_TO_PASS=[HUNDRED[1], *SIXTY],
                 twins=[Twin(test=t, site=0, value=v) for t in HUNDRED for v in ("11", "12", "14")])


@pytest.mark.parametrize("case, shadow", [
    pytest.param("plain", BY_PARAMS, id="plain-by-params"),  # a must-fail member passed under any id is passed
    pytest.param("plain", BY_CLASS, id="plain-by-class"),
    pytest.param("mixin", BY_PARAMS, id="mixin-by-params"),
    pytest.param("mixin", BY_CLASS, id="mixin-by-class-defended"),
])
def test_failures_forged_under_a_shadow_id_do_not_hide_passing_twins(tmp_path, case, shadow):
    task, source, base = (_plain_task(), HIDDEN, BASE) if case == "plain" else (_chain_task(), MIXIN_CHAIN, CHAIN_BASE)
    plan = twins.grading_plan(task, {FILE: source}, seed=1)
    assert any(m.kind == "twin" and not m.unread for m in plan.members)
    assert not _resolved(_run(tmp_path, plan, base), task)  # unsolved: the graded tests fail
    run = _run(tmp_path, plan, base, SHADOW.replace("SHADOW_ID", shadow))
    assert run.tampered or not _resolved(run, task), (run.outcomes, run.tampered)


def test_the_in_box_reader_does_not_take_a_shadow_failure_for_a_twins_outcome():
    from sweserve.evaluation import export_plan
    from sweserve.harness import sweserve_plan
    from sweserve.models import TaskBundle

    task = _plain_task()
    bundle = TaskBundle(task=task, instruction="Fix the shards.", oracle_patch="", tests_patch="")
    shipped = json.loads(export_plan.ship(bundle, {FILE: HIDDEN}, seed=3))
    _, members = sweserve_plan.plant(shipped, random.Random(5))
    outcomes = {}
    for m in members:
        if m.get("unread"):
            continue
        planted = "::".join([m["file"], *([m["cls"]] if m["cls"] else []), m["name"]])
        outcomes[planted] = "passed" if m["kind"] != "canary" or m["must_pass"] else "failed"
        if m["kind"] != "canary":
            outcomes[planted + "[zz]"] = "failed"
    real, problems = sweserve_plan.read(members, outcomes, 1)
    assert problems or not all(real.get(t) == "passed" for t in task.FAIL_TO_PASS), (real, problems)


# --- honest tampered: a real name left reachable through the class's MRO -------------------------------------------

# PoolChecks' test is collected by TestGpuPool only (skipped: no accelerator, so never graded); TestPool overrides it
OVERRIDE = '''import unittest

from pkg.thing import pages


class PoolChecks:
    def test_pages_for_a_hundred_tokens(self):
        self.assertEqual(pages(400, 4), 100)


@unittest.skipIf(True, "needs an accelerator")
class TestGpuPool(PoolChecks, unittest.TestCase):
    pass


class TestPool(PoolChecks, unittest.TestCase):
    def test_pages_for_a_hundred_tokens(self):
        self.assertEqual(pages(100), 13)
'''
# TestPool runs PoolChecks' test; CacheChecks' same-named one (later in its MRO) is collected by a skipped class only
SHADOWED = '''import unittest

from pkg.thing import pages


class PoolChecks:
    def test_pages_for_a_hundred_tokens(self):
        self.assertEqual(pages(100), 13)


class CacheChecks:
    def test_pages_for_a_hundred_tokens(self):
        self.assertEqual(pages(400, 4), 100)


@unittest.skipIf(True, "needs an accelerator")
class TestGpuCache(CacheChecks, unittest.TestCase):
    pass


class TestPool(PoolChecks, CacheChecks, unittest.TestCase):
    pass
'''
PAGES_BASE = "def pages(n, size=8):\n    return n // size\n"
PAGES_ORACLE = "def pages(n, size=8):\n    return -(-n // size)\n"


@pytest.mark.parametrize("source", [
    pytest.param(OVERRIDE, id="class-overrides-the-mixin"),
    pytest.param(SHADOWED, id="second-mixin-in-the-mro"),
])
def test_an_honest_solution_is_resolved_where_a_same_named_definition_stays_in_the_mro(tmp_path, source):
    task = _validate(tmp_path, _task(), source, PAGES_BASE, PAGES_ORACLE)
    assert task.FAIL_TO_PASS == [f"{FILE}::TestPool::test_pages_for_a_hundred_tokens"], task.FAIL_TO_PASS
    verdicts = [_verdict(_run(tmp_path, twins.grading_plan(task, {FILE: source}, seed=s), PAGES_ORACLE), task)
                for s in range(3)]
    assert verdicts == ["resolved"] * 3, verdicts


# --- honest: a base class that pytest does not collect itself ---------------------------------------------------

NOT_COLLECTED = '''import unittest

from pkg.thing import pages


def test_pages_for_nothing():
    assert pages(0) == 0


class BaseChecks(unittest.TestCase):
    __test__ = False

    def test_pages_for_a_hundred_tokens(self):
        self.assertEqual(pages(100), 13)


class TestPool(BaseChecks):
    __test__ = True
'''


def test_an_honest_solution_is_resolved_beside_a_base_class_marked_not_a_test(tmp_path):
    """`__test__ = False` keeps pytest off BaseChecks: its planted canaries run in TestPool only, read there
    through the name (a subclass inherits them)."""
    f2p = f"{FILE}::TestPool::test_pages_for_a_hundred_tokens"
    task = _task(FAIL_TO_PASS=[f2p], PASS_TO_PASS=[f"{FILE}::test_pages_for_nothing"],
                 twins=[Twin(test=f2p, site=0, value=v) for v in ("11", "12", "14")])
    verdicts = []
    for seed in range(4):
        plan = twins.grading_plan(task, {FILE: NOT_COLLECTED}, seed=seed)
        verdicts.append(_verdict(_run(tmp_path, plan, PAGES_ORACLE), task))
    assert verdicts == ["resolved"] * 4, verdicts


# --- honest: a mixin whose other heir is skip-decorated ---------------------------------------------------------

SKIPPED_HEIR = MIXIN + '''

@unittest.skipIf(True, "needs an accelerator")
class TestGpuPool(PoolChecks, unittest.TestCase):
    pass
'''


def test_an_honest_solution_is_resolved_beside_a_skipped_heir_of_the_mixin(tmp_path):
    """The mixin's canaries are read in each heir; in the skipped one they are skipped with their neighbours."""
    f2p, p2p = f"{FILE}::TestPool::test_pages_for_a_hundred_tokens", f"{FILE}::TestPool::test_pages_for_nothing"
    task = _task(FAIL_TO_PASS=[f2p], PASS_TO_PASS=[p2p], twins=[Twin(test=f2p, site=0, value=v) for v in ("11", "12", "14")])
    verdicts, homes = [], set()
    for seed in range(4):
        plan = twins.grading_plan(task, {FILE: SKIPPED_HEIR}, seed=seed)
        homes |= {m.cls for m in plan.members if m.kind == "canary" and not m.unread}
        verdicts.append(_verdict(_run(tmp_path, plan, PAGES_ORACLE), task))
    assert "TestGpuPool" in homes, homes
    assert verdicts == ["resolved"] * 4, verdicts
    assert not _resolved(_run(tmp_path, twins.grading_plan(task, {FILE: SKIPPED_HEIR}), MIXIN_BASE), task)


# --- forging only the class whose twins are unread ----------------------------------------------------------------

# the P2P class first: its group is the one planted; the FAIL_TO_PASS class recorded another, so its twins are unread
UNREAD_FIRST = MIXIN_CHAIN.replace('''class TestPool(PoolChecks, unittest.TestCase):
    pass


class TestSmallPool(PoolChecks, unittest.TestCase):
    tokens, size = 52, 4
''', '''class TestSmallPool(PoolChecks, unittest.TestCase):
    tokens, size = 52, 4


class TestPool(PoolChecks, unittest.TestCase):
    pass
''')
PASS_TESTPOOL = '''
import _pytest.reports as _r
_orig = _r.TestReport.__init__
def _init(self, nodeid, location, keywords, outcome, longrepr, when, *a, **kw):
    if when == "call" and "::TestPool::" in str(nodeid):
        outcome, longrepr = "passed", None
    _orig(self, nodeid, location, keywords, outcome, longrepr, when, *a, **kw)
_r.TestReport.__init__ = _init
'''


def test_forging_the_class_whose_twins_are_unread_is_counted_as_unguarded(tmp_path):
    """Passing every test of the class whose recorded group is not the planted one goes unseen (its twins are
    unread, the file's canaries only must-pass): the readiness guard gives that test odds 1, so a task resting
    on it is not ready."""
    assert UNREAD_FIRST != MIXIN_CHAIN
    task = _task(FAIL_TO_PASS=[HUNDRED[0]], PASS_TO_PASS=[HUNDRED[1], *SIXTY],
                 twins=[Twin(test=HUNDRED[1], site=0, value=v) for v in ("11", "12", "14")]
                 + [Twin(test=HUNDRED[0], site=0, value=v) for v in ("11", "12", "15")])
    plan = twins.grading_plan(task, {FILE: UNREAD_FIRST}, seed=1)
    assert all(m.unread for m in plan.members if m.kind == "twin" and m.cls == "TestPool")
    assert _verdict(_run(tmp_path, plan, CHAIN_ORACLE), task) == "resolved"
    run = _run(tmp_path, plan, CHAIN_BASE, PASS_TESTPOOL)
    odds = guard.test_odds(task, {FILE: UNREAD_FIRST}, {}, "")
    assert run.tampered or not _resolved(run, task) or odds[HUNDRED[0]] == 1.0, (run.outcomes, odds)


# --- outcomes under the mixin's own class -------------------------------------------------------------------------

def test_outcomes_reported_under_the_mixins_own_class_forge_nothing():
    """The mixin's copy is unread: a pass there is nothing; the real name under the mixin or its heir is a
    forged name; the heir's own planted members still read their failures."""
    task = _chain_task()
    plan = twins.grading_plan(task, {FILE: MIXIN_CHAIN}, seed=2)
    outcomes = _honest_outcomes(plan, real_passes=False)
    outcomes = {k: v for k, v in outcomes.items() if "::BaseChecks::" not in k and "::PoolChecks::" not in k}
    for m in plan.members:
        if m.kind in ("test", "twin") and m.unread and m.cls in ("BaseChecks", "PoolChecks"):
            outcomes[f"{FILE}::{m.cls}::{m.name}"] = "passed"
    reading = plan.read(outcomes, exit_status=1)
    assert reading.outcomes.get(HUNDRED[0]) != "passed", reading.outcomes
    forged = plan.read({**outcomes, f"{FILE}::BaseChecks::test_pages_for_a_hundred_tokens": "passed",
                        HUNDRED[0]: "passed"}, exit_status=1)
    assert forged.problems or forged.outcomes.get(HUNDRED[0]) != "passed", (forged.outcomes, forged.problems)


# --- selector words: the forger reads them too --------------------------------------------------------------------

PASS_WORD = '''
import _pytest.reports as _r
_orig = _r.TestReport.__init__
def _init(self, nodeid, location, keywords, outcome, longrepr, when, *a, **kw):
    if when == "call" and "slow" in str(nodeid).split("::")[-1].split("_"):
        outcome, longrepr = "passed", None
    _orig(self, nodeid, location, keywords, outcome, longrepr, when, *a, **kw)
_r.TestReport.__init__ = _init
'''


def test_the_words_a_conftest_reads_find_a_group_not_its_real_member(tmp_path):
    """Every member of the slow test's group carries 'slow' and no canary does: the forger finds the group (as
    the bodies already told it), passes all of it, and its twins pass beside it."""
    fast, slow = f"{FILE}::test_fast_path_pages", f"{FILE}::test_slow_path_pages"
    task = _task(FAIL_TO_PASS=[slow], PASS_TO_PASS=[fast],
                 twins=[Twin(test=slow, site=0, value=v) for v in ("1249", "1251", "1252")])
    selectors = {"test/conftest.py": NEEDS_CONFTEST}
    base = NEEDS_ORACLE.replace("return -(-n // 8)", "return -(-n // 8) if n < 1000 else 0")
    for seed in range(3):
        plan = twins.grading_plan(task, {FILE: NAMED}, seed=seed, selectors=selectors)
        plan.texts.update(selectors)
        assert _verdict(_run(tmp_path, plan, NEEDS_ORACLE), task) == "resolved"
        run = _run(tmp_path, plan, base, PASS_WORD)
        assert "a twin of a hidden test passed beside its test" in run.tampered, (run.outcomes, run.tampered)


# --- selectors the first look does not read: a hook in a module the conftest imports --------------------------------

def test_an_honest_solution_is_resolved_under_a_selector_in_a_plugin_module(tmp_path):
    """The root conftest loads `nightly` (`pytest_plugins`), whose hook skips names with 'slow', a word the
    planted names are drawn from. The first look's selector files name the conftest only; the plugin modules
    they load are read after it (`with_plugins`: `verifier.with_plugin_modules` in the box, the exporter's clone),
    so the names keep clear of the hook's words. Before: graded tests skipped (failed) and canaries skipped beside
    passing neighbours (tampered) on most draws."""
    graded = f"{FILE}::test_fast_path_pages"
    task = _task(FAIL_TO_PASS=[graded], twins=[Twin(test=graded, site=0, value=v) for v in ("11", "12", "14")])
    repo = {"conftest.py": 'pytest_plugins = ["nightly"]\n', "nightly.py": NAMED_CONFTEST}
    from sweserve.harness import sweserve_twins

    def read_many(paths):
        return {p: repo[p] for p in paths if p in repo}

    first = read_many(sweserve_twins.selector_paths([FILE]))  # what the first look reads
    assert set(first) == {"conftest.py"}
    read = sweserve_twins.with_plugins(first, [FILE], "", read_many)
    assert set(read) == {"conftest.py", "nightly.py"}
    verdicts = []
    for seed in range(8):
        plan = twins.grading_plan(task, {FILE: NAMED}, seed=seed, selectors=read)
        plan.texts.update(repo)
        verdicts.append(_verdict(_run(tmp_path, plan, NAMED_ORACLE), task))
    assert verdicts == ["resolved"] * 8, verdicts


def test_plugin_modules_are_found_where_pytest_imports_them_and_followed_a_bounded_depth():
    from sweserve.harness import sweserve_twins as c

    assert c.plugin_names("conftest.py", 'pytest_plugins = "a.b"\n') == ["a.b"]
    assert c.plugin_names("x/conftest.py", 'pytest_plugins = ["a", ("no",)]\npytest_plugins += ("c",)\n') == ["a", "c"]
    assert c.plugin_names("pytest.ini", "[pytest]\naddopts = -ra -p sel.hooks -p no:cacheprovider -pfoo\n") == [
        "sel.hooks", "foo"]
    assert c.plugin_names("setup.cfg", "[metadata]\nname = -p nothing\n") == []  # outside the pytest section
    assert c.plugin_names("conftest.py", "pytest_plugins = [\n") == []  # does not parse: nothing to follow
    # a dotted name under the runner's folder (sglang-jax runs from python/), a module or a package
    paths = c.plugin_paths({"python/conftest.py": 'pytest_plugins = ["sgl.testing.sel"]\n'},
                           ["python/sgl/test/t.py"], "python")
    assert "python/sgl/testing/sel.py" in paths and "python/sgl/testing/sel/__init__.py" in paths
    # followed: a plugin loading a plugin; each path asked for once; a cycle ends; the depth is bounded
    repo = {"conftest.py": 'pytest_plugins = ["p1"]\n', "p1.py": 'pytest_plugins = ["p2"]\nW = "alpha"\n',
            "p2.py": 'pytest_plugins = ["p1", "p3"]\n', "p3.py": 'pytest_plugins = ["p4"]\n', "p4.py": "W = 'deep'\n"}
    asked: list[str] = []

    def read_many(paths):
        asked.extend(paths)
        return {p: repo[p] for p in paths if p in repo}

    read = c.with_plugins({"conftest.py": repo["conftest.py"]}, ["test/t.py"], "", read_many)
    assert set(read) == {"conftest.py", "p1.py", "p2.py", "p3.py"}, sorted(read)  # p4 is a fourth round
    assert len(asked) == len(set(asked))
    assert "alpha" in c.selector_checks(read, "test/t.py")  # a plugin module's literals are read


def test_an_export_without_a_plan_keeps_its_canaries_clear_of_the_repositorys_selection(tmp_path):
    """An export made without the task's clone (a task without twins) plants plain canaries in the box
    (`sweserve_canaries.plan`); their names came from the file's words alone, so a repository hook skipping
    `slow` tests skipped a canary beside passing neighbours (`tampered`) on many draws. The in-box verifier now
    reads the selector files and the plugin modules they load in the tree (after the resets and tests.patch),
    and no canary draws a word they read."""
    from sweserve.harness import sweserve_canaries, sweserve_twins

    (tmp_path / "conftest.py").write_text('pytest_plugins = ["nightly"]\n')
    (tmp_path / "nightly.py").write_text(NAMED_CONFTEST)
    checks = sweserve_twins.tree_checks(str(tmp_path), [FILE], ".", {FILE: NAMED})
    assert "slow" in checks[FILE], checks
    task = _task(FAIL_TO_PASS=[f"{FILE}::test_fast_path_pages"])
    drawn = [c.name for _ in range(60) for c in sweserve_canaries.plan(task, {FILE: NAMED}, checks).canaries]
    assert drawn and not any("slow" in n for n in drawn), drawn
    unread = [c.name for _ in range(60) for c in sweserve_canaries.plan(task, {FILE: NAMED}).canaries]
    assert any("slow" in n for n in unread)  # the words were drawn before


# --- selectors the first look does not read: the hidden file reads its own names ----------------------------------

SELF_READING = {
    "autouse-fixture": '''import pytest

from pkg.thing import pages


@pytest.fixture(autouse=True)
def _accelerator(request):
    if "gpu" in request.node.name.split("_"):
        pytest.skip("needs an accelerator")


def test_pages_for_a_hundred_tokens():
    assert pages(100) == 13


def test_pages_on_gpu():
    assert pages(64) == 8


def test_pages_for_nothing():
    assert pages(0) == 0
''',
    "setUp": '''import unittest

from pkg.thing import pages


class TestPages(unittest.TestCase):
    def setUp(self):
        if "gpu" in self._testMethodName.split("_"):
            self.skipTest("needs an accelerator")

    def test_pages_for_a_hundred_tokens(self):
        self.assertEqual(pages(100), 13)

    def test_pages_on_gpu(self):
        self.assertEqual(pages(64), 8)

    def test_pages_for_nothing(self):
        self.assertEqual(pages(0), 0)
''',
}


@pytest.mark.parametrize("kind", sorted(SELF_READING))
def test_an_honest_solution_is_resolved_where_the_hidden_file_reads_its_own_names(tmp_path, kind):
    source = SELF_READING[kind]
    scope = "TestPages::" if kind == "setUp" else ""
    f2p = f"{FILE}::{scope}test_pages_for_a_hundred_tokens"
    task = _task(FAIL_TO_PASS=[f2p], PASS_TO_PASS=[f"{FILE}::{scope}test_pages_for_nothing"],
                 twins=[Twin(test=f2p, site=0, value=v) for v in ("11", "12", "14")])
    verdicts = [_verdict(_run(tmp_path, twins.grading_plan(task, {FILE: source}, seed=s), PAGES_ORACLE), task)
                for s in range(6)]
    assert verdicts == ["resolved"] * 6, verdicts


# --- the host's reading: odd ids -------------------------------------------------------------------------------------

def test_odd_ids_give_a_verdict_not_an_exception():
    from sweserve.harness import sweserve_plan

    for source in (HIDDEN, MIXIN_CHAIN):
        plan = twins.grading_plan(_task(), {FILE: source}, seed=2)
        members = [{k: v for k, v in m.items() if k != "twin"} for m in json.loads(plan.map_json())["members"]]
        name = plan.members[0].name
        ids = ["", "::", FILE, FILE + "::", "::" + name, f"{FILE}::{name}[", f"{FILE}::[]", f"{FILE}::a::b::c::{name}",
               f"{FILE}::{name}[x]]", f"/{FILE}::{name}", f"{FILE}::TestPool::", "::::", "[]",
               f"{FILE}::BaseChecks::{name}", f"{FILE}::PoolChecks::test_pages_for_a_hundred_tokens"]
        for test_id in ids:
            for outcome in ("passed", "failed", "error", "skipped", "missing"):
                plan.read({test_id: outcome}, exit_status=1)
                sweserve_plan.read(members, {test_id: outcome}, 1)


# --- the hidden file's classes: the MRO read without memo ---------------------------------------------------------

def test_a_deep_diamond_of_classes_is_planted_in_bounded_time():
    import subprocess
    import sys
    import textwrap

    probe = textwrap.dedent('''
        from sweserve.evaluation import twins
        from tests.test_attacks_twins import FILE, _task
        src = "import unittest\\n\\nclass K0:\\n    def test_k(self):\\n        assert 1 == 1\\n\\nclass K1(K0):\\n    pass\\n\\n"
        for i in range(2, 30):
            src += f"class K{i}(K{i-1}, K{i-2}):\\n    pass\\n\\n"
        src += "class TestK(K29, unittest.TestCase):\\n    pass\\n"
        twins.grading_plan(_task(FAIL_TO_PASS=[f"{FILE}::TestK::test_k"]), {FILE: src}, seed=0)
    ''')
    try:
        subprocess.run([sys.executable, "-c", probe], timeout=15, check=True)
    except subprocess.TimeoutExpired:
        raise AssertionError("planting 30 diamond-chained classes took over 15 s") from None


@pytest.mark.parametrize("oracle, base", [(ORACLE, BASE)])
def test_the_plain_task_an_honest_solution_is_resolved_and_the_unsolved_one_fails(tmp_path, oracle, base):
    task = _plain_task()
    for seed in range(2):
        plan = twins.grading_plan(task, {FILE: HIDDEN}, seed=seed)
        assert _verdict(_run(tmp_path, plan, oracle), task) == "resolved"
        assert _verdict(_run(tmp_path, plan, base), task) == "failed"
