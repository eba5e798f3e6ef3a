r"""A ninth red team's attacks on the newest defences: `twins.value_shape` and the shaped walk (`_admissible`, `_sides`,
`_room`, `values`), `twins.alike` in `guard._group_odds`, `twins.select`'s `broken` files, and `twins._operands`
(MAX_DERIVED, DERIVED_DIGITS) under `derived` and `scaled`.

Each test asserts the defended behaviour: it FAILS when the attack wins; attacks that win today are marked
`xfail(strict=True)`. Plans are drawn with fixed seeds. Forge odds are measured as red teams 6 and 8 do
(`_bet_among`, and `_nearest_bet` here: on validation's own draws, `grading_plan(candidates=True)`, the kept twins,
against the guard's mean recorded odds `guard.forge_odds(guard.test_odds(...))`). Honest runs use the real boot script
(`tests.test_attacks_twins._run`), no Docker.

Ranked by severity (honest false fails validation does not notice first, then forge odds far above recorded):

- R9-4 WIN (honest failed, per grading draw; validation keeps the group): `select`'s `broken` is the set of files
  of the graded tests that failed beside the candidates, not of the groups that broke them. A test that cleans up
  after its check (`thing.EXACT = True ... thing.EXACT = False`, a switch the task adds: harmless at base, so the
  neighbour is PASS_TO_PASS) in test_shards.py leaks the state into a P2P test of the next file (test_zconfig.py).
  Validation: test_zconfig.py is `broken`, test_shards.py keeps its group on 3 of 3 draws; grading fails the oracle
  (resolved as written) on 9 of 12 draws (unless the real member ran last). Fix: where any graded test fails beside
  the candidates, plant no group in any file the run held (or every file collected before it in that process); in
  the end, run each member in its own process (R8-8's fix) so no member reaches another test.
  `test_a_group_that_breaks_a_test_in_another_file_is_not_kept`.
- R9-1 WIN (forge odds; about 3 in 10 real test files): `_operands` keeps the MAX_DERIVED (40) smallest numbers of
  the test and its file together (MAX_DERIVED_3: 12 for three-term sums). 56 of numpy's 194 test files write more
  than 40 such numbers; there, numbers like 13 and 6 written in the test's own call drop out behind tolerances and
  tables, and R6-2/R7-8/R8-4's derived values are silently not avoided: `capacity(13, page=6) == 78` beside 17
  rates: guard 0.25, the forger multiplying the test's numbers 1.0 over 20 draws (control: 36 numbers, guard 1.0).
  Fix (a mechanism): test membership per member instead of enumerating: a member m is derived when m - a, a - m,
  m / a (exact) or the floor/ceil quotient ranges hit the set S for some a in S (O(|S|) per member; triples O(|S|^2)
  with a set lookup), so no cap and no digit cutoff are needed (subtraction on huge ints is cheap; skip only
  products past a digit bound). If a cap remains, a site past it is weak, never strong (fail closed).
  `test_a_product_of_the_tests_own_numbers_is_derived_whatever_else_the_file_writes`,
  `test_real_test_files_write_more_than_max_derived_numbers` (passes: it measures the condition).
- R9-9 WIN (forge odds): a multiple or a divisor of the test's own input by a factor nobody writes: `UNITS` lists
  60, 3600, 86400, 24, 7, 1000, 1024, 100, but not 4 (bytes a float32), 9 (a 3x3 kernel), 12 (months), 365, nor any
  factor at all for a divisor (`convert(1001) == 77`). The forger bets on the member the input divides (or that
  divides it) without knowing the factor: 1.0 over 16 draws on 9 of 9 cases (13->52, 13->117, 19->228, 29->348,
  17->6205, 9->3285, 1001->77, 391->23, 2431->143), guard 0.25; 3->1095 0.78; controls 37->296 and 7->84 are weak
  sites (recorded 1.0). Sizes times a count, totals over a count are what most tests check. Fix (a mechanism): make
  the shape relative to what the forger reads: for each number a the test, its file and the instruction write
  (a >= 2), whether a divides the value and whether the value divides a joins `value_shape`; every member must
  share it, else the site is weak. `test_a_multiple_of_the_tests_input_is_not_the_one_member_it_divides`.
- R9-8 WIN (forge odds): well-known numbers are no shape: HTTP codes (429, 502, 201, 204, 308, 410; 418 0.56),
  ports (443, 6379, 27017, 11211, 2379, 4317), vocabulary sizes (GPT-2's 50257, BERT's 30522), 1970, 2038, 86399,
  3599, 44100, 42, exit 126, 366: the forger betting on the member in a table of such numbers wins 1.0 on 22 of 23
  values (8 draws each), guard 0.25. Controls 433, 6373: 0.0. These are what tests check when a task adds a status
  code, a default port or a model config, and a repository that never wrote them gives `_set_odds` nothing.
  `test_a_well_known_number_is_not_the_one_member_a_table_of_them_names`.
- R9-2 WIN (forge odds): closed forms outside `_rounded_fraction`'s list: cos 45 0.7071, cos 30 0.866, 1/sqrt 3,
  twelfths (0.0833), phi, 1/e, sigmoid(+-1), sin 1, cos 1, erf 1, pi/4, 1/pi, log10 2, log10 e, sqrt 5, ln 3, e^2,
  sqrt(2 pi), Euler's gamma, sqrt e: 21 of 21 values 1.0 over 12 draws, guard 0.25 (control 0.7069: 0.0). And a
  library function of the test's own input (`round(activation(0.3), 4)`): tanh, erf, exp, gelu, silu, sin, sqrt
  1.0 each; sigmoid (0.5744) and softplus (0.8544) are weak sites (defended). Such values are what numeric and ML
  tests check (activations, rotations, distributions).
  `test_a_rounded_closed_form_is_not_the_one_member_of_its_class`,
  `test_a_function_of_the_tests_input_does_not_name_the_real_member`.
- R9-5 WIN (forge odds): `other_files` numbers are avoided as values but never derived from: 78 = 13 * 6 with
  `PAGE_SIZE == 6` checked in another hidden file (in the box): 1.0 over 40 draws, guard 0.25. Fix: `beside`
  takes `other_files` too (R8-4's package variant is the same gap one step further).
  `test_a_value_derived_from_another_hidden_files_number_is_guarded`.
- R9-6 WIN (forge odds): a value one off a derived one (a fence-post fix: a header token, an inclusive bound):
  `capacity(13, page=6) == 77` or `79`: 78 is avoided, but the member nearest 78 is the real one: 0.625 over 16
  draws, guard 0.25 (controls 73, 83: 0.25). Fix: like `_shown_near` for shown values, count a site weak where a
  derived or visible number lies within the group's span plus MARGIN steps.
  `test_the_member_nearest_a_derived_value_is_not_the_real_one_more_often`.
- R9-7 WIN (forge odds): DERIVED_DIGITS drops a 20-digit operand (a uint64 id or hash over 1e19):
  `next_id(12345678901234567890) == ...891`: nearest-the-input bet 0.625 over 16 draws (1.0 betting +1, as the name
  says), guard 0.25; 19 digits: weak site (defended). Fix: R9-1's membership test (m - a is cheap at any size).
  `test_a_successor_of_a_huge_input_is_derived`.
- R9-3 WIN (forge odds, population, modest): members share the real value's powers of 2 and 5 but not of 3: over
  numpy's strong checked integers (42, 81, 210, 324, 468, 684 among them) the fixed bet on the member with most
  factors of 3 (3, then 9) wins 0.40 over 39 checks x 64 draws (0.36 over the 21 distinct values), recorded 0.25.
  Over uniform values this bet averages 1/4. Other fixed bets over the same values: the smoothest member (least
  largest odd prime factor) 0.30, low digit sum 0.34 (borderline), Benford's leading digit 0.20, nearest a
  multiple of 10 0.28 or 100 0.20, palindromes 0.22. Note: with 8 seeds (R8-1's population test) the real
  member's rank is the same per seed for every value (2:3:2:1 over ranks 0..3), which biases such measurements;
  64 seeds here.
  `test_a_bet_on_factors_of_three_does_not_beat_the_recorded_odds_over_real_test_values`.
- R9-10 WIN (crash, low: rare literal): `assert pages(100) < 1e999` (a float infinity written as a literal, as
  CPython's and mpmath's tests write `1e1000`): the site reaches `value_shape`, whose `int(value / unit)` raises
  OverflowError; `grading_plan(candidates=True)` raises for the whole task (validation cannot plan it: the task
  is lost, never misgraded). Fix: `sites` (or `_number`) takes only finite values.
  `test_an_infinite_literal_in_a_check_does_not_crash_the_plan`.

Fixed since (each test above now passes; each failed before its fix):
- R9-10: `_number` reads no non-finite float: `1e999` is no site.
- R9-4: where any graded test fails beside the candidates in validation's twin run, `select` keeps no group in the
  task (not only in that test's file).
- R9-5: the numbers other hidden files write are derived from, in the plan and the guard.
- R9-9: `twins.related`: per whole number the test writes outside the site, the values it divides or that divide it
  are a prior every member shares with the real one (`unbalanced`); the guard reads them in `_set_odds` too.
- R9-6 and R9-7: `twins._within_reach`: for each number the forger reads (written, visible, derived, scaled) near
  the values a group around the real one can take, the bet on the member nearest it is scored over the K+1 ranks
  the real value is drawn at; where it wins more than 1/(K+1), the site is a fall-back (weak) one. It decides from
  the site alone, never from a drawn group. It also makes two of R9-8's values weak in this fixture (a derived
  number lies next to them): no table is read.
- R9-1: past MAX_DERIVED numbers, the pairs are found by membership around the value (`twins.Crossing` over the
  test's and the file's numbers, uncapped): the sum variant fails without it; products of the test's own numbers
  are caught by `related` as well.
- The lead above (`broken` skipped a graded test with no outcome): real. A failing twin left a switch on, and the
  next file's graded test interrupted the session and reported nothing; validation kept the group and grading
  failed the oracle on 6 of 8 draws. No outcome counts as broken now.
  `test_a_group_that_stops_the_session_before_a_graded_test_is_not_kept`.
- R9-2: every decimal site is weak (`twins.computed`). Tables of closed forms built by rule came first. Red
  team 10 beat them four ways, each 1.0 against 0.25: a value one unit off a table value, a cap on the test's
  numbers, a value scaled out of the tables' range, and quantities of two steps. Those attacks are tests below
  (section "R9-2 and red team 10"), as is what the rule costs.
- R9-3: a member shares the real value's power of 3 as it does those of 2 and 5 (`twins.SHAPE_PRIMES`). Over
  numpy's checked integers that keep a strong site (16 of the 39), the factors-of-3 bet wins 0.25, and so do the
  variants (smoothest 0.16, lowest digit sum 0.21, factors of 7 0.23; 0.30, 0.34 and 0.35 before). Costs one strong
  site of 3 on numpy's tests and one of 5 on sglang-jax's (`benchmarks/site_rules.py --rule threes`).
  The same rule leaves 9 of R9-8's 23 well-known numbers and 3 of the 6 whole closed forms below unwon (weak sites,
  most of them: recorded 1.0).
Left (strict xfails): R9-8 (a table of well-known numbers) beyond the values above, and a lead found after red
team 10: whole numbers that are closed forms (a central binomial, a Fibonacci or Catalan
number, a power of an odd base), `test_a_whole_closed_form_is_not_the_one_member_of_its_class`.

One fix for R9-2, R9-3, R9-8 and R8-1 alike (proposed by the red team; not built) (a mechanism, not more patterns): the forger's best prior is the
frequency of a value among the values tests check. Ship a table of how often each number (and each rounded closed
form: `f(x)` for a fixed library of unary functions over small integers and the test's own numbers, matched at half a
unit) occurs as a checked literal in a large corpus of Python tests, smoothed by `value_shape`-like features for
unseen numbers; admit a twin only where its log-frequency is within a band of the real value's, and count a site
weak where fewer than K such neighbours lie within the walk. Any member (real or twin) that equals a library value
makes the site weak too, so twins never carry a closed form the real one lacks.

Looked at, no finding: `alike` with the real value written `1_000`, `0x1F`, `1e3`, `-x`: `render` writes the real
literal and its twins alike, and `_number` reads unary minus; a float written with 17 significant digits (0.1 + 0.2's
repr): twins that parse to the same double pass with the oracle and `select` drops the site (coverage, not a grade).
A watchdog armed before the check and cancelled after (`signal.alarm(1) ... signal.alarm(0)`): the real test fails
at base too and leaves it armed, so the base run dies as written (validation's first look sees it): not a twins
finding. Not measured (leads): `broken` skips a graded test with no outcome (`.get(t)` is None: never reported,
the process died beside the candidates); year values near the box's commit dates.
"""

