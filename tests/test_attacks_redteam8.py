r"""An eighth red team's attacks on the newest defences: `twins.pinned`, the guard's wider priors (the R7-8..R7-10
fixes: `derived` beside the test, every text blob, every spelling of a number) and `plugin_names` following imports
and data files (the R7-4 fix), and on the canaries and the group runs they rest on.

Each test asserts the defended behaviour: it FAILS when the attack wins. Attacks that win today are marked
`xfail(strict=True)` with what they do. Plans are drawn with fixed seeds, so each verdict is reproducible. Forge odds
are measured as red team 6's `_bet` does: on validation's own draws (`grading_plan(candidates=True)` with the task's
FAIL_TO_PASS known, the kept twins), what a forger reading only the box wins against the guard's mean recorded odds
(`guard.forge_odds(guard.test_odds(...))`); `_bet_among` bets uniformly among the members a rule names and counts
the expected win. Honest runs are the oracle's code run by the real boot script (`tests.test_attacks_twins._run`).

Ranked by severity: forge odds far above recorded and per-draw honest false fails first, then what validation
notices (the task loses the test: coverage, never a wrong grade).

- R8-1 WIN (forge odds, about a third of integer sites): the forger's prior over values is not smooth, and twins are
  "equally round" by trailing zeros only (`_unit`), singled out by exact powers of two only (`_marked`). A real value
  that is a multiple of 8 (24, 96, 768, 3072: sizes, dims, byte counts), a multiple of 4 (36), ends in 5 (75, 135,
  2.5, 0.25), is 2^n - 1 / 10^n - 1 (255, 4095, 999: type maxima, masks), or is a rounded fraction or constant (0.333,
  0.667, 0.1667, 3.1416, 2.718, 0.693) is the only member of that class in its progression of K+1 neighbours. The
  forger betting on the one member of the class wins 1.0 over 200 validation draws for each of 18 values; the guard
  records 0.25 for every one. Controls: 73 and 0.334 (the bet picks a twin: 0.0). Across uniformly drawn values each
  rule averages 1/4, but the values tests check cluster on round ones: over the 151 strong integers numpy's own tests
  check (`x == N`, `assert_equal(x, N)`), one fixed bet on the roundest member (trailing zero bits, a last 5, 2^n-1,
  digit runs such as 123) wins 0.50 on 8 draws each, twice the 0.25 recorded. Fix (a mechanism): admissibility by a
  roundness *signature* rather than a unit: every member must share the real value's (min(2-adic valuation, 4),
  min(5-adic valuation, 2), last significant digit 5 or not, 2^n +- 1 / 10^n +- 1, nearest a short fraction or a
  constant) and the walk skips values that differ (as `_admissible` skips other units); where no K such values lie
  near, count the site weak (1.0) like a `_marked` one.
- R8-2 WIN (honest tampered, per draw): canary bodies (`sweserve_twins.body`) call builtins (`sum`, `max`, `min`,
  `pow`, `abs`, `sorted`, `len`) and are checked by `_behaves` with the real builtins, but they run in the hidden
  module's namespace: `from numpy import *` there makes `sum(d.values())` / `max(d.values())` return the dict view and
  `max(a, b)` raise. The oracle is graded `tampered` on 2 of 16 draws (passes as written), and validation's runs pass
  at about (14/16)^runs, so such a task is mostly accepted. Fix: canaries must not read the module's globals: call
  builtins through a name the planter binds (`__sweserve_builtins__.max`) or a local import inside the body, or draw
  only bodies whose free names the module does not bind (read the module's top-level bindings and star imports; a star
  import from outside the repository: no builtin calls at all).
- R8-3 WIN (honest tampered/failed, per draw; R7-4's class): selection words `plugin_names`/`data_names` still do
  not follow: a data file joined from parts (`Path(__file__).parent / "data" / "accelerators.json"`,
  `os.path.join(here, "data", ...)`: the literal is looked for beside the conftest and at the roots, never under
  `data/`), a data file with no listed extension (`ACCELERATORS`), `importlib.import_module("testing_utils")`, a
  helper under a src layout (`from pkg.testing import ...` with `src/pkg/testing.py`), a package resource
  (`resources.files("pkg") / "accelerators.txt"`), a custom ini option (`parser.addini` + `config.getini`, set in
  `pytest.ini` or `tox.ini`: only `-k` is read there), an environment variable the task sets (`task.test.env`: only
  PYTEST_ADDOPTS is read), and the hidden module's own autouse fixture reading `request.node.name` against words it
  imports (`own_checks` reads the module's literals, never its imports). `gpu` stays in the pool; end to end (data
  subfolder, `getini`, the module's own import) 12 of 12 draws are failed or tampered with the oracle, which passes as
  written. The hidden module reading its tests' names another way than `own_checks` knows (`PYTEST_CURRENT_TEST`,
  `sys._getframe(1).f_code.co_name`, `test = request.node; test.name`): its literals are not read. A unittest
  module's `load_tests` keeping only tests whose `test.id()` lacks `slow` (the `unittest`
  runner honours `load_tests`; `own_checks` looks for `self.id()` only, so the file's literals are not read and
  `slow`, a word of its names, stays in the pool): 10 of 12 draws failed or tampered. Held: a package `__init__`
  re-exporting the words (`from .words import *`). Fix: stop enumerating readers: draw planted words from a fixed neutral vocabulary and refuse any word that occurs anywhere in the repository's text
  files at base (every blob `repository_numbers` already walks: one set of words per clone, cached like
  `NumbersCache`) or in the task's env, rather than the file's own test words less what a follower reaches.
- R8-4 WIN (forge odds): one step of arithmetic across sources. `_near` derives only from the test's own numbers and
  the file's (`written | beside`); numbers the instruction writes ("a page holds 8 tokens") or the package writes
  (`PAGE_SIZE = 8`) are avoided as values, never combined with the test's. `assert capacity(13) == 104` (13 * 8): the
  forger betting on `derived(test numbers | instruction numbers)` (or `| the package's`) wins 1.0 over 200 draws each;
  guard 0.25. Likewise a unit conversion: `parse_duration("3m") == 180` (3 * 60, 60 written nowhere): the forger
  betting on a test number times a unit constant (60, 3600, 86400, 1000, 1024, 100) wins 1.0, guard 0.25. Fix: derive
  over the union of the test's numbers, the common unit constants and every prior the guard reads (instruction, base
  file, other hidden files, the repository sets of `repository_priors`), capped like MAX_DERIVED, in `_near` and
  `guard._group_odds`/`_set_odds` alike.
- R8-5 WIN (forge odds): what `guard.repository_numbers` cannot read: a gzip'd fixture (`cases.json.gz`: binary,
  skipped by the NUL check), a golden file over MAX_TEXT_BYTES (1.3 MiB of JSON: skipped by size), a number in a path
  (`test/golden/pages_100_13.txt`: paths are never read), a file past MAX_REPOSITORY_FILES (20000, which
  PyTorch-sized trees pass; the hidden folder is read first, then by path, so `tools/bench/pages.json` is not; the
  cap patched to 4 in the test). For each, guard 0.25, the forger betting on the member the file names 1.0 over 200
  draws. Fix: read every path as text; decompress known containers (gz/bz2/xz/zip/npz); stream large files for their
  numbers; read past the cap by blob id (NumbersCache makes it once per clone), or count every group weak (1.0)
  where the tree was not read whole; and where a file in the hidden file's folder or below cannot be read at all,
  count the folder's groups weak instead of guarded.
- R8-6 WIN (forge odds): numbers in identifiers. `_numbers` reads comments, strings and number tokens, never names:
  `def test_100_tokens_take_13_pages_when_rounding_up()` in another test file of the repository, or as an ungraded
  (skipped) test beside the graded one in the hidden file (it keeps its name), writes 13 where no reader looks: guard
  0.25, forger 1.0 over 200 draws each. Fix: `_numbers` also runs `_DIGITS` over NAME tokens (and `repository_numbers`
  over paths, R8-5).
- R8-7 WIN (forge odds, profiles with `history: "ancestors"`, the demo's): a relanded change. An ancestor of base
  held the same test (`pages(100) == 13`); a revert took it out with its feature; the task relands it. The box holds
  the ancestry, the guard reads the tree at base only (`repository_numbers`, `base_sources`: the file is absent
  there): guard 0.25, the forger grepping the `assert` lines of `git log -p` wins 1.0 over 200 draws. Fix: with
  ancestors in the box, `repository_numbers` also reads every blob reachable from base (each once, by blob id, as
  `NumbersCache` already keys them), at least the versions of the hidden files' paths.
- R8-8 WIN (false fail, per grading draw; validation mostly notices): a test that is not idempotent. Every member of
  a group runs the same body in one process in a shuffled order. A module-level call counter (likewise a cache's hit
  count, a registry refusing a second `register`): the real member passes only when it runs first, the oracle fails on
  7 of 8 grading draws; validation's first look passed on 1 of 10 seeds (the real member ran first among 11). A test
  that cleans up after its check (`thing.EXACT = True ... thing.EXACT = False`; likewise `os.chdir` back, an env var
  removed, a port closed without `try`/fixture): each twin fails at the check and leaks the state, so the next test
  fails unless the real member ran last: 5 of 8 grading draws, and every validation first look (the next test is lost
  as PASS_TO_PASS). Validation drops what it sees on most draws; a task that got through fails honest solutions at
  these rates. Fix: run each member in a fresh process (fork per member, as pytest-forked does), or plant no group for
  a test that writes module or class state (a name it mutates that is bound outside its def, `global`, class
  attributes through `self`/`cls`).
- R8-9 WIN (false fail, validation notices): a pinned name among ranked ones. `pinned` keeps `test_create`'s real
  name (another test calls `self.test_create()`), while `Ranks` gives the planted names `test_<digits>_...`, which
  sort before every letter: unittest's loader (by name) now runs `test_pages`'s members before `test_create`, whose
  state they need: the oracle fails on 4 of 4 draws (passes as written). Fix: pin every test of a scope whose loader
  sorts by name once one is pinned, or rank the planted names with a prefix that sorts where the real one did relative
  to the pinned names.
- R8-10 WIN (false fail, validation notices): `pinned` reads a string as naming a test when it is the name or ends a
  test id with it (`::name`, `.name`); a parametrized test's id (`depends=["test_pages_for_nothing[0]"]`,
  pytest-dependency's form for a parametrized test, in R7-7's conftest) is neither: the dependency is renamed, the
  dependant is skipped in validation's first look and failed on 3 of 3 grading draws. Fix: compare a string's test-id
  tail with its parameters cut (`s.split("[")[0]`, then the part after the last `::` or `.`).
- R8-11 defended: a fixture named like a test (`@pytest.fixture def test_tokens()`, as `test_client`/`test_data` are
  common) keeps its name in validation's first look and in grading.
- R8-12 WIN (ungradable, validation notices: the task is lost): pytest prints each failing test's captured output,
  and every failing member of a group prints the test's. A test printing 900 KB (a page table, a tensor, a debug
  log) prints nothing as written (it passes); in validation's candidate run (F2P known, seed 0) its ~10 failing
  members print 9 MB, past the 8 MiB the host keeps (`OUTPUT_TAIL_BYTES`: the run is `tampered`, as the exports'
  verifier rules too). Measured on the local boot script's output (no Docker). Fix: run with `--show-capture=no` (the
  outcome events carry `longreprtext`, never the captured sections) or cap each report's captured sections.

Fixed since (each test above now passes, and failed before its fix):
- R8-1: a strong site's twins share the real value's `twins.value_shape` (the powers of 2 and 5 of its
  significand, 2^k +- 1 / nines / digit runs, a rounded third or constant, its length); a value without K such
  neighbours on each side is a weak site. numpy's strong checked integers: 151 before, 40 after; the fixed
  roundness bet over them wins 0.27.
- R8-2: canary bodies never read a builtin the module binds (`sweserve_twins.module_bindings`; after a star import,
  no builtin at all).
- R8-3: planted names draw their words from `NEUTRAL_WORDS` (letters b f j k v w z and vowels), so no unread
  selector word reaches them; the four end-to-end tests pass. The static tests of which readers are followed stay
  strict xfails: those readers are still not read, and no longer need to be.
- R8-4: test numbers scaled by unit constants (`twins.scaled`, `UNITS`) and combined with the instruction's
  (`twins.said`). The package variant (a product with a package's `PAGE_SIZE = 8`) stays a strict xfail.
- R8-5: path digits, gzip'd text, and `guard.UNREAD` (an unreadable file beside the hidden tests, or a tree past
  the cap: every group weak).
- R8-6: digits in names (`twins.name_numbers`).
- R8-9: a by-name class with a pinned test is pinned whole. R8-10: pins compare ids with parameters cut.
- R8-12: the runner passes `--show-capture=no`.
- R8-8, in part: validation's twin runs plant every graded test's candidates; where a graded test then fails with
  the oracle (it passed planted alone), `twins.select` keeps no group in its file. On one drawn order the counter
  and the cleanup showed on 6 and 5 of 6 draws; validation now also runs the oracle with every graded test first
  of its group and with it last (`grading_plan(real_at=...)`), so both show on every draw.
- R8-7: with the profile's `history: "ancestors"`, `repository_numbers` reads every file version of base's ancestry
  (by blob, once: `Git.history_blobs`), the hidden paths' own first, and the ancestors' commit messages
  (`guard.MESSAGES`). Variants: the old test at its path, moved elsewhere since, or its value in a message only.
- R8-4's package variant: one step of arithmetic between the test's numbers (with the file's and the instruction's)
  and the numbers the repository's code writes (`twins.Crossing`: a sum, a difference, a product, an exact or
  rounded quotient) is a prior like a file's numbers: validation's draws keep every member on the real value's side
  of it, and the guard counts a group it splits as weak. Variants: a product, a rounded-up quotient, a sum.
Left (strict xfail): R8-8 at grading (a task with groups recorded: each member still runs in one process; validation's
two orders keep such groups from being recorded, but a leak neither order shows would still fail honest solutions).

Looked at, no finding: `stream_problems` lets a signal exit after `end` pass (a crash at interpreter shutdown is not
`tampered`); the export verifier keeps the plan in its root process (the plan file root-only, deleted before the
submission runs) and applies tests.patch to the work tree only (no blob of the hidden files in `.git`); a test
generating variants from `globals()` (`test_x_twice`) only loses the variant ids (validation notices).
Not measured (leads): an env image shared by a profile that installs another version of the project itself (the
fix, or shipped tests, in site-packages: `guard` reads neither). Not reached: the host watchdog and the unprivileged runner.
A forger cannot force pins: `pinned` and `reorders` read the hidden files and the selector files at base +
tests.patch, not the candidate's tree (plugin modules the candidate edits run, but change nothing a forger lacks).
"""

