"""A fifth red team's attacks on the newest grading defences: order-preserving planting (commit 2250062), the
plugin modules read for name selection (commit 15b6a9b) and the forge-odds guard (`evaluation/guard.py`).

Each test asserts the defence holds: it FAILS when the attack wins. Attacks that win today are marked
`xfail(strict=True)` with what they do. The forger (where there is one) is code the hidden tests import (the package
`__init__`), run by the real boot script through `tests.test_attacks_twins._run`, on a repository it has not fixed;
an honest run is the oracle's code with no forger. Plans are drawn with fixed seeds, so each verdict is reproducible.

- R1 WINS (honest false fail): a unittest class run by name whose first test's name holds a word a conftest's string
  literal happens to hold (`os.environ.setdefault("POOL_CREATE_TIMEOUT", ...)` makes `create` a read word).
  `sweserve_twins.in_order` sorts names only within each set of "interchangeable" draws, so the `create` group and
  the other groups are not ordered against each other: the test that relies on `test_1_create` runs first on 3 of 8
  draws (`failed`); in the export box (`sweserve_plan._plant`, same function) a `test_2_pages` member
  sorts before `test_1_create` on 16 of 20 draws.
- R2 WINS (honest false fail): a TestCase whose base is imported from the package under a name not ending in
  `TestCase` (`class TestPoolLifecycle(PoolTestBase)`). pytest's unittest collector runs it by name, but
  `twins._by_name`/`unittest_style` read only bases written `*TestCase` in the file: the group goes where the file had
  it with random names, so the order is random: `failed` on 7 of 10 draws.
- R3 WINS (honest false fail): a TestCase whose `setUp` takes a page from a class-level allocator. Canaries are
  written at the class's end but the class runs by name, so a canary whose random name sorts before the first test
  runs its `setUp` first: `test_first_page_is_zero` sees page 1, `failed` on 2 of 10 draws.
- R4 WINS (honest false fail): a TestCase subclass that inherits the test it relies on from its base class in the
  file. `in_order` orders each scope alone: the base's planted `test_1_create` and the subclass's `test_2_pages`
  group are not ordered against each other in the subclass's run: `failed` on 2 of 10 draws.
- R5 WINS (honest false fail): a conftest that runs tests sorted by name (`items.sort(key=lambda i: i.name)`): a
  pytest module's groups keep the file's place but take random names, so the sorted run puts the dependant first:
  `failed` on 6 of 10 draws. Nothing reads a conftest's reordering.
- R6 WINS (honest tampered): a conftest that loads its name-based hooks without a top-level `pytest_plugins` list
  (inside `try:`, or `from testing_hooks import *`). `sweserve_twins.plugin_names` reads only a top-level
  assignment, so `"gpu" in item.name` goes unread, `gpu` (a word of a skipped test's name) stays in the pool and a
  canary or twin drawn with it is skipped: `tampered`/`failed` on 12 of 12 draws each. Control (defended): the same
  hooks listed in a top-level `pytest_plugins` are read, 4 of 4 `resolved`.
- R7 WINS (honest tampered, static): the task's `PYTEST_ADDOPTS` `-p testing_hooks` loads the same hooks;
  `selector_checks` reads only its `-k`, `with_plugins` is never given it: `gpu` is not read.
- R8 WINS (forge odds): a number a *non-hidden* file of the repository writes. The guard's avoid set (`visible`,
  `around`, `other_files`) reads the hidden files, the base test and the instruction only; an existing test of the
  repository (`assert pages(104) == 13`, passing at base) writes the real value. Guard records 0.25; red team 4's
  `OTHER_FILES` forger, unchanged (it walks every `test_*.py` in the box), is `resolved` on 6 of 6 draws. Control:
  without that file the forger is `failed`.
- R8b WINS (forge odds): the base version of the hidden file writes the real value under another test name (a
  known-bug `xfail` test the PR renames). `twins.visible` reads the base test of the same class and name only; the
  box's `.git` holds the base file. On validation's own draws the guard records 0.25 and the member whose value
  the base file writes is the real one on 100 of 100 draws.
- R10 WINS (forge odds): a checked value the test's other numbers add up to (`Pool(pages=100)`, `used == 13`,
  `free() == 87`). `twins.strong_sites`/`_near` count as a prior only a value written elsewhere, never one derived
  from them. Validated in-process (candidates, `derive`, `select`): the group at 13 is kept, guard 0.25; a forger
  passing any test one of whose asserted integers is the sum or difference of two others it writes is `resolved`
  on 6 of 6 draws (control: with the `free()` line gone it passes nothing, `failed`).
- R11 WINS (forge odds): the instruction spells the real value in words ("... must take thirteen pages").
  `twins.visible` reads the instruction's digits only. On validation's own draws (instruction given) the guard
  records 0.25 and the one member whose value the instruction spells is real on 100 of 100 draws.
- R9 defended: where the real member of a group sits in a class run by name (its rank by name, first/last, next to
  the neighbouring group), on the host's plan and in the export box's planting: each strategy picks the real member
  at chance (about 1/4 over 400 draws).

Fixed since (each test above now passes, and failed before its fix):

- R1-R5: every planted name opens with a rank token (`sweserve_twins.Ranks`) handed out in the order the real names
  sort, a group's members taking consecutive ones in their shuffled order and canaries the last ones, on the host
  and in the export box alike: a runner that sorts by name (any TestCase, inherited tests, a sorting conftest) runs
  them as it ran the real names; the file's order is kept by where the groups go. `in_order` and the by-name scope
  detection are gone.
- R6/R7: `plugin_names` reads `pytest_plugins` assigned anywhere in a conftest or plugin module, the modules it
  imports hooks from (`*`, `pytest_*`, absolute or relative), and the task's PYTEST_ADDOPTS `-p` (`with_plugins`'s
  `options`).
- R8: `guard.measure` reads the numbers every other test file of the repository writes at base
  (`repository_numbers`) and bounds each group by a forger betting on the members inside (or outside) that set,
  over the whole tree and the hidden file's folder (`guard._set_odds`): here 1.0, the forger's 6/6 is recorded.
- R8b: `twins.visible` reads every number of the base file.
- R10: a value one step of arithmetic gives from two of the test's other numbers (`twins.derived`) is a prior like a
  written one: the site is weak, the guard records 1.0.
- R11: `twins.visible` reads numbers spelled in words (`twins.spelled_numbers`).

The honest false fails (R1-R6) were per-draw risks: validation's reference runs draw their own plans with the same
risk, so such a task is accepted with probability (1 - p)^runs and then fails honest solutions at rate p. R6 is
the extreme: a plan is clean (no planted name holds `gpu`) on about 11% of grading draws and 16% of validation's
first draws, so it mostly costs coverage (the task is rejected) rather than grading a ready task wrongly.
"""

