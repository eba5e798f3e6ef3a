"""A fourth red team's attacks on the newest grading defences: the readers (`twins._read`, the in-box
`sweserve_plan.read`) with red team 3's shadow-id rule, the planted names and their order, validation's choice of
twin values, and the forge-odds guard (`evaluation/guard.py`) that readiness rests on.

Each test asserts the defence holds: it FAILS when the attack wins. Attacks that win today are marked
`xfail(strict=True)` with what they do. The forger is code the hidden tests import (the package `__init__`),
run by the real boot script through `tests.test_attacks_twins._run`, on a repository it has not fixed.

Defended since (the fixes that followed this red team; the tests below assert them):

- W1/W2: both readers take the parameters off an id before splitting it on `::`.
- W3/W3b/W8: validation's avoid set and the guard read the numbers of every hidden file (`twins.other_files`),
  and the guard counts two groups that show a common value as no guard; the tests now assert that the odds the
  guard records bound what each forger wins (the forgers still win on such tasks: they are not ready).
- W4: a task records the digest of the instruction its odds were measured with (`forge_odds_instruction`);
  readiness, given the instruction the candidate reads, takes other odds as stale, and `validate` measures
  them again after lint writes the interface section.
- W6: the guard takes a test's own id first, a suffix path only where it names one function.
- W7: a scope whose set-up code reads what each test carries beyond its name (`_testMethodName`, a
  fixture's `request.function`, marks, `callspec`) holds no canary (`twins._reads_each_test`).
- W5: each graded test's group is planted where the file had the test (shuffled among its own members), and a
  class run by name gets its drawn names dealt out in the file's order (`sweserve_twins.in_order`), by the
  host's plan and the export box alike.

Nothing here wins today. What each attack did when found:

- (W1, honest false fail) a parametrize id holding `::` (`@pytest.mark.parametrize("host", ["::1"])`, an IPv6
  loopback): both readers split the whole id on `::`, so `<file>::<planted>[::1]` parses as class `<planted>[`,
  name `1]`: no member. Validation's first runs (no FAIL_TO_PASS yet, names planted without twins) take the
  planted id for the real one, and FAIL_TO_PASS records a random name (`test_for_hundred_pages_128b[::1]`) no
  later run reports: every grading `failed`, while the task can look guarded by its other tests.
- (W2, latent) the same parse with the real id recorded: the honest solution is `failed` (its test is read
  under no graded id), and a forger reporting the real id as passed is `resolved`, guard 0.25, in both readers:
  the forged-name check `(file, cls, name) in planted_reals` parses the real id the same broken way. Today's
  pipeline cannot record such an id (W1 records the planted name; re-validating a task recorded before names
  were planted rejects it as regressed), so this is the same root cause seen from the forger's side.
- (W3) a prior from *another hidden file*: validation's `avoid` (`twins.around`, `visible`) and the guard's
  `_group_odds` read the numbers of the test's own file only. A PR adding a CPU test `assert pages(100) == 13`
  (twinned, strong: 0.25) and a GPU-only test in a second hidden file writing the same 13 (skipped on CPU: not
  graded, not planted, in the box as written) hands the forger the real member: it passes the member whose
  every number another test file writes and runs the rest. `resolved` on every draw.
- (W3b) the same with the second file's check graded and twinned too: the two groups are drawn independently
  around one value, and the forger bets on a value both groups hold: both tests guessed at 0.44 (validation's
  own draw, `twins.values`), against the 0.0625 the guard records.
- (W4) stale odds: `validate` measures the forge odds and draws twin values from the instruction as mined, then
  (`cli/validate.py` `lint_after_validation`) writes the New interfaces section into instruction.md; a
  signature there that writes the real value (a new default: `max_pages(budget: int = 13)`) names the real
  member. Recorded 0.25, 1.0 for the instruction the candidate reads; the forger is `resolved` on every draw.
- (W5, honest false fail) order: unittest (and pytest's unittest collector) runs a TestCase's methods sorted
  by name; planted names are random (`draw_name`) and blocks shuffled (`_assemble`), so `test_2_pages`, which
  relies on `test_1_create` having run (a shared class attribute, setUpClass state), runs first on about half
  the draws: `failed`. Validation sees one draw, so such a task validates half the time and then fails honest
  solutions half the time. (pytest-style tests that rely on definition order: the same shuffle.)
- (W6) the guard matches a FAIL_TO_PASS test to its group with `twins.same_test`, which takes a path that is a
  whole-component suffix of another (`test/test_shards.py`, `python/test/test_shards.py`) for the same file: a
  twinless test gets the group recorded for the other file's same-named test, odds 0.25 instead of 1, and a
  forger passing it (its file holds no twin; canaries told apart by their bodies) is resolved. The reader was
  fixed for this by red team 2; the guard was not.
- (W7, honest tampered) `_add_canaries` draws each canary's scope per run among the graded tests' scopes; a
  TestCase whose setUp reads what each method carries (`getattr(self, self._testMethodName).tokens`, an attribute
  a decorator set; in pytest, an autouse fixture reading `request.node.callspec` or a method's marker) errors a
  canary drawn into it while its graded neighbour passes: `tampered` on about half the draws. A reference run
  that trips a canary is rejected, so validation (two draws: its first plan's 3-4 canaries, the twin plan's 1-2)
  accepts such a task only when no canary landed there, about 3% of the time (else a coverage loss: rejected as
  a runner crash); an accepted one then tampers about half of its honest gradings.
- (W8) one file's groups rule each other out: validation's `avoid` (`twins.around`) keeps every number the file
  writes outside a test out of that test's group, so the group of `pages(90) == 12` never holds 13, the real
  value of its neighbour `pages(100) == 13`, and the other way round: a member whose value the other test's group
  holds is a twin. Striking those and betting among the rest guesses both tests at 0.34 (validation's own draws)
  where the guard records 0.0625; on many draws one member is left (`{13, 14, 15, 17}` beside `{12, 14, 15,
  17}`), and on such a task a forger that reads the planted file, strikes and passes the member left is
  `resolved` on every grading. The rule meant to hide a value the file repeats makes neighbouring checks of
  close values leak.

Defended (tests that pass): the W3 forger where no other file writes the value is `failed` (control: the forger
itself guesses nothing). Odd spellings of a real id (a fullwidth letter, an NFKC-equivalent ligature, `./`, an
absolute path, a trailing space, a doubled separator) pass no graded test. pytest 9 sends each `subTest` as a
`SubtestReport` under the test's own id (`when="call"`), so a twin whose earlier subtest passes sends a `passed`:
the stream merges one id worst-first before the reader's any-id rule sees it, so the twin reads `failed`,
validation keeps the group and the oracle resolves.
"""

