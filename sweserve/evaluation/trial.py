"""The one trial pipeline behind `validate`, `run` and `session`.

    reserve (host can run it? GPUs) → inputs (profile, image spec, clone: read once) → image
      → candidate phase (agent in a sandbox; its tree copied out by the backend)
      → submission (the tree put as inert data into a fresh offline grade sandbox, which took the harness and
        its first look, and had its grading plan staged, while the candidate worked; diffed there by the
        image's git, never the candidate's, and removed before anything else runs there; the patch's apply
        in the same exec)
      → grading (in that sandbox, one exec: test paths and runner hooks reset to base, tests.patch added,
        the planted files (graded tests, twins, canaries) moved into place, hidden tests run isolated,
        outcomes streamed)
      → one RunResult, also written to the trial's folder

`reservation` is the one place that takes and gives back what a trial needs; `solve_and_grade` (the candidate
phase, then the submission and `grade_in` in one grade sandbox) is the pipeline every candidate goes through: run, session, predictions and
validation's null and oracle alike; `run_trial` turns every way a trial can end into exactly one result, built
in one place (`record_result`), and every bug into one error through one path (`internal_error`).

What `run_trial` records is bounded and clean whatever the candidate does: a submission over
`max_submission_bytes` is an error (`submission too large`) and is not kept; reasons come from fixed
templates (never hidden-test output) and are capped; the agent's secrets are redacted from every field and
file (a submission that held one is flagged `secret_in_submission`).
"""

from __future__ import annotations

import contextlib
import json
import logging
import time
import traceback
from collections.abc import Callable, Iterator, Mapping
from concurrent.futures import Future, ThreadPoolExecutor, wait
from contextlib import contextmanager
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path
from typing import IO, Any, Protocol

from sweserve.agents.base import IN_BOX, Agent, Redactor
from sweserve.dataset.profiles import RepoProfile
from sweserve.dataset.project import TaskInputs
from sweserve.environment.gpus import skip_reason
from sweserve.environment.sandbox import Sandbox
from sweserve.errors import InfraError, LimitExceeded, SweserveError, TrialSkipped
from sweserve.evaluation.context import Context
from sweserve.evaluation.grading import PatchError, TestRunError, grade
from sweserve.evaluation.prerequisites import check_prerequisites
from sweserve.evaluation.submission import SubmissionRejected, copy_tree, diff_then
from sweserve.evaluation.trial_folder import OUTCOMES_FILE, TrialFolder
from sweserve.evaluation.twins import RealAt
from sweserve.evaluation.verifier import Applied, Graded, Staging, apply_and_list, joined, prepare, stage, verify
from sweserve.models import AgentRun, Metered, RunResult, Task, TaskBundle, now

log = logging.getLogger(__name__)
REASON_CHARS = 300
TRACEBACK_FILE = "traceback.txt"
MAX_SUBMISSION_BYTES = 5 * 2**20  # default; `sweserve run --max-submission-mb`


NOT_VALIDATED = "not validated: run `sweserve validate` first"


def cannot_run(ctx: Context, task: Task) -> str | None:
    """Why a trial of the task is skipped here before anything starts (not validated, more GPUs than the host
    has), or None: what `run_trial` skips on, and what `session` refuses on before a person sits down."""
    if not task.validated:
        return NOT_VALIDATED
    host = ctx.host
    return skip_reason(task.resources.gpus, host.host_gpus) if host.assigned_gpus is None else None


@contextmanager
def reservation(ctx: Context, task: Task) -> Iterator[list[str]]:
    """The GPUs a task needs, held for the trial and given back whatever happens; TrialSkipped if never.

    When a scheduler assigned this worker its devices (`host.assigned_gpus`, e.g. Ray's), those are used as they
    are, never the host's pool."""
    host = ctx.host
    if host.assigned_gpus is not None:
        if task.resources.gpus > len(host.assigned_gpus):
            raise InfraError("docker", f"needs {task.resources.gpus} GPUs, scheduler assigned {host.assigned_gpus}")
        yield host.assigned_gpus[:task.resources.gpus]
        return
    if (why := skip_reason(task.resources.gpus, host.host_gpus)):
        raise TrialSkipped(why)
    gpu_ids = host.gpu_pool.acquire(task.resources.gpus)
    try:
        yield gpu_ids
    finally:
        host.gpu_pool.release(gpu_ids)