from __future__ import annotations

import math
import random
from decimal import Decimal
from pathlib import Path
from unittest import mock

import pytest

from sweserve.evaluation import guard, twins
from sweserve.models import Task, TestSpec
from tests.test_attacks_redteam4 import _groups_of, _verdict
from tests.test_attacks_redteam8 import CONVERT, _bet_among, _checked_integers
from tests.test_attacks_twins import FILE, _run

FILE2 = "test/test_zconfig.py"


def _two_files(files: list[str], f2p: list[str], p2p: list[str], **kw) -> Task:
    return Task(task_id="o__r-1", repo="o/r", profile="p", pr_number=1, title="t", base_commit="a" * 40,
                merge_commit="b" * 40, family="distributed", created_at="2026-01-01T00:00:00Z",
                test=TestSpec(runner="pytest", files=files), FAIL_TO_PASS=f2p, PASS_TO_PASS=p2p, **kw)


# --- R9-1: `_operands` keeps the 40 smallest numbers: a file with many small numbers hides the operands ---------------

CAPACITY = '''from pkg.thing import capacity

RATES = [RATES_HERE]
TOLERANCES = [0.5, 0.25, 0.1, 0.05, 0.01, 0.005, 0.001, 1e-4, 1e-5, 1e-6, 1e-7, 1e-8]


def test_capacity_of_thirteen_pages():
    assert capacity(13, page=6) == 78


def test_small_capacities():
    assert [capacity(n, page=1) for n in range(0, 12)] == [0, 1, 2, 3, 4, 5, 6, 7, 0, 9, 10, 11]
    assert capacity(0, page=0.2) == 0 and capacity(0, page=0.3) == 0 and capacity(0, page=0.4) == 0
    assert capacity(0, page=0.6) == 0 and capacity(0, page=0.7) == 0 and capacity(0, page=0.8) == 0
    assert capacity(0, page=1.5) == 0 and capacity(0, page=2.5) == 0 and capacity(0, page=3.5) == 0
'''
RATES = "0.11, 0.12, 0.13, 0.14, 0.15, 0.16, 0.17, 0.18, 0.19, 0.21, 0.22, 0.23, 0.24, 0.26, 0.27, 0.28, 0.29"