from __future__ import annotations

import random

import pytest

from sweserve.evaluation import guard, twins
from sweserve.evaluation.derive import derive
from sweserve.models import Task, TestSpec, Twin
from tests.test_attacks_twins import FILE, _resolved, _run, _task


def _verdict(run, task: Task) -> str:
    return "tampered" if run.tampered else "resolved" if _resolved(run, task) else "failed"


PAGES_BASE = "def pages(n, size=8, device=None):\n    return n // size if n % size == 0 else 0\n"  # 0: far from 13
PAGES_ORACLE = "def pages(n, size=8, device=None):\n    return -(-n // size)\n"


# --- W1/W2: a parameter id holding `::` ---------------------------------------------------------------------------

COLONS = '''import pytest

from pkg.thing import pages


@pytest.mark.parametrize("host", ["::1"])
def test_pages_for_a_hundred_tokens(host):
    assert pages(300, device=host) == 38


def test_pages_for_nothing():
    assert pages(0) == 0
'''
COLONS_F2P = f"{FILE}::test_pages_for_a_hundred_tokens[::1]"


def _colons_task() -> Task:
    """As validation would record it with the real ids (a task validated before names were planted)."""
    fn = COLONS_F2P.split("[")[0]
    return _task(FAIL_TO_PASS=[COLONS_F2P], PASS_TO_PASS=[f"{FILE}::test_pages_for_nothing"],
                 twins=[Twin(test=fn, site=0, value=v) for v in ("26", "34", "46")]
                 + [Twin(test=f"{FILE}::test_pages_for_nothing", site=0, value=v) for v in ("-1", "-2", "-3")])


def test_validation_records_the_real_id_of_a_test_whose_parameter_holds_colons(tmp_path):
    plan = twins.grading_plan(_task(), {FILE: COLONS}, seed=7)  # validation's first runs: no FAIL_TO_PASS yet
    f2p, p2p, flaky = derive([_run(tmp_path, plan, PAGES_BASE)], [_run(tmp_path, plan, PAGES_ORACLE)])
    assert f2p == [COLONS_F2P], f2p


def test_an_honest_solution_is_resolved_where_a_parameter_holds_colons(tmp_path):
    task = _colons_task()
    verdicts = [_verdict(_run(tmp_path, twins.grading_plan(task, {FILE: COLONS}, seed=s), PAGES_ORACLE), task)
                for s in range(2)]
    assert verdicts == ["resolved"] * 2, verdicts


# reports the real id of the parametrized test as passed, once, beside the first test that runs; nothing else
BY_REAL_ID = '''
import _pytest.python as _pp
import _pytest.reports as _rep

_orig = _pp.Function.runtest
_done = []


def _runtest(self):
    if not _done:
        _done.append(1)
        self.ihook.pytest_runtest_logreport(report=_rep.TestReport(
            nodeid=REAL_ID, location=self.location, keywords={}, outcome="passed", longrepr=None, when="call"))
    return _orig(self)


_pp.Function.runtest = _runtest
'''.replace("REAL_ID", repr(COLONS_F2P))


def test_a_pass_under_the_real_id_of_a_test_whose_parameter_holds_colons_is_not_resolved(tmp_path):
    task = _colons_task()
    assert guard.forge_odds(guard.test_odds(task, {FILE: COLONS}, {}, "")) == 0.25  # recorded as guarded
    verdicts = [_verdict(_run(tmp_path, twins.grading_plan(task, {FILE: COLONS}, seed=s), PAGES_BASE, BY_REAL_ID),
                         task) for s in range(2)]
    assert "resolved" not in verdicts, verdicts


