"""What making every decimal site weak (`twins.computed`) costs in strong sites, in one run.

Over a corpus of real test files (numpy's own tests by default, installed with the project), every numeric site
of every test is classified as `grading_plan` would at validation, without a repository: strong (`strong_sites`)
or not, once with the rule off (`computed` answering False: a decimal site judged like a whole one) and once
with it. Printed: sites, decimal sites, and strong sites (all, and decimal) before and after.

    python benchmarks/decimal_sites.py                  # numpy's tests
    python benchmarks/decimal_sites.py /path/to/tests   # any folder of test_*.py files
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


def _count(files: list[Path]) -> dict[str, int]:
    out = {"tests": 0, "sites": 0, "decimal sites": 0, "strong": 0, "strong decimal": 0}
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
                decimal = isinstance(twins._number(g[0]), float)
                out["sites"] += 1
                out["decimal sites"] += decimal
                out["strong"] += i in strong
                out["strong decimal"] += decimal and i in strong
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("root", nargs="?", type=Path, help="a folder of test files (default: numpy's tests)")
    parser.add_argument("--limit", type=int, default=0, help="read only the first N files (0: all)")
    args = parser.parse_args()
    files = _files(args.root)[: args.limit or None]
    if not files:
        print(f"no test files under {args.root}", file=sys.stderr)
        return 2
    start = time.perf_counter()
    with mock.patch.object(twins, "computed", lambda value: False):
        before = _count(files)
    middle = time.perf_counter()
    after = _count(files)
    end = time.perf_counter()
    print(f"{len(files)} files, {after['tests']} tests with numeric sites, {after['sites']} sites, "
          f"{after['decimal sites']} decimal")
    for key in ("strong", "strong decimal"):
        b, a = before[key], after[key]
        print(f"{key} sites: before {b}, after {a} (ratio {a / max(1, b):.3f})")
    print(f"time: before {middle - start:.1f} s, after {end - middle:.1f} s "
          f"(ratio {(end - middle) / max(1e-9, middle - start):.2f})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