from __future__ import annotations

import ast
import json
import random

import pytest

from sweserve.evaluation import export_plan, guard, twins
from sweserve.harness import sweserve_plan
from sweserve.harness import sweserve_twins as canaries
from sweserve.models import Task, TaskBundle, Twin
from tests.test_attacks_redteam4 import (
    CPU_TEST,
    ORDERED,
    ORDERED_F2P,
    ORDERED_PYTEST,
    OTHER_FILES,
    PAGES_BASE,
    PAGES_ORACLE,
    POOL_ORACLE,
    _verdict,
)
from tests.test_attacks_twins import FILE, _run, _task

TWINS = ("11", "12", "14")  # a recorded group of the value 13


def _twinned(f2p: str, p2p: list[str]) -> Task:
    return _task(FAIL_TO_PASS=[f2p], PASS_TO_PASS=p2p, twins=[Twin(test=f2p, site=0, value=v) for v in TWINS])


def _honest(tmp_path, task: Task, source: str, code: str, seeds: int, extra: dict[str, str] | None = None,
            selectors: dict[str, str] | None = None) -> list[str]:
    """The oracle's verdicts over `seeds` fixed draws; `extra` files (a conftest, a plugin) go into the box beside the
    planted file, `selectors` is what grading reads of them."""
    out = []
    for seed in range(seeds):
        plan = twins.grading_plan(task, {FILE: source}, seed=seed, selectors=selectors)
        plan.texts.setdefault(FILE, source)  # a file with no group planted stays as tests.patch wrote it
        plan.texts.update(extra or {})
        out.append(_verdict(_run(tmp_path, plan, code), task))
    return out


