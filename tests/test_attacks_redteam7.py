r"""A seventh red team's attacks on planting (rank tokens, renaming) and the guard's priors.

Each test asserts the defended behaviour: it FAILS when the attack wins. Attacks that win today are marked
`xfail(strict=True)` with what they do. Plans are drawn with fixed seeds, so each verdict is reproducible. Honest
runs are the oracle's code (`PAGES_ORACLE`) run by the real boot script (`tests.test_attacks_twins._run`); forge
odds are measured on validation's own draws (`candidates=True`) against the guard's recorded odds, as red team 6's
`_bet` does.

Honest false fails from planting (goal A). "Validation notices" means the real member fails with the oracle in
validation's first look (every test planted, `candidates=True`) on every draw, so the test is never FAIL_TO_PASS: the
task loses the test (or all of them), a correct solution is never graded failed for it. Per-draw failures are the worst:
validation's runs pass with probability (1 - p)^runs and grading then fails honest solutions at rate p.

- R7-1 WIN, fixed (false fail, validation notices): a test calling another graded test by name (`test_b()` in `test_a`,
  `self.test_b()`): `rename_def` renames the def line only, the call raises NameError/AttributeError: the caller
  fails with the oracle on 4 of 4 grading draws (both styles). Fix: plant no group for (grade twinless, under its
  real name) a test whose name the file reads outside its own def (any `ast.Name`/`ast.Attribute`/string naming it).
- R7-2 WIN, fixed (ungradable, validation notices): a module statement naming a test function (`test_y = test_x`,
  `test_helper.__test__ = False`, a class attribute `test_again = test_x`): NameError at import once the def is
  renamed: validation's first look collects nothing (untouched tests missing); both aliases also fail the oracle
  on 3 of 3 grading draws. Fix: as R7-1 (names
  read at module level keep their def; honour `__test__ = False` in `collected`).
- R7-3 WIN, fixed (false fail, validation notices): a conftest that equips tests by the start of their
  name (`re.compile(r"^test_(exact|strict)_").match(request.node.name)`, `name.split("_")[1]`): every planted name
  opens `test_<rank>_`, the oracle fails 4 of 4 draws. Held: `startswith("test_exact")` (a joined literal: the name
  falls back, unranked, to its real words). Fix: put the rank token after the real name's read words (`test_exact_
  <rank>_...`) where a check begins with `test_`/`^test_`, or plant no group in a file whose selectors anchor.
  Fixed by execution, whatever the reading: validation runs the oracle once more with every test it failed
  under planted names kept under its own (`validation._pins`); those that pass then are pinned (`Task.pinned`),
  graded as written and twinless.
- R7-4 WIN, fixed (honest tampered, per draw, the worst): a conftest whose name-matching words come from a helper module's
  constant (`from testing_utils import GPU_WORDS`) or a data file (`json.loads(... "accelerators.json")`): neither is
  read, `gpu` stays in the pool, a canary or twin drawn with it is skipped: 12 of 12 draws not resolved (6 failed, 6
  tampered) for each. Fix: `plugin_names` follows every module a conftest/plugin imports from the repository (not
  only hook imports), and `selector_checks` reads the literals of non-Python files a selector file names (or: read
  every word of the repository's selector folders' data files); more robustly, draw planted words only from a
  fixed neutral list disjoint from the file's own words.
- R7-5 WIN, fixed (false fail, per draw): `unittest.TestLoader.sortTestMethodsUsing` set in the module to a cmp by length
  (pytest's unittest collector uses `TestLoader().getTestCaseNames`): the planted names' drawn lengths decide the
  order, the dependant runs first on 7 of 10 draws. Held: a cmp reading the class's definition order. Fix: pad the
  names of one scope to one length (same word count and widths) or treat a module assigning `sortTestMethodsUsing`
  as one whose order cannot be kept (no groups in its TestCases).
- R7-6 WIN, fixed (false fail, validation notices): a test that opens `cases/{request.node.name}.json`: no file under the
  planted name, oracle fails 3 of 3. `own_checks` only keeps words. Fix: a file that reads a test's name outside a
  substring check gets no group (its tests graded twinless under their real names). Fixed as R7-3, by validation's probe.
- R7-7 WIN, fixed (false fail, validation notices): `@pytest.mark.dependency(depends=["test_pages_for_nothing"])`
  (pytest-dependency's semantics in a conftest; the plugin, and pytest-order's `order(after=...)`, are not installed
  here): the named test runs under a planted name, the dependant is skipped on 3 of 3 draws. Fix: as R7-1 (a string
  constant equal to a test's name counts as reading it).

Forging (goal B), measured as red team 6's `_bet` does (validation's own draws, the guard's recorded odds):

- R7-8 WIN, fixed (forge odds): one step of arithmetic over numbers the file writes outside the test (a fixture's
  `Pool(pages=100)`, `reserve(87)`; the test checks `free() == 13`). `twins.derived` combines the test's own numbers
  (`_elsewhere`), `around` adds the file's but underived: guard records 0.25, the forger betting on the one member
  in `derived(file numbers)` wins 0.75 over 300 draws. Fix: `_near` also adds `derived(around(...) | written)` (capped
  like MAX_DERIVED), and `guard._group_odds` the same.
- R7-9 WIN, fixed (forge odds): the real value in a data file of the repository (`test/data/cases.json` with `"pages":
  13`, beside the hidden test). `guard.repository_numbers` reads `.py` blobs only: guard 0.25, forger 1.0 over 300
  draws. Fix: read every text blob (json/yaml/toml/txt/csv, size-capped) in `repository_numbers`.
- R7-10 WIN, fixed (forge odds): numbers written as Python writes them: digit groups (`13_107`) in another test file of
  the repository, hex (`0xD`) in the instruction. `_TEXT_NUMBER` finds nothing in `13_107`/`0xD` (file_numbers,
  around, visible's instruction read): guard 0.25, forger 1.0 over 300 draws each. Fix: read number tokens with
  `ast.literal_eval` (Python's own grammar: `_`, hex/oct/bin, `1e2`) and add `0[xob][0-9a-f_]+` to the text reader.
- R7-11 held: rank tokens and drawn words as a signal (host `grading_plan` and box `plant`, 300 draws each, a
  conftest literal `"03"` that makes rank tokens skipped): shortest/longest name, the one three-word name, largest
  hex tail, second rank, the member after a skipped token: each at chance (0.12 to 0.26 against 0.31; the
  two-word file never draws a three-word name, so that statistic is 0 here).
- R7-12 held: a number in a parametrize id (`"100->13"`) is read by `around`, a scientific spelling in the
  instruction (`1.3e1`) by `visible`.
"""

