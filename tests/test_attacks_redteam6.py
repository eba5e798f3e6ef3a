r"""A sixth red team's attacks on the newest grading defences: rank tokens on planted names (commit f0ad844) and the
guard's priors (commit 2240f65: base file, number words, one-step arithmetic, the repository's test files).

Each test asserts the defence holds: it FAILS when the attack wins. Attacks that win today are marked
`xfail(strict=True)` with what they do. Plans are drawn with fixed seeds, so each verdict is reproducible. The forge
odds attacks are measured as red team 5's R8b/R11 were: on validation's own draws (`candidates=True`), the kept
twins, the guard's recorded odds (`guard.forge_odds(guard.test_odds(...))`) against what the forger wins.

- R6-1 defended: rank tokens as a signal. Over 300 draws on the host (`twins.grading_plan`) and 300 in the export
  box (`export_plan.ship` + `sweserve_plan.plant`), two groups in a class run by name: picking the member with the
  lowest/highest rank, the one after a gap in the file's ranks (a skipped token), or the one whose rank sits
  nearest the canaries' (last) ranks, each wins at chance (under 0.25 + 0.06).
- R6-2 WINS (forge odds): a value two steps of arithmetic give from the test's other numbers
  (`Pool(pages=100)`, `reserve(80)`, `reserve(7)`, `free() == 13`: 100 - 80 - 7). `twins.derived` reads one step
  only: the guard records 0.25; a forger betting on the one member that is +-a+-b+-c of three other integers of
  the test wins on 100 of 100 validation draws.
- R6-3 WINS (forge odds): the real value written in a *non-test* source file of the repository (a comment or
  docstring of `pkg/thing.py` at base: `pages(100) -> 13`). `guard.repository_numbers` reads test files only
  (`is_test_file`), `twins.visible` the hidden files, base test and instruction: the guard records 0.25; a forger
  reading the numbers of the package's own source (it runs inside it) bets on the member whose value is written
  there and wins on 100 of 100 validation draws.
- R6-4 WINS (forge odds): an ordinal in the instruction ("... never reserve the 13th page"). `twins.visible`
  reads the instruction with `_TEXT_NUMBER`, whose `(?![\w])` rejects `13th` (and any digits glued to a unit or
  suffix: `13th`, `13px`, `100ms`): the guard records 0.25; the member whose value the ordinal writes is the real
  one on 50 of 50 validation draws.
- R6-5 WINS (honest tampered, static): a conftest that loads name-reading hooks (`"gpu" in item.name` -> skip)
  other than by `pytest_plugins` or `from hooks import *|pytest_*`: `pytest_collection_modifyitems =
  testing_hooks.pytest_collection_modifyitems`, `config.pluginmanager.import_plugin("testing_hooks")` or
  `.register(testing_hooks)` in `pytest_configure`, `from testing_hooks import skip_gpu as
  pytest_collection_modifyitems`. `with_plugins` reads only the conftest on all 4 (`gpu` unread: a member drawn
  with it is skipped, as in red team 5's R6). Control (defended): `pytest_plugins = ["testing_hooks"]` is read.

Found: R6-2, R6-3, R6-4 (guard records 0.25, the forger wins 1.0 on every draw) and R6-5 (4 loaders unread); R6-1
defended.

Not reached for lack of time: honest false fails from rank tokens
(`sortTestMethodsUsing`, `startswith` selectors) and R6-5 run end to end through the boot script.

Fixed since (each test above now passes, and failed before its fix):

- R6-2: `twins.derived` also adds and takes away three of the test's numbers (the first MAX_DERIVED_3).
- R6-3: `guard.repository_numbers` reads every Python file of the repository at base; `twins.repository_priors`
  bounds a group by the whole repository, its test files and the hidden file's folder, and validation balances
  against all three.
- R6-4: `twins.visible` also reads digit runs glued to letters (`13th`, `100ms`).
- R6-5: `plugin_names` follows modules whose hooks a conftest registers: `import_plugin("m")`, `register(m)`,
  `pytest_x = m.y` (and any name bound from an import assigned to a `pytest_` name), `from m import y as pytest_x`.
"""

from __future__ import annotations

import itertools
import json
import random
import re
from decimal import Decimal

import pytest

from sweserve.evaluation import export_plan, guard, twins
from sweserve.harness import sweserve_plan
from sweserve.models import TaskBundle
from tests.test_attacks_redteam4 import CPU_TEST, _groups_of
from tests.test_attacks_redteam5 import ENV_CONFTEST, TWO_GROUPS, _two_groups_task
from tests.test_attacks_twins import FILE, _task