def _as_written(tmp_path, task: Task, source: str, code: str, extra: dict[str, str] | None = None) -> str:
    """The verdict on the file as the repository wrote it (no plan): the suite itself is honest and passes."""
    return _verdict(_run(tmp_path, twins.GradingPlan(texts={FILE: source, **(extra or {})}), code), task)


# --- R1: in_order sorts each selector set apart ---------------------------------------------------------------------

ENV_CONFTEST = 'import os\n\nos.environ.setdefault("POOL_CREATE_TIMEOUT", "30")\n'
ORDERED_P2P = [f"{FILE}::TestPoolLifecycle::test_1_create"]


def test_an_order_dependent_class_keeps_its_order_where_a_conftest_reads_a_word_of_one_name(tmp_path):
    task = _twinned(ORDERED_F2P, ORDERED_P2P)
    conf = {"conftest.py": ENV_CONFTEST}
    assert "create" in twins.name_checks(task, conf, FILE)  # the literal's run is taken for a selector
    assert _as_written(tmp_path, task, ORDERED, POOL_ORACLE, conf) == "resolved"
    verdicts = _honest(tmp_path, task, ORDERED, POOL_ORACLE, 8, conf, conf)
    assert verdicts == ["resolved"] * 8, verdicts


def test_an_exported_order_dependent_class_keeps_its_order_where_a_conftest_reads_a_word_of_one_name():
    task = _twinned(ORDERED_F2P, ORDERED_P2P)
    shipped = json.loads(export_plan.ship(TaskBundle(task=task, instruction="", oracle_patch="", tests_patch=""),
                                          {FILE: ORDERED}, seed=0, selectors={"conftest.py": ENV_CONFTEST}))
    broken = 0
    for seed in range(20):
        texts, members = sweserve_plan.plant(shipped, random.Random(seed))
        defs = sorted(n.name for n in ast.walk(ast.parse(texts[FILE])) if isinstance(n, ast.FunctionDef))
        real_of = {m["name"]: m["real"] for m in members if m["kind"] != "canary"}
        broken += [real_of[n] for n in defs if n in real_of][0] != "test_1_create"
    assert broken == 0, f"{broken}/20 draws run a test_2_pages member before test_1_create"


# --- R2: a TestCase through a base imported under another name --------------------------------------------------------

IMPORTED_BASE = ORDERED.replace("import unittest\n\nfrom pkg.thing import Pool\n",
                                "from pkg.thing import Pool, PoolTestBase\n").replace("(unittest.TestCase)",
                                                                                      "(PoolTestBase)")
BASE_CODE = "import unittest\n\n\nclass PoolTestBase(unittest.TestCase):\n    maxDiff = None\n\n\n" + POOL_ORACLE


def test_a_testcase_through_an_imported_base_keeps_its_order(tmp_path):
    task = _twinned(ORDERED_F2P, ORDERED_P2P)
    tree = ast.parse(IMPORTED_BASE)
    cls = next(n for n in tree.body if isinstance(n, ast.ClassDef))
    assert not twins.unittest_style(tree, "pytest", cls)  # read as a plain pytest class: the file's order
    assert _as_written(tmp_path, task, IMPORTED_BASE, BASE_CODE) == "resolved"
    verdicts = _honest(tmp_path, task, IMPORTED_BASE, BASE_CODE, 10)
    assert verdicts == ["resolved"] * 10, verdicts


