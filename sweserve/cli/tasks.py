"""`sweserve tasks list|show|lint`: the dataset, and whether each task can be solved fairly."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

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
    tl = tsub.add_parser("lint", parents=[common], help="interface section, leaks, unfair tests, statement; "
                         "exit 1 if a task fails")
    tl.add_argument("task_ids", nargs="*", help="tasks to lint (default: all)")
    tl.add_argument("--repo-path", default=None, help="the clone the tasks were mined from (default: the one "
                    "`mine` recorded)")
    tl.add_argument("--write", action="store_true", help="write the 'New interfaces' section into instruction.md "
                    "and the quality record and family into task.json")
    tl.add_argument("--json", action="store_true", help="print the reports as JSON")
    tf = tsub.add_parser("funnel", parents=[common], help="candidates -> tasks -> valid -> ready, every drop "
                         "counted by reason")
    tf.add_argument("--json", action="store_true", help="print the funnel as JSON")
    tf.add_argument("--write", action="store_true", help="record each valid task's readiness, as assessed now, "
                    "in its task.json")
    tg = tsub.add_parser("guard", parents=[common], help="forge odds of validated tasks: how likely code in a "
                         "module the tests import passes every FAIL_TO_PASS test by guessing among its twins")
    tg.add_argument("task_ids", nargs="*", help="tasks to measure (default: all validated ones)")
    tg.add_argument("--repo-path", default=None, help="the clone the tasks were mined from (default: the one "
                    "`mine` recorded)")
    tg.add_argument("--write", action="store_true", help="record the odds, the profile's max_forge_odds and the "
                    "readiness they give in task.json (no container: the recorded twins and the clone)")
    tg.add_argument("--json", action="store_true", help="print the measurements as JSON")
    tr = tsub.add_parser("review", parents=[common], help="blind review, SWE-bench Verified style: write "
                         "packets for reviewers, record their verdicts")
    trs = tr.add_subparsers(dest="review_cmd", required=True)
    rp = trs.add_parser("packet", parents=[common], help="one folder per task: the statement first, the tests "
                        "and oracle apart under evidence/, and RUBRIC.md")
    rp.add_argument("task_ids", nargs="*", help="tasks to review (default: the ready ones)")
    rp.add_argument("--valid", action="store_true", help="every valid task, ready or not")
    rp.add_argument("--out", required=True, help="folder to write the packet into")
    rr = trs.add_parser("record", parents=[common], help="record reviewers' verdicts (JSON lines, see RUBRIC.md)")
    rr.add_argument("results", help="a results file: one verdict per line")
    rr.add_argument("--write", action="store_true", help="save the reviews and the readiness they give")
    t.set_defaults(func=run)


def funnel_of(tasks_dir: Path, state_dir: str, write: bool = False):
    """The funnel of a tasks folder, with each task's profile found as mine and validate find it."""
    from sweserve.dataset.funnel import compute

    return compute(tasks_dir, write=write)


def print_funnel(funnel, console: Console, details: bool = True) -> None:
    table = Table(title="funnel")
    for name in ("stage", "count", "dropped", "by reason"):
        table.add_column(name, no_wrap=name != "by reason", overflow="fold")
    for stage in funnel.stages:
        table.add_row(stage.stage, str(stage.count), str(sum(stage.dropped.values())) if stage.dropped else "",
                      escape(", ".join(f"{k} {v}" for k, v in stage.dropped.items())))
    console.print(table)
    if details:
        for task_id, why in sorted(funnel.not_ready.items()):
            console.print(f"not ready {task_id}: " + "; ".join(why), markup=False, highlight=False, soft_wrap=True)
    for note in funnel.notes:
        console.print(f"note: {note}", markup=False, highlight=False, soft_wrap=True)


def funnel(args, console: Console) -> int:
    result = funnel_of(Path(args.tasks), args.state_dir, write=args.write)
    if args.json:
        print(result.model_dump_json(indent=2))
    else:
        print_funnel(result, console)
    return 0


def clone_of(args, repo: str) -> Path:
    from sweserve.dataset.clones import known_clone
    from sweserve.errors import SweserveError

    if args.repo_path:
        path = Path(args.repo_path)
        if not path.exists():
            raise SweserveError(f"--repo-path {path}: no such folder")
        return path
    known = known_clone(Path(args.state_dir), repo)
    if known is None:
        raise SweserveError(f"no clone of {repo} recorded in {args.state_dir}: pass --repo-path")
    return known


