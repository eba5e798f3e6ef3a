"""Mutation twins and the grading plan: the hidden test files as they go into the grade sandbox.

A twin of a graded test is the test's own text with one literal of its checks replaced: an expected value,
a bound of a comparison or a tolerance (`sites`). Validation plants, at a few sites, a group of K twins and
the values around the group (`margins`), and keeps, per test, one site whose twins failed in every run at base
and with the oracle, reading at base like the test's own failure, and none of whose margins passed (`select`);
they are recorded in task.json (`Task.twins`). Only a site whose value is a whole number can be strong: a decimal
is almost always computed, and a forger tabulates it (`computed`). A test with no numeric site may get *flip*
twins instead (`flips`): a check with two readings (`is None`/`is not None`, `in`/`not in`, `True`/`False`,
paired unittest methods) written the other way, one check or a grid of two; weak twins, since the forger has a
prior over readings (see the section). A test with neither may get a *raises* twin (`raises_checks`):
`pytest.raises(RuntimeError)` written `ValueError`, or the other way, the same two texts in every group; weak too
(a prior from the words of the test).

At grading, `grading_plan` writes each hidden file anew:

- every graded test, each of its twins and a few plain canaries (harness/sweserve_twins.py) get a fresh random name, all
  drawn from one distribution; a graded test's group goes where the file had the test, shuffled among its own
  members, and the canaries, shuffled, to the end of their scope (the module, or a class), so the tests keep
  the order they run in; each name opens with a rank token (`sweserve_twins.Ranks`) handed out in the order the
  real names sort, a group's members taking consecutive ones in their shuffled order and the canaries the last,
  so whatever runs tests sorted by name (a TestCase, whatever its base; a conftest that sorts) runs them in the
  order it ran the real ones: nothing in their names, their positions or their order says which member of a
  group is real; the names keep clear of what the repository's own name-based selection reads (a conftest's
  `"slow" in item.name`, a `-k`: `sweserve_twins.draw_name`), each group member carrying the words of its real
  name such a selection reads;
- the real test's literal at the twins' site is written by the same function as the twins' values, which
  form a progression holding the real value at a uniformly drawn rank: the group's texts differ in that
  one token only, and each value is as likely to be the real one as any other;
- the host keeps the map from names back to ids (`GradingPlan.read`); no map, tests.patch or original text
  goes into the sandbox.

`read` maps a run's outcomes back to real ids and says what was forged: a twin that passed, a twin missing
while its test passed, a must-pass canary that failed, a must-fail one that passed, or an exit status of 0
beside a failed twin. A real test that passed while any of its twins passed is failed, and so is one whose twin
was skipped or errored (it never reached its check: no evidence either way); a canary skipped or errored beside
passing tests fails every test of the run.

The plan is a pure function of (task, hidden test sources, seed), so an export's grader can make the same
files and map (see `grading_plan`).
"""

from __future__ import annotations

import ast
import bisect
import copy
import html
import json
import math
import random
import re
import tokenize
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from decimal import Decimal

from sweserve import pyast
from sweserve.harness import sweserve_twins as canaries  # shared with the exports' in-box verifier
from sweserve.models import TWIN_ORDERS, Outcome, Task, Twin, TwinOrder

K = 3  # twins per graded test
CANDIDATES = 3 * K  # the room on each side that makes a site's value sign-safe (`_sign_safe`)
MARGIN = 3  # steps beyond a group's values that validation also plants (`margins`): a value the unsolved code
# computes there drops the site
SHOWN_MARGIN = 2 * MARGIN  # steps beyond a group within which a number every member's failure shows drops it
CANDIDATE_SITES = 3  # sites tried per test at validation, spread over its checks
SEVERITY = {"passed": 0, "skipped": 1, "failed": 2, "error": 3, "missing": 4}
_CHECK_CALL = re.compile(r"^(assert|approx$|isclose$|allclose$)", re.I)
_DEFS = (ast.FunctionDef, ast.AsyncFunctionDef)
Kind = str  # "test", "twin", "canary"; in validation's plan also "margin" (`margins`)


# --- sites and values -------------------------------------------------------------------------------------------

def _number(node: ast.expr) -> int | float | None:
    """The value of a numeric literal (`3`, `-0.5`; never a bool, nor a float too large to be finite: `1e999`,
    red team 9, R9-10), or None."""
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        inner = _number(node.operand) if isinstance(node.operand, ast.Constant) else None
        return None if inner is None else (-inner if isinstance(node.op, ast.USub) else inner)
    if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)) and not isinstance(node.value, bool):
        return node.value if not isinstance(node.value, float) or math.isfinite(node.value) else None
    return None


def _literal_leaves(node: ast.expr) -> list[ast.expr] | None:
    """The numeric leaves of a pure literal (numbers, strings, None in tuples, lists, sets, dicts), or None
    when `node` computes anything (a name, a call, an operator)."""
    if _number(node) is not None:
        return [node]
    if isinstance(node, ast.Constant):
        return []
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        parts = [_literal_leaves(e) for e in node.elts]
    elif isinstance(node, ast.Dict):
        parts = [_literal_leaves(e) for e in [*node.keys, *node.values] if e is not None]
    else:
        return None
    return None if any(p is None for p in parts) else [leaf for p in parts for leaf in p]  # type: ignore[union-attr]


def _call_name(node: ast.Call) -> str:
    func = node.func
    return func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""


