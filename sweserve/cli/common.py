"""What the command modules share: the progress bar, the per-command Context, default output paths."""

from __future__ import annotations

from pathlib import Path

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
)


def progress_bar(console: Console) -> Progress:
    return Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                    console=console, transient=False)


def make_context(args, console: Console):
    from sweserve.dataset.taskstore import readable_tasks
    from sweserve.environment.context import Context

    ctx = Context.create(
        state_dir=Path(args.state_dir), ca_bundle=args.ca_bundle,
        repo_path=Path(args.repo_path) if getattr(args, "repo_path", None) else None,
        registry=getattr(args, "registry", None),
    )
    if getattr(args, "tasks", None) and Path(args.tasks).is_dir():
        ctx.share_env_layers(readable_tasks(Path(args.tasks)))  # all the project's tasks: the shared layer stays put
    return ctx


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


def make_executor(args, ctx):
    """The executor --executor names; None lets the caller use threads (--workers)."""
    if args.executor != "ray":
        return None
    from sweserve.evaluation.ray_executor import RayExecutor, import_ray

    import_ray()  # a missing extra is a one-line error before anything starts
    return RayExecutor(ctx, args.ray_address)


def default_output(agent_name: str) -> Path:
    return Path("results") / f"{agent_name}.jsonl"
