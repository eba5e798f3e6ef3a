"""The stdlib-only part of twin grading, one implementation for the host (`sweserve run`: evaluation/twins.py)
and the exports' in-box root verifier (sweserve_verify.py, through sweserve_canaries.py): standard library
only, since the box imports this file as it is.

Plain canary tests: bodies of small, self-contained tests that must pass (or must fail) whatever the code
under test does.

The grading plan (evaluation/twins.py) plants a few of them among the hidden tests, named from the same distribution
as every graded test and twin and shuffled in with them: a must-pass canary that fails, or a must-fail one
that passes, means something in the test process forged outcomes. Their bodies come from several
generators of plain assertions over small literals and builtins (lists, strings, dicts, arithmetic, loops;
`assert x == y`, `assert y == x`, `self.assertEqual`), with varied variable names: no text is common to every
canary. Unlike twins they can be told from the file's own tests by their bodies, so they only catch blanket
forgery (every outcome flipped); twins are what catch targeted forgery.
"""

from __future__ import annotations

import ast
import random
import threading
import unittest

# CPython 3.11.7's parser fails when two threads parse at once, and the host draws bodies from trial threads
# (sweserve/pyast.py does the same for the host's own parses; this module may import nothing of sweserve).
_ONE_PARSE_AT_A_TIME = threading.Lock()


def _parse_expression(source: str) -> ast.Expression:
    with _ONE_PARSE_AT_A_TIME:
        return ast.parse(source, mode="eval")


_VARS = ["value", "result", "got", "out", "items", "data", "parts", "total", "seq", "pairs", "text", "counts",
         "entry", "record", "size", "chunk", "batch", "shape", "tokens", "rows", "left", "right", "first", "acc"]
FALLBACK_WORDS = ["basic", "values", "input", "result", "case", "default", "order", "length"]


def _small(rng: random.Random, lo: int = 0, hi: int = 60) -> int:
    return rng.randint(lo, hi)


def _ints(rng: random.Random, n: int | None = None) -> list[int]:
    return [_small(rng) for _ in range(n or rng.randint(2, 5))]


def _gen_list(rng: random.Random, var: str, words: list[str]) -> tuple[list[str], str]:
    xs = _ints(rng)
    k = rng.randint(2, 4)
    lhs = rng.choice([f"sum({var})", f"max({var})", f"min({var})", f"len({var})", f"sorted({var})",
                       f"{var}[::-1]", f"[x * {k} for x in {var}]", f"{var}[-1] - {var}[0]",
                       f"list(reversed({var}))", f"{var}.count({xs[0]})"])
    return [f"{var} = {xs!r}"], lhs


def _gen_text(rng: random.Random, var: str, words: list[str]) -> tuple[list[str], str]:
    picked = [rng.choice(words) for _ in range(rng.randint(2, 3))]
    sep = rng.choice(["-", "_", " ", "/", ":"])
    lhs = rng.choice([f"{var}.split({sep!r})", f"{var}.upper()", f"len({var})", f"{var}.count({sep!r})",
                       f"{var}.replace({sep!r}, '')", f"{var}[:{rng.randint(1, 4)}]", f"{var}.title()",
                       f"''.join(reversed({var}))", f"{var}.startswith({picked[0][:2]!r})"])
    return [f"{var} = {sep.join(picked)!r}"], lhs


def _gen_dict(rng: random.Random, var: str, words: list[str]) -> tuple[list[str], str]:
    keys = list(dict.fromkeys(rng.choice(words) for _ in range(rng.randint(2, 4))))
    d = {k: _small(rng) for k in keys}
    lhs = rng.choice([f"sorted({var})", f"sum({var}.values())", f"len({var})", f"{var}[{keys[0]!r}]",
                       f"max({var}.values())", f"{keys[-1]!r} in {var}", f"sorted({var}.items())"])
    return [f"{var} = {d!r}"], lhs


def _gen_arith(rng: random.Random, var: str, words: list[str]) -> tuple[list[str], str]:
    a, b = _small(rng, 1, 200), _small(rng, 1, 12)
    lhs = rng.choice([f"divmod({a}, {b})", f"{a} // {b}", f"{a} % {b}", f"pow({b}, 2)", f"abs({b} - {a})",
                       f"{a} * {b} - {b}", f"max({a}, {b}) - min({a}, {b})", f"({a} + {b}) * 2"])
    return ([f"{var} = {lhs}"], var) if rng.random() < 0.5 else ([], lhs)