def lint(args, console: Console) -> int:
    from sweserve.config_search import ConfigSearch
    from sweserve.dataset.lint import lint_task
    from sweserve.dataset.taskstore import select

    tasks_dir = Path(args.tasks)
    bundles = select(tasks_dir, args.task_ids)
    search = ConfigSearch.for_project(args.state_dir)  # a task's profile by name, as mine and validate find it
    reports = [lint_task(tasks_dir / b.task.task_id, clone_of(args, b.task.repo), write=args.write, search=search)
               for b in bundles]
    if args.write:  # a section lint wrote may write numbers a forger reads: the odds are measured for it
        from sweserve.dataset.profiles import load_profile
        from sweserve.evaluation.guard import NumbersCache, measure_if_stale

        cache = NumbersCache()  # tasks of one repository share most files: each is read once
        for b in bundles:
            measure_if_stale(tasks_dir / b.task.task_id, clone_of(args, b.task.repo),
                             lambda name: load_profile(name, search).history, cache)
    if args.json:
        print(json.dumps([r.model_dump(mode="json", exclude={"instruction"}) for r in reports], indent=2))
    else:
        table = Table(title=f"lint {tasks_dir}")
        for name in ("task", "family", "scores", "statement", "names", "leaks", "unfair", "result"):
            table.add_column(name, no_wrap=name in ("task", "result"))
        for r in reports:
            q = r.quality
            scores = " ".join(f"{f.split('-')[0][:5]} {v:.2f}" for f, v in list(r.family_scores.items())[:2])
            family = r.family + ("" if r.family_confident else " ?")  # ?: not confident, see the notes
            table.add_row(r.task_id, family, scores, f"{q.statement_chars} {q.statement_source}",
                          str(len(q.interface)), str(len(q.leaks)), str(len(q.unfair)),
                          "[green]ok[/]" if r.passed else "[red]FAIL[/]")
        console.print(table)
        for r in reports:
            for finding in r.quality.findings:
                console.print(f"{r.task_id}: {finding}", markup=False, highlight=False, soft_wrap=True)
        failed = sum(not r.passed for r in reports)
        console.print(f"{len(reports) - failed} passed, {failed} failed" + (" (written)" if args.write else ""))
    return 1 if any(not r.passed for r in reports) else 0


def guard(args, console: Console) -> int:
    from sweserve.config_search import ConfigSearch
    from sweserve.dataset.profiles import load_profile
    from sweserve.dataset.readiness import assess, instruction_digest
    from sweserve.dataset.taskstore import save_task, select
    from sweserve.evaluation import guard as forge

    tasks_dir = Path(args.tasks)
    bundles = [b for b in select(tasks_dir, args.task_ids) if b.task.validated]
    if args.task_ids and len(bundles) < len(args.task_ids):
        console.print(f"{len(args.task_ids) - len(bundles)} of the named tasks are not valid: nothing to measure")
    search = ConfigSearch.for_project(args.state_dir)
    rows: list[dict[str, Any]] = []
    cache = forge.NumbersCache()  # tasks of one repository share most files: each is read once
    for b in bundles:
        task = b.task
        profile = load_profile(task.profile, search)
        odds, per = forge.measure(clone_of(args, task.repo), b, cache=cache, history=profile.history)
        bound = profile.max_forge_odds
        twinned = {t.test for t in task.twins}
        rows.append({"task_id": task.task_id, "fail_to_pass": len(per),
                     "twinned": sum(any(forge.twins.same_test(p, k) for p in twinned) for k in per),
                     "strong": sum(v < 1 for v in per.values()), "forge_odds": odds, "max_forge_odds": bound,
                     "per_test": per})
        assert task.validation is not None  # a valid task
        measured = task.model_copy(update={"validation": task.validation.model_copy(
            update={"forge_odds": odds, "max_forge_odds": bound, "forge_odds_instruction": instruction_digest(b.instruction)})})
        measured.readiness = assess(measured, b.instruction)
        rows[-1]["ready"] = measured.readiness.ready
        if args.write:
            save_task(tasks_dir / task.task_id, measured)
    if args.json:
        print(json.dumps(rows, indent=2))
        return 0
    table = Table(title=f"forge odds {escape(str(tasks_dir))}")
    for name in ("task", "F2P tests", "twinned", "strong", "forge odds", "bound", "ready"):
        table.add_column(name, no_wrap=True)
    for r in rows:
        table.add_row(escape(r["task_id"]), str(r["fail_to_pass"]), str(r["twinned"]), str(r["strong"]),
                      f"{r['forge_odds']:.3g}", f"{r['max_forge_odds']:.3g}", "yes" if r["ready"] else "no")
    console.print(table)
    console.print(f"{sum(r['forge_odds'] <= r['max_forge_odds'] for r in rows)} of {len(rows)} valid tasks within "
                  "their bound" + (" (written)" if args.write else ""))
    return 0


