"""`sweserve report RESULTS...`: pass rates and per-task status from results files; --html writes a page.

The denominator is what was selected: the run manifests beside each results file (`runs/*/manifest.json`)
and, with `--tasks`, every task in that folder. Selected tasks with no result are shown as `missing`.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from rich.console import Console

from sweserve.errors import SweserveError


def register(sub, common) -> None:
    rep = sub.add_parser("report", help="pass rates and per-task status from results JSONL files")
    rep.add_argument("results", nargs="+", help="results JSONL files (several agents or runs are compared)")
    rep.add_argument("--tasks", default=None,
                     help="tasks folder: every task in it counts, a task with no result as 'missing'; "
                          "reviewer pages of --html come from it (default for those: ./tasks)")
    rep.add_argument("--regrade", action="store_true",
                     help="grade again, without Docker, from each trial's saved outcomes against the tasks in "
                          "--tasks (default ./tasks) as they are now")
    rep.add_argument("--json", action="store_true", help="print JSON instead of tables")
    rep.add_argument("--include-unready", action="store_true",
                     help="also count results of tasks that were not ready when run, and (with --tasks) tasks "
                          "that are not ready now")
    rep.add_argument("--html", default=None, metavar="FILE",
                     help="also write a self-contained HTML page, with reviewer pages in FILE's folder/reviews/")
    rep.add_argument("--difficulty", action="store_true",
                     help="each task's calibrated difficulty (Rasch), solve rate and median time to solve")
    rep.set_defaults(func=run)


def run(args, console: Console) -> int:
    from sweserve.reporting.summary import build_reports, render

    paths = [Path(p) for p in args.results]
    per_file, results, selected = counted(paths, console, include_unready=args.include_unready, tasks_dir=args.tasks,
                                          regrade=args.regrade, difficulty=getattr(args, "difficulty", False),
                                          quiet=args.json)
    paths = list(per_file)  # each file once
    # a run whose records are here and whose manifest is not beside the file as named (a copy, a hard link's other
    # name, a runs/ folder moved): its unfinished tasks are not in the denominator, and the report says so (R22f-3),
    # the fit of difficulty too (red team 23b, R23b-1); a manifest there counts as the run's only where the report
    # counts it for this file (a copy beside its original found the original's: R23b-2)
    unselected = runs_unselected(per_file)
    if getattr(args, "difficulty", False):
        from sweserve.assess.difficulty import calibrate, difficulty_json, render_difficulty
        from sweserve.reporting.review import visible_controls

        cal = calibrate(*fit_inputs(results, selected))
        by_agent = unselected_by_agent(unselected)
        gone_by_agent = unselected_by_agent(runs_file_gone(per_file))  # R23i-5's runs, named by the fit too (R23q-2)
        if args.json:
            print(json.dumps({**difficulty_json(cal), "runs_unselected": by_agent, "runs_file_gone": gone_by_agent},
                             indent=2))
        else:
            render_difficulty(cal, console)
            say_unselected(by_agent, console)
            for agent, runs in gone_by_agent.items():
                console.print(visible_controls(f"{agent}: runs {', '.join(runs[:5])}{', ...' if len(runs) > 5 else ''}")
                              + " selected tasks for a results file that is gone and have no record here (a deleted "
                              "file's runs, or this file's, renamed since): their tasks are not in the fit",
                              markup=False, soft_wrap=True)
        return 0
    reports = build_reports(results, selected)
    gone = runs_file_gone(per_file)
    for rep in reports:
        rep.runs_unselected = sorted(run for agent, run in unselected if agent == rep.agent)
        rep.runs_file_gone = sorted(run for agent, run in gone if agent == rep.agent)
    if args.html:
        out = _write_html(reports, results, paths, args)
        console.print(f"wrote {out}", soft_wrap=True, markup=False)
    if args.json:
        print(json.dumps([r.model_dump() for r in reports], indent=2))
    elif not args.html:
        if not reports:
            console.print("no results yet")
        render(reports, console)
    return 0


def counted(paths: list[Path], console: Console, include_unready: bool = False,
            tasks_dir: str | None = None, regrade: bool = False, difficulty: bool = False, quiet: bool = True):
    """What a report counts of the results files at paths: each file's records, the records counted, and each
    agent's selection (its runs' manifests, and with `tasks_dir` that folder). `assess` fits difficulty from the same
    (red team 22f, R22f-4)."""
    from sweserve.evaluation.results import one_file_per_attempt, read_results
    from sweserve.evaluation.trial_folder import results_home, runs_root
    from sweserve.reporting.summary import Selection, read_manifests

    for path in paths:
        if not path.exists():
            raise SweserveError(f"{path}: no such results file")
    # a file once, by the first name given of it: named twice (or through a symbolic link), its records were read
    # twice, and the board's count of records and list of files said so (red team 22f, R22f-5); a hard link's
    # names stay apart, as each has its own runs/ beside it
    # ... and a hard link's names in one folder are one file with one runs/: kept apart, the board's count of records
    # counted each twice (red team 23b, R23b-6)
    files: dict[object, Path] = {}
    for path in paths:
        st = path.stat()
        files.setdefault((st.st_dev, st.st_ino, os.path.realpath(runs_root(path))), path)
    paths = list(files.values())
    per_file = {path: _with_trial_folders(path, read_results(path)) for path in paths}
    one_file_per_attempt(per_file)
    # the same run's same record in two files (a copy, a hard link in another folder: each name kept for its own
    # runs/) is one record, as `one_file_per_attempt` takes it for one attempt: read from each, the board's count of
    # records counted it twice (red team 23i, R23i-3)
    # ... the earlier copy is the one dropped: each (task, agent, attempt)'s last record stays the last, and so the
    # one counted (a later file's record dropped for an earlier file's copy of it let the record between them count)
    results: list = []
    later: set[str] = set()
    for path in reversed(paths):
        here = [(_fingerprint(r), r) for r in per_file[path]]
        results[:0] = [r for f, r in here if f not in later]
        later |= {f for f, _ in here}
    if regrade:
        results = _regraded(paths, Path(tasks_dir or "tasks"), console, quiet=quiet)
    # each run's own records of tasks it ran while not ready: its selection of them was unready where its manifest
    # lists no judgement (one from before manifests listed them)
    ran_unready = {(r.run_id, r.agent, r.task_id) for r in results if r.task_ready is False}
    if not include_unready:
        left_out = {r.task_id for r in results if r.task_ready is False}
        results = [r for r in results if r.task_ready is not False]
        if left_out and not quiet:
            console.print(f"left out the results of {len(left_out)} tasks run while not ready "
                          "(--include-unready counts them)", markup=False)
    selected: dict[str, Selection] = {}
    for path in paths:  # each file's own runs: other results files in its folder are not reported
        found = read_manifests(runs_root(path), results_home(path).name, {r.agent for r in per_file[path]},
                               {r.run_id for r in per_file[path]}, ran_unready)
        for agent, sel in found.items():
            selected[agent] = selected[agent].merge(sel) if agent in selected else sel
    if tasks_dir:
        from sweserve.dataset.taskstore import load_all

        bundles = load_all(Path(tasks_dir))
        not_ready = {b.task.task_id for b in bundles if not b.task.ready}
        for agent, sel in selected.items():  # the folder judges what no run's manifest judged (R15g-5)
            if judge := [t for t in sel.unjudged if t in not_ready]:
                selected[agent] = sel.model_copy(update={"unready": sorted({*sel.unready, *judge}),
                                                         "unjudged": [t for t in sel.unjudged if t not in judge]})
        # every ready task of the folder is selected ready: one run only while unready, or never, is `missing`
        # (red team 21b, R21b-2: a record run while unready took a ready task of the folder off the board)
        # ... for the pass rates: a fit of difficulty takes the attempts runs selected, and a task of the folder no
        # run gave an agent (a pack's task a candidate never saw) is no one's unsolved attempt (R22b-2)
        tasks = Selection(tasks={b.task.task_id: b.task.family for b in bundles
                                 if include_unready or b.task.ready})
        given = set() if difficulty else {r.agent for r in results} | set(selected)
        for agent in given:
            selected[agent] = selected[agent].merge(tasks) if agent in selected else tasks
    if not include_unready:
        # one rule for what leaves the denominator as unready: a task every selection of it judged unready (each
        # run's manifest, or its own records where the manifest is older; the tasks folder) and with no result
        # counted. A task any run selected ready is counted, `missing` until a ready run has its result: left out,
        # it left the denominator (R20d-3; red team 21b, R21b-1: `--tasks` took out a task a run selected ready
        # that is not ready now; the folder's judgement and the records' were three rules that disagreed)
        ran = {(r.agent, r.task_id) for r in results}
        for agent, sel in selected.items():
            if gone := {t for t in sel.unready if (agent, t) not in ran}:
                selected[agent] = sel.model_copy(update={
                    "tasks": {t: f for t, f in sel.tasks.items() if t not in gone},
                    "per_task": {t: n for t, n in sel.per_task.items() if t not in gone}})
    return per_file, results, selected


def _fingerprint(r) -> str:
    """A record as a run wrote it (its trial folder is found beside each file that holds it)."""
    return r.model_dump_json(exclude={"trial_dir"})


def fit_inputs(results, selected) -> tuple[list, list[tuple[str, str, str]]]:
    """What a fit of difficulty takes of what a report counts: the latest record of each (task, agent, attempt),
    once whatever names its file (every record was an observation, a rerun attempt two, a file named twice each:
    red team 22b, R22b-1), and each selected attempt with no result an unsolved one, as the report's `missing`
    (R22b-2)."""
    from sweserve.evaluation.results import latest
    from sweserve.reporting.summary import build_reports

    missing = [(rep.agent, row.task_id, row.family) for rep in build_reports(results, selected)
               for row in rep.tasks for _ in range(row.missing_attempts)]
    return list(latest(results).values()), missing


def unselected_by_agent(unselected: set[tuple[str, str]]) -> dict[str, list[str]]:
    return {agent: sorted(run for a, run in unselected if a == agent) for agent, _ in sorted(unselected)}


def say_unselected(by_agent: dict[str, list[str]], console: Console) -> None:
    """A line per agent whose runs' records a fit of difficulty takes with no selection (R23b-1, R23b-3)."""
    from sweserve.reporting.review import visible_controls

    for agent, missed in by_agent.items():
        console.print(visible_controls(f"{agent}: runs {', '.join(missed[:5])}{', ...' if len(missed) > 5 else ''}")
                      + " have records here and no selection (no manifest beside this results file: a copy, another "
                      "name of it, or its runs/ moved): tasks they were given and never finished are not in the fit",
                      markup=False, soft_wrap=True)