from __future__ import annotations

import ast
import gzip
import math
import random
import re
import subprocess
from decimal import Decimal
from fractions import Fraction
from pathlib import Path

import pytest

from sweserve.evaluation import guard, twins
from sweserve.evaluation.grading import TestRun
from sweserve.harness import sweserve_twins as canaries
from sweserve.models import Task, TestSpec, Twin
from tests.test_attacks_redteam4 import CPU_TEST, PAGES_BASE, PAGES_ORACLE, POOL_ORACLE, _groups_of, _verdict
from tests.test_attacks_redteam5 import GPU_SKIPPED, _as_written, _honest, _twinned
from tests.test_attacks_redteam6 import _bet
from tests.test_attacks_redteam7 import ACCELERATOR_HOOK, CASES_JSON, DEPENDENCY_CONFTEST, PKG, _at_validation
from tests.test_attacks_twins import FILE, _run, _task


def _bet_among(source: str, graded: str, p2p: list[str], said, draws: int, instruction: str = "",
               repository: dict | None = None) -> tuple[float, float]:
    """(the expected win of a forger betting uniformly on the members of `graded`'s group that `said` holds (a set,
    or a predicate on a member's value), the guard's mean recorded odds), on validation's own draws."""
    inside = said if callable(said) else (lambda v: v in said)
    wins, recorded = 0.0, 0.0
    graded_task = _task(FAIL_TO_PASS=[f"{FILE}::{graded}"], PASS_TO_PASS=p2p)  # validation's twin run: F2P known
    for seed in range(draws):
        plan = twins.grading_plan(graded_task, {FILE: source}, seed=seed, candidates=True, instruction=instruction,
                                  repository=repository)  # validation's draws, balanced against the repository
        if not any(m.kind == "twin" and m.real == graded for m in plan.members):
            wins += 1.0  # no twin at all: the test alone, passed for free (and recorded so: odds 1)
        else:
            picks = [real for value, real in _groups_of(plan)[graded] if inside(Decimal(value))]
            wins += 1 / len(picks) if True in picks else 0.0
        kept = [m.twin for m in plan.members if m.kind == "twin" and m.real == graded]
        task = _task(FAIL_TO_PASS=[f"{FILE}::{graded}"], PASS_TO_PASS=p2p, twins=kept)
        recorded += guard.forge_odds(guard.test_odds(task, {FILE: source}, {}, instruction, repository))
    return wins / draws, recorded / draws


