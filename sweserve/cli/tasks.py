"""`sweserve tasks list|show`: the dataset."""

from __future__ import annotations

import json
from pathlib import Path

from rich.console import Console
from rich.markup import escape
from rich.table import Table


def register(sub, common) -> None:
    t = sub.add_parser("tasks", help="list or show tasks")
    tsub = t.add_subparsers(dest="tasks_cmd", required=True)
    tl = tsub.add_parser("list", parents=[common])
    tl.add_argument("--json", action="store_true")
    ts = tsub.add_parser("show", parents=[common])
    ts.add_argument("task_id")
    ts.add_argument("--json", action="store_true")
    t.set_defaults(func=run)


def run(args, console: Console) -> int:
    from sweserve.dataset.taskstore import load_bundle, select, task_dirs

    tasks_dir = Path(args.tasks)
    if args.tasks_cmd == "show":
        bundle = select(tasks_dir, [args.task_id])[0]
        if args.json:
            print(bundle.task.model_dump_json(indent=2))
            return 0
        console.print_json(bundle.task.model_dump_json(exclude={"validation"}))
        console.rule("instruction")
        console.print(bundle.instruction, markup=False, highlight=False)
        return 0
    table = Table(title=escape(str(tasks_dir)))
    for name in ("task", "family", "PR", "validated", "F2P", "P2P", "gpus"):
        table.add_column(name, no_wrap=True)
    rows = []
    for d in task_dirs(tasks_dir):
        task = load_bundle(d).task
        state = task.validation.status if task.validation else "no"
        rows.append(task.model_dump(mode="json", include={"task_id", "family", "pr_number"}) | {"validated": state})
        table.add_row(escape(task.task_id), task.family, str(task.pr_number), state, str(len(task.FAIL_TO_PASS)),
                      str(len(task.PASS_TO_PASS)), str(task.resources.gpus))
    if args.json:
        print(json.dumps(rows, indent=2))
    else:
        console.print(table)
    return 0
