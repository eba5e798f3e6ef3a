"""Twin coverage, statically: the share of tests that hold at least one candidate twin site.

A test gets twins only at a site `twins.sites` finds (a numeric literal in a check) or, where it has none, at
a check `twins.flips` finds (a reading of two: `is None`/`is not None`, `in`/`not in`, `True`/`False`, paired
unittest methods; weak twins); validation then keeps a candidate only if it fails with the oracle and at base,
by execution. This script counts the upper bound, in one run: before flips (numeric sites only), after (a
numeric site or a flip), and the proposed operators' bound (a comparison, constant, assert method, raises or
approx of any kind), and the raises twins (`twins.raises_checks`, tests with neither a numeric site nor a flip,
in files that write no pool class elsewhere). Flips whose real reading is the common one are tried with probability (1 - p) / p
(`twins.FLIP_COMMON`): the expected share tried is printed too.

    python benchmarks/twin_coverage.py --demo tasks                    # whole files at merge_commit (demo)
    python benchmarks/twin_coverage.py --repo /work/realdata/jax /work/realdata/ready/tasks   # a local clone
    python benchmarks/twin_coverage.py /work/realdata/ready/tasks      # only the files tests.patch creates
"""
from __future__ import annotations

import argparse
import ast
import json
import subprocess
import tempfile
from pathlib import Path

from sweserve.evaluation.twins import (
    FLIP_COMMON,
    Flip,
    _readings_as_statements,
    collected,
    flips,
    raises_checks,
    raises_seen,
    seen_statements,
    sites,
)

_ASSERT_PAIRS = {"assertEqual", "assertNotEqual", "assertTrue", "assertFalse", "assertIn", "assertNotIn",
                 "assertIsNone", "assertIsNotNone", "assertRaises", "raises", "approx", "assertAlmostEqual"}
_FLIPPABLE = (ast.Eq, ast.NotEq, ast.Lt, ast.GtE, ast.Gt, ast.LtE, ast.Is, ast.IsNot, ast.In, ast.NotIn)


