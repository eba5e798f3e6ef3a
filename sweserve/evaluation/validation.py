"""Validation: the null and oracle agents through the trial pipeline (`trial.solve_and_grade`, as `run` takes any
candidate: a candidate sandbox, the submission taken from it, graded in a fresh one), k runs each.

FAIL_TO_PASS = fails without the oracle and passes with it in every run; PASS_TO_PASS = passes in all.
A task already validated is rechecked against its recorded ids. The graded tests' mutation twins are chosen
from candidates run in both states (`twins.select`; a new task gets one more run of each state for them), and
with the oracle once more in each of two orders: every graded test first of its group, then last (a test that is
not idempotent breaks in one of them and keeps no group, whatever the draw); tests the oracle fails only under
sweserve's runner, not under plain pytest in the image, are named (`runner_only`). Tests the oracle fails under
planted names and passes under their own are pinned (`_pins`, `Task.pinned`): graded as written, both states run
again so. Every rejection carries a `RejectionCategory` set where it is decided, never read back out of a message.

Only a verdict on the task is recorded in task.json. When the machinery fails instead (an `InfraError`: Docker,
an image build, a registry, a node) or a precondition is unmet (a `SweserveError`, e.g. no clone to build from),
the outcome is `error` with its kind and the task's validation record is left as it was: a Docker hiccup never
un-validates a good task. A bug is `error` (kind `internal`) with its traceback saved under the state dir
(`validate_task_safely`, through the trial's one `internal_error` path); the other tasks go on.
"""

from __future__ import annotations

import logging
import secrets
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, replace
from decimal import Decimal
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, Field

from sweserve.agents.base import Agent
from sweserve.agents.reference import NullAgent, OracleAgent
from sweserve.dataset.project import TaskInputs
from sweserve.dataset.readiness import assess, instruction_digest
from sweserve.dataset.taskstore import save_task
from sweserve.errors import (
    ErrorKind,
    InfraError,
    LimitExceeded,
    RejectionCategory,
    SweserveError,
    TaskRejected,
    TrialSkipped,
)
from sweserve.evaluation import guard
from sweserve.evaluation.accelerators import accelerator_kind, accelerator_tests
from sweserve.evaluation.context import Context
from sweserve.evaluation.derive import derive, recheck
from sweserve.evaluation.executor import Executor, LocalExecutor
from sweserve.evaluation.grading import PatchError, TestRun, TestRunError
from sweserve.evaluation.prerequisites import check_prerequisites
from sweserve.evaluation.signals import signal_checks
from sweserve.evaluation.submission import SubmissionRejected
from sweserve.evaluation.trial import TRACEBACK_FILE, internal_error, reservation, solve_and_grade, write_quietly
from sweserve.evaluation.trial_folder import TrialFolder
from sweserve.evaluation.twins import REAL_AT, RealAt, base_id
from sweserve.evaluation.twins import select as select_twins
from sweserve.evaluation.verifier import plain_outcomes
from sweserve.models import SignalCheck, TaskBundle, ValidationRecord

log = logging.getLogger(__name__)
__all__ = ["TRACEBACK_FILE", "ValidateOutcome", "ValidateRequest", "validate_all", "validate_task",
           "validate_task_safely"]


class ValidateOutcome(BaseModel):
    task_id: str
    family: str
    status: Literal["valid", "rejected", "skipped", "error"]  # error: not a verdict, task.json left untouched
    category: RejectionCategory | None = None
    error_kind: ErrorKind | None = None
    reason: str | None = None
    fail_to_pass: int = 0
    pass_to_pass: int = 0
    flaky: list[str] = Field(default_factory=list)
    accelerator_tests: dict[str, str] = Field(default_factory=dict)
    signals: list[str] = Field(default_factory=list, description="signal checks that fired (the task is not ready)")
    ready: bool | None = Field(None, description="the readiness recorded with the verdict")
    not_ready: list[str] = Field(default_factory=list, description="why the task is not ready, one line each")
    twins: int = 0
    twinless: list[str] = Field(default_factory=list)
    forge_odds: float | None = None  # evaluation/guard.py
    forge_odds_instruction: str | None = None  # `guard.digest` of the instruction the odds were measured with
    runner_only: list[str] = Field(default_factory=list)  # pass under plain pytest, fail under sweserve's runner
    pinned: list[str] = Field(default_factory=list)  # pass with the oracle only under their own names (`_pins`)


def reason_category(outcome: ValidateOutcome) -> str:
    """A short bucket for summaries: valid, skipped, or the rejection's category."""
    if outcome.status != "rejected":
        return outcome.status
    return outcome.category.value if outcome.category else "other"


