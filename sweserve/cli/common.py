"""What the command modules share: the console, the progress display, the per-command Context, default paths.

Output must read well outside a terminal too (CI logs, files): there the console is wide, so tables keep
task ids and reasons whole instead of cutting them at rich's default 80 columns, and the live progress bar
(which rich draws only on a terminal) becomes plain lines — one per step, with the time so far — plus a
heartbeat line every SWESERVE_HEARTBEAT_S seconds (default 30) while a step is still running.
"""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

from rich.console import Console
from rich.markup import escape
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
)

from sweserve import heartbeat

WIDE = 1000  # columns when not writing to a terminal: nothing is cut, long cells stay on one line


def make_console(stderr: bool = False, file=None) -> Console:
    """A Console for the CLI: a terminal's own width, or WIDE (or $COLUMNS) when writing to a pipe or file."""
    console = Console(stderr=stderr, file=file)
    if not console.is_terminal and not os.environ.get("COLUMNS"):
        console.width = WIDE
    return console


class LineProgress:
    """rich.progress.Progress's subset the commands use, printed as lines (for consoles that are not terminals).

    A line when a step starts (its description changes) or a bar's total is reached, each with the time since
    the bar began; and a heartbeat line for every bar still running each `interval` seconds.
    """

    def __init__(self, console: Console, interval: float | None = None, clock=time.monotonic):
        self.console = console
        self.interval = heartbeat.interval_s() if interval is None else interval
        self.clock = clock
        self._tasks: dict[int, dict] = {}
        self._lock = threading.Lock()
        self._heartbeat: heartbeat.Heartbeat | None = None

    def __enter__(self) -> "LineProgress":
        self._heartbeat = heartbeat.Heartbeat(self.beat, self.interval)
        self._heartbeat.__enter__()
        return self

    def __exit__(self, *exc) -> None:
        if self._heartbeat:
            self._heartbeat.__exit__(*exc)

    def _line(self, t: dict, note: str = "") -> None:
        done = f" ({t['completed']}/{t['total']})" if t["total"] is not None else ""
        self.console.print(f"[{heartbeat.clock(self.clock() - t['start'])}] {t['description']}{done}{note}",
                           markup=False, highlight=False, soft_wrap=True)

    def add_task(self, description: str, total: float | None = None, **_) -> int:
        with self._lock:
            tid = len(self._tasks)
            self._tasks[tid] = {"description": description, "total": total, "completed": 0, "start": self.clock()}
            self._line(self._tasks[tid])
            return tid

    def update(self, task_id: int, *, description: str | None = None, completed: float | None = None,
               total: float | None = None, advance: float | None = None, **_) -> None:
        with self._lock:
            t = self._tasks[task_id]
            was_done = t["total"] is not None and t["completed"] >= t["total"]
            if total is not None:
                t["total"] = total
            if completed is not None:
                t["completed"] = completed
            if advance:
                t["completed"] += advance
            changed = description is not None and description != t["description"]
            if description is not None:
                t["description"] = description
            now_done = t["total"] is not None and t["completed"] >= t["total"]
            if changed:
                self._line(t)
            elif now_done and not was_done:
                self._line(t, " done")

    def advance(self, task_id: int, advance: float = 1) -> None:
        self.update(task_id, advance=advance)

    def beat(self) -> None:
        """One heartbeat line per bar not yet finished."""
        with self._lock:
            for t in self._tasks.values():
                if t["total"] is None or t["completed"] < t["total"]:
                    self._line(t, " … still running")


def progress_bar(console: Console):
    """A live bar on a terminal; step and heartbeat lines elsewhere."""
    if not console.is_terminal:
        return LineProgress(console)
    return Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                    console=console, transient=False)


def make_project(args, selected=(), console: Console | None = None):
    """The project's configuration as the command's arguments give it. The pending locks of the `selected`
    tasks (lazy locking), and the lock of each profile's shared layer, are resolved first: an image needs them."""
    from sweserve.config_search import ConfigSearch
    from sweserve.dataset.project import Project
    from sweserve.dataset.taskstore import readable_tasks

    project = Project(Path(args.state_dir), ConfigSearch.for_project(Path(args.state_dir)),
                      Path(args.repo_path) if getattr(args, "repo_path", None) else None)
    if getattr(args, "tasks", None) and Path(args.tasks).is_dir():
        tasks = readable_tasks(Path(args.tasks))
        settle_locks(args, list(selected), tasks, console)
        project.share_env_layers(tasks)  # all the project's tasks: the shared layer stays
    return project


