"""`sweserve session`: a human engineer works a task in its sandbox, then it is graded."""

from __future__ import annotations

from pathlib import Path

from rich.console import Console

from sweserve.cli.common import default_output, make_context
from sweserve.errors import SweserveError


def register(sub, common) -> None:
    se = sub.add_parser("session", parents=[common], help="a human engineer works a task in its sandbox, then it is graded")
    se.add_argument("task_id")
    se.add_argument("--candidate", required=True, help="the engineer's name, recorded in results")
    se.add_argument("--time-limit", type=int, default=None, help="seconds (default: the task's timeout_s)")
    se.add_argument("--output", default=None, help="results JSONL (default: results/human-<candidate>.jsonl)")
    se.add_argument("--repo-path", default=None, help="clone to build task images from")
    se.set_defaults(func=run)


def run(args, console: Console) -> int:
    from sweserve.agents.human import run_session
    from sweserve.dataset.taskstore import select
    from sweserve.reporting.review import review_markdown

    bundle = select(Path(args.tasks), [args.task_id])[0]
    if not args.candidate.replace("-", "").replace("_", "").isalnum():
        raise SweserveError("--candidate may hold letters, digits, '-' and '_' only")
    limit = args.time_limit or bundle.task.resources.timeout_s
    if limit < 1:
        raise SweserveError("--time-limit must be at least 1 second")
    output = Path(args.output) if args.output else default_output(f"human-{args.candidate}")
    ctx = make_context(args, console)
    result = run_session(ctx, bundle, args.candidate, limit, output, console)
    review = output.with_name(f"review-{args.candidate}-{bundle.task.task_id}.md")
    review.write_text(review_markdown(bundle, result))
    console.print(f"{bundle.task.task_id}: [bold]{result.status}[/] in {result.agent_run.wall_s:.0f}s "
                  f"→ {output}; reviewer report {review}")
    return 0