@dataclass
class ValidateRequest:
    """One task to validate; `log_dir` is where a bug's traceback goes (default: the state dir's logs)."""

    task_dir: Path
    bundle: TaskBundle
    runs: int = 3
    record: bool = True
    log_dir: Path | None = None


def log_dir_for(ctx: Context, task_id: str) -> Path:
    return ctx.state_dir / "logs" / ctx.run_id / "validate" / task_id


def _state(ctx: Context, bundle: TaskBundle, agent: Agent, inputs: TaskInputs, image: str, runs: int,
           gpu_ids: list[str], logs: TrialFolder | None = None, seed: int | None = None,
           prefix: str = "", real_at: RealAt | None = None) -> list[TestRun]:
    """The hidden tests' runs on what a reference agent (null, oracle) submits through the trial's pipeline;
    each run's output kept in logs as PREFIXNAME-N.log. `seed`, `real_at`: the grading plan's (see verify)."""
    name = agent.name

    def keep(file: str, text: str) -> None:
        if logs is not None:
            write_quietly(logs, file, text)

    try:
        solved = solve_and_grade(ctx, bundle, agent, inputs, image, gpu_ids, runs=runs, name=name, seed=seed,
                                 real_at=real_at)
    except SubmissionRejected as exc:  # the repository's own tree over the limit: the machinery's, not a verdict
        raise LimitExceeded(f"the {name} submission: {exc}") from None
    except PatchError as exc:
        keep(f"{prefix}{name}-apply.log", str(exc) + "\n")
        category = (RejectionCategory.ORACLE_DOES_NOT_APPLY if exc.which == "oracle"
                    else RejectionCategory.TESTS_DO_NOT_APPLY)
        raise TaskRejected(category, f"{exc.which}.patch does not apply: {exc}") from None
    except TestRunError as exc:
        keep(f"{prefix}{name}-1.log", exc.output or f"{exc}\n")
        category = RejectionCategory.TIMEOUT if exc.timed_out else RejectionCategory.RUNNER_CRASHED
        raise TaskRejected(category, str(exc)) from None
    if solved.graded is None:  # the reference agent failed in its sandbox: the oracle did not apply
        keep(f"{prefix}{name}-apply.log", (solved.run.error or solved.run.log_tail) + "\n")
        raise TaskRejected(RejectionCategory.ORACLE_DOES_NOT_APPLY,
                           solved.run.error or f"the {name} agent ended with {solved.run.exit_reason}")
    for n, run in enumerate(solved.graded.runs, 1):
        keep(f"{prefix}{name}-{n}.log", run.output)
    return solved.graded.runs


def _pins(ctx: Context, bundle: TaskBundle, inputs: TaskInputs, image: str, gpu_ids: list[str],
          logs: TrialFolder, seed: int, after: list[TestRun]) -> list[str]:
    """The tests the oracle fails in every run under planted names that it passes under their own (one more
    oracle run, every such test pinned: `Task.pinned`): code that reads a test's name in a way planting cannot
    keep (a data file named after it, a conftest matching it by position: red team 7, R7-3, R7-6) would
    otherwise lose the test from FAIL_TO_PASS. Found by running, whatever the reading looks like; none when
    the oracle fails nothing (a test it only skips, as without an accelerator, costs no probe)."""
    task = bundle.task
    seen = {t for run in after for t in run.outcomes}
    failing = sorted(t for t in seen if all(run.outcomes.get(t) != "passed" for run in after)
                     and any(run.outcomes.get(t) in ("failed", "error") for run in after))  # skipped ones: no name read
    if not failing:
        return []
    task.pinned = failing
    try:
        probe = _state(ctx, bundle, OracleAgent(), inputs, image, 1, gpu_ids, logs, seed, "pins-")
    finally:
        task.pinned = []
    return sorted({base_id(t) for t in failing if probe[0].outcomes.get(t) == "passed"})


def _runner_only(ctx: Context, bundle: TaskBundle, image: str, gpu_ids: list[str], after: list[TestRun]) -> list[str]:
    """Tests the oracle fails under sweserve's runner that pass under plain pytest in the same image: the
    hardening changed what they check (a plugin, a config the runner leaves out). Said, never dropped."""
    task = bundle.task
    failing = sorted({t for run in after for t, o in run.outcomes.items() if o != "passed"})
    if not failing or task.test.runner != "pytest":
        return []
    with ctx.sandbox(image, task.task_id, "grade", task.resources, gpu_ids) as box:
        try:
            plain = plain_outcomes(box, bundle, bundle.oracle_patch, task.resources.test_timeout_s)
        except PatchError:
            return []
    return [t for t in failing if plain.get(t) == "passed"]


