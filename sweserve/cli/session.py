"""`sweserve session`: a human engineer works a task in its sandbox, then it is graded."""

from __future__ import annotations

from pathlib import Path

from rich.console import Console
from rich.markup import escape

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
    from sweserve.agents.human import HumanAgent
    from sweserve.dataset.taskstore import select
    from sweserve.evaluation.evaluate import next_attempt
    from sweserve.evaluation.results import ResultsWriter
    from sweserve.loading import write_atomic
    from sweserve.reporting.review import review_markdown, visible_controls

    bundle = select(Path(args.tasks), [args.task_id])[0]
    task = bundle.task
    if not args.candidate.replace("-", "").replace("_", "").isalnum():
        raise SweserveError("--candidate may hold letters, digits, '-' and '_' only")
    limit = task.resources.timeout_s if args.time_limit is None else args.time_limit
    if limit < 1:
        raise SweserveError("--time-limit must be at least 1 second")
    agent = HumanAgent(args.candidate, limit, console)
    output = Path(args.output) if args.output else default_output(agent.name)
    with ResultsWriter(output) as writer:  # locked first: two sessions never share a results file
        attempt = next_attempt(output, agent.name, task.task_id)  # a killed session's attempt stays its own (R16b-5)
        result = _session(args, console, bundle, agent, output, writer, attempt)
    review = output.with_name(f"review-{args.candidate}-{task.task_id}.md")
    write_atomic(review, review_markdown(bundle, result))  # whole or not at all (red team 16b's lead)
    wall = f" in {result.agent_run.wall_s:.0f}s" if result.agent_run else ""
    console.print(f"{task.task_id}: [bold]{result.status}[/]{wall} → {escape(str(output))}; reviewer report "
                  f"{escape(str(review))}"
                  + (f" ({escape(result.reason)})" if result.status == "error" and result.reason else "")
                  + (f" [yellow]flags: {escape(visible_controls(', '.join(result.flags)))}[/]" if result.flags else ""))
    return 0


def _session(args, console: Console, bundle, agent, output: Path, writer, attempt: int):
    """The new attempt through the pipeline `run` uses (manifest, `run_trial_safely`, the results writer); a
    task the trial would skip is refused before a person sits down at it."""
    from sweserve.evaluation.evaluate import run_evaluation
    from sweserve.evaluation.trial import NOT_VALIDATED, cannot_run

    task = bundle.task
    if not task.validated:  # before Docker is asked anything
        raise SweserveError(f"{task.task_id} is {NOT_VALIDATED}")
    with make_context(args, console) as ctx:
        if (why := cannot_run(ctx, task)):
            raise SweserveError(f"{task.task_id} cannot run here: {why}")
        # force: each session is a new attempt graded on its own, never a resume of earlier ones
        (result,) = run_evaluation(ctx, [bundle], agent, output, attempts=attempt, first_attempt=attempt,
                                   force=True, writer=writer)
    return result
