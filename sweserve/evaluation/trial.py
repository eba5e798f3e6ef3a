"""The one trial pipeline behind `validate`, `run` and `session`.

    reserve (host can run it? GPUs) → image → candidate phase (agent in a sandbox) → submission
      → grading (fresh sandbox: test edits dropped, submission + tests.patch applied, hidden tests run)
      → one RunResult, also written to the trial's folder

`reservation` is the one place that takes and gives back what a trial needs; `candidate_phase` and
`grade_submission` are the two halves every caller shares (validation grades the oracle's and the null
submission directly); `run_trial` turns every way a trial can end into exactly one result.
"""

from __future__ import annotations

import logging
import time
import traceback
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from sweserve.agents.base import Agent
from sweserve.environment.context import Context
from sweserve.environment.gpus import skip_reason
from sweserve.errors import InfraError, SweserveError, TrialSkipped
from sweserve.evaluation.grading import PatchError, TestRunError, grade
from sweserve.evaluation.submission import SubmissionRejected, take_submission
from sweserve.evaluation.verifier import Graded, verify
from sweserve.evaluation.trial_folder import TrialFolder
from sweserve.models import AgentRun, RunResult, Task, TaskBundle, now

log = logging.getLogger(__name__)
REASON_CHARS = 500


@contextmanager
def reservation(ctx: Context, task: Task) -> Iterator[list[str]]:
    """The GPUs a task needs, held for the trial and given back whatever happens; TrialSkipped if never."""
    if (why := skip_reason(task.resources.gpus, ctx.host_gpus)):
        raise TrialSkipped(why)
    gpu_ids = ctx.gpu_pool.acquire(task.resources.gpus)
    try:
        yield gpu_ids
    finally:
        ctx.gpu_pool.release(gpu_ids)


def candidate_phase(ctx: Context, bundle: TaskBundle, agent: Agent, image: str,
                    gpu_ids: list[str]) -> tuple[AgentRun, str]:
    """The agent works in a sandbox of the task image; its submission is taken when it stops."""
    task = bundle.task
    with ctx.sandbox(agent.prepare(ctx.builder, image), task.task_id, "candidate", task.resources, gpu_ids) as box:
        run = agent.solve(box, bundle)
        patch = take_submission(ctx, box, task, image)  # diffed outside the candidate's reach
    return run, patch


def grade_submission(ctx: Context, bundle: TaskBundle, image: str, patch: str, gpu_ids: list[str],
                     runs: int = 1, name: str = "candidate") -> Graded:
    """A fresh sandbox without network: the submission, resets to base, tests.patch, canaries, then the hidden
    tests `runs` times (see `verifier.py`).

    Raises PatchError (naming which patch) and TestRunError; the caller decides what they mean. The
    reference submissions validation grades (any name but "candidate") must not trip a canary.
    """
    task = bundle.task
    with ctx.sandbox(image, task.task_id, "grade", task.resources, gpu_ids) as box:
        graded = verify(box, bundle, ctx.profile(task.profile), patch, name, runs)
    if name != "candidate" and graded.tampered:
        raise TestRunError(f"the verifier's canaries failed on the {name} submission: {'; '.join(graded.tampered)}")
    return graded


@dataclass
class TrialRequest:
    """One (task, agent, attempt) to run, and where its folder goes: what an executor ships to a worker."""

    bundle: TaskBundle
    agent: Agent
    attempt: int
    folder: TrialFolder