from __future__ import annotations

import random
import re
import subprocess
from decimal import Decimal
from pathlib import Path

import pytest

from sweserve.evaluation import guard, twins
from sweserve.harness import sweserve_twins as canaries
from sweserve.models import TaskBundle, Twin
from tests.test_attacks_redteam4 import CPU_TEST, PAGES_ORACLE, POOL_ORACLE
from tests.test_attacks_redteam5 import GPU_SKIPPED, TWO_GROUPS, _as_written, _honest, _twinned, _two_groups_task
from tests.test_attacks_redteam6 import _bet, _draws
from tests.test_attacks_twins import FILE, _run, _task


def _at_validation(tmp_path, source: str, test: str, code: str = PAGES_ORACLE, extra: dict[str, str] | None = None,
                   selectors: dict[str, str] | None = None, seed: int = 0, pinned: tuple[str, ...] = ()) -> str | None:
    """The outcome of the real member of `test` (`Class::name` or `name`) in validation's first look (every test
    planted, `candidates=True`) with `code`: "failed" means validation would not call it FAIL_TO_PASS (a signal).
    `pinned`: the tests validation's probe keeps under their names (`validation._pins`, `Task.pinned`)."""
    plan = twins.grading_plan(_task(pinned=list(pinned)), {FILE: source}, seed=seed, candidates=True,
                              selectors=selectors)
    plan.texts.setdefault(FILE, source)  # a file with no group planted stays as tests.patch wrote it
    plan.texts.update(extra or {})
    return _run(tmp_path, plan, code).outcomes.get(f"{FILE}::{test}")


# --- R7-1: a test that calls another graded test by name ------------------------------------------------------------

CALLS_BY_NAME = '''from pkg.thing import pages


def test_pages_for_a_hundred_tokens():
    assert pages(100) == 13


def test_pages_twice():
    test_pages_for_a_hundred_tokens()
    assert pages(200) == 25
'''
CALLS_BY_SELF = '''import unittest

from pkg.thing import pages


class TestPages(unittest.TestCase):
    def test_pages_for_a_hundred_tokens(self):
        self.assertEqual(pages(100), 13)

    def test_pages_twice(self):
        self.test_pages_for_a_hundred_tokens()
        self.assertEqual(pages(200), 25)
'''


@pytest.mark.parametrize("style", ["function", "method"])
def test_a_test_calling_another_graded_test_by_name_still_passes(tmp_path, style):
    source, prefix = (CALLS_BY_NAME, "") if style == "function" else (CALLS_BY_SELF, "TestPages::")
    task = _twinned(f"{FILE}::{prefix}test_pages_twice", [f"{FILE}::{prefix}test_pages_for_a_hundred_tokens"])
    assert _as_written(tmp_path, task, source, PAGES_ORACLE) == "resolved"
    # the called test keeps its name (`twins.pinned`): the caller passes in validation's first look too
    assert _at_validation(tmp_path, source, f"{prefix}test_pages_twice") == "passed"
    verdicts = _honest(tmp_path, task, source, PAGES_ORACLE, 4)
    assert verdicts == ["resolved"] * 4, verdicts


