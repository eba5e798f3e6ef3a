"""`sweserve run`: evaluate an agent, or grade predictions made elsewhere; results append to a JSONL file."""

from __future__ import annotations

import json
import re
from pathlib import Path

from rich.console import Console
from rich.markup import escape

from sweserve.cli.common import (
    add_executor_args,
    add_unready_arg,
    default_output,
    make_context,
    make_executor,
    progress_bar,
    ready_only,
    workers_of,
)
from sweserve.errors import SweserveError

RUN_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")


def register(sub, common) -> None:
    r = sub.add_parser("run", parents=[common], help="evaluate an agent; results append to a JSONL file")
    r.add_argument("task_ids", nargs="*", help="tasks to run (default: all)")
    who = r.add_mutually_exclusive_group(required=True)
    who.add_argument("--agent", help="'oracle', 'null', an agent config (path or name), or a shell command run in /testbed")
    who.add_argument("--predictions", metavar="FILE",
                     help="grade patches made elsewhere (SWE-bench predictions: JSONL, JSON list, or keyed by "
                          "instance_id); one agent per model_name_or_path")
    r.add_argument("--agent-name", "--model-name", dest="agent_name", default=None,
                   help="name in results for a command agent or a one-model predictions file (--model-name: "
                        "SWE-bench's spelling)")
    r.add_argument("--run-id", default=None,
                   help="this run's id (default: a random one): its folder under runs/ and the name of its "
                        "<model>.<run_id>.json report; with several models, each run is <run_id>-<agent>")
    r.add_argument("--timeout", type=int, default=None, metavar="S",
                   help="time limit in seconds for the agent's work and for each hidden-test run of every task "
                        "(default: each task's own; a resumed run with another limit needs --force)")
    r.add_argument("--output", default=None, help="results JSONL (default: results/<agent>.jsonl)")
    r.add_argument("--attempts", type=int, default=1, help="attempts per task, for pass@k (default: 1)")
    r.add_argument("--workers", type=int, default=None, help="tasks run at once (default: 1; not with --executor "
                   "ray, which sizes each trial by its task's resources)")
    add_executor_args(r)
    r.add_argument("--retry-errors", action="store_true", help="redo attempts whose last result is 'error' (not a limit the candidate's own work broke) "
                        "or 'skipped' (a host without the GPUs, a task not validated then)")
    r.add_argument("--force", action="store_true",
                   help="resume even though the agent config or a task changed since earlier results")
    r.add_argument("--repo-path", default=None, help="clone to build task images from")
    add_unready_arg(r, "run")
    r.add_argument("--max-submission-mb", type=float, default=5,
                   help="a bigger submission is an error, not graded or kept (default: 5, at most 8)")
    r.set_defaults(func=run)


def run(args, console: Console) -> int:
    from sweserve.agents.resolve import checked_name, make_agent
    from sweserve.config_search import ConfigSearch
    from sweserve.dataset.taskstore import select

    if args.agent_name is not None:
        checked_name(args.agent_name)  # one line, before anything reads the tasks
    if args.attempts < 1:
        raise SweserveError("--attempts and --workers must be at least 1")
    from sweserve.models import MAX_ATTEMPTS

    if args.attempts > MAX_ATTEMPTS:  # a manifest asking more is not one reports can walk (R20d-5)
        raise SweserveError(f"--attempts is at most {MAX_ATTEMPTS}")
    workers_of(args)  # checked before anything starts
    if not 0 < args.max_submission_mb <= 8:
        raise SweserveError("--max-submission-mb must be more than 0 and at most 8")
    if args.run_id is not None and not RUN_ID.fullmatch(args.run_id):
        raise SweserveError(f"--run-id {args.run_id!r}: use letters, digits, '.', '_' and '-' (at most 64)")
    if args.timeout is not None and args.timeout < 1:
        raise SweserveError("--timeout must be at least 1 second")
    if args.predictions:
        return _run_predictions(args, console)
    bundles = select(Path(args.tasks), args.task_ids)
    agent = make_agent(args.agent, args.agent_name, ConfigSearch.for_project(args.state_dir))
    return _evaluate(args, console, agent, bundles, args.run_id)


def with_timeout(bundle, seconds: int | None):
    """The task with --timeout as its limits (the candidate phase and each hidden-test run)."""
    if seconds is None:
        return bundle
    resources = bundle.task.resources.model_copy(update={"timeout_s": seconds, "test_timeout_s": seconds})
    return bundle.model_copy(update={"task": bundle.task.model_copy(update={"resources": resources})})


