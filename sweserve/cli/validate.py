"""`sweserve validate`: derive FAIL_TO_PASS/PASS_TO_PASS; exit 1 when an oracle fails."""

from __future__ import annotations

import json
from pathlib import Path

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from sweserve.cli.common import make_context, progress_bar
from sweserve.errors import SweserveError


def register(sub, common) -> None:
    v = sub.add_parser("validate", parents=[common], help="derive FAIL_TO_PASS/PASS_TO_PASS; exit 1 if an oracle fails")
    v.add_argument("task_ids", nargs="*", help="tasks to validate (default: all)")
    v.add_argument("--runs", type=int, default=3, help="runs per state; a test must hold in all (default: 3)")
    v.add_argument("--repo-path", default=None, help="clone to build task images from")
    v.add_argument("--json", default=None, metavar="FILE", help="also write the outcomes as JSON")
    v.add_argument("--no-record", action="store_true", help="check only; leave task.json files unchanged")
    v.set_defaults(func=run)


def run(args, console: Console) -> int:
    from collections import Counter

    from sweserve.dataset.taskstore import select
    from sweserve.evaluation.validation import reason_category, validate_task

    tasks_dir = Path(args.tasks)
    bundles = select(tasks_dir, args.task_ids)
    if args.runs < 1:
        raise SweserveError("--runs must be at least 1")
    ctx = make_context(args, console)
    outcomes = []
    try:
        with progress_bar(console) as progress:
            bar = progress.add_task("validating", total=len(bundles))
            for bundle in bundles:
                progress.update(bar, description=f"validating {bundle.task.task_id}")
                outcomes.append(validate_task(ctx, tasks_dir / bundle.task.task_id, bundle, runs=args.runs,
                                              record=not args.no_record))
                progress.advance(bar)
    finally:
        ctx.close()
    table = Table(title="validation")
    table.add_column("task", no_wrap=True)
    for name in ("family", "status", "F2P", "P2P", "flaky"):
        table.add_column(name, no_wrap=True)
    table.add_column("reason", overflow="fold")
    style = {"valid": "green", "rejected": "red", "skipped": "dim"}
    for o in outcomes:
        table.add_row(o.task_id, o.family, f"[{style[o.status]}]{o.status}[/]", str(o.fail_to_pass),
                      str(o.pass_to_pass), str(len(o.flaky)), escape(o.reason or ""))
    console.print(table)
    if args.json:
        Path(args.json).write_text(json.dumps([o.model_dump() for o in outcomes], indent=2) + "\n")
    bad = [o for o in outcomes if o.status == "rejected"]
    valid = sum(o.status == "valid" for o in outcomes)
    console.print(f"{valid} valid, {len(bad)} rejected, {len(outcomes) - valid - len(bad)} skipped"
                  + (f"; rejected by reason: {dict(Counter(reason_category(o) for o in bad).most_common())}" if bad else ""))
    return 1 if bad else 0
