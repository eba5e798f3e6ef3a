"""Mining with pinned environments: commits per second cold and warm, and what shared locks save, in one run.

Mines the sgl-project/sglang-jax mirror (the clone benchmarks/mining_speed.py makes, history rewritten
without the blobs the snapshot lacks) with the built-in `sglang-jax` profile, locking on:

* per-PR: `lock_epoch: pr`, no lock cache: every task its own `uv pip compile` (the old behaviour), on the
  newest --per-pr-limit PR candidates only (the whole history took 453 s), scaled to commits/s;
* cold, eager (`lock_when: mine`): epoch-shared locks, an empty lock cache and an empty uv cache: every distinct
  lock resolved by `mine`;
* warm: eager again into a fresh tasks folder, the lock cache kept (nothing left to resolve);
* cold, lazy (`lock_when: build`, the built-in default): an empty lock cache; `mine` records each task's lock
  request and resolves nothing (the first build resolves; see benchmarks/lazy_locks.py for end to end).

Targets (issue 18): warm >= 100 commits/s, cold >= 10 commits/s. uv needs the package index (PyPI).

    python benchmarks/lock_cache.py [--per-pr-limit 40]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from mining_speed import real_history  # noqa: E402

from sweserve.dataset.mining import mine, open_repo  # noqa: E402
from sweserve.dataset.profiles import load_profile  # noqa: E402


def timed(repo: Path, profile, tasks: Path, cache: Path | None, limit: int | None = None):
    started = time.perf_counter()
    report = mine(open_repo(repo), profile, tasks, lock_cache=cache, limit=limit)
    return time.perf_counter() - started, report


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--per-pr-limit", type=int, default=40, help="PR candidates mined per-PR (0: skip)")
    args = ap.parse_args()
    history = real_history()
    if history is None:
        return 1
    repo, commits = history
    profile = load_profile("sglang-jax")
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        os.environ["UV_CACHE_DIR"] = str(root / "uv-cache")  # cold for uv too
        if args.per_pr_limit:
            wall, report = timed(repo, profile.model_copy(update={"lock_epoch": "pr"}), root / "per-pr", None,
                                 args.per_pr_limit)
            print(f"per-PR  {report.scanned:4d} commits, {len(report.written):3d} tasks, "
                  f"{report.locks.resolved:3d} resolves  {wall:7.1f} s = {report.scanned / wall:6.1f} commits/s")
        eager = profile.model_copy(update={"lock_when": "mine"})
        cold, report = timed(repo, eager, root / "cold", root / "locks")
        locks = report.locks
        print(f"cold, eager {commits:4d} commits, {len(report.written):3d} tasks, {locks.resolved:3d} resolves  "
              f"{cold:7.1f} s = {commits / cold:6.1f} commits/s   (target >= 10: x{commits / cold / 10:.2f})")
        print(f"        {locks.shared} tasks on shared epoch locks, {locks.own} on their own, {locks.fallback} "
              f"fell back to the epoch, {locks.unpinned} unpinned")
        warm, report = timed(repo, eager, root / "warm", root / "locks")
        print(f"warm        {commits:4d} commits, {len(report.written):3d} tasks, {report.locks.resolved:3d} resolves  "
              f"{warm:7.1f} s = {commits / warm:6.1f} commits/s   (target >= 100: x{commits / warm / 100:.2f})")
        lazy, report = timed(repo, profile.model_copy(update={"lock_when": "build"}), root / "lazy", root / "lazy-locks")
        print(f"cold, lazy  {commits:4d} commits, {len(report.written):3d} tasks, {report.locks.resolved:3d} resolves  "
              f"{lazy:7.1f} s = {commits / lazy:6.1f} commits/s   (target >= 10: x{commits / lazy / 10:.2f})")
        print(f"ratio   eager cold/warm x{cold / warm:.1f}, eager/lazy cold x{cold / lazy:.1f}   "
              f"(load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