def candidate_phase(ctx: Context, bundle: TaskBundle, agent: Agent, image: str, gpu_ids: list[str],
                    folder: "TrialFolder | RedactedFolder | None" = None) -> tuple[AgentRun, IO[bytes], Sandbox]:
    """The agent works in a sandbox of the task image; its tree is copied out by the backend when it stops.

    Returns the agent's run, the tree (`submission.copy_tree`) and the candidate's sandbox, which the caller
    removes (`solve_and_grade` does it while the tree is diffed, and waits for it before any test runs).
    An agent whose config names model endpoints (`egress`) works behind an egress proxy; its audit log goes
    to the trial's folder as egress.log. Any other agent's sandbox is on no network at all (it reaches nothing
    either way; without one, there is none to create and remove).
    """
    task = bundle.task
    audit = folder.path / "egress.log" if folder else None
    box = ctx.sandbox(agent.prepare(ctx.host.builder, image), task.task_id, "candidate", task.resources, gpu_ids,
                      offline=not egress_of(agent))
    try:
        with agent_sandbox(box, agent, audit) as agent_box:
            run = agent.solve(agent_box, bundle)
            # killed from the host first: a process the agent left running could rewrite files while they are
            # copied and break the copy off, an error `run --retry-errors` would redo (a free resample for an
            # agent that doubts its fix), or call the model after the meter is read; its files are still read out
            box.kill()
            run = with_meter(run, getattr(agent_box, "metered", lambda: None)())
        tree = copy_tree(box)  # the backend's copy: nothing in the candidate's sandbox takes part
    except BaseException:
        with contextlib.suppress(Exception):  # the error that ended the candidate phase is the one to report
            box.remove()
        raise
    return run, tree, box


@contextmanager
def agent_sandbox(box: Sandbox, agent: Agent, audit: Path | None) -> Iterator[Sandbox]:
    """The sandbox the agent works in: `box` itself, or behind an egress proxy when its config names model
    endpoints (`egress`; `closed_book` strips hosted tools and refuses any model but its `models`)."""
    allow = egress_of(agent)
    if not allow:
        yield box
        return
    with box.attach_egress(allow, bool(getattr(agent, "closed_book", False)), audit,
                           models=list(getattr(agent, "models", None) or [])) as proxied:
        yield proxied


def _before_last_answers(meter: Metered) -> list[tuple[int, int]]:
    """The meter's counts less its last answer, less its last two, ... (as many as it lists one by one)."""
    answers = meter.recent or [(meter.last_prompt_tokens, meter.last_completion_tokens)]
    out, prompt, completion = [], meter.prompt_tokens, meter.completion_tokens
    for p, c in reversed(answers):
        prompt, completion = prompt - p, completion - c
        out.append((prompt, completion))
    return out


def with_meter(run: AgentRun, meter: Metered | None) -> AgentRun:
    """The run with what its egress proxy counted of the model's answers (`Metered`). A complete meter's counts
    are the run's tokens (`usage_from` proxy): the agent's own record is written in its sandbox, and a forged one
    (fewer tokens, a lower cost) would rank it on the board. A cost the record states is kept only when its
    tokens agree with the meter's; a record that disagrees is flagged `usage_disagrees`. An incomplete meter (a
    call it could not read: an agent can make one on purpose) is still a floor: a record below it is flagged,
    its cost dropped and its counts raised to the floor."""
    if meter is None:
        return run
    update: dict = {"metered": meter}
    counted = (meter.prompt_tokens, meter.completion_tokens)
    said = (run.prompt_tokens, run.completion_tokens)
    # a run the time limit cut: a record saved after each whole step (mini-swe-agent's) lacks the step's answers
    # when the cut fell in the step's command: the last one (red team 16e, R16e-3), or the last few of a step of
    # parallel calls (red team 18b, R18b-6). Its tokens are still the meter's and its cost dropped, but it is no
    # dispute; short by anything but the meter's last answers, it is
    cut_short = run.exit_reason == "timed_out" and meter.complete and said in _before_last_answers(meter)
    if cut_short:
        update["cost_usd"] = None
    elif run.usage_from == "agent" and (said != counted if meter.complete else (said[0] < counted[0]
                                                                               or said[1] < counted[1])):
        update["flags"] = [*run.flags, f"usage_disagrees: the agent's record says {said[0]} prompt and {said[1]} "
                           f"completion tokens, its proxy counted {counted[0]} and {counted[1]} from the model's "
                           "answers" + ("" if meter.complete else " it could read")]
        update["cost_usd"] = None
    if meter.complete:
        update |= {"prompt_tokens": counted[0], "completion_tokens": counted[1], "usage_from": "proxy"}
    else:  # a floor for every run, a record of the agent's or none (red team 17b, R17b-2: no record kept 0 tokens)
        update |= {"prompt_tokens": max(said[0], counted[0]), "completion_tokens": max(said[1], counted[1])}
    return run.model_copy(update=update)