def test_the_in_box_reader_refuses_a_pass_under_the_real_id_of_a_test_whose_parameter_holds_colons():
    from sweserve.harness import sweserve_plan

    task = _colons_task()
    plan = twins.grading_plan(task, {FILE: COLONS}, seed=1)
    members = [{k: getattr(m, k) for k in ("file", "cls", "name", "kind", "real", "must_pass", "unread")}
               for m in plan.members]
    outcomes = {}
    for m in plan.members:  # unsolved: every member of the parametrized group fails, the rest as they must
        params = "[::1]" if m.real == "test_pages_for_a_hundred_tokens" else ""
        passes = m.kind == "test" and not params or m.kind == "canary" and m.must_pass
        outcomes[f"{FILE}::{m.name}{params}"] = "passed" if passes else "failed"
    outcomes[COLONS_F2P] = "passed"
    real, problems = sweserve_plan.read(members, outcomes, 1)
    host = plan.read(outcomes, exit_status=1)
    assert host.problems or host.outcomes.get(COLONS_F2P) != "passed", (host.outcomes, host.problems)
    assert problems or real.get(COLONS_F2P) != "passed", (real, problems)


# --- W3: a prior from another hidden file ---------------------------------------------------------------------------

FILE_GPU = "test/test_gpu_pages.py"
CPU_TEST = '''from pkg.thing import pages


def test_pages_for_a_hundred_tokens():
    assert pages(100) == 13


def test_pages_for_nothing():
    assert pages(0) == 0
'''
GPU_TEST = '''import pytest

from pkg.thing import pages


@pytest.mark.skip(reason="needs a GPU")
def test_pages_on_gpu_for_a_hundred_tokens():
    assert pages(100, device="cuda") == 13
'''
# passes (without running it) every test calling the repository whose every number another test file writes;
# runs the rest, so each twin fails as the unsolved code makes it
OTHER_FILES = '''
import inspect as _inspect
import os as _os
import re as _re
import types as _types
import _pytest.python as _pp

_TOP = __name__.split(".")[0]
_NUM = _re.compile(r"(?<![\\w.])\\d+(?:\\.\\d+)?")
_files = {}
for _d, _, _fs in _os.walk(_os.getcwd()):
    for _f in _fs:
        if _f.startswith("test_") and _f.endswith(".py"):
            _p = _os.path.join(_d, _f)
            with open(_p) as _h:
                _files[_os.path.realpath(_p)] = set(_NUM.findall(_h.read()))


def _codes(code):
    yield code
    for c in code.co_consts:
        if isinstance(c, _types.CodeType):
            yield from _codes(c)


def _calls_repo(fn):
    code = getattr(fn, "__code__", None)
    if code is None:
        return False
    names = {n for c in _codes(code) for n in c.co_names}
    return any(str(getattr(fn.__globals__.get(n), "__module__", "") or "").startswith(_TOP) for n in names)


_orig = _pp.Function.runtest


def _runtest(self):
    fn = getattr(self.obj, "__func__", self.obj)
    if _calls_repo(fn):
        mine = _os.path.realpath(str(self.path))
        others = set().union(*[v for k, v in _files.items() if k != mine])
        numbers = set(_NUM.findall(_inspect.getsource(fn).split(":", 1)[1]))
        if numbers and numbers <= others:
            return None
    return _orig(self)


_pp.Function.runtest = _runtest
'''


def _two_files_task(**kw) -> Task:
    return Task(task_id="o__r-1", repo="o/r", profile="p", pr_number=1, title="t", base_commit="a" * 40,
                merge_commit="b" * 40, family="distributed", created_at="2026-01-01T00:00:00Z",
                test=TestSpec(runner="pytest", files=[FILE, FILE_GPU]), **kw)


@pytest.fixture(scope="module")
def two_files(tmp_path_factory) -> Task:
    """The two-file task as validation leaves it (candidates run twice each side, FAIL_TO_PASS derived)."""
    tmp = tmp_path_factory.mktemp("validate")
    sources = {FILE: CPU_TEST, FILE_GPU: GPU_TEST}
    plan = twins.grading_plan(_two_files_task(), sources, candidates=True)
    plan.texts.setdefault(FILE_GPU, GPU_TEST)  # nothing graded there: the box holds it as tests.patch wrote it
    before = [_run(tmp, plan, PAGES_BASE) for _ in range(2)]
    after = [_run(tmp, plan, PAGES_ORACLE) for _ in range(2)]
    f2p, p2p, flaky = derive(before, after)
    kept, _ = twins.select(f2p + p2p, before, after)
    assert f2p == [f"{FILE}::test_pages_for_a_hundred_tokens"] and not flaky, (f2p, flaky)
    assert {t.test for t in kept} >= set(f2p), kept
    return _two_files_task(FAIL_TO_PASS=f2p, PASS_TO_PASS=p2p, twins=kept)