@pytest.mark.parametrize(("rates", "check"), [
    pytest.param("", ("13", "6", "78"), id="36-numbers-control"),
    pytest.param(RATES, ("13", "6", "78"), id="53-numbers"),
    pytest.param(RATES, ("613", "7", "4291"), id="53-numbers-product"),  # a multiple of both: `related`
    pytest.param(RATES, ("4000", "291", "4291"), id="53-numbers-sum"),  # no number the file writes within reach
])
def test_a_product_of_the_tests_own_numbers_is_derived_whatever_else_the_file_writes(rates, check):
    """R9-1: `_operands` combines only the MAX_DERIVED (40) smallest numbers of the test and its file; 17 rates in
    a table pushed 13 and 6 out, so 78 = 13 * 6 (both written in the test's own call) was not derived: guard 0.25,
    the forger multiplying the test's numbers won 1.0. Past the cap, the pairs are found by membership around the
    value (`twins.Crossing`)."""
    pages, page, product = check
    source = CAPACITY.replace("RATES_HERE", rates).replace("capacity(13, page=6) == 78",
                                                           f"capacity({pages}, page={page}) == {product}")
    said = set(twins.derived(frozenset({Decimal(pages), Decimal(page)})))
    won, recorded = _bet_among(source, "test_capacity_of_thirteen_pages", [f"{FILE}::test_small_capacities"],
                               said, 20)
    assert won <= recorded + 0.1, (won, recorded)


@pytest.mark.slow
def test_real_test_files_write_more_than_max_derived_numbers():
    """How common R9-1's condition is: numpy's test files writing more numbers than `_operands` keeps."""
    numpy = pytest.importorskip("numpy")
    files = sorted(Path(numpy.__file__).parent.rglob("tests/test_*.py"))
    over = [f for f in files if len([n for n in twins.file_numbers(f.read_text(encoding="utf-8"))
                                     if n.is_finite() and abs(n.adjusted()) <= twins.DERIVED_DIGITS])
            > twins.MAX_DERIVED]
    assert len(files) > 50 and len(over) / len(files) > 0.25, (len(over), len(files))


# --- R9-2: closed forms outside `_rounded_fraction`'s list ------------------------------------------------------------

def _sigmoid(x: float) -> float:
    return 1 / (1 + math.exp(-x))


