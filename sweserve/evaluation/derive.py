"""From test runs to a task's graded ids: FAIL_TO_PASS, PASS_TO_PASS and flaky tests, and rechecks of old ones."""

from __future__ import annotations

from sweserve.evaluation.grading import TestRun
from sweserve.models import Outcome, Task


def _per_test(runs: list[TestRun]) -> dict[str, list[Outcome]]:
    ids = sorted(set().union(*(r.outcomes for r in runs)))
    return {t: [r.outcomes.get(t, "missing") for r in runs] for t in ids}


def derive(before: list[TestRun], after: list[TestRun]) -> tuple[list[str], list[str], list[str]]:
    """FAIL_TO_PASS, PASS_TO_PASS and flaky ids: each must hold in every run."""
    b, a = _per_test(before), _per_test(after)
    # flaky: passes in some runs of a state and not in others (failed vs error vs missing is no flake)
    flaky = sorted(t for t, outs in list(a.items()) + list(b.items()) if len({o == "passed" for o in outs}) > 1)
    f2p, p2p = [], []
    for t, outs in a.items():
        if t in flaky or any(o != "passed" for o in outs):
            continue
        prior = b.get(t, ["missing"])
        if all(o == "passed" for o in prior):
            p2p.append(t)
        elif all(o != "passed" for o in prior):
            f2p.append(t)
    return sorted(f2p), sorted(p2p), sorted(set(flaky))


def recheck(task: Task, before: list[TestRun], after: list[TestRun]) -> str | None:
    """For a task validated before: why its recorded FAIL_TO_PASS/PASS_TO_PASS no longer hold, or None."""
    for run in after:
        bad = [t for t in task.FAIL_TO_PASS + task.PASS_TO_PASS if run.outcomes.get(t, "missing") != "passed"]
        if bad:
            return f"oracle no longer passes {bad[0]} ({run.outcomes.get(bad[0], 'missing')})" + (
                f" and {len(bad) - 1} more" if len(bad) > 1 else "")
    for run in before:
        passing = [t for t in task.FAIL_TO_PASS if run.outcomes.get(t) == "passed"]
        if passing:
            return f"FAIL_TO_PASS test passes without the oracle: {passing[0]}"
        broken = [t for t in task.PASS_TO_PASS if run.outcomes.get(t, "missing") != "passed"]
        if broken:
            return f"PASS_TO_PASS test fails at base: {broken[0]}"
    return None