def review(args, console: Console) -> int:
    from sweserve.dataset import screening
    from sweserve.dataset.taskstore import select

    tasks_dir = Path(args.tasks)
    if args.review_cmd == "packet":
        bundles = select(tasks_dir, args.task_ids)
        if not args.task_ids:
            bundles = [b for b in bundles if (b.task.validated if args.valid else b.task.ready)]
        folders = screening.write_packet(bundles, Path(args.out))
        console.print(f"{len(folders)} tasks in {args.out}: give a reviewer RUBRIC.md first", markup=False,
                      highlight=False)
        return 0
    out = screening.record(tasks_dir, screening.read_verdicts(Path(args.results)), write=args.write)
    for task_id, (ready, line) in sorted(out.items()):
        console.print(f"{task_id}: {line}; {'ready' if ready else 'not ready'}", markup=False, highlight=False)
    console.print(f"{len(out)} tasks reviewed" + (" (written)" if args.write else " (not written: --write)"))
    return 0


def run(args, console: Console) -> int:
    from sweserve.dataset.taskstore import load_bundle, select, task_dirs
    from sweserve.reporting.review import visible_controls

    if args.tasks_cmd == "review":
        return review(args, console)

    if args.tasks_cmd == "lint":
        return lint(args, console)
    if args.tasks_cmd == "guard":
        return guard(args, console)
    if args.tasks_cmd == "funnel":
        return funnel(args, console)
    tasks_dir = Path(args.tasks)
    if args.tasks_cmd == "show":
        bundle = select(tasks_dir, [args.task_id])[0]
        if args.json:
            print(bundle.task.model_dump_json(indent=2))
            return 0
        console.print_json(bundle.task.model_dump_json(exclude={"validation", "quality", "readiness"}))
        console.rule("readiness")
        console.print(readiness_lines(bundle.task), markup=False, highlight=False, soft_wrap=True)
        console.rule("quality")
        console.print(quality_lines(bundle.task), markup=False, highlight=False)
        console.rule("instruction")
        # mined from PR text: its escape sequences are spelled, never sent to the terminal (red team 15b, R15b-3)
        console.print(visible_controls(bundle.instruction), markup=False, highlight=False)
        return 0
    table = Table(title=escape(str(tasks_dir)))
    for name in ("task", "family", "PR", "validated", "F2P", "P2P", "gpus", "lint", "ready"):
        table.add_column(name, no_wrap=True)
    rows = []
    for d in task_dirs(tasks_dir):
        task = load_bundle(d).task
        state = task.validation.status if task.validation else "no"
        rows.append(task.model_dump(mode="json", include={"task_id", "family", "pr_number"})
                    | {"validated": state, "ready": task.ready})
        lint_state = "-" if task.quality is None else "ok" if task.quality.passed else "FAIL"
        ready = "-" if task.readiness is None else "yes" if task.ready else "no"
        table.add_row(escape(task.task_id), task.family, str(task.pr_number), state, str(len(task.FAIL_TO_PASS)),
                      str(len(task.PASS_TO_PASS)), str(task.resources.gpus), lint_state, ready)
    if args.json:
        print(json.dumps(rows, indent=2))
    else:
        console.print(table)
    return 0


def readiness_lines(task) -> str:
    """Ready or not and why, the signal checks, and where validation's test logs are."""
    lines = []
    r = task.readiness
    if r is None:
        lines.append("ready: not assessed (sweserve validate, or sweserve tasks funnel --write)")
    else:
        lines.append("ready: yes" if task.ready else "ready: no")
        lines += [f"  {reason.key}: {reason.detail}" for reason in r.reasons]
        lines.append(f"family read from: {r.family_from or '-'}")
    v = task.validation
    if v is not None:
        lines.append(f"validation: {v.status}" + (f" ({v.reason})" if v.reason else ""))
        for check in v.signals or []:
            state = "FIRED" if check.fired else "passed" if check.ran else "not run"
            lines.append(f"  signal {check.name}: {state}" + (f": {check.detail}" if check.detail else ""))
        lines.append(f"validation logs: {v.logs}" if v.logs else "validation logs: none kept")
    if task.unreadable:
        lines.append(f"built without {len(task.unreadable)} file(s) git cannot read in the clone: "
                     + ", ".join(task.unreadable[:5]))
    return "\n".join(lines)


def quality_lines(task) -> str:
    """The quality record in a few lines: statement, interface, lint result and why."""
    q = task.quality
    conf = f" (score {task.family_confidence:.2f})" if task.family_confidence is not None else ""
    head = f"family: {task.family}{conf}" + (" (override)" if task.family_override else "")
    if q is None:
        return head + "\nlint: not run (sweserve tasks lint)"
    lines = [head, f"statement: {q.statement_source}, {q.statement_chars} characters",
             f"interface ({q.interface_from or '-'}): {len(q.interface)} names"
             + "".join(f"\n  {i.kind} {i.name}" + (f" {i.keyword}=" if i.keyword else "") for i in q.interface),
             "lint: passed" if q.passed else "lint: FAILED" + "".join(f"\n  {f}" for f in q.findings)]
    lines += [f"note: {n}" for n in q.notes]
    return "\n".join(lines)