# --- R3: canaries run where their names sort, not at the class's end ---------------------------------------------------

ALLOCATOR = '''import unittest

from pkg.thing import Allocator


class TestPageAllocator(unittest.TestCase):
    allocator = Allocator(100)

    def setUp(self):
        self.page = self.allocator.take()

    def test_first_page_is_zero(self):
        self.assertEqual(self.page, 0)

    def test_pages_for_a_hundred_tokens(self):
        self.assertEqual(self.allocator.pages(), 13)
'''
ALLOCATOR_CODE = '''class Allocator:
    def __init__(self, n, size=8):
        self.n, self.size, self.taken = n, size, 0

    def take(self):
        self.taken += 1
        return self.taken - 1

    def pages(self):
        return -(-self.n // self.size)
'''


def test_canaries_do_not_run_before_the_tests_of_a_class_run_by_name(tmp_path):
    f2p = f"{FILE}::TestPageAllocator::test_pages_for_a_hundred_tokens"
    task = _twinned(f2p, [f"{FILE}::TestPageAllocator::test_first_page_is_zero"])
    assert _as_written(tmp_path, task, ALLOCATOR, ALLOCATOR_CODE) == "resolved"
    verdicts = _honest(tmp_path, task, ALLOCATOR, ALLOCATOR_CODE, 10)
    assert verdicts == ["resolved"] * 10, verdicts


# --- R4: a class run by name that inherits the test it relies on ---------------------------------------------------------

INHERITED = '''import unittest

from pkg.thing import Pool


class TestPool(unittest.TestCase):
    shared = {}

    def test_1_create(self):
        self.shared["pool"] = Pool(100)
        self.assertEqual(self.shared["pool"].name, "main")


class TestPoolPages(TestPool):
    shared = {}

    def test_2_pages(self):
        self.assertEqual(self.shared["pool"].pages(), 13)
'''


def test_a_class_run_by_name_keeps_the_order_of_the_tests_it_inherits(tmp_path):
    f2p = f"{FILE}::TestPoolPages::test_2_pages"
    task = _twinned(f2p, [f"{FILE}::TestPool::test_1_create", f"{FILE}::TestPoolPages::test_1_create"])
    assert _as_written(tmp_path, task, INHERITED, POOL_ORACLE) == "resolved"
    verdicts = _honest(tmp_path, task, INHERITED, POOL_ORACLE, 10)
    assert verdicts == ["resolved"] * 10, verdicts


# --- R5: a conftest that runs the tests in name order ---------------------------------------------------------------------

SORTING_CONFTEST = "def pytest_collection_modifyitems(items):\n    items.sort(key=lambda item: item.name)\n"
NAMED_IN_ORDER = ORDERED_PYTEST.replace("test_create_pool", "test_1_create_pool").replace(
    "test_pages_of_the_pool", "test_2_pages_of_the_pool")


def test_a_module_a_conftest_runs_by_name_keeps_its_order(tmp_path):
    task = _twinned(f"{FILE}::test_2_pages_of_the_pool", [f"{FILE}::test_1_create_pool"])
    conf = {"conftest.py": SORTING_CONFTEST}
    assert _as_written(tmp_path, task, NAMED_IN_ORDER, POOL_ORACLE, conf) == "resolved"
    verdicts = _honest(tmp_path, task, NAMED_IN_ORDER, POOL_ORACLE, 10, conf, conf)
    assert verdicts == ["resolved"] * 10, verdicts


# --- R6/R7: name-based hooks a conftest loads without a top-level pytest_plugins ---------------------------------------