def egress_of(agent: Agent) -> list[str]:
    """The model endpoints an agent's sandbox may reach through an egress proxy (none for most agents)."""
    return list(getattr(agent, "egress", None) or [])


def grade_submission(ctx: Context, bundle: TaskBundle, image: str, patch: str, gpu_ids: list[str],
                     runs: int = 1, name: str = "candidate", profile: RepoProfile | None = None,
                     seed: int | None = None) -> Graded:
    """A fresh sandbox without network: the submission, resets to base, tests.patch, canaries, then the hidden
    tests `runs` times (see `verifier.py`). `profile` is the task's, as the trial resolved it. For a patch
    graded alone (signals); a trial grades in the sandbox its submission was diffed in (`solve_and_grade`).

    Raises PatchError (naming which patch) and TestRunError; the caller decides what they mean. The
    reference submissions validation grades (any name but "candidate") must not trip a canary; `seed` gives
    validation the same grading plan (twin candidates) in both states.
    """
    task = bundle.task
    with ctx.sandbox(image, task.task_id, "grade", task.resources, gpu_ids) as box:
        return grade_in(box, bundle, profile or ctx.profile(task.profile), patch, runs, name, seed)


def grade_in(box: Sandbox, bundle: TaskBundle, profile: RepoProfile, patch: str, runs: int = 1,
             name: str = "candidate", seed: int | None = None, taken: Applied | None = None,
             staged: Staging | None = None, repository: Mapping[str, frozenset[Decimal]] | None = None,
             real_at: RealAt | None = None) -> Graded:
    """`verify` in a fresh grade sandbox (the first look taken and the patch applied there when `taken`, the
    plan made and its first run staged there when `staged`); a reference submission that trips a canary is an
    error."""
    graded = verify(box, bundle, profile, patch, name, runs, seed, taken, staged, repository, real_at)
    if name != "candidate" and graded.tampered:
        raise TestRunError(f"the verifier's canaries failed on the {name} submission",
                           detail="; ".join(graded.tampered))
    return graded


@dataclass
class Solved:
    """What one pass through the pipeline produced: the agent's run, its submission, and the grading (None when
    the agent failed or its given patch did not apply: nothing to grade)."""

    run: AgentRun
    patch: str
    graded: Graded | None


