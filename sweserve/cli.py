"""The `sweserve` command: mine, validate, run, report, tasks, demo, gc, images."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from . import __version__
from .errors import SweserveError


def _progress(console: Console) -> Progress:
    return Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                    console=console, transient=False)


def _context(args, console: Console):
    from .context import Context

    return Context.create(
        state_dir=Path(args.state_dir), ca_bundle=args.ca_bundle,
        repo_path=Path(args.repo_path) if getattr(args, "repo_path", None) else None,
        log=lambda msg: console.print(f"[dim]{msg}[/]"),
    )


# --- mine -----------------------------------------------------------------------------------------

def cmd_mine(args, console: Console) -> int:
    from .context import remember_clone
    from .mine import mine, open_repo
    from .profiles import load_profile

    profile = load_profile(args.profile)
    repo_path = Path(args.repo)
    repo = open_repo(repo_path)
    tasks_dir = Path(args.tasks)
    with console.status("scanning history …") as status:
        report = mine(repo, profile, tasks_dir, rev=args.rev, since=args.since, limit=args.limit,
                      on_progress=lambda r: status.update(f"scanned {r.scanned} commits, {r.candidates} PRs"))
    remember_clone(Path(args.state_dir), profile.repo, repo_path)
    if args.json:
        print(report.model_dump_json(indent=2))
        return 0
    console.print(f"[bold]{profile.repo}[/]: scanned {report.scanned} commits, {report.candidates} PR candidates, "
                  f"wrote {len(report.written)} tasks, {len(report.existing)} already present, "
                  f"rejected {sum(len(v) for v in report.rejected.values())} in {report.duration_s:.2f}s")
    if report.rejected:
        table = Table("reason", "count", "examples")
        for reason, prs in sorted(report.rejected.items()):
            table.add_row(reason, str(len(prs)), "; ".join(prs[:3]))
        console.print(table)
    return 0


# --- validate -------------------------------------------------------------------------------------

def cmd_validate(args, console: Console) -> int:
    from collections import Counter

    from .taskstore import select
    from .validate import reason_category, validate_task

    tasks_dir = Path(args.tasks)
    bundles = select(tasks_dir, args.task_ids)
    if args.runs < 1:
        raise SweserveError("--runs must be at least 1")
    ctx = _context(args, console)
    outcomes = []
    try:
        with _progress(console) as progress:
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
                      str(o.pass_to_pass), str(len(o.flaky)), o.reason or "")
    console.print(table)
    if args.json:
        Path(args.json).write_text(json.dumps([o.model_dump() for o in outcomes], indent=2) + "\n")
    bad = [o for o in outcomes if o.status == "rejected"]
    valid = sum(o.status == "valid" for o in outcomes)
    console.print(f"{valid} valid, {len(bad)} rejected, {len(outcomes) - valid - len(bad)} skipped"
                  + (f"; rejected by reason: {dict(Counter(reason_category(o) for o in bad).most_common())}" if bad else ""))
    return 1 if bad else 0


# --- run ------------------------------------------------------------------------------------------

def _default_output(agent_name: str) -> Path:
    return Path("results") / f"{agent_name}.jsonl"


def cmd_run(args, console: Console) -> int:
    from .agents import make_agent
    from .evaluate import run_evaluation
    from .report import build_reports, render
    from .results import read_results
    from .taskstore import select

    bundles = select(Path(args.tasks), args.task_ids)
    agent = make_agent(args.agent, args.agent_name)
    output = Path(args.output) if args.output else _default_output(agent.name)
    if args.attempts < 1 or args.workers < 1:
        raise SweserveError("--attempts and --workers must be at least 1")
    ctx = _context(args, console)
    console.print(f"run {ctx.run_id}: agent [bold]{agent.name}[/] on {len(bundles)} tasks → {output}")
    with _progress(console) as progress:
        bar = progress.add_task(f"{agent.name}", total=None)

        def on_result(result, done, total):
            progress.update(bar, completed=done, total=total)
            progress.console.print(f"  {result.task_id} #{result.attempt}: {result.status}"
                                   + (f" ({result.reason})" if result.reason else ""))

        run_evaluation(ctx, bundles, agent, output, attempts=args.attempts, workers=args.workers,
                       retry_errors=args.retry_errors, on_result=on_result)
    ids = {b.task.task_id for b in bundles}
    render([r for r in build_reports([x for x in read_results(output) if x.task_id in ids])
            if r.agent == agent.name], console)
    return 0


# --- report ---------------------------------------------------------------------------------------

def cmd_report(args, console: Console) -> int:
    from .report import build_reports, render
    from .results import read_results

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


# --- tasks ----------------------------------------------------------------------------------------

def cmd_tasks(args, console: Console) -> int:
    from .taskstore import load_bundle, select, task_dirs

    tasks_dir = Path(args.tasks)
    if args.tasks_cmd == "show":
        bundle = select(tasks_dir, [args.task_id])[0]
        if args.json:
            print(bundle.task.model_dump_json(indent=2))
            return 0
        console.print_json(bundle.task.model_dump_json(exclude={"validation"}))
        console.rule("instruction")
        console.print(bundle.instruction)
        return 0
    table = Table(title=str(tasks_dir))
    for name in ("task", "family", "PR", "validated", "F2P", "P2P", "gpus"):
        table.add_column(name, no_wrap=True)
    rows = []
    for d in task_dirs(tasks_dir):
        task = load_bundle(d).task
        state = task.validation.status if task.validation else "no"
        rows.append(task.model_dump(mode="json", include={"task_id", "family", "pr_number"}) | {"validated": state})
        table.add_row(task.task_id, task.family, str(task.pr_number), state, str(len(task.FAIL_TO_PASS)),
                      str(len(task.PASS_TO_PASS)), str(task.resources.gpus))
    if args.json:
        print(json.dumps(rows, indent=2))
    else:
        console.print(table)
    return 0


# --- session, review -----------------------------------------------------------------------------

def cmd_session(args, console: Console) -> int:
    from .review import review_markdown
    from .session import run_session
    from .taskstore import select

    bundle = select(Path(args.tasks), [args.task_id])[0]
    if not args.candidate.replace("-", "").replace("_", "").isalnum():
        raise SweserveError("--candidate may hold letters, digits, '-' and '_' only")
    limit = args.time_limit or bundle.task.resources.timeout_s
    if limit < 1:
        raise SweserveError("--time-limit must be at least 1 second")
    output = Path(args.output) if args.output else _default_output(f"human-{args.candidate}")
    ctx = _context(args, console)
    result = run_session(ctx, bundle, args.candidate, limit, output, console)
    review = output.with_name(f"review-{args.candidate}-{bundle.task.task_id}.md")
    review.write_text(review_markdown(bundle, result))
    console.print(f"{bundle.task.task_id}: [bold]{result.status}[/] in {result.agent_run.wall_s:.0f}s "
                  f"→ {output}; reviewer report {review}")
    return 0


def cmd_review(args, console: Console) -> int:
    from .results import latest, read_results
    from .review import review_html, review_markdown
    from .taskstore import select

    bundle = select(Path(args.tasks), [args.task_id])[0]
    path = Path(args.results)
    if not path.exists():
        raise SweserveError(f"{path}: no such results file")
    found = [r for r in latest(read_results(path)).values()
             if r.task_id == args.task_id and (args.agent is None or r.agent == args.agent)]
    if not found:
        raise SweserveError(f"no result for {args.task_id}" + (f" by {args.agent}" if args.agent else "") + f" in {path}")
    text = (review_html if args.html else review_markdown)(bundle, found[-1])
    if args.out:
        Path(args.out).write_text(text)
    else:
        print(text, end="")
    return 0


# --- demo, gc, images -----------------------------------------------------------------------------

def cmd_demo(args, console: Console) -> int:
    from .demo.run import run_demo

    return run_demo(Path(args.state_dir), ca_bundle=args.ca_bundle, console=console, runs=args.runs)


def cmd_gc(args, console: Console) -> int:
    from .context import docker_client
    from .sandbox import gc

    removed = gc(docker_client(), everything=args.all)
    console.print(f"removed {len(removed)} containers" + (f": {', '.join(removed)}" if removed else ""))
    return 0


def cmd_images(args, console: Console) -> int:
    from .context import docker_client
    from .images import ImageBuilder, image_exists, read_ca_bundle
    from .profiles import load_profile

    client = docker_client()
    profile = load_profile(args.profile)
    builder = ImageBuilder(client, read_ca_bundle(args.ca_bundle), log=lambda m: console.print(f"[dim]{m}[/]"))
    if args.images_cmd == "base":
        existed = image_exists(client, profile.base_image)
        tag = builder.base(profile)
    else:
        existed = False
        tag = builder.env(profile)
    console.print(f"{tag}" + (" (already built)" if existed else ""))
    return 0


# --- parser ---------------------------------------------------------------------------------------

def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="sweserve", description=__doc__)
    p.add_argument("--version", action="version", version=f"sweserve {__version__}")
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--tasks", default="tasks", help="tasks folder (default: tasks)")
    common.add_argument("--state-dir", default=".sweserve", help="local state: clone registry, demo (default: .sweserve)")
    common.add_argument("--ca-bundle", default=None,
                        help="extra CA certificates for pip inside images (default: /etc/ssl/certs/ca-certificates.crt)")
    sub = p.add_subparsers(dest="cmd", required=True)

    m = sub.add_parser("mine", parents=[common], help="turn merged PRs of a clone into candidate tasks")
    m.add_argument("--repo", required=True, help="path of a local git clone")
    m.add_argument("--profile", default="sglang", help="repo profile (default: sglang)")
    m.add_argument("--rev", default="HEAD", help="history to walk (default: HEAD)")
    m.add_argument("--since", default=None, help="only commits after this date (git --since)")
    m.add_argument("--limit", type=int, default=None, help="stop after N PR candidates")
    m.add_argument("--json", action="store_true", help="print the mining report as JSON")
    m.set_defaults(func=cmd_mine)

    v = sub.add_parser("validate", parents=[common], help="derive FAIL_TO_PASS/PASS_TO_PASS; exit 1 if an oracle fails")
    v.add_argument("task_ids", nargs="*", help="tasks to validate (default: all)")
    v.add_argument("--runs", type=int, default=3, help="runs per state; a test must hold in all (default: 3)")
    v.add_argument("--repo-path", default=None, help="clone to build task images from")
    v.add_argument("--json", default=None, metavar="FILE", help="also write the outcomes as JSON")
    v.add_argument("--no-record", action="store_true", help="check only; leave task.json files unchanged")
    v.set_defaults(func=cmd_validate)

    r = sub.add_parser("run", parents=[common], help="evaluate an agent; results append to a JSONL file")
    r.add_argument("task_ids", nargs="*", help="tasks to run (default: all)")
    r.add_argument("--agent", required=True, help="'oracle', 'null', or a shell command run in /testbed")
    r.add_argument("--agent-name", default=None, help="name for a command agent in results")
    r.add_argument("--output", default=None, help="results JSONL (default: results/<agent>.jsonl)")
    r.add_argument("--attempts", type=int, default=1, help="attempts per task, for pass@k (default: 1)")
    r.add_argument("--workers", type=int, default=1, help="tasks run at once (default: 1)")
    r.add_argument("--retry-errors", action="store_true", help="redo attempts whose last result is 'error'")
    r.add_argument("--repo-path", default=None, help="clone to build task images from")
    r.set_defaults(func=cmd_run)

    rep = sub.add_parser("report", help="pass rates and per-task status from a results JSONL")
    rep.add_argument("results", help="results JSONL file")
    rep.add_argument("--json", action="store_true", help="print JSON instead of tables")
    rep.set_defaults(func=cmd_report)

    t = sub.add_parser("tasks", help="list or show tasks")
    tsub = t.add_subparsers(dest="tasks_cmd", required=True)
    tl = tsub.add_parser("list", parents=[common])
    tl.add_argument("--json", action="store_true")
    ts = tsub.add_parser("show", parents=[common])
    ts.add_argument("task_id")
    ts.add_argument("--json", action="store_true")
    t.set_defaults(func=cmd_tasks)

    se = sub.add_parser("session", parents=[common], help="a human engineer works a task in its sandbox, then it is graded")
    se.add_argument("task_id")
    se.add_argument("--candidate", required=True, help="the engineer's name, recorded in results")
    se.add_argument("--time-limit", type=int, default=None, help="seconds (default: the task's timeout_s)")
    se.add_argument("--output", default=None, help="results JSONL (default: results/human-<candidate>.jsonl)")
    se.add_argument("--repo-path", default=None, help="clone to build task images from")
    se.set_defaults(func=cmd_session)

    rv = sub.add_parser("review", parents=[common], help="reviewer report: instruction, diffs, test results, transcript")
    rv.add_argument("results", help="results JSONL")
    rv.add_argument("task_id")
    rv.add_argument("--agent", default=None, help="whose result (default: the last one for the task)")
    rv.add_argument("--html", action="store_true", help="HTML instead of Markdown")
    rv.add_argument("--out", "-o", default=None, help="write to this file instead of stdout")
    rv.set_defaults(func=cmd_review)

    d = sub.add_parser("demo", parents=[common], help="build the fixture repo, mine, validate, run oracle and null")
    d.add_argument("--runs", type=int, default=3, help="validation runs per state (default: 3)")
    d.set_defaults(func=cmd_demo)

    g = sub.add_parser("gc", help="remove containers left by dead sweserve processes")
    g.add_argument("--all", action="store_true", help="remove every sweserve container, live runs' too")
    g.set_defaults(func=cmd_gc)

    im = sub.add_parser("images", parents=[common], help="build image layers ahead of time")
    im.add_argument("images_cmd", choices=["base", "env"])
    im.add_argument("--profile", default="sglang")
    im.set_defaults(func=cmd_images)
    return p


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    console = Console(stderr=False)
    err = Console(stderr=True)
    try:
        return args.func(args, console)
    except SweserveError as exc:
        err.print(f"[red]error:[/] {escape(str(exc))}", highlight=False, soft_wrap=True)
        return 2
    except KeyboardInterrupt:
        err.print("interrupted; containers of this run were removed, finished results are kept")
        return 130


if __name__ == "__main__":
    sys.exit(main())