def runs_unselected(per_file) -> set[tuple[str, str]]:
    """(agent, run id) of each run with records in a results file of per_file (`counted`) and no selection."""
    return {(agent, run) for path, records in per_file.items() for agent, run in _runs_unselected(path, records)}


def _runs_unselected(path: Path, records) -> set[tuple[str, str]]:
    """(agent, run id) of each run with records in the results file at path and no selection its report counts."""
    from sweserve.evaluation.results import MANIFEST_FILE, manifest_or_none
    from sweserve.evaluation.trial_folder import plain_name, results_home, runs_root
    from sweserve.reporting.summary import speaks_for

    root, name = runs_root(path), results_home(path).name
    runs = {(r.agent, r.run_id) for r in records}  # a look per run, not per record
    agents, run_ids = {agent for agent, _ in runs}, {run for _, run in runs}
    out = set()
    for agent, run in runs:
        # a run id that is no plain folder name (`..`s) found another folder's manifest (R23q-4)
        m = manifest_or_none(root / run / MANIFEST_FILE) if plain_name(run) else None
        if m is None or m.agent != agent or not speaks_for(m, root, name, agents, run_ids):
            out.add((agent, run))
    return out


def runs_file_gone(per_file) -> set[tuple[str, str]]:
    """(agent, run id) of each run whose manifest beside a results file of per_file names a results file that is
    gone, and that has no record in it: `speaks_for` cannot tell a deleted scratch file's run (not this file's:
    R16f-2) from this file's own, renamed after the run was killed before any record, so it counts neither, and the
    report names them (a killed run's unfinished tasks left the denominator with no word: red team 23i, R23i-5)."""
    from sweserve.evaluation.results import manifest_or_none, manifest_paths
    from sweserve.evaluation.trial_folder import results_home, runs_root
    from sweserve.reporting.summary import file_there

    out = set()
    for path, records in per_file.items():
        root, name, run_ids = runs_root(path), results_home(path).name, {r.run_id for r in records}
        for found in manifest_paths(root):
            m = manifest_or_none(found)
            if m is not None and m.results not in (None, name) and m.run_id not in run_ids \
                    and not file_there(root.parent / m.results):
                out.add((m.agent, m.run_id))
    return out