def _gen_loop(rng: random.Random, var: str, words: list[str]) -> tuple[list[str], str]:
    n, k = _small(rng, 2, 9), _small(rng, 1, 5)
    item = rng.choice(["i", "n", "step", "j", "idx"])
    op = rng.choice(["+=", "-=", "+= 1 +"])
    return [f"{var} = {_small(rng)}", f"for {item} in range({n}):", f"    {var} {op} {item} * {k}"], var


def _gen_pairs(rng: random.Random, var: str, words: list[str]) -> tuple[list[str], str]:
    pairs = [(_small(rng), _small(rng)) for _ in range(rng.randint(2, 4))]
    lhs = rng.choice([f"[a + b for a, b in {var}]", f"dict({var})", f"max({var})", f"sorted({var})",
                       f"[b for _, b in {var}]", f"list(zip(*{var}))", f"len(set({var}))"])
    return [f"{var} = {pairs!r}"], lhs


def _gen_sets(rng: random.Random, var: str, words: list[str]) -> tuple[list[str], str]:
    a, b = _ints(rng, 4), _ints(rng, 4)
    lhs = rng.choice([f"sorted(set({a!r}) & set({b!r}))", f"sorted(set({a!r}) | set({b!r}))",
                       f"len(set({a!r}) - set({b!r}))", f"sorted(set({a!r}))"])
    return ([f"{var} = {lhs}"], var) if rng.random() < 0.5 else ([], lhs)


_GENERATORS = [_gen_list, _gen_text, _gen_dict, _gen_arith, _gen_loop, _gen_pairs, _gen_sets]


def _other(rng: random.Random, value):
    """A value of the same kind as `value` that is not equal to it."""
    if isinstance(value, bool):
        return not value
    if isinstance(value, int):
        return value + rng.choice([-3, -2, -1, 1, 2, 3])
    if isinstance(value, str):
        return value + rng.choice(["s", "x", "-", "0"]) if value and rng.random() < 0.5 else value[1:] + "e"
    if isinstance(value, tuple):
        return value + (_small(rng),)
    if isinstance(value, list):
        return value[:-1] if len(value) > 1 and rng.random() < 0.5 else value + [_small(rng)]
    if isinstance(value, dict):
        return {**value, "extra": _small(rng)}
    return None


def body(rng: random.Random, must_pass: bool, words: list[str], unittest_style: bool) -> list[str]:
    """Statement lines (unindented, nested lines with 4 spaces) that pass (or fail) with an AssertionError."""
    while True:
        var = rng.choice(_VARS)
        setup, lhs = rng.choice(_GENERATORS)(rng, var, words)
        space: dict = {"__builtins__": __builtins__}
        try:
            exec("\n".join(setup) + f"\n__value = {lhs}\n", space)  # noqa: S102 - our own literals
        except Exception:  # noqa: BLE001 - a generator's rare bad draw: draw again
            continue
        value = space["__value"]
        expected = value if must_pass else _other(rng, value)
        if expected is None or (expected == value) is not must_pass:
            continue
        if unittest_style and rng.random() < 0.6:
            check = f"self.assertEqual({lhs}, {expected!r})"
        else:
            if isinstance(_parse_expression(lhs).body, (ast.Compare, ast.BinOp, ast.BoolOp, ast.UnaryOp)):
                lhs = f"({lhs})"
            check = rng.choice([f"assert {lhs} == {expected!r}", f"assert {expected!r} == {lhs}"])
        if _behaves(setup + [check], must_pass):
            return setup + [check]


def _behaves(body: list[str], must_pass: bool) -> bool:
    """Whether the body, run as a method here, passes (or fails with an AssertionError) as planned."""
    space: dict = {"__builtins__": __builtins__}
    exec("def planted(self):\n" + "".join(f"    {ln}\n" for ln in body), space)  # noqa: S102 - our own code
    try:
        space["planted"](unittest.TestCase())
    except AssertionError:
        return not must_pass
    except Exception:  # noqa: BLE001 - neither: draw again
        return False
    return must_pass




def vocabulary(names: list[str]) -> list[str]:
    """The words of a file's test names (`test_even_split` gives `even`, `split`), in first-seen order."""
    words = [w for n in names for w in n.lower().split("_")[1:] if w.isidentifier() and w != "test"]
    return list(dict.fromkeys(words)) or list(FALLBACK_WORDS)