# --- R7-2: the module names a test function: an alias, `__test__ = False` ---------------------------------------------

ALIASED = '''from pkg.thing import pages


def test_pages_for_a_hundred_tokens():
    assert pages(100) == 13


def test_pages_for_nothing():
    assert pages(0) == 0


test_pages_for_a_hundred_tokens_again = test_pages_for_a_hundred_tokens
'''
NOT_COLLECTED = '''from pkg.thing import pages


def test_helper_pages(tokens):
    return pages(tokens)


test_helper_pages.__test__ = False


def test_pages_for_a_hundred_tokens():
    assert test_helper_pages(100) == 13


def test_pages_for_nothing():
    assert pages(0) == 0
'''

CLASS_ALIAS = '''import unittest

from pkg.thing import pages


class TestPages(unittest.TestCase):
    def test_pages_for_a_hundred_tokens(self):
        self.assertEqual(pages(100), 13)

    def test_pages_for_nothing(self):
        self.assertEqual(pages(0), 0)

    test_pages_again = test_pages_for_a_hundred_tokens
'''


@pytest.mark.parametrize("source", [ALIASED, NOT_COLLECTED, CLASS_ALIAS], ids=["alias", "dunder-test", "class-alias"])
def test_a_module_statement_naming_a_test_keeps_the_file_importable(tmp_path, source):
    prefix = "TestPages::" if source is CLASS_ALIAS else ""
    task = _twinned(f"{FILE}::{prefix}test_pages_for_a_hundred_tokens", [f"{FILE}::{prefix}test_pages_for_nothing"])
    assert _as_written(tmp_path, task, source, PAGES_ORACLE) == "resolved"
    # validation's first look plants every test, the helper too: the module does not import, even the untouched
    # test's real member is missing or failed with the oracle, so validation finds no FAIL_TO_PASS (a signal)
    seen = _at_validation(tmp_path, source, f"{prefix}test_pages_for_nothing")
    verdicts = _honest(tmp_path, task, source, PAGES_ORACLE, 3)  # the alias: grading fails the oracle too
    assert seen == "passed" and verdicts == ["resolved"] * 3, (seen, verdicts)


# --- R7-3: a conftest that reads where in a name a word stands ---------------------------------------------------------

EXACT_TEST = '''from pkg.thing import pages


def test_exact_pages_for_a_hundred_tokens():
    assert pages(100) == 13


def test_pages_for_nothing():
    assert pages(0) == 0
'''
EXACT_ORACLE = ("import os\n\n\ndef pages(n, size=8, device=None):\n"
                "    return -(-n // size) if os.environ.get('PKG_EXACT') else n // size\n")
EXACT_CONFTESTS = {
    # pytest's own idiom for a family of tests: equip those whose name opens with a prefix
    "anchored-regex": 'import re\n\nimport pytest\n\nEXACT = re.compile(r"^test_(exact|strict)_")\n\n\n'
                      '@pytest.fixture(autouse=True)\ndef _exact_rounding(request, monkeypatch):\n'
                      '    if EXACT.match(request.node.name):\n        monkeypatch.setenv("PKG_EXACT", "1")\n',
    "split": 'import pytest\n\n\n@pytest.fixture(autouse=True)\ndef _exact_rounding(request, monkeypatch):\n'
             '    if request.node.name.split("_")[1] in ("exact", "strict"):\n'
             '        monkeypatch.setenv("PKG_EXACT", "1")\n',
    # control: the prefix written whole is a joined literal, so the name keeps it (unranked fallback)
    "startswith": 'import pytest\n\n\n@pytest.fixture(autouse=True)\ndef _exact_rounding(request, monkeypatch):\n'
                  '    if request.node.name.startswith("test_exact"):\n        monkeypatch.setenv("PKG_EXACT", "1")\n',
}