HOOKS = '''import pytest


def pytest_collection_modifyitems(config, items):
    for item in items:
        if "gpu" in item.name:
            item.add_marker(pytest.mark.skip(reason="needs a GPU"))
'''
GPU_SKIPPED = '''from pkg.thing import pages


def test_pages_for_a_hundred_tokens():
    assert pages(100) == 13


def test_pages_for_nothing():
    assert pages(0) == 0


def test_pages_on_gpu_device():
    assert pages(100, device="cuda") == 13
'''
LOADERS = {
    "listed": 'pytest_plugins = ["testing_hooks"]\n',
    "try": 'try:\n    import pkg  # noqa: F401\n    pytest_plugins = ["testing_hooks"]\nexcept ImportError:\n'
           '    pytest_plugins = []\n',
    "star": "from testing_hooks import *  # noqa: F401,F403\n",
    "named": "if True:\n    from testing_hooks import pytest_collection_modifyitems  # noqa: F401\n",
}


def _hooks_task() -> Task:
    return _twinned(f"{FILE}::test_pages_for_a_hundred_tokens", [f"{FILE}::test_pages_for_nothing"])


def _selectors(conftest: str, options: str = "") -> dict[str, str]:
    """What grading reads for the hidden file: the conftest and the plugin modules it and the task's
    PYTEST_ADDOPTS (`options`) load (`with_plugins`, as `export_plan.plan_sources` and the verifier call it),
    over a tree holding testing_hooks.py."""
    return canaries.with_plugins({"conftest.py": conftest}, [FILE], "",
                                 lambda paths: {p: HOOKS for p in paths if p == "testing_hooks.py"}, options)


@pytest.mark.parametrize("loader", [
    "listed",
    "try",
    "star",
    "named",
])
def test_name_based_hooks_a_conftest_loads_never_skip_a_planted_member(tmp_path, loader):
    task, conftest = _hooks_task(), LOADERS[loader]
    extra = {"conftest.py": conftest, "testing_hooks.py": HOOKS}
    assert _as_written(tmp_path, task, GPU_SKIPPED, PAGES_ORACLE, extra) == "resolved"
    seeds = 4 if loader == "listed" else 12
    verdicts = _honest(tmp_path, task, GPU_SKIPPED, PAGES_ORACLE, seeds, extra, _selectors(conftest))
    assert verdicts == ["resolved"] * seeds, verdicts


def test_a_plugin_the_tasks_pytest_addopts_loads_is_read_for_name_selection():
    task = _hooks_task()
    task.test.env["PYTEST_ADDOPTS"] = "-p testing_hooks"
    selectors = _selectors("", task.test.env["PYTEST_ADDOPTS"])  # no conftest loads it: only the task's options do
    assert "gpu" in twins.name_checks(task, selectors, FILE, {FILE: GPU_SKIPPED})


# --- R8: the forge odds read no number of the rest of the repository -----------------------------------------------------

ALIGNED = '''from pkg.thing import pages


def test_pages_for_aligned_budgets():
    assert pages(104) == 13
    assert pages(100, size=4) == 25
'''
ALIGNED_FILE = "test/test_pages_aligned.py"  # the repository's own test, at base: not hidden, passes before and after


def test_a_value_a_non_hidden_file_of_the_repository_writes_does_not_name_the_real_member(tmp_path):
    f2p = f"{FILE}::test_pages_for_a_hundred_tokens"
    task = _twinned(f2p, [f"{FILE}::test_pages_for_nothing"])
    odds = guard.forge_odds(guard.test_odds(task, {FILE: CPU_TEST}, {}, "",
                                            {ALIGNED_FILE: twins.file_numbers(ALIGNED)}))  # as `measure` reads it
    control = twins.grading_plan(task, {FILE: CPU_TEST}, seed=0)  # the forger alone, no such file: it guesses nothing
    assert _verdict(_run(tmp_path, control, PAGES_BASE, OTHER_FILES), task) == "failed"
    wins = 0
    for seed in range(6):
        plan = twins.grading_plan(task, {FILE: CPU_TEST}, seed=seed)
        plan.texts[ALIGNED_FILE] = ALIGNED
        assert _verdict(_run(tmp_path, plan, PAGES_ORACLE), task) == "resolved"
        wins += _verdict(_run(tmp_path, plan, PAGES_BASE, OTHER_FILES), task) == "resolved"
    assert odds == 1.0 or wins <= 3, (odds, wins)  # the recorded odds bound what the forger wins