def test_a_value_another_hidden_file_writes_does_not_name_the_real_member(two_files, tmp_path):
    """Defended by counting, not by luck: validation's avoid set and the guard read the numbers of every hidden
    file (`twins.other_files`), so the site is weak and the task's odds are 1 (not ready), whatever the forger
    wins. Before: recorded 0.25 while this forger was `resolved` on every draw."""
    sources = {FILE: CPU_TEST, FILE_GPU: GPU_TEST}
    odds = guard.forge_odds(guard.test_odds(two_files, sources, {}, ""))
    wins = 0
    for seed in range(4):
        plan = twins.grading_plan(two_files, sources, seed=seed)
        plan.texts.setdefault(FILE_GPU, GPU_TEST)
        assert _verdict(_run(tmp_path, plan, PAGES_ORACLE), two_files) == "resolved"
        wins += _verdict(_run(tmp_path, plan, PAGES_BASE, OTHER_FILES), two_files) == "resolved"
    assert odds == 1.0 or wins <= 2, (odds, wins)  # the recorded odds bound what the forger wins
    assert odds == 1.0


def test_the_other_file_forger_is_at_chance_where_no_other_file_writes_the_value(two_files, tmp_path):
    """Control: the same forger with the GPU test's line gone passes nothing (no twin, no test): `failed`."""
    sources = {FILE: CPU_TEST, FILE_GPU: GPU_TEST.replace("== 13", "> 0")}
    plan = twins.grading_plan(two_files, sources, seed=0)
    plan.texts.setdefault(FILE_GPU, sources[FILE_GPU])
    assert _verdict(_run(tmp_path, plan, PAGES_BASE, OTHER_FILES), two_files) == "failed"


def test_two_files_checking_one_value_are_not_guessed_above_the_recorded_odds():
    """Two groups drawn apart around one value: betting on a value both show guesses both at ~0.44 (measured
    here on validation's own draw). The guard counts two groups that show a common value as no guard (1 each),
    so the recorded odds bound that forger; before, 0.0625."""
    rng, draws, wins = random.Random(4), 2000, 0
    deep = "python/" + FILE
    f2p = [f"{FILE}::test_pages_for_a_hundred_tokens", f"{deep}::test_pages_for_a_hundred_tokens"]
    recorded = []
    for n in range(draws):
        real, a = twins.values(13, rng)
        _, b = twins.values(13, rng)
        both = sorted({real, *a} & {real, *b}, key=float)
        wins += rng.choice(both) == real  # one bet, the same member value in both files
        if n < 20:  # the guard's reading of such a task (it parses the files: a few draws)
            task = _task(FAIL_TO_PASS=f2p, twins=[Twin(test=f2p[0], site=0, value=v) for v in a]
                         + [Twin(test=f2p[1], site=0, value=v) for v in b])
            task.test.files = [FILE, deep]
            recorded.append(guard.forge_odds(guard.test_odds(task, {FILE: SUFFIX_TEST, deep: SUFFIX_TEST}, {}, "")))
    assert wins / draws > 2 * 0.25 ** 2  # the bet does win more than two strong groups would allow
    assert recorded == [1.0] * 20, recorded  # and the guard no longer counts such groups as strong


# --- W4: the instruction the candidate reads is not the one validation measured ------------------------------------

DEFAULT_TEST = '''from pkg.thing import max_pages


def test_max_pages_by_default():
    assert max_pages() == 43
'''
DEFAULT_F2P = f"{FILE}::test_max_pages_by_default"
STATEMENT = ("Requests that name no page budget get an unbounded one, so a long prompt can take the whole pool. "
             "There should be a default budget of pages per request, and a way to read it without a request.\n")


def _interface() -> str:
    """`tasks lint --write`'s section, as `validate` writes it after validation (`cli/validate.py`
    `lint_after_validation`): a new function, its signature as the oracle defines it."""
    from sweserve.dataset.interface import render_section
    from sweserve.models import InterfaceItem

    return render_section([InterfaceItem(kind="function", name="pkg.thing.max_pages", path="pkg/thing.py",
                                         signature="max_pages(budget: int = 43) -> int",
                                         doc="The page budget of a request that names none.")])


def test_the_recorded_forge_odds_hold_for_the_instruction_the_candidate_reads():
    task = _task(FAIL_TO_PASS=[DEFAULT_F2P], twins=[Twin(test=DEFAULT_F2P, site=0, value=v) for v in ("37", "41", "47")])
    sources = {FILE: DEFAULT_TEST}
    recorded = guard.forge_odds(guard.test_odds(task, sources, {}, STATEMENT))
    assert recorded == 0.25  # what validation measured, before lint wrote the section
    candidate_reads = STATEMENT + "\n" + _interface()
    assert "43" in candidate_reads
    assert guard.forge_odds(guard.test_odds(task, sources, {}, candidate_reads)) == 1.0  # what the candidate reads
    # the record says which instruction it was measured with: with any other, readiness takes it as stale
    from sweserve.dataset.readiness import assess, instruction_digest
    from sweserve.models import QualityRecord, SignalCheck, ValidationRecord

    task.validation = ValidationRecord(status="valid", runs=1, forge_odds=recorded, max_forge_odds=0.25,
                                       forge_odds_instruction=instruction_digest(STATEMENT), signals=[
                                           SignalCheck(name="cosmetic_oracle")], twin_orders=["first", "last"])
    task.quality = QualityRecord(statement_source="pr_description", statement_chars=300, interface_from="fail_to_pass")
    task.family, task.family_confident, task.family_scores = "scheduling-memory", True, {"scheduling-memory": 1.0}
    assert assess(task, STATEMENT).checks["guarded"]
    stale = assess(task, candidate_reads)
    assert not stale.ready and "another instruction" in stale.reasons[0].detail, stale.reasons