def solve_and_grade(ctx: Context, bundle: TaskBundle, agent: Agent, inputs: TaskInputs, image: str,
                    gpu_ids: list[str], folder: "RedactedFolder | None" = None, runs: int = 1,
                    name: str = "candidate", on_submission: Callable[[AgentRun, str], None] | None = None,
                    seed: int | None = None, real_at: RealAt | None = None) -> Solved:
    """The one pipeline every candidate goes through (run, session, predictions, and validation's null and
    oracle): the agent works in a sandbox of `image`; its tree is copied out and diffed, as inert data, in a
    fresh offline grade sandbox of `image` (`submission.diff_then`, which removes it there);
    `on_submission` sees the patch (and may refuse it by raising); then the patch is graded `runs` times as
    `name` in that same sandbox. Raises what `grade_in` raises. `seed`, `real_at`: validation's plan (`verify`).

    Two containers, overlapped where order allows: the grade sandbox starts while the candidate works, and
    takes the harness and its first look then (`verifier.prepare`, one exec: the runner's digest, the image's
    modules, tests.patch's paths, the hidden files read from the image's repository; the candidate has no way
    to that sandbox); the grading plan is made from those files and its first run staged there, root's alone
    (`verifier.stage`: one copy). The candidate's sandbox is removed while the tree is diffed, and is gone
    before any hidden test runs. After the candidate stops: the tree in (one copy, while the first look may
    still run), one exec once the look has ended (the tree diffed, removed and checked gone, then the patch's
    `git apply`, `verifier.apply_and_list`), and one exec for the resets, tests.patch, the planted files and
    the hidden tests (`grading.run_tests`)."""
    task = bundle.task
    with ThreadPoolExecutor(4, thread_name_prefix=f"trial-{task.task_id}") as pool:
        grade_box = pool.submit(ctx.sandbox, image, task.task_id, "grade", task.resources, gpu_ids)
        prepared = pool.submit(lambda: prepare(grade_box.result(), bundle))
        staged = pool.submit(lambda: stage(grade_box.result(), bundle, inputs.profile, prepared.result(), name,
                                           seed, inputs.repository, real_at))

        def then(patch_path: str) -> str:
            """The apply, after the staged first run unpacked (when it can go inside this exec)."""
            try:
                staging = staged.result()
            except Exception:  # noqa: BLE001 - said where the grading asks for it (`staged.result()` below)
                staging = None
            if staging is None or staging.unpack is None:
                return apply_and_list(bundle, patch_path)
            staging.placed = True  # the exec fails (NO_UNPACK) if it is not: no grading follows then
            return f"{staging.unpack}; {apply_and_list(bundle, patch_path)}"
        try:
            run, tree, candidate = candidate_phase(ctx, bundle, agent, image, gpu_ids, folder)
            gone = pool.submit(candidate.remove)
            try:
                with tree:
                    box = grade_box.result()
                    patch_path = f"{IN_BOX}/{name}.patch"
                    # the tree goes in as inert data while the first look runs; the look ends before the apply
                    patch, code, said = diff_then(box, tree, task.base_commit, patch_path,
                                                  lambda: then(patch_path), lambda: wait([prepared]))
            finally:
                gone.result()  # the candidate's sandbox is gone before anything else happens
            if on_submission is not None:
                on_submission(run, patch)
            if run.error or run.exit_reason == "patch_failed":
                return Solved(run, patch, None)
            # an empty submission is graded too: the null control must go through the same verifier
            look = prepared.result()  # the harness went in and took its first look (else its error)
            return Solved(run, patch, grade_in(box, bundle, inputs.profile, patch, runs, name, seed,
                                               joined(look, Applied(code, said)), staged.result(), inputs.repository,
                                               real_at))
        finally:
            _discard_started(ctx, grade_box)


def _discard_started(ctx: Context, box: "Future[Sandbox]") -> None:
    """Remove a sandbox started in the background once its start has ended (a failed start left nothing),
    without waiting for dockerd to delete it: nothing more runs in it, and the verdict is known. The host
    waits for the removal when it settles or closes (`evaluate_task` and `run_evaluation` settle)."""
    try:
        started = box.result()
    except BaseException:  # noqa: BLE001 - its start failed: the error went to whoever asked for it, or no one
        return
    ctx.discard(started)