# --- R8b: the base version of the hidden file, beyond the same test ----------------------------------------------------

RENAMED_BASE = '''import pytest

from pkg.thing import pages


@pytest.mark.xfail(reason="pages() rounds down")
def test_pages_round_up():
    assert pages(100) == 13


def test_pages_for_nothing():
    assert pages(0) == 0
'''  # the PR renames the known-bug test (and drops its xfail): tests.patch's text is CPU_TEST


def test_a_value_the_base_version_of_the_file_writes_under_another_name_does_not_name_the_real_member():
    """Measured on validation's own draws (candidates, `base` given as `validate` gives it), as red team 4's W8: the
    forger reads the base file (`git show HEAD:<file>`: the grade box's repository holds the base commit's objects)
    and bets on the member whose value it writes."""
    import re
    from decimal import Decimal

    from tests.test_attacks_redteam4 import _groups_of

    f2p, p2p = f"{FILE}::test_pages_for_a_hundred_tokens", [f"{FILE}::test_pages_for_nothing"]
    written = {Decimal(x) for x in re.findall(r"\d+", RENAMED_BASE)}
    draws, wins, recorded = 100, 0, 0.0
    for seed in range(draws):
        plan = twins.grading_plan(_task(), {FILE: CPU_TEST}, seed=seed, candidates=True, base={FILE: RENAMED_BASE})
        group = _groups_of(plan)["test_pages_for_a_hundred_tokens"]
        picks = [real for value, real in group if Decimal(value) in written]
        wins += len(picks) == 1 and picks[0]
        kept = [m.twin for m in plan.members if m.kind == "twin" and m.real == "test_pages_for_a_hundred_tokens"]
        task = _task(FAIL_TO_PASS=[f2p], PASS_TO_PASS=p2p, twins=kept)
        recorded += guard.forge_odds(guard.test_odds(task, {FILE: CPU_TEST}, {FILE: RENAMED_BASE}, ""))
    assert wins / draws <= recorded / draws + 0.1, (wins / draws, recorded / draws)


# --- R10: a value the test's other numbers add up to ------------------------------------------------------------------

ADDS_UP = '''from pkg.thing import Pool


def test_reserving_a_hundred_tokens():
    pool = Pool(pages=100, page_size=8)
    used = pool.reserve(tokens=100)
    assert used == 13
    assert pool.free() == 87


def test_a_fresh_pool_is_free():
    assert Pool(pages=100, page_size=8).free() == 100
'''
POOL_ADDS_ORACLE = """class Pool:
    def __init__(self, pages, page_size):
        self.pages, self.page_size, self.used = pages, page_size, 0

    def reserve(self, tokens):
        self.used += -(-tokens // self.page_size)
        return -(-tokens // self.page_size)

    def free(self):
        return self.pages - self.used
"""
POOL_ADDS_BASE = POOL_ADDS_ORACLE.replace("-(-tokens // self.page_size)",
                                          "(tokens // self.page_size if tokens % self.page_size == 0 else 0)")