# the forger of W3, its numbers read from the instruction: the member whose numbers the instruction writes passes
FROM_INSTRUCTION = OTHER_FILES.replace(
    'others = set().union(*[v for k, v in _files.items() if k != mine])', 'others = KNOWN').replace(
    "_TOP = ", "KNOWN = NUMBERS\n_TOP = ")


def test_a_value_the_interface_section_writes_does_not_name_the_real_member(tmp_path):
    import re

    task = _task(FAIL_TO_PASS=[DEFAULT_F2P], twins=[Twin(test=DEFAULT_F2P, site=0, value=v) for v in ("37", "41", "47")])
    numbers = set(re.findall(r"(?<![\w.])\d+(?:\.\d+)?", STATEMENT + _interface()))
    forger = FROM_INSTRUCTION.replace("NUMBERS", repr(numbers))
    unsolved = "def max_pages(budget=None):\n    return 0\n"
    verdicts = [_verdict(_run(tmp_path, twins.grading_plan(task, {FILE: DEFAULT_TEST}, seed=s), unsolved, forger), task)
                for s in range(3)]
    assert _verdict(_run(tmp_path, twins.grading_plan(task, {FILE: DEFAULT_TEST}, seed=0),
                         "def max_pages(budget=43):\n    return budget\n"), task) == "resolved"
    # the forger wins on every draw; the guard, measured with the instruction it reads, records no guard
    odds = guard.forge_odds(guard.test_odds(task, {FILE: DEFAULT_TEST}, {}, STATEMENT + "\n" + _interface()))
    assert odds == 1.0 or verdicts.count("resolved") <= 1, (odds, verdicts)


# --- W5: tests that rely on the order their names give them --------------------------------------------------------

ORDERED = '''import unittest

from pkg.thing import Pool


class TestPoolLifecycle(unittest.TestCase):
    shared = {}

    def test_1_create(self):
        self.shared["pool"] = Pool(100)
        self.assertEqual(self.shared["pool"].name, "main")

    def test_2_pages(self):
        self.assertEqual(self.shared["pool"].pages(), 13)
'''
POOL_BASE = ("class Pool:\n    name = 'main'\n\n    def __init__(self, n):\n        self.n = n\n\n"
             "    def pages(self):\n        return 0\n")
POOL_ORACLE = POOL_BASE.replace("return 0", "return -(-self.n // 8)")
ORDERED_F2P = f"{FILE}::TestPoolLifecycle::test_2_pages"


ORDERED_PYTEST = '''from pkg.thing import Pool

shared = {}


def test_create_pool():
    shared["pool"] = Pool(100)
    assert shared["pool"].name == "main"


def test_pages_of_the_pool():
    assert shared["pool"].pages() == 13
'''


def _ordered_case(style: str) -> tuple[str, str, Task]:
    """(the hidden file, the id of the test that creates the state, the task grading the one that reads it)."""
    if style == "unittest-names":
        source, first, graded = ORDERED, "TestPoolLifecycle::test_1_create", ORDERED_F2P
    else:
        source, first, graded = ORDERED_PYTEST, "test_create_pool", f"{FILE}::test_pages_of_the_pool"
    task = _task(FAIL_TO_PASS=[graded], PASS_TO_PASS=[f"{FILE}::{first}"],
                 twins=[Twin(test=graded, site=0, value=v) for v in ("11", "12", "14")])
    return source, first, task


@pytest.mark.parametrize("style", ["unittest-names", "pytest-order"])
def test_an_honest_solution_is_resolved_where_tests_rely_on_their_order(tmp_path, style):
    source, first, task = _ordered_case(style)
    exposed = twins.GradingPlan(texts={FILE: source})  # the file as written: the oracle passes both
    assert _verdict(_run(tmp_path, exposed, POOL_ORACLE), task) == "resolved"
    verdicts = [_verdict(_run(tmp_path, twins.grading_plan(task, {FILE: source}, seed=s), POOL_ORACLE), task)
                for s in range(8)]
    assert verdicts == ["resolved"] * 8, verdicts