@dataclass
class TrialRequest:
    """One (task, agent, attempt) to run, and where its folder goes: what an executor ships to a worker."""

    bundle: TaskBundle
    agent: Agent
    attempt: int
    folder: TrialFolder
    max_submission_bytes: int = MAX_SUBMISSION_BYTES


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

    def submitted(run: AgentRun, patch: str) -> None:
        """The submission recorded before it is graded; one over the limit is an error, neither graded nor kept."""
        fields.update(agent_run=run, flags=list(run.flags))
        size = len(patch.encode("utf-8", "replace"))
        if size > req.max_submission_bytes:
            raise LimitExceeded(f"submission too large: {size / 2**20:.1f} MB, over the "
                                f"{req.max_submission_bytes / 2**20:g} MB limit")
        if redact.holds_secret(patch):
            fields["flags"].append("secret_in_submission")
        fields.update(model_patch=redact(patch))
        folder.write("submission.patch", patch)
        for name, text in {"agent.log": run.log_tail, **run.records}.items():  # the agent's own files
            if text:
                folder.write(name, text)
        if run.keystrokes or run.screen:  # a human session's terminal, recorded on the host
            folder.write("keystrokes.txt", run.keystrokes)
            folder.write("terminal.txt", run.screen)

    try:
        if (why := cannot_run(ctx, task)):
            raise TrialSkipped(why)
        check_prerequisites(ctx, bundle)  # seconds, no disk: before any image is built
        with reservation(ctx, task) as gpu_ids:
            inputs = ctx.inputs(bundle)
            image = ctx.image(inputs)
            graded = _graded(bundle, folder, lambda: solve_and_grade(
                ctx, bundle, agent, inputs, image, gpu_ids, folder, on_submission=submitted))
            fields["flags"] += graded.pop("flags", [])  # the verifier's flags join the candidate phase's
            fields.update(graded)
    except TrialSkipped as exc:
        fields.update(status="skipped", reason=str(exc))
    except SubmissionRejected as exc:  # the candidate's tree cannot be a submission (e.g. too large)
        fields.update(status="patch_failed", reason=f"submission: {exc}")
    except InfraError as exc:
        fields.update(status="error", error_kind=exc.kind, reason=str(exc))
    except SweserveError as exc:  # a precondition of this task, e.g. no clone known to build its image from
        fields.update(status="error", error_kind="task", reason=str(exc))
    except Exception as exc:  # noqa: BLE001 - a bug in sweserve: kept with its traceback, said loudly
        fields.update(status="error", error_kind="internal",
                      reason=internal_error(folder, f"in {task.task_id} #{req.attempt}", exc, redact))
    return record_result(ctx.run_id, req, fields, started, t0, redact, folder)


def record_result(run_id: str, req: TrialRequest, fields: dict, started=None, t0: float | None = None,
                  redact: Redactor | None = None, folder: RedactedFolder | None = None) -> RunResult:
    """The one place a RunResult is built: redacted and bounded (reasons one line of at most REASON_CHARS),
    and written to the trial's folder if the folder can be written. `fields` are the result's own (status,
    reason, error_kind, tests, …); a trial that never ran (its node lost, no node can run it) passes only those."""
    bundle, agent, task = req.bundle, req.agent, req.bundle.task
    started = started or now()
    redact = redact or Redactor(agent_secrets(agent))
    folder = folder or RedactedFolder(req.folder, redact)
    fields = {"agent_run": None, "model_patch": "", "flags": [], **fields}
    if fields.get("reason"):
        fields["reason"] = clean_reason(redact(fields["reason"]))
    run: AgentRun | None = fields.get("agent_run")
    if run is not None:
        fields["agent_run"] = run.model_copy(update={
            "log_tail": redact(run.log_tail), "transcript": redact(run.transcript),
            "keystrokes": redact(run.keystrokes), "screen": redact(run.screen),
            "untyped_history": [redact(c) for c in run.untyped_history],
            "error": redact(run.error) if run.error else run.error})
    fields["flags"] = sorted({redact(f) for f in fields.get("flags") or []})  # they name the candidate's files
    if fields.get("resets"):
        fields["resets"] = [redact(r) for r in fields["resets"]]
    result = RunResult(
        run_id=run_id, task_id=task.task_id, family=task.family, agent=agent.name, attempt=req.attempt,
        started_at=started, finished_at=now(), duration_s=round(time.monotonic() - t0, 3) if t0 is not None else 0.0,
        trial_dir=str(req.folder.path), agent_config_hash=agent.config_hash(), task_hash=bundle.content_hash(),
        task_ready=ready_now(bundle), **fields,
    )
    try:
        folder.write_result(result)
    except OSError as exc:  # the index line still records the trial
        log.error("could not write %s's result.json: %s", task.task_id, exc)
    return result


