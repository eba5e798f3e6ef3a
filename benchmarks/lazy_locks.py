"""Eager or lazy locking, end to end on the full sglang-jax history, in one run: which gets tasks built sooner.

Both start cold: an empty lock cache and an empty uv cache (UV_CACHE_DIR), the built-in `sglang-jax` profile
(quarter epochs), the clone benchmarks/mining_speed.py makes.

* eager (`lock_when: mine`): `mine` resolves every distinct lock, 6 at a time; every task is then ready to build.
* lazy (`lock_when: build`): `mine` records each task's lock request and resolves nothing; then the locks the
  first `validate` of the N newest tasks needs (theirs, and the lock of the profile's shared layer, as
  `sweserve validate` resolves them), then the rest (`sweserve locks resolve`), each distinct lock once.

Prints each phase's wall time, commits/s of the mine, the ratios, and the load average with every number (the
2-core machine is shared). Target (issue 18): cold mine >= 10 commits/s. uv needs the package index (PyPI).

    python benchmarks/lazy_locks.py [--newest 8]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path
from types import SimpleNamespace

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from mining_speed import real_history  # noqa: E402

from sweserve.cli.common import settle_locks  # noqa: E402
from sweserve.dataset.locking import resolve_pending  # noqa: E402
from sweserve.dataset.mining import mine, open_repo  # noqa: E402
from sweserve.dataset.profiles import load_profile  # noqa: E402
from sweserve.dataset.taskstore import readable_tasks, save_task  # noqa: E402


def load() -> str:
    one, five, _ = os.getloadavg()
    return f"load {one:.1f}/{five:.1f} (1/5 min) on {os.cpu_count()} cores"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--newest", type=int, default=8, help="tasks the first validate builds (default: 8)")
    ap.add_argument("--skip-eager", action="store_true", help="measure lazy only")
    args = ap.parse_args()
    history = real_history()
    if history is None:
        return 1
    repo, commits = history
    profile = load_profile("sglang-jax")
    print(f"sglang-jax: {commits} commits; lock_epoch {profile.lock_epoch}; {load()}")
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        eager = None
        if not args.skip_eager:
            os.environ["UV_CACHE_DIR"] = str(root / "uv-eager")  # cold for uv too
            started = time.perf_counter()
            report = mine(open_repo(repo), profile, root / "eager", lock_cache=root / "eager-locks", lock_when="mine")
            eager = time.perf_counter() - started
            s = report.locks
            print(f"eager mine    {eager:7.1f} s = {commits / eager:6.1f} commits/s  {len(report.written)} tasks, "
                  f"{s.resolved} resolved, {s.fallback} fell back, {s.unpinned} unpinned   [{load()}]")

        os.environ["UV_CACHE_DIR"] = str(root / "uv-lazy")
        tasks_dir, cache = root / "lazy", root / "lazy-state" / "locks"
        started = time.perf_counter()
        report = mine(open_repo(repo), profile, tasks_dir, lock_cache=cache, lock_when="build")
        lazy_mine = time.perf_counter() - started
        s = report.locks
        print(f"lazy mine     {lazy_mine:7.1f} s = {commits / lazy_mine:6.1f} commits/s  {len(report.written)} tasks, "
              f"{s.resolved} resolved, {s.pending} pending   (target >= 10: x{commits / lazy_mine / 10:.1f})"
              f"   [{load()}]")

        tasks = readable_tasks(tasks_dir)
        newest = sorted(tasks, key=lambda t: t.created_at, reverse=True)[:args.newest]
        keys = {t.lock_request.key for t in newest if t.lock_request}
        started = time.perf_counter()
        settle_locks(SimpleNamespace(tasks=str(tasks_dir), state_dir=str(root / "lazy-state"), no_record=False),
                     newest, tasks, None)
        first = time.perf_counter() - started
        print(f"lazy first validate of the {len(newest)} newest ({len(keys)} distinct locks, and the shared "
              f"layer's): {first:7.1f} s   [{load()}]")

        tasks = readable_tasks(tasks_dir)
        started = time.perf_counter()
        locker = resolve_pending(tasks, cache, peers=tasks,
                                 save=lambda t: save_task(tasks_dir / t.task_id, t))
        rest = time.perf_counter() - started
        s = locker.stats
        print(f"lazy the rest (locks resolve): {rest:7.1f} s  {s.tasks} tasks, {s.resolved} resolved, "
              f"{s.fallback} fell back, {s.unpinned} unpinned   [{load()}]")
        to_newest, to_all = lazy_mine + first, lazy_mine + first + rest
        print(f"lazy mine then {len(newest)} newest buildable: {to_newest:7.1f} s; every task: {to_all:7.1f} s")
        if eager is not None:
            print(f"ratio  cold mine eager/lazy x{eager / lazy_mine:.1f}; to the {len(newest)} newest buildable "
                  f"eager/lazy x{eager / to_newest:.1f}; to every task lazy/eager x{to_all / eager:.2f}   [{load()}]")
    return 0


if __name__ == "__main__":
    sys.exit(main())
