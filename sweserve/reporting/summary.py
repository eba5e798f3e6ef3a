"""Pass rates overall and per family, and each task's status, from a results JSONL.

Honest denominators: the tasks a run selected (its `runs/<run_id>/manifest.json`, or a tasks folder) are the
denominator. A selected (task, attempt) with no result (a crashed or killed run) is shown as `missing` and
counts as not resolved; only `skipped` (the host cannot run the task) leaves the denominator.
Everything printed goes through rich with markup escaped: task ids, reasons and file names are data.

pass@1 is the mean over scored tasks of each task's fraction of resolved attempts; its standard error is
taken across attempts (the spread of the per-attempt pass rates: std / sqrt(k), None with one attempt), each
rate over every scored task (an asked attempt with no record not resolved; a task asked fewer attempts at its
own rate past them), so the rates average to pass@1.
pass@k is the unbiased estimator of Chen et al. (2021), 1 - C(n-c, k) / C(n, k) averaged over tasks, with
k the most attempts any task has (a task with fewer attempts counts as resolved if any attempt was).
"""

from __future__ import annotations

import math
import statistics
from collections import defaultdict
from collections.abc import Set
from pathlib import Path

from pydantic import BaseModel, Field
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from sweserve.evaluation.results import latest, manifest_paths, read_manifest
from sweserve.models import FAMILIES, STATUSES, RunManifest, RunResult
from sweserve.reporting.review import visible_controls

MISSING = "missing"


class Selection(BaseModel):
    """What a run was asked to do for one agent: these tasks (id → family), `attempts` times each; runs merged,
    each task as many times as the runs that selected it asked (`per_task`)."""

    attempts: int = 1
    tasks: dict[str, str | None] = Field(default_factory=dict)
    per_task: dict[str, int] = Field(default_factory=dict, description="attempts asked of a task, where runs differ")
    unready: list[str] = Field(default_factory=list, description="selected tasks that were not ready when selected")
    unjudged: list[str] = Field(default_factory=list, description="selected tasks whose readiness no selection of "
                                "them recorded (a manifest from before manifests listed their unready tasks)")

    def attempts_for(self, task_id: str) -> int:
        return self.per_task.get(task_id, self.attempts) if task_id in self.tasks else 0

    def merge(self, other: "Selection") -> "Selection":
        """Both runs' tasks, each asked the most attempts a run that selected it asked: a later run's
        `--attempts 3` for one task leaves the others as their runs asked (red team 12b, R12b-4)."""
        tasks = {**self.tasks, **other.tasks}
        per_task = {t: max(self.attempts_for(t), other.attempts_for(t)) for t in tasks}
        attempts = max(per_task.values(), default=max(self.attempts, other.attempts))
        # unready only where every run that judged it said so: a union let one run's unready selection take a
        # task another run selected ready, and killed, out of the denominator (red team 20d, R20d-3); a selection
        # that recorded no judgement of a task (an old manifest) leaves it to the others, or unjudged (R21b-1)
        judges = {t: [s for s in (self, other) if t in s.tasks and t not in s.unjudged] for t in tasks}
        unready = {t for t, js in judges.items() if js and all(t in s.unready for s in js)}
        return Selection(attempts=attempts, tasks=tasks, per_task={t: n for t, n in per_task.items() if n != attempts},
                         unready=sorted(unready), unjudged=sorted(t for t, js in judges.items() if not js))


