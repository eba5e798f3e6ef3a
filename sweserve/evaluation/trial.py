"""Evaluation: candidate phase in a locked-down sandbox, then grading of its diff in a fresh one."""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor, as_completed
from pathlib import Path

import docker.errors

from sweserve.agents.base import Agent, extract_diff
from sweserve.environment.context import Context
from sweserve.environment.gpus import skip_reason
from sweserve.errors import SweserveError
from sweserve.evaluation.grading import (
    PatchError,
    TestRunError,
    apply_patch,
    grade,
    prepare_candidate_patch,
    run_tests,
)
from sweserve.evaluation.results import ResultsWriter, latest, read_results
from sweserve.models import AgentRun, RunResult, TaskBundle, now


def _result(ctx: Context, bundle: TaskBundle, agent: Agent, attempt: int, started, t0: float, **fields) -> RunResult:
    return RunResult(
        run_id=ctx.run_id, task_id=bundle.task.task_id, family=bundle.task.family, agent=agent.name,
        attempt=attempt, started_at=started, finished_at=now(), duration_s=round(time.monotonic() - t0, 3), **fields,
    )


def evaluate_task(ctx: Context, bundle: TaskBundle, agent: Agent, attempt: int = 1) -> RunResult:
    """One attempt of agent on one task; every failure is a status with a reason, never an exception."""
    task, started, t0 = bundle.task, now(), time.monotonic()
    done = lambda **kw: _result(ctx, bundle, agent, attempt, started, t0, **kw)  # noqa: E731
    if not task.validated:
        return done(status="skipped", reason="not validated: run `sweserve validate` first")
    if (why := skip_reason(task.resources.gpus, ctx.host_gpus)):
        return done(status="skipped", reason=why)
    gpu_ids = ctx.gpu_pool.acquire(task.resources.gpus)
    patch, run = "", None
    try:
        image = ctx.task_image(bundle)
        with ctx.sandbox(agent.prepare(ctx.builder, image), task.task_id, "candidate", task.resources, gpu_ids) as box:
            run = agent.solve(box, bundle)
            patch = extract_diff(box, task.base_commit)
        if run.error:
            return done(status="error", reason=f"agent: {run.error}"[:500], model_patch=patch, agent_run=run)
        return grade_patch(ctx, bundle, image, patch, gpu_ids, done, run)
    except (SweserveError, PatchError, RuntimeError, docker.errors.DockerException) as exc:
        return done(status="error", reason=f"{exc.__class__.__name__}: {exc}"[:500], model_patch=patch, agent_run=run)
    finally:
        ctx.gpu_pool.release(gpu_ids)


def grade_patch(ctx: Context, bundle: TaskBundle, image: str, patch: str, gpu_ids: list[str], done,
                run: AgentRun | None) -> RunResult:
    """Grade a candidate's diff in a fresh sandbox: test-file edits dropped, tests.patch applied, tests run."""
    task = bundle.task
    graded_patch, dropped = prepare_candidate_patch(bundle, ctx.profile(task.profile), patch)
    note = f"reset candidate edits to test files: {', '.join(dropped)}" if dropped else None
    with ctx.sandbox(image, task.task_id, "grade", task.resources, gpu_ids) as box:
        try:
            apply_patch(box, graded_patch, "candidate")
        except PatchError as exc:
            return done(status="patch_failed", reason=str(exc)[:500], model_patch=patch, agent_run=run)
        apply_patch(box, bundle.tests_patch, "tests")
        try:
            tests = run_tests(box, task, task.resources.test_timeout_s)
        except TestRunError as exc:
            return done(status="failed", reason=str(exc)[:500], model_patch=patch, agent_run=run)
    results = grade(task, tests.outcomes)
    return done(status="resolved" if results.resolved else "failed", reason=note, model_patch=patch,
                tests=results, agent_run=run)


def pending(bundles: list[TaskBundle], agent: Agent, attempts: int, results_path: Path,
            retry_errors: bool = False) -> list[tuple[TaskBundle, int]]:
    """(task, attempt) pairs not yet finished in results_path: what a resumed run still has to do."""
    done = latest(read_results(results_path))
    todo = []
    for bundle in bundles:
        for attempt in range(1, attempts + 1):
            prior = done.get((bundle.task.task_id, agent.name, attempt))
            if prior is None or (retry_errors and prior.status == "error"):
                todo.append((bundle, attempt))
    return todo


def run_evaluation(ctx: Context, bundles: list[TaskBundle], agent: Agent, results_path: Path, *,
                   attempts: int = 1, workers: int = 1, retry_errors: bool = False, on_result=None) -> list[RunResult]:
    """Evaluate every unfinished (task, attempt); each result is appended to results_path as it ends."""
    todo = pending(bundles, agent, attempts, results_path, retry_errors)
    writer = ResultsWriter(results_path)
    finished = []
    pool = ThreadPoolExecutor(max_workers=max(1, workers))
    try:
        futures = [pool.submit(evaluate_task, ctx, b, agent, a) for b, a in todo]
        for fut in as_completed(futures):
            result = fut.result()
            writer.write(result)
            finished.append(result)
            if on_result:
                on_result(result, len(finished), len(todo))
    except BaseException:
        ctx.cancel()
        raise
    finally:
        # on Ctrl-C nothing queued starts; what was running loses its containers to close() and is redone on resume
        pool.shutdown(wait=False, cancel_futures=True)
        ctx.close()
    return finished
