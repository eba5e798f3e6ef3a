"""The one trial pipeline behind `validate`, `run` and `session`.

    reserve (host can run it? GPUs) → image → candidate phase (agent in a sandbox)
      → submission (its tree diffed in a fresh offline sandbox, never by the candidate's own git)
      → grading (fresh offline sandbox: submission applied, test paths and runner hooks reset to base,
        tests.patch and canaries added, hidden tests run isolated, outcomes streamed)
      → one RunResult, also written to the trial's folder

`reservation` is the one place that takes and gives back what a trial needs; `candidate_phase` and
`grade_submission` are the two halves every caller shares (validation grades the oracle's and the null
submission directly); `run_trial` turns every way a trial can end into exactly one result.

What `run_trial` records is bounded and clean whatever the candidate does: a submission over
`max_submission_bytes` is an error (`submission too large`) and is not kept; reasons come from fixed
templates (never hidden-test output) and are capped; the agent's secrets are redacted from every field and
file (a submission that held one is flagged `secret_in_submission`).
"""

from __future__ import annotations

import json
import logging
import time
import traceback
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from sweserve.agents.base import Agent
from sweserve.environment.context import Context
from sweserve.environment.egress import egress_for
from sweserve.environment.gpus import skip_reason
from sweserve.errors import InfraError, LimitExceeded, SweserveError, TrialSkipped
from sweserve.evaluation.grading import PatchError, TestRunError, grade
from sweserve.evaluation.submission import SubmissionRejected, take_submission
from sweserve.evaluation.verifier import Graded, verify
from sweserve.evaluation.trial_folder import OUTCOMES_FILE, TrialFolder
from sweserve.models import AgentRun, RunResult, Task, TaskBundle, now

log = logging.getLogger(__name__)
REASON_CHARS = 300
MAX_SUBMISSION_BYTES = 5 * 2**20  # default; `sweserve run --max-submission-mb`
MIN_SECRET_CHARS = 4  # shorter values would redact half of every record


NOT_VALIDATED = "not validated: run `sweserve validate` first"


def cannot_run(ctx: Context, task: Task) -> str | None:
    """Why a trial of the task is skipped here before anything starts (not validated, more GPUs than the host
    has), or None: what `run_trial` skips on, and what `session` refuses on before a person sits down."""
    if not task.validated:
        return NOT_VALIDATED
    return skip_reason(task.resources.gpus, ctx.host_gpus) if ctx.assigned_gpus is None else None


@contextmanager
def reservation(ctx: Context, task: Task) -> Iterator[list[str]]:
    """The GPUs a task needs, held for the trial and given back whatever happens; TrialSkipped if never.

    When a scheduler assigned this worker its devices (`ctx.assigned_gpus`, e.g. Ray's), those are used as they
    are, never the host's pool."""
    if ctx.assigned_gpus is not None:
        if task.resources.gpus > len(ctx.assigned_gpus):
            raise InfraError("docker", f"needs {task.resources.gpus} GPUs, scheduler assigned {ctx.assigned_gpus}")
        yield ctx.assigned_gpus[:task.resources.gpus]
        return
    if (why := skip_reason(task.resources.gpus, ctx.host_gpus)):
        raise TrialSkipped(why)
    gpu_ids = ctx.gpu_pool.acquire(task.resources.gpus)
    try:
        yield gpu_ids
    finally:
        ctx.gpu_pool.release(gpu_ids)


def candidate_phase(ctx: Context, bundle: TaskBundle, agent: Agent, image: str,
                    gpu_ids: list[str], folder: TrialFolder | None = None) -> tuple[AgentRun, str]:
    """The agent works in a sandbox of the task image; its submission is taken when it stops.

    An agent whose config names model endpoints (`egress`) works behind an egress proxy; its audit log goes
    to the trial's folder as egress.log.
    """
    task = bundle.task
    audit = folder.path / "egress.log" if folder else None
    with (ctx.sandbox(agent.prepare(ctx.builder, image), task.task_id, "candidate", task.resources, gpu_ids) as box,
          egress_for(ctx, box, agent, audit) as agent_box):
        run = agent.solve(agent_box, bundle)
        patch = take_submission(ctx, box, task, image)  # diffed outside the candidate's reach
    return run, patch


def grade_submission(ctx: Context, bundle: TaskBundle, image: str, patch: str, gpu_ids: list[str],
                     runs: int = 1, name: str = "candidate", seed: int | None = None) -> Graded:
    """A fresh sandbox without network: the submission, resets to base, tests.patch, canaries, then the hidden
    tests `runs` times (see `verifier.py`).

    Raises PatchError (naming which patch) and TestRunError; the caller decides what they mean. The
    reference submissions validation grades (any name but "candidate") must not trip a canary; `seed` gives
    validation the same grading plan (twin candidates) in both states.
    """
    task = bundle.task
    with ctx.sandbox(image, task.task_id, "grade", task.resources, gpu_ids) as box:
        graded = verify(box, bundle, ctx.profile(task.profile), patch, name, runs, seed)
    if name != "candidate" and graded.tampered:
        raise TestRunError(f"the verifier's canaries failed on the {name} submission",
                           detail="; ".join(graded.tampered))
    return graded