def _with_trial_folders(path: Path, results):
    """Each result's trial folder found beside its results file (a run records it relative to where it ran),
    so reviewer pages find the agent's steps whatever the current folder."""
    from sweserve.evaluation.trial_folder import folder_of

    for r in results:
        if (folder := folder_of(path, r)) is not None:
            r.trial_dir = str(folder)
    return results


def _regraded(paths: list[Path], tasks_dir: Path, console: Console, quiet: bool):
    from sweserve.dataset.taskstore import load_all
    from sweserve.evaluation.regrade import regrade
    from sweserve.evaluation.results import read_results

    bundles = {b.task.task_id: b for b in load_all(tasks_dir)}
    results, changed = [], 0
    for path in paths:
        again, n = regrade(read_results(path), path, bundles)
        results += again
        changed += n
    if not quiet:
        console.print(f"re-graded from saved outcomes against {tasks_dir}: {changed} results changed", markup=False)
    return results


def _write_html(reports, results, paths: list[Path], args) -> Path:
    from sweserve.dataset.taskstore import load_bundle, task_dirs
    from sweserve.reporting.html import write_html_report

    tasks_dir = Path(args.tasks or "tasks")
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
        "first started": min(r.started_at for r in results).isoformat() if results else "—",
        "last finished": max(r.finished_at for r in results).isoformat() if results else "—",
    }
    return write_html_report(reports, results, bundles, Path(args.html), config)