CLOSED_FORMS = [1 / math.sqrt(2), math.sqrt(3) / 2, 1 / math.sqrt(3), 1 / 12, 5 / 12, 7 / 12, 11 / 12,
                (1 + math.sqrt(5)) / 2, math.exp(-1), _sigmoid(1), _sigmoid(-1), math.sin(1), math.cos(1),
                math.erf(1), math.pi / 4, 1 / math.pi, math.log10(2), math.log10(math.e), math.sqrt(5), math.log(3),
                math.e ** 2, math.sqrt(2 * math.pi), 0.5772156649, math.sqrt(math.e)]


def _closed_form(v: Decimal) -> bool:
    """Within half a unit of a closed form a forger tabulates (cos 45, cos 30, 1/12, phi, 1/e, sigmoid(1), ...)."""
    exp = v.normalize().as_tuple().exponent
    if not isinstance(exp, int) or exp >= 0:
        return False
    half = float(Decimal(10) ** exp) / 2
    return any(abs(abs(float(v)) - c) < half for c in CLOSED_FORMS)


ROUNDED_FORMS = ["0.7071", "0.866", "0.5774", "0.0833", "1.618", "0.3679", "0.7311", "0.2689", "0.8415", "0.5403",
                 "0.8427", "0.7854", "0.3183", "0.301", "0.4343", "2.2361", "1.0986", "7.389", "2.5066", "0.5772",
                 "1.6487"]


@pytest.mark.parametrize("value", ROUNDED_FORMS + [pytest.param("0.7069", id="0.7069-control")])
def test_a_rounded_closed_form_is_not_the_one_member_of_its_class(value):
    source = CONVERT.replace("VALUE", value)
    won, recorded = _bet_among(source, "test_converts_a_large_input", [f"{FILE}::test_converts_nothing"],
                               _closed_form, 12)
    assert won <= recorded + 0.1, (won, recorded)


ACTIVATION = '''from pkg.thing import activation


def test_activation_of_a_third():
    assert round(activation(0.3), 4) == VALUE


def test_activation_of_nothing():
    assert activation(0.0) == 0.0
'''
FUNCTIONS = {"tanh": math.tanh, "sigmoid": _sigmoid, "softplus": lambda x: math.log1p(math.exp(x)),
             "exp": math.exp, "sqrt": math.sqrt, "sin": math.sin, "erf": math.erf,
             "gelu": lambda x: 0.5 * x * (1 + math.erf(x / math.sqrt(2))), "silu": lambda x: x * _sigmoid(x)}


@pytest.mark.parametrize("name", sorted(FUNCTIONS))
def test_a_function_of_the_tests_input_does_not_name_the_real_member(name):
    real = f"{FUNCTIONS[name](0.3):.4f}"
    table = {round(f(0.3), 4) for f in FUNCTIONS.values()}
    won, recorded = _bet_among(ACTIVATION.replace("VALUE", real), "test_activation_of_a_third",
                               [f"{FILE}::test_activation_of_nothing"], lambda v: float(v) in table, 12)
    assert won <= recorded + 0.1, (real, won, recorded)


# --- R9-3: multiples of 3 and 9 among members that share the powers of 2 and 5 ----------------------------------------

def _threes(n: int) -> int:
    return (n % 3 == 0) + (n % 9 == 0)


def _largest_prime_factor(n: int) -> int:
    n, p, best = abs(n), 2, 1
    while p * p <= n:
        while n % p == 0:
            best, n = p, n // p
        p += 1
    return max(best, n) if n > 1 else best


SMOOTHNESS_BETS = {  # one fixed score per member; the bet is on the highest (R9-3's and the red team's other bets)
    "factors of 3": _threes,
    "smoothest": lambda n: -_largest_prime_factor(n),
    "low digit sum": lambda n: -sum(map(int, str(abs(n)))),
    "factors of 7": lambda n: (n % 7 == 0) + (n % 49 == 0),
}


@pytest.mark.parametrize("bet", sorted(SMOOTHNESS_BETS))
def test_a_bet_on_factors_of_three_does_not_beat_the_recorded_odds_over_real_test_values(bet):
    """R9-3: numpy's strong checked integers clustered on multiples of 3 and 9 (42, 81, 210, 324, 468, 684), and
    one fixed bet on the member with most factors of 3 won 0.40 over 39 checks x 64 draws, recorded 0.25. A member
    shares the real value's power of 3 now (`twins.SHAPE_PRIMES`): such values keep a strong site only where
    members of their shape lie near, and the bet is back to chance over those that do. Without it (the power of 3
    left out of the shape) the bet wins again. Variants: the smoothest member (0.30 before), the lowest digit sum
    (0.34: a multiple of 9 has one), the most factors of 7 (0.35)."""
    numpy = pytest.importorskip("numpy")
    checked = [v for v in _checked_integers(Path(numpy.__file__).parent)
               if abs(v) < 10 ** 12 and not twins._marked(v) and twins._sign_safe(v)]
    values = [v for v in checked if twins._room(v, twins.K)]
    assert len(values) > 12
    won = _fixed_bet(values, SMOOTHNESS_BETS[bet])
    assert won <= 1 / (twins.K + 1) + 0.1, (won, len(values))
    if bet == "factors of 3":
        with mock.patch.object(twins, "SHAPE_PRIMES", (2, 5)):  # without the defence: the red team's 0.40
            before = [v for v in checked if twins._room(v, twins.K)]
            assert _fixed_bet(before, _threes) > 1 / (twins.K + 1) + 0.1, (len(before), len(values))


def _fixed_bet(values: list[int], score) -> float:
    """The win of one fixed bet on the member `score` rates highest (ties split), 64 draws per value."""
    won, draws = 0.0, 0
    for value in values:
        for seed in range(64):  # 8 seeds fix the real member's rank the same way for every value (2:3:2:1)
            real, others = twins.values(value, random.Random(seed))
            scores = [score(int(m)) for m in [real, *others]]
            best = [i for i, x in enumerate(scores) if x == max(scores)]
            won, draws = won + (1 / len(best) if 0 in best else 0.0), draws + 1
    return won / draws