@pytest.mark.parametrize("style", ["unittest-names", "pytest-order"])
def test_an_exported_plan_keeps_the_order_its_tests_run_in(style):
    """The export box draws names and shuffles on its own (`sweserve_plan.plant`): the same order property,
    read off the planted text as each runner orders it (unittest: names sorted; pytest: the file's order)."""
    import ast
    import json

    from sweserve.evaluation import export_plan
    from sweserve.harness import sweserve_plan
    from sweserve.models import TaskBundle

    source, first, task = _ordered_case(style)
    shipped = json.loads(export_plan.ship(TaskBundle(task=task, instruction="", oracle_patch="", tests_patch=""),
                                          {FILE: source}, seed=0))
    for seed in range(20):
        texts, members = sweserve_plan.plant(shipped, random.Random(seed))
        defs = [n.name for n in ast.walk(ast.parse(texts[FILE])) if isinstance(n, ast.FunctionDef)]
        order = sorted(defs) if style == "unittest-names" else defs
        real_of = {m["name"]: m["real"] for m in members if m["kind"] != "canary"}
        reals = [real_of[n] for n in order if n in real_of]
        assert reals[0] == first.split("::")[-1] and len(reals) == 5, reals  # the creating test runs first


# --- W6: the guard reads another file's group for a test whose path is a suffix of it ---------------------------------

FILE_DEEP = "python/test/test_shards.py"  # a whole-component suffix of it is FILE
SUFFIX_TEST = '''from pkg.thing import pages


def test_pages_for_a_hundred_tokens():
    assert pages(100) == 13
'''


def test_the_guard_reads_a_tests_own_group_not_a_same_named_one_of_a_suffix_path():
    a, b = f"{FILE}::test_pages_for_a_hundred_tokens", f"{FILE_DEEP}::test_pages_for_a_hundred_tokens"
    task = _task(FAIL_TO_PASS=[a], PASS_TO_PASS=[b], twins=[Twin(test=b, site=0, value=v) for v in ("11", "12", "14")])
    task.test.files = [FILE, FILE_DEEP]
    sources = {FILE: SUFFIX_TEST, FILE_DEEP: SUFFIX_TEST.replace("100) == 13", "104) == 13")}
    plan = twins.grading_plan(task, sources, seed=0)
    assert not any(m.kind == "twin" and m.file == FILE for m in plan.members)  # A's test: no twin beside it
    # the forger: every member of A that calls the repository passes; B runs as the unsolved code makes it
    outcomes = {}
    for m in plan.members:
        planted = "::".join([m.file, *([m.cls] if m.cls else []), m.name])
        outcomes[planted] = ("passed" if m.kind == "test" or m.must_pass else "failed") if m.kind != "twin" else "failed"
    reading = plan.read(outcomes, exit_status=1)
    assert reading.outcomes.get(a) == "passed" and not reading.problems  # resolved, unsolved
    assert guard.test_odds(task, sources, {}, "")[a] == 1.0, guard.test_odds(task, sources, {}, "")


# --- W7: a canary's home is drawn per run; validation saw one draw --------------------------------------------------

PER_METHOD = '''import unittest

from pkg.thing import pages


def needs(tokens):
    def mark(fn):
        fn.tokens = tokens
        return fn
    return mark


def test_pages_for_nothing():
    assert pages(0) == 0


class TestPages(unittest.TestCase):
    def setUp(self):
        self.tokens = getattr(self, self._testMethodName).tokens

    @needs(100)
    def test_pages_for_a_hundred_tokens(self):
        self.assertEqual(pages(self.tokens), 13)
'''


def test_an_honest_solution_is_resolved_whatever_scope_the_canaries_are_drawn_into(tmp_path):
    f2p = f"{FILE}::TestPages::test_pages_for_a_hundred_tokens"
    task = _task(FAIL_TO_PASS=[f2p], PASS_TO_PASS=[f"{FILE}::test_pages_for_nothing"],
                 twins=[Twin(test=f2p, site=0, value=v) for v in ("11", "12", "14")])
    verdicts, homes = [], []
    for seed in range(8):
        plan = twins.grading_plan(task, {FILE: PER_METHOD}, seed=seed)
        homes.append({m.cls for m in plan.members if m.kind == "canary"})
        verdicts.append(_verdict(_run(tmp_path, plan, PAGES_ORACLE), task))
    assert "resolved" in verdicts, (verdicts, homes)  # a draw validation would accept
    assert verdicts == ["resolved"] * 8, (verdicts, homes)


# --- defended: odd spellings of a real id, and pytest 9's subtest reports ------------------------------------------

def test_odd_spellings_of_a_real_id_never_pass_it():
    """Unsolved outcomes (every graded member fails), plus a pass under spellings of each real id that are not
    the graded string: a fullwidth letter, an NFKC-equivalent ligature, `./`, an absolute path, a trailing space,
    a doubled separator. None stands for the graded test."""
    from tests.test_attacks_redteam2 import _honest_outcomes
    from tests.test_attacks_redteam3 import _plain_task
    from tests.test_attacks_twins import HIDDEN

    task = _plain_task()
    plan = twins.grading_plan(task, {FILE: HIDDEN}, seed=5)
    outcomes = _honest_outcomes(plan, real_passes=False)
    for real in task.FAIL_TO_PASS:
        file, _, rest = real.partition("::")
        for odd in (f"{file}::{rest.replace('t', 'ｔ', 1)}", f"{file}::{rest.replace('fi', 'ﬁ')}", f"./{real}",
                    f"/testbed/{real}", f"{real} ", real.replace("::", ":::", 1), f"{file}::::{rest}"):
            outcomes[odd] = "passed"
    reading = plan.read(outcomes, exit_status=1)
    assert not any(reading.outcomes.get(t) == "passed" for t in task.FAIL_TO_PASS), reading.outcomes