def _verdict(bundle: TaskBundle, before: list[TestRun], after: list[TestRun], result: ValidateOutcome):
    """FAIL_TO_PASS/PASS_TO_PASS from the runs, or the reason the task is rejected."""
    task = bundle.task
    result.accelerator_tests = accel = accelerator_tests(after)
    if task.FAIL_TO_PASS:  # validated before: the recorded ids must still hold
        f2p, p2p = task.FAIL_TO_PASS, task.PASS_TO_PASS
        result.flaky = derive(before, after)[2]
        if (why := recheck(task, before, after)):
            raise TaskRejected(RejectionCategory.ORACLE_REGRESSED, why)
    else:
        f2p, p2p, result.flaky = derive(before, after)
        kind = accelerator_kind(accel)
        if not f2p and kind:
            task.resources.needs_accelerator = kind
            if kind == "gpu":
                task.resources.gpus = max(task.resources.gpus, 1)
            raise TaskRejected(RejectionCategory.NEEDS_ACCELERATOR,
                               f"needs an accelerator ({kind}): {len(accel)} tests skip or fail without one")
        if not f2p and result.runner_only:
            raise TaskRejected(RejectionCategory.RUNNER_MISMATCH,
                               f"no FAIL_TO_PASS test: {len(result.runner_only)} tests pass with the oracle under "
                               f"plain pytest in the image and fail only under sweserve's runner (first: "
                               f"{result.runner_only[0]})")
        if not f2p:
            raise TaskRejected(RejectionCategory.NO_FAIL_TO_PASS,
                               "no FAIL_TO_PASS test: no test fails before the oracle and passes after it in every run")
    result.fail_to_pass, result.pass_to_pass = len(f2p), len(p2p)
    return f2p, p2p


def _repository(clone: Path, bundle: TaskBundle, cache: guard.NumbersCache,
                history: str) -> Mapping[str, frozenset[Decimal]] | None:
    """`guard.repository_numbers` for the task, with what tests.patch's other files write (`guard.patched_numbers`:
    the twins' draw balances against them as the guard reads them, R22d-3); None where the clone cannot show its
    base: the guard then reads it again, and fails there, unmeasured."""
    try:
        hidden = list(bundle.task.test.files)
        return guard.with_patched(guard.repository_numbers(clone, bundle.task, hidden, cache, history),
                                  guard.patched_numbers(clone, bundle, hidden))
    except SweserveError:
        return None