def settle_locks(args, selected: list, tasks: list, console: Console | None) -> None:
    """Resolve the selected tasks' pending locks, then the pending lock of each profile's shared layer (one
    lock per profile), into the lock cache and (unless --no-record) their task.json files; say what it took."""
    from sweserve.dataset.image_spec import pending_shared
    from sweserve.dataset.locking import LockStats, resolve_pending
    from sweserve.dataset.taskstore import save_task
    from sweserve.models import Task

    tasks_dir, cache = Path(args.tasks), Path(args.state_dir) / "locks"
    save = None if getattr(args, "no_record", False) else (lambda t: save_task(tasks_dir / t.task_id, t))
    total, notes = LockStats(), []
    todo = [t for t in selected if t.lock_pending]
    tried: set[str] = set()
    for _ in range(8):  # each round settles (locks or unpins) what it is given, so the shared layer converges
        todo = [t for t in todo if t.task_id not in tried]  # what failed for now is asked once a command
        if not todo:
            break
        tried |= {t.task_id for t in todo}
        locker = resolve_pending(todo, cache, peers=tasks, save=save)
        for name in ("tasks", "resolved", "cached", "fallback", "unpinned"):
            setattr(total, name, getattr(total, name) + getattr(locker.stats, name))
        total.duration_s += locker.stats.duration_s
        notes += locker.notes
        # the selection's objects and the project's are separate copies: resolve_pending answers both
        todo = [t for t in pending_shared(tasks) if isinstance(t, Task)]
    if total.tasks and console is not None:
        console.print(f"locks (resolved at first build): {total.tasks} tasks, {total.resolved} resolved, "
                      f"{total.cached} from the cache, {total.fallback} fell back to the epoch's cutoff, "
                      f"{total.unpinned} unpinned, in {total.duration_s:.1f}s")
        for note in notes:
            console.print(f"[yellow]note:[/] {escape(note)}")


def make_context(args, console: Console, run_id: str | None = None, selected=()):
    """The command's Context; the command owns it: `with make_context(args, console) as ctx:`. `selected`: the
    tasks it will build images for (their pending locks are resolved first)."""
    from sweserve.environment.host import HostSpec, new_run_id, open_host
    from sweserve.evaluation.context import Context

    project = make_project(args, selected, console)  # bad input (a profile, a task) is said before Docker is asked anything
    host = open_host(HostSpec(run_id=run_id or new_run_id(), ca_bundle=args.ca_bundle, registry=getattr(args, "registry", None)))
    return Context(host, project)


def add_executor_args(parser) -> None:
    add_registry_arg(parser)
    parser.add_argument("--executor", choices=["local", "ray"], default="local",
                        help="local: threads on this Docker host; ray: one Ray task per trial across a cluster")
    parser.add_argument("--ray-address", default=None, metavar="ADDR",
                        help="Ray cluster to join, e.g. 10.0.0.1:6379 (default: RAY_ADDRESS, else a local one)")


def add_registry_arg(parser) -> None:
    parser.add_argument("--registry", default=None, metavar="HOST:PORT",
                        help="image registry shared by a cluster's nodes: missing layers are pulled from it, "
                             "layers built here are pushed to it (default: each node builds what it lacks)")


def workers_of(args) -> int:
    """--workers, checked: threads of the local executor only (Ray sizes each task by its resources)."""
    from sweserve.errors import SweserveError

    if args.workers is not None and args.executor == "ray":
        raise SweserveError("--workers is for --executor local: Ray runs as many tasks at once as the cluster's "
                            "resources allow")
    workers = 1 if args.workers is None else args.workers
    if workers < 1:
        raise SweserveError("--workers must be at least 1")
    return workers


def make_executor(args, ctx):
    """The executor --executor names; None lets the caller use threads (--workers)."""
    if args.executor != "ray":
        return None
    from sweserve.evaluation.ray_executor import RayExecutor, import_ray

    import_ray()  # a missing extra is a one-line error before anything starts
    return RayExecutor(ctx, args.ray_address)


def default_output(agent_name: str) -> Path:
    return Path("results") / f"{agent_name}.jsonl"


def add_unready_arg(parser, what: str) -> None:
    parser.add_argument("--include-unready", action="store_true",
                        help=f"also {what} tasks that are not ready (not valid, lint findings, family not settled, "
                             "a signal check fired; see `sweserve tasks funnel`)")


def ready_only(bundles: list, include_unready: bool, console: Console, what: str, state_dir: str | None = None) -> list:
    """The ready tasks of a selection (all of them with include_unready), and one line naming the rest.

    Ready means recorded ready (`readiness` in task.json) and still ready when assessed now against the
    profile's thresholds: a stale record never lets a task through."""
    if include_unready:
        return bundles
    from sweserve.dataset.readiness import why_not_ready
    from sweserve.errors import SweserveError

    ready: list = []
    left: list = []
    for b in bundles:
        why = why_not_ready(b.task, b.instruction)
        (left if why else ready).append((b, why))
    if left:
        (first, why) = left[0]
        console.print(f"left out {len(left)} tasks not ready (e.g. {first.task.task_id}: {why}); "
                      f"--include-unready {what}s them too", markup=False, highlight=False, soft_wrap=True)
    if bundles and not ready:
        raise SweserveError(f"no ready task to {what} among the {len(bundles)} selected (--include-unready takes "
                            "the others; `sweserve tasks funnel` says why each is not ready)")
    return [b for b, _ in ready]