# --- R8-1: a value of a rarer "roundness" class than its neighbours ---------------------------------------------------------

CONVERT = '''from pkg.thing import convert


def test_converts_a_large_input():
    assert convert(1000) == VALUE


def test_converts_nothing():
    assert convert(7) == 7
'''


def _last_digit_5(v: Decimal) -> bool:
    return f"{abs(v.normalize()):f}".rstrip("0").rstrip(".")[-1] == "5"


_KNOWN = [math.pi, math.e, math.sqrt(2), math.log(2), math.sqrt(3), 2 * math.pi, math.pi / 2]
_FRACTIONS = [p / q for q in (3, 6, 7, 9, 11, 12) for p in range(1, 4 * q) if Fraction(p, q).denominator == q]


def _fraction_or_constant(v: Decimal) -> bool:
    """Within half a unit of a fraction with no terminating decimal (1/3, 2/3, 1/6) or of a known constant."""
    exp = v.normalize().as_tuple().exponent
    if not isinstance(exp, int) or exp >= 0:
        return False
    half = float(Decimal(10) ** exp) / 2
    return any(abs(float(v) - c) < half for c in _FRACTIONS + _KNOWN)


ROUNDNESS = {  # what a forger bets on: the one member of the real value's class (none of its neighbours is)
    "multiple-of-8": lambda v: v == v.to_integral_value() and int(v) % 8 == 0,
    "multiple-of-4": lambda v: v == v.to_integral_value() and int(v) % 4 == 0,
    "ends-in-5": _last_digit_5,
    "all-ones": lambda v: v == v.to_integral_value() and int(v) > 2 and (int(v) + 1) & int(v) == 0,
    "all-nines": lambda v: v == v.to_integral_value() and set(str(int(v))) == {"9"},
    "fraction-or-constant": _fraction_or_constant,
}
NICE = [("24", "multiple-of-8"), ("96", "multiple-of-8"), ("768", "multiple-of-8"), ("3072", "multiple-of-8"),
        ("36", "multiple-of-4"), ("75", "ends-in-5"), ("135", "ends-in-5"), ("2.5", "ends-in-5"),
        ("0.25", "ends-in-5"), ("255", "all-ones"), ("4095", "all-ones"), ("999", "all-nines"),
        ("0.333", "fraction-or-constant"), ("0.667", "fraction-or-constant"), ("0.1667", "fraction-or-constant"),
        ("3.1416", "fraction-or-constant"), ("2.718", "fraction-or-constant"), ("0.693", "fraction-or-constant")]


@pytest.mark.parametrize(("value", "kind"), [
    pytest.param(v, k, id=f"{v}-{k}") for v, k in NICE  # R8-1: each the one member of its class, 1.0 against 0.25
] + [pytest.param("73", "ends-in-5", id="73-control"),
      pytest.param("0.334", "fraction-or-constant", id="0.334-control")])
def test_a_round_value_is_not_the_one_member_of_its_class(value, kind):
    source = CONVERT.replace("VALUE", value)
    won, recorded = _bet_among(source, "test_converts_a_large_input", [f"{FILE}::test_converts_nothing"],
                               ROUNDNESS[kind], 200)
    assert won <= recorded + 0.1, (won, recorded)


def _roundness(x: int) -> float:
    """A forger's fixed score of how "typed by a person" an integer looks: trailing zero bits, a last digit 5,
    2^n - 1 / 10^n - 1, and runs of digits (123, 987, 777)."""
    n, bits = abs(x), 0
    while n and n % 2 == 0:
        n, bits = n // 2, bits + 1
    digits = str(abs(x))
    score = min(bits, 12) + 2.5 * (abs(x) % 10 == 5)
    score += 20 * (abs(x) > 2 and ((abs(x) + 1) & abs(x) == 0 or set(digits) == {"9"}))
    score += 20 * (len(digits) >= 3 and (digits in "0123456789" or digits in "9876543210" or len(set(digits)) == 1))
    return score