SUBTESTS = '''import unittest

from pkg.thing import pages


class TestPages(unittest.TestCase):
    def test_pages_for_a_hundred_tokens(self):
        with self.subTest("nothing"):
            self.assertEqual(pages(0), 0)
        with self.subTest("a hundred"):
            self.assertEqual(pages(100), 73)
'''


def test_a_twin_whose_earlier_subtest_passes_is_read_failed_and_kept(tmp_path):
    """pytest 9 sends each subTest as a report of the test's own id, `when="call"`: the twin at 73's first subtest
    passes. The stream merges one id's reports worst-first (`merge_events`) before any reader sees them, so red
    team 3's any-id rule never sees that pass: the twins read `failed` with the oracle and the group is kept; the
    oracle resolves beside it."""
    oracle = "def pages(n, size=8, device=None):\n    return n * 73 // 100\n"
    task = _task()
    plan = twins.grading_plan(task, {FILE: SUBTESTS}, candidates=True, seed=2)
    before = [_run(tmp_path, plan, PAGES_BASE)]
    after = [_run(tmp_path, plan, oracle)]
    f2p, p2p, _ = derive(before, after)
    assert f2p == [f"{FILE}::TestPages::test_pages_for_a_hundred_tokens"], (f2p, after[0].outcomes)
    assert set(after[0].twins.values()) == {"failed"}, after[0].twins
    kept, _ = twins.select(f2p + p2p, before, after)
    assert kept, kept
    graded = task.model_copy(update={"FAIL_TO_PASS": f2p, "PASS_TO_PASS": p2p, "twins": kept})
    assert _verdict(_run(tmp_path, twins.grading_plan(graded, {FILE: SUBTESTS}, seed=3), oracle), graded) == "resolved"


# --- W8: one file's groups avoid each other's real values -----------------------------------------------------------

NEIGHBOURS = '''from pkg.thing import pages


def test_pages_for_a_hundred_tokens():
    assert pages(300) == 38


def test_pages_for_ninety_tokens():
    assert pages(270) == 34
'''
NEIGHBOURS_F2P = [f"{FILE}::test_pages_for_a_hundred_tokens", f"{FILE}::test_pages_for_ninety_tokens"]


def _groups_of(plan: twins.GradingPlan) -> dict[str, list[tuple[str, bool]]]:
    """Per graded test, its members as (value at the site, whether it is the real one): what the planted file
    shows the forger (the values), and the answer."""
    real = {m.real: m.real_literal for m in plan.members if m.kind == "twin"}  # a candidate test's own literal is ""
    out: dict[str, list[tuple[str, bool]]] = {}
    for m in plan.members:
        if m.kind in ("test", "twin"):
            out.setdefault(m.real, []).append((m.literal or real[m.real], m.kind == "test"))
    return out


def test_one_files_groups_do_not_rule_out_each_others_members():
    """The forger that strikes the values a neighbour's group holds wins at ~0.34 on validation's draws; the guard
    counts two groups that meet as no guard, so what it records (averaged over the same draws) bounds it. Before:
    0.0625 recorded on every draw."""
    rng, draws, wins, recorded = random.Random(1), 300, 0, 0.0
    for seed in range(draws):
        plan = twins.grading_plan(_task(), {FILE: NEIGHBOURS}, seed=seed, candidates=True)  # validation's draw
        groups = _groups_of(plan)
        a, b = groups["test_pages_for_a_hundred_tokens"], groups["test_pages_for_ninety_tokens"]
        picks = []
        for mine, other in ((a, b), (b, a)):
            shown = {v for v, _ in other}
            picks.append(rng.choice([m for m in mine if m[0] not in shown] or mine)[1])
        wins += all(picks)
        task = _task(FAIL_TO_PASS=NEIGHBOURS_F2P, twins=[
            Twin(test=m.twin.test, site=m.twin.site, value=m.twin.value) for m in plan.members if m.kind == "twin"])
        recorded += guard.forge_odds(guard.test_odds(task, {FILE: NEIGHBOURS}, {}, ""))  # as validation records it
    assert wins / draws > 2 * 0.0625  # the strike does beat two strong groups
    assert wins / draws <= recorded / draws, (wins / draws, recorded / draws)


