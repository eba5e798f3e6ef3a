"""Pass rates overall and per family, and each task's status, from a results JSONL.

Honest denominators: the tasks a run selected (its `runs/<run_id>/manifest.json`, or a tasks folder) are the
denominator. A selected (task, attempt) with no result (a crashed or killed run) is shown as `missing` and
counts as not resolved; only `skipped` (the host cannot run the task) leaves the denominator.
Everything printed goes through rich with markup escaped: task ids, reasons and file names are data.
"""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path

from pydantic import BaseModel, Field, ValidationError
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from sweserve.errors import SweserveError
from sweserve.evaluation.results import latest
from sweserve.models import FAMILIES, STATUSES, RunResult

MISSING = "missing"


class Selection(BaseModel):
    """What a run was asked to do for one agent: these tasks (id → family), `attempts` times each."""

    attempts: int = 1
    tasks: dict[str, str | None] = Field(default_factory=dict)

    def merge(self, other: "Selection") -> "Selection":
        return Selection(attempts=max(self.attempts, other.attempts), tasks={**self.tasks, **other.tasks})


class Rate(BaseModel):
    tasks: int = 0
    scored: int = Field(0, description="tasks not skipped (missing ones included)")
    resolved: float = Field(0, description="sum of per-task pass@1")
    pass_at_1: float | None = None
    pass_at_k: float | None = None
    k: int = 1


class TaskRow(BaseModel):
    task_id: str
    family: str
    status: str
    reason: str | None = None
    attempts: int = 1
    resolved_attempts: int = 0
    missing_attempts: int = 0
    flags: list[str] = Field(default_factory=list)


class AgentReport(BaseModel):
    agent: str
    overall: Rate
    families: dict[str, Rate]
    statuses: dict[str, int]
    tasks: list[TaskRow]


def read_manifests(runs_root: Path) -> dict[str, Selection]:
    """Each agent's selection over every run recorded under runs_root (`<run_id>/manifest.json`)."""
    selected: dict[str, Selection] = {}
    for path in sorted(runs_root.glob("*/manifest.json")) if runs_root.is_dir() else []:
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
            agent, tasks = str(data["agent"]), dict(data["tasks"])
            families = data.get("families") or {}
            sel = Selection(attempts=int(data.get("attempts", 1)), tasks={t: families.get(t) for t in tasks})
        except (OSError, UnicodeDecodeError, ValueError, KeyError, TypeError, ValidationError):
            raise SweserveError(f"{path}: not a run manifest") from None
        selected[agent] = selected[agent].merge(sel) if agent in selected else sel
    return selected


def _rate(rows: list[TaskRow], k: int) -> Rate:
    scored = [r for r in rows if r.status != "skipped"]
    rate = Rate(tasks=len(rows), scored=len(scored), k=k)
    if scored:
        per_task = [r.resolved_attempts / r.attempts for r in scored]
        rate.resolved = sum(per_task)
        rate.pass_at_1 = sum(per_task) / len(scored)
        rate.pass_at_k = sum(1 for r in scored if r.resolved_attempts) / len(scored)
    return rate


def build_reports(results: list[RunResult], selected: dict[str, Selection] | None = None) -> list[AgentReport]:
    """One report per agent; `selected` (per agent) adds the tasks and attempts that have no result."""
    selected = selected or {}
    by_agent: dict[str, dict[str, list[RunResult]]] = defaultdict(lambda: defaultdict(list))
    for r in latest(results).values():
        by_agent[r.agent][r.task_id].append(r)
    reports = []
    for agent in sorted(set(by_agent) | set(selected)):
        tasks, sel = by_agent[agent], selected.get(agent, Selection(attempts=0))
        rows = []
        for task_id in sorted(set(tasks) | set(sel.tasks)):
            attempts = sorted(tasks.get(task_id, []), key=lambda r: r.attempt)
            expected = max(sel.attempts if task_id in sel.tasks else 0, max((r.attempt for r in attempts), default=0))
            first = attempts[0] if attempts else None
            family = first.family if first else (sel.tasks.get(task_id) or "unknown")
            rows.append(TaskRow(
                task_id=task_id, family=family, status=first.status if first and first.attempt == 1 else MISSING,
                reason=first.reason if first and first.attempt == 1 else None,
                attempts=max(expected, 1), resolved_attempts=sum(r.status == "resolved" for r in attempts),
                missing_attempts=max(expected, 1) - len(attempts),
                flags=sorted({f for r in attempts for f in r.flags}),
            ))
        k = max(r.attempts for r in rows)
        families = {f: _rate([r for r in rows if r.family == f], k) for f in FAMILIES if any(r.family == f for r in rows)}
        statuses = {s: sum(r.status == s for r in rows) for s in (*STATUSES, MISSING)}
        reports.append(AgentReport(agent=agent, overall=_rate(rows, k), families=families, statuses=statuses,
                                   tasks=rows))
    return reports


def _pct(x: float | None) -> str:
    return "—" if x is None else f"{100 * x:.1f}%"


STATUS_STYLE = {"resolved": "green", "failed": "red", "patch_failed": "magenta", "error": "yellow", "skipped": "dim",
                "tampered": "bold red", MISSING: "bold red"}


def render(reports: list[AgentReport], console: Console) -> None:
    for rep in reports:
        k = rep.overall.k
        summary = Table(title=escape(f"agent: {rep.agent}"), show_lines=False)
        summary.add_column("family")
        summary.add_column("tasks", justify="right")
        summary.add_column("scored", justify="right")
        summary.add_column("pass@1", justify="right")
        if k > 1:
            summary.add_column(f"pass@{k}", justify="right")
        for name, rate in list(rep.families.items()) + [("overall", rep.overall)]:
            cells = [escape(name), str(rate.tasks), str(rate.scored), _pct(rate.pass_at_1)]
            if k > 1:
                cells.append(_pct(rate.pass_at_k))
            summary.add_row(*cells, style="bold" if name == "overall" else None)
        console.print(summary)
        if rep.statuses.get(MISSING):
            console.print(f"[bold red]{rep.statuses[MISSING]} selected tasks have no result[/] (counted as not "
                          "resolved); resume the run to finish them")
        detail = Table(show_header=True)
        detail.add_column("task", no_wrap=True)
        detail.add_column("family", no_wrap=True)
        detail.add_column("status", no_wrap=True)
        detail.add_column("reason", overflow="fold")
        for row in rep.tasks:
            status = row.status if row.attempts == 1 else f"{row.status} ({row.resolved_attempts}/{row.attempts})"
            if row.missing_attempts and row.attempts > 1:
                status += f", {row.missing_attempts} missing"
            reason = f"skipped: {row.reason}" if row.status == "skipped" else (row.reason or "")
            if row.flags:
                reason = f"[flags: {', '.join(row.flags)}] {reason}".strip()
            detail.add_row(escape(row.task_id), escape(row.family),
                           f"[{STATUS_STYLE.get(row.status, 'white')}]{escape(status)}[/]", escape(reason))
        console.print(detail)