def _checked_integers(root: Path) -> list[int]:
    """The integers a test suite checks a result against (`x == N`, `assert_equal(x, N)`, `assertEqual(x, N)`)."""
    out = []
    for path in sorted(root.rglob("tests/test_*.py")):
        try:
            tree = ast.parse(path.read_text(encoding="utf-8"))
        except (SyntaxError, ValueError, UnicodeDecodeError):
            continue
        for n in ast.walk(tree):
            if isinstance(n, ast.Compare) and len(n.ops) == 1 and isinstance(n.ops[0], ast.Eq):
                checked = n.comparators[0]
            elif isinstance(n, ast.Call) and len(n.args) >= 2 and getattr(n.func, "id", getattr(
                    n.func, "attr", "")) in ("assert_equal", "assertEqual"):
                checked = n.args[1]
            else:
                continue
            if isinstance(checked, ast.Constant) and type(checked.value) is int:
                out.append(checked.value)
    return out


def test_one_fixed_roundness_bet_does_not_beat_the_recorded_odds_over_real_test_values():
    """R8-1 over a population rather than per task: the values real tests check are not uniform, so a single
    strategy (bet on the member `_roundness` scores highest, ties split) beats the recorded odds on average.
    Groups are drawn by `twins.values` (as `grading_plan` draws them for a site no prior reads), 8 draws each."""
    numpy = pytest.importorskip("numpy")
    values = [v for v in _checked_integers(Path(numpy.__file__).parent)
              if not twins._marked(v) and twins._sign_safe(v) and twins._room(v, twins.K)]
    # 151 before R8-1's fix, 39 before R9-3's (a member shares the power of 3 too): most round values are weak
    # sites now, honestly counted
    assert len(values) > 12
    won, draws = 0.0, 0
    for value in values:
        for seed in range(8):
            real, others = twins.values(value, random.Random(seed))
            scores = [_roundness(int(m)) for m in [real, *others]]
            best = [i for i, score in enumerate(scores) if score == max(scores)]
            won, draws = won + (1 / len(best) if 0 in best else 0.0), draws + 1
    assert won / draws <= 1 / (twins.K + 1) + 0.1, (won / draws, len(values))


# --- R8-4: one step of arithmetic across the test and the instruction or the package -----------------------------------

CAPACITY = '''from pkg.thing import capacity


def test_capacity_of_thirteen_pages():
    assert capacity(13) == 78


def test_capacity_of_no_pages():
    assert capacity(0) == 0
'''
PAGES_300 = CAPACITY.replace("capacity(13) == 78", "pages(300) == 38").replace("capacity(0) == 0", "pages(0) == 0")
PACKAGE_VARIANTS = {  # the hidden test, the package's constant, the forger's operands
    "instruction": (CAPACITY, "", "`capacity(pages)` returns how many tokens the pages hold; a page holds 6 tokens."),
    "product": (CAPACITY, "PAGE_SIZE = 6\n", ""),
    "rounded-up-quotient": (PAGES_300, "PAGE_SIZE = 8\n", ""),  # ceil(300 / 8) == 38
    "sum": (CAPACITY.replace("78", "613").replace("13)", "600)"), "HEADER_TOKENS = 13\n", ""),  # 600 + 13
}


@pytest.mark.parametrize("where", sorted(PACKAGE_VARIANTS))
def test_a_value_derived_from_the_test_and_the_instruction_or_the_package_is_guarded(where):
    """One step of arithmetic between the test's numbers and a number the instruction writes (`twins.said`), or
    one the package's code writes (`twins.Crossing`): validation's draws keep every member on the same side of it,
    or the guard counts the group weak."""
    source, constant, instruction = PACKAGE_VARIANTS[where]
    repository = {"pkg/config.py": twins.file_numbers(constant)} if constant else None
    read = twins.text_numbers(instruction) if instruction else frozenset(repository["pkg/config.py"])
    fn = next(n for n in ast.parse(source).body if isinstance(n, ast.FunctionDef))
    test_numbers = twins.visible(source, None, fn.name)
    said = set(twins.derived(test_numbers | read))
    # integer quotients derive only from numbers written together: the one step the forger takes
    assert where != "rounded-up-quotient" or Decimal(38) in said
    won, recorded = _bet_among(source, fn.name, [f"{FILE}::{source.split('def ')[2].split('(')[0]}"],
                               said, 200, instruction=instruction, repository=repository)
    assert won <= recorded + 0.1, (won, recorded)


DURATION = '''from pkg.thing import parse_duration


def test_minutes_are_read():
    assert parse_duration("7m") == 420


def test_nothing_is_zero():
    assert parse_duration("0s") == 0
'''
UNIT_CONSTANTS = (60, 3600, 86400, 1000, 1024, 100)  # what a forger multiplies by: no file need write them


def test_a_value_a_unit_conversion_gives_is_guarded():
    said = {Decimal(7) * u for u in UNIT_CONSTANTS}
    won, recorded = _bet_among(DURATION, "test_minutes_are_read", [f"{FILE}::test_nothing_is_zero"], said, 200)
    assert won <= recorded + 0.1, (won, recorded)


# --- R8-5: what the guard's repository reader cannot read ------------------------------------------------------------------

def _numbers_of_clone(tmp_path, files: dict[str, str | bytes]) -> dict[str, frozenset[Decimal]]:
    """`guard.repository_numbers` of a git repository holding `files` (text or bytes) at its one commit."""
    root = tmp_path / "clone"
    for path, data in files.items():
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        (root / path).write_bytes(data if isinstance(data, bytes) else data.encode())
    git = ["git", "-C", str(root), "-c", "user.name=r8", "-c", "user.email=r8@example.com"]
    subprocess.run([*git, "init", "-q"], check=True)
    subprocess.run([*git, "add", "-A"], check=True)
    subprocess.run([*git, "commit", "-qm", "base"], check=True)
    head = subprocess.run([*git, "rev-parse", "HEAD"], check=True, capture_output=True, text=True).stdout.strip()
    return guard.repository_numbers(root, _task().model_copy(update={"base_commit": head}), [FILE])


BIG_CASES = ('{"cases": [' + ", ".join('{"tokens": %d, "pages": %d}' % (8000 + i, 1000 + i) for i in range(40000))
             + ', {"tokens": 100, "pages": 13}]}\n')  # 1.3 MiB: a golden file over MAX_TEXT_BYTES
UNREAD = {
    "gzip": {"test/data/cases.json.gz": gzip.compress(CASES_JSON.encode(), mtime=0)},
    "large": {"test/data/cases.json": BIG_CASES},
    "path": {"test/golden/pages_100_13.txt": "ok\n"},
    # past MAX_REPOSITORY_FILES (20000: a PyTorch-sized tree; patched to 4 here to keep the test fast): the
    # hidden file's folder is read first, then the rest by path, so a late path (`tools/`) is never read
    "past-the-file-cap": {"docs/a.txt": "a\n", "docs/b.txt": "b\n", "tools/bench/pages.json": CASES_JSON},
}