class Rate(BaseModel):
    tasks: int = 0
    scored: int = Field(0, description="tasks not skipped (missing ones included)")
    resolved: float = Field(0, description="sum of per-task pass@1")
    pass_at_1: float | None = None
    pass_at_k: float | None = None
    k: int = 1
    pass_at_1_stderr: float | None = Field(None, description="standard error of pass@1 across attempts")


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
    model: str = ""
    version: str = ""
    run_ids: list[str] = Field(default_factory=list)
    attempts: int = Field(0, description="attempts counted (latest record of each task and attempt)")
    cost_per_task_usd: float | None = Field(None, description="mean cost of one attempt, where priced")
    cost_self_reported: bool = Field(False, description="some of those costs are the agent's own record (a command "
                                     "agent's trajectory, written in its sandbox), not priced by sweserve")
    cost_attempts: int = Field(0, description="attempts with a cost (the mean's)")
    ran_attempts: int = Field(0, description="attempts an agent ran: those without a cost (no record, a disputed "
                              "one) are left out of the mean, and the board says so (red team 16e, R16e-6)")
    usage_disputed: int = Field(0, description="attempts whose own record of tokens disagreed with what their egress "
                                "proxy counted from the model's answers (`usage_disagrees`)")
    usage_unmetered: int = Field(0, description="attempts whose egress proxy could not read every model call (an "
                                 "agent can cause that): their tokens are only a floor, their record unchecked "
                                 "above it (red team 17b, R17b-5)")
    time_per_task_s: float | None = Field(None, description="mean wall time of one attempt")
    uneven_attempts: list[str] = Field(default_factory=list, description="scored tasks asked more attempts than the "
                                       "fewest any scored task was: pass@1 weighs each task's own attempts, and "
                                       "attempts added after seeing a task's first favour it (red team 22b, R22b-5)")
    runs_unselected: list[str] = Field(default_factory=list, description="runs with records here and no manifest "
                                       "beside the results file as reported (a copy, another name of it, a runs/ "
                                       "moved): what they selected and never finished cannot be counted "
                                       "(red team 22f, R22f-3)")
    runs_file_gone: list[str] = Field(default_factory=list, description="runs whose manifest beside the results file "
                                      "names a results file that is gone and that have no record here: a deleted "
                                      "file's run, or this file's own renamed after the run was killed before any "
                                      "record; their selection is not counted, and the report says so (red team "
                                      "23q, R23i-5)")
    overall: Rate
    families: dict[str, Rate]
    statuses: dict[str, int]
    tasks: list[TaskRow]


def read_manifests(runs_root: Path, results_file: str | None = None,
                   agents: set[str] | None = None, run_ids: set[str] | None = None,
                   ran_unready: Set[tuple[str, str, str]] = frozenset()) -> dict[str, Selection]:
    """Each agent's selection over every run recorded under runs_root (`<run_id>/manifest.json`).

    Several results files may share a folder (and so runs_root): with `results_file` (a file name) only the
    runs that wrote that file count. A manifest from before manifests named their results file counts when
    its agent is one of `agents` (those with records in the file), so other files' agents never join in.
    `ran_unready`: (run id, agent, task) of records run while the task was not ready: a manifest from before
    manifests listed their unready tasks says nothing, and such a record says that run selected the task unready;
    its other tasks are `unjudged`. A manifest that lists them speaks for its run: a run id resumed once the task
    was ready (`pending` runs it again) selected it ready, whatever its older record says (red team 21b, R21b-3).
    """
    selected: dict[str, Selection] = {}
    for path in manifest_paths(runs_root):
        m = read_manifest(path)
        if not speaks_for(m, runs_root, results_file, agents, run_ids):
            continue
        if "unready" in m.model_fields_set:
            unready, unjudged = set(m.unready), set()
        else:
            unready = {t for t in m.tasks if (m.run_id, m.agent, t) in ran_unready}
            unjudged = set(m.tasks) - unready
        sel = Selection(attempts=m.attempts, tasks={t: m.families.get(t) for t in m.tasks}, per_task=m.per_task,
                        unready=sorted(unready), unjudged=sorted(unjudged))
        selected[m.agent] = selected[m.agent].merge(sel) if m.agent in selected else sel
    return selected


def speaks_for(m: RunManifest, runs_root: Path, results_file: str | None = None, agents: set[str] | None = None,
               run_ids: set[str] | None = None) -> bool:
    """Whether the manifest m, under runs_root, is the selection of a run of results_file (`read_manifests`)."""
    written = m.results
    if results_file is not None and written is not None and written != results_file:
        named = runs_root.parent / written
        if file_there(named) and not _same_file(named, runs_root.parent / results_file):
            return False  # another results file's run
        if not file_there(named) and run_ids is not None and m.run_id not in run_ids:
            return False  # a deleted file's run (a scratch run), not this file's renamed: none of its records
            # are here (red team 16f, R16f-2: its tasks and attempts were charged to every file beside it)
        # the same file by another name (a link), or one renamed since: as a manifest naming none (red team
        # 16b, R16b-3: its selected tasks with no result stopped being `missing`)
        written = None
    return not (written is None and agents is not None and m.agent not in agents)


def file_there(path: Path) -> bool:
    """Whether a file is at path: a name no file system holds (too long, a NUL in it), or one that cannot be looked
    up, is none there. A manifest's `results` looked up as is crashed `report` (red team 23q, R23q-3)."""
    try:
        return path.exists()
    except (OSError, ValueError):
        return False


def _same_file(a: Path, b: Path) -> bool:
    try:
        return a.samefile(b)
    except OSError:
        return False


def pass_at_k(n: int, c: int, k: int) -> float:
    """Chance that at least one of k attempts drawn from n (c of them resolved) is resolved."""
    if n < k:
        return 1.0 if c else 0.0
    if n - c < k:
        return 1.0
    return 1.0 - math.comb(n - c, k) / math.comb(n, k)