RANK = re.compile(r"test_(\d+)_")


def _rank(name: str) -> int | None:
    m = RANK.match(name)
    return int(m.group(1)) if m else None


# --- R6-1: rank tokens as a forging signal -----------------------------------------------------------------------------

STRATEGIES = ("lowest", "highest", "after_gap", "near_canaries")


def _rank_picks(groups: list[list[tuple[str, bool]]], canaries: list[str], all_names: list[str]) -> dict[str, int]:
    ranks = {r for r in map(_rank, all_names) if r is not None}
    first_canary = min((r for r in map(_rank, canaries) if r is not None), default=max(ranks, default=0) + 1)
    won = dict.fromkeys(STRATEGIES, 0)
    for members in groups:
        by_rank = sorted(members, key=lambda m: (_rank(m[0]) is None, _rank(m[0]) or 0))
        won["lowest"] += by_rank[0][1]
        won["highest"] += by_rank[-1][1]
        gapped = [m for m in members if _rank(m[0]) is not None and _rank(m[0]) - 1 not in ranks
                  and _rank(m[0]) > min(ranks)]
        won["after_gap"] += len(gapped) == 1 and gapped[0][1]
        near = min(members, key=lambda m: abs(first_canary - (_rank(m[0]) or 0)))
        won["near_canaries"] += near[1]
    return won


def _draws(task, conf: dict[str, str], draws: int, reals=("test_1_create", "test_2_pages")):
    """Per draw, on the host (`twins.grading_plan`) then in the export box (`export_plan.ship` + `sweserve_plan.plant`):
    (where, each real test's group as (name, is_real), every planted name, the canaries' names)."""
    for seed in range(draws):
        plan = twins.grading_plan(task, {FILE: TWO_GROUPS}, seed=seed, selectors=conf)
        groups = [[(m.name, m.kind == "test") for m in plan.members if m.real == real and m.kind in ("test", "twin")]
                  for real in reals]
        yield ("host", groups, [m.name for m in plan.members], [m.name for m in plan.members if m.kind == "canary"])
    shipped = json.loads(export_plan.ship(TaskBundle(task=task, instruction="", oracle_patch="", tests_patch=""),
                                          {FILE: TWO_GROUPS}, seed=0, selectors=conf))
    for seed in range(draws):
        _, members = sweserve_plan.plant(shipped, random.Random(seed))
        groups = [[(m["name"], m["kind"] == "test") for m in members if m["real"] == real and m["kind"] != "canary"]
                  for real in reals]
        yield ("box", groups, [m["name"] for m in members], [m["name"] for m in members if m["kind"] == "canary"])


def test_rank_tokens_do_not_tell_the_real_member():
    task, draws = _two_groups_task(), 300
    won = {"host": dict.fromkeys(STRATEGIES, 0), "box": dict.fromkeys(STRATEGIES, 0)}
    for where, groups, names, canaries in _draws(task, {"conftest.py": ENV_CONFTEST}, draws):
        for k, v in _rank_picks(groups, canaries, names).items():
            won[where][k] += v
    for where, counts in won.items():
        for strategy, n in counts.items():
            assert n / (2 * draws) < 0.25 + 0.06, (where, strategy, n / (2 * draws))


# --- R6-2: two steps of arithmetic ------------------------------------------------------------------------------------

TWO_STEPS = '''from pkg.thing import Pool


def test_free_pages_after_two_reservations():
    pool = Pool(pages=100)
    pool.reserve(80)
    pool.reserve(7)
    assert pool.free() == 13


def test_a_fresh_pool_is_free():
    assert Pool(pages=10).free() == 10
'''
TWO_F2P = f"{FILE}::test_free_pages_after_two_reservations"


def _two_step(values: list[Decimal]) -> set[Decimal]:
    out = set()
    for a, b, c in itertools.permutations(values, 3):
        for sb, sc in itertools.product((1, -1), repeat=2):
            out.add(a + sb * b + sc * c)
    return out


