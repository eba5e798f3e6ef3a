"""Pass rates overall and per family, and each task's status, from a results JSONL."""

from __future__ import annotations

from collections import defaultdict

from pydantic import BaseModel, Field
from rich.console import Console
from rich.table import Table

from sweserve.evaluation.results import latest
from sweserve.models import FAMILIES, STATUSES, RunResult


class Rate(BaseModel):
    tasks: int = 0
    scored: int = Field(0, description="tasks not skipped")
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
    flags: list[str] = []  # what the verifier's tamper scan flagged, over all attempts


class AgentReport(BaseModel):
    agent: str
    overall: Rate
    families: dict[str, Rate]
    statuses: dict[str, int]
    tasks: list[TaskRow]


def _rate(rows: list[TaskRow], k: int) -> Rate:
    scored = [r for r in rows if r.status != "skipped"]
    rate = Rate(tasks=len(rows), scored=len(scored), k=k)
    if scored:
        per_task = [r.resolved_attempts / r.attempts for r in scored]
        rate.resolved = sum(per_task)
        rate.pass_at_1 = sum(per_task) / len(scored)
        rate.pass_at_k = sum(1 for r in scored if r.resolved_attempts) / len(scored)
    return rate


def build_reports(results: list[RunResult]) -> list[AgentReport]:
    by_agent: dict[str, dict[str, list[RunResult]]] = defaultdict(lambda: defaultdict(list))
    for r in latest(results).values():
        by_agent[r.agent][r.task_id].append(r)
    reports = []
    for agent, tasks in sorted(by_agent.items()):
        rows = []
        for task_id, attempts in sorted(tasks.items()):
            attempts.sort(key=lambda r: r.attempt)
            first = attempts[0]
            rows.append(TaskRow(
                task_id=task_id, family=first.family, status=first.status, reason=first.reason,
                attempts=len(attempts), resolved_attempts=sum(r.status == "resolved" for r in attempts),
                flags=sorted({f for r in attempts for f in r.flags}),
            ))
        k = max(r.attempts for r in rows)
        families = {f: _rate([r for r in rows if r.family == f], k) for f in FAMILIES if any(r.family == f for r in rows)}
        statuses = {s: sum(r.status == s for r in rows) for s in STATUSES}
        reports.append(AgentReport(agent=agent, overall=_rate(rows, k), families=families, statuses=statuses, tasks=rows))
    return reports


def _pct(x: float | None) -> str:
    return "—" if x is None else f"{100 * x:.1f}%"


STATUS_STYLE = {"resolved": "green", "failed": "red", "patch_failed": "magenta", "error": "yellow", "skipped": "dim",
                "tampered": "bold red"}


def render(reports: list[AgentReport], console: Console) -> None:
    for rep in reports:
        k = rep.overall.k
        summary = Table(title=f"agent: {rep.agent}", show_lines=False)
        summary.add_column("family")
        summary.add_column("tasks", justify="right")
        summary.add_column("scored", justify="right")
        summary.add_column("pass@1", justify="right")
        if k > 1:
            summary.add_column(f"pass@{k}", justify="right")
        for name, rate in list(rep.families.items()) + [("overall", rep.overall)]:
            cells = [name, str(rate.tasks), str(rate.scored), _pct(rate.pass_at_1)]
            if k > 1:
                cells.append(_pct(rate.pass_at_k))
            summary.add_row(*cells, style="bold" if name == "overall" else None)
        console.print(summary)
        detail = Table(show_header=True)
        detail.add_column("task", no_wrap=True)
        detail.add_column("family", no_wrap=True)
        detail.add_column("status", no_wrap=True)
        detail.add_column("reason", overflow="fold")
        for row in rep.tasks:
            status = row.status if row.attempts == 1 else f"{row.status} ({row.resolved_attempts}/{row.attempts})"
            reason = f"skipped: {row.reason}" if row.status == "skipped" else (row.reason or "")
            if row.flags:
                reason = f"{reason} [flagged: {'; '.join(row.flags)}]".strip()
            detail.add_row(row.task_id, row.family, f"[{STATUS_STYLE[row.status]}]{status}[/]", reason)
        console.print(detail)