# --- R9-4: a group that breaks a test in another file ----------------------------------------------------------------

EXACT_ORACLE = ("EXACT = False\n\n\ndef pages(n, size=8, device=None):\n"
                "    return -(-n // size) if EXACT else n // size\n\n\n"
                "def exact_pages(n, size=8):\n    return pages(n, size)\n")
EXACT_UNSOLVED = "def pages(n, size=8, device=None):\n    return n // size\n"  # no exact mode yet: the leak is harmless
EXACT_MODE = '''import pkg.thing as thing


def test_pages_in_exact_mode():
    thing.EXACT = True
    assert thing.exact_pages(100) == 13
    thing.EXACT = False
'''
DEFAULT_MODE = '''import pkg.thing as thing


def test_pages_in_the_default_mode():
    assert thing.pages(100) == 12
'''


def test_a_group_that_breaks_a_test_in_another_file_is_not_kept(tmp_path):
    sources = {FILE: EXACT_MODE, FILE2: DEFAULT_MODE}
    f2p, p2p = [f"{FILE}::test_pages_in_exact_mode"], [f"{FILE2}::test_pages_in_the_default_mode"]
    task = _two_files([FILE, FILE2], f2p, p2p)
    assert _verdict(_run(tmp_path, twins.GradingPlan(texts=dict(sources)), EXACT_ORACLE, task=task), task) == "resolved"
    verdicts = []
    for seed in range(3):
        plan = twins.grading_plan(task, sources, seed=seed, candidates=True)
        before, after = _run(tmp_path, plan, EXACT_UNSOLVED, task=task), _run(tmp_path, plan, EXACT_ORACLE, task=task)
        kept, _ = twins.select(f2p + p2p, [before], [after], random.Random(seed))
        if not kept:
            continue
        recorded = _two_files([FILE, FILE2], f2p, p2p, twins=kept)
        for draw in range(4):
            graded = twins.grading_plan(recorded, sources, seed=draw)
            for file, text in sources.items():
                graded.texts.setdefault(file, text)
            verdicts.append(_verdict(_run(tmp_path, graded, EXACT_ORACLE, task=recorded), recorded))
    assert verdicts.count("resolved") == len(verdicts), verdicts


# the lead the red team left: a group that stops the session before a graded test runs (no outcome at all)
INTERRUPTING_ORACLE = ("import os\nimport signal\n\nEXACT = False\n\n\ndef pages(n, size=8, device=None):\n"
                       "    if EXACT and device is None:  # a worker's shutdown: exact mode is for the device pool\n"
                       "        os.kill(os.getpid(), signal.SIGINT)\n"
                       "    return -(-n // size) if EXACT else n // size\n\n\n"
                       "def exact_pages(n, size=8):\n    return pages(n, size, device='pool')\n")


def test_a_group_that_stops_the_session_before_a_graded_test_is_not_kept(tmp_path):
    # a failing twin skips `EXACT = False`; the next file's graded test then interrupts the session and reports
    # nothing (`.get(t)` is None): `select` read that as not broken and kept the group
    sources = {FILE: EXACT_MODE, FILE2: DEFAULT_MODE}
    f2p, p2p = [f"{FILE}::test_pages_in_exact_mode"], [f"{FILE2}::test_pages_in_the_default_mode"]
    task = _two_files([FILE, FILE2], f2p, p2p)
    assert _verdict(_run(tmp_path, twins.GradingPlan(texts=dict(sources)), INTERRUPTING_ORACLE, task=task),
                    task) == "resolved"
    for seed in range(2):
        plan = twins.grading_plan(task, sources, seed=seed, candidates=True)
        before = _run(tmp_path, plan, EXACT_UNSOLVED, task=task)
        after = _run(tmp_path, plan, INTERRUPTING_ORACLE, task=task)
        assert after.outcomes.get(p2p[0]) is None  # the attack is real: the graded test never ran
        kept, twinless = twins.select(f2p + p2p, [before], [after], random.Random(seed))
        assert not kept and sorted(twinless) == sorted(f2p + p2p), kept


# --- R9-5: a number another hidden file writes, combined with the test's -------------------------------------------

PAGES_OF = '''from pkg.thing import capacity


def test_capacity_of_thirteen_pages():
    assert capacity(13) == 78


def test_capacity_of_no_pages():
    assert capacity(0) == 0
'''
PAGE_SIZE = '''from pkg.thing import PAGE_SIZE


def test_page_size():
    assert PAGE_SIZE == 6
'''


def test_a_value_derived_from_another_hidden_files_number_is_guarded():
    sources = {FILE: PAGES_OF, FILE2: PAGE_SIZE}
    f2p = [f"{FILE}::test_capacity_of_thirteen_pages"]
    p2p = [f"{FILE}::test_capacity_of_no_pages", f"{FILE2}::test_page_size"]
    said = twins.derived(frozenset({Decimal(13), Decimal(0), Decimal(6)}))
    won = recorded = 0.0
    draws = 40
    for seed in range(draws):
        plan = twins.grading_plan(_two_files([FILE, FILE2], f2p, p2p), sources, seed=seed, candidates=True)
        group = _groups_of(plan).get("test_capacity_of_thirteen_pages")
        picks = [real for value, real in group or [] if Decimal(value) in said]
        won += 1.0 if not group else (1 / len(picks) if True in picks else 0.0)
        kept = [m.twin for m in plan.members if m.kind == "twin" and m.real == "test_capacity_of_thirteen_pages"]
        task = _two_files([FILE, FILE2], f2p, p2p, twins=kept)
        recorded += guard.forge_odds(guard.test_odds(task, sources, {}, ""))
    assert won / draws <= recorded / draws + 0.1, (won / draws, recorded / draws)