@pytest.mark.parametrize("holder", sorted(UNREAD))
def test_a_value_a_fixture_holds_where_the_guard_cannot_read_does_not_name_the_real_member(tmp_path, monkeypatch,
                                                                                          holder):
    assert len(BIG_CASES) > guard.MAX_TEXT_BYTES
    if holder == "past-the-file-cap":
        monkeypatch.setattr(guard, "MAX_REPOSITORY_FILES", 4)
    repository = _numbers_of_clone(tmp_path, {**PKG, **UNREAD[holder]})
    won, recorded = _bet(CPU_TEST, "test_pages_for_a_hundred_tokens", [f"{FILE}::test_pages_for_nothing"],
                         {Decimal(13), Decimal(100), Decimal(0)}, 200, repository=repository)
    assert won <= recorded + 0.1, (won, recorded, sorted(repository))


# --- R8-3: selection words read from where `plugin_names` / `data_names` do not follow ----------------------------------

GETINI = ('import pytest\n\n\ndef pytest_addoption(parser):\n    parser.addini("accelerator_words", "words", type="args")\n\n\n'
          'def pytest_collection_modifyitems(config, items):\n    for item in items:\n'
          '        if any(word in item.name for word in config.getini("accelerator_words")):\n'
          '            item.add_marker(pytest.mark.skip(reason="needs an accelerator"))\n')
ELSEWHERE = {
    "data-subfolder": ("import json\nfrom pathlib import Path\n\nimport pytest\n\nGPU_WORDS = json.loads((Path(__file__)"
                       '.parent / "data" / "accelerators.json").read_text())\n' + ACCELERATOR_HOOK,
                       {"data/accelerators.json": '["gpu", "cuda"]\n'}),
    "os-path-join": ("import json\nimport os\n\nimport pytest\n\nGPU_WORDS = json.load(open(os.path.join(os.path.dirname("
                     '__file__), "data", "accelerators.json")))\n' + ACCELERATOR_HOOK,
                     {"data/accelerators.json": '["gpu", "cuda"]\n'}),
    "no-extension": ('from pathlib import Path\n\nimport pytest\n\nGPU_WORDS = (Path(__file__).parent / "ACCELERATORS")'
                     ".read_text().split()\n" + ACCELERATOR_HOOK, {"ACCELERATORS": "gpu\ncuda\n"}),
    "importlib": ('import importlib\n\nimport pytest\n\nGPU_WORDS = importlib.import_module("testing_utils").GPU_WORDS\n'
                  + ACCELERATOR_HOOK, {"testing_utils.py": 'GPU_WORDS = ("gpu", "cuda")\n'}),
    "src-layout": ("import pytest\n\nfrom pkg.testing import GPU_WORDS\n" + ACCELERATOR_HOOK,
                   {"src/pkg/__init__.py": "", "src/pkg/testing.py": 'GPU_WORDS = ("gpu", "cuda")\n'}),
    "package-resource": ('from importlib import resources\n\nimport pytest\n\nGPU_WORDS = resources.files("pkg")'
                         '.joinpath("accelerators.txt").read_text().split()\n' + ACCELERATOR_HOOK,
                         {"pkg/accelerators.txt": "gpu\ncuda\n"}),
    "getini-pytest-ini": (GETINI, {"pytest.ini": "[pytest]\naccelerator_words = gpu cuda\n"}),
    "getini-tox-ini": (GETINI, {"tox.ini": "[pytest]\naccelerator_words = gpu cuda\n"}),
    # control: a package __init__ re-exporting the words is followed
    "reexport": ("import pytest\n\nfrom testing import *\n" + ACCELERATOR_HOOK,
                 {"testing/__init__.py": "from .words import *\n", "testing/words.py": 'GPU_WORDS = ("gpu", "cuda")\n'}),
}
R8_3 = "R8-3: `gpu` is read from where `with_plugins` does not look: it stays in the planted names' pool"


def _read_as_grading(conftest: str, files: dict[str, str]) -> dict[str, str]:
    """The selector files and what `with_plugins` follows from them, as grading reads the tree."""
    texts = {"conftest.py": conftest, **{p: t for p, t in files.items() if p in canaries.selector_paths([FILE])}}
    return canaries.with_plugins(texts, [FILE], "", lambda paths: {p: t for p, t in files.items() if p in paths})


@pytest.mark.parametrize("where", [pytest.param(w, marks=pytest.mark.xfail(strict=True, reason=R8_3))
                                   for w in ELSEWHERE if w != "reexport"] + ["reexport"])
def test_words_a_conftest_reads_elsewhere_are_read(where):
    conftest, files = ELSEWHERE[where]
    assert "gpu" in canaries.selector_checks(_read_as_grading(conftest, files), FILE)


@pytest.mark.xfail(strict=True, reason=R8_3 + " (the task's env: only PYTEST_ADDOPTS is read)")
def test_words_the_task_env_gives_a_conftest_are_read():
    conftest = 'import os\n\nimport pytest\n\nGPU_WORDS = os.environ["SKIP_WORDS"].split(",")\n' + ACCELERATOR_HOOK
    task = _task().model_copy(update={"test": TestSpec(runner="pytest", files=[FILE], env={"SKIP_WORDS": "gpu,cuda"})})
    assert "gpu" in twins.name_checks(task, {"conftest.py": conftest}, FILE)


@pytest.mark.parametrize("where", ["data-subfolder", "getini-pytest-ini"])
def test_words_read_elsewhere_never_skip_a_planted_member(tmp_path, where):
    conftest, files = ELSEWHERE[where]
    task = _twinned(f"{FILE}::test_pages_for_a_hundred_tokens", [f"{FILE}::test_pages_for_nothing"])
    extra = {"conftest.py": conftest, **files}
    assert _as_written(tmp_path, task, GPU_SKIPPED, PAGES_ORACLE, extra) == "resolved"
    verdicts = _honest(tmp_path, task, GPU_SKIPPED, PAGES_ORACLE, 12, extra, _read_as_grading(conftest, files))
    assert verdicts == ["resolved"] * 12, verdicts


OWN_FIXTURE_WORDS = GPU_SKIPPED.replace("from pkg.thing import pages\n", '''import pytest

from pkg.thing import pages
from testing_words import GPU_WORDS


@pytest.fixture(autouse=True)
def _accelerator(request):
    if any(word in request.node.name for word in GPU_WORDS):
        pytest.skip("needs an accelerator")
''')


def test_words_the_hidden_module_imports_for_its_own_name_checks_are_read(tmp_path):
    task = _twinned(f"{FILE}::test_pages_for_a_hundred_tokens", [f"{FILE}::test_pages_for_nothing"])
    extra = {"testing_words.py": 'GPU_WORDS = ("gpu", "cuda")\n'}
    assert _as_written(tmp_path, task, OWN_FIXTURE_WORDS, PAGES_ORACLE, extra) == "resolved"
    assert "gpu" not in twins.name_checks(task, {}, FILE, {FILE: OWN_FIXTURE_WORDS})
    verdicts = _honest(tmp_path, task, OWN_FIXTURE_WORDS, PAGES_ORACLE, 12, extra)
    assert verdicts == ["resolved"] * 12, verdicts


