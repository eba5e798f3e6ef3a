"""What a rule that makes numeric sites weak costs in strong sites, in one run.

Over a corpus of real test files (numpy's own tests by default, installed with the project), every numeric site
of every test is classified as `grading_plan` would at validation, without a repository: strong (`strong_sites`)
or not, once with the rule off and once with it on. Rules:
- `decimal`: every decimal site is weak (`twins.computed`; off: `computed` answering False, a decimal site judged
  like a whole one);
- `threes`: a member shares the real value's power of 3 (`twins.SHAPE_PRIMES`; off: the powers of 2 and 5 only),
  so a site whose value has too few such neighbours has no room.
Printed: sites, the sites the rule is about, and strong sites (all, and those) before and after.

    python benchmarks/site_rules.py                           # numpy's tests, the decimal rule
    python benchmarks/site_rules.py --rule threes /path/to/tests
"""
from __future__ import annotations

import argparse
import ast
import sys
import time
from pathlib import Path
from unittest import mock

from sweserve.evaluation import twins


def _files(root: Path | None) -> list[Path]:
    if root is None:
        import numpy  # a dependency of the project's test extras

        root = Path(numpy.__file__).parent
    return sorted(p for p in root.rglob("test_*.py") if "tests" in p.parts or "test" in p.parts)


ABOUT = {"decimal": lambda number: isinstance(number, float),  # the sites each rule is about
         "threes": lambda number: isinstance(number, int) and number != 0 and number % 3 == 0}


def _count(files: list[Path], about) -> dict[str, int]:
    out = {"tests": 0, "sites": 0, "about": 0, "strong": 0, "strong about": 0}
    for path in files:
        text = path.read_text(encoding="utf-8", errors="replace")
        try:
            tree = ast.parse(text)
        except (SyntaxError, ValueError):
            continue
        for node in ast.walk(tree):
            if not isinstance(node, twins._DEFS) or not node.name.startswith("test"):
                continue
            fn_sites = twins.sites(node)
            if not fn_sites:
                continue
            out["tests"] += 1
            beside = twins.around(text, node)
            strong = set(twins.strong_sites(fn_sites, twins._near(fn_sites, beside, node, beside=beside)))
            for i, g in enumerate(fn_sites):
                concerned = about(twins._number(g[0]))
                out["sites"] += 1
                out["about"] += concerned
                out["strong"] += i in strong
                out["strong about"] += concerned and i in strong
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("root", nargs="?", type=Path, help="a folder of test files (default: numpy's tests)")
    parser.add_argument("--limit", type=int, default=0, help="read only the first N files (0: all)")
    parser.add_argument("--rule", choices=sorted(ABOUT), default="decimal", help="the rule to measure")
    args = parser.parse_args()
    files = _files(args.root)[: args.limit or None]
    if not files:
        print(f"no test files under {args.root}", file=sys.stderr)
        return 2
    start = time.perf_counter()
    off = (mock.patch.object(twins, "computed", lambda value: False) if args.rule == "decimal"
           else mock.patch.object(twins, "SHAPE_PRIMES", (2, 5)))
    with off:
        before = _count(files, ABOUT[args.rule])
    middle = time.perf_counter()
    after = _count(files, ABOUT[args.rule])
    end = time.perf_counter()
    print(f"{len(files)} files, {after['tests']} tests with numeric sites, {after['sites']} sites, "
          f"{after['about']} that the rule {args.rule!r} is about")
    for key in ("strong", "strong about"):
        b, a = before[key], after[key]
        print(f"{key} sites: before {b}, after {a} (ratio {a / max(1, b):.3f})")
    print(f"time: before {middle - start:.1f} s, after {end - middle:.1f} s "
          f"(ratio {(end - middle) / max(1e-9, middle - start):.2f})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