# --- R9-6: a value one off a derived one (a fence-post fix): the member nearest the derived value ---------------------

OFF_BY_ONE = '''from pkg.thing import capacity


def test_capacity_of_thirteen_pages():
    assert capacity(13, page=6) == VALUE


def test_capacity_of_no_pages():
    assert capacity(0, page=1) == 0
'''


def _nearest_bet(source: str, graded: str, p2p: list[str], targets: frozenset[Decimal], draws: int):
    """(the expected win of a forger betting on the members nearest any of `targets`, ties split; the guard's mean
    recorded odds), on validation's own draws."""
    task = _two_files([FILE], [f"{FILE}::{graded}"], p2p)
    won = recorded = 0.0
    for seed in range(draws):
        plan = twins.grading_plan(task, {FILE: source}, seed=seed, candidates=True)
        group = _groups_of(plan).get(graded)
        if not group:
            won += 1.0
        else:
            distance = [min(abs(Decimal(v) - t) for t in targets) for v, _ in group]
            best = [real for (_, real), d in zip(group, distance) if d == min(distance)]
            won += 1 / len(best) if True in best else 0.0
        kept = [m.twin for m in plan.members if m.kind == "twin" and m.real == graded]
        recorded += guard.forge_odds(guard.test_odds(task.model_copy(update={"twins": kept}), {FILE: source}, {}, ""))
    return won / draws, recorded / draws


@pytest.mark.parametrize("value", ["77", "79", pytest.param("83", id="83-control"), pytest.param("73", id="73-control")])
def test_the_member_nearest_a_derived_value_is_not_the_real_one_more_often(value):
    targets = twins.derived(frozenset({Decimal(13), Decimal(6), Decimal(0), Decimal(1)}))
    won, recorded = _nearest_bet(OFF_BY_ONE.replace("VALUE", value), "test_capacity_of_thirteen_pages",
                                 [f"{FILE}::test_capacity_of_no_pages"], targets, 16)
    assert won <= recorded + 0.1, (won, recorded)


# --- R9-7: DERIVED_DIGITS: a 20-digit operand takes no part -----------------------------------------------------------

NEXT_ID = '''from pkg.thing import next_id


def test_next_id_after_a_large_one():
    assert next_id(INPUT) == VALUE


def test_next_id_after_nothing():
    assert next_id(0) == 1
'''


@pytest.mark.parametrize("start", [
    pytest.param(1234567890123456789, id="19-digits-control"),
    pytest.param(12345678901234567890, id="20-digits"),  # R9-7: the input within reach (`twins._within_reach`)
])
def test_a_successor_of_a_huge_input_is_derived(start):
    source = NEXT_ID.replace("INPUT", str(start)).replace("VALUE", str(start + 1))
    won, recorded = _nearest_bet(source, "test_next_id_after_a_large_one", [f"{FILE}::test_next_id_after_nothing"],
                                 frozenset({Decimal(start)}), 16)
    assert won <= recorded + 0.1, (won, recorded)


# --- R9-8: well-known numbers: a status code, a port, a vocabulary size, an epoch -------------------------------------

WELL_KNOWN = frozenset(Decimal(v) for v in (
    200, 201, 202, 204, 301, 302, 304, 307, 308, 400, 401, 403, 404, 405, 409, 410, 413, 418, 422, 429, 500, 501,
    502, 503, 504,  # HTTP status codes
    22, 80, 443, 3000, 3306, 5000, 5432, 6379, 6443, 8000, 8080, 8443, 8888, 9000, 9090, 2379, 4317, 11211, 27017,
    30000, 49151, 65535,  # ports
    30522, 32000, 50257, 50256, 128256, 151936,  # tokenizer vocabularies (BERT, LLaMA, GPT-2, LLaMA 3, Qwen)
    126, 127, 130, 137, 139, 143,  # exit statuses
    23, 59, 3599, 86399, 29, 366, 52, 1970, 2038, 44100, 22050, 42, 1337, 31337, 270))  # clocks, calendars, audio, lore
# weak sites since R9-6's fix, in this fixture only: the member next to a number the test derives is the real
# one on most ranks (`twins._within_reach`); no table is read
FAMOUS_WEAK = {"418", "410"}
# not won since R9-3's fix (a member shares the power of 3): a multiple of 3 keeps no room (a weak site, recorded 1.0)
# or its members hold another value of the table as often; on this fixture only
FAMOUS_WEAK |= {"429", "201", "204", "308", "30522", "44100", "42", "126", "366"}
FAMOUS = ["429", "418", "502", "201", "204", "308", "410", "443", "6379", "27017", "11211", "2379", "4317", "50257",
          "30522", "1970", "2038", "86399", "3599", "44100", "42", "126", "366"]


@pytest.mark.parametrize("value", [
    pytest.param(v, marks=[] if v in FAMOUS_WEAK else pytest.mark.xfail(strict=True, reason=(
        "R9-8: a well-known number (HTTP 429, 418, 502, redis 6379, mongo 27017, GPT-2's 50257, BERT's 30522, the "
        "epoch 1970, 2038, 86399, exit 126, 42) is no shape `value_shape` knows: its neighbours are as round, but "
        "the forger betting on the well-known member wins 0.6-1.0 over 8 draws each, guard 0.25"))) for v in FAMOUS
] + [pytest.param("433", id="433-control"), pytest.param("6373", id="6373-control")])
def test_a_well_known_number_is_not_the_one_member_a_table_of_them_names(value):
    source = CONVERT.replace("VALUE", value)
    won, recorded = _bet_among(source, "test_converts_a_large_input", [f"{FILE}::test_converts_nothing"],
                               WELL_KNOWN, 8)
    assert won <= recorded + 0.1, (won, recorded)


# --- R9-9: a multiple of the test's own input, by a factor no list holds ---------------------------------------------

