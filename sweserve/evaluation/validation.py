"""Validation: hidden tests at base (+tests) and at base+oracle(+tests), k runs each → FAIL_TO_PASS, PASS_TO_PASS."""

from __future__ import annotations

import re
from pathlib import Path

import docker.errors
from pydantic import BaseModel, Field

from sweserve.dataset.taskstore import save_task
from sweserve.environment.context import Context
from sweserve.environment.gpus import skip_reason
from sweserve.evaluation.accelerators import ACCELERATOR, accelerator_kind, accelerator_tests  # noqa: F401
from sweserve.errors import SweserveError
from sweserve.evaluation.grading import (
    PatchError,
    TestRun,
    TestRunError,
    apply_patch,
    run_tests,
)
from sweserve.models import Outcome, TaskBundle, ValidationRecord


class ValidateOutcome(BaseModel):
    task_id: str
    family: str
    status: str  # valid, rejected, skipped
    reason: str | None = None
    fail_to_pass: int = 0
    pass_to_pass: int = 0
    flaky: list[str] = Field(default_factory=list)
    accelerator_tests: dict[str, str] = Field(default_factory=dict)


_CATEGORIES = [
    ("needs an accelerator", "needs_accelerator"),
    ("no FAIL_TO_PASS", "no_fail_to_pass"),
    ("hidden tests timed out", "timeout"),
    ("test runner exited", "runner_crashed"),
    ("building sweserve-env", "env_build_failed"),
    ("building sweserve-task", "task_build_failed"),
    ("oracle.patch does not apply", "oracle_does_not_apply"),
    ("tests.patch does not apply", "tests_do_not_apply"),
    ("oracle no longer passes", "oracle_regressed"),
    ("FAIL_TO_PASS test passes without", "oracle_regressed"),
    ("PASS_TO_PASS test fails at base", "oracle_regressed"),
    ("docker:", "docker_error"),
]


def reason_category(outcome: "ValidateOutcome") -> str:
    """A short bucket for summaries: valid, skipped, or why it was rejected."""
    if outcome.status != "rejected":
        return outcome.status
    for prefix, category in _CATEGORIES:
        if (outcome.reason or "").startswith(prefix):
            return category
    return "other"


def run_state(ctx: Context, bundle: TaskBundle, image: str, patches: list[tuple[str, str]], runs: int,
              gpu_ids: list[str]) -> list[TestRun]:
    task = bundle.task
    with ctx.sandbox(image, task.task_id, "validate", task.resources, gpu_ids) as box:
        for name, patch in patches:
            try:
                apply_patch(box, patch, name)
            except PatchError as exc:
                raise PatchError(f"{name}.patch does not apply: {exc}") from None
        return [run_tests(box, task, task.resources.test_timeout_s) for _ in range(runs)]


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


def recheck(bundle: TaskBundle, before: list[TestRun], after: list[TestRun]) -> str | None:
    """For a task validated before: why its recorded FAIL_TO_PASS/PASS_TO_PASS no longer hold, or None."""
    task = bundle.task
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


def validate_task(ctx: Context, task_dir: Path, bundle: TaskBundle, runs: int = 3,
                  record: bool = True) -> ValidateOutcome:
    """Validate one task; with record, its FAIL_TO_PASS/PASS_TO_PASS and validation record are saved."""
    task = bundle.task
    result = ValidateOutcome(task_id=task.task_id, family=task.family, status="rejected")
    if (why := skip_reason(task.resources.gpus, ctx.host_gpus)):
        result.status, result.reason = "skipped", why
        return result
    gpu_ids = ctx.gpu_pool.acquire(task.resources.gpus)
    image = ""
    try:
        image = ctx.task_image(bundle)
        before = run_state(ctx, bundle, image, [("tests", bundle.tests_patch)], runs, gpu_ids)
        after = run_state(ctx, bundle, image, [("oracle", bundle.oracle_patch), ("tests", bundle.tests_patch)],
                          runs, gpu_ids)
    except (PatchError, TestRunError, SweserveError) as exc:
        result.reason = str(exc)
        before = after = None
    except docker.errors.DockerException as exc:
        result.reason = f"docker: {exc}"
        before = after = None
    finally:
        ctx.gpu_pool.release(gpu_ids)

    if before is not None:
        result.accelerator_tests = accel = accelerator_tests(after)
        if task.FAIL_TO_PASS:  # validated before: the recorded ids must still hold
            f2p, p2p = task.FAIL_TO_PASS, task.PASS_TO_PASS
            _, _, flaky = derive(before, after)
            result.reason = recheck(bundle, before, after)
        else:
            f2p, p2p, flaky = derive(before, after)
            kind = accelerator_kind(accel)
            if not f2p and kind:
                result.reason = f"needs an accelerator ({kind}): {len(accel)} tests skip or fail without one"
                task.resources.needs_accelerator = kind
                if kind == "gpu":
                    task.resources.gpus = max(task.resources.gpus, 1)
            elif not f2p:
                result.reason = "no FAIL_TO_PASS test: no test fails before the oracle and passes after it in every run"
        result.flaky = flaky
        result.fail_to_pass, result.pass_to_pass = len(f2p), len(p2p)
        if result.reason is None:
            result.status = "valid"
            task.FAIL_TO_PASS, task.PASS_TO_PASS = f2p, p2p
    if not record:
        return result
    task.validation = ValidationRecord(
        status="valid" if result.status == "valid" else "rejected",
        reason=result.reason,
        runs=runs,
        flaky=result.flaky,
        accelerator_tests=result.accelerator_tests,
        before=before[-1].outcomes if before else {},
        after=after[-1].outcomes if after else {},
        image=image,
    )
    save_task(task_dir, task)
    return result