@pytest.mark.parametrize("conftest", ["anchored-regex", "split", "startswith"])
def test_a_conftest_equipping_tests_by_name_prefix_still_equips_them(tmp_path, conftest):
    """R7-3: no reading of the code can tell every way a conftest matches names (a regex anchored past `test_`,
    `split("_")[1]`); validation runs the oracle on the tests it fails under planted names once more under
    their own (`validation._pins`), and those that pass then are pinned (`Task.pinned`): graded as written."""
    graded = f"{FILE}::test_exact_pages_for_a_hundred_tokens"
    extra = {"conftest.py": EXACT_CONFTESTS[conftest]}
    task = _twinned(graded, [f"{FILE}::test_pages_for_nothing"])
    assert _as_written(tmp_path, task, EXACT_TEST, EXACT_ORACLE, extra) == "resolved"
    planted = _at_validation(tmp_path, EXACT_TEST, "test_exact_pages_for_a_hundred_tokens", EXACT_ORACLE, extra,
                             extra)
    assert planted == ("passed" if conftest == "startswith" else "failed")  # the name matters, by position
    if planted == "failed":  # what validation's probe sees, and records
        assert _at_validation(tmp_path, EXACT_TEST, "test_exact_pages_for_a_hundred_tokens", EXACT_ORACLE, extra,
                              extra, pinned=(graded,)) == "passed"
        task.pinned = [graded]
    verdicts = _honest(tmp_path, task, EXACT_TEST, EXACT_ORACLE, 4, extra, extra)
    assert verdicts == ["resolved"] * 4, verdicts


# --- R7-4: the words a name-based selection reads, from a helper constant or a data file ---------------------------------

ACCELERATOR_HOOK = ('\n\ndef pytest_collection_modifyitems(config, items):\n    for item in items:\n'
                    '        if any(word in item.name for word in GPU_WORDS):\n'
                    '            item.add_marker(pytest.mark.skip(reason="needs an accelerator"))\n')
WORD_SOURCES = {
    # the words live in a helper module the conftest imports a constant from (not hooks: never followed)
    "helper-constant": ("import pytest\n\nfrom testing_utils import GPU_WORDS\n" + ACCELERATOR_HOOK,
                        {"testing_utils.py": 'GPU_WORDS = ("gpu", "cuda")\n'}),
    # the words live in a data file beside the conftest (never read)
    "data-file": ("import json\nfrom pathlib import Path\n\nimport pytest\n\n"
                  'GPU_WORDS = json.loads((Path(__file__).parent / "accelerators.json").read_text())\n'
                  + ACCELERATOR_HOOK, {"accelerators.json": '["gpu", "cuda"]\n'}),
}


@pytest.mark.parametrize("where", sorted(WORD_SOURCES))
def test_words_a_conftest_reads_from_elsewhere_never_skip_a_planted_member(tmp_path, where):
    conftest, files = WORD_SOURCES[where]
    task = _twinned(f"{FILE}::test_pages_for_a_hundred_tokens", [f"{FILE}::test_pages_for_nothing"])
    extra = {"conftest.py": conftest, **files}
    assert _as_written(tmp_path, task, GPU_SKIPPED, PAGES_ORACLE, extra) == "resolved"
    selectors = canaries.with_plugins({"conftest.py": conftest}, [FILE], "", lambda paths: {
        p: t for p, t in files.items() if p in paths})  # as grading reads the tree
    verdicts = _honest(tmp_path, task, GPU_SKIPPED, PAGES_ORACLE, 12, extra, selectors)
    assert verdicts == ["resolved"] * 12, ("gpu" in canaries.selector_checks(selectors, FILE), verdicts)


# --- R7-5: unittest's loader sorting by another key than the name -------------------------------------------------------

LOADER_ORDERS = {
    # a cmp that sorts by length (the class's tests were named to run shortest first)
    "by-length": "unittest.TestLoader.sortTestMethodsUsing = staticmethod(lambda a, b: len(a) - len(b) or "
                 "(a > b) - (a < b))\n",
    # control: definition order, read from the class (the planted groups keep the file's order)
    "definition": "unittest.TestLoader.sortTestMethodsUsing = staticmethod(lambda a, b: "
                  "list(TestPoolLifecycle.__dict__).index(a) - list(TestPoolLifecycle.__dict__).index(b))\n",
}
LOADER_TEST = '''import unittest

from pkg.thing import Pool


class TestPoolLifecycle(unittest.TestCase):
    shared = {}

    def test_create(self):
        self.shared["pool"] = Pool(100)
        self.assertEqual(self.shared["pool"].name, "main")

    def test_a_pages(self):
        self.assertEqual(self.shared["pool"].pages(), 13)


'''


@pytest.mark.parametrize("order", [
    "by-length",
    "definition",
])
def test_a_loader_sorting_test_methods_its_own_way_keeps_the_order(tmp_path, order):
    source = LOADER_TEST + LOADER_ORDERS[order]
    graded = f"{FILE}::TestPoolLifecycle::test_a_pages"
    task = _task(FAIL_TO_PASS=[graded], PASS_TO_PASS=[f"{FILE}::TestPoolLifecycle::test_create"],
                 twins=[Twin(test=graded, site=0, value=v) for v in ("11", "12", "14")])
    assert _as_written(tmp_path, task, source, POOL_ORACLE) == "resolved"
    verdicts = _honest(tmp_path, task, source, POOL_ORACLE, 10)
    assert verdicts == ["resolved"] * 10, verdicts



