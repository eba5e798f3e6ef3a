"""`sweserve session`: a human engineer works a task in its sandbox, then it is graded."""

from __future__ import annotations

import os
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
    from sweserve.environment.gpus import detect_gpus, skip_reason
    from sweserve.evaluation.results import ResultsWriter, read_results
    from sweserve.evaluation.trial import TrialRequest, run_trial, trial_folder
    from sweserve.reporting.review import review_markdown

    bundle = select(Path(args.tasks), [args.task_id])[0]
    task = bundle.task
    if not args.candidate.replace("-", "").replace("_", "").isalnum():
        raise SweserveError("--candidate may hold letters, digits, '-' and '_' only")
    limit = args.time_limit or task.resources.timeout_s
    if limit < 1:
        raise SweserveError("--time-limit must be at least 1 second")
    if not task.validated:
        raise SweserveError(f"{task.task_id} is not validated: run `sweserve validate` first")
    if (why := skip_reason(task.resources.gpus, detect_gpus(os.environ))):
        raise SweserveError(f"{task.task_id} cannot run here: {why}")
    agent = HumanAgent(args.candidate, limit, console)
    output = Path(args.output) if args.output else default_output(agent.name)
    with ResultsWriter(output) as writer:  # locked first: two sessions never share a results file
        attempt = 1 + max((r.attempt for r in read_results(output)
                           if r.task_id == task.task_id and r.agent == agent.name), default=0)
        ctx = make_context(args, console)
        try:
            result = run_trial(ctx, TrialRequest(bundle, agent, attempt,
                                                 trial_folder(output, ctx.run_id, agent, bundle, attempt)))
        finally:
            ctx.close()
        writer.write(result)
    review = output.with_name(f"review-{args.candidate}-{task.task_id}.md")
    review.write_text(review_markdown(bundle, result))
    wall = f" in {result.agent_run.wall_s:.0f}s" if result.agent_run else ""
    console.print(f"{task.task_id}: [bold]{result.status}[/]{wall} → {escape(str(output))}; reviewer report "
                  f"{escape(str(review))}"
                  + (f" ({escape(result.reason)})" if result.status == "error" and result.reason else "")
                  + (f" [yellow]flags: {escape(', '.join(result.flags))}[/]" if result.flags else ""))
    return 0