def stderr_across_attempts(per_attempt: list[float]) -> float | None:
    """Standard error of the mean of the per-attempt pass rates; None when there is one attempt."""
    if len(per_attempt) < 2:
        return None
    return statistics.stdev(per_attempt) / math.sqrt(len(per_attempt))


def _rate(rows: list[TaskRow], k: int, outcomes: dict[str, dict[int, bool]] | None = None) -> Rate:
    scored = [r for r in rows if r.status != "skipped"]
    rate = Rate(tasks=len(rows), scored=len(scored), k=k)
    if scored:
        per_task = [r.resolved_attempts / r.attempts for r in scored]
        rate.resolved = sum(per_task)
        rate.pass_at_1 = sum(per_task) / len(scored)
        rate.pass_at_k = sum(pass_at_k(r.attempts, r.resolved_attempts, k) for r in scored) / len(scored)
        if outcomes is not None and k > 1:
            # every scored task in every attempt's rate, as pass@1 counts it: an asked attempt with no resolved
            # record (missing, skipped) is not resolved; past the attempts a task was asked, it stands at its own
            # rate. The rates then average to pass@1, and only attempts that differ spread them (red team 15c,
            # R15c-3: taken over whichever tasks had the attempt, they mixed tasks and showed spread none had)
            per_attempt = [sum(float(outcomes[r.task_id].get(attempt, False)) if attempt <= r.attempts
                               else r.resolved_attempts / r.attempts for r in scored) / len(scored)
                           for attempt in range(1, k + 1)]
            rate.pass_at_1_stderr = stderr_across_attempts(per_attempt)
    return rate


def _mean(values: list[float]) -> float | None:
    return sum(values) / len(values) if values else None


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
        everything = [r for attempts in tasks.values() for r in attempts]
        outcomes = {t: {r.attempt: r.status == "resolved" for r in a if r.status != "skipped"}
                    for t, a in tasks.items()}
        for task_id in sorted(set(tasks) | set(sel.tasks)):
            outcomes.setdefault(task_id, {})
            attempts = sorted(tasks.get(task_id, []), key=lambda r: r.attempt)
            expected = max(sel.attempts_for(task_id), max((r.attempt for r in attempts), default=0))
            first = attempts[0] if attempts else None
            family = first.family if first else (sel.tasks.get(task_id) or "unknown")
            head = first if first and first.attempt == 1 else None  # the row's status: its first attempt's
            if head is not None and head.status == "skipped":
                # unless skipped while a later attempt ran (a laptop's skip, then the GPU host's `--attempts 3`):
                # the task is scored, as when a skip follows a run (red team 16b, R16b-2: it left the denominator
                # with its failures)
                head = next((r for r in attempts if r.status != "skipped"), head)
            if head is not None and head.status == "skipped" and expected > len(attempts):
                # nor while later attempts were selected and have no result yet (a GPU host's `--attempts 3`
                # killed): they are owed, `missing` until each is recorded, if only as a skip (red team 21b, R21b-6)
                head = None
            rows.append(TaskRow(
                task_id=task_id, family=family, status=head.status if head else MISSING,
                reason=head.reason if head else None,
                attempts=max(expected, 1), resolved_attempts=sum(r.status == "resolved" for r in attempts),
                missing_attempts=max(expected, 1) - len(attempts),
                flags=sorted({f for r in attempts for f in r.flags}),
            ))
        k = max(r.attempts for r in rows)
        scored = [r for r in rows if r.status != "skipped"]
        fewest = min((r.attempts for r in scored), default=0)
        families = {f: _rate([r for r in rows if r.family == f], k, outcomes)
                    for f in FAMILIES if any(r.family == f for r in rows)}
        statuses = {s: sum(r.status == s for r in rows) for s in (*STATUSES, MISSING)}
        ran = [r for r in everything if r.status != "skipped"]
        runs = [r.agent_run for r in ran if r.agent_run]
        reports.append(AgentReport(
            agent=agent,
            model=next((x.model for x in runs if x.model), ""),
            version=next((x.version for x in runs if x.version), ""),
            run_ids=sorted({r.run_id for r in everything}),
            attempts=len(everything),
            cost_per_task_usd=_mean([x.cost_usd for x in runs if x.cost_usd is not None]),
            cost_attempts=sum(x.cost_usd is not None for x in runs), ran_attempts=len(runs),
            cost_self_reported=any(x.cost_usd is not None and x.usage_from in ("agent", "proxy") for x in runs),
            usage_disputed=sum(any(f.startswith("usage_disagrees") for f in x.flags) for x in runs),
            usage_unmetered=sum(x.metered is not None and not x.metered.complete for x in runs),
            time_per_task_s=_mean([r.agent_run.wall_s if r.agent_run else r.duration_s for r in ran]),
            overall=_rate(rows, k, outcomes), families=families, statuses=statuses, tasks=rows,
            uneven_attempts=sorted(r.task_id for r in scored if r.attempts > fewest),
        ))
    return reports


