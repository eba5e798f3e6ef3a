"""`sweserve report RESULTS...`: pass rates and per-task status from results files; --html writes a page."""

from __future__ import annotations

import json
from pathlib import Path

from rich.console import Console

from sweserve.errors import SweserveError


def register(sub, common) -> None:
    rep = sub.add_parser("report", parents=[common], help="pass rates and per-task status from results JSONL files")
    rep.add_argument("results", nargs="+", help="results JSONL files (several agents or runs are compared)")
    rep.add_argument("--json", action="store_true", help="print JSON instead of tables")
    rep.add_argument("--html", default=None, metavar="FILE",
                     help="also write a self-contained HTML page, with reviewer pages in FILE's folder/reviews/")
    rep.set_defaults(func=run)


def run(args, console: Console) -> int:
    from sweserve.evaluation.results import read_results
    from sweserve.reporting.summary import build_reports, render

    paths = [Path(p) for p in args.results]
    for path in paths:
        if not path.exists():
            raise SweserveError(f"{path}: no such results file")
    results = [r for path in paths for r in read_results(path)]
    reports = build_reports(results)
    if args.html:
        out = _write_html(reports, results, paths, args)
        console.print(f"wrote {out}", soft_wrap=True)
    if args.json:
        print(json.dumps([r.model_dump() for r in reports], indent=2))
    elif not args.html:
        if not reports:
            console.print("no results yet")
        render(reports, console)
    return 0


def _write_html(reports, results, paths: list[Path], args) -> Path:
    from sweserve.dataset.taskstore import load_bundle, task_dirs
    from sweserve.reporting.html import write_html_report

    tasks_dir = Path(args.tasks)
    wanted = {r.task_id for r in results}
    bundles = {}
    if tasks_dir.is_dir():
        for d in task_dirs(tasks_dir):
            if d.name in wanted:
                bundles[d.name] = load_bundle(d)
    from sweserve import __version__

    config = {
        "sweserve version": __version__,
        "results files": ", ".join(str(p) for p in paths),
        "tasks folder": f"{tasks_dir} ({len(bundles)} of {len(wanted)} tasks found; reviewer pages for those)",
        "records": str(len(results)),
        "first started": min((r.started_at for r in results), default=None).isoformat() if results else "—",
        "last finished": max((r.finished_at for r in results), default=None).isoformat() if results else "—",
    }
    return write_html_report(reports, results, bundles, Path(args.html), config)