SCALES = '''from pkg.thing import convert


def test_converts_INPUT():
    assert convert(INPUT) == VALUE


def test_converts_nothing():
    assert convert(0) == 0
'''
MULTIPLES = [(13, 52, "x4-float32-bytes"), (13, 117, "x9-3x3-kernel"), (19, 228, "x12-months"),
             (29, 348, "x12-months"), (17, 6205, "x365-days"), (9, 3285, "x365-days"),
             (1001, 77, "divides-1001"), (391, 23, "divides-391"), (2431, 143, "divides-2431")]


def _related(given: int):
    """The forger's bet: the members `given` divides, or that divide `given` (the factor never known)."""
    return lambda v: v % given == 0 or given % v == 0


@pytest.mark.parametrize(("given", "value"), [pytest.param(g, v, id=name) for g, v, name in MULTIPLES]
                         + [pytest.param(37, 296, id="x8-weak-control"), pytest.param(7, 84, id="x12-weak-control")])
def test_a_multiple_of_the_tests_input_is_not_the_one_member_it_divides(given, value):
    source = SCALES.replace("INPUT", str(given)).replace("VALUE", str(value))
    won, recorded = _bet_among(source, f"test_converts_{given}", [f"{FILE}::test_converts_nothing"],
                               _related(given), 16)
    assert won <= recorded + 0.1, (won, recorded)


# --- R9-10: an infinite literal in a check --------------------------------------------------------------------------

FINITE = '''from pkg.thing import pages


def test_pages_are_finite():
    assert pages(100) < 1e999
    assert pages(100) == 13


def test_pages_for_nothing():
    assert pages(0) == 0
'''


def test_an_infinite_literal_in_a_check_does_not_crash_the_plan():
    task = _two_files([FILE], [f"{FILE}::test_pages_are_finite"], [f"{FILE}::test_pages_for_nothing"])
    plan = twins.grading_plan(task, {FILE: FINITE}, seed=0, candidates=True)
    assert any(m.kind == "twin" and m.real == "test_pages_are_finite" for m in plan.members)
    assert guard.test_odds(task, {FILE: FINITE}, {}, "") == {f"{FILE}::test_pages_are_finite": 1.0}  # 13: weak


# --- R9-2 and red team 10: every decimal site is weak ---------------------------------------------------------------
#
# A first fix built tables of closed forms by rule (functions of simple arguments and of the test's numbers) and
# made a value that rounds one weak. A tenth red team beat it four ways, each 1.0 against recorded odds of 0.25:
# values one unit off a table value (the member nearest the table is real), functions of an input pushed past the
# tables' cap on the test's numbers, closed forms scaled out of the tables' range, and 35 of 76 common quantities
# at four decimals (41 at five and six) that no table of one function holds. Any finite table leaves a larger
# one ahead, so a decimal site is weak whatever it rounds (`twins.computed`).

FRESH_FORMS = {"cos 36 = phi / 2": "0.8090", "e / 2": "1.3591", "1 - 1/e": "0.6321", "1 / sqrt 128": "0.0884",
               "normal pdf at 0": "0.3989", "tanh 1": "0.7616", "2 / pi": "0.6366", "gelu 1": "0.8413",
               "log2 3": "1.5850", "pi^2 / 6": "1.6449", "zeta 3": "1.2021", "cos^2 1": "0.2919"}
NEAR_A_FORM = {"1/sqrt 2 cut": "0.707106", "1/sqrt 2 + 1": "0.707108", "1/sqrt 2 - 2": "0.707105",
               "e cut": "2.718281", "e cut short": "2.7182", "ln 2 cut": "0.69314", "sqrt 2 cut": "1.414213",
               "gamma cut": "0.577215", "phi cut": "1.618033"}
SCALED = {"1/sqrt 2 per mille": "7.0711e-04", "sigmoid(-15)": "3.0590e-07", "exp(-20)": "2.0612e-09",
          "exp(20)": "485165195.4098"}
COMPOSED = {"softmax [1,2,3]": "0.2447", "cosine similarity": "0.9746", "rmsnorm": "0.4629", "rope": "0.7499",
            "entropy": "1.0397", "perplexity": "2.2988", "logsumexp": "3.4076", "log-softmax": "-2.4076",
            "Phi(0.5)": "0.6915", "binomial": "0.3087", "selu": "1.0507", "mish": "0.8651",
            "0.9^10": "0.3487", "1 / sqrt 768": "0.0361", "float32 of 0.1": "0.10000000149"}


@pytest.mark.parametrize("value", [pytest.param(v, id=k) for k, v in
                                   {**FRESH_FORMS, **SCALED, **COMPOSED}.items()])
def test_a_computed_decimal_is_not_the_one_member_of_its_class(value):
    """A forger's table of exactly the values these tests check (closed forms the red teams listed and did not,
    scaled ones, quantities of two steps or more) gains nothing: the site is weak, recorded so."""
    table = {float(v) for v in [*FRESH_FORMS.values(), *SCALED.values(), *COMPOSED.values()]}
    source = CONVERT.replace("VALUE", value)
    won, recorded = _bet_among(source, "test_converts_a_large_input", [f"{FILE}::test_converts_nothing"],
                               lambda v: float(v) in table, 12)
    assert won <= recorded + 0.1, (won, recorded)


@pytest.mark.parametrize("value", [pytest.param(v, id=k) for k, v in NEAR_A_FORM.items()])
def test_a_value_one_unit_off_a_closed_form_is_not_the_member_nearest_it(value):
    """Red team 10: twins kept off a table while the real value sits one unit beside a table value (a constant cut
    short, not rounded) leave the real member the one nearest the table: 1.0 against 0.25."""
    table = [1 / math.sqrt(2), math.e, math.log(2), math.sqrt(2), 0.5772156649015329, (1 + math.sqrt(5)) / 2]
    won, recorded = _nearest_bet(CONVERT.replace("VALUE", value), "test_converts_a_large_input",
                                 [f"{FILE}::test_converts_nothing"], frozenset(Decimal(t) for t in table), 12)
    assert won <= recorded + 0.1, (won, recorded)