def _pct(x: float | None) -> str:
    return "—" if x is None else f"{100 * x:.1f}%"


def _pct_se(rate: Rate) -> str:
    if rate.pass_at_1_stderr is None:
        return _pct(rate.pass_at_1)
    return f"{_pct(rate.pass_at_1)} ±{100 * rate.pass_at_1_stderr:.1f}"


STATUS_STYLE = {"resolved": "green", "failed": "red", "patch_failed": "magenta", "error": "yellow", "skipped": "dim",
                "tampered": "bold red", MISSING: "bold red"}


def render(reports: list[AgentReport], console: Console) -> None:
    for rep in reports:
        k = rep.overall.k
        title = f"agent: {rep.agent}" + (f" (model {rep.model})" if rep.model else "")
        # a predictions file's model name is the submitter's text: rich keeps ESC, so it is spelled (R15b-7)
        summary = Table(title=escape(visible_controls(title)), show_lines=False)
        summary.add_column("family", no_wrap=True)
        summary.add_column("tasks", justify="right")
        summary.add_column("scored", justify="right")
        summary.add_column("pass@1" + (" ± s.e." if k > 1 else ""), justify="right", no_wrap=True)
        if k > 1:
            summary.add_column(f"pass@{k}", justify="right")
        for name, rate in list(rep.families.items()) + [("overall", rep.overall)]:
            cells = [escape(name), str(rate.tasks), str(rate.scored), _pct_se(rate)]
            if k > 1:
                cells.append(_pct(rate.pass_at_k))
            summary.add_row(*cells, style="bold" if name == "overall" else None)
        console.print(summary)
        costs = []
        if rep.cost_per_task_usd is not None:
            costs.append(f"cost/task ${rep.cost_per_task_usd:.4f}"
                         + (" (the agent's own record, not priced by sweserve)" if rep.cost_self_reported else "")
                         + (f" (mean of {rep.cost_attempts} of {rep.ran_attempts} attempts)"
                            if rep.cost_attempts < rep.ran_attempts else ""))
        if rep.usage_disputed:
            costs.append(f"{rep.usage_disputed} attempts' own token counts disagree with their proxy's")
        if rep.usage_unmetered:
            costs.append(f"{rep.usage_unmetered} attempts' token counts are only a floor (their proxy could not read "
                         "every model call)")
        if rep.time_per_task_s is not None:
            costs.append(f"time/task {rep.time_per_task_s:.1f} s")
        if costs:
            console.print(", ".join(costs), soft_wrap=True)
        if rep.statuses.get(MISSING):
            console.print(f"[bold red]{rep.statuses[MISSING]} selected tasks have no result[/] (counted as not "
                          "resolved); resume the run to finish them")
        if rep.uneven_attempts:
            console.print(f"{len(rep.uneven_attempts)} of {rep.overall.scored} scored tasks were asked more attempts "
                          f"than others ({visible_controls(', '.join(rep.uneven_attempts[:5]))}"
                          f"{', ...' if len(rep.uneven_attempts) > 5 else ''}): pass@1 weighs each task's own "
                          "attempts; attempts added after seeing a task's first favour it", markup=False,
                          soft_wrap=True)
        if rep.runs_unselected:
            console.print(f"runs {visible_controls(', '.join(rep.runs_unselected[:5]))}"
                          f"{', ...' if len(rep.runs_unselected) > 5 else ''} have records here and no selection "
                          "(no manifest beside this results file: a copy, another name of it, or its runs/ moved): "
                          "tasks they were given and never finished are not counted", markup=False, soft_wrap=True)
        if rep.runs_file_gone:
            console.print(f"runs {visible_controls(', '.join(rep.runs_file_gone[:5]))}"
                          f"{', ...' if len(rep.runs_file_gone) > 5 else ''} selected tasks for a results file that "
                          "is gone and have no record here (a deleted file's runs, or this file's, renamed since): "
                          "their tasks are not counted; if they are this file's, its score leaves them out",
                          markup=False, soft_wrap=True)
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
            detail.add_row(escape(visible_controls(row.task_id)), escape(row.family),
                           f"[{STATUS_STYLE.get(row.status, 'white')}]{escape(status)}[/]",
                           escape(visible_controls(reason)))
        console.print(detail)
