"""`sweserve run`: evaluate an agent; results append to a JSONL file."""

from __future__ import annotations

from pathlib import Path

from rich.console import Console
from rich.markup import escape

from sweserve.cli.common import default_output, make_context, progress_bar
from sweserve.errors import SweserveError


def register(sub, common) -> None:
    r = sub.add_parser("run", parents=[common], help="evaluate an agent; results append to a JSONL file")
    r.add_argument("task_ids", nargs="*", help="tasks to run (default: all)")
    r.add_argument("--agent", required=True, help="'oracle', 'null', an agent config (path or name), or a shell command run in /testbed")
    r.add_argument("--agent-name", default=None, help="name for a command agent in results")
    r.add_argument("--output", default=None, help="results JSONL (default: results/<agent>.jsonl)")
    r.add_argument("--attempts", type=int, default=1, help="attempts per task, for pass@k (default: 1)")
    r.add_argument("--workers", type=int, default=1, help="tasks run at once (default: 1)")
    r.add_argument("--retry-errors", action="store_true", help="redo attempts whose last result is 'error'")
    r.add_argument("--force", action="store_true",
                   help="resume even though the agent config or a task changed since earlier results")
    r.add_argument("--repo-path", default=None, help="clone to build task images from")
    r.add_argument("--max-submission-mb", type=float, default=5,
                   help="a bigger submission is an error, not graded or kept (default: 5)")
    r.set_defaults(func=run)


def run(args, console: Console) -> int:
    from sweserve.agents.resolve import make_agent
    from sweserve.config_search import ConfigSearch
    from sweserve.dataset.taskstore import select
    from sweserve.evaluation.results import ResultsWriter

    bundles = select(Path(args.tasks), args.task_ids)
    agent = make_agent(args.agent, args.agent_name, ConfigSearch.for_project(args.state_dir))
    output = Path(args.output) if args.output else default_output(agent.name)
    if args.attempts < 1 or args.workers < 1:
        raise SweserveError("--attempts and --workers must be at least 1")
    if not 0 < args.max_submission_mb <= 8:
        raise SweserveError("--max-submission-mb must be more than 0 and at most 8")
    writer = ResultsWriter(output)  # a folder, an unwritable path or a second run on it: refused before Docker
    try:
        return _run(args, console, bundles, agent, output, writer)
    finally:
        writer.close()


def _run(args, console: Console, bundles, agent, output: Path, writer) -> int:
    from sweserve.evaluation.evaluate import run_evaluation
    from sweserve.evaluation.results import read_results
    from sweserve.reporting.summary import Selection, build_reports, render

    ctx = make_context(args, console)
    console.print(f"run {ctx.run_id}: agent [bold]{escape(agent.name)}[/] on {len(bundles)} tasks → "
                  f"{escape(str(output))}")
    with progress_bar(console) as progress:
        bar = progress.add_task(f"{agent.name}", total=None)

        def on_result(result, done, total):
            progress.update(bar, completed=done, total=total)
            progress.console.print(f"  {escape(result.task_id)} #{result.attempt}: {result.status}"
                                   + (f" ({escape(result.reason)})" if result.reason else ""))

        finished = run_evaluation(ctx, bundles, agent, output, attempts=args.attempts, workers=args.workers,
                                  retry_errors=args.retry_errors, force=args.force, writer=writer,
                                  max_submission_bytes=int(args.max_submission_mb * 2**20), on_result=on_result)
    ids = {b.task.task_id for b in bundles}
    selected = {agent.name: Selection(attempts=args.attempts, tasks={b.task.task_id: b.task.family for b in bundles})}
    render([r for r in build_reports([x for x in read_results(output) if x.task_id in ids], selected)
            if r.agent == agent.name], console)
    bugs = [r for r in finished if r.error_kind == "internal"]
    if bugs:
        console.print(f"[red]{len(bugs)} trials hit an internal sweserve error[/]; tracebacks: "
                      + ", ".join(escape(f"{r.trial_dir}/traceback.txt") for r in bugs[:3]))
        return 1
    return 0