def sites(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> list[list[ast.expr]]:
    """The numeric literals of a test's checks, in source order, as sites: operands of comparisons in `assert`
    statements, and arguments of check calls (`assertEqual`, `assert_allclose`, `pytest.approx`, `isclose`,
    tolerances given by keyword) that are literals through and through. One site is every occurrence of one
    value in one such literal (`[(0, 3), (3, 6)]`: both 3s), so a twin keeps the literal's own structure.
    Inputs to the code under test are not sites: a twin changes what is expected, never what is computed."""
    found: dict[tuple, list[ast.expr]] = {}
    seen: set[int] = set()
    body = fn.body[1:] if fn.body and isinstance(fn.body[0], ast.Expr) and isinstance(
        getattr(fn.body[0], "value", None), ast.Constant) else fn.body
    for stmt in body:
        for node in ast.walk(stmt):
            operands: list[ast.expr] = []
            if isinstance(node, ast.Assert):
                operands = [o for c in ast.walk(node.test) if isinstance(c, ast.Compare)
                            for o in [c.left, *c.comparators]]
            elif isinstance(node, ast.Call) and _CHECK_CALL.match(_call_name(node)):
                args = [*node.args, *(k.value for k in node.keywords)]
                operands = args + [o for a in args for c in ast.walk(a) if isinstance(c, ast.Compare)
                                   for o in [c.left, *c.comparators]]
            for operand in operands:
                if id(operand) in seen:
                    continue
                seen.add(id(operand))
                for leaf in _literal_leaves(operand) or []:
                    if leaf.lineno == leaf.end_lineno:
                        number = _number(leaf)
                        found.setdefault((id(operand), type(number), number), []).append(leaf)
    groups = [sorted(g, key=lambda n: (n.lineno, n.col_offset)) for g in found.values()]
    return sorted(groups, key=lambda g: (g[0].lineno, g[0].col_offset))


def _unit(value: int | float) -> Decimal:
    """The step of the value's last written digit: 1 for 7, 100 for 300, 0.01 for 0.25, 1e-05 for 1e-05."""
    if isinstance(value, int):
        if value == 0:
            return Decimal(1)
        zeros = len(str(abs(value))) - len(str(abs(value)).rstrip("0"))
        return Decimal(10) ** zeros
    exponent = Decimal(repr(value)).as_tuple().exponent
    return Decimal(1).scaleb(int(exponent) if isinstance(exponent, int) else 0)


def render(value: Decimal, is_float: bool, unit: Decimal) -> str:
    """A site's value as source text: one function for the real test and its twins alike."""
    if not is_float:
        return str(int(value))
    places = max(0, -int(unit.as_tuple().exponent))
    return f"{value:.{places}f}" if places else f"{value:.1f}"


def _decimal(value: int | float) -> Decimal:
    return Decimal(repr(value)) if isinstance(value, float) else Decimal(value)


def _marked(value: int | float) -> bool:
    """Whether a prior singles the value out among its neighbours: an int whose magnitude is a power of two
    of 16 or more (sizes, dims, block counts), which a forger bets on where one member of a group is one."""
    if isinstance(value, float) or value != int(value):
        return False
    n = abs(int(value))
    return n >= 16 and n & (n - 1) == 0


def _valuation(n: int, p: int) -> int:
    """How many times p divides n (n > 0)."""
    count = 0
    while n and n % p == 0:
        n, count = n // p, count + 1
    return count


def _special(n: int) -> bool:
    """Whether a significand of two or more digits has a shape a person types on purpose: 2^k - 1 or 2^k + 1
    (15, 255, 4095, 257: masks, type limits, one past a power of two), all nines (99, 999), or of three digits or
    more one digit repeated (777) or a run (123, 987)."""
    if n < 10:
        return False
    digits = str(n)
    runs = "0123456789"
    return ((n + 1) & n == 0 or (n - 1) & (n - 2) == 0 or set(digits) == {"9"}
            or (len(digits) >= 3 and (len(set(digits)) == 1 or digits in runs or digits in runs[::-1])))


_CONSTANTS = (math.pi, math.e, math.sqrt(2), math.sqrt(3), math.log(2), 2 * math.pi, math.pi / 2, math.log(10))
_FRACTIONS = tuple(p / q for q in (3, 6, 7, 9) for p in range(1, 4 * q) if math.gcd(p, q) == 1)


def _rounded_fraction(value: Decimal, unit: Decimal) -> bool:
    """Whether a decimal value is a fraction of thirds, sixths, sevenths or ninths (1/3, 2/3, 1/6, 1/7: no decimal
    ends them) or a known constant (pi, e, ln 2, sqrt 2), rounded at its last written digit: 0.333, 0.1667,
    3.1416, 0.693."""
    if unit >= 1:
        return False
    half = float(unit) / 2
    return any(abs(abs(float(value)) - c) < half for c in _FRACTIONS + _CONSTANTS)


SHAPE_PRIMES = (2, 5, 3)  # the primes whose powers a member shares with the real value (`value_shape`)
Shape = tuple[tuple[int, ...], bool, bool, int]


def value_shape(value: Decimal, is_float: bool, unit: Decimal) -> Shape:
    """What a prior over the values tests check reads of a value beside its unit (`_unit`, the trailing zeros):
    the powers of 2, 5 and 3 in its significand (24 is a multiple of 8, 75 of 25, 0.25 ends in 25, 81 is 3^4),
    whether the significand is `_special` or the value a `_rounded_fraction`, and its length as written. Red
    team 8 (R8-1): twins stepping by the unit alone left 24 the one multiple of 8 among 23..26, 75 the one ending
    in 5, 0.333 the one third; the forger betting on that one won 1.0 where the guard recorded 0.25. Red team 9
    (R9-3): members sharing the powers of 2 and 5 only left the checked values' many factors of 3 (42, 81, 210,
    324, 468, 684): one fixed bet on the member with most won 0.40 over numpy's checked integers, recorded 0.25.
    Values tests check are smooth, because people choose them; a member as divisible as the real one by each of
    2, 3 and 5 leaves a smoothness bet the odds of 7 and larger primes."""
    n = abs(int(value / unit))
    return (tuple(_valuation(n, p) for p in SHAPE_PRIMES), _special(n), _rounded_fraction(value, unit),
            len(render(value, is_float, unit)))


def alike(members: Iterable[Decimal], real: Decimal | None) -> bool:
    """Whether every member of a numeric group has the real value's unit and `value_shape`, as `values` draws a
    strong site's group: a group recorded before (unit alone) may hold the one round member."""
    if real is None:
        return False
    is_float = isinstance(exponent := real.as_tuple().exponent, int) and exponent < 0  # `_decimal` of a float: `2.0`
    unit = _unit(float(real) if is_float else int(real))
    like = value_shape(real, is_float, unit)
    return all(_unit(float(m) if is_float else int(m)) == unit and value_shape(m, is_float, unit) == like
               for m in members)


def _admissible(value: Decimal, is_float: bool, unit: Decimal, avoid: frozenset[Decimal],
                like: Shape | None = None) -> bool:
    """Whether a value may stand in a progression whose real member has `unit`: it reads back with that same
    unit (`10` or `0.20` among steps of 1 or 0.01 could never be a real value: the real one is written by
    `render` from its own unit, so such a member is a twin for sure), no prior marks it (`_marked`), it is not
    in `avoid` (values the forger can read elsewhere: the real one never is, so neither may a twin) and, where
    `like` is given, it has that `value_shape` (the real one's): no member is rounder than another."""
    number: int | float = float(value) if is_float else int(value)
    return (_unit(number) == unit and not _marked(number) and value not in avoid and value != 0
            and (like is None or value_shape(value, is_float, unit) == like))


def _sides(value: int | float, count: int, avoid: frozenset[Decimal] = frozenset(),
           keep_sign: bool = True, shaped: bool = True) -> tuple[list[Decimal], list[Decimal]]:
    """The admissible values (`_admissible`) below and above the value, nearest first, up to `count` each (within
    10 * count + 10 steps): one walk along the progression for `_room` and `values`. `keep_sign`: a side ends at zero or
    a sign change (the room a site has); else zero is skipped and the walk goes on. `shaped`: only values of the
    real one's `value_shape` (a strong site's); else of its unit alone (a fall-back site's, a weak twin)."""
    unit, real, is_float = _unit(value), _decimal(value), isinstance(value, float)
    like = value_shape(real, is_float, unit) if shaped else None
    out: tuple[list[Decimal], list[Decimal]] = ([], [])
    for side, step in zip(out, (-1, 1)):
        v = real
        for _ in range(count * 10 + 10):
            if len(side) == count:
                break
            v += step * unit
            if keep_sign and (v == 0 or (v > 0) != (real > 0)):
                break
            if _admissible(v, is_float, unit, avoid, like):
                side.append(v)
    return out


def _room(value: int | float, k: int, avoid: frozenset[Decimal] = frozenset(), shaped: bool = True) -> bool:
    """Whether `k` admissible values of the value's own sign (and `value_shape`, where `shaped`) lie on each side of
    it: then every rank of a progression of k+1 can be drawn, and no member's sign (`len(x) == -2`), zero or
    shape says it is a twin. A value without that room gets no strong twins at its site: drawing only the ranks
    that fit would put the real one at the progression's low end."""
    if _decimal(value) == 0:
        return False
    below, above = _sides(value, k, avoid, shaped=shaped)
    return len(below) >= k and len(above) >= k


def values(value: int | float, rng: random.Random, k: int = K,
           avoid: frozenset[Decimal] = frozenset()) -> tuple[str, list[str]]:
    """The real value's text and `k` others: a progression of k+1 values of the real one's unit (its last written
    digit: equally round) and, where the site has room for it (`_room`), its `value_shape`, holding the real one at a
    rank drawn uniformly. Steps that land on a value of another shape (`_admissible`) are skipped, on both sides
    alike: every member has the same shape, and the real one is still at a uniform rank of the admissible values
    around it. A site without room gets twins of its unit alone (a fall-back site: weak, `strong_sites`)."""
    unit, is_float = _unit(value), isinstance(value, float)
    rank = rng.randint(0, k)
    below, above = _sides(value, k, avoid, keep_sign=False, shaped=_room(value, k, avoid))
    others = [render(v, is_float, unit) for v in below[:rank][::-1] + above[:k - rank]]
    return render(_decimal(value), is_float, unit), others


def margins(value: int | float, members: list[str], m: int = MARGIN) -> list[str]:
    """Every value one step apart at the value's unit from `m` steps below the group's lowest member to `m`
    above its highest, but the members: what validation also plants beside a group, never a twin. One that
    passes at base is a value the unsolved code computes near the group; whether it falls there depends on the
    group alone, never on which member is the real one (the range is the group's, not the real value's)."""
    unit, is_float = _unit(value), isinstance(value, float)
    written = [Decimal(t) for t in members]
    taken = set(written)
    v, out = min(written) - m * unit, []
    while v <= max(written) + m * unit:
        if v not in taken:
            out.append(render(v, is_float, unit))
        v += unit
    return out


# --- flips: checks with two readings ----------------------------------------------------------------------------
#
# A test without a numeric site may still check something that reads one of two ways: `x is None` or
# `x is not None`, `a in b` or `a not in b`, `True` or `False` compared with, `assertTrue`/`assertFalse`,
# `assertIsNone`/`assertIsNotNone`, `assertIn`/`assertNotIn`. A twin flips one such reading; two flips of one
# test make a grid of four members (neither flipped, the one, the other, both), each differing from two others
# by one token: the real one is a corner like any other. These are *weak* twins (see the README): the forger's
# prior over a reading is not flat. Which reading is common is measured (`FLIP_COMMON`, on sglang-jax's tests)
# and validation tries a site whose real reading is the common one only with probability (1 - p) / p, drawn
# in secret, so a tried site reads either way with odds 1:1 under that prior; a prior from the test's name or
# the instruction (`test_returns_none`) is not neutralized.

FLIP_METHODS = {"assertTrue": "assertFalse", "assertIsNone": "assertIsNotNone", "assertIn": "assertNotIn"}
FLIP_METHODS |= {v: k for k, v in list(FLIP_METHODS.items())}
# the kind's common reading and its share among the flips validation may try (of tests with no numeric site, read
# neither way elsewhere) in the whole hidden files of 175 sglang-jax tasks at their merge commits (3853 tests,
# `benchmarks/twin_coverage.py --repo`): 54 `is None` to 16 `is not None`, 48 `in` to 22 `not in`, 47
# `True`/`assertTrue` to 42 `False`/`assertFalse`. Small samples (about +-0.05), from one repository.
FLIP_COMMON: dict[str, tuple[str, float]] = {"none": ("is None", 0.77), "in": ("in", 0.69), "bool": ("True", 0.53)}
_FLIP_OPS = {ast.Is: "is", ast.IsNot: "is not", ast.In: "in", ast.NotIn: "not in"}
_NEGATED = {"is": "is not", "is not": "is", "in": "not in", "not in": "in"}


@dataclass(frozen=True, eq=False)
class Flip:
    """One check with two readings: `node`'s text is written `readings[0]` (the real one) or `readings[1]`."""

    node: ast.expr
    kind: str  # "none", "in", "bool"
    readings: tuple[str, str]
    subject: tuple[str, ...] = ()  # none: (the checked expression,); in: (the member, the container)

    @property
    def common(self) -> bool:
        """Whether the real reading is the kind's common one (`FLIP_COMMON`)."""
        word = FLIP_COMMON[self.kind][0]
        real = self.readings[0]
        if self.kind == "bool":
            return real in ("True", ) or real.endswith(".assertTrue")
        if self.kind == "none":
            return f" {word}" in real and " is not None" not in real or real.endswith(".assertIsNone")
        return (" in " in real and " not in " not in real) or real.endswith(".assertIn")


def _flip_of(node: ast.expr) -> Flip | None:
    if node.lineno != node.end_lineno:
        return None
    if isinstance(node, ast.Compare) and len(node.ops) == 1 and type(node.ops[0]) in _FLIP_OPS:
        op, right = _FLIP_OPS[type(node.ops[0])], node.comparators[0]
        kind = "in" if op in ("in", "not in") else "none" if any(
            isinstance(x, ast.Constant) and x.value is None for x in (node.left, right)) else ""
        if not kind:
            return None
        left, rhs = ast.unparse(node.left), ast.unparse(right)
        subject = (left, rhs) if kind == "in" else (rhs if isinstance(node.left, ast.Constant) else left,)
        return Flip(node, kind, (f"{left} {op} {rhs}", f"{left} {_NEGATED[op]} {rhs}"), subject)
    if isinstance(node, ast.Constant) and isinstance(node.value, bool):
        return Flip(node, "bool", (repr(node.value), repr(not node.value)))
    if isinstance(node, ast.Attribute) and node.attr in FLIP_METHODS:
        kind = "bool" if "True" in node.attr or "False" in node.attr else "none" if "None" in node.attr else "in"
        owner = ast.unparse(node.value)
        return Flip(node, kind, (f"{owner}.{node.attr}", f"{owner}.{FLIP_METHODS[node.attr]}"))
    return None


def flips(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> list[Flip]:
    """The checks of a test that read one of two ways, in source order: a one-operator `is None`/`is not None`
    or `in`/`not in` comparison of an `assert`, a bool literal compared with in an `assert` or passed to a
    check call, and a paired unittest method (`assertTrue`, `assertIsNone`, `assertIn` and their opposites).
    Single-line nodes only; never an input to the code under test."""
    found: dict[int, Flip] = {}
    for stmt in fn.body:
        for node in ast.walk(stmt):
            candidates: list[ast.expr] = []
            if isinstance(node, ast.Assert):
                for c in _checked(node.test):
                    if isinstance(c, ast.Compare):
                        candidates.append(c)
                        candidates += [o for o in [c.left, *c.comparators] if isinstance(o, ast.Constant)]
            elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and (
                    node.func.attr in FLIP_METHODS or _CHECK_CALL.match(node.func.attr)):
                if node.func.attr in FLIP_METHODS:
                    candidates.append(node.func)
                candidates += [a for a in node.args if isinstance(a, ast.Constant)]  # keywords: flags, not values
            for cand in candidates:
                flip = _flip_of(cand)
                if flip is not None and isinstance(node, ast.Call) and cand is node.func and flip.kind != "bool":
                    args = [ast.unparse(a) for a in node.args[:2]]
                    flip = Flip(flip.node, flip.kind, flip.readings, tuple(args[:1] if flip.kind == "none" else args))
                if flip is not None and id(cand) not in found:
                    found[id(cand)] = flip
    # nested flips on one node: keep the outermost per line span
    out = sorted(found.values(), key=lambda f: (f.node.lineno, f.node.col_offset))
    out = [f for f in out if not any(g is not f and _inside(f.node, g.node) for g in out)]
    return [f for f in out if not _contradicted(fn, f, out)]


def _contradicted(fn: ast.FunctionDef | ast.AsyncFunctionDef, flip: Flip, every: list[Flip]) -> bool:
    """Whether one reading of the check would contradict the rest of the test, which tells the real reading
    without running anything: the checked expression used anywhere else as an object (`assert out is not None`
    and `out.handle`: `out is None` there is a twin), the container indexed by the member beside a membership
    check, or a second check of the same subject (`x is None` beside `x is not None` in a twin). Such a check
    is never flipped, whatever its reading."""
    if not flip.subject:
        return False
    if any(g is not flip and g.kind == flip.kind and g.subject == flip.subject for g in every):
        return True
    mine = {id(n) for n in ast.walk(flip.node)}
    for node in ast.walk(fn):
        if id(node) in mine:
            continue
        if flip.kind == "none" and isinstance(node, (ast.Attribute, ast.Subscript)) and \
                ast.unparse(node.value) == flip.subject[0]:
            return True
        if flip.kind == "none" and isinstance(node, ast.Call) and ast.unparse(node.func) == flip.subject[0]:
            return True
        if flip.kind == "in" and len(flip.subject) == 2 and isinstance(node, ast.Subscript) and \
                (ast.unparse(node.value), ast.unparse(node.slice)) == (flip.subject[1], flip.subject[0]):
            return True
    return False


def _checked(node: ast.expr) -> list[ast.expr]:
    """The comparisons an `assert` itself decides on: through `and`, `or` and `not`, never inside a call or
    a subscript (`assert run(x is None) == 3`: `x is None` is an input)."""
    if isinstance(node, ast.BoolOp):
        return [c for v in node.values for c in _checked(v)]
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
        return _checked(node.operand)
    return [node] if isinstance(node, ast.Compare) else []


def _inside(a: ast.expr, b: ast.expr) -> bool:
    return a.lineno == b.lineno and b.col_offset <= a.col_offset and (a.end_col_offset or 0) <= (b.end_col_offset or 0)


def flip_value(indices: list[int]) -> str:
    """A flip twin's `Twin.value`: the flips (indices into `flips`) it writes the other way."""
    return "flip " + " ".join(map(str, sorted(indices)))


def flip_indices(value: str) -> list[int] | None:
    """The flips a twin's value names, or None for a numeric twin's value."""
    if not value.startswith("flip "):
        return None
    try:
        return [int(x) for x in value.split()[1:]]
    except ValueError:
        return None


def _statements(tree: ast.AST | None) -> Counter[str]:
    """Every simple statement under `tree`, unparsed, counted."""
    if tree is None:
        return Counter()
    return Counter(ast.unparse(n) for n in ast.walk(tree) if isinstance(n, ast.stmt)
                   and not isinstance(n, (*_DEFS, ast.ClassDef, ast.If, ast.For, ast.While, ast.With, ast.Try)))


def seen_statements(base_text: str | None, tree: ast.Module | None, fn: ast.FunctionDef | ast.AsyncFunctionDef,
                    cache: dict[str, Counter[str]] | None = None) -> set[str]:
    """What a forger reads beside a test's members, statement by statement: the whole base version of its file
    and the rest of the hidden file (other tests keep their real readings where they are not flipped).
    `cache`: one dict per file, so that the file and its base version are read once for all its tests."""
    cache = {} if cache is None else cache
    if "base" not in cache:
        try:
            cache["base"] = _statements(pyast.parse_module(base_text) if base_text else None)
        except (SyntaxError, ValueError):
            cache["base"] = Counter()
        cache["file"] = _statements(tree)
    rest = cache["file"] - _statements(fn)  # a statement also written outside this test stays
    return set(cache["base"]) | set(rest)


class _Swap(ast.NodeTransformer):
    def __init__(self, target: ast.expr, text: str):
        self.at = (type(target), target.lineno, target.col_offset, target.end_col_offset)
        self.new = pyast.parse_expression(text).body

    def visit(self, node: ast.AST) -> ast.AST:
        if (type(node), getattr(node, "lineno", None), getattr(node, "col_offset", None),
                getattr(node, "end_col_offset", None)) == self.at:
            return self.new
        return super().visit(node)


def _readings_as_statements(fn: ast.FunctionDef | ast.AsyncFunctionDef, flip: Flip) -> tuple[str, str]:
    """The statement holding a flip, unparsed, read the real way and the other."""
    stmt = next(s for s in ast.walk(fn) if isinstance(s, ast.stmt) and not isinstance(s, _DEFS)
                and any(n is flip.node for n in ast.walk(s)) and not any(
                    isinstance(c, ast.stmt) and any(n is flip.node for n in ast.walk(c))
                    for c in ast.iter_child_nodes(s)))
    other = _Swap(flip.node, flip.readings[1]).visit(copy.deepcopy(stmt))
    return ast.unparse(stmt), ast.unparse(other)


def _flip_group(fn: ast.FunctionDef | ast.AsyncFunctionDef, rng: random.Random,
                seen: set[str] | None = None) -> list[int]:
    """The flips validation tries for a test with no numeric site: up to two (a grid), spread over its checks.
    A flip whose statement, read either way, the forger reads elsewhere (`seen_statements`: the base file, the
    rest of the hidden file) is never tried: the member that matches would be real, or, were only the real
    reading checked, a twin. One whose real reading is its kind's common one is tried with probability
    (1 - p) / p (`FLIP_COMMON`), so a tried flip reads either way with odds 1:1 under that prior."""
    usable = []
    for i, f in enumerate(flips(fn)):
        if seen and set(_readings_as_statements(fn, f)) & seen:
            continue
        p = FLIP_COMMON[f.kind][1]
        if f.common and rng.random() >= (1 - p) / p:
            continue
        usable.append(i)
    return [usable[j] for j in _spread(len(usable), 2)]


# --- raises: the exception class a check expects ----------------------------------------------------------------
#
# A test that only checks that a call raises (`with pytest.raises(RuntimeError):`, `self.assertRaises(ValueError)`)
# has no numeric site and often no flip. A raises twin writes the other class of a fixed pool, so that every group
# of this operator is the same two texts, `RuntimeError` and `ValueError`, the real one at either: in sglang-jax's
# hidden files (175 tasks, whole files at merge commits) they are 68 and 67 of 173 raises checks, the rest spread
# over a dozen classes (`AssertionError` 12, tuples, library errors), and neither is a subclass of the other (a
# pool with `NotImplementedError`, a `RuntimeError`, would keep a group only where the real class is the subclass
# and the twin the parent fails: which group survives would name the real one). A class outside the pool gets no
# twin: a group of the real class and pool classes would show it as the odd one out. These are *weak* twins (see
# the README): a forger who learns which words go with which class (`out_of_range` -> `ValueError`, `double_free`
# -> `RuntimeError`) from the repository's other tests picks the real one about 0.73 of the time (measured on
# those 135 checks, leave-one-file-out), against 1.0 beside no twin.

RAISES_POOL = ("RuntimeError", "ValueError")
# each class's share among the pool's checks (counts above; among the 53 checks validation may try, 26 to 27,
# `benchmarks/twin_coverage.py --repo`): validation tries a check whose real class is the more common one only
# with probability min share / its share, so a tried check reads either way with odds 1:1
RAISES_SHARE: dict[str, float] = {"RuntimeError": 68 / 135, "ValueError": 67 / 135}
_RAISES_CALLS = ("raises", "assertRaises", "assertRaisesRegex")
_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def raises_checks(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> list[ast.Name]:
    """The class names of a test's raises checks whose class is in the pool, in source order: the first argument
    of `pytest.raises`, `assertRaises`, `assertRaisesRegex` (as a context manager or called), a bare name on one
    line. A class written any other way (`errors.ValueError`, a tuple, a name bound in the test) is not one."""
    out = [node.args[0] for node in ast.walk(fn) if isinstance(node, ast.Call) and _call_name(node) in _RAISES_CALLS
           and node.args and isinstance(node.args[0], ast.Name) and node.args[0].id in RAISES_POOL]
    return sorted(out, key=lambda n: (n.lineno, n.col_offset))


def raises_value(index: int, cls: str) -> str:
    """A raises twin's `Twin.value`: the check (an index into `raises_checks`) and the class it writes."""
    return f"raises {index} {cls}"


def raises_of(value: str) -> tuple[int, str] | None:
    """The check and class a raises twin's value names, or None for any other twin's value."""
    parts = value.split()
    if len(parts) != 3 or parts[0] != "raises" or not parts[1].isdigit() or parts[2] not in RAISES_POOL:
        return None
    return int(parts[1]), parts[2]


def _pool_words(text: str | None) -> set[str]:
    return {w for w in _WORD.findall(text or "") if w in RAISES_POOL}


def _raises_eligible(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> list[ast.Name]:
    """The one raises check a test may get a group at: a test with exactly one pool check and no other pool
    class in its own text (a second check, a `raise`, a comment would stand written as the real one in every
    member, beside the group); else none."""
    checks = raises_checks(fn)
    if len(checks) != 1:
        return []
    words = sum(1 for n in ast.walk(fn) if isinstance(n, ast.Name) and n.id in RAISES_POOL)
    strings = any(_pool_words(n.value) for n in ast.walk(fn) if isinstance(n, ast.Constant) and isinstance(n.value, str))
    return checks if words == 1 and not strings else []


def raises_seen(text: str, tree: ast.Module, graded: list[tuple[ast.ClassDef | None, Def]],
                base_text: str | None, instruction: str) -> set[str]:
    """The pool's classes a forger reads beside a file's raises groups where they may name a group's real class:
    in the instruction, anywhere in the base version of the file, and in the hidden file outside its graded
    tests' raises checks (a fake's `raise RuntimeError` that the code under test must re-raise, an ungraded
    test's check, a comment). Where any is read, the file gets no raises group: the member naming it would be
    the real one, or, were only the real class compared, a twin. Graded tests' checks that keep no group (a
    numeric site or a flip was tried, two checks, thinned, dropped at validation) stand as written: a prior
    over the file's classes, measured in tests/test_attacks_twin_raises.py."""
    hidden = _lines(text)
    for _, fn in graded:
        for node in raises_checks(fn):
            i = node.lineno - 1
            hidden[i] = _replace(hidden[i], node, " " * len(node.id.encode("utf-8")))
    words: set[str] = set()
    try:
        tokens = list(tokenize.generate_tokens(iter(hidden).__next__))
    except (tokenize.TokenError, SyntaxError):
        return set(RAISES_POOL)
    for tok in tokens:
        words |= _pool_words(tok.string)
    return words | _pool_words(base_text) | _pool_words(instruction)


def _raises_try(fn: ast.FunctionDef | ast.AsyncFunctionDef, seen: set[str], rng: random.Random) -> int | None:
    """The raises check validation tries for a test with neither a numeric site nor a flip, or None: its one
    pool check (`_raises_eligible`), where the file reads none of the pool elsewhere (`raises_seen`); a check
    whose real class is the more common one is tried with probability min share / its share (`RAISES_SHARE`)."""
    checks = _raises_eligible(fn)
    if not checks or seen:
        return None
    real = checks[0].id
    if rng.random() >= min(RAISES_SHARE.values()) / RAISES_SHARE[real]:
        return None
    return 0


RAISES_REAL = "raises"  # the real test's `Member.literal` in a raises group (its class is on the twins' members)


def _add_raises_members(plan: GradingPlan, block: list[str], lines: list[str], fn: ast.FunctionDef | ast.AsyncFunctionDef,
                        file: str, key: str | None, test_id: str, name: str, index: int, group: list[Twin], site: int,
                        words: list[str], taken: set[str], rng: random.Random, name_checks: Sequence[str] = ()) -> None:
    """The real test (already a member, named `name`) and its raises twins, every member written by
    `_member_text` with its class at the check: `group` the recorded twins, or none for validation's candidates
    (then one per other class of the pool)."""
    checks = raises_checks(fn)
    if index >= len(checks):  # the file changed since validation: no twins rather than wrong ones
        block.append(_member_text(lines, fn, name, []))
        return
    node, real = checks[index], checks[index].id
    block.append(_member_text(lines, fn, name, [(node, real)]))
    for twin in group or [Twin(test=test_id, site=site, value=raises_value(index, c)) for c in RAISES_POOL
                          if c != real]:
        cls = (raises_of(twin.value) or (0, real))[1]
        twin_name = _fresh_name(rng, words, taken, name_checks, fn.name)
        plan.members.append(Member(file, key, twin_name, "twin", fn.name, twin, literal=cls, real_literal=real))
        block.append(_member_text(lines, fn, twin_name, [(node, cls)]))


# --- the files --------------------------------------------------------------------------------------------------

@dataclass(frozen=True, eq=False)
class Member:
    """One test of the planted files: a graded test, a twin, or a canary; `name` is its planted name."""

    file: str
    cls: str | None
    name: str
    kind: Kind
    real: str = ""  # tests and twins: the graded test's name
    twin: Twin | None = None
    must_pass: bool = True  # canaries
    literal: str = ""  # tests with twins and twins: their text at the site
    real_literal: str = ""  # twins: the real test's text at the site
    alias: bool = False  # the member of its name that is no alias, as another class that inherits it runs it
    unread: bool = False  # its outcomes stand for nothing: a test or twin in a mixin no runner collects as such,
    # or a twin inherited by a class whose copy of the test does not record it (`_aliases`)

    @property
    def test_id(self) -> str:
        """The graded test's id (tests and twins)."""
        return "::".join([self.file, *([self.cls] if self.cls else []), self.real])


RealAt = TwinOrder  # where validation's extreme orders put each graded test in its group
REAL_AT = TWIN_ORDERS


@dataclass
class GradingPlan:
    """The planted files (`texts`: file -> text, what goes into the sandbox) and, kept on the host, what each
    planted name is (`members`). `candidates`: validation's plan, whose twins are candidates, not must-fails."""

    texts: dict[str, str] = field(default_factory=dict)
    members: list[Member] = field(default_factory=list)
    candidates: bool = False

    def names(self) -> dict[str, str]:
        """Planted id -> what it stands for: the real id of a test, `<real id>~twin` or `~canary`."""
        out = {}
        for m in self.members:
            if m.unread:
                continue
            planted = "::".join([m.file, *([m.cls] if m.cls else []), m.name])
            out[planted] = m.test_id if m.kind == "test" else f"{m.test_id}~{m.kind}" if m.twin else "~canary"
        return out

    def map_json(self) -> str:
        """The host's half of the plan (what each planted name is), without the files: for an export that
        keeps it where the tests cannot read it and reads a run back later (`GradingPlan.from_map`)."""
        members = [{**{k: getattr(m, k) for k in ("file", "cls", "name", "kind", "real", "must_pass", "literal",
                                                   "real_literal", "alias", "unread")},
                    "twin": m.twin.model_dump(mode="json") if m.twin else None} for m in self.members]
        return json.dumps({"candidates": self.candidates, "members": members}, sort_keys=True)

    @classmethod
    def from_map(cls, text: str) -> GradingPlan:
        data = json.loads(text)
        members = [Member(**{**m, "twin": Twin.model_validate(m["twin"]) if m["twin"] else None})
                   for m in data["members"]]
        return cls(texts={}, members=members, candidates=bool(data["candidates"]))

    def unmask(self, text: str) -> str:
        """Output with each planted name replaced by what it stands for (for the trial's tests.log)."""
        names = {m.name: m.real if m.kind == "test" else f"{m.real}~{m.kind}" if m.twin else "canary"
                 for m in self.members}
        if not names or not text:
            return text
        pattern = re.compile(r"\b(" + "|".join(map(re.escape, sorted(names, key=len, reverse=True))) + r")\b")
        return pattern.sub(lambda m: names[m.group(1)], text)

    def read(self, outcomes: dict[str, Outcome], skips: dict[str, str] | None = None,
             messages: dict[str, str] | None = None, exit_status: int | None = None) -> Reading:
        return _read(self, outcomes, skips or {}, messages or {}, exit_status)


@dataclass
class Reading:
    """A run's outcomes read through the plan: real ids only, each twin's outcome, and what was forged."""

    outcomes: dict[str, Outcome]
    skips: dict[str, str]
    messages: dict[str, str]
    twins: dict[str, Outcome]  # twin (as JSON) -> its worst outcome
    shapes: dict[str, tuple[str, ...]]  # real id -> (its failure shaped,); twin (as JSON) -> (shaped, the real
    # test's literal, its own)
    problems: list[str]
    margins: dict[str, Outcome] = field(default_factory=dict)  # validation's margins (as JSON) -> worst outcome


def _lines(text: str) -> list[str]:
    """text split after newlines only, as `ast` counts lines (str.splitlines also splits on form feeds)."""
    parts = text.split("\n")
    out = [p + "\n" for p in parts[:-1]] + ([parts[-1] + "\n"] if parts[-1] else [])
    return out


def _start(node: ast.stmt) -> int:
    return min([node.lineno] + [d.lineno for d in getattr(node, "decorator_list", [])]) - 1


def _is_testcase(node: ast.ClassDef) -> bool:
    return any((isinstance(b, ast.Name) and b.id.endswith("TestCase")) or
               (isinstance(b, ast.Attribute) and b.attr.endswith("TestCase")) for b in node.bases)


def _parametrized(nodes: list[ast.stmt], text: str) -> bool:
    """A `pytestmark` parametrize there applies to every test: a canary would lack its arguments."""
    for node in nodes:
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "pytestmark" for t in node.targets):
            if "parametrize" in (ast.get_source_segment(text, node) or "parametrize"):
                return True
    return False


Def = ast.FunctionDef | ast.AsyncFunctionDef


def collected(tree: ast.Module, runner: str) -> list[tuple[ast.ClassDef | None, Def]]:
    """The tests a runner collects from a module's top level, each once, in the scope that defines it: `test*`
    functions (pytest), `test*` methods of `Test*` classes (pytest) or TestCase subclasses, and those methods'
    definitions in another class of the module they inherit (a mixin, at any depth: `class TestPool(PoolChecks,
    unittest.TestCase)`). `collectors` says which classes collect each. A mixin imported from another module is
    not read (its tests keep their real names: `evaluation/guard.py` counts them as twinless), nor is a test a
    class of the module would inherit through a base read nowhere here that may define the same name first."""
    out: dict[tuple[str | None, str], tuple] = {}  # a name defined twice: the last definition is the test
    owners = collectors(tree, runner)
    for node in tree.body:
        if isinstance(node, _DEFS) and node.name.startswith("test") and runner == "pytest":
            out.pop((None, node.name), None)
            out[(None, node.name)] = (None, node)
        elif isinstance(node, ast.ClassDef):
            for n in node.body:
                if isinstance(n, _DEFS) and id(n) in owners:
                    out.pop((node.name, n.name), None)
                    out[(node.name, n.name)] = (node, n)
    return list(out.values())


def reorders(texts: Iterable[str]) -> bool:
    """Whether one of `texts` (the hidden files and the selector files grading reads) sets the order unittest's
    loader gives a class's tests (`sortTestMethodsUsing`): `pinned` then keeps every test's name."""
    return any("sortTestMethodsUsing" in t for t in texts)


def pinned(tree: ast.Module, names: set[str], reordered: bool = False) -> set[str]:
    """The names of the module's tests that keep their names, with no group planted (graded as they are,
    twinless: `evaluation/guard.py` counts them so): a test whose name the module reads outside its own def (a
    test calling another, `self.test_b()`, an alias `test_y = test_x`, `test_x.__test__ = False`, a string
    naming it such as `depends=["test_x"]` or ending a test id with it: renamed, the name would go missing: red
    team 7, R7-1, R7-2, R7-7);
    and every test where the loader orders tests its own way (`reordered`: `reorders`; planted names would run
    in an order their drawn words decide, R7-5). The guard reads the same selector files (`guard.measure`), so
    its odds count what grading plants. `names`: the module's collected tests (`collected`)."""
    if reordered:
        return set(names)
    docstrings = {id(n.value) for n in ast.walk(tree) if isinstance(n, ast.Expr)}
    found: set[str] = set()
    for n in ast.walk(tree):
        if isinstance(n, ast.Name) and n.id in names:
            found.add(n.id)
        elif isinstance(n, ast.Attribute) and n.attr in names:
            found.add(n.attr)
        elif isinstance(n, ast.Constant) and isinstance(n.value, str) and id(n) not in docstrings:
            # a string that is the name, or ends a test id or a dotted path with it (`depends=["test_x"]`,
            # `"TestX::test_x"`, `getattr(self, "test_x")`); a message that mentions it renames nothing
            said = base_id(n.value.strip())  # a parametrized test's id names it too (`"test_x[0]"`: red team 8)
            found |= {name for name in names if said == name or said.endswith((f"::{name}", f".{name}"))}
    return found


def collectors(tree: ast.Module, runner: str) -> dict[int, list[str | None]]:
    """id() of each collected test's definition -> the names of the classes that collect it (in the module's
    order: the defining class first where it collects it itself), or [None] for a module-level test. A method
    some collected class would inherit from past a base not defined in the module (which may define the same
    name) is left out, with every class that inherits it: renamed in its class, it would go missing there."""
    out: dict[int, list[str | None]] = {}
    if runner == "pytest":
        for node in tree.body:
            if isinstance(node, _DEFS) and node.name.startswith("test"):
                out[id(node)] = [None]
    unsure: set[int] = set()
    for cls in _collected_classes(tree, runner):
        found: dict[str, Def] = {}
        blind = False  # past a base read nowhere in the module
        for entry in _mro(tree, cls) or []:  # None: Python refuses the class; its module does not import
            if isinstance(entry, str):
                blind |= not _plain_base(entry)
                continue
            for n in entry.body:
                if isinstance(n, _DEFS) and n.name.startswith("test") and n.name not in found:
                    if blind:
                        unsure.add(id(_last_def(entry, n.name)))
                    else:
                        found[n.name] = _last_def(entry, n.name)
        for fn in found.values():
            owners = out.setdefault(id(fn), [])
            if cls.name not in owners:
                owners.append(cls.name)
    return {k: v for k, v in out.items() if k not in unsure}


def _last_def(cls: ast.ClassDef, name: str) -> Def:
    return [n for n in cls.body if isinstance(n, _DEFS) and n.name == name][-1]


def _plain_base(text: str) -> bool:
    """A base read nowhere in the module that defines no test: a TestCase, object, ABC."""
    return text.split(".")[-1].endswith("TestCase") or text.split(".")[-1] in ("object", "ABC")


def _resolve(tree: ast.Module, cls: ast.ClassDef) -> list[ast.ClassDef | str]:
    """A class's bases: the top-level class a plain name binds where the class is defined, else its text."""
    out: list[ast.ClassDef | str] = []
    for base in cls.bases:
        found = [n for n in tree.body if isinstance(n, ast.ClassDef) and isinstance(base, ast.Name)
                 and n.name == base.id and n.lineno < cls.lineno]
        out.append(found[-1] if found else ast.unparse(base))
    return out


def _mro(tree: ast.Module, cls: ast.ClassDef, depth: int = 0,
         memo: dict[int, list[ast.ClassDef | str] | None] | None = None) -> list[ast.ClassDef | str] | None:
    """The class's method resolution order (C3) over the module's classes, a base read elsewhere standing for
    itself alone; None where Python would refuse the class (or the hierarchy is absurdly deep). Each class's
    order is computed once (`memo`): a chain of classes each inheriting the two before it stays linear."""
    memo = {} if memo is None else memo
    if id(cls) in memo:
        return memo[id(cls)]
    if depth > 50:
        return None
    bases = _resolve(tree, cls)
    seqs: list[list[ast.ClassDef | str]] = []
    for b in bases:
        sub = _mro(tree, b, depth + 1, memo) if isinstance(b, ast.ClassDef) else [b]
        if sub is None:
            memo[id(cls)] = None
            return None
        seqs.append(list(sub))
    seqs.append(list(bases))
    out: list[ast.ClassDef | str] = [cls]
    while any(seqs):
        seqs = [s for s in seqs if s]
        head = next((s[0] for s in seqs if not any(s[0] in t[1:] for t in seqs)), None)
        if head is None:
            memo[id(cls)] = None
            return None
        out.append(head)
        seqs = [s[1:] if s[0] == head else s for s in seqs]
    memo[id(cls)] = out
    return out


def _reachable(tree: ast.Module, graded: set[tuple[str | None, str]] | None) -> set[tuple[int, str]]:
    """(id() of a class of the module, test name) for every class in a graded class's MRO: a definition there of
    the graded test's name goes planted too, even where only ungraded classes collect it, or the graded class
    would run it under the real name once its own definition is renamed."""
    classes = {n.name: n for n in tree.body if isinstance(n, ast.ClassDef)}
    out: set[tuple[int, str]] = set()
    for cls, name in graded or set():
        if cls in classes:
            out |= {(id(c), name) for c in _mro(tree, classes[cls]) or [] if isinstance(c, ast.ClassDef)}
    return out


def _collected_classes(tree: ast.Module, runner: str) -> list[ast.ClassDef]:
    """The module's classes a runner collects: `Test*` (pytest) and TestCase subclasses, the last
    definition of a name (the module's binding)."""
    last = {n.name: n for n in tree.body if isinstance(n, ast.ClassDef)}
    out = []
    for node in last.values():
        mro = _mro(tree, node) or [node]
        if any(isinstance(c, ast.ClassDef) and _is_testcase(c) for c in mro) or (
                runner == "pytest" and node.name.startswith("Test")):
            out.append(node)
    return out


def unittest_style(tree: ast.Module, runner: str, cls: ast.ClassDef) -> bool:
    """Whether every collected class that inherits from `cls` (or `cls` itself) is a TestCase."""
    classes = [c for c in _collected_classes(tree, runner) if any(b is cls for b in _mro(tree, c) or [c])]
    return bool(classes) and all(any(isinstance(b, ast.ClassDef) and _is_testcase(b) for b in _mro(tree, c) or [c])
                                 for c in classes)


def _same_named(tree: ast.Module, cls: ast.ClassDef | None, fn: ast.stmt) -> list[ast.stmt]:
    """Every definition of fn's name in its scope (the earlier ones are shadowed: they go too)."""
    body = cls.body if cls is not None else tree.body
    return [n for n in body if isinstance(n, _DEFS) and n.name == getattr(fn, "name", None)]


def same_test(a: str, b: str) -> bool:
    """One test named from two rootdirs (`python/pkg/test/t.py::T::test_x`, `pkg/test/t.py::T::test_x`)."""
    file_a, _, rest_a = a.partition("::")
    file_b, _, rest_b = b.partition("::")
    return rest_a == rest_b and _same_path(file_a, file_b)


def _same_path(a: str, b: str) -> bool:
    """One file named from two rootdirs: equal, or one a whole-component suffix of the other."""
    return a == b or a.endswith("/" + b) or b.endswith("/" + a)


def base_id(test_id: str) -> str:
    """The id without its parameters (`name[1-a]` -> `name`): cut at the first `[` of an id ending in `]`, in
    one pass (a regex search for it was quadratic in the id, which the tests' process writes)."""
    at = test_id.find("[")
    return test_id[:at] if at >= 0 and test_id.endswith("]") else test_id


def _replace(line: str, node: ast.expr, text: str) -> str:
    raw = line.encode("utf-8")
    end = node.end_col_offset or node.col_offset
    return (raw[: node.col_offset] + text.encode("utf-8") + raw[end:]).decode("utf-8")


def _member_text(lines: list[str], fn: ast.FunctionDef | ast.AsyncFunctionDef, name: str,
                 replacements: list[tuple[ast.expr, str]]) -> str:
    """The test's own lines (decorators included) with its name and the literals at `replacements` replaced."""
    start, end = _start(fn), fn.end_lineno or fn.lineno
    chunk = lines[start:end]
    for node, literal in sorted(replacements, key=lambda r: (r[0].lineno, r[0].col_offset), reverse=True):
        i = node.lineno - 1 - start
        chunk[i] = _replace(chunk[i], node, literal)
    i = fn.lineno - 1 - start
    chunk[i] = rename_def(chunk[i], fn.name, name)[0]
    text = "".join(chunk)
    return text if text.endswith("\n") else text + "\n"


def _real_literal(node: ast.expr) -> str:
    number = _number(node)
    assert number is not None
    real = Decimal(repr(number)) if isinstance(number, float) else Decimal(number)
    return render(real, isinstance(number, float), _unit(number))


def _fresh_name(rng: random.Random, words: list[str], taken: set[str], checks: Sequence[str] = (),
                real: str | None = None) -> str:
    """`test_` + two or three words of the file's test names + four hex digits: one distribution for all, kept
    clear of the repository's own name-based selection (`checks`; `real`: the graded test a group member
    stands for, None for a canary): `sweserve_twins.draw_name`, which the exports' box draws with too."""
    return canaries.draw_name(rng, words, taken, checks, real)


def name_checks(task: Task, selectors: dict[str, str] | None, file: str,
                sources: dict[str, str] | None = None) -> list[str]:
    """What the repository's own name-based selection may read in the names of `file`'s tests: the selector
    files' texts (`grading_plan`'s `selectors`) and the task's PYTEST_ADDOPTS (`canaries.selector_checks`), and
    the literals of each hidden file (`sources`) whose own code reads a test's name (`canaries.own_checks`)."""
    found = set(canaries.selector_checks(selectors or {}, file, task.test.env.get("PYTEST_ADDOPTS", "")))
    for text in (sources or {}).values():
        found.update(canaries.own_checks(text))
    return sorted(found)


def name_words(tree: ast.Module, runner: str, checks: Sequence[str] = ()) -> list[str]:
    """The words a file's planted names are drawn from: the neutral words (`canaries.NEUTRAL_WORDS`: no selector
    word can occur in them, wherever the selector reads it from), less those the repository's name-based
    selection reads (`canaries.name_pool`). Before red team 8 they were the file's own test words, less what the
    followed readers read: a reader not followed (R7-4, R8-3) skipped a member drawn with its word."""
    return canaries.name_pool(list(canaries.NEUTRAL_WORDS), checks)


def _in_file(ids: Iterable[str], file: str) -> set[tuple[str | None, str]]:
    """(class, name) of each of `ids` (parameters cut) that names a test of `file`."""
    out = set()
    for test_id in ids:
        parts = base_id(test_id).split("::")
        if _same_path(parts[0], file) and len(parts) in (2, 3):
            out.add((parts[1] if len(parts) == 3 else None, parts[-1]))
    return out


def _pinned_by_task(task: Task, file: str) -> set[str]:
    """The names of `file`'s tests that validation pinned (`Task.pinned`: they pass with the oracle only under
    their own names), kept like those `pinned` reads."""
    return {name for _, name in _in_file(task.pinned, file)}


def _graded_names(task: Task, file: str) -> set[tuple[str | None, str]] | None:
    """(class, name) of the file's graded tests; None while nothing is graded yet (every test is)."""
    ids = task.FAIL_TO_PASS + task.PASS_TO_PASS
    return _in_file(ids, file) if ids else None


# a number as Python or a person writes it: digit groups (`13_107`, `13,107`), hex, octal and binary, a fraction
# and an exponent (red team 7, R7-10); `_DIGITS` also reads a run of digits whatever stands beside it (`13th`)
_TEXT_NUMBER = re.compile(r"(?<![\w.])-?(?:0[xX](?:_?[0-9a-fA-F])+|0[oO](?:_?[0-7])+|0[bB](?:_?[01])+|"
                          r"\d{1,3}(?:,\d{3})+(?![\d_])|\d(?:_?\d)*(?:\.\d(?:_?\d)*)?(?:[eE][-+]?\d+)?)(?![\w])")
_DIGITS = re.compile(r"(?<![\d.])\d+(?:\.\d+)?")


def text_numbers(text: str) -> frozenset[Decimal]:
    """Every number a text writes, in any spelling `_TEXT_NUMBER` and `_DIGITS` read or in words, as its value."""
    return frozenset(text_counts(text))


_ESCAPE = re.compile(r"\\u([0-9a-fA-F]{4})|\\U([0-9a-fA-F]{8})|\\x([0-9a-fA-F]{2})|\\([0-7]{1,3})")


def unescaped(text: str) -> str:
    """The text with its escapes decoded as JSON, Python, C or HTML read them (`\\u0036`, `\\x36`, `\\066`,
    `&#54;`)."""
    def char(match: re.Match[str]) -> str:
        hexadecimal, octal = match.group(1) or match.group(2) or match.group(3), match.group(4)
        code = int(hexadecimal, 16) if hexadecimal else int(octal, 8)
        return chr(code) if code < 0x110000 else match.group(0)

    return html.unescape(_ESCAPE.sub(char, text)) if "\\" in text or "&" in text else text


def text_counts(text: str) -> Counter[Decimal]:
    """`text_numbers`, with how many times the text writes each (every spelling read counts: in English words too,
    `spelled_counts`, as the instruction's are read: a doc or a docstring spelling "six hundred and thirteen
    pages" told a forger the real member, red team 23d, R23d-3). The text with its escapes decoded is read too, and
    each number counts as often as the more of the two readings writes it (`\\u0036\\u0031\\u0033` in a JSON or
    a notebook, which `json.loads` reads as 613: red team 23p, R23p-1)."""
    plain = unescaped(text)
    return _text_counts(text) | _text_counts(plain) if plain != text else _text_counts(text)


def _text_counts(text: str) -> Counter[Decimal]:
    out: Counter[Decimal] = spelled_counts(text)
    for token in _TEXT_NUMBER.findall(text) + _DIGITS.findall(text):
        plain = token.replace("_", "").replace(",", "")
        try:
            out[Decimal(int(plain, 0)) if plain.lstrip("-")[:2].lower() in ("0x", "0o", "0b") else Decimal(plain)] += 1
        except (ArithmeticError, ValueError):
            continue
    return out


_UNITS = {w: i for i, w in enumerate(
    "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen sixteen "
    "seventeen eighteen nineteen".split())}
_TENS = {w: 10 * i for i, w in enumerate("twenty thirty forty fifty sixty seventy eighty ninety".split(), start=2)}
_ORDINALS = {w: i for i, w in enumerate(
    "first second third fourth fifth sixth seventh eighth ninth tenth eleventh twelfth thirteenth fourteenth "
    "fifteenth sixteenth seventeenth eighteenth nineteenth twentieth".split(), start=1)}
_SCALES = {"hundred": 100, "thousand": 1000, "million": 10**6, "billion": 10**9}
_WORDS = {"dozen": Decimal(12), "twice": Decimal(2), "double": Decimal(2), "triple": Decimal(3),
          "half": Decimal("0.5"), "quarter": Decimal("0.25"), "hundredth": Decimal(100), "thousandth": Decimal(1000)}


_CAMEL = re.compile(r"([a-z])([A-Z])")
_MARKUP = re.compile(r"<[^<>\n]*>|[#*_~`]")  # a table's `|` still separates


def spelled_numbers(text: str) -> frozenset[Decimal]:
    """The numbers a text spells in English words: each word's own value (`thirteen`, `twelfth`, `dozen`,
    `half`) and each run's (`one hundred and four`, `twenty-one`, `a hundred`, `two thousand`): a forger reads
    them as it reads digits. Over-reading only narrows the values planted."""
    return frozenset(spelled_counts(text))


def spelled_counts(text: str) -> Counter[Decimal]:
    """`spelled_numbers`, with how many times the text spells each."""
    out: Counter[Decimal] = Counter()
    total = current = 0
    run = False
    # a mark ends a run; a hyphen does not, nor markup a reader does not see: a tag, emphasis, a comment or quote
    # mark opening a wrapped line (`# six hundred` / `# and thirteen`: red team 23p, R23p-3)
    text = _MARKUP.sub(" ", _CAMEL.sub(r"\1 \2", text).lower())  # `SixHundredThirteen` too (R23p-5)
    for word in re.findall(r"[a-z]+|[^a-z\s-]", text) + ["."]:
        value = _UNITS.get(word, _TENS.get(word, _ORDINALS.get(word)))
        if value is not None:
            current += value
            run = True
        elif word in _SCALES:
            current = (current or 1) * _SCALES[word]
            if _SCALES[word] > 100:
                total, current = total + current, 0
            run = True
        elif word in ("and", "a") and run:
            continue
        else:
            if run:
                out[Decimal(total + current)] += 1
            total = current = 0
            run = False
        if word in _WORDS:
            out[_WORDS[word]] += 1
        if value is not None or word in _SCALES:
            out[Decimal(value if value is not None else _SCALES[word])] += 1
    return out


def said(instruction: str) -> frozenset[Decimal]:
    """Every number the instruction writes, in digits (`13th`, `0xD`, `13_107` too) or in words: what the candidate
    reads beside every member; one step of arithmetic over them is read too (`_near`'s `beside`)."""
    return spelled_numbers(instruction) | text_numbers(instruction)


def visible(base_text: str | None, cls: str | None, name: str, instruction: str = "") -> frozenset[Decimal]:
    """Values a forger reads without solving the task, for one test: every number the base version of its
    file writes (the grade box's repository holds the base commit: a modified test's old value, a value the
    file wrote under another test's name, in a comment or a string) and every number the instruction writes,
    in digits or in words (`spelled_numbers`). `cls`, `name`: the test (the base file is read whole)."""
    out: set[Decimal] = set(said(instruction))
    if base_text:
        out |= file_numbers(base_text)
        try:
            tree = pyast.parse_module(base_text)
        except (SyntaxError, ValueError):
            tree = None
        for node in ast.walk(tree) if tree is not None else []:  # a negative literal is a number too
            value = _number(node) if isinstance(node, ast.expr) else None
            if value is not None:
                out.add(_decimal(value))
    return frozenset(out)


def is_test_file(path: str) -> bool:
    """A file of a repository's tests: `test_*.py`, `*_test.py`, a conftest, or any file (a test module, a data
    fixture) under a folder named `test` or `tests`."""
    folder, _, name = path.rpartition("/")
    return (name.endswith(".py") and (name.startswith("test_") or name.endswith("_test.py")
                                      or name == "conftest.py")) or any(p in ("test", "tests") for p in folder.split("/"))


def repository_priors(file: str, repository: Mapping[str, frozenset[Decimal]]) -> list[frozenset[Decimal]]:
    """The sets of values a forger may bet on from the repository's other files (`repository`: each -> the
    numbers it writes, `guard.repository_numbers`): those every file writes (a docstring's `pages(100) -> 13` in
    the package itself: red team 6, R6-3), those the test files write, and those the test files in `file`'s own
    folder and below write (a `data/cases.json` beside the test: red team 7, R7-9)."""
    folder = file.rpartition("/")[0]
    every: set[Decimal] = set()
    tests: set[Decimal] = set()
    near: set[Decimal] = set()
    for path, numbers in repository.items():
        every |= numbers
        if is_test_file(path):
            tests |= numbers
            if not folder or path.startswith(folder + "/"):
                near |= numbers
    return [frozenset(every), frozenset(tests), frozenset(near)]


class Crossing:
    """One step of arithmetic between a test's numbers and the numbers the repository's code writes (red team 8,
    R8-4: `capacity(13) == 78` with the package's `PAGE_SIZE = 6`; `pages(100) == 13` with its `PAGE_SIZE = 8`):
    a sum, a difference, a product, an exact quotient, or a quotient rounded down or up. The code's numbers are
    many (about a thousand in sglang-jax), so the set is never built whole: `near` gives the part of it a group
    around one value can reach, which is a prior like any other (`unbalanced`, `guard._set_odds`)."""

    def __init__(self, repository: Mapping[str, frozenset[Decimal]] | None,
                 numbers: frozenset[Decimal] = frozenset()) -> None:
        code: set[Decimal] = set(numbers)
        for path, written in (repository or {}).items():
            if path.endswith(".py") and not is_test_file(path):
                code |= written
        self.code = frozenset(n for n in code if n.is_finite() and abs(n.adjusted()) <= DERIVED_DIGITS)
        self.whole = sorted({int(n) for n in self.code if n > 0 and n == n.to_integral_value()})

    def _divides_to(self, a: int, x: int) -> bool:
        """Whether some whole positive c of the code gives a // c == x or ceil(a / c) == x (a, x > 0)."""
        lo = bisect.bisect_left(self.whole, a // (x + 1) + 1)  # a // c == x: a/(x+1) < c <= a/x
        if lo < len(self.whole) and self.whole[lo] <= a // x:
            return True
        lo = bisect.bisect_left(self.whole, -(-a // x))  # ceil(a / c) == x: a/x <= c < a/(x-1)
        return lo < len(self.whole) and (x == 1 or self.whole[lo] * (x - 1) < a)

    def reads(self, value: Decimal, operands: list[Decimal]) -> bool:
        """Whether one step of arithmetic between one of `operands` and a number of the code gives `value`."""
        for a in operands:
            if value - a in self.code or a - value in self.code or value + a in self.code:
                return True
            if not a:
                continue  # 0 * c, 0 / c: 0 itself, which the code's numbers hold or not
            if value * a in self.code or (value and a / value in self.code and (a / value) * value == a):
                return True  # value = c / a, value = a / c
            if value / a in self.code and (value / a) * a == value:  # value = a * c
                return True
            if (a > 0 and value > 0 and a == a.to_integral_value() and value == value.to_integral_value()
                    and self._divides_to(int(a), int(value))):
                return True
        return False

    def near(self, value: int | float, numbers: frozenset[Decimal], every: bool = False) -> frozenset[Decimal]:
        """The values around `value` (as far as `values` walks, as `unbalanced` looks) that one step of
        arithmetic between `numbers` (the MAX_DERIVED smallest; `every`: all of them) and the code's numbers
        gives."""
        if not self.code:
            return frozenset()
        operands = sorted(self.code & numbers) if every else _operands(numbers)
        return frozenset(v for v in _window(value) if self.reads(v, operands))

    def among(self, values: frozenset[Decimal], numbers: frozenset[Decimal]) -> frozenset[Decimal]:
        """The `values` that one step of arithmetic between `numbers` and the code's numbers gives."""
        operands = _operands(numbers)
        return frozenset(v for v in values if self.code and self.reads(v, operands))


class Written:
    """Which of the repository's files write each value (`repository`: each -> the numbers it writes,
    `guard.repository_numbers`), as a prior: a forger reads the whole tree, so every file is a set of values it
    may bet on, and so is every count of files. A value a test checks is often a constant the code writes in
    several places, while its neighbours sit in one table: betting on the member most files write, or on the
    one the module under test writes, won 1.0 against recorded odds of 0.25 where every member was among the
    repository's numbers (red team 11, R11-6). `same` is the prior that closes every such bet at once: the
    values written by exactly the files that write the real one (none, for a value no file writes)."""

    def __init__(self, repository: Mapping[str, frozenset[Decimal]] | None) -> None:
        files: dict[Decimal, list[int]] = {}
        for i, numbers in enumerate((repository or {}).values()):
            for n in numbers:
                files.setdefault(n, []).append(i)
        self._files = {n: frozenset(ix) for n, ix in files.items()}

    def same(self, value: int | float) -> frozenset[Decimal]:
        """The values around `value` (as far as `values` walks, as `unbalanced` looks) that exactly the files
        writing `value` write: every member must be one, else the site is weak."""
        none: frozenset[int] = frozenset()
        own = self._files.get(_decimal(value), none)
        return frozenset(v for v in _window(value) if self._files.get(v, none) == own)


def _window(value: int | float) -> list[Decimal]:
    """The values around `value`, itself included, as far as `values` walks (`_sides`: 10 * K + 10 steps of its
    unit on each side): what a prior near it must be read over."""
    real, unit = _decimal(value), _unit(value)
    return [real + k * unit for k in range(-10 * K - 10, 10 * K + 11)]


def unbalanced(value: int | float, priors: list[frozenset[Decimal]]) -> frozenset[Decimal]:
    """The values a twin of `value` may not take so that, in each of `priors`, every member of its group is
    inside where the real one is and outside where it is not (a set holding some members says nothing then:
    `guard._set_odds`): each prior the real value is outside of, and where it is inside, the values around it
    (as far as `values` walks) that are not."""
    real = _decimal(value)
    out: set[Decimal] = set()
    for prior in priors:
        if real not in prior:
            out |= prior
        else:
            out |= {v for v in _window(value) if v not in prior}
    return frozenset(out)


def grading_plan(task: Task, sources: dict[str, str], seed: int | None = None, candidates: bool = False,
                 base: dict[str, str] | None = None, instruction: str = "",
                 selectors: dict[str, str] | None = None,
                 repository: Mapping[str, frozenset[Decimal]] | None = None,
                 real_at: RealAt | None = None) -> GradingPlan:
    """The hidden test files as they go into the grade sandbox, and the map back, for one run.

    `sources`: each hidden test file (as `task.test.files` names it) -> its text after tests.patch.
    `seed`: the same seed gives the same plan (None: a fresh one from the system's randomness).
    `candidates`: validation's plan: every graded test (every collected test while the task has no
    FAIL_TO_PASS) gets K candidate twins and their `margins` at each of up to CANDIDATE_SITES sites instead
    of its recorded ones. `base` (each hidden file -> its text at base, where it existed) and `instruction`: what a
    forger reads beside the files; a candidate site or value equal to a number there is never used (`visible`).
    `selectors`: the texts of the repository's own conftest.py and pytest configuration files the run honours
    (base + tests.patch; path from the repository's root -> text, the paths `canaries.selector_paths` names):
    no planted name picks up or loses a word their name-based selection reads (`canaries.draw_name`).
    `repository` (validation's): the numbers the repository's other test files write (`guard.repository_numbers`);
    candidate values keep the real one's membership in them (`unbalanced`).
    `real_at` (validation's, `candidates` only): each graded test runs first ("first") or last ("last") of its
    group, every other member where the shuffle put it; the same seed draws the same plan but for that order.
    A grading plan never takes it: there the real member's rank in its group is uniform."""
    if real_at is not None and not candidates:
        raise ValueError("real_at orders validation's candidate plans only")
    # unseeded (grading): the OS's generator, whose draws no planted name can give away (a Mersenne Twister's
    # state can be read back from enough of its outputs; red team 11's lead)
    rng = random.Random(seed) if seed is not None else random.SystemRandom()
    plan = GradingPlan(candidates=candidates)
    crossing = Crossing(repository) if candidates and repository else None
    written = Written(repository) if candidates and repository else None
    recorded: dict[str, list[Twin]] = {}
    for twin in task.twins:
        recorded.setdefault(twin.test, []).append(twin)
    everywhere: set[str] = set()
    elsewhere_files: dict[str, frozenset[Decimal]] = {}  # per file, the numbers the other hidden files write
    trees: dict[str, ast.Module] = {}
    for file, text in sources.items():
        try:
            trees[file] = pyast.parse_module(text)
        except (SyntaxError, ValueError):
            continue  # it cannot run at all: its tests are collection errors, with or without a plan
        everywhere |= {n.name for n in ast.walk(trees[file]) if isinstance(n, _DEFS)}
    reordered = reorders([*sources.values(), *(selectors or {}).values()])
    for file in sorted(trees):
        text, tree = sources[file], trees[file]
        graded = _graded_names(task, file)
        owners = collectors(tree, task.test.runner)
        reach = _reachable(tree, graded)
        found = collected(tree, task.test.runner)
        kept_names = pinned(tree, {f.name for _, f in found}, reordered) | _pinned_by_task(task, file)
        # a class run by name with a pinned test is pinned whole: ranked names sort before every real one, so its
        # planted members would run before the pinned test they may need (red team 8, R8-9)
        by_name = {c.name for c, f in found if c is not None and f.name in kept_names
                   and unittest_style(tree, task.test.runner, c)}
        kept_names |= {f.name for c, f in found if any(x in by_name for x in owners[id(f)])}
        # every test of a class that runs a graded one is planted (ranked, only the graded ones read), as
        # validation's first look planted them: a class run by name then runs them in the order validation saw
        graded_classes = {x for x, _ in graded or set() if x is not None}
        tests = [(c, f) for c, f in found
                 if f.name not in kept_names and (graded is None or any((x, f.name) in graded for x in owners[id(f)])
                                                  or any(x in graded_classes for x in owners[id(f)])
                                                  or (c is not None and (id(c), f.name) in reach))]
        if not tests:
            continue
        lines = _lines(text)
        checks = name_checks(task, selectors, file, sources)
        words = name_words(tree, task.test.runner, checks)
        taken = set(everywhere)
        file_seen: dict[str, Counter[str]] = {}  # the file's statements and its base version's, read once
        pool_seen: set[str] | None = None  # the raises pool's classes read beside the file's groups, once
        removed: set[int] = set()
        slots: list[_Slot] = []  # one per graded test: its group, where the file had the test
        blocks: dict[str | None, list[str]] = {}  # each scope's canaries, at its end
        scopes: dict[str | None, ast.ClassDef | None] = {}
        spans: list[tuple[int, str | None, list[str | None], dict[str | None, str], set[str | None]]] = []
        for cls, fn in tests:
            key = cls.name if cls else None
            scopes[key] = cls
            test_id = "::".join([file, *([cls.name] if cls else []), fn.name])
            ids = {x: "::".join([file, *([x] if x else []), fn.name]) for x in owners[id(fn)]}  # the classes running it
            group, valid = _shared_group(recorded, test_id, ids, candidates)
            spans.append((len(plan.members), key, list(ids), ids, valid))
            defined = _same_named(tree, cls, fn)
            removed.update(*(range(_start(d), d.end_lineno or d.lineno) for d in defined))
            fn_sites = sites(fn)
            block: list[str] = []
            slots.append(_Slot(min(_start(d) for d in defined), key, len(plan.members), block))
            if candidates:  # every candidate site written by `render` in every member; one replaced per twin
                drafts = []
                outside = around(text, fn)
                hidden = elsewhere_files.setdefault(file, other_files(sources, file))
                avoid = visible((base or {}).get(file), key, fn.name, instruction) | outside | hidden
                # derived from too: "100 pages, 87 reserved"; a `PAGE_SIZE == 6` another hidden file checks (R9-5)
                beside = outside | said(instruction) | hidden
                nears = _near(fn_sites, avoid, fn, beside=beside)
                if repository and crossing is not None and written is not None:  # and what one step across
                    priors = repository_priors(file, repository)  # the test and the code gives, and who writes it
                    nears = [n if computed(_number(g[0])) else n | unbalanced(  # type: ignore[arg-type]
                        _number(g[0]), [*priors, crossing.near(  # type: ignore[arg-type]
                            _number(g[0]), _elsewhere(fn, g) | beside),  # type: ignore[arg-type]
                            written.same(_number(g[0]))])  # type: ignore[arg-type]
                        for n, g in zip(nears, fn_sites)]
                spares = _spares(fn_sites, avoid, fn, nears)
                for i in _candidate_sites(fn_sites, avoid, fn, near=nears, spares=spares):
                    nodes = fn_sites[i]
                    number: int | float = _number(nodes[0])  # type: ignore[assignment]
                    real, others = values(number, rng, K, spares[i])
                    drafts.append((nodes, real, [Twin(test=test_id, site=i, value=v) for v in others],
                                   [Twin(test=test_id, site=i, value=v) for v in margins(number, [real, *others])]))
                reals = [(node, real) for nodes, real, _, _ in drafts for node in nodes]
                name = _fresh_name(rng, words, taken, checks, fn.name)
                plan.members.append(Member(file, key, name, "test", fn.name))
                if not drafts:  # no numeric site: flips (weak twins), a grid where two can be tried
                    fn_flips = flips(fn)
                    tried = _flip_group(fn, rng, seen_statements((base or {}).get(file), tree, fn, file_seen))
                    if not tried:  # nor a flip: the class a raises check expects (weak twins too)
                        if pool_seen is None:
                            pool_seen = raises_seen(text, tree, tests, (base or {}).get(file), instruction)
                        index = _raises_try(fn, pool_seen, rng)
                        if index is not None:
                            _add_raises_members(plan, block, lines, fn, file, key, test_id, name, index, [],
                                                len(fn_sites) + len(fn_flips) + index, words, taken, rng, checks)
                            continue
                    _add_flip_members(plan, block, lines, fn, file, key, test_id, name, fn_flips, tried,
                                      _flip_draws(tried), len(fn_sites), words, taken, rng, checks)
                    continue
                block.append(_member_text(lines, fn, name, reals))
                for nodes, real, group, margin in drafts:
                    for twin, kind in [(t, "twin") for t in group] + [(t, "margin") for t in margin]:
                        name = _fresh_name(rng, words, taken, checks, fn.name)
                        plan.members.append(Member(file, key, name, kind, fn.name, twin, literal=twin.value,
                                                   real_literal=real))
                        block.append(_member_text(lines, fn, name, [r for r in reals if r[0] not in nodes]
                                                  + [(n, twin.value) for n in nodes]))
                continue
            raised = [raises_of(t.value) for t in group]
            if group and all(r is not None for r in raised):
                name = _fresh_name(rng, words, taken, checks, fn.name)
                plan.members.append(Member(file, key, name, "test", fn.name, literal=RAISES_REAL))
                _add_raises_members(plan, block, lines, fn, file, key, test_id, name, raised[0][0],  # type: ignore[index]
                                    group, group[0].site, words, taken, rng, checks)
                continue
            flipped = [flip_indices(t.value) for t in group]
            if group and all(f is not None for f in flipped):
                name = _fresh_name(rng, words, taken, checks, fn.name)
                plan.members.append(Member(file, key, name, "test", fn.name, literal=FLIP_REAL))
                tried = sorted({i for f in flipped for i in f or []})
                _add_flip_members(plan, block, lines, fn, file, key, test_id, name, flips(fn), tried,
                                  group, len(fn_sites), words, taken, rng, checks)
                continue
            site = fn_sites[group[0].site] if group and group[0].site < len(fn_sites) else []
            literal = _real_literal(site[0]) if site else ""
            name = _fresh_name(rng, words, taken, checks, fn.name)
            plan.members.append(Member(file, key, name, "test", fn.name, literal=literal))
            block.append(_member_text(lines, fn, name, [(n, literal) for n in site]))
            for twin in group if site else []:
                name = _fresh_name(rng, words, taken, checks, fn.name)
                plan.members.append(Member(file, key, name, "twin", fn.name, twin, literal=twin.value,
                                           real_literal=literal))
                block.append(_member_text(lines, fn, name, [(n, twin.value) for n in site]))
        _shuffle(plan, slots, rng, real_at)
        ranks = canaries.Ranks(sum(len(slot.members) for slot in slots))
        _rank(plan, slots, ranks, rng, words, taken, checks)
        for (start, key, classes, ids, valid), nxt in zip(spans, [s[0] for s in spans[1:]] + [len(plan.members)]):
            _aliases(plan, start, nxt, key, classes, ids, valid)
        start = len(plan.members)
        _add_canaries(plan, task, file, text, tree, lines, scopes, blocks, rng, words, taken, checks, ranks)
        for i in range(start, len(plan.members)):  # a canary in a mixin: read in each class that inherits it
            m, cls = plan.members[i], scopes[plan.members[i].cls]
            heirs = _heirs(tree, task.test.runner, cls) if cls is not None else []
            if cls is not None and cls.name not in heirs:
                plan.members[i] = replace(m, unread=True)
                plan.members += [replace(m, cls=x, alias=True) for x in heirs]
        plan.texts[file] = _assemble(lines, removed, slots, blocks, scopes, rng)
    return plan


@dataclass
class _Slot:
    """One graded test's group in its file: the line its test started on (`at`), its scope, and its members'
    texts (`block`, written in the order `plan.members[start:]` holds them, then shuffled with them)."""

    at: int
    key: str | None
    start: int
    block: list[str]
    members: list[int] = field(default_factory=list)


def _shuffle(plan: GradingPlan, slots: list[_Slot], rng: random.Random, real_at: RealAt | None = None) -> None:
    """Each slot's members (the members appended since its start, one text each) in a random order; with
    `real_at`, the slot's real member then moved to its start or end (the draws are the same either way)."""
    ends = [s.start for s in slots[1:]] + [len(plan.members)]
    for slot, end in zip(slots, ends):
        pairs = list(zip(range(slot.start, end), slot.block, strict=True))
        rng.shuffle(pairs)
        if real_at is not None and (real := next((p for p in pairs if plan.members[p[0]].kind == "test"), None)):
            rest = [p for p in pairs if p is not real]
            pairs = [real, *rest] if real_at == "first" else [*rest, real]
        slot.members, slot.block[:] = [i for i, _ in pairs], [t for _, t in pairs]


def rename_def(text: str, old: str, new: str) -> tuple[str, int]:
    """(`text` with the first `def old(` written `def new(`, how many were: 0 or 1): how a member's text takes
    its planted name (`_member_text`, `_rank`, the exporter's cut)."""
    return re.subn(rf"(\bdef\s+){re.escape(old)}(\s*\()", lambda m: m.group(1) + new + m.group(2), text, count=1)


def _rank(plan: GradingPlan, slots: list[_Slot], ranks: canaries.Ranks, rng: random.Random, words: list[str],
          taken: set[str], checks: Sequence[str]) -> None:
    """Each member of the file's `slots` (in the file's order, each slot shuffled) named anew with its rank token
    (`canaries.Ranks`, in `canaries.ranked` order), in the plan and in its text (which holds its name once, on
    its def line: `_member_text`): whatever runs the tests sorted by name runs them as the real names sort."""
    order = [(slot, j, i) for slot in slots for j, i in enumerate(slot.members)]
    for k in canaries.ranked([plan.members[i].real for _, _, i in order]):
        slot, j, i = order[k]
        old = plan.members[i].name
        plan.members[i] = replace(plan.members[i], name=ranks.draw(rng, words, taken, checks, plan.members[i].real))
        slot.block[j] = rename_def(slot.block[j], old, plan.members[i].name)[0]


FLIP_REAL = "flip"  # the real test's `Member.literal` in a flip group (no flip written the other way)


def _shared_group(recorded: dict[str, list[Twin]], test_id: str, ids: dict[str | None, str],
                  candidates: bool) -> tuple[list[Twin], set[str | None]]:
    """(the twins planted beside a test, as `test_id` (its scope's id) names them; the classes whose copy of
    the test records that very group). A test that several classes run (a mixin's, a base class's) is planted
    once, in its scope, so one group serves them all: the first class's that records one (the defining class
    first where it runs the test), read only in the classes that record the same sites and values. Validation
    (`candidates`) reads every class."""
    if candidates:
        return [], set(ids)
    group = next((recorded[i] for i in ids.values() if recorded.get(i)), [])  # None names a module-level test
    if not group:
        return [], set()
    mine = sorted((t.site, t.value) for t in group)
    valid = {x for x in ids if sorted((t.site, t.value) for t in recorded.get(ids[x], [])) == mine}
    return [t.model_copy(update={"test": test_id}) for t in group], valid


def _aliases(plan: GradingPlan, start: int, end: int, key: str | None, classes: list[str | None],
             ids: dict[str | None, str], valid: set[str | None]) -> None:
    """One test's members (`plan.members[start:end]`, planted in scope `key`) as each class that runs them
    reads them: a member per class under the same planted name, its twin naming that class's test. The scope's
    own are unread where no runner collects the scope (a mixin), and a twin is unread in a class that does not
    record its group (`_shared_group`): its outcome there was never checked to fail."""
    primaries = plan.members[start:end]
    for i in range(start, end):
        m = plan.members[i]
        if key not in classes or (m.twin is not None and key not in valid):
            plan.members[i] = replace(m, unread=True)
    for x in classes:
        if x != key:
            plan.members += [replace(m, cls=x, alias=True, unread=m.twin is not None and x not in valid,
                                     twin=m.twin.model_copy(update={"test": ids[x]}) if m.twin else None)
                             for m in primaries]


def _heirs(tree: ast.Module, runner: str, cls: ast.ClassDef) -> list[str]:
    """The collected classes of the module that inherit from `cls` (or are `cls`)."""
    return [c.name for c in _collected_classes(tree, runner) if any(b is cls for b in _mro(tree, c) or [c])]


def _flip_draws(tried: list[int]) -> list[list[int]]:
    """The flip twins of a group: each non-empty subset of the tried flips (one, or three for a grid)."""
    if len(tried) == 2:
        return [[tried[0]], [tried[1]], tried]
    return [tried] if tried else []


def _add_flip_members(plan: GradingPlan, block: list[str], lines: list[str], fn: ast.FunctionDef | ast.AsyncFunctionDef,
                      file: str, key: str | None, test_id: str, name: str, fn_flips: list[Flip], tried: list[int],
                      draws: list[list[int]] | list[Twin], n_sites: int, words: list[str], taken: set[str],
                      rng: random.Random, checks: Sequence[str] = ()) -> None:
    """The real test (already a member, named `name`) and its flip twins: every tried flip written by one
    function in each member, the real reading or the other. `draws`: validation's subsets of `tried`, or the
    recorded twins."""
    if any(i >= len(fn_flips) for i in tried):
        tried, draws = [], []  # the file changed since validation: no twins rather than wrong ones
    block.append(_member_text(lines, fn, name, [(fn_flips[i].node, fn_flips[i].readings[0]) for i in tried]))
    for draw in draws:
        twin = draw if isinstance(draw, Twin) else Twin(test=test_id, site=n_sites + min(tried), value=flip_value(draw))
        other = set(flip_indices(twin.value) or [])
        twin_name = _fresh_name(rng, words, taken, checks, fn.name)
        plan.members.append(Member(file, key, twin_name, "twin", fn.name, twin, literal=twin.value,
                                   real_literal=FLIP_REAL))
        block.append(_member_text(lines, fn, twin_name, [(fn_flips[i].node, fn_flips[i].readings[i in other])
                                                         for i in tried]))


def _add_canaries(plan: GradingPlan, task: Task, file: str, text: str, tree: ast.Module, lines: list[str],
                  scopes: dict[str | None, ast.ClassDef | None], blocks: dict[str | None, list[str]],
                  rng: random.Random, words: list[str], taken: set[str], checks: Sequence[str],
                  ranks: canaries.Ranks) -> None:
    """One or two must-pass canaries per file, and two must-fail ones where no graded test of it has twins: named
    with the file's last rank tokens (`canaries.Ranks`), so a runner that sorts by name runs them last too."""
    homes = [key for key, cls in scopes.items()
             if (cls is None and task.test.runner == "pytest" and not _parametrized(tree.body, text)
                 and not _reads_each_test([n for n in tree.body if isinstance(n, _DEFS) and _is_fixture(n)]))
             or (cls is not None and all(map(canaries.keeps_methods, cls.decorator_list))
                 and not _parametrized(cls.body, text)
                 and not _reads_each_test([n for n in cls.body if isinstance(n, _DEFS)
                                           and (not n.name.startswith("test") or _is_fixture(n))]))]
    if not homes:
        return
    twinned = any(m.kind == "twin" and m.file == file for m in plan.members)
    kinds = [True] * rng.randint(1, 2) + ([] if twinned else [False] * 2)
    shadowed = canaries.module_bindings(tree)  # canaries run in the module's namespace: its names, not builtins
    for must_pass in kinds:
        key = rng.choice(homes)
        cls = scopes[key]
        indent = ""
        if cls is not None:
            first = next(n for n in cls.body if isinstance(n, _DEFS) and n.name.startswith("test"))
            indent = lines[first.lineno - 1][: first.col_offset]
        inner = indent + ("\t" if "\t" in indent else "    ")
        body = canaries.body(rng, must_pass, words, cls is not None and unittest_style(tree, task.test.runner, cls),
                             shadowed)
        name = ranks.draw(rng, words, taken, checks)
        code = f"{indent}def {name}({'self' if cls is not None else ''}):\n" + "".join(f"{inner}{ln}\n" for ln in body)
        plan.members.append(Member(file, key, name, "canary", must_pass=must_pass))
        blocks.setdefault(key, []).append(code)


# what per-test set-up code reads of the test it sets up beyond its name (which `own_checks` reads): the method
# itself (`getattr(self, self._testMethodName).tokens`, `request.function`), its marks or its parameters
_EACH_TEST = frozenset({"function", "callspec", "get_closest_marker", "iter_markers", "keywords", "own_markers"})


def _is_fixture(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    return any("fixture" in ast.unparse(d) for d in fn.decorator_list)


def _reads_each_test(setups: list[ast.FunctionDef | ast.AsyncFunctionDef]) -> bool:
    """Whether set-up code of a scope (a class's non-test methods, `setUp`; a file's fixtures) reads what each
    test carries beyond its name: a canary there, which carries nothing (no attribute, no mark, no parameter),
    may error while its neighbours pass, an honest run read `tampered`. Such a scope holds no canary; the draw
    of homes is per run, so validation's one draw cannot vouch for it."""
    return any(isinstance(n, ast.Attribute) and (
        n.attr == "_testMethodName"
        or n.attr in _EACH_TEST and any(isinstance(b, ast.Name) and b.id in ("request", "node", "item")
                                        for b in ast.walk(n.value)))
        for fn in setups for n in ast.walk(fn))


def _assemble(lines: list[str], removed: set[int], slots: list[_Slot], blocks: dict[str | None, list[str]],
              scopes: dict[str | None, ast.ClassDef | None], rng: random.Random) -> str:
    """The file without its graded tests' lines: each graded test's group (its slot, shuffled) where the test
    was, so the tests keep the order the file gave them (a test may rely on the state its predecessor left);
    each scope's canaries, shuffled, at the scope's end (a class's before the module's where both end the file)."""
    at: dict[int, list[str]] = {}
    for slot in slots:
        sep = "\n" if scopes.get(slot.key) is not None else "\n\n"
        at.setdefault(slot.at, []).append(sep.join(slot.block))
    for key, block in sorted(blocks.items(), key=lambda kv: kv[0] is None):
        rng.shuffle(block)
        cls = scopes.get(key)
        where = (cls.end_lineno or cls.lineno) if cls is not None else len(lines)
        sep = "\n" if cls is not None else "\n\n"
        at.setdefault(where, []).append("".join(sep + b for b in block) + ("\n" if cls is None else ""))
    out = []
    for i in range(len(lines) + 1):
        out += at.get(i, [])
        if i < len(lines) and i not in removed:
            out.append(lines[i])
    return "".join(out)


# --- reading outcomes -------------------------------------------------------------------------------------------

def _worst(mapping: dict[str, Outcome], key: str, outcome: Outcome) -> None:
    if key not in mapping or SEVERITY[outcome] > SEVERITY[mapping[key]]:
        mapping[key] = outcome


_NUMBER = re.compile(r"(?<![\w.])-?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?(?![\w.])")


def shape(message: str, name: str) -> str:
    """A failure message with what differs between any two tests masked: the test's own name, line numbers,
    objects' addresses (`<Req object at 0x7f3a...>`, new in every run), diff marker lines, spacing."""
    text = message.replace(name, "<name>")
    text = re.sub(r":\d+(:|\b)", r":N\1", text)
    text = re.sub(r"\b0x[0-9a-fA-F]+\b", "0x?", text)
    text = "\n".join(ln for ln in text.split("\n") if not ln.lstrip().startswith("?"))
    return re.sub(r"\s+", " ", text).strip()


def _forms(literal: str) -> set[str]:
    forms = {literal}
    try:
        forms.add(repr(ast.literal_eval(literal)))
    except (ValueError, SyntaxError):
        pass
    return forms


def same_failure(a: str, literal_a: str, b: str, literal_b: str) -> bool:
    """Whether two shaped failure messages could be each other's with the values swapped: the same text once
    numbers and pytest's abbreviations (`(2, ..., 6)`, whose cut moves with the values' lengths) are masked,
    and each member's own value shown as often. The real value shown once more (the unsolved code computing
    it, an input equal to it) tells the real test from its twins."""
    def skeleton(text: str) -> str:
        return _NUMBER.sub("N", re.sub(r"\S*\.\.\.\S*", "~", text))

    if literal_a in RAISES_POOL and literal_b in RAISES_POOL:  # a raises group: each member's class masked,
        (a, shown_a), (b, shown_b) = (re.subn(rf"\b{lit}\b", "<class>", text)  # shown as often
                                      for text, lit in ((a, literal_a), (b, literal_b)))
        return skeleton(a) == skeleton(b) and shown_a == shown_b

    def count(text: str, literal: str) -> int:
        forms = _forms(literal)
        return sum(token in forms for token in _NUMBER.findall(re.sub(r"\.\.\.", " ", text)))
    return skeleton(a) == skeleton(b) and count(a, literal_a) == count(b, literal_b)


def _read(plan: GradingPlan, outcomes: dict[str, Outcome], skips: dict[str, str], messages: dict[str, str],
          exit_status: int | None) -> Reading:
    by_file: dict[str, dict[tuple[str | None, str], Member]] = {}
    by_name: dict[str, dict[str, Member]] = {}  # a planted name is unique in its file (a subclass inherits it)
    for m in plan.members:
        by_file.setdefault(m.file, {})[(m.cls, m.name)] = m
        if not m.alias:
            by_name.setdefault(m.file, {})[m.name] = m
    planted_reals = {(m.file, m.cls, m.real) for m in plan.members if m.kind == "test"}
    reading = Reading({}, {}, {}, {}, {}, [])
    seen: dict[Member, Outcome] = {}
    ids_of: dict[Member, set[str]] = {}  # a planted test -> the real ids its outcomes were read as
    files_ran: set[str] = set()
    forged_names = False
    passed: set[Member] = set()  # must-fail members with a passing report
    for test_id, outcome in outcomes.items():
        parts = base_id(test_id).split("::")  # a parameter may hold '::' (an IPv6 '::1'): split without it
        params = test_id[len(base_id(test_id)):]
        name = parts[-1]
        cls = parts[1] if len(parts) == 3 else None
        file = _file_of(parts[0], by_file) if len(parts) > 1 else None
        member = by_file[file].get((cls, name)) if file else None
        if member is None and file:  # a planted member a subclass inherits
            member = by_name[file].get(name)
        if file:
            files_ran.add(file)
        if member is not None and member.unread:
            continue  # a mixin's copy (no runner collects it) or a twin its class never checked: nothing
        if member is None and (file, cls, name) in planted_reals:
            # the real name of a test planted under another: no planted file defines it, so code in the run
            # reported it (dropping the planted group and adding the name the forger read): never a pass
            forged_names = True
            continue
        if member is None:
            real_id = test_id
        elif member.kind == "test":
            real_id = "::".join([parts[0], *parts[1:-1], member.real]) + params
            ids_of.setdefault(member, set()).add(real_id)
        else:
            _worst(seen, member, outcome)  # type: ignore[arg-type]
            if outcome == "passed" and _must_fail(member):
                passed.add(member)
            if member.kind == "margin":
                _worst(reading.margins, member.twin.model_dump_json(), outcome)  # type: ignore[union-attr]
            elif member.kind == "twin":
                key = member.twin.model_dump_json()  # type: ignore[union-attr]
                _worst(reading.twins, key, outcome)
                if test_id in messages and key not in reading.shapes:
                    reading.shapes[key] = (shape(messages[test_id], member.name), member.real_literal, member.literal)
            continue
        _worst(reading.outcomes, real_id, outcome)
        if member is not None:
            _worst(seen, member, outcome)  # type: ignore[arg-type]
            if test_id in messages and base_id(real_id) not in reading.shapes:
                reading.shapes[base_id(real_id)] = (shape(messages[test_id], member.name),)
        if test_id in skips:
            reading.skips[real_id] = skips[test_id]
        if test_id in messages:
            reading.messages[real_id] = messages[test_id]
    # A must-fail member passed under any id is passed, whatever else was reported under its name: a failure
    # reported beside it (under a parameter id no test has, or a class that does not run it) would otherwise
    # stand for it, while its test's own failure went to an id nobody grades.
    for member in passed:
        seen[member] = "passed"
        if member.twin is not None:
            (reading.margins if member.kind == "margin" else reading.twins)[member.twin.model_dump_json()] = "passed"
    reading.problems = _problems(plan, seen, ids_of, files_ran, reading, exit_status)
    if forged_names:
        reading.problems = sorted({*reading.problems, "an outcome names a hidden test planted under another name"})
    return reading


def _must_fail(member: Member) -> bool:
    return member.kind in ("twin", "margin") or (member.kind == "canary" and not member.must_pass)


def _file_of(path: str, files) -> str | None:
    """The planted file a runner's path names: the same path, else the longest one it is a whole-component
    suffix of, or that is one of it (two hidden files, one path a suffix of the other, are read apart)."""
    if path in files:
        return path
    return max((f for f in files if _same_path(path, f)), key=len, default=None)


def _problems(plan: GradingPlan, seen: dict[Member, Outcome], ids_of: dict[Member, set[str]], files_ran: set[str],
              reading: Reading, exit_status: int | None) -> list[str]:
    problems = []
    tests = {(m.file, m.cls, m.real): m for m in plan.members if m.kind == "test"}
    failed_must_fail = inconclusive = False
    for m in plan.members:
        outcome = seen.get(m, "missing")
        if m.unread:
            continue
        if m.kind == "canary":
            if outcome == "missing" and m.file in files_ran:
                problems.append("a canary test is missing from the outcomes")
            elif m.must_pass and outcome == "failed":
                problems.append("a must-pass canary test failed")
            elif not m.must_pass and outcome == "passed":
                problems.append("a must-fail canary test passed")
            elif outcome in ("skipped", "error") and any(
                    o == "passed" and x.file == m.file and x.cls == m.cls
                    for x, o in seen.items() if x.kind != "canary"):
                # it never reached its check (a set-up that flaked, a skip): no evidence of forging, but a forger
                # erroring what it cannot read must not pass either (red team 11, R11-5): no test passes
                inconclusive = True
            failed_must_fail |= not m.must_pass and outcome == "failed"
        elif m.kind == "twin" and not plan.candidates:
            test = tests[(m.file, m.cls, m.real)]
            real = seen.get(test, "missing")
            # the test's own outcomes: read from its planted name, in its class or a subclass that inherits it,
            # for any parameters (never a same-named test of another class)
            mine = sorted(ids_of.get(test, set()))
            if outcome == "passed" and any(reading.outcomes[t] == "passed" for t in mine):
                problems.append("a twin of a hidden test passed beside its test")
                for test_id in mine:
                    reading.outcomes[test_id] = "failed"  # a pass beside a passing twin is no pass
            elif outcome == "passed":
                pass  # a wrong value equal to a twin's (or a forger's wrong guess): its test failed, no more
            elif outcome in ("skipped", "error") and real == "passed":
                for test_id in mine:  # it never reached its check: no evidence of forging, and no pass beside it
                    reading.outcomes[test_id] = "failed"
            elif outcome != "failed" and real == "passed":
                problems.append("a twin of a hidden test was missing while its test passed")
            failed_must_fail |= outcome == "failed"
    if inconclusive:
        for test_id in {t for ids in ids_of.values() for t in ids}:
            reading.outcomes[test_id] = "failed"
    if exit_status == 0 and failed_must_fail:
        problems.append("the test runner exited 0 although a twin or must-fail canary failed")
    return sorted(set(problems))


# --- validation's choice ----------------------------------------------------------------------------------------

def _same_as_test(test_shape: str, twin_shape: tuple[str, ...]) -> bool:
    shaped, real_literal, literal = twin_shape
    return same_failure(test_shape, real_literal, shaped, literal)


def _sign_safe(value: int | float) -> bool:
    """Whether every progression holding the value keeps its sign: no twin value can be ruled out as a
    negative (or zero) where the real one is positive."""
    return abs(Decimal(repr(value)) if isinstance(value, float) else Decimal(value)) > CANDIDATES * _unit(value)


def _elsewhere(fn: ast.FunctionDef | ast.AsyncFunctionDef, nodes: list[ast.expr]) -> frozenset[Decimal]:
    """The numbers the test writes outside one site: an input (`Pool(size=48)`), another check of the same
    value. A real value that shows there is read off the twins' common text; a twin value that does is not
    the real one's shape either."""
    mine = {id(n) for node in nodes for n in ast.walk(node)}
    return frozenset(_decimal(v) for n in ast.walk(fn) if isinstance(n, ast.expr) and id(n) not in mine
                     for v in [_number(n)] if v is not None)


MAX_DERIVED = 40  # numbers of one test combined pairwise (`derived`); a test writing more combines its first ones
MAX_DERIVED_3 = 12  # numbers of one test summed three at a time, with either sign
DERIVED_DIGITS = 18  # a number of more digits (or a smaller fraction) takes no part: `6e854218` in an instruction (a
# commit hash read as a number) made `int()` of an 854,219-digit integer, and validation hung on a real task;
# `1e999999` made `%` raise


def _operands(numbers: frozenset[Decimal]) -> list[Decimal]:
    """The numbers arithmetic over a test's numbers combines (`derived`, `scaled`): the MAX_DERIVED smallest of at
    most DERIVED_DIGITS digits either side of the point."""
    return sorted(n for n in numbers if n.is_finite() and abs(n.adjusted()) <= DERIVED_DIGITS)[:MAX_DERIVED]


def derived(numbers: frozenset[Decimal]) -> frozenset[Decimal]:
    """What two of a test's numbers (or one taken twice) give by one step of arithmetic: their sum, difference,
    product and, for whole numbers, quotient rounded down and up; and what three give by adding or taking away
    (`Pool(pages=100)`, `free() == 87`: `used == 13` is 100 - 87; 100 tokens in pages of 8: 13; 100 - 80 - 7).
    A forger computes them from the text every member shares, so a value among them is read off it as a value
    written there is (red team 5, R10; red team 6, R6-2)."""
    values = _operands(numbers)
    out: set[Decimal] = set()
    for i, a in enumerate(values):
        for b in values[i:]:
            out |= {a + b, b - a, a - b, a * b}
            if a == a.to_integral_value() and b == b.to_integral_value():
                for x, y in ((int(a), int(b)), (int(b), int(a))):
                    if y:
                        out |= {Decimal(x // y), Decimal(-(-x // y))}
    few = values[:MAX_DERIVED_3]  # two steps of adding or taking away (100 - 80 - 7 = 13: red team 6, R6-2)
    for i, a in enumerate(few):
        for j, b in enumerate(few[i:], i):
            for c in few[j:]:
                out |= {sa * a + sb * b + sc * c for sa in (1, -1) for sb in (1, -1) for sc in (1, -1)}
    return frozenset(out)


def around(text: str, fn: ast.FunctionDef | ast.AsyncFunctionDef) -> frozenset[Decimal]:
    """The numbers a file writes outside one test (fixtures, helpers, constants, other tests, comments) and in
    the test's own comments and strings (a docstring, an assert's message): every member of its group shows
    them alike, so a member whose value is one of them is read off the file (`Queue(capacity=37)` in a
    fixture, `assert q.capacity() == 37` in the test)."""
    start, end = _start(fn) + 1, fn.end_lineno or fn.lineno
    return _numbers(text, lambda tok: tok.type != tokenize.NUMBER or not start <= tok.start[0] <= end)


def _numbers(text: str, keep) -> frozenset[Decimal]:
    """The numbers a file writes in its comments, strings, number tokens and names, of the tokens `keep` takes."""
    return frozenset(_counts(text, keep))


def _counts(text: str, keep) -> Counter[Decimal]:
    """`_numbers`, with how many tokens write each (a token counts once per number it writes). A text `tokenize`
    gives up on (an unterminated string, a bracket open at its end, a bad dedent: a Python 2 script, a template)
    is read whole as plain text (`text_counts`), `keep` aside: a forger greps it all the same, and reading it as
    writing nothing recorded a group at 1/4 whose real value such a file wrote (red team 22d, R22d-1)."""
    out: Counter[Decimal] = Counter()
    try:
        tokens = list(tokenize.generate_tokens(iter(_lines(text)).__next__))
    except (tokenize.TokenError, SyntaxError):
        return text_counts(text)
    # a comment wrapped over lines reads as one text (`# six hundred` / `# and thirteen`: red team 23p, R23p-3)
    block: list[str] = []
    wrapped: Counter[Decimal] = Counter()
    for tok in [*tokens, None]:
        if tok is not None and tok.type in (tokenize.NL, tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT):
            continue
        if tok is not None and tok.type == tokenize.COMMENT and keep(tok):
            block.append(tok.string)
            continue
        if len(block) > 1:
            wrapped |= spelled_counts("\n".join(block))
        block = []
    names: list[str] = []
    for tok in tokens:
        if (tok.type in (tokenize.COMMENT, tokenize.STRING, tokenize.NUMBER)
                or tokenize.tok_name.get(tok.type) == "FSTRING_MIDDLE") and keep(tok):
            out.update(text_numbers(tok.string))
        elif tok.type == tokenize.NAME and keep(tok):
            # digits in a name (`test_100_tokens_take_13_pages`, a skipped test beside that keeps its name: red
            # team 8, R8-6)
            out.update(_name_digits(tok.string))
            names.append(tok.string)
    # the words a name spells (`SIX_HUNDRED_THIRTEEN`, `SixHundredThirteenPages`: red team 23p, R23p-5), read at once
    return out + spelled_counts(" . ".join(names)) | wrapped


def name_numbers(name: str) -> frozenset[Decimal]:
    """The runs of digits in an identifier or a path (`test_100_tokens_take_13_pages`, `golden/pages_100_13.txt`),
    whatever stands beside them, and the numbers its words spell (`six_hundred_thirteen_pages.txt`: R23p-5)."""
    return _name_digits(name) | spelled_numbers(name)


def _name_digits(name: str) -> frozenset[Decimal]:
    return frozenset(Decimal(d) for d in _DIGITS.findall(name)) if any(c.isdigit() for c in name) else frozenset()


def file_numbers(text: str) -> frozenset[Decimal]:
    """Every number a file writes: in its code, comments and strings."""
    return _numbers(text, lambda tok: True)


def file_counts(text: str) -> Counter[Decimal]:
    """`file_numbers`, with how many tokens write each."""
    return _counts(text, lambda tok: True)


def repeated(counts: Counter[Decimal]) -> dict[int, frozenset[Decimal]]:
    """Per count k of 2 or more that some number reaches, the numbers `counts` holds at least k times: with the
    file's own set, how often it writes each, exactly (`Written`: a member written as often as the real one). Bands
    of counts past 8 left a value written 10 times beside neighbours written 9 times in one set, and a bet on the
    member a file writes most often read it (red team 22h, R22h-1)."""
    return {k: frozenset(n for n, c in counts.items() if c >= k) for k in sorted(set(counts.values())) if k >= 2}


def other_files(sources: dict[str, str], file: str) -> frozenset[Decimal]:
    """The numbers every other hidden file writes (`file_numbers`): they are in the box beside the test's group
    (a test skipped without an accelerator, a check of the same value in a second file), so a member whose value
    one of them writes is read off them, as `around` reads the test's own file. And the digits of every hidden
    file's path, `file`'s own too (`name_numbers`: `test/test_pool_613.py`, a folder `pages613/`): the forger finds
    its tests there, as `guard.repository_numbers` reads every other file's path (red team 22d, R22d-2)."""
    out: frozenset[Decimal] = frozenset()
    for other, text in sources.items():
        out |= name_numbers(other)
        if other != file:
            out |= file_numbers(text)
    return out


def site_value(nodes: list[ast.expr]) -> Decimal | None:
    """A numeric site's real value, as the group's members are compared (None for a site that is not one)."""
    number = _number(nodes[0]) if nodes else None
    return None if number is None else _decimal(number)


# what a forger multiplies or divides a test's numbers by though no file writes them: seconds in a minute, an hour
# and a day, hours in a day, days in a week, decimal and binary thousands, a percent (`parse_duration("3m") == 180`:
# red team 8, R8-4)
UNITS = frozenset(Decimal(u) for u in (60, 3600, 86400, 24, 7, 1000, 1024, 100))


def scaled(numbers: frozenset[Decimal]) -> frozenset[Decimal]:
    """The numbers times and divided by (exactly) each unit constant (`UNITS`): `"3m"` is 180 seconds."""
    out: set[Decimal] = set()
    for a in _operands(numbers):
        for u in UNITS:
            out.add(a * u)
            if a % u == 0:
                out.add(a / u)
    return frozenset(out)


def _near(fn_sites: list[list[ast.expr]], avoid: frozenset[Decimal],
          fn: ast.FunctionDef | ast.AsyncFunctionDef | None, derive: bool = True,
          beside: frozenset[Decimal] = frozenset()) -> list[frozenset[Decimal]]:
    """Per site, the values no member may take: `avoid`, what the test writes outside the site, and (`derive`)
    what one step of arithmetic gives from those and from what the file writes outside the test (`beside`,
    `around`: a fixture's `Pool(pages=100)` and `reserve(87)` give 13: red team 7, R7-8) (`derived`), and the
    values that would differ from the real one in which of the test's numbers they divide or are divided by
    (`related`). With `derive`, where betting on the member nearest a number the forger reads wins more than
    1/(K+1) (`_within_reach`), the real value is in its set: a fall-back site (red team 9, R9-6: 77 beside a
    derived 78, a fence-post fix; the member nearest it won 0.625 against recorded odds of 0.25), and so is a
    decimal value (`computed`)."""
    out = []
    for g in fn_sites:
        written = _elsewhere(fn, g) if fn is not None else frozenset()
        value: int | float = _number(g[0])  # type: ignore[assignment]
        if not derive or computed(value):  # a decimal is weak whatever else is read: the real value is all it takes
            out.append(avoid | written | ({_decimal(value)} if derive else frozenset()))
            continue
        read = avoid | written | derived(written | beside) | scaled(written | beside)
        if len(written | beside) > MAX_DERIVED:  # the pairs `derived` leaves out past its cap (red team 9, R9-1:
            # 17 rates beside `capacity(13, page=6) == 78`), by membership, around this value
            read |= Crossing(None, written | beside).near(value, written | beside, every=True)
        near = read | unbalanced(value, related(value, written))
        out.append(near | {_decimal(value)} if _within_reach(value, read, near) else near)
    return out


def computed(value: int | float) -> bool:
    """Whether a site's value is not written as a whole number (`0.7071`, `2.0`, `1e-3`): such a site is weak.
    A decimal a test checks is almost always something computed: a closed form (1/sqrt 2, tanh of the test's
    own 0.3), a softmax, a cosine similarity, an entropy, an attention scale, a rounding of one. A forger's table
    of such values holds the real member and none of its twins (red team 9, R9-2: 1.0 against recorded odds of
    0.25 on 21 of 21 closed forms). Tables of closed forms built by rule did not bound that (red team 10: values
    one unit off a table value, past a cap on the test's numbers, scaled out of the tables' range, and 35 to 41
    of 76 common two-step quantities each won 1.0), because any finite table leaves a forger's larger one
    ahead. So no decimal site is strong, whatever its precision. This is measured on real tests by
    `benchmarks/site_rules.py`."""
    return isinstance(value, float)


def _within_reach(value: int | float, read: frozenset[Decimal], near: frozenset[Decimal]) -> bool:
    """Whether a forger betting on the member nearest some number of `read` (ties split) wins more than 1/(K+1)
    over the K+1 ranks `values` draws the real value at uniformly (the K admissible values on each side, `near`
    avoided): a fence-post fix moves the value a little, so the member next to a number the forger reads is
    the real one (red team 9, R9-6). Only numbers between MARGIN steps below the lowest value a group can take
    and MARGIN steps above the highest are tried. This depends on the site alone, never on a drawn group."""
    real, unit = _decimal(value), _unit(value)
    groups = _ranked(value, near)
    low = min(groups[-1]) - MARGIN * unit
    high = max(groups[0]) + MARGIN * unit
    for r in read:
        if not (r.is_finite() and low <= r <= high and r != real):
            continue
        won = 0.0
        for group in groups:
            distance = [abs(v - r) for v in group]
            best = [v for v, d in zip(group, distance) if d == min(distance)]
            won += 1 / len(best) if real in best else 0.0
        if won / len(groups) > 1 / (K + 1) + 1e-9:
            return True
    return False


def _ranked(value: int | float, avoid: frozenset[Decimal]) -> list[list[Decimal]]:
    """Every group `values` may draw at the site, one per rank of the real value (0..K), `avoid` kept off: the
    real value and its admissible neighbours as `values` walks them."""
    real = _decimal(value)
    below, above = _sides(value, K, avoid, keep_sign=False, shaped=_room(value, K, avoid))
    return [below[:rank][::-1] + [real] + above[:K - rank] for rank in range(K + 1)]


def _sign_edge(value: int | float, avoid: frozenset[Decimal]) -> bool:
    """Whether betting on the member of the real value's sign nearest zero wins more than 1/(K+1) over the K+1
    ranks `values` draws: a walk that crosses zero because the values between the real one and zero are
    avoided (`scale([10, 20, 30], 2) == [20, 40, 60]`: 30, 20 and 10 are read, so 40's twins below are -10,
    -20, -30) leaves the real value the smallest positive member at every rank; a forger who knows the value
    is a count wins 1.0 there. Such a site is tried last."""
    real = _decimal(value)
    won = 0
    for group in _ranked(value, avoid):
        mine = [v for v in group if (v > 0) == (real > 0)]
        won += min(mine, key=abs) == real
    return won / (K + 1) > 1 / (K + 1) + 1e-9


def _spares(fn_sites: list[list[ast.expr]], avoid: frozenset[Decimal], fn: ast.FunctionDef | ast.AsyncFunctionDef
            | None, near: list[frozenset[Decimal]]) -> list[frozenset[Decimal]]:
    """Per site, the values its twins are kept off (`values`' `avoid`): `near`, or at a fall-back site (the real
    value in `near`, a derived one) what the forger reads outright alone: twins kept off the derived values
    (round ones) would leave the real one the roundest, or the one derived member."""
    plains: list[frozenset[Decimal]] | None = None
    out = []
    for i, g in enumerate(fn_sites):
        if _decimal(_number(g[0])) in near[i]:  # type: ignore[arg-type]
            plains = plains or _near(fn_sites, avoid, fn, derive=False)
            out.append(plains[i])
        else:
            out.append(near[i])
    return out


def related(value: int | float, numbers: frozenset[Decimal]) -> list[frozenset[Decimal]]:
    """Per whole number a (|a| >= 2) of `numbers` (what the test writes outside the site), the values around a
    whole `value` (as far as `values` walks) that a divides or that divide a. A forger betting on the member the
    test's input divides, or that divides it, needs no factor (`convert(13) == 52`, `convert(1001) == 77`: red
    team 9, R9-9, 1.0 on 9 of 9 against recorded odds of 0.25): each is a prior every member must share with the
    real one (`unbalanced`), as they share its powers of 2, 5 and 3 (`value_shape`)."""
    if isinstance(value, float) or not value:
        return []
    window = [int(v) for v in _window(value) if v]
    factors = {abs(int(n)) for n in numbers if n.is_finite() and abs(n.adjusted()) <= DERIVED_DIGITS
               and n == n.to_integral_value() and abs(n) >= 2}
    return [frozenset(Decimal(v) for v in window if v % a == 0 or a % v == 0) for a in sorted(factors)]


def _candidate_sites(fn_sites: list[list[ast.expr]], avoid: frozenset[Decimal] = frozenset(),
                     fn: ast.FunctionDef | ast.AsyncFunctionDef | None = None, fall_back: bool = True,
                     near: list[frozenset[Decimal]] | None = None,
                     spares: list[frozenset[Decimal]] | None = None) -> list[int]:
    """The sites validation tries: those whose values keep their sign first, spread over the test's checks.
    A site whose real value a prior singles out (`_marked`) or that the forger can read elsewhere (`avoid`:
    the literals of the base version of the same test, numbers of the instruction) is never tried: its
    twins would be told apart by that alone."""
    near = near if near is not None else _near(fn_sites, avoid, fn)  # computed once by `grading_plan`
    usable = strong_sites(fn_sites, near)
    safe = [i for i in usable if _sign_safe(_number(fn_sites[i][0]))]  # type: ignore[arg-type]
    other = [i for i in usable if i not in safe]
    picked = [safe[j] for j in _spread(len(safe), CANDIDATE_SITES)]
    picked += [other[j] for j in _spread(len(other), CANDIDATE_SITES - len(picked))]
    if picked or not fall_back:
        return picked
    # No site a prior cannot read: a twin a prior can single out still costs a forger a guess per test (0.76-0.92
    # measured, against 1.0 for a test with no twin beside it), so such a test gets one, and is counted as weak.
    # Last, a small value (0, 1, 2, 3: most real checks) whose progression must cross zero: the forger's prior
    # over signs (a count is never negative) reads such a group, but every graded test the forger fails must be
    # guessed right, so weak groups still multiply its odds down over a task's tests.
    leaky = [i for i, g in enumerate(fn_sites) if _room(_number(g[0]), K, shaped=False)]  # type: ignore[arg-type]
    leaky = leaky or [i for i, g in enumerate(fn_sites) if not _marked(_number(g[0]))]  # type: ignore[arg-type]
    # a site whose real value sits at its sign's edge at every rank last (`spares`: computed once by `grading_plan`)
    spares = spares if spares is not None else _spares(fn_sites, avoid, fn, near)
    leaky = [i for i in leaky if not _sign_edge(_number(fn_sites[i][0]), spares[i])] or leaky  # type: ignore[arg-type]
    # a value read near the site (`_within_reach`, a derived one) costs the forger a guess still; one it reads
    # outright (the file writes it elsewhere) does not: those sites last
    unread = [i for i in leaky if _decimal(_number(fn_sites[i][0])) not in  # type: ignore[arg-type]
              avoid | (_elsewhere(fn, fn_sites[i]) if fn is not None else frozenset())]
    leaky = unread or leaky
    return [leaky[j] for j in _spread(len(leaky), CANDIDATE_SITES)]


def strong_site(fn: ast.FunctionDef | ast.AsyncFunctionDef, site: int, avoid: frozenset[Decimal],
                beside: frozenset[Decimal] = frozenset()) -> bool:
    """Whether the test's numeric site is one no prior reads (`strong_sites`), `avoid` being what the forger
    reads beside the test (`visible` and `around`, as `grading_plan` computes them), `beside` what the file
    writes outside it (`around`: derived from too)."""
    fn_sites = sites(fn)
    return site < len(fn_sites) and site in strong_sites(fn_sites, _near(fn_sites, avoid, fn, beside=beside))


def strong_sites(fn_sites: list[list[ast.expr]], near: list[frozenset[Decimal]]) -> list[int]:
    """The sites no prior reads: a value not singled out (`_marked`), not one the forger reads elsewhere (`near`,
    per site), with room for K values of its shape on each side. Validation tries these first; its fall-back
    sites are weak twins (`evaluation/guard.py` counts them as no guard)."""
    return [i for i, g in enumerate(fn_sites)
            if not _marked(_number(g[0])) and _decimal(_number(g[0])) not in near[i]  # type: ignore[arg-type]
            and _room(_number(g[0]), K, near[i])]  # type: ignore[arg-type]


def _spread(n: int, k: int) -> list[int]:
    """k indices spread over range(n), first and last included."""
    if n <= k:
        return list(range(n))
    if k <= 1:
        return [n - 1] if k == 1 else []
    return sorted({round(i * (n - 1) / (k - 1)) for i in range(k)})


def _same_sign(group: list[Twin]) -> bool:
    try:
        signs = {(ast.literal_eval(t.value) > 0) - (ast.literal_eval(t.value) < 0) for t in group}
    except (ValueError, SyntaxError, TypeError):
        return False
    return len(signs) == 1 and 0 not in signs


_ERROR_LINES = re.compile(r"(?:^|\s)E\s")  # where pytest's error lines start in a shaped message


def _shown_near(test_id: str, group: list[Twin], keys: list[str], before: list) -> bool:
    """Whether a number that every member's failure at base shows (the value the unsolved code computes, as
    pytest and unittest print it), other than the members' own values, lies within SHOWN_MARGIN steps of the
    group: the forger reads it off the failures alike, and the member nearest it would be the real one where
    the fix moves the value a little. Only where each member's failure is at the site (it shows the member's
    own value): an earlier check's failure shows nothing about the site's. No run, no planted copy: the margins (`margins`) find such a value by
    running it where the message does not show it, within fewer steps."""
    for run in before:
        shaped = run.shapes.get(test_id)
        twin_shapes = [run.shapes.get(k) for k in keys]
        if not shaped or not all(twin_shapes) or len(twin_shapes[0]) < 3:
            continue
        try:
            values = [Decimal(twin_shapes[0][1]), *(Decimal(t.value) for t in group)]
            unit = _unit(ast.literal_eval(twin_shapes[0][1]))
        except (ArithmeticError, ValueError, SyntaxError, TypeError):
            return False  # not a numeric group (a flip)
        low, high = min(values) - SHOWN_MARGIN * unit, max(values) + SHOWN_MARGIN * unit

        def shown(text: str) -> set[Decimal]:  # pytest's first error line (`E   assert 86 == 87`): not the
            out = set()  # source, nor the `+ where 8 = cfg.size` lines that show inputs the file writes
            text = (_ERROR_LINES.split(text, maxsplit=1) + [text])[1]
            text = _ERROR_LINES.split(text, maxsplit=1)[0]
            for token in _NUMBER.findall(re.sub(r"\.\.\.", " ", text)):
                try:
                    out.add(Decimal(token))
                except ArithmeticError:
                    continue
            return out
        seen = [shown(shaped[0]), *(shown(t[0]) for t in twin_shapes if t)]
        if not all(v in numbers for v, numbers in zip(values, seen)):
            continue  # the failure is at an earlier check (`OTHER: 3 != CONTINUE: 1`), not at the site
        common = seen[0].intersection(*seen[1:]) - set(values)
        if any(low <= v <= high for v in common):
            return True
    return False


def _failed_at_base(run, test_id: str, outcome: Outcome) -> bool:
    """Whether a twin did not pass at base: it failed, or it errored or never ran where its test did not pass
    either (the module cannot be imported before the fix: every member of the file is a collection error
    alike, and the forger's own code decides what the unsolved names do)."""
    if outcome == "failed":
        return True
    outcomes = getattr(run, "outcomes", {})
    mine = [o for t, o in outcomes.items() if base_id(t) == test_id]
    return outcome in ("error", "missing") and "passed" not in mine \
        and bool(mine or outcomes.get(test_id.split("::")[0]) == "error")  # ran, or its module did not import


def select(graded: list[str], before: list, after: list,
           rng: random.Random | None = None) -> tuple[list[Twin], list[str]]:
    """The twins to record from validation's candidate runs (`TestRun`s or `Reading`s: `twins`, `shapes`),
    and the graded tests none could be kept for.

    Where a graded test did not pass beside the candidates with the oracle, no group is kept (`broken`).
    Per graded test, the first site (sign-keeping ones first) whose K planted twins failed in every run before
    and after the oracle, each failing at base the way the test itself does (`same_failure`: a value the
    unsolved code happens to compute shows in the message), and none of whose `margins` passed in any run.
    A site where some value passes is dropped: one-sided (a bound, a tolerance: which values fail would say on
    which side the real one lies), or a value the unsolved code computes near the group (which the forger
    reads off every member's failure alike: the member nearest it would be the real one where the fix moves
    the value a little). Whether a site is dropped depends on the group's values and the computed ones, never
    on which member is real, and the group held the real value at a uniform rank: each member of a kept group
    is as likely to be the real one as any other, but for the forger's prior over how far the fix moved the
    value (see the README)."""
    rng = rng or random.SystemRandom()
    kept, twinless = [], []
    runs = list(before) + list(after)
    # each run's planted candidates by (test, site), parsed once: runs hold every candidate of every test
    planted: list[dict[tuple[str, int], list[Twin]]] = []
    passed_beside: set[tuple[str, int]] = set()  # (test, site) where a margin passed in some run
    for run in runs:
        by_site: dict[tuple[str, int], list[Twin]] = {}
        for key in run.twins:
            twin = Twin.model_validate_json(key)
            by_site.setdefault((twin.test, twin.site), []).append(twin)
        planted.append(by_site)
        for key, outcome in getattr(run, "margins", {}).items():
            if outcome == "passed":
                twin = Twin.model_validate_json(key)
                passed_beside.add((twin.test, twin.site))
    named = {test for by_site in planted for test, _ in by_site}  # as the plan names them: task.test.files' paths
    # a graded test (it passed with the oracle under a planted name, no group beside it) that did not pass beside
    # the candidates: a group broke it. A test that is not idempotent (red team 8, R8-8: a call counter only the
    # first member to run reads as 1; a cleanup after the check that a failing twin skips, leaking state into the
    # next test) fails an honest solution on most grading draws. Which group broke it cannot be told (state
    # leaks across files of one process: red team 9, R9-4), and each draw runs the members in another order: no
    # group is kept at all.
    # A graded test with no outcome at all broke too: a group that stops the session (a leaked switch that makes
    # the next file's code interrupt the process) leaves the tests after it unreported, never failed.
    broken = any(outcomes.get(t) != "passed" for run in after if (outcomes := getattr(run, "outcomes", None))
                 is not None for t in graded)
    for test_id in sorted({base_id(t) for t in graded}):  # as the runner names them: from its rootdir
        if broken:
            twinless.append(test_id)
            continue
        mine = next((n for n in sorted(named) if same_test(n, test_id)), test_id)
        # the first run that reached the test's module (before the fix it may not import: no member ran)
        first = next((by_site for by_site in planted if any(test == mine for test, _ in by_site)), {})
        groups = {site: group for (test, site), group in first.items() if test == mine}
        chosen = None
        for site in sorted(groups, key=lambda i: (not _same_sign(groups[i]), i)):
            group = groups[site]
            keys = [t.model_dump_json() for t in group]
            # every run must have planted the same candidates
            every = {t.model_dump_json() for by_site in planted for t in by_site.get((mine, site), [])}
            # a flip group (one flip, or a grid of two) or a raises group is kept whole or not at all: a grid
            # missing a corner points at the real one (the corner next to both others)
            need = len(group) if all(flip_indices(t.value) is not None or raises_of(t.value) is not None
                                     for t in group) else K
            if len(group) < need or every != set(keys) or (mine, site) in passed_beside \
                    or any(run.twins.get(k) != "failed" for run in after for k in keys) \
                    or not all(_failed_at_base(run, test_id, run.twins.get(k, "missing")) for run in before
                               for k in keys):
                continue
            if _shown_near(test_id, group, keys, before):
                continue
            alike = [t for t, k in zip(group, keys)
                     if all(test_id not in run.shapes or (k in run.shapes and _same_as_test(run.shapes[test_id][0],
                                                                                             run.shapes[k]))
                            for run in before)]
            if len(alike) >= need:
                chosen = rng.sample(alike, need)
                break
        if chosen:
            kept += sorted(chosen, key=lambda t: t.value)
        else:
            twinless.append(test_id)
    return kept, twinless


# what the guard reads of one site, by the same rules the plan uses
number = _number
written_outside = _elsewhere