@dataclass
class TrialRequest:
    """One (task, agent, attempt) to run, and where its folder goes: what an executor ships to a worker."""

    bundle: TaskBundle
    agent: Agent
    attempt: int
    folder: TrialFolder
    max_submission_bytes: int = MAX_SUBMISSION_BYTES


class Redactor:
    """Replaces an agent's secrets (values it was given through `env:`, its API key) in everything recorded."""

    def __init__(self, secrets: list[str]):
        self.secrets = sorted({s for s in secrets if s and len(s) >= MIN_SECRET_CHARS}, key=len, reverse=True)

    def holds_secret(self, text: str) -> bool:
        return any(s in text for s in self.secrets)

    def __call__(self, text: str) -> str:
        for value in self.secrets:
            text = text.replace(value, "***")
        return text


@dataclass(frozen=True)
class RedactedFolder:
    """A TrialFolder whose files never hold the agent's secrets."""

    folder: TrialFolder
    redact: Redactor

    @property
    def path(self) -> Path:
        return self.folder.path

    def write(self, name: str, text: str) -> Path:
        return self.folder.write(name, self.redact(text))

    def write_result(self, result: RunResult) -> Path:
        return self.folder.write_result(result)


def agent_secrets(agent: Agent) -> list[str]:
    secrets = getattr(agent, "secrets", None)
    return list(secrets()) if callable(secrets) else []


def run_trial(ctx: Context, req: TrialRequest) -> RunResult:
    """One attempt of an agent on a task. Every way it can end is one result; only Ctrl-C escapes."""
    bundle, agent, task = req.bundle, req.agent, req.bundle.task
    started, t0 = now(), time.monotonic()
    redact = Redactor(agent_secrets(agent))
    folder = RedactedFolder(req.folder, redact)
    fields: dict = {"agent_run": None, "model_patch": "", "flags": []}
    try:
        if (why := cannot_run(ctx, task)):
            raise TrialSkipped(why)
        with reservation(ctx, task) as gpu_ids:
            image = ctx.task_image(bundle)
            run, patch = candidate_phase(ctx, bundle, agent, image, gpu_ids, folder)
            fields.update(agent_run=run, flags=list(run.flags))
            size = len(patch.encode("utf-8", "replace"))
            if size > req.max_submission_bytes:
                raise LimitExceeded(f"submission too large: {size / 2**20:.1f} MB, over the "
                                    f"{req.max_submission_bytes / 2**20:g} MB limit")
            if redact.holds_secret(patch):
                fields["flags"].append("secret_in_submission")
            fields.update(model_patch=redact(patch))
            folder.write("submission.patch", patch)
            if run.log_tail:
                folder.write("agent.log", run.log_tail)
            if run.keystrokes or run.screen:  # a human session's terminal, recorded on the host
                folder.write("keystrokes.txt", run.keystrokes)
                folder.write("terminal.txt", run.screen)
            if run.error:
                fields.update(status="error", error_kind="agent", reason=f"agent: {run.error}")
            elif run.exit_reason == "patch_failed":  # a given patch (predictions) that did not apply
                fields.update(status="patch_failed", reason=f"patch does not apply: {run.log_tail.strip()}")
            else:  # an empty submission is graded too: the null control must go through the same verifier
                graded = _graded(ctx, bundle, image, patch, gpu_ids, folder)
                fields["flags"] += graded.pop("flags", [])  # the verifier's flags join the candidate phase's
                fields.update(graded)
                if not patch.strip() and fields["status"] == "failed" and not fields.get("reason"):
                    fields["reason"] = "empty patch"
    except TrialSkipped as exc:
        fields.update(status="skipped", reason=str(exc))
    except SubmissionRejected as exc:  # the candidate's tree cannot be a submission (e.g. too large)
        fields.update(status="patch_failed", reason=f"submission: {exc}")
    except InfraError as exc:
        fields.update(status="error", error_kind=exc.kind, reason=str(exc))
    except SweserveError as exc:  # a precondition of this task, e.g. no clone known to build its image from
        fields.update(status="error", error_kind="task", reason=str(exc))
    except Exception as exc:  # noqa: BLE001 - a bug in sweserve: kept with its traceback, said loudly
        where = write_quietly(folder, "traceback.txt", traceback.format_exc())
        log.error("internal error in %s #%d: %s: %s (traceback: %s)", task.task_id, req.attempt,
                  exc.__class__.__name__, redact(str(exc))[:REASON_CHARS], where)
        fields.update(status="error", error_kind="internal",
                      reason=f"internal error: {exc.__class__.__name__}: {exc} (traceback: {where})")
    return _record(ctx, req, fields, started, t0, redact, folder)


