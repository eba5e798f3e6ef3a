"""Grading again without Docker: each trial's saved outcomes (`outcomes.json` in its folder) against the task as
it is now — e.g. after a task's FAIL_TO_PASS/PASS_TO_PASS were revised — with no sandbox started.

Only results the verifier graded (resolved or failed, with outcomes saved) change; errors, skips, patch
failures and `tampered` verdicts stand, since their outcomes never counted.
"""

from __future__ import annotations

import json
from pathlib import Path

from sweserve.evaluation.grading import grade
from sweserve.evaluation.trial_folder import OUTCOMES_FILE, TrialFolder
from sweserve.loading import read_found_text
from sweserve.models import OUTCOMES, Outcome, RunResult, TaskBundle


def saved_outcomes(path: Path) -> dict[str, Outcome] | None:
    """A trial's saved outcomes, or None when there are none (or they are not what the grader wrote)."""
    try:
        data = json.loads(read_found_text(path))
    except (OSError, ValueError):  # UnicodeDecodeError is a ValueError
        return None
    outcomes = data.get("outcomes") if isinstance(data, dict) else None
    if not isinstance(outcomes, dict) or not all(isinstance(k, str) and v in OUTCOMES for k, v in outcomes.items()):
        return None
    return outcomes


def regrade(results: list[RunResult], results_path: Path, bundles: dict[str, TaskBundle]) -> tuple[list[RunResult], int]:
    """The results with graded ones recomputed from their folders beside results_path; and how many changed."""
    out, changed = [], 0
    for r in results:
        bundle = bundles.get(r.task_id)
        folder = TrialFolder.for_trial(results_path, r.run_id, r.agent, r.task_id, r.attempt)
        # only a result the verifier graded (its tests recorded) saved outcomes: a `failed` whose hidden tests gave
        # none (a time-out, a runner that died) may share its folder with an earlier try's (a resumed `--run-id`
        # redoes a killed run's trial there), which never counted (red team 15c, R15c-5)
        graded = r.status in ("resolved", "failed") and bool(r.tests.fail_to_pass or r.tests.pass_to_pass)
        outcomes = saved_outcomes(folder.path / OUTCOMES_FILE) if graded else None
        if bundle is None or outcomes is None:
            out.append(r)
            continue
        tests = grade(bundle.task, outcomes)
        status = "resolved" if tests.resolved else "failed"
        changed += status != r.status
        out.append(r.model_copy(update={"tests": tests, "status": status}))
    return out, changed