def other_sites(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    """Whether the test holds a check the proposed non-numeric operators could perturb (#15 part 2): a flippable
    comparison or a bool / None / string constant in an `assert`, or a paired unittest assert method,
    `pytest.raises`, `assertRaises` or `approx` call. An upper bound: not yet kept by execution."""
    for node in ast.walk(fn):
        if isinstance(node, ast.Assert):
            for c in ast.walk(node.test):
                if isinstance(c, ast.Compare) and any(isinstance(op, _FLIPPABLE) for op in c.ops):
                    return True
                if isinstance(c, ast.Constant) and (c.value is None or isinstance(c.value, (bool, str))):
                    return True
        if isinstance(node, ast.Call):
            f = node.func
            name = f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else ""
            if name in _ASSERT_PAIRS:
                return True
    return False


def new_files(patch: str) -> tuple[dict[str, str], int]:
    """The files a unified diff creates (path -> text), and how many .py files it only modifies."""
    out: dict[str, str] = {}
    modified = 0
    for chunk in patch.split("diff --git ")[1:]:
        head, _, body = chunk.partition("\n@@")
        path = head.split("\n", 1)[0].split(" b/")[-1].strip()
        if not path.endswith(".py"):
            continue
        if "--- /dev/null" not in head:
            modified += 1
            continue
        lines = [ln[1:] for ln in ("@@" + body).splitlines() if ln.startswith("+") and not ln.startswith("+++")]
        out[path] = "\n".join(lines) + "\n"
    return out, modified


def repo_files(task: Path, repo: Path) -> dict[str, str]:
    """The task's hidden test files, whole, at its merge commit in a local clone."""
    meta = json.loads((task / "task.json").read_text())
    return {f: subprocess.run(["git", "-C", str(repo), "show", f"{meta['merge_commit']}:{f}"], check=True,
                              capture_output=True, text=True).stdout for f in meta["test"]["files"]}


def graded(task: Path) -> set[str] | None:
    meta = json.loads((task / "task.json").read_text()) if (task / "task.json").is_file() else {}
    ids = [*meta.get("FAIL_TO_PASS", []), *meta.get("PASS_TO_PASS", [])]
    return {i.split("[")[0].split("::")[-1] for i in ids} or None


def _usable(fn: ast.FunctionDef | ast.AsyncFunctionDef, tree: ast.Module, base: str | None) -> list[Flip]:
    """The test's flips validation may try: none read either way elsewhere (`twins.seen_statements`)."""
    seen = seen_statements(base, tree, fn)
    return [f for f in flips(fn) if not set(_readings_as_statements(fn, f)) & seen]


def _tried(usable: list[Flip]) -> float:
    """The probability that validation tries at least one of these flips (each common reading thinned)."""
    none = 1.0
    for flip in usable:
        p = FLIP_COMMON[flip.kind][1]
        none *= 1 - ((1 - p) / p if flip.common else 1.0)
    return 1 - none


def base_files(task: Path, repo: Path) -> dict[str, str | None]:
    """The task's hidden test files at its base commit in a local clone (None where a file is new)."""
    meta = json.loads((task / "task.json").read_text())
    out: dict[str, str | None] = {}
    for f in meta["test"]["files"]:
        res = subprocess.run(["git", "-C", str(repo), "show", f"{meta['base_commit']}:{f}"], capture_output=True,
                             text=True)
        out[f] = res.stdout if res.returncode == 0 else None
    return out


def measure(root: str, repo: Path | None) -> None:
    tasks = sorted(p for p in Path(root).iterdir() if (p / "tests.patch").is_file())
    tests = covered = flipped = raised = proposed = modified = unparsed = 0
    classes: dict[str, int] = {}  # the pool's classes among the raises checks validation may try (RAISES_SHARE)
    tried = 0.0
    readings: dict[str, list[int]] = {}  # kind -> [common, other] among usable flips of tests with no numeric site
    for task in tasks:
        bases: dict[str, str | None] = {}
        if repo is not None:
            files, mod, bases = repo_files(task, repo), 0, base_files(task, repo)
        else:
            files, mod = new_files((task / "tests.patch").read_text(errors="replace"))
        modified += mod
        names = graded(task) if repo is not None else None
        instruction = (task / "instruction.md").read_text(errors="replace") if (task / "instruction.md").is_file() \
            else ""
        for path, text in files.items():
            try:
                tree = ast.parse(text)
            except (SyntaxError, ValueError):
                unparsed += 1
                continue
            mine = [(c, fn) for c, fn in collected(tree, "pytest") if names is None or fn.name in names]
            pool_seen = raises_seen(text, tree, mine, bases.get(path), instruction)
            for _cls, fn in mine:
                tests += 1
                numeric = bool(sites(fn))
                covered += numeric
                usable = _usable(fn, tree, bases.get(path)) if not numeric else []
                for f in usable:
                    readings.setdefault(f.kind, [0, 0])[not f.common] += 1
                flipped += bool(usable)
                tried += _tried(usable)
                checks = raises_checks(fn) if not numeric and not usable and not pool_seen else []
                for node in checks[:1]:
                    classes[node.id] = classes.get(node.id, 0) + 1
                raised += bool(checks)
                proposed += numeric or other_sites(fn)

    def share(n: float) -> str:
        return f"{n / tests if tests else 0.0:.1%}"
    print(f"{root}: {len(tasks)} tasks, {tests} tests; >=1 candidate site before flips (numeric): {covered} "
          f"({share(covered)}); after (numeric or flip): {covered + flipped} ({share(covered + flipped)}), "
          f"of which {flipped} by flips only, {tried:.0f} expected tried after thinning "
          f"({share(covered + tried)} in all); raises twins where neither: {raised} ({share(raised)}); "
          f"proposed operators' bound: {proposed} ({share(proposed)}); "
          f"{modified} modified .py files skipped, {unparsed} unparsable")
    print("  flips' real readings (common:other, share common; twins.FLIP_COMMON): " + ", ".join(
        f"{kind} {FLIP_COMMON[kind][0]!r} {c}:{o} ({c / (c + o):.2f})" for kind, (c, o) in sorted(readings.items())))
    print("  classes of the raises checks validation may try (twins.RAISES_SHARE): " + ", ".join(
        f"{k} {n}" for k, n in sorted(classes.items())))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("roots", nargs="+", help="folders of task folders (each with tests.patch)")
    parser.add_argument("--demo", action="store_true", help="read whole files from the demo repository")
    parser.add_argument("--repo", type=Path, help="read whole files at each task's merge_commit from this clone")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        repo = args.repo
        if args.demo:
            from sweserve.demo.fixture import build_demo_repo
            repo = build_demo_repo(Path(tmp) / "repo")
        for root in args.roots:
            measure(root, repo)


if __name__ == "__main__":
    main()
