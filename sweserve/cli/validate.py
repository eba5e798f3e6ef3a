"""`sweserve validate`: derive FAIL_TO_PASS/PASS_TO_PASS; exit 1 when an oracle fails or a task could not be
validated (an error of the machinery or a bug: printed and counted, its task.json left as it was)."""

from __future__ import annotations

import json
from pathlib import Path

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from sweserve.cli.common import add_executor_args, make_context, make_executor, progress_bar, workers_of
from sweserve.errors import SweserveError
from sweserve.reporting.review import visible_controls


def register(sub, common) -> None:
    v = sub.add_parser("validate", parents=[common], help="derive FAIL_TO_PASS/PASS_TO_PASS; exit 1 if an oracle fails")
    v.add_argument("task_ids", nargs="*", help="tasks to validate (default: all)")
    v.add_argument("--runs", type=int, default=3, help="runs per state; a test must hold in all (default: 3)")
    v.add_argument("--repo-path", default=None, help="clone to build task images from")
    v.add_argument("--workers", type=int, default=None, help="tasks validated at once (default: 1; not with "
                   "--executor ray, which sizes each task by its resources)")
    v.add_argument("--json", default=None, metavar="FILE", help="also write the outcomes as JSON")
    add_executor_args(v)
    v.add_argument("--no-record", action="store_true", help="check only; leave task.json files unchanged")
    v.add_argument("--reject-lint", action="store_true", help="reject valid tasks that fail `sweserve tasks lint`")
    v.add_argument("--ready-eligible", action="store_true", help="validate only tasks that can become ready: skip, "
                   "before any image is built, those whose statement mining found ineligible (title only, too short, "
                   "leaking) or whose family is not settled")
    v.set_defaults(func=run)


def run(args, console: Console) -> int:
    from sweserve.dataset.taskstore import select
    from sweserve.evaluation.validation import validate_all

    tasks_dir = Path(args.tasks)
    bundles = select(tasks_dir, args.task_ids)
    if args.runs < 1:
        raise SweserveError("--runs and --workers must be at least 1")
    if args.ready_eligible:
        bundles = only_ready_eligible(bundles, console)
        if not bundles:
            return 0
    workers = workers_of(args)
    repos = {b.task.task_id: b.task.repo for b in bundles}
    outcomes = []
    with make_context(args, console, selected=[b.task for b in bundles]) as ctx:
        executor = make_executor(args, ctx)
        with progress_bar(console) as progress:
            bar = progress.add_task("validating", total=len(bundles))
            for outcome in validate_all(ctx, tasks_dir, bundles, runs=args.runs, record=not args.no_record,
                                        workers=workers, executor=executor):
                if not args.no_record and outcome.status != "error":  # the interface needs FAIL_TO_PASS: now
                    lint_after_validation(ctx, tasks_dir, repos[outcome.task_id], outcome, args.reject_lint, console)
                outcomes.append(outcome)
                # one update: the line that names the task counts it (it was printed before the advance)
                progress.update(bar, description=f"validated {outcome.task_id}: {outcome.status}", advance=1)
    outcomes.sort(key=lambda o: o.task_id)
    table = Table(title="validation")
    table.add_column("task", no_wrap=True)
    for name in ("family", "status", "F2P", "P2P", "flaky", "ready"):
        table.add_column(name, no_wrap=True)
    table.add_column("reason", overflow="fold")
    style = {"valid": "green", "rejected": "red", "skipped": "dim", "error": "yellow"}
    for o in outcomes:
        table.add_row(escape(o.task_id), o.family, f"[{style[o.status]}]{o.status}[/]", str(o.fail_to_pass),
                      str(o.pass_to_pass), str(len(o.flaky)), "-" if o.ready is None else "yes" if o.ready else "no",
                      escape(visible_controls(o.reason or (f"not ready: {o.not_ready[0]}" if o.not_ready else ""))))
    console.print(table)
    if args.json:
        Path(args.json).write_text(json.dumps([o.model_dump() for o in outcomes], indent=2) + "\n")
    if not args.no_record:
        from sweserve.cli.tasks import funnel_of, print_funnel

        print_funnel(funnel_of(tasks_dir, args.state_dir), console, details=False)
    return summarize(outcomes, console)


def only_ready_eligible(bundles, console: Console) -> list:
    """The bundles that validation could make ready; one line counting the others by reason."""
    from collections import Counter

    from sweserve.dataset.readiness import cannot_be_ready

    kept: list = []
    skipped: Counter[str] = Counter()
    for b in bundles:
        why = cannot_be_ready(b.task)
        if why:
            skipped.update({w.split(":", 1)[0] for w in why})
        else:
            kept.append(b)
    if len(kept) < len(bundles):
        console.print(f"--ready-eligible: {len(bundles) - len(kept)} of {len(bundles)} tasks skipped, they cannot be "
                      f"ready whatever validation finds (by reason: {dict(skipped.most_common())}); "
                      f"{len(kept)} to validate")
    return kept


def summarize(outcomes, console: Console) -> int:
    """The closing line; exit 1 when a task was rejected or could not be validated (an `error`: not recorded)."""
    from collections import Counter

    from sweserve.evaluation.validation import reason_category

    count = Counter(o.status for o in outcomes)
    bad = [o for o in outcomes if o.status == "rejected"]
    errors = [o for o in outcomes if o.status == "error"]
    console.print(f"{count['valid']} valid, {count['rejected']} rejected, {count['skipped']} skipped, "
                  f"{count['error']} errors"
                  + (f"; rejected by reason: {dict(Counter(map(reason_category, bad)).most_common())}" if bad else "")
                  + (f"; errors by kind: {dict(Counter(o.error_kind for o in errors).most_common())} "
                     "(task.json left as it was)" if errors else ""))
    bugs = [o for o in errors if o.error_kind == "internal"]
    if bugs:
        console.print(f"[red]{len(bugs)} validations hit an internal sweserve error[/]: "
                      + "; ".join(escape(visible_controls(o.reason or "")) for o in bugs[:3]), soft_wrap=True)
    return 1 if bad or errors else 0


def lint_after_validation(ctx, tasks_dir: Path, repo: str, outcome, reject: bool, console: Console) -> None:
    """Regenerate the interface section and quality record; with reject, a valid task failing lint is rejected."""
    from sweserve.dataset.lint import lint_task
    from sweserve.errors import RejectionCategory

    clone = ctx.clone_for(repo)
    if clone is None:
        return
    try:
        report = lint_task(tasks_dir / outcome.task_id, clone, write=True, reject=reject and outcome.status == "valid",
                           search=ctx.search)
    except SweserveError as exc:
        console.print(f"[dim]lint {outcome.task_id}: {exc}[/]")
        return
    if report.rejected:
        outcome.status, outcome.reason = "rejected", f"lint: {report.task_findings[0]}"
        outcome.category = RejectionCategory.LINT
    from sweserve.evaluation import guard

    try:
        # lint wrote the interface section after validation measured the odds: measured again for it
        task = guard.measure_if_stale(tasks_dir / outcome.task_id, clone, lambda name: ctx.profile(name).history,
                                      ctx.numbers)
    except SweserveError:
        return
    outcome.ready = task.ready if task.readiness is not None else None
    outcome.not_ready = [r.detail for r in task.readiness.reasons] if task.readiness else []