def validate_task(ctx: Context, req: ValidateRequest) -> ValidateOutcome:
    """Validate one task; with record, its FAIL_TO_PASS/PASS_TO_PASS and validation record are saved."""
    bundle, task = req.bundle, req.bundle.task
    result = ValidateOutcome(task_id=task.task_id, family=task.family, status="rejected")
    before = after = None
    signals: list[SignalCheck] | None = None
    image = ""
    bound: float | None = None
    logs = TrialFolder(req.log_dir or log_dir_for(ctx, task.task_id))
    try:
        check_prerequisites(ctx, bundle)  # seconds, no disk: before any image is built
        with reservation(ctx, task) as gpu_ids:
            # a failed build is an InfraError: the daemon, the network or a registry failing cannot be told apart
            # reliably from the task's own requirements failing to install, so it is never a verdict
            inputs = ctx.inputs(bundle)
            if inputs.clone is not None:  # what the repository's other files write (and, with the image's
                # history, wrote): candidate values keep balanced against it
                repository = _repository(inputs.clone, bundle, ctx.numbers, inputs.image.history)
                inputs = replace(inputs, repository=repository)
            image = ctx.image(inputs)
            seed = secrets.randbits(64)  # one grading plan for both states: the same twin candidates in each
            before = _state(ctx, bundle, NullAgent(), inputs, image, req.runs, gpu_ids, logs, seed)
            after = _state(ctx, bundle, OracleAgent(), inputs, image, req.runs, gpu_ids, logs, seed)
            if not task.FAIL_TO_PASS and (pins := _pins(ctx, bundle, inputs, image, gpu_ids, logs, seed, after)):
                task.pinned = pins  # both states again, each test graded under the name grading will give it
                before = _state(ctx, bundle, NullAgent(), inputs, image, req.runs, gpu_ids, logs, seed, "pinned-")
                after = _state(ctx, bundle, OracleAgent(), inputs, image, req.runs, gpu_ids, logs, seed, "pinned-")
            result.pinned = list(task.pinned)
            result.runner_only = _runner_only(ctx, bundle, image, gpu_ids, after)
            f2p, p2p = _verdict(bundle, before, after, result)
            task.FAIL_TO_PASS, task.PASS_TO_PASS = f2p, p2p
            # twins are chosen anew from candidates run in both states (a task validated before had them in
            # every run; a new one gets one more run of each state, its graded tests now known). With the oracle,
            # also once with each graded test first of its group and once last: a test that is not idempotent
            # (a call counter, a cleanup after the check that a failing twin skips) breaks in one of the two
            # whatever the draw, and `select` then keeps no group in its task (red team 8, R8-8)
            if any(r.twins for r in before):
                nulls, oracles, plan_seed = before, after, seed
            else:
                nulls = _state(ctx, bundle, NullAgent(), inputs, image, 1, gpu_ids, logs, seed + 1, "twins-")
                oracles, plan_seed = [], seed + 1
            for at in REAL_AT:  # the same seed: the same candidates as the runs they join, in another order
                oracles = [*oracles, *_state(ctx, bundle, OracleAgent(), inputs, image, 1, gpu_ids, logs, plan_seed,
                                             f"twins-{at}-", at)]
            twin_runs = (nulls, oracles)
            signals = signal_checks(ctx, bundle, image, gpu_ids, f2p, lambda n, t: write_quietly(logs, n, t))
        result.signals = [c.name for c in signals if c.fired]
        result.status = "valid"
        kept, result.twinless = select_twins(f2p + p2p, *twin_runs)
        task.twins, result.twins = kept, len(kept)
        bound = inputs.profile.max_forge_odds
        if inputs.clone is not None:  # read in the clone the image was built from; none: not measured
            try:
                result.forge_odds = guard.measure(inputs.clone, bundle, inputs.repository,
                                                  history=inputs.image.history)[0]
                result.forge_odds_instruction = instruction_digest(bundle.instruction)
            except SweserveError:  # the clone cannot show the hidden files: not measured, so not ready
                result.forge_odds = None
    except TrialSkipped as exc:
        result.status, result.reason = "skipped", str(exc)
        return result
    except TaskRejected as exc:
        result.category, result.reason = exc.category, str(exc)
    except InfraError as exc:  # the machinery failed, not the task: nothing is recorded
        return result.model_copy(update={"status": "error", "error_kind": exc.kind, "reason": str(exc)})
    except SweserveError as exc:  # a precondition of this task (e.g. no clone known to build its image from)
        return result.model_copy(update={"status": "error", "error_kind": "task", "reason": str(exc)})
    if not req.record:
        return result
    task.validation = ValidationRecord(
        status="valid" if result.status == "valid" else "rejected",
        reason=result.reason,
        category=result.category.value if result.category else None,
        runs=req.runs,
        flaky=result.flaky,
        accelerator_tests=result.accelerator_tests,
        before=before[-1].outcomes if before else {},
        after=after[-1].outcomes if after else {},
        image=image,
        signals=signals,
        logs=str(logs.path) if logs.path.is_dir() else None,
        twinless=result.twinless,
        forge_odds=result.forge_odds,
        max_forge_odds=bound,
        forge_odds_instruction=result.forge_odds_instruction,
        runner_only=result.runner_only,
        twin_orders=list(REAL_AT) if result.status == "valid" else [],  # both twin runs done
    )
    task.readiness = assess(task, bundle.instruction)
    result.ready = task.readiness.ready
    result.not_ready = [r.detail for r in task.readiness.reasons]
    save_task(req.task_dir, task)
    return result


def validate_task_safely(ctx: Context, req: ValidateRequest) -> ValidateOutcome:
    """`validate_task`, and for a bug an `error` outcome (kind `internal`) whose traceback is saved in the
    request's log folder: every task handed to `validate` ends in one outcome. Only Ctrl-C goes through."""
    task = req.bundle.task
    try:
        return validate_task(ctx, req)
    except KeyboardInterrupt:
        raise
    except BaseException as exc:  # noqa: BLE001 - a bug in sweserve: kept with its traceback, said loudly
        why = internal_error(TrialFolder(req.log_dir or log_dir_for(ctx, task.task_id)),
                             f"validating {task.task_id}", exc)
        return ValidateOutcome(task_id=task.task_id, family=task.family, status="error", error_kind="internal",
                               reason=why)


def validate_all(ctx: Context, tasks_dir: Path, bundles: list[TaskBundle], runs: int = 3, record: bool = True,
                 workers: int = 1, executor: Executor | None = None) -> Iterator[ValidateOutcome]:
    """Validate tasks, `workers` at a time, yielding each outcome as it is decided."""
    requests = [ValidateRequest(tasks_dir / b.task.task_id, b, runs, record, log_dir_for(ctx, b.task.task_id))
                for b in bundles]
    yield from (executor or LocalExecutor(ctx, workers)).map_unordered(validate_task_safely, requests)
