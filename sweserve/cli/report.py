"""`sweserve report`: pass rates and per-task status from a results file."""

from __future__ import annotations

import json
from pathlib import Path

from rich.console import Console

from sweserve.errors import SweserveError


def register(sub, common) -> None:
    rep = sub.add_parser("report", help="pass rates and per-task status from a results JSONL")
    rep.add_argument("results", help="results JSONL file")
    rep.add_argument("--json", action="store_true", help="print JSON instead of tables")
    rep.set_defaults(func=run)


def run(args, console: Console) -> int:
    from sweserve.evaluation.results import read_results
    from sweserve.reporting.summary import build_reports, render

    path = Path(args.results)
    if not path.exists():
        raise SweserveError(f"{path}: no such results file")
    reports = build_reports(read_results(path))
    if args.json:
        print(json.dumps([r.model_dump() for r in reports], indent=2))
    else:
        if not reports:
            console.print("no results yet")
        render(reports, console)
    return 0