def test_a_loader_order_set_in_a_conftest_pins_the_file_for_grading_and_the_guard_alike(tmp_path):
    """R7-5 through a conftest: grading reads the selector files, so a `sortTestMethodsUsing` set there pins the
    file's tests too; `guard.measure` reads the same files, so it counts them twinless (never a group grading
    does not plant)."""
    conftest = "import unittest\n\nunittest.TestLoader.sortTestMethodsUsing = None\n"
    graded = f"{FILE}::TestPoolLifecycle::test_a_pages"
    task = _task(FAIL_TO_PASS=[graded], PASS_TO_PASS=[f"{FILE}::TestPoolLifecycle::test_create"],
                 twins=[Twin(test=graded, site=0, value=v) for v in ("11", "12", "14")])
    plan = twins.grading_plan(task, {FILE: LOADER_TEST}, seed=0, selectors={"conftest.py": conftest})
    assert not [m for m in plan.members if m.kind == "twin"] and FILE not in plan.texts
    clone, head = _clone(tmp_path, {FILE: LOADER_TEST, "conftest.py": conftest, **PKG})
    bundle = TaskBundle(task=task.model_copy(update={"base_commit": head}), instruction="", oracle_patch="",
                        tests_patch="")
    assert guard.measure(clone, bundle)[1] == {graded: 1.0}
    assert twins.grading_plan(task, {FILE: LOADER_TEST}, seed=0).members  # without the conftest: planted

# --- left by red team 5 and 7: a graded test after an ungraded one, in a class run by name ----------------------------

UNGRADED_FIRST = '''import unittest

from pkg.thing import Pool


class TestPoolLifecycle(unittest.TestCase):
    shared = {}

    def test_create(self):
        self.shared["pool"] = Pool(100)
        self.assertEqual(self.shared["pool"].name, "spare")  # fails with the oracle too: never graded

    def test_pages(self):
        self.assertEqual(self.shared["pool"].pages(), 13)
'''


def test_a_graded_test_keeps_its_place_after_an_ungraded_one_in_a_class_run_by_name(tmp_path):
    """A TestCase runs its tests sorted by name. `test_create` fails with the oracle (so it is not graded) but
    sets up what the graded `test_pages` reads. Validation's first look planted both, ranked, so it kept the
    order and `test_pages` became FAIL_TO_PASS; grading planted only the graded test: `test_0000_...` sorted
    before the unplanted `test_create` on every draw, and the oracle failed. Grading now ranks every test of a
    class holding a graded one, as validation did (only the graded ones are read)."""
    graded = f"{FILE}::TestPoolLifecycle::test_pages"
    task = _task(FAIL_TO_PASS=[graded], twins=[Twin(test=graded, site=0, value=v) for v in ("11", "12", "14")])
    assert _at_validation(tmp_path, UNGRADED_FIRST, "TestPoolLifecycle::test_pages", POOL_ORACLE) == "passed"
    verdicts = _honest(tmp_path, task, UNGRADED_FIRST, POOL_ORACLE, 6)
    assert verdicts == ["resolved"] * 6, verdicts


def test_an_exported_class_keeps_a_graded_test_after_its_ungraded_neighbour():
    """The export ships `grading_plan`'s members, the ungraded neighbour among them: the box's planter keeps the
    class's order on every draw."""
    import ast
    import json

    from sweserve.evaluation import export_plan
    from sweserve.harness import sweserve_plan

    graded = f"{FILE}::TestPoolLifecycle::test_pages"
    task = _task(FAIL_TO_PASS=[graded], twins=[Twin(test=graded, site=0, value=v) for v in ("11", "12", "14")])
    shipped = json.loads(export_plan.ship(TaskBundle(task=task, instruction="", oracle_patch="", tests_patch=""),
                                          {FILE: UNGRADED_FIRST}, seed=0))
    for seed in range(12):
        texts, members = sweserve_plan.plant(shipped, random.Random(seed))
        real_of = {m["name"]: m["real"] for m in members if m["kind"] != "canary"}
        defs = sorted(n.name for n in ast.walk(ast.parse(texts[FILE])) if isinstance(n, ast.FunctionDef))
        assert [real_of[n] for n in defs if n in real_of][0] == "test_create", (seed, defs)


# --- R7-6: a test reading its own name to find its data ---------------------------------------------------------------

OWN_DATA = '''import json
from pathlib import Path

from pkg.thing import pages


def _case(request):
    return json.loads((Path(__file__).parent / "cases" / f"{request.node.name}.json").read_text())


def test_pages_for_a_hundred_tokens(request):
    assert pages(_case(request)["tokens"]) == 13


def test_pages_for_nothing():
    assert pages(0) == 0
'''


