"""Reading what a repository's Python files write, for many tasks: per task, and with one `NumbersCache`.

The guard bounds each twin group by the numbers every other Python file of the repository writes at the task's
base (`guard.repository_numbers`). `tasks guard`, `tasks lint --write` and `validate` measure task after task of
one clone, at base commits that share most of their files. Per task, every file is read and scanned again; with
the cache, a blob already scanned for an earlier task is not.

By default this builds a synthetic clone (--files Python files, --commits commits each changing --changed files)
and measures one task per commit. `--clone PATH --tasks DIR` measures real tasks instead (for example the
sglang-jax tasks `mine` wrote), at their own base commits.

    python benchmarks/repository_numbers.py [--files 2000 --commits 20 --changed 15]
    python benchmarks/repository_numbers.py --clone /path/to/sglang-jax --tasks /path/to/tasks [--limit 20]
"""

from __future__ import annotations

import argparse
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from sweserve.dataset.taskstore import load_bundle  # noqa: E402
from sweserve.evaluation import guard  # noqa: E402
from sweserve.models import Task, TestSpec  # noqa: E402


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, text=True).stdout


def _module(rng: random.Random) -> str:
    lines = [f"def f{i}(x):\n    return x * {rng.randint(2, 999)} + {rng.randint(0, 99)}  # {rng.random():.4f}\n"
             for i in range(40)]
    return "\n\n".join(lines)


def synthetic(root: Path, files: int, commits: int, changed: int) -> tuple[Path, list[Task]]:
    """A clone of `files` modules and `commits` commits, each rewriting `changed` of them; one task per commit."""
    rng = random.Random(0)
    repo = root / "repo"
    repo.mkdir()
    _git(repo, "init", "-q")
    _git(repo, "config", "user.email", "b@b")
    _git(repo, "config", "user.name", "b")
    paths = [f"pkg/m{i // 100}/mod_{i}.py" for i in range(files)]
    for path in paths:
        (repo / path).parent.mkdir(parents=True, exist_ok=True)
        (repo / path).write_text(_module(rng))
    tasks = []
    for n in range(commits):
        if n:
            for path in rng.sample(paths, changed):
                (repo / path).write_text(_module(rng))
        _git(repo, "add", "-A")
        _git(repo, "commit", "-qm", f"c{n}")
        tasks.append(Task(task_id=f"o__r-{n + 1}", repo="o/r", profile="p", pr_number=n + 1, title="t",
                          base_commit=_git(repo, "rev-parse", "HEAD").strip(), merge_commit="b" * 40,
                          family="distributed", created_at="2026-01-01T00:00:00Z",
                          test=TestSpec(runner="pytest", files=["tests/test_x.py"])))
    return repo, tasks


def timed(repo: Path, tasks: list[Task], cache: guard.NumbersCache | None) -> tuple[float, list[dict]]:
    started = time.perf_counter()
    out = [guard.repository_numbers(repo, t, list(t.test.files), cache) for t in tasks]
    return time.perf_counter() - started, out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--files", type=int, default=2000)
    ap.add_argument("--commits", type=int, default=20)
    ap.add_argument("--changed", type=int, default=15)
    ap.add_argument("--clone", type=Path, help="a real clone (with --tasks)")
    ap.add_argument("--tasks", type=Path, help="a tasks folder of that clone")
    ap.add_argument("--limit", type=int, default=20, help="real tasks measured (the newest base commits first)")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        if args.clone and args.tasks:
            repo = args.clone
            bundles = [load_bundle(p) for p in sorted(args.tasks.iterdir()) if (p / "task.json").exists()]
            tasks = sorted((b.task for b in bundles), key=lambda t: t.created_at, reverse=True)[:args.limit]
        else:
            repo, tasks = synthetic(Path(tmp), args.files, args.commits, args.changed)
        per_task, plain = timed(repo, tasks, None)
        cached, shared = timed(repo, tasks, guard.NumbersCache())
    assert plain == shared, "the cache changed what a task reads"
    files = sum(len(x) for x in plain)
    print(f"{len(tasks)} tasks, {files} file readings in all")
    print(f"per task:   {per_task:7.2f} s  ({per_task / len(tasks):.2f} s per task)")
    print(f"one cache:  {cached:7.2f} s  ({cached / len(tasks):.2f} s per task)")
    print(f"ratio: {per_task / cached:.1f}x")


if __name__ == "__main__":
    main()
