"""`sweserve review`: a reviewer report for one result."""

from __future__ import annotations

from pathlib import Path

from rich.console import Console

from sweserve.errors import SweserveError


def register(sub, common) -> None:
    rv = sub.add_parser("review", parents=[common], help="reviewer report: instruction, diffs, test results, transcript")
    rv.add_argument("results", help="results JSONL")
    rv.add_argument("task_id")
    rv.add_argument("--agent", default=None, help="whose result (default: the last one for the task)")
    rv.add_argument("--html", action="store_true", help="HTML instead of Markdown")
    rv.add_argument("--out", "-o", default=None, help="write to this file instead of stdout")
    rv.set_defaults(func=run)


def run(args, console: Console) -> int:
    from sweserve.dataset.taskstore import select
    from sweserve.evaluation.results import latest, read_results
    from sweserve.reporting.review import review_html, review_markdown

    bundle = select(Path(args.tasks), [args.task_id])[0]
    path = Path(args.results)
    if not path.exists():
        raise SweserveError(f"{path}: no such results file")
    found = [r for r in latest(read_results(path)).values()
             if r.task_id == args.task_id and (args.agent is None or r.agent == args.agent)]
    if not found:
        raise SweserveError(f"no result for {args.task_id}" + (f" by {args.agent}" if args.agent else "") + f" in {path}")
    from sweserve.evaluation.trial_folder import folder_of

    shown = found[-1]
    if (folder := folder_of(path, shown)) is not None:  # the folder whose result.json is this record (R20d-2)
        shown.trial_dir = str(folder)
    text = (review_html if args.html else review_markdown)(bundle, shown)
    if args.out:
        Path(args.out).write_text(text)
    else:
        print(text, end="")
    return 0
