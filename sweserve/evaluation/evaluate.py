"""Evaluating an agent on many tasks: what is left to do, resuming safely, and recording each result as it ends.

A run writes `runs/<run_id>/manifest.json` (sweserve version, agent and its config hash, each selected task's
content hash, attempts). Every result records the same hashes, so resuming a results file with a changed agent
config or a changed task refuses, unless forced, instead of mixing results graded against different things.
Reports read the manifests too: a selected (task, attempt) with no result counts as `missing`, never drops
out of the denominator. Every trial handed to the executor ends in exactly one result (`run_trial_safely`).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

from sweserve import __version__
from sweserve.agents.base import Agent
from sweserve.environment.host import new_run_id
from sweserve.errors import OWN_ERRORS, SweserveError
from sweserve.evaluation.context import Context
from sweserve.evaluation.executor import Executor, LocalExecutor
from sweserve.evaluation.results import (
    MANIFEST_FILE,
    ResultsWriter,
    latest,
    manifest_paths,
    read_manifest,
    read_results,
)
from sweserve.evaluation.trial import (
    MAX_SUBMISSION_BYTES,
    TrialRequest,
    ready_now,
    run_trial_safely,
    trial_folder,
)
from sweserve.evaluation.trial_folder import results_home, runs_root
from sweserve.loading import write_atomic
from sweserve.models import RunManifest, RunResult, TaskBundle, now


def pending(bundles: list[TaskBundle], agent: Agent, attempts: int, results_path: Path,
            retry_errors: bool = False, first_attempt: int = 1) -> list[tuple[TaskBundle, int]]:
    """(task, attempt) pairs not yet finished in results_path: what a resumed run still has to do; with
    `retry_errors`, also those whose last result is an `error` the machinery caused (not `OWN_ERRORS`) or a
    `skipped` (it says where or when the run was, never what the candidate did: a host without the GPUs, a task
    not validated yet; red team 15c, R15c-6). A plain resume leaves skips alone: on the same host each would be
    skipped again. A result recorded while the task was not ready (`--include-unready`) does not finish it for a
    run that finds it ready: reports leave such results out, and the ready task, skipped, left the denominator."""
    done = latest(read_results(results_path))
    todo = []
    # a task named twice (`run $(cat a.txt b.txt)`) is one task: run twice, its attempt was recorded twice and the
    # later record counted (red team 16b, R16b-4)
    for bundle in {b.task.task_id: b for b in bundles}.values():
        ready: bool | None = None  # assessed once a record run while unready asks
        for attempt in range(first_attempt, attempts + 1):
            prior = done.get((bundle.task.task_id, agent.name, attempt))
            if prior is not None and prior.task_ready is False:
                if ready is None:
                    ready = ready_now(bundle)
                if ready:
                    todo.append((bundle, attempt))
                    continue
            if prior is None or retry_errors and (prior.status == "skipped" or prior.status == "error"
                                                  and prior.error_kind not in OWN_ERRORS):
                todo.append((bundle, attempt))
    return todo


def resume_conflict(bundles: list[TaskBundle], agent: Agent, results_path: Path) -> str | None:
    """Why earlier results of this agent in results_path were graded against something else, or None."""
    current = {b.task.task_id: b.content_hash() for b in bundles}
    config = agent.config_hash()
    for prior in read_results(results_path):
        if prior.agent != agent.name:
            continue
        if prior.agent_config_hash and prior.agent_config_hash != config:
            return f"agent {agent.name}'s config changed since run {prior.run_id}"
        if prior.task_hash and prior.task_id in current and prior.task_hash != current[prior.task_id]:
            return f"task {prior.task_id} changed since run {prior.run_id} graded it"
    return None


def _manifest_there(path: Path) -> RunManifest | None:
    """The run manifest at path, None when there is none; one there that this version cannot read is an error,
    never "none": read as none, its run id was free and a resume rewrote it with its own selection alone, the
    killed run's tasks gone from the denominator the report had refused to draw (red team 20d, R20d-1)."""
    if not path.exists() and not path.is_symlink():
        return None
    try:
        return read_manifest(path)
    except SweserveError as exc:
        raise SweserveError(f"{exc}: it may speak for a run's selection; move it aside to go on") from None


def run_id_taken(results_path: Path, run_id: str, agent_name: str) -> str | None:
    """The agent (or results file) whose run already holds `run_id` beside results_path, or None if it is free
    for this agent's run on this file (unused, or this same run being resumed)."""
    prior = _manifest_there(runs_root(results_path) / run_id / MANIFEST_FILE)
    if prior is None:
        return None
    if prior.agent != agent_name:
        return f"agent {prior.agent}"
    name = results_home(results_path).name
    if (prior.results or name) != name:
        return f"results file {prior.results}"
    return None


def set_aside(folder: Path) -> Path | None:
    """A trial folder an earlier try left (a run killed mid-trial, then resumed under its `--run-id`; an error
    `--retry-errors` redoes) moved to `<attempt>.earlier-<n>` beside it: the try that reuses its name starts in an
    empty folder, and its reviewer page never shows the earlier try's steps, log or tests as its own (red team
    16b, R16b-6). Where it went, or None when there was none."""
    if not folder.is_dir():
        return None
    n = 1
    while (aside := folder.with_name(f"{folder.name}.earlier-{n}")).exists():
        n += 1
    folder.rename(aside)
    return aside