def _record(ctx: Context, req: TrialRequest, fields: dict, started, t0: float, redact: Redactor,
            folder: RedactedFolder) -> RunResult:
    """The trial's one result, redacted and bounded; written to its folder if the folder can be written."""
    bundle, agent, task = req.bundle, req.agent, req.bundle.task
    if fields.get("reason"):
        fields["reason"] = clean_reason(redact(fields["reason"]))
    run: AgentRun | None = fields.get("agent_run")
    if run is not None:
        fields["agent_run"] = run.model_copy(update={
            "log_tail": redact(run.log_tail), "transcript": redact(run.transcript),
            "keystrokes": redact(run.keystrokes), "screen": redact(run.screen),
            "error": redact(run.error) if run.error else run.error})
    fields["flags"] = sorted({redact(f) for f in fields.get("flags") or []})  # they name the candidate's files
    if fields.get("resets"):
        fields["resets"] = [redact(r) for r in fields["resets"]]
    result = RunResult(
        run_id=ctx.run_id, task_id=task.task_id, family=task.family, agent=agent.name, attempt=req.attempt,
        started_at=started, finished_at=now(), duration_s=round(time.monotonic() - t0, 3),
        trial_dir=str(req.folder.path), agent_config_hash=agent.config_hash(), task_hash=bundle.content_hash(),
        **fields,
    )
    try:
        folder.write_result(result)
    except OSError as exc:  # the index line still records the trial
        log.error("could not write %s's result.json: %s", task.task_id, exc)
    return result


def clean_reason(text: str) -> str:
    """A reason as results and reports show it: one line, printable, capped."""
    line = " ".join(text.split())
    line = "".join(ch if ch.isprintable() else "?" for ch in line)
    return line if len(line) <= REASON_CHARS else line[:REASON_CHARS - 1] + "…"


def write_quietly(folder, name: str, text: str) -> str:
    """Write name into a (possibly redacting) trial folder: its path, or why it could not be written; never raises."""
    try:
        return str(folder.write(name, text))
    except OSError as exc:
        return f"not written: {exc.strerror}"


def run_trial_safely(ctx: Context, req: TrialRequest) -> RunResult:
    """`run_trial`, and if even it fails (a bug, SystemExit from an agent …) an internal error result:
    every (task, attempt) handed to a run ends in exactly one result. Only Ctrl-C goes through."""
    t0, started = time.monotonic(), now()
    try:
        return run_trial(ctx, req)
    except KeyboardInterrupt:
        raise
    except BaseException as exc:  # noqa: BLE001 - recorded, never lost
        log.error("trial %s #%d failed outside its pipeline: %s", req.bundle.task.task_id, req.attempt,
                  exc.__class__.__name__)
        fields = {"status": "error", "error_kind": "internal", "agent_run": None, "model_patch": "", "flags": [],
                  "reason": f"internal error: {exc.__class__.__name__} outside the trial pipeline"}
        return _record(ctx, req, fields, started, t0, Redactor(agent_secrets(req.agent)),
                       RedactedFolder(req.folder, Redactor([])))


def _graded(ctx: Context, bundle: TaskBundle, image: str, patch: str, gpu_ids: list[str],
            folder: RedactedFolder) -> dict:
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
        return {"status": "failed", "reason": hidden_tests_reason(exc)}
    (tests,) = graded.runs
    folder.write("tests.log", tests.output)
    folder.write(OUTCOMES_FILE, json.dumps({"outcomes": tests.outcomes}, indent=1) + "\n")  # for `report --regrade`
    results = grade(bundle.task, tests.outcomes)
    out = {"tests": results, "flags": graded.flags, "resets": [r.describe() for r in graded.resets]}
    if graded.tampered:
        return {**out, "status": "tampered", "reason": f"tampered: {'; '.join(graded.tampered)}"}
    if graded.flags and ctx.profile(bundle.task.profile).fail_on_flags:
        return {**out, "status": "tampered", "reason": f"flagged (the profile fails on flags): {graded.flags[0]}"}
    note = f"reset to base: {', '.join(r.describe() for r in graded.resets)}" if graded.resets else None
    return {**out, "status": "resolved" if results.resolved else "failed", "reason": note}


def hidden_tests_reason(exc: TestRunError) -> str:
    """Why the hidden tests gave no outcomes: the raiser's fixed phrasing, never any of their output."""
    return exc.reason


def trial_folder(results_path: Path, run_id: str, agent: Agent, bundle: TaskBundle, attempt: int) -> TrialFolder:
    return TrialFolder.for_trial(results_path, run_id, agent.name, bundle.task.task_id, attempt)


def evaluate_task(ctx: Context, bundle: TaskBundle, agent: Agent, attempt: int = 1,
                  results_path: Path | None = None) -> RunResult:
    """One trial with its folder beside results_path (default: the state dir), for callers without a run loop."""
    results_path = results_path or ctx.state_dir / "results.jsonl"
    return run_trial(ctx, TrialRequest(bundle, agent, attempt, trial_folder(results_path, ctx.run_id, agent, bundle,
                                                                            attempt)))