OWN_READERS_HEAD = "import os\nimport sys\n\nimport pytest\n\nfrom pkg.thing import pages\n\n\n"
OWN_READERS = {
    "current-test-env": ('@pytest.fixture(autouse=True)\ndef _accelerator():\n'
                         '    if "gpu" in os.environ["PYTEST_CURRENT_TEST"]:\n        pytest.skip("needs an accelerator")\n'),
    "frame-code-name": ('def _needs_accelerator():\n    if "gpu" in sys._getframe(1).f_code.co_name:\n'
                        '        pytest.skip("needs an accelerator")\n'),
    "node-alias": ('@pytest.fixture(autouse=True)\ndef _accelerator(request):\n    test = request.node\n'
                   '    if "gpu" in test.name:\n        pytest.skip("needs an accelerator")\n'),
    # control: the spelling `own_checks` looks for
    "request-node-name": ('@pytest.fixture(autouse=True)\ndef _accelerator(request):\n'
                          '    if "gpu" in request.node.name:\n        pytest.skip("needs an accelerator")\n'),
}


@pytest.mark.parametrize("reader", [pytest.param(r, marks=pytest.mark.xfail(strict=True, reason=(
    "R8-3: the hidden module reads its tests' names another way than `own_checks` knows: its literals are not "
    "read"))) for r in OWN_READERS if r != "request-node-name"] + ["request-node-name"])
def test_a_hidden_module_reading_its_tests_names_any_way_has_its_words_read(reader):
    source = OWN_READERS_HEAD + OWN_READERS[reader] + "\n\n" + GPU_SKIPPED.split("\n", 3)[3]
    assert "gpu" in twins.name_checks(_task(), {}, FILE, {FILE: source})


LOAD_TESTS = '''import os
import unittest

from pkg.thing import Pool


class TestPool(unittest.TestCase):
    def test_pool_is_named(self):
        self.assertEqual(Pool(100).name, "main")

    def test_pages_of_a_pool(self):
        self.assertEqual(Pool(100).pages(), 13)

    def test_slow_pages_of_a_huge_pool(self):
        self.assertEqual(Pool(10 ** 9).pages(), 125000000)


def load_tests(loader, tests, pattern):
    suite = unittest.TestSuite()
    for group in tests:
        for test in group:
            if "slow" not in test.id() or os.environ.get("RUN_SLOW"):
                suite.addTest(test)
    return suite
'''


def _unittest_task(**kw) -> Task:
    return _task(**kw).model_copy(update={"test": TestSpec(runner="unittest", files=[FILE])})


def _run_unittest(tmp_path, plan: twins.GradingPlan, code: str) -> TestRun:
    """`tests.test_attacks_twins._run` for the `unittest` runner (the boot script's `sweserve_unittest`, which
    honours a module's `load_tests` through `loadTestsFromModule`)."""
    return _run(tmp_path, plan, code, task=_unittest_task())


def test_a_load_tests_filter_by_id_never_drops_a_planted_member(tmp_path):
    graded = f"{FILE}::TestPool::test_pages_of_a_pool"
    task = _unittest_task(FAIL_TO_PASS=[graded], PASS_TO_PASS=[f"{FILE}::TestPool::test_pool_is_named"],
                          twins=[Twin(test=graded, site=0, value=v) for v in ("11", "12", "14")])
    assert _verdict(_run_unittest(tmp_path, twins.GradingPlan(texts={FILE: LOAD_TESTS}), POOL_ORACLE), task) \
        == "resolved"
    verdicts = []
    for seed in range(12):
        plan = twins.grading_plan(task, {FILE: LOAD_TESTS}, seed=seed)
        plan.texts.setdefault(FILE, LOAD_TESTS)
        verdicts.append(_verdict(_run_unittest(tmp_path, plan, POOL_ORACLE), task))
    assert verdicts == ["resolved"] * 12, (twins.name_checks(task, {}, FILE, {FILE: LOAD_TESTS}), verdicts)


# --- R8-9: a pinned name among ranked ones, under a loader that sorts by name --------------------------------------------

PINNED_ORDER = '''import unittest

from pkg.thing import Pool


class TestPoolLifecycle(unittest.TestCase):
    shared = {}

    def test_create(self):
        self.shared["pool"] = Pool(100)
        self.assertEqual(self.shared["pool"].name, "main")

    def test_pages(self):
        self.assertEqual(self.shared["pool"].pages(), 13)

    def test_recreate_keeps_the_name(self):
        self.test_create()
        self.assertEqual(self.shared["pool"].name, "main")
'''


def test_a_pinned_test_keeps_its_place_in_a_loader_sorting_by_name(tmp_path):
    graded = f"{FILE}::TestPoolLifecycle::test_pages"
    task = _task(FAIL_TO_PASS=[graded], PASS_TO_PASS=[f"{FILE}::TestPoolLifecycle::test_create"],
                 twins=[Twin(test=graded, site=0, value=v) for v in ("11", "12", "14")])
    assert "test_create" in twins.pinned(twins.pyast.parse_module(PINNED_ORDER), {"test_create", "test_pages"})
    assert _as_written(tmp_path, task, PINNED_ORDER, POOL_ORACLE) == "resolved"
    verdicts = _honest(tmp_path, task, PINNED_ORDER, POOL_ORACLE, 4)
    assert verdicts == ["resolved"] * 4, verdicts


# --- R8-8: a test that is not idempotent, run once per member -------------------------------------------------------------

COUNTED = '''from pkg.thing import pages

_calls = {"n": 0}


def _pages(tokens):
    _calls["n"] += 1
    return pages(tokens)


def test_pages_for_a_hundred_tokens():
    assert _pages(100) == 13
    assert _calls["n"] == 1


def test_pages_for_nothing():
    assert pages(0) == 0
'''


EXACT_ORACLE_FLAG = "EXACT = False\n\n\ndef pages(n, size=8, device=None):\n    return -(-n // size) if EXACT else n // size\n"
CLEANS_UP_AFTER = '''import pkg.thing as thing


def test_pages_in_exact_mode():
    thing.EXACT = True
    assert thing.pages(100) == 13
    thing.EXACT = False


def test_pages_in_the_default_mode():
    assert thing.pages(100) == 12
'''
NOT_IDEMPOTENT = {
    # (source, oracle, graded, the test whose outcome suffers, grading draws)
    "counter": (COUNTED, PAGES_ORACLE, "test_pages_for_a_hundred_tokens", "test_pages_for_a_hundred_tokens", 8),
    "cleanup-after-the-check": (CLEANS_UP_AFTER, EXACT_ORACLE_FLAG, "test_pages_in_exact_mode",
                                "test_pages_in_the_default_mode", 8),
}


@pytest.mark.xfail(strict=True, reason=(
    "R8-8: every member runs the body in one process: a call counter reads 1 only for the member that runs first "
    "(the oracle fails on 7 of 8 grading draws); a twin failing at its check skips the test's own cleanup, so the "
    "next test fails unless the real member ran last (5 of 8 draws)"))