def next_attempt(results_path: Path, agent_name: str, task_id: str) -> int:
    """A human's next attempt of a task: 1 + the last one recorded or started. A session killed before its result
    (kill -9, a crash, a reboot) left its run's manifest asking that attempt: the retake is the next, and the
    killed one stays `missing` in reports (red team 16b, R16b-5: the retake took its number, and the first
    session, where the task was read, was on no page)."""
    last = max((r.attempt for r in read_results(results_path) if r.task_id == task_id and r.agent == agent_name),
               default=0)
    name = results_home(results_path).name
    for path in manifest_paths(runs_root(results_path)):
        prior = _manifest_there(path)
        if prior is None or prior.agent != agent_name or (prior.results or name) != name:
            continue
        last = max(last, prior.attempts_for(task_id))
    return last + 1


def write_manifest(results_path: Path, run_id: str, agent: Agent, bundles: list[TaskBundle],
                   attempts: int = 1) -> Path:
    """`runs/<run_id>/manifest.json`: one run is one agent on one results file; a run id already used by
    another agent or file is refused (one manifest would otherwise speak for two runs)."""
    path = runs_root(results_path) / run_id / MANIFEST_FILE
    # a results file's runs are found beside its name (a symbolic link followed, `results_home`); a hard link is
    # another name with nothing to follow: a run through one in another folder put its manifest where no report of
    # the file looks, and a task it selected and never finished left that file's denominator (red team 21b's
    # R21b-7; red team 22b, R22b-3). A file with several names takes no run.
    if (names := os.stat(results_path).st_nlink if results_path.exists() else 1) > 1:
        raise SweserveError(f"{results_path} has {names} names (hard links): a run's selection is kept beside one "
                            "name and another's report would not count it; run on a copy, or give the file one name")
    if (owner := run_id_taken(results_path, run_id, agent.name)):
        raise SweserveError(f"run id {run_id} is already used by {owner} in {path.parent}; choose another --run-id")
    tasks: dict[str, str | None] = {b.task.task_id: b.content_hash() for b in bundles}
    families: dict[str, str | None] = {b.task.task_id: b.task.family for b in bundles}
    asked = dict.fromkeys(tasks, attempts)
    # which selected tasks were not ready (`run --include-unready`): one with no result yet is not `missing` in a
    # report of the ready tasks, with or without --tasks (red team 15g's R15g-5, left; red team 16b)
    unready = {b.task.task_id for b in bundles if not ready_now(b)}
    # the same run resumed (`--run-id`): what it selected before stays selected, each task as many attempts as
    # any of its invocations asked; rewritten, the tasks a resume left out left the denominator (R15c-7)
    prior = _manifest_there(path)
    if prior is not None:
        for t in prior.tasks:
            asked[t] = max(asked.get(t, 0), prior.attempts_for(t))
        # judgements merge as the report merges runs (`Selection.merge`): a task stays unready only where every
        # invocation that selected it said so. A resume judging alone took a task the run selected ready, then
        # killed, out of the denominator once it flipped unready and was resumed with --include-unready (red team
        # 21b, R21b-4); one that selected it unready before and ready now selects it ready (R21b-3)
        unready = {t for t in unready if t not in prior.tasks or t in prior.unready}
        unready |= {t for t in prior.unready if t not in tasks}
        tasks = {**prior.tasks, **tasks}
        families = {**prior.families, **families}
    most = max(asked.values(), default=attempts)
    path.parent.mkdir(parents=True, exist_ok=True)
    manifest = RunManifest(
        run_id=run_id, sweserve_version=__version__, started_at=(prior.started_at or now()) if prior else now(),
        agent=agent.name, results=results_home(results_path).name, agent_config_hash=agent.config_hash(),
        attempts=most, per_task={t: n for t, n in asked.items() if n != most},
        tasks=tasks, families=families, unready=sorted(unready))
    write_atomic(path, manifest.model_dump_json(indent=2) + "\n")
    return path


def run_evaluation(ctx: Context, bundles: list[TaskBundle], agent: Agent, results_path: Path, *,
                   attempts: int = 1, first_attempt: int = 1, workers: int = 1, retry_errors: bool = False,
                   force: bool = False,
                   executor: Executor | None = None, writer: ResultsWriter | None = None,
                   max_submission_bytes: int = MAX_SUBMISSION_BYTES,
                   on_result: Callable[[RunResult, int, int], None] | None = None) -> list[RunResult]:
    """Evaluate every unfinished (task, attempt) from first_attempt to attempts; each result is appended to
    results_path as it ends. `run` and `session` (one new attempt of a human) both go through here.

    `writer` is the results file's writer when the caller already holds its lock (the CLI takes it before
    contacting Docker); otherwise the lock is taken here, and a second run on the same file refuses. `ctx` is
    the caller's: it stays open (its owner closes it, which reaps what an interrupted run left).
    """
    owned = writer is None
    writer = writer or ResultsWriter(results_path)
    try:
        if not force and (why := resume_conflict(bundles, agent, results_path)):
            raise SweserveError(f"{results_path}: {why}; use another --output, or --force to resume anyway")
        todo = pending(bundles, agent, attempts, results_path, retry_errors, first_attempt)
        if run_id_taken(results_path, ctx.run_id, agent.name):  # one command running a second agent: a run of its own
            ctx.run_id = new_run_id()
        write_manifest(results_path, ctx.run_id, agent, bundles, attempts)
        requests = [TrialRequest(b, agent, a, trial_folder(results_path, ctx.run_id, agent, b, a), max_submission_bytes)
                    for b, a in todo]
        for req in requests:
            set_aside(req.folder.path)
        finished = []
        for result in (executor or LocalExecutor(ctx, workers)).map_unordered(run_trial_safely, requests):
            writer.write(result)
            finished.append(result)
            if on_result:
                on_result(result, len(finished), len(todo))
        ctx.settle()  # the sandboxes removed in the background are gone when it returns
        return finished
    finally:
        if owned:
            writer.close()
