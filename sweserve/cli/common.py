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
    from sweserve.environment.context import Context

    return Context.create(
        state_dir=Path(args.state_dir), ca_bundle=args.ca_bundle,
        repo_path=Path(args.repo_path) if getattr(args, "repo_path", None) else None,
    )


def default_output(agent_name: str) -> Path:
    return Path("results") / f"{agent_name}.jsonl"