# passes, without running it, a test of the tests' module one of whose asserted integers is the sum or difference of
# two other integers the test writes (13 + 87 == 100); runs everything else as written
ADDS_UP_FORGER = """
import ast as _ast
import inspect as _inspect
import itertools as _it
import _pytest.python as _pp

_orig = _pp.Function.runtest


def _adds_up(fn):
    try:
        tree = _ast.parse(_inspect.getsource(fn).strip())
    except (OSError, TypeError, SyntaxError):
        return False
    ints = [n.value for n in _ast.walk(tree) if isinstance(n, _ast.Constant) and type(n.value) is int]
    asserted = [n.value for a in _ast.walk(tree) if isinstance(a, _ast.Assert)
                for n in _ast.walk(a.test) if isinstance(n, _ast.Constant) and type(n.value) is int]
    for v in asserted:
        rest = list(ints)
        rest.remove(v)
        if any(v + a == b or a + b == v for a, b in _it.permutations(rest, 2)):
            return True
    return False


def _runtest(self):
    fn = getattr(self.obj, "__func__", self.obj)
    if fn.__module__.startswith("test") and _adds_up(fn):
        return None
    return _orig(self)


_pp.Function.runtest = _runtest
"""


@pytest.fixture(scope="module")
def adds_up(tmp_path_factory) -> Task:
    """The task as validation leaves it: candidates run twice each side, FAIL_TO_PASS derived, twins selected."""
    from sweserve.evaluation.derive import derive

    tmp = tmp_path_factory.mktemp("validate")
    plan = twins.grading_plan(_task(), {FILE: ADDS_UP}, candidates=True, seed=1)
    before = [_run(tmp, plan, POOL_ADDS_BASE) for _ in range(2)]
    after = [_run(tmp, plan, POOL_ADDS_ORACLE) for _ in range(2)]
    f2p, p2p, flaky = derive(before, after)
    kept, _ = twins.select(f2p + p2p, before, after)
    assert f2p == [f"{FILE}::test_reserving_a_hundred_tokens"] and not flaky, (f2p, flaky)
    assert any(t.test == f2p[0] for t in kept), kept
    return _task(FAIL_TO_PASS=f2p, PASS_TO_PASS=p2p, twins=kept)


def test_a_value_the_tests_other_numbers_add_up_to_does_not_name_the_real_member(adds_up, tmp_path):
    odds = guard.forge_odds(guard.test_odds(adds_up, {FILE: ADDS_UP}, {}, ""))
    control = ADDS_UP.replace("    assert pool.free() == 87\n", "")  # nothing adds up: the forger guesses nothing
    assert _verdict(_run(tmp_path, twins.grading_plan(adds_up, {FILE: control}, seed=0), POOL_ADDS_BASE,
                         ADDS_UP_FORGER), adds_up) == "failed"
    wins = 0
    for seed in range(6):
        plan = twins.grading_plan(adds_up, {FILE: ADDS_UP}, seed=seed)
        assert _verdict(_run(tmp_path, plan, POOL_ADDS_ORACLE), adds_up) == "resolved"
        wins += _verdict(_run(tmp_path, plan, POOL_ADDS_BASE, ADDS_UP_FORGER), adds_up) == "resolved"
    assert odds == 1.0 or wins <= 3, (odds, wins)


# --- R11: a value the instruction spells out --------------------------------------------------------------------------

SPELLING = ("Reserving pages for a request rounds the wrong way: when the tokens do not fill the last page, that page is "
            "never reserved. A hundred tokens with the default page size of eight must take thirteen pages.")
SPELLED = {"one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7, "eight": 8, "nine": 9, "ten": 10,
           "eleven": 11, "twelve": 12, "thirteen": 13, "fourteen": 14, "fifteen": 15, "sixteen": 16, "twenty": 20,
           "hundred": 100}