def run_trial(ctx: Context, req: TrialRequest) -> RunResult:
    """One attempt of an agent on a task. Every way it can end is one result; only Ctrl-C escapes."""
    bundle, agent, task = req.bundle, req.agent, req.bundle.task
    started, t0 = now(), time.monotonic()
    fields: dict = {"agent_run": None, "model_patch": ""}
    try:
        if not task.validated:
            raise TrialSkipped("not validated: run `sweserve validate` first")
        with reservation(ctx, task) as gpu_ids:
            image = ctx.task_image(bundle)
            run, patch = candidate_phase(ctx, bundle, agent, image, gpu_ids)
            fields.update(agent_run=run, model_patch=patch)
            req.folder.write("submission.patch", patch)
            if run.log_tail:
                req.folder.write("agent.log", run.log_tail)
            if run.error:
                fields.update(status="error", error_kind="agent", reason=f"agent: {run.error}")
            else:
                fields.update(_graded(ctx, bundle, image, patch, gpu_ids, req.folder))
    except TrialSkipped as exc:
        fields.update(status="skipped", reason=str(exc))
    except SubmissionRejected as exc:  # the candidate's tree cannot be a submission (e.g. too large)
        fields.update(status="patch_failed", reason=f"submission: {exc}")
    except InfraError as exc:
        fields.update(status="error", error_kind=exc.kind, reason=str(exc))
    except SweserveError as exc:  # a precondition of this task, e.g. no clone known to build its image from
        fields.update(status="error", error_kind="task", reason=str(exc))
    except Exception as exc:  # noqa: BLE001 - a bug in sweserve: kept with its traceback, said loudly
        where = req.folder.write("traceback.txt", traceback.format_exc())
        log.error("internal error in %s #%d: %s: %s (traceback: %s)", task.task_id, req.attempt,
                  exc.__class__.__name__, exc, where)
        fields.update(status="error", error_kind="internal",
                      reason=f"internal error: {exc.__class__.__name__}: {exc} (traceback: {where})")
    if fields.get("reason"):
        fields["reason"] = fields["reason"][:REASON_CHARS]
    result = RunResult(
        run_id=ctx.run_id, task_id=task.task_id, family=task.family, agent=agent.name, attempt=req.attempt,
        started_at=started, finished_at=now(), duration_s=round(time.monotonic() - t0, 3),
        trial_dir=str(req.folder.path), agent_config_hash=agent.config_hash(), task_hash=bundle.content_hash(),
        **fields,
    )
    req.folder.write_result(result)
    return result


def _graded(ctx: Context, bundle: TaskBundle, image: str, patch: str, gpu_ids: list[str],
            folder: TrialFolder) -> dict:
    """The status fields of a graded submission; the full test output goes to the trial's folder."""
    try:
        graded = grade_submission(ctx, bundle, image, patch, gpu_ids)
    except PatchError as exc:
        if exc.which != "candidate":
            return {"status": "error", "error_kind": "task", "reason": f"{exc.which}.patch does not apply: {exc}"}
        return {"status": "patch_failed", "reason": str(exc)}
    except TestRunError as exc:
        if exc.output:
            folder.write("tests.log", exc.output)
        return {"status": "failed", "reason": str(exc)}
    (tests,) = graded.runs
    folder.write("tests.log", tests.output)
    results = grade(bundle.task, tests.outcomes)
    out = {"tests": results, "flags": graded.flags, "resets": [r.describe() for r in graded.resets]}
    if graded.tampered:
        return {**out, "status": "tampered", "reason": f"tampered: {'; '.join(graded.tampered)}"}
    if graded.flags and ctx.profile(bundle.task.profile).fail_on_flags:
        return {**out, "status": "tampered", "reason": f"flagged (the profile fails on flags): {graded.flags[0]}"}
    note = f"reset to base: {', '.join(r.describe() for r in graded.resets)}" if graded.resets else None
    return {**out, "status": "resolved" if results.resolved else "failed", "reason": note}


def trial_folder(results_path: Path, run_id: str, agent: Agent, bundle: TaskBundle, attempt: int) -> TrialFolder:
    return TrialFolder.for_trial(results_path, run_id, agent.name, bundle.task.task_id, attempt)


def evaluate_task(ctx: Context, bundle: TaskBundle, agent: Agent, attempt: int = 1,
                  results_path: Path | None = None) -> RunResult:
    """One trial with its folder beside results_path (default: the state dir), for callers without a run loop."""
    results_path = results_path or ctx.state_dir / "results.jsonl"
    return run_trial(ctx, TrialRequest(bundle, agent, attempt, trial_folder(results_path, ctx.run_id, agent, bundle,
                                                                            attempt)))