@pytest.mark.parametrize("case", sorted(NOT_IDEMPOTENT))
def test_a_test_that_is_not_idempotent_still_passes(tmp_path, case):
    source, oracle, graded, victim, draws = NOT_IDEMPOTENT[case]
    others = [t for t in ("test_pages_for_nothing", "test_pages_in_the_default_mode") if f"def {t}" in source]
    task = _twinned(f"{FILE}::{graded}", [f"{FILE}::{t}" for t in others])
    assert _as_written(tmp_path, task, source, oracle) == "resolved"
    seen = _at_validation(tmp_path, source, victim, code=oracle)
    verdicts = _honest(tmp_path, task, source, oracle, draws)
    assert seen == "passed" and verdicts == ["resolved"] * draws, (seen, verdicts)


UNSOLVED = {"counter": PAGES_BASE, "cleanup-after-the-check": "EXACT = False\n\n\ndef pages(n, size=8, device=None):\n"
                                                            "    return 0\n"}


@pytest.mark.slow
@pytest.mark.parametrize("case", sorted(NOT_IDEMPOTENT))
def test_validation_plants_no_group_in_a_file_where_a_group_breaks_a_graded_test(tmp_path, case):
    """R8-8 at validation: its twin runs (the candidates of every graded test planted, F2P known, both states) show
    the graded test, or its neighbour, failing with the oracle beside the members, though each passed planted
    alone: `twins.select` keeps no group in that file, so grading plants none and the oracle passes every draw.
    The oracle runs with each graded test first of its group and with it last (`real_at`): the counter breaks in
    the one, the cleanup in the other, on every draw. One order alone, as a lucky draw gives, shows nothing."""
    source, oracle, graded, victim, _ = NOT_IDEMPOTENT[case]
    others = [f"{FILE}::{t}" for t in ("test_pages_for_nothing", "test_pages_in_the_default_mode") if f"def {t}" in source]
    task = _task(FAIL_TO_PASS=[f"{FILE}::{graded}"], PASS_TO_PASS=others)
    lucky = {"counter": "first", "cleanup-after-the-check": "last"}[case]  # the drawn order that shows nothing
    for seed in range(6):
        drawn = twins.grading_plan(task, {FILE: source}, seed=seed, candidates=True)
        assert any(m.kind == "twin" and m.real == graded for m in drawn.members)  # candidates were planted
        before = _run(tmp_path, drawn, UNSOLVED[case])
        ordered = [twins.grading_plan(task, {FILE: source}, seed=seed, candidates=True, real_at=at)
                   for at in twins.REAL_AT]
        assert all(sorted(p.texts[FILE].splitlines()) == sorted(drawn.texts[FILE].splitlines()) for p in ordered)
        after = [_run(tmp_path, plan, oracle) for plan in ordered]
        kept, twinless = twins.select(task.FAIL_TO_PASS + task.PASS_TO_PASS, [before], after, random.Random(seed))
        assert kept == [] and f"{FILE}::{graded}" in twinless, (seed, kept)
        recorded = task.model_copy(update={"twins": kept})
        assert _honest(tmp_path, recorded, source, oracle, 2) == ["resolved"] * 2
        # without both orders: a draw that put the real member where it breaks nothing keeps a group
        alone, _ = twins.select(task.FAIL_TO_PASS + task.PASS_TO_PASS, [before],
                                [after[twins.REAL_AT.index(lucky)]], random.Random(seed))
        assert alone, (seed, lucky)
    # the control: an idempotent test keeps its group from the same runs, both orders included
    task = _task(FAIL_TO_PASS=[f"{FILE}::test_pages_for_a_hundred_tokens"], PASS_TO_PASS=[f"{FILE}::test_pages_for_nothing"])
    before = _run(tmp_path, twins.grading_plan(task, {FILE: RELANDED}, seed=0, candidates=True), PAGES_BASE)
    after = [_run(tmp_path, twins.grading_plan(task, {FILE: RELANDED}, seed=0, candidates=True, real_at=at), PAGES_ORACLE)
             for at in twins.REAL_AT]
    kept, _ = twins.select(task.FAIL_TO_PASS + task.PASS_TO_PASS, [before], after, random.Random(0))
    assert kept, "an idempotent test lost its group"


def test_the_two_orders_only_move_each_graded_test_within_its_group():
    """`real_at` puts every graded test first (last) of its group and moves nothing else: the same members as the
    drawn plan (their names follow the order: rank tokens). A grading plan cannot take it (its real member's rank stays uniform)."""
    task = _task(FAIL_TO_PASS=[f"{FILE}::test_pages_for_a_hundred_tokens"], PASS_TO_PASS=[f"{FILE}::test_pages_for_nothing"])
    drawn = twins.grading_plan(task, {FILE: RELANDED}, seed=3, candidates=True)
    for at in twins.REAL_AT:
        plan = twins.grading_plan(task, {FILE: RELANDED}, seed=3, candidates=True, real_at=at)
        assert sorted(str((m.kind, m.real, m.twin)) for m in plan.members) == sorted(
            str((m.kind, m.real, m.twin)) for m in drawn.members)
        order = [m for m in _order(plan) if m.real == "test_pages_for_a_hundred_tokens" and m.kind != "canary"]
        assert order[0 if at == "first" else -1].kind == "test" and len(order) > 1, [m.kind for m in order]
    with pytest.raises(ValueError):
        twins.grading_plan(task, {FILE: RELANDED}, seed=3, real_at="first")


def _order(plan: twins.GradingPlan) -> list[twins.Member]:
    """The plan's members of FILE in the order its text defines them."""
    at = {m.name: m for m in plan.members if m.file == FILE and not m.alias}
    return [at[n] for n in re.findall(r"^def (\w+)\(", plan.texts[FILE], re.M) if n in at]


# --- R8-2: canaries calling builtins the module shadows --------------------------------------------------------------------

@pytest.mark.slow
def test_a_module_shadowing_builtins_never_makes_a_canary_misbehave(tmp_path):
    source = "from numpy import *  # noqa: F403\n" + CPU_TEST
    task = _twinned(f"{FILE}::test_pages_for_a_hundred_tokens", [f"{FILE}::test_pages_for_nothing"])
    assert _as_written(tmp_path, task, source, PAGES_ORACLE) == "resolved"
    verdicts = _honest(tmp_path, task, source, PAGES_ORACLE, 16)
    assert verdicts == ["resolved"] * 16, verdicts


# --- R8-6: numbers in identifiers ------------------------------------------------------------------------------------------

NAMED_ELSEWHERE = ('from pkg.thing import rounding\n\n\ndef test_100_tokens_take_13_pages_when_rounding_up():\n'
                   '    assert rounding() == "up"\n')
NAMED_BESIDE = "import pytest\n\n" + CPU_TEST + '''

@pytest.mark.skip(reason="needs an accelerator")
def test_100_tokens_take_13_pages_on_an_accelerator():
    assert pages(100, device="cuda") == pages(100)
'''


@pytest.mark.parametrize("where", ["repository", "same-file"])
def test_a_value_an_identifier_spells_does_not_name_the_real_member(where):
    source = NAMED_BESIDE if where == "same-file" else CPU_TEST
    repository = {"test/test_old.py": twins.file_numbers(NAMED_ELSEWHERE)} if where == "repository" else None
    won, recorded = _bet_among(source, "test_pages_for_a_hundred_tokens", [f"{FILE}::test_pages_for_nothing"],
                               {Decimal(13), Decimal(100)}, 200, repository=repository)
    assert won <= recorded + 0.1, (won, recorded)