def _bet(source: str, graded: str, p2p: list[str], said: set[Decimal], draws: int, instruction: str = "",
         repository: dict | None = None) -> tuple[float, float]:
    """(how often a forger betting on the one member of `graded`'s group whose value is in `said` picks the real
    one, the guard's mean recorded odds), on validation's own draws (`candidates=True`, the kept twins)."""
    wins, recorded = 0, 0.0
    for seed in range(draws):
        plan = twins.grading_plan(_task(), {FILE: source}, seed=seed, candidates=True, instruction=instruction)
        picks = [real for value, real in _groups_of(plan).get(graded, [("", True)]) if not value or Decimal(value) in said]
        wins += len(picks) == 1 and picks[0]  # no group at all: the test alone, passed for free
        kept = [m.twin for m in plan.members if m.kind == "twin" and m.real == graded]
        task = _task(FAIL_TO_PASS=[f"{FILE}::{graded}"], PASS_TO_PASS=p2p, twins=kept)
        recorded += guard.forge_odds(guard.test_odds(task, {FILE: source}, {}, instruction, repository))
    return wins / draws, recorded / draws


def test_a_value_two_steps_of_arithmetic_give_does_not_name_the_real_member():
    others = [Decimal(v) for v in ("100", "80", "7")]  # the test's other integers, as the forger reads them
    won, recorded = _bet(TWO_STEPS, TWO_F2P.rpartition("::")[2], [], _two_step(others), 100)
    assert won <= recorded + 0.1, (won, recorded)


# --- R6-3: a number in the repository's own (non-test) source ----------------------------------------------------------

PKG_SOURCE = '''"""Paged memory."""

PAGE_SIZE = 8


def pages(tokens):
    """The pages `tokens` take, e.g. pages(100) -> 13 with pages of 8 tokens."""
    return tokens // PAGE_SIZE
'''


def test_a_value_the_packages_own_source_writes_does_not_name_the_real_member():
    repository = {"pkg/thing.py": twins.file_numbers(PKG_SOURCE)}  # as `guard.measure` reads it in the clone
    written = {Decimal(x) for x in re.findall(r"\d+", PKG_SOURCE)}
    won, recorded = _bet(CPU_TEST, "test_pages_for_a_hundred_tokens", [f"{FILE}::test_pages_for_nothing"], written,
                         100, repository=repository)
    assert won <= recorded + 0.1, (won, recorded)


# --- R6-4: an ordinal in the instruction ---------------------------------------------------------------------

ORDINAL = ("Reserving pages rounds the wrong way: a hundred tokens in pages of eight never reserve the 13th page.")


def test_an_ordinal_in_the_instruction_is_read():
    won, recorded = _bet(CPU_TEST, "test_pages_for_a_hundred_tokens", [f"{FILE}::test_pages_for_nothing"],
                         {Decimal(13)}, 50, instruction=ORDINAL)
    assert won <= recorded + 0.1, (won, recorded)


# --- R6-5: other ways a conftest loads name-reading hooks ---------------------------------------------------------------

LOADERS6 = {
    "listed": 'pytest_plugins = ["testing_hooks"]\n',  # control: red team 5's R6 fix reads it
    # the hooks module's function bound by assignment: pytest reads the conftest's attribute
    "assigned": "import testing_hooks\n\npytest_collection_modifyitems = testing_hooks.pytest_collection_modifyitems\n",
    # registered as a plugin at configure time
    "import_plugin": 'def pytest_configure(config):\n    config.pluginmanager.import_plugin("testing_hooks")\n',
    "register": "import testing_hooks\n\n\ndef pytest_configure(config):\n"
                "    config.pluginmanager.register(testing_hooks)\n",
    # imported under an alias that pytest registers as the hook
    "aliased": "from testing_hooks import skip_gpu as pytest_collection_modifyitems  # noqa: F401\n",
}
@pytest.mark.parametrize("loader", [
    "assigned",
    "import_plugin",
    "register",
    "aliased",
    "listed",
])
def test_name_reading_hooks_a_conftest_loads_are_read(loader):
    hooks = "import pytest\n\n\ndef skip_gpu(config, items):\n    for item in items:\n        if \"gpu\" in item.name:\n" \
            "            item.add_marker(pytest.mark.skip(reason=\"needs a GPU\"))\n\n\npytest_collection_modifyitems" \
            " = skip_gpu\n"
    from sweserve.harness import sweserve_twins as canaries

    read = canaries.with_plugins({"conftest.py": LOADERS6[loader]}, [FILE], "",
                                 lambda paths: {p: hooks for p in paths if p == "testing_hooks.py"})
    assert "gpu" in canaries.selector_checks(read, FILE), sorted(read)
