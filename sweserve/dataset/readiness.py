"""Readiness: whether a demanding reviewer would keep a task, read from what validation and lint recorded.

A task is **ready** when all of these hold, and otherwise carries one reason per check that failed:

- **valid** — validation kept it (FAIL_TO_PASS found, oracle passes, null fails);
- **lint** — `sweserve tasks lint` ran on it (its quality record has an interface reading) and found nothing;
- **family** — the family is settled: set by hand (`family_override`), or the recorded verdict is confident.
  The verdict read is, in order: per-family scores (`family_scores`, when mining records them: the top score
  at least the profile's `ready_family_confidence`, ahead of the next by `ready_family_margin`), else
  `family_confidence` (the family's share of the oracle's changed lines) against `ready_family_confidence`;
- **signals** — validation's signal checks (`evaluation/signals.py`) ran and none fired.

Nothing here reads a clone or runs a container: it is a function of task.json and the profile's thresholds.
"""

from __future__ import annotations

from pathlib import Path

from sweserve.dataset.profiles import RepoProfile
from sweserve.dataset.taskstore import load_task, save_task
from sweserve.models import Readiness, ReadinessReason, Task

DEFAULT_CONFIDENCE = 0.5
DEFAULT_MARGIN = 0.15


def family_verdict(task: Task, profile: RepoProfile | None) -> tuple[bool, str, str]:
    """(confident, which recorded field decided, why not) for the task's family."""
    if task.family_override is not None:
        return True, "family_override", ""
    least = profile.ready_family_confidence if profile else DEFAULT_CONFIDENCE
    margin = profile.ready_family_margin if profile else DEFAULT_MARGIN
    scores = getattr(task, "family_scores", None)  # per-family scores, where mining records them
    if isinstance(scores, dict) and scores:
        ranked = sorted(((float(v), k) for k, v in scores.items()), reverse=True)
        (top, best), second = ranked[0], (ranked[1][0] if len(ranked) > 1 else 0.0)
        if best != task.family:
            return False, "family_scores", f"recorded family {task.family}, but {best} scores highest ({top:.2f})"
        if top < least:
            return False, "family_scores", f"{best} scores only {top:.2f} (at least {least:.2f} wanted)"
        if top - second < margin:
            return False, "family_scores", (f"{best} ({top:.2f}) is within {margin:.2f} of the next family "
                                            f"({ranked[1][1]}, {second:.2f})")
        return True, "family_scores", ""
    if task.family_confidence is None:
        return False, "family_confidence", "no family confidence recorded (re-mine the task)"
    if task.family_confidence < least:
        return False, "family_confidence", (f"{task.family} holds only {task.family_confidence:.0%} of the "
                                            f"changed lines (at least {least:.0%} wanted)")
    return True, "family_confidence", ""


def assess(task: Task, profile: RepoProfile | None) -> Readiness:
    """The task's readiness now, from its records; profile: for the family thresholds (None: defaults)."""
    reasons: list[ReadinessReason] = []
    v = task.validation
    if v is None:
        reasons.append(ReadinessReason(kind="not_validated", key="not_validated",
                                       detail="not validated: run `sweserve validate`"))
    elif not task.validated:
        category = v.category or ("no_fail_to_pass" if v.status == "valid" else "other")
        reasons.append(ReadinessReason(kind="rejected", key=f"rejected:{category}",
                                       detail=f"validation rejected it: {v.reason or category}"))
    q = task.quality
    if q is None or q.interface_from is None and not q.findings:
        reasons.append(ReadinessReason(kind="lint", key="lint:not_run", detail="lint has not run: `sweserve tasks "
                                       "lint --write` (validate runs it when the clone is known)"))
    elif q.findings:
        reasons.append(ReadinessReason(kind="lint", key="lint:findings", detail=f"lint: {q.findings[0]}"
                                       + (f" (and {len(q.findings) - 1} more)" if len(q.findings) > 1 else "")))
    confident, family_from, why = family_verdict(task, profile)
    if not confident:
        reasons.append(ReadinessReason(kind="family_unsure", key="family_unsure",
                                       detail=f"family not settled: {why}; set family_override to settle it"))
    signals_ok = True
    if task.validated:
        if v is None or v.signals is None:
            signals_ok = False
            reasons.append(ReadinessReason(kind="signal", key="signal:not_run",
                                           detail="signal checks have not run: validate it again"))
        else:
            for check in v.signals:
                if check.fired:
                    signals_ok = False
                    reasons.append(ReadinessReason(kind="signal", key=f"signal:{check.name}",
                                                   detail=f"{check.name}: {check.detail}"))
    checks = {"valid": task.validated, "lint": not any(r.kind == "lint" for r in reasons), "family": confident,
              "signals": task.validated and signals_ok}
    return Readiness(ready=not reasons, reasons=reasons, checks=checks, family_from=family_from)


def record(task_dir: Path, profile: RepoProfile | None) -> Task:
    """Assess the task in task_dir and save its readiness in task.json."""
    task = load_task(task_dir)
    task.readiness = assess(task, profile)
    save_task(task_dir, task)
    return task


def is_ready(task: Task) -> bool:
    """What `run`, `export` and `report` select by default: readiness recorded as ready, and still valid."""
    return task.ready