# --- R8-11: a fixture named like a test (defended) ------------------------------------------------------------------------

TEST_NAMED_FIXTURE = '''import pytest

from pkg.thing import pages


@pytest.fixture
def test_tokens():
    return 100


def test_pages_for_a_hundred_tokens(test_tokens):
    assert pages(test_tokens) == 13


def test_pages_for_nothing():
    assert pages(0) == 0
'''


def test_a_fixture_named_like_a_test_keeps_its_name(tmp_path):
    """Defended: a fixture named `test_*` (`test_client`, `test_data`: pytest never collects it) keeps its name in
    validation's first look and in grading: the tests asking for it still find it."""
    task = _twinned(f"{FILE}::test_pages_for_a_hundred_tokens", [f"{FILE}::test_pages_for_nothing"])
    assert _at_validation(tmp_path, TEST_NAMED_FIXTURE, "test_pages_for_a_hundred_tokens") == "passed"
    assert _honest(tmp_path, task, TEST_NAMED_FIXTURE, PAGES_ORACLE, 2) == ["resolved"] * 2


def test_the_clone_helper_reads_text_fixtures(tmp_path):
    """Control for R8-5: the same value in a plain JSON fixture beside the test is read (red team 7's R7-9 fix)."""
    repository = _numbers_of_clone(tmp_path, {**PKG, "test/data/cases.json": CASES_JSON})
    assert Decimal(13) in repository["test/data/cases.json"]


# --- R8-7: a value an ancestor commit writes (the profile's `history: "ancestors"`) --------------------------------------

RELANDED = CPU_TEST.replace("pages(100) == 13", "pages(300) == 38")  # a strong site (13 is weak: R8-1)


@pytest.mark.parametrize("where", ["same-path", "moved", "message"])
def test_a_value_an_ancestor_commit_writes_does_not_name_the_real_member(tmp_path, where):
    """Reverted, then relanded: an ancestor of base held the same test (`pages(300) == 38`), a later commit took it
    out with its feature; the task relands it. With the profile's `history: "ancestors"` (the demo's) the box
    holds that ancestry, while the guard read the tree at base only (`repository_numbers`, `base_sources`).
    Variants: the old test at another path (moved since), and the value in a commit message only."""
    root = tmp_path / "clone"
    git = ["git", "-C", str(root), "-c", "user.name=r8", "-c", "user.email=r8@example.com"]
    old = {"same-path": FILE, "moved": "tests/legacy/test_old_pages.py", "message": None}[where]
    package = {"pkg/__init__.py": "", "pkg/thing.py": "def pages(n, size=None, device=None):\n    return n\n"}
    for path, text in {**package, **({old: RELANDED} if old else {})}.items():  # 38 is not 300 over a size it writes
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        (root / path).write_text(text)
    subprocess.run([*git, "init", "-q"], check=True)
    subprocess.run([*git, "add", "-A"], check=True)
    subprocess.run([*git, "commit", "-qm", "Add pages()" if old else "Add pages(): pages(300) == 38"], check=True)
    if old:
        subprocess.run([*git, "rm", "-q", old], check=True)
        subprocess.run([*git, "commit", "-qm", 'Revert "Add pages()"'], check=True)
    head = subprocess.run([*git, "rev-parse", "HEAD"], check=True, capture_output=True, text=True).stdout.strip()
    task = _task().model_copy(update={"base_commit": head})
    repository = guard.repository_numbers(root, task, [FILE], history="ancestors")
    at_base = guard.repository_numbers(root, task, [FILE], history="none")
    assert guard.base_sources(root, task, [FILE]) == {}  # the hidden file is not at base: nothing of it is read
    history = subprocess.run([*git, "log", "-p", head], check=True, capture_output=True, text=True).stdout
    said = set(twins.text_numbers("\n".join(ln for ln in history.splitlines() if "pages(300)" in ln)))
    assert Decimal(38) in said  # what the forger greps: the old check
    won, recorded = _bet_among(RELANDED, "test_pages_for_a_hundred_tokens", [f"{FILE}::test_pages_for_nothing"],
                               said, 200, repository=repository)
    assert won <= recorded + 0.1, (won, recorded, sorted(said))
    # the tree at base alone does not show it (a profile keeping no history): the bet wins there
    won, recorded = _bet_among(RELANDED, "test_pages_for_a_hundred_tokens", [f"{FILE}::test_pages_for_nothing"],
                               said, 200, repository=at_base)
    assert won > recorded + 0.5, (won, recorded)


# --- R8-10: a dependency naming a parametrized test by its id ----------------------------------------------------------

DEPENDS_ON_AN_ID = '''import pytest

from pkg.thing import pages


@pytest.mark.parametrize("tokens", [0])
def test_pages_for_nothing(tokens):
    assert pages(tokens) == 0


@pytest.mark.dependency(depends=["test_pages_for_nothing[0]"])
def test_pages_for_a_hundred_tokens():
    assert pages(100) == 13
'''


def test_a_test_depending_on_a_parametrized_test_by_its_id_still_runs(tmp_path):
    task = _twinned(f"{FILE}::test_pages_for_a_hundred_tokens", [f"{FILE}::test_pages_for_nothing[0]"])
    extra = {"conftest.py": DEPENDENCY_CONFTEST}
    assert _as_written(tmp_path, task, DEPENDS_ON_AN_ID, PAGES_ORACLE, extra) == "resolved"
    seen = _at_validation(tmp_path, DEPENDS_ON_AN_ID, "test_pages_for_a_hundred_tokens", extra=extra, selectors=extra)
    verdicts = _honest(tmp_path, task, DEPENDS_ON_AN_ID, PAGES_ORACLE, 3, extra, extra)
    assert seen == "passed" and verdicts == ["resolved"] * 3, (seen, verdicts)


# --- R8-12: captured output multiplied by the failing members ----------------------------------------------------------

PRINTS = '''from pkg.thing import pages


def test_pages_for_a_hundred_tokens():
    print("page table:", "x" * 900_000)
    assert pages(100) == 13


def test_pages_for_nothing():
    assert pages(0) == 0
'''


def test_a_test_printing_much_keeps_validations_output_within_what_the_host_keeps(tmp_path):
    from sweserve.environment.docker_sandbox import OUTPUT_TAIL_BYTES

    assert len(_run(tmp_path, twins.GradingPlan(texts={FILE: PRINTS}), PAGES_ORACLE).output) < 1000
    task = _task(FAIL_TO_PASS=[f"{FILE}::test_pages_for_a_hundred_tokens"],
                 PASS_TO_PASS=[f"{FILE}::test_pages_for_nothing"])
    plan = twins.grading_plan(task, {FILE: PRINTS}, seed=0, candidates=True)
    size = len(_run(tmp_path, plan, PAGES_ORACLE).output.encode())
    assert size <= OUTPUT_TAIL_BYTES, size
