"""`sweserve locks status|resolve`: the tasks' environment locks, and resolving the pending ones ahead of time.

With `lock_when: build` (lazy locking), `mine` records each task's lock inputs and resolves nothing new; an
image build resolves the locks of the tasks it builds. `locks resolve` does it ahead of time for the named
tasks (all when none), each distinct lock once, a few at a time, through the same cache under the state dir.
"""

from __future__ import annotations

from pathlib import Path

from rich.console import Console
from rich.markup import escape

from sweserve.errors import SweserveError


def register(sub, common) -> None:
    lk = sub.add_parser("locks", parents=[common], help="environment locks: status, or resolve the pending ones")
    lk.add_argument("locks_cmd", choices=["status", "resolve"])
    lk.add_argument("task_ids", nargs="*", help="tasks to resolve (default: every task with a pending lock)")
    lk.add_argument("--workers", type=int, default=6, help="locks resolved at a time (default: 6)")
    lk.add_argument("--json", action="store_true", help="print the counts as JSON")
    lk.set_defaults(func=run)


def run(args, console: Console) -> int:
    import json

    from sweserve.dataset.locking import resolve_pending
    from sweserve.dataset.taskstore import readable_tasks, save_task

    if args.workers < 1:
        raise SweserveError("--workers must be at least 1")
    tasks_dir = Path(args.tasks)
    if not tasks_dir.is_dir():
        raise SweserveError(f"--tasks {tasks_dir}: not a folder")
    tasks = readable_tasks(tasks_dir)
    if args.locks_cmd == "resolve":
        known = {t.task_id for t in tasks}
        unknown = [t for t in args.task_ids if t not in known]
        if unknown:
            raise SweserveError(f"no such task in {tasks_dir}: {', '.join(unknown[:3])}")
        chosen = [t for t in tasks if not args.task_ids or t.task_id in args.task_ids]
        locker = resolve_pending(chosen, Path(args.state_dir) / "locks", peers=tasks, workers=args.workers,
                                 save=lambda t: save_task(tasks_dir / t.task_id, t))
        s = locker.stats
        if not args.json:
            console.print(f"locks: {s.tasks} tasks, {s.resolved} resolved, {s.cached} from the cache, {s.fallback} "
                          f"fell back to the epoch's cutoff, {s.unpinned} unpinned, in {s.duration_s:.1f}s")
            for note in locker.notes:
                console.print(f"[yellow]note:[/] {escape(note)}")
    counts = {"locked": sum(t.lock is not None for t in tasks), "pending": sum(t.lock_pending for t in tasks),
              "pending_keys": len({t.lock_request.key for t in tasks if t.lock_pending and t.lock_request}),
              "unpinned": sum(t.lock is None and t.lock_request is not None and t.lock_request.unpinned is not None
                              for t in tasks),
              "not_locked": sum(t.lock is None and t.lock_request is None for t in tasks)}
    if args.json:
        print(json.dumps(counts))
    else:
        console.print(f"{counts['locked']} tasks locked, {counts['pending']} pending ({counts['pending_keys']} "
                      f"distinct locks), {counts['unpinned']} unpinned, {counts['not_locked']} without locking")
    return 0