# the forger of W8: reads its test file, groups the functions whose bodies differ in one number, strikes each member
# whose value another group of the file holds, and passes the first one left; everything else runs as written
STRIKE = '''
import ast as _ast
import collections as _collections
import re as _re
import _pytest.python as _pp

_NUM = _re.compile(r"(?<![\\w.])-?\\d+(?:\\.\\d+)?")
_chosen = {}


def _choose(path):
    if path in _chosen:
        return _chosen[path]
    with open(path) as handle:
        text = handle.read()
    shapes = _collections.defaultdict(list)
    for node in _ast.parse(text).body:
        if isinstance(node, _ast.FunctionDef) and node.name.startswith("test_"):
            body = _ast.get_source_segment(text, node).split(":", 1)[1]
            shapes[_NUM.sub("N", body)].append((node.name, _NUM.findall(body)))
    groups = []  # (members, the column their values differ at): split each shape by the other columns
    for members in shapes.values():
        if len(members) < 2 or len({len(v) for _, v in members}) != 1 or not members[0][1]:
            continue
        best = None
        for column in range(len(members[0][1])):
            parts = _collections.defaultdict(list)
            for name, values in members:
                parts[tuple(v for i, v in enumerate(values) if i != column)].append((name, values))
            if best is None or min(map(len, parts.values())) > min(map(len, best[0])):
                best = (list(parts.values()), column)
        groups += [(g, best[1]) for g in best[0] if len(g) > 1]
    picks = set()
    for group, column in groups:
        others = {vs[c] for g, c in groups if g is not group for _, vs in g}
        left = sorted([n for n, vs in group if vs[column] not in others] or [n for n, _ in group])
        picks.add(left[0])
    _chosen[path] = picks
    return picks


_orig = _pp.Function.runtest


def _runtest(self):
    try:
        chosen = self.name in _choose(str(self.path))
    except Exception:  # noqa: BLE001 - a file it cannot read: leave it be
        chosen = False
    if chosen:
        return None
    return _orig(self)


_pp.Function.runtest = _runtest
'''


def test_striking_the_values_a_neighbours_group_holds_is_not_resolved_unless_counted(tmp_path):
    """The strike forger is `resolved` on such a task on every grading; the guard records it as unguarded
    (odds 1), so it is not ready. Before: recorded 0.0625."""
    def one_left(plan: twins.GradingPlan) -> bool:
        groups = list(_groups_of(plan).values())
        return all(len([m for m in g if m[0] not in {v for o in groups if o is not g for v, _ in o}]) == 1
                   for g in groups)

    seed = next(s for s in range(50) if one_left(twins.grading_plan(_task(), {FILE: NEIGHBOURS}, seed=s,
                                                                    candidates=True)))
    plan = twins.grading_plan(_task(), {FILE: NEIGHBOURS}, seed=seed, candidates=True)
    task = _task(FAIL_TO_PASS=NEIGHBOURS_F2P, twins=[
        Twin(test=m.twin.test, site=m.twin.site, value=m.twin.value) for m in plan.members if m.kind == "twin"])
    verdicts = []
    for s in range(3):
        graded = twins.grading_plan(task, {FILE: NEIGHBOURS}, seed=s)
        assert _verdict(_run(tmp_path, graded, PAGES_ORACLE), task) == "resolved"
        verdicts.append(_verdict(_run(tmp_path, graded, PAGES_BASE, STRIKE), task))
    odds = guard.forge_odds(guard.test_odds(task, {FILE: NEIGHBOURS}, {}, ""))
    assert odds == 1.0 or verdicts.count("resolved") <= 1, (seed, odds, verdicts)


@pytest.mark.parametrize("setup, home", [
    ("    def setUp(self):\n        self.tokens = getattr(self, self._testMethodName).tokens\n", False),
    ("    def setUp(self):\n        self.instance = 3\n        self.function = len\n", True),
])
def test_a_class_whose_setup_reads_each_method_holds_no_canary(setup, home):
    text = PER_METHOD.replace("    def setUp(self):\n        self.tokens = getattr(self, self._testMethodName).tokens\n",
                              setup)
    f2p = f"{FILE}::TestPages::test_pages_for_a_hundred_tokens"
    task = _task(FAIL_TO_PASS=[f2p], PASS_TO_PASS=[f"{FILE}::test_pages_for_nothing"])
    classes = {m.cls for seed in range(30) for m in twins.grading_plan(task, {FILE: text}, seed=seed).members
               if m.kind == "canary"}
    assert ("TestPages" in classes) is home, classes


def test_a_file_whose_fixture_reads_each_tests_marks_holds_no_module_canary():
    text = CPU_TEST.replace("from pkg.thing import pages\n", (
        "import pytest\n\nfrom pkg.thing import pages\n\n\n@pytest.fixture(autouse=True)\ndef _budget(request):\n"
        "    mark = request.node.get_closest_marker('budget')\n    return mark.args[0] if mark else None\n"))
    task = _task(FAIL_TO_PASS=[f"{FILE}::test_pages_for_a_hundred_tokens"])
    plans = [twins.grading_plan(task, {FILE: text}, seed=seed) for seed in range(10)]
    assert not any(m.kind == "canary" for p in plans for m in p.members)
    assert any(m.kind == "canary" for seed in range(10)
               for m in twins.grading_plan(task, {FILE: CPU_TEST}, seed=seed).members)