def test_a_test_finding_its_data_by_its_own_name_still_finds_it(tmp_path):
    """R7-6: a test opening a data file named after `request.node.name` finds none under a planted name: the
    oracle fails it in validation's first look, passes it pinned (`validation._pins`), so grading keeps it."""
    graded = f"{FILE}::test_pages_for_a_hundred_tokens"
    task = _twinned(graded, [f"{FILE}::test_pages_for_nothing"])
    extra = {"test/cases/test_pages_for_a_hundred_tokens.json": '{"tokens": 100}\n'}
    assert _as_written(tmp_path, task, OWN_DATA, PAGES_ORACLE, extra) == "resolved"
    assert _at_validation(tmp_path, OWN_DATA, "test_pages_for_a_hundred_tokens", extra=extra) == "failed"
    assert _at_validation(tmp_path, OWN_DATA, "test_pages_for_a_hundred_tokens", extra=extra,
                          pinned=(graded,)) == "passed"
    task.pinned = [graded]
    verdicts = _honest(tmp_path, task, OWN_DATA, PAGES_ORACLE, 3, extra)
    assert verdicts == ["resolved"] * 3, verdicts
    assert guard.test_odds(task, {FILE: OWN_DATA}, {}, "") == {graded: 1.0}  # pinned: twinless, and counted so


def test_validation_pins_a_test_that_passes_only_under_its_own_name(make_repo, tmp_path):
    """R7-6 end to end: `validate_task` on the local backend runs the probe (`validation._pins`), records the
    pin, and keeps the test FAIL_TO_PASS; the oracle is then resolved and the null failed through a trial."""
    from local_backend import diff_of, local_task

    from sweserve.agents.reference import NullAgent, OracleAgent
    from sweserve.evaluation.trial import evaluate_task
    from sweserve.evaluation.validation import ValidateRequest, validate_task

    repo = make_repo("pins")
    base = repo.commit("init", {**PKG, "test/__init__.py": "",
                                "test/cases/test_pages_for_a_hundred_tokens.json": '{"tokens": 100}\n'})
    oracle = diff_of(repo, base, "pkg/thing.py", PAGES_ORACLE)
    tests = diff_of(repo, base, FILE, OWN_DATA)
    task, ctx = local_task(tmp_path, repo, "pins", base, FILE, ["test/*"])
    bundle = TaskBundle(task=task, instruction="Count a partial page as a page.", oracle_patch=oracle,
                        tests_patch=tests)
    graded = f"{FILE}::test_pages_for_a_hundred_tokens"
    try:
        outcome = validate_task(ctx, ValidateRequest(tmp_path / "tasks" / task.task_id, bundle, runs=1))
        assert outcome.status == "valid", outcome.reason
        assert task.pinned == outcome.pinned == [graded] and task.FAIL_TO_PASS == [graded], (task.pinned, task)
        assert evaluate_task(ctx, bundle, OracleAgent(), results_path=tmp_path / "r.jsonl").status == "resolved"
        assert evaluate_task(ctx, bundle, NullAgent(), results_path=tmp_path / "r.jsonl").status == "failed"
    finally:
        ctx.close()


# --- R7-7: a mark naming the test it depends on (pytest-dependency's `depends=`) --------------------------------------

# pytest-dependency's semantics in a conftest (the plugin is not installed here): a test whose `depends` names a test
# that has not passed is skipped
DEPENDENCY_CONFTEST = '''import pytest

_passed = set()


def pytest_configure(config):
    config.addinivalue_line("markers", "dependency(depends): run after these tests passed")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    if report.when == "call" and report.passed:
        _passed.add(item.name)


def pytest_runtest_setup(item):
    marker = item.get_closest_marker("dependency")
    for name in marker.kwargs.get("depends", []) if marker else []:
        if name not in _passed:
            pytest.skip(f"depends on {name}")
'''
DEPENDS = '''import pytest

from pkg.thing import pages


def test_pages_for_nothing():
    assert pages(0) == 0


@pytest.mark.dependency(depends=["test_pages_for_nothing"])
def test_pages_for_a_hundred_tokens():
    assert pages(100) == 13
'''


def test_a_test_depending_on_another_by_name_still_runs(tmp_path):
    task = _twinned(f"{FILE}::test_pages_for_a_hundred_tokens", [f"{FILE}::test_pages_for_nothing"])
    extra = {"conftest.py": DEPENDENCY_CONFTEST}
    assert _as_written(tmp_path, task, DEPENDS, PAGES_ORACLE, extra) == "resolved"
    assert _at_validation(tmp_path, DEPENDS, "test_pages_for_a_hundred_tokens", extra=extra,
                          selectors=extra) == "passed"
    verdicts = _honest(tmp_path, task, DEPENDS, PAGES_ORACLE, 3, extra, extra)
    assert verdicts == ["resolved"] * 3, verdicts


# --- R7-8..R7-10: priors the guard does not read ------------------------------------------------------------------------

