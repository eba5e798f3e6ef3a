"""`sweserve demo`: fixture repo → mine → validate → oracle and null runs → report, with the expected outcome checked."""

from __future__ import annotations

import shutil
from pathlib import Path

from rich.console import Console
from rich.markup import escape

from sweserve.agents.reference import NullAgent, OracleAgent
from sweserve.dataset.clones import remember_clone
from sweserve.dataset.lint import lint_task
from sweserve.dataset.mining import mine, open_repo
from sweserve.dataset.profiles import load_profile
from sweserve.dataset.taskstore import load_all
from sweserve.demo.fixture import PROFILE, build_demo_repo
from sweserve.evaluation.context import Context
from sweserve.evaluation.evaluate import run_evaluation
from sweserve.evaluation.results import read_results
from sweserve.evaluation.validation import validate_all
from sweserve.models import FAMILIES
from sweserve.reporting.summary import build_reports, render


def run_demo(state_dir: Path, ca_bundle: str | None, console: Console, runs: int = 3) -> int:
    root = state_dir / "demo"
    repo_dir, tasks_dir, results_dir = root / "repo", root / "tasks", root / "results"
    for d in (tasks_dir, results_dir):
        shutil.rmtree(d, ignore_errors=True)
    profile = load_profile(PROFILE)
    build_demo_repo(repo_dir)
    console.print(f"[bold]1/5[/] built demo repository {escape(str(repo_dir))}")
    report = mine(open_repo(repo_dir), profile, tasks_dir)
    remember_clone(state_dir, profile.repo, repo_dir)
    rejected = {k: len(v) for k, v in report.rejected.items()}
    console.print(f"[bold]2/5[/] mined {report.scanned} commits: {len(report.written)} tasks, rejected {rejected}")

    with Context.create(state_dir, ca_bundle=ca_bundle, repo_path=repo_dir) as ctx:
        bundles = load_all(tasks_dir)
        outcomes = []
        for o in validate_all(ctx, tasks_dir, bundles, runs=runs):
            outcomes.append(o)
            lint_task(tasks_dir / o.task_id, repo_dir, write=True)  # interface section, quality record
            console.print(f"  validated {o.task_id}: {o.status} (F2P {o.fail_to_pass}, P2P {o.pass_to_pass})"
                          + (f" {o.reason}" if o.reason else ""))
        console.print(f"[bold]3/5[/] validated {sum(o.status == 'valid' for o in outcomes)}/{len(outcomes)} tasks")
        bundles = load_all(tasks_dir)
        for agent in (OracleAgent(), NullAgent()):
            run_evaluation(ctx, bundles, agent, results_dir / f"{agent.name}.jsonl",
                           on_result=lambda r, n, t: console.print(f"  {r.agent} {r.task_id}: {r.status}"))
        console.print("[bold]4/5[/] ran the oracle and null agents")

    reports = {r.agent: r for path in sorted(results_dir.glob("*.jsonl")) for r in build_reports(read_results(path))}
    render(list(reports.values()), console)
    families = {b.task.family for b in bundles}
    problems = []
    if families != set(FAMILIES):
        problems.append(f"families covered: {sorted(families)}")
    if any(o.status != "valid" for o in outcomes):
        problems.append("not every task validated")
    if reports["oracle"].overall.pass_at_1 != 1.0:
        problems.append(f"oracle resolved {reports['oracle'].overall.pass_at_1}")
    if reports["null"].overall.pass_at_1 != 0.0:
        problems.append(f"null resolved {reports['null'].overall.pass_at_1}")
    if problems:
        console.print(f"[bold red]5/5 demo FAILED:[/] {'; '.join(problems)}")
        return 1
    console.print(f"[bold green]5/5 demo OK:[/] {len(bundles)} tasks over {len(families)} families; "
                  "oracle 100%, null 0%")
    return 0
