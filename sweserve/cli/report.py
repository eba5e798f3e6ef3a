"""`sweserve report`: pass rates and per-task status from a results file.

The denominator is what was selected: the run manifests beside the results file (`runs/*/manifest.json`)
and, with `--tasks`, every task in that folder. Selected tasks with no result are shown as `missing`.
"""

from __future__ import annotations

import json
from pathlib import Path

from rich.console import Console

from sweserve.errors import SweserveError


def register(sub, common) -> None:
    rep = sub.add_parser("report", help="pass rates and per-task status from a results JSONL")
    rep.add_argument("results", help="results JSONL file")
    rep.add_argument("--tasks", default=None,
                     help="tasks folder: every task in it counts, a task with no result as 'missing'")
    rep.add_argument("--json", action="store_true", help="print JSON instead of tables")
    rep.set_defaults(func=run)


def run(args, console: Console) -> int:
    from sweserve.evaluation.results import read_results
    from sweserve.evaluation.trial_folder import runs_root
    from sweserve.reporting.summary import (
        Selection,
        build_reports,
        read_manifests,
        render,
    )

    path = Path(args.results)
    if not path.exists():
        raise SweserveError(f"{path}: no such results file")
    results = read_results(path)
    selected = read_manifests(runs_root(path))
    if args.tasks:
        from sweserve.dataset.taskstore import load_all

        tasks = Selection(tasks={b.task.task_id: b.task.family for b in load_all(Path(args.tasks))})
        for agent in {r.agent for r in results} | set(selected):
            selected[agent] = selected[agent].merge(tasks) if agent in selected else tasks
    reports = build_reports(results, selected)
    if args.json:
        print(json.dumps([r.model_dump() for r in reports], indent=2))
    else:
        if not reports:
            console.print("no results yet")
        render(reports, console)
    return 0