def _clone(tmp_path, files: dict[str, str]) -> tuple[Path, str]:
    """A git repository holding `files` at one commit (the task's base): what `guard.repository_numbers` reads."""
    root = tmp_path / "clone"
    for path, text in files.items():
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        (root / path).write_text(text)
    git = ["git", "-C", str(root), "-c", "user.name=r7", "-c", "user.email=r7@example.com"]
    subprocess.run([*git, "init", "-q"], check=True)
    subprocess.run([*git, "add", "-A"], check=True)
    subprocess.run([*git, "commit", "-qm", "base"], check=True)
    head = subprocess.run([*git, "rev-parse", "HEAD"], check=True, capture_output=True, text=True).stdout.strip()
    return root, head


def _repository(tmp_path, files: dict[str, str]) -> dict[str, frozenset[Decimal]]:
    """What the guard reads of the repository's other files at base (`guard.repository_numbers`, as `measure` calls
    it)."""
    clone, head = _clone(tmp_path, files)
    return guard.repository_numbers(clone, _task().model_copy(update={"base_commit": head}), [FILE])


# R7-8: one step of arithmetic over what the file writes outside the test (a fixture)
FIXTURE_ARITHMETIC = '''import pytest

from pkg.thing import Pool


@pytest.fixture
def pool():
    pool = Pool(pages=100)
    pool.reserve(87)
    return pool


def test_free_pages_after_a_reservation(pool):
    assert pool.free() == 13


def test_a_fresh_pool_is_free():
    assert Pool(pages=10).free() == 10
'''


def test_a_value_one_step_of_arithmetic_gives_from_a_fixture_does_not_name_the_real_member():
    written = frozenset(Decimal(v) for v in ("100", "87", "10"))  # the numbers every member shares, outside the site
    won, recorded = _bet(FIXTURE_ARITHMETIC, "test_free_pages_after_a_reservation",
                         [f"{FILE}::test_a_fresh_pool_is_free"], set(twins.derived(written)), 300)
    assert won <= recorded + 0.1, (won, recorded)


# R7-9: the real value in a data file (not Python) of the repository, beside the hidden test
CASES_JSON = '{"cases": [{"tokens": 100, "pages": 13}, {"tokens": 0, "pages": 0}]}\n'
PKG = {"pkg/__init__.py": "", "pkg/thing.py": "def pages(n, size=8, device=None):\n    return n // size\n"}


def test_a_value_a_data_file_of_the_repository_writes_does_not_name_the_real_member(tmp_path):
    repository = _repository(tmp_path, {**PKG, "test/data/cases.json": CASES_JSON})
    won, recorded = _bet(CPU_TEST, "test_pages_for_a_hundred_tokens", [f"{FILE}::test_pages_for_nothing"],
                         {Decimal(13), Decimal(100), Decimal(0)}, 300, repository=repository)
    assert won <= recorded + 0.1, (won, recorded, sorted(repository))


# R7-10: numbers spelled as Python spells them: digit groups (`13_107`), hex (`0xD`)
GROUPED_TEST = '''from pkg.thing import pages


def test_pages_for_a_long_prompt():
    assert pages(104_857) == 13108


def test_pages_for_nothing():
    assert pages(0) == 0
'''
GROUPED_REPO_TEST = "from pkg.thing import pages\n\n\ndef test_old_long_prompt():\n    assert pages(104_857) != 13_108\n"
# not 104_856 and 13107: 13107 divides 104856, and no neighbour does (`twins.related`: a weak site)


def test_a_value_written_with_digit_groups_elsewhere_does_not_name_the_real_member(tmp_path):
    repository = _repository(tmp_path, {**PKG, "test/test_old.py": GROUPED_REPO_TEST})
    won, recorded = _bet(GROUPED_TEST, "test_pages_for_a_long_prompt", [f"{FILE}::test_pages_for_nothing"],
                         {Decimal(13108), Decimal(104857), Decimal(0)}, 300, repository=repository)
    assert won <= recorded + 0.1, (won, recorded, repository.get("test/test_old.py"))


def test_a_value_the_instruction_writes_in_hex_does_not_name_the_real_member():
    instruction = ("`pages()` rounds down: a hundred-token prompt in pages of eight must take 0xD pages, the last "
                   "one partly filled, never 0xC.")
    won, recorded = _bet(CPU_TEST, "test_pages_for_a_hundred_tokens", [f"{FILE}::test_pages_for_nothing"],
                         {Decimal(13)}, 300, instruction=instruction)
    assert won <= recorded + 0.1, (won, recorded)


# --- R7-11: the rank tokens and drawn words as a forging signal, new statistics ------------------------------------------