def _run_predictions(args, console: Console) -> int:
    """One run per model in the file, on the selected tasks it has predictions for."""
    from sweserve.agents.predictions import PredictionSet, load_predictions
    from sweserve.dataset.taskstore import load_all, select
    from sweserve.reporting.review import visible_controls
    from sweserve.reporting.swebench_report import swebench_model_name

    predictions = load_predictions(Path(args.predictions))
    preds = PredictionSet(predictions, {b.task.task_id for b in load_all(Path(args.tasks))})
    if args.agent_name:
        if len(preds.agents) > 1:
            raise SweserveError(f"--agent-name names one agent, but {args.predictions} holds predictions of "
                                f"{len(preds.agents)} models")
        preds.agents[0].name = args.agent_name
    if len(preds.agents) > 1 and args.output:
        console.print(f"{len(preds.agents)} models: their results share {escape(args.output)} under their own names")
    if len(preds.unknown) == len({p.instance_id for p in predictions}):
        raise SweserveError(f"{args.predictions}: none of its {len(preds.unknown)} instance ids names a task in "
                            f"{args.tasks} (e.g. {', '.join(preds.unknown[:3])})")
    if preds.unknown:
        console.print(f"[yellow]{len(preds.unknown)} predictions name no task in {escape(args.tasks)} (not graded):[/] "
                      + escape(visible_controls(", ".join(preds.unknown))))  # the submitter's text (R15b-7)
    if preds.empty:
        console.print(f"[yellow]{len(preds.empty)} predictions have an empty patch (recorded as failed):[/] "
                      + escape(", ".join(preds.empty)))
    selected = select(Path(args.tasks), args.task_ids)
    code = 0
    for agent in preds.agents:
        wanted = preds.task_ids(agent)
        bundles = [b for b in selected if b.task.task_id in wanted]
        if not bundles:
            console.print(f"agent [bold]{escape(agent.name)}[/]: no selected task has a prediction")
            continue
        run_id = args.run_id if args.run_id is None or len(preds.agents) == 1 else f"{args.run_id}-{agent.name}"
        code = max(code, _evaluate(args, console, agent, bundles, run_id, label=args.run_id,
                                   model=swebench_model_name(agent.model), submitted=sorted(wanted)))
    return code


def _evaluate(args, console: Console, agent, bundles, run_id: str | None, label: str | None = None,
              model: str | None = None, submitted: list[str] | None = None) -> int:
    """One agent's run on its own run id; at its end, `<model>.<label or run id>.json` beside the results."""
    from sweserve.evaluation.results import ResultsWriter

    output = Path(args.output) if args.output else default_output(agent.name)
    writer = ResultsWriter(output)  # a folder, an unwritable path or a second run on it: refused before Docker
    bundles = [with_timeout(b, args.timeout) for b in bundles]
    try:
        return _run(args, console, bundles, agent, output, writer, run_id,
                    lambda ctx_run_id: output.parent / f"{model or agent.name}.{label or ctx_run_id}.json", submitted)
    finally:
        writer.close()


def _run(args, console: Console, bundles, agent, output: Path, writer, run_id, report_path, submitted) -> int:
    from sweserve.evaluation.evaluate import run_evaluation, run_id_taken
    from sweserve.evaluation.results import read_results
    from sweserve.loading import write_atomic
    from sweserve.reporting.summary import Selection, build_reports, render
    from sweserve.reporting.swebench_report import run_report

    bundles = ready_only(bundles, args.include_unready, console, "run", args.state_dir)
    if run_id and (owner := run_id_taken(output, run_id, agent.name)):
        raise SweserveError(f"--run-id {run_id} is already the run of {owner} beside {output}; choose another")
    with make_context(args, console, run_id=run_id, selected=[b.task for b in bundles]) as ctx, progress_bar(console) as progress:  # closing reaps
        executor = make_executor(args, ctx)
        console.print(f"run {ctx.run_id}: agent [bold]{escape(agent.name)}[/] on {len(bundles)} tasks → "
                      f"{escape(str(output))}")
        bar = progress.add_task(f"{agent.name}", total=None)

        def on_result(result, done, total):
            progress.console.print(f"  {escape(result.task_id)} #{result.attempt}: {result.status}"
                                   + (f" ({escape(result.reason)})" if result.reason else ""), soft_wrap=True)
            progress.update(bar, completed=done, total=total)

        finished = run_evaluation(ctx, bundles, agent, output, attempts=args.attempts, workers=workers_of(args),
                                  retry_errors=args.retry_errors, force=args.force, writer=writer,
                                  max_submission_bytes=int(args.max_submission_mb * 2**20), on_result=on_result,
                                  executor=executor)
    ids = {b.task.task_id for b in bundles}
    selected = {agent.name: Selection(attempts=args.attempts, tasks={b.task.task_id: b.task.family for b in bundles})}
    # what `report` counts: a record run while the task was not ready (an earlier `--include-unready` run's) only
    # where this run takes unready tasks too; the summary showed an unready attempt's success as this run's (R23b-5)
    results = [x for x in read_results(output) if x.task_id in ids and (args.include_unready or x.task_ready is not False)]
    render([r for r in build_reports(results, selected) if r.agent == agent.name], console)
    report = report_path(ctx.run_id)  # SWE-bench's final report of the run
    # whole or not at all: a run killed mid-write left a torn report (red team 16b's lead)
    write_atomic(report, json.dumps(run_report(results, agent.name, sorted(ids), submitted), indent=4) + "\n")
    console.print(f"report in SWE-bench's shape: {escape(str(report))}", soft_wrap=True)
    bugs = [r for r in finished if r.error_kind == "internal"]
    if bugs:
        console.print(f"[red]{len(bugs)} trials hit an internal sweserve error[/]; tracebacks: "
                      + ", ".join(escape(f"{r.trial_dir}/traceback.txt") for r in bugs[:3]))
        return 1
    return 0
