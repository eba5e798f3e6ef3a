"""Closed forms: the decimal values a forger can compute without solving anything.

A test that checks `round(activation(0.3), 4) == 0.2913` or `cos_sim(a, b) == 0.7071` checks a value some
library function gives at a simple argument (tanh 0.3, cos 45 degrees). A forger tabulates such values and bets
on the one member of a group the table holds (red team 9, R9-2: 1.0 on 21 of 21 such values, and on each of
seven functions of the test's own input, against recorded odds of 0.25). `twins._rounded_fraction` knew thirds,
sixths, sevenths, ninths and eight constants; this module is the table itself, built by one rule rather than
listed: a fixed set of unary functions applied to a fixed set of arguments, and to the numbers the test writes.

Two tables (`tables`): one that needs nothing of the test, one of the functions of the test's own numbers. A
real value that rounds a closed form of either makes its site a weak one (`twins._near`). Drawing its twins
among other closed forms instead would not do: a forger with a narrower table (the common functions of 1..12
alone) would still hold only the real member. The twins of any other value keep off both tables (each is a
prior: `twins.unbalanced`, `guard._set_odds`). The price is coverage at low precision: with three decimals
almost every value in (0, 1) rounds some closed form (`benchmarks/closed_forms_coverage.py`).

Only values written with a fractional unit are read (`unit < 1`): whole numbers are the arithmetic of
`twins.derived`, `twins.scaled` and `twins.related`.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Callable, Iterable
from decimal import Decimal
from fractions import Fraction
from functools import lru_cache

LOW, HIGH = 1e-6, 1e6  # a closed form outside these magnitudes is not tabulated


def _sigmoid(x: float) -> float:
    return 1 / (1 + math.exp(-x))


def _gelu(x: float) -> float:
    return 0.5 * x * (1 + math.erf(x / math.sqrt(2)))


def _gelu_tanh(x: float) -> float:
    return 0.5 * x * (1 + math.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x ** 3)))


# the functions a numeric or ML test applies: elementary ones and the activations of an inference engine (`COMMON`),
# then rarer ones (`MORE`)
COMMON: tuple[Callable[[float], float], ...] = (
    lambda x: x, lambda x: 1 / x, lambda x: x * x, math.sqrt, lambda x: 1 / math.sqrt(x), math.exp,
    lambda x: math.exp(-x), math.log, math.log2, math.log10, math.sin, math.cos, math.tan, math.tanh, _sigmoid,
    math.erf, lambda x: math.log1p(math.exp(x)), _gelu, _gelu_tanh, lambda x: x * _sigmoid(x))
MORE: tuple[Callable[[float], float], ...] = (
    math.cbrt, lambda x: x ** 3, math.sinh, math.cosh, math.atan, math.asin, math.acos, math.erfc, math.gamma,
    math.lgamma, lambda x: x * math.pi, lambda x: x / math.pi, lambda x: math.pi / x, lambda x: x * math.e,
    lambda x: x / math.e, math.degrees, math.radians, lambda x: math.exp(-x * x / 2) / math.sqrt(2 * math.pi))

CONSTANTS = (math.pi, math.e, (1 + math.sqrt(5)) / 2, 0.5772156649015329, 0.915965594177219, math.tau,
             math.sqrt(2 * math.pi), 9.80665)  # pi, e, phi, Euler's and Catalan's constants, 2 pi, sqrt 2 pi, g
SMALL = tuple(float(n) for n in range(1, 13))
POWERS = tuple(float(2 ** n) for n in range(4, 13))  # sizes an inference engine's tests use: head dims, hidden sizes
SIMPLE = tuple(sorted({float(Fraction(p, q)) for q in range(2, 13) for p in range(1, 2 * q)}))  # twelfths and less
ANGLES = tuple(k * math.pi / 12 for k in range(1, 24))  # multiples of 15 degrees, in radians
MAX_NUMBERS = 40  # the test's own numbers a function is applied to (the smallest, as `twins._operands` takes)


def _apply(functions: Iterable[Callable[[float], float]], arguments: Iterable[float]) -> set[float]:
    out: set[float] = set()
    for x in {a for b in arguments for a in (b, -b)}:  # sigmoid(-1), gelu(-0.5): either sign of an argument
        for f in functions:
            try:
                y = abs(f(x))
            except (ValueError, OverflowError, ZeroDivisionError):
                continue
            if isinstance(y, float) and math.isfinite(y) and LOW <= y <= HIGH:
                out.add(y)
    return out


@lru_cache(maxsize=1)
def table() -> tuple[float, ...]:
    """The closed forms that need nothing of the test, sorted: named constants and fractions with no terminating
    decimal (1/3, 5/12), with their halves, doubles and complements to 1 (phi / 2 is cos 36 degrees); every
    function (`COMMON`, `MORE`) of 1..12, powers of two from 16 to 4096 (1 / sqrt 128, an attention scale),
    fractions of twelfths and less, the constants and multiples of 15 degrees."""
    named = {abs(c) for c in CONSTANTS} | set(SIMPLE) | _apply(COMMON[:3], CONSTANTS)
    named |= {y for x in named for y in (x / 2, 2 * x, abs(1 - x))}
    return tuple(sorted(named | _apply(COMMON + MORE, SMALL + POWERS + SIMPLE + CONSTANTS + ANGLES)))


@lru_cache(maxsize=1024)
def _of(kept: tuple[float, ...]) -> tuple[float, ...]:
    return tuple(sorted(_apply(COMMON + MORE, kept)))


def tables(numbers: frozenset[Decimal]) -> list[tuple[float, ...]]:
    """The tables, sorted: `table`, and every function (`COMMON`, `MORE`) of the MAX_NUMBERS smallest nonzero
    numbers the test writes (tanh 0.3 for `activation(0.3)`), as `twins._operands` keeps them."""
    kept = sorted({abs(float(n)) for n in numbers if n.is_finite() and n and abs(n.adjusted()) <= 18})
    return [table(), _of(tuple(kept[:MAX_NUMBERS]))]


def _hit(values: tuple[float, ...], x: float, half: float) -> bool:
    """Whether some value of the sorted `values` lies within `half` of x."""
    i = bisect.bisect_left(values, x - half)
    return i < len(values) and values[i] < x + half


def priors(window: list[Decimal], unit: Decimal, numbers: frozenset[Decimal]) -> list[frozenset[Decimal]]:
    """Per table (`tables`), the values of `window` (one progression of `unit`) that round a closed form at that
    unit: within half a unit of it, by magnitude. None for a whole unit."""
    if unit >= 1 or not window:
        return []
    half = float(unit) / 2
    return [frozenset(v for v in window if _hit(t, abs(float(v)), half)) for t in tables(numbers)]


def closed(value: Decimal, unit: Decimal, numbers: frozenset[Decimal] = frozenset()) -> bool:
    """Whether a value written at `unit` rounds a closed form of any table: then its site is a weak one
    (`twins._near`), whatever its neighbours are."""
    return any(value in p for p in priors([value], unit, numbers))