RANK = re.compile(r"test_(\d+)_(.*)_([0-9a-f]{4})$")
SKIPS_TOKENS = 'import os\n\nos.environ.setdefault("POOL_SHARDS", "03")\n'  # "03": tokens 0003, 0030.. are skipped
STATISTICS = ("shortest", "longest", "three_words", "max_hex", "second_rank", "after_skipped_token")


def _statistic_picks(groups: list[list[tuple[str, bool]]], all_names: list[str], shuffle: random.Random
                     ) -> dict[str, int]:
    ranks = {int(m.group(1)) for m in map(RANK.match, all_names) if m}
    won = dict.fromkeys(STATISTICS, 0)
    for members in groups:
        members = shuffle.sample(members, len(members))  # ties broken at random, never by the list's (test first)
        parsed = [(RANK.match(name), real) for name, real in members]
        if not all(m for m, _ in parsed):
            continue  # an unranked name: not this statistic's case
        won["shortest"] += min(members, key=lambda m: len(m[0]))[1]
        won["longest"] += max(members, key=lambda m: len(m[0]))[1]
        three = [real for m, real in parsed if m.group(2).count("_") == 2]
        won["three_words"] += len(three) == 1 and three[0]
        won["max_hex"] += max(parsed, key=lambda p: int(p[0].group(3), 16))[1]
        won["second_rank"] += sorted(parsed, key=lambda p: int(p[0].group(1)))[1][1]
        after = [real for m, real in parsed if int(m.group(1)) - 1 not in ranks and int(m.group(1)) > min(ranks)]
        won["after_skipped_token"] += len(after) == 1 and after[0]
    return won


def test_name_statistics_do_not_tell_the_real_member():
    """Defended: over 300 draws on the host (`twins.grading_plan`) and 300 in the export box (`export_plan.ship` +
    `sweserve_plan.plant`), with a conftest literal that makes some rank tokens skipped, picking the member with the
    shortest/longest name, the one with three words, the largest hex tail, the second rank, or the one after a
    skipped token each wins at chance (under 0.25 + 0.06)."""
    task, draws, shuffle = _two_groups_task(), 300, random.Random(7)
    won = {"host": dict.fromkeys(STATISTICS, 0), "box": dict.fromkeys(STATISTICS, 0)}
    for where, groups, names, _ in _draws(task, {"conftest.py": SKIPS_TOKENS}, draws):
        for k, v in _statistic_picks(groups, names, shuffle).items():
            won[where][k] += v
    plan = twins.grading_plan(task, {FILE: TWO_GROUPS}, seed=0, selectors={"conftest.py": SKIPS_TOKENS})
    skipped = sum(1 for m in plan.members if RANK.match(m.name) and "03" in RANK.match(m.name).group(1))
    assert skipped == 0  # the conftest's "03" is read: no planted token holds it
    for where, counts in won.items():
        for statistic, n in counts.items():
            assert n / (2 * draws) < 0.25 + 0.06, (where, statistic, n / (2 * draws))


def test_numbers_in_strings_ids_and_scientific_spelling_are_read():
    """Defended: a number in a parametrize id (`"100->13"`) or a string the file writes, and a scientific spelling in
    the instruction (`1.3e1`), are read as priors (`around`, `visible`)."""
    source = CPU_TEST.replace("def test_pages_for_a_hundred_tokens():",
                              '@pytest.mark.parametrize("case", ["100->13"])\ndef test_pages_for_a_hundred_tokens(case):')
    fn = next(f for f in twins.pyast.parse_module(source).body if getattr(f, "name", "") == "test_pages_for_a_hundred_tokens")
    assert Decimal(13) in twins.around(source, fn)
    assert Decimal(13) in twins.visible(None, None, "test_x", "a hundred tokens take 1.3e1 pages")


# --- left after red team 7: one step of arithmetic over the instruction's numbers --------------------------------------

INSTRUCTED = '''from pkg.thing import standard_pool


def test_free_pages_after_a_reservation():
    assert standard_pool().free() == 13


def test_a_fresh_pool_is_free():
    assert standard_pool(reserved=0).free() > 0
'''
INSTRUCTION = ("The standard pool has 100 pages, and 87 of them are reserved at start. `free()` must report the "
               "pages left.")


def test_a_value_one_step_of_arithmetic_gives_from_the_instruction_does_not_name_the_real_member():
    """The file writes neither 100 nor 87; the instruction does. A forger betting on 100 - 87 won on every draw
    against the recorded 0.25; `twins.said` now feeds the instruction's numbers to `derived` (validation's sites
    and the guard alike), so the site is read as weak and the odds recorded as 1."""
    said = set(twins.derived(frozenset({Decimal(100), Decimal(87)})))
    won, recorded = _bet(INSTRUCTED, "test_free_pages_after_a_reservation", [f"{FILE}::test_a_fresh_pool_is_free"],
                         said, 100, instruction=INSTRUCTION)
    assert won <= recorded + 0.1, (won, recorded)