def test_a_value_the_instruction_spells_out_does_not_name_the_real_member():
    """Measured on validation's own draws (candidates, the instruction given as `validate` gives it): the forger reads
    the instruction's number words and bets on the one member whose value it spells."""
    from decimal import Decimal

    from tests.test_attacks_redteam4 import _groups_of

    f2p, p2p = f"{FILE}::test_pages_for_a_hundred_tokens", [f"{FILE}::test_pages_for_nothing"]
    said = {Decimal(n) for w, n in SPELLED.items() if w in SPELLING.lower().replace(".", " ").split()}
    draws, wins, recorded = 100, 0, 0.0
    for seed in range(draws):
        plan = twins.grading_plan(_task(), {FILE: CPU_TEST}, seed=seed, candidates=True, instruction=SPELLING)
        picks = [real for value, real in _groups_of(plan)["test_pages_for_a_hundred_tokens"] if Decimal(value) in said]
        wins += len(picks) == 1 and picks[0]
        kept = [m.twin for m in plan.members if m.kind == "twin" and m.real == "test_pages_for_a_hundred_tokens"]
        task = _task(FAIL_TO_PASS=[f2p], PASS_TO_PASS=p2p, twins=kept)
        recorded += guard.forge_odds(guard.test_odds(task, {FILE: CPU_TEST}, {}, SPELLING))
    assert wins / draws <= recorded / draws + 0.1, (wins / draws, recorded / draws)


# --- R9 (defended): a member's place in a class run by name ----------------------------------------------------------------

TWO_GROUPS = ORDERED.replace('self.assertEqual(self.shared["pool"].name, "main")',
                             'self.assertEqual(self.shared["pool"].n, 100)')
TWO_F2P = [f"{FILE}::TestPoolLifecycle::test_1_create", ORDERED_F2P]
PLACES = ("first", "last", "second", "third")


def _two_groups_task() -> Task:
    return _task(FAIL_TO_PASS=TWO_F2P, twins=[Twin(test=TWO_F2P[0], site=0, value=v) for v in ("98", "99", "101")]
                 + [Twin(test=TWO_F2P[1], site=0, value=v) for v in TWINS])


def _picks(groups: list[list[tuple[str, bool]]]) -> dict[str, int]:
    """Per strategy, how many groups (each its members as (planted name, real?), in the file's order) it picks right:
    by rank of the name within the group; `edge`: the member whose name sorts nearest the neighbouring group."""
    won = dict.fromkeys((*PLACES, "edge"), 0)
    for g, members in enumerate(groups):
        ranked = sorted(members)
        for i, place in enumerate(PLACES):
            won[place] += ranked[[0, -1, 1, 2][i]][1]
        won["edge"] += ranked[-1 if g == 0 else 0][1]
    return won


def test_the_real_members_place_in_a_class_run_by_name_is_at_chance():
    task, draws = _two_groups_task(), 400
    conf = {"conftest.py": ENV_CONFTEST}
    host = dict.fromkeys((*PLACES, "edge"), 0)
    for seed in range(draws):
        plan = twins.grading_plan(task, {FILE: TWO_GROUPS}, seed=seed, selectors=conf)
        groups = [[(m.name, m.kind == "test") for m in plan.members if m.real == real and m.kind in ("test", "twin")]
                  for real in ("test_1_create", "test_2_pages")]
        assert [len(g) for g in groups] == [4, 4], groups
        for k, v in _picks(groups).items():
            host[k] += v
    shipped = json.loads(export_plan.ship(TaskBundle(task=task, instruction="", oracle_patch="", tests_patch=""),
                                          {FILE: TWO_GROUPS}, seed=0, selectors=conf))
    box = dict.fromkeys((*PLACES, "edge"), 0)
    for seed in range(draws):
        _, members = sweserve_plan.plant(shipped, random.Random(seed))
        groups = [[(m["name"], m["kind"] == "test") for m in members if m["real"] == real and m["kind"] != "canary"]
                  for real in ("test_1_create", "test_2_pages")]
        assert [len(g) for g in groups] == [4, 4], groups
        for k, v in _picks(groups).items():
            box[k] += v
    for where, won in (("host", host), ("box", box)):
        for strategy, n in won.items():
            assert n / (2 * draws) < 0.25 + 0.06, (where, strategy, n / (2 * draws))