def ready_now(bundle: TaskBundle) -> bool:
    """Whether the task is ready as `run` judges it (`readiness.why_not_ready`): recorded ready and still ready
    assessed now. The recorded flag alone called a task edited since its record (left out by default, taken
    with --include-unready) ready, and `report` then counted it among the ready (red team 15c, R15c-2)."""
    from sweserve.dataset.readiness import why_not_ready

    try:
        return why_not_ready(bundle.task, bundle.instruction) is None
    except Exception:  # noqa: BLE001 - a result is recorded whatever happens; unknown readiness is not ready
        log.exception("could not assess %s's readiness", bundle.task.task_id)
        return False


class Writable(Protocol):
    def write(self, name: str, text: str) -> Any: ...


def internal_error(folder: Writable, what: str, exc: BaseException,
                   redact: Callable[[str], str] = lambda text: text) -> str:
    """The one path of a bug in sweserve (inside a trial, a validation, outside its pipeline): its traceback saved
    in `folder`, one line logged, and the reason its error result carries, naming where the traceback went."""
    where = write_quietly(folder, TRACEBACK_FILE, traceback.format_exc())
    line = f"{exc.__class__.__name__}: {redact(str(exc))[:REASON_CHARS]}"
    log.error("internal error %s: %s (traceback: %s)", what, line, where)
    return f"internal error: {line} (traceback: {where})"


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
        redact = Redactor(agent_secrets(req.agent))
        why = internal_error(RedactedFolder(req.folder, redact),
                             f"in {req.bundle.task.task_id} #{req.attempt} (outside the trial pipeline)", exc, redact)
        return record_result(ctx.run_id, req, {"status": "error", "error_kind": "internal", "reason": why},
                             started, t0, redact)


def _graded(bundle: TaskBundle, folder: RedactedFolder, solve: Callable[[], Solved]) -> dict:
    """The status fields of a trial's pipeline (`solve`): the agent's failure, a patch that did not apply, or the
    grading; the full test output goes to the trial's folder."""
    try:
        solved = solve()
    except PatchError as exc:
        if exc.which == "tests":
            # the resets and tests.patch, which validation ran on the null and the oracle submissions, failed on
            # this one in a fresh grade sandbox: the submission's doing (as an error it was redone by
            # --retry-errors, a resample the submission could ask for: red team 14a, R14a-1)
            return {"status": "failed", "reason": f"the hidden tests could not be set up on this submission: {exc}",
                    "flags": exc.flags}
        if exc.which != "candidate":
            return {"status": "error", "error_kind": "task", "reason": f"{exc.which}.patch does not apply: {exc}",
                    "flags": exc.flags}
        return {"status": "patch_failed", "reason": str(exc), "flags": exc.flags}
    except TestRunError as exc:
        if exc.output:
            folder.write("tests.log", exc.output)
        return {"status": "failed", "reason": hidden_tests_reason(exc), "flags": exc.flags}
    run, patch, graded = solved.run, solved.patch, solved.graded
    if run.error:
        return {"status": "error", "error_kind": "agent", "reason": f"agent: {run.error}"}
    if graded is None:  # a given patch (predictions) that did not apply
        return {"status": "patch_failed", "reason": f"patch does not apply: {run.log_tail.strip()}"}
    (tests,) = graded.runs
    folder.write("tests.log", tests.output)
    folder.write(OUTCOMES_FILE, json.dumps({"outcomes": tests.outcomes}, indent=1) + "\n")  # for `report --regrade`
    results = grade(bundle.task, tests.outcomes)
    out = {"tests": results, "flags": graded.flags, "resets": [r.describe() for r in graded.resets]}
    if graded.tampered:
        return {**out, "status": "tampered", "reason": f"tampered: {'; '.join(graded.tampered)}"}
    note = f"reset to base: {', '.join(r.describe() for r in graded.resets)}" if graded.resets else None
    if not patch.strip() and not results.resolved and not note:
        note = "empty patch"
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
    try:
        return run_trial(ctx, TrialRequest(bundle, agent, attempt, trial_folder(results_path, ctx.run_id, agent,
                                                                                bundle, attempt)))
    finally:
        ctx.settle()  # its sandboxes are gone when it returns