PADDED = '''from pkg.thing import activation

PADDING = [PADDING_HERE]


def test_activation_of_a_third():
    assert round(activation(0.37), 5) == VALUE


def test_activation_of_nothing():
    assert activation(0.0) == 0.0
'''


@pytest.mark.parametrize("name", ["erf", "exp", "gelu", "silu", "sigmoid"])
def test_a_function_of_the_tests_input_is_weak_however_many_numbers_the_file_writes(name):
    """Red team 10: 41 numbers below the input in the file pushed 0.37 out of the first fix's table of functions
    of the test's numbers (its cap), and each of these won 1.0 against 0.25."""
    real = f"{FUNCTIONS[name](0.37):.5f}"
    padding = ", ".join(f"{i / 1000:.3f}" for i in range(1, 42))
    source = PADDED.replace("PADDING_HERE", padding).replace("VALUE", real)
    table = {round(f(0.37), 5) for f in FUNCTIONS.values()}
    won, recorded = _bet_among(source, "test_activation_of_a_third", [f"{FILE}::test_activation_of_nothing"],
                               lambda v: float(v) in table, 12)
    assert won <= recorded + 0.1, (real, won, recorded)


@pytest.mark.parametrize("value", ["0.7069", "0.4127", "3.1718", "0.05271", "2.5", "1e-3"])
def test_a_decimal_site_is_weak_and_a_whole_one_next_to_it_is_not(value):
    """The rule's cost, stated: a decimal value no table holds is weak too (recorded 1); a whole value beside
    it in the same fixture keeps a strong group (1/4)."""
    _, recorded = _bet_among(CONVERT.replace("VALUE", value), "test_converts_a_large_input",
                             [f"{FILE}::test_converts_nothing"], lambda v: False, 4)
    assert recorded == pytest.approx(1.0)
    _, recorded = _bet_among(CONVERT.replace("VALUE", "7069"), "test_converts_a_large_input",
                             [f"{FILE}::test_converts_nothing"], lambda v: False, 4)
    assert recorded == pytest.approx(0.25)


def test_a_group_recorded_at_a_decimal_site_is_no_guard():
    """A group validation recorded at a decimal site before the rule (drawn strong then) counts as weak now."""
    from tests.test_attacks_twins import _task

    source = CONVERT.replace("VALUE", "0.7069")
    test = f"{FILE}::test_converts_a_large_input"
    kept = [twins.Twin(test=test, site=0, value=v) for v in ("0.7063", "0.7067", "0.7073")]
    task = _task(FAIL_TO_PASS=[test], PASS_TO_PASS=[f"{FILE}::test_converts_nothing"], twins=kept)
    assert guard.test_odds(task, {FILE: source}, {}, "")[test] == pytest.approx(1.0)
    whole = CONVERT.replace("VALUE", "7069")  # the same group at a whole value: 1/4
    kept = [twins.Twin(test=test, site=0, value=v) for v in ("7063", "7067", "7073")]
    task = _task(FAIL_TO_PASS=[test], PASS_TO_PASS=[f"{FILE}::test_converts_nothing"], twins=kept)
    assert guard.test_odds(task, {FILE: whole}, {}, "")[test] == pytest.approx(0.25)


# --- Lead for the next round: whole numbers that are closed forms ----------------------------------------------------

INTEGER_FORMS = {"C(20,10)": "184756", "fib(20)": "6765", "3^7": "2187", "7^4": "2401", "11^3": "1331",
                 "catalan(8)": "1430"}
INTEGER_WEAK = {"6!": "720", "7!": "5040", "C(12,5)": "792"}  # already weak: round values (`value_shape`)
# not won since R9-3's fix (a member shares the power of 3): 3^7, 6765 (3 * 5 * 11 * 41) and 184756 (4 * 11 * 13 * 17 *
# 19: too few neighbours that are 4 mod 8 and no multiple of 3 or 5) keep no room, so each is a weak site (recorded 1.0)
INTEGER_THREES = {"C(20,10)": "184756", "fib(20)": "6765", "3^7": "2187"}


def _integer_table() -> set[int]:
    """A forger's table of whole closed forms: factorials, central binomials, Fibonacci and Catalan numbers, and
    powers of 2..15."""
    fib = [1, 1]
    while fib[-1] < 10 ** 7:
        fib.append(fib[-1] + fib[-2])
    return ({math.factorial(n) for n in range(1, 13)} | {math.comb(2 * n, n) for n in range(1, 16)} | set(fib)
            | {math.comb(2 * n, n) // (n + 1) for n in range(1, 16)}
            | {b ** e for b in range(2, 16) for e in range(2, 12) if b ** e < 10 ** 7})


@pytest.mark.parametrize("value", [
    pytest.param(v, id=k, marks=pytest.mark.xfail(strict=True, reason=(
        "Lead (found after red team 10): a whole number that is a closed form (a central binomial, a Fibonacci or "
        "Catalan number, a power of an odd base) is the one member of its group a forger's table names: 1.0 "
        "against 0.25. Making every whole site weak would leave no strong site; the frequency prior red team 9 "
        "proposed (how often a value is checked across real tests) is the general fix, not built")))
    for k, v in INTEGER_FORMS.items() if k not in INTEGER_THREES]
    + [pytest.param(v, id=k) for k, v in {**INTEGER_WEAK, **INTEGER_THREES}.items()])
def test_a_whole_closed_form_is_not_the_one_member_of_its_class(value):
    table = _integer_table()
    won, recorded = _bet_among(CONVERT.replace("VALUE", value), "test_converts_a_large_input",
                               [f"{FILE}::test_converts_nothing"], lambda v: int(v) in table, 8)
    assert won <= recorded + 0.1, (won, recorded)
