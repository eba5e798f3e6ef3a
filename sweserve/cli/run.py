"""`sweserve run`: evaluate an agent; results append to a JSONL file."""

from __future__ import annotations

from pathlib import Path

from rich.console import Console

from sweserve.cli.common import default_output, make_context, progress_bar
from sweserve.errors import SweserveError


def register(sub, common) -> None:
    r = sub.add_parser("run", parents=[common], help="evaluate an agent; results append to a JSONL file")
    r.add_argument("task_ids", nargs="*", help="tasks to run (default: all)")
    r.add_argument("--agent", required=True, help="'oracle', 'null', or a shell command run in /testbed")
    r.add_argument("--agent-name", default=None, help="name for a command agent in results")
    r.add_argument("--output", default=None, help="results JSONL (default: results/<agent>.jsonl)")
    r.add_argument("--attempts", type=int, default=1, help="attempts per task, for pass@k (default: 1)")
    r.add_argument("--workers", type=int, default=1, help="tasks run at once (default: 1)")
    r.add_argument("--retry-errors", action="store_true", help="redo attempts whose last result is 'error'")
    r.add_argument("--repo-path", default=None, help="clone to build task images from")
    r.set_defaults(func=run)


def run(args, console: Console) -> int:
    from sweserve.agents.base import make_agent
    from sweserve.dataset.taskstore import select
    from sweserve.evaluation.results import read_results
    from sweserve.evaluation.trial import run_evaluation
    from sweserve.reporting.summary import build_reports, render

    bundles = select(Path(args.tasks), args.task_ids)
    agent = make_agent(args.agent, args.agent_name)
    output = Path(args.output) if args.output else default_output(agent.name)
    if args.attempts < 1 or args.workers < 1:
        raise SweserveError("--attempts and --workers must be at least 1")
    ctx = make_context(args, console)
    console.print(f"run {ctx.run_id}: agent [bold]{agent.name}[/] on {len(bundles)} tasks → {output}")
    with progress_bar(console) as progress:
        bar = progress.add_task(f"{agent.name}", total=None)

        def on_result(result, done, total):
            progress.console.print(f"  {result.task_id} #{result.attempt}: {result.status}"
                                   + (f" ({result.reason})" if result.reason else ""),
                                   markup=False, highlight=False, soft_wrap=True)
            progress.update(bar, completed=done, total=total)

        run_evaluation(ctx, bundles, agent, output, attempts=args.attempts, workers=args.workers,
                       retry_errors=args.retry_errors, on_result=on_result)
    ids = {b.task.task_id for b in bundles}
    render([r for r in build_reports([x for x in read_results(output) if x.task_id in ids])
            if r.agent == agent.name], console)
    return 0
