"""A fifteenth red team's attacks (15c): the counting: results, resume, selection and scores.

Each test asserts the defended behaviour: it FAILS while the attack (or the honest user's mishap) wins. No
Docker: reports are built from results files and run manifests as `write_manifest` writes them; CLI calls run
this checkout's sweserve (the environment's editable install may point at another).

- R15c-1 `report` leaves out unready results but counted their tasks `missing` from the manifest. Fixed.
- R15c-2 a result's `task_ready` was the stale record, not `run`'s judgment (record AND assessed now). Fixed.
- R15c-3 pass@1's s.e. across attempts took each attempt over whichever tasks had it. Fixed.
- R15c-4 one agent in two results files: the later file's attempt replaces the earlier's. Open.
- R15c-5 `report --regrade` read a killed earlier try's outcomes.json in a reused folder. Fixed.
- R15c-6 a `skipped` attempt is never run again by a resume. Open (a fix must keep repeated skips off the file).
- R15c-7 a resume under the same `--run-id` rewrote the run's manifest with its own selection. Fixed.
- R15c-8 two runs on one results file through a symlink each held "the" lock. Fixed (a hard link still
  evades it: flock the results file itself to close that too).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from test_report_properties import manifest, record

ROOT = Path(__file__).resolve().parent.parent


def cli(*args, cwd):
    """The CLI of this checkout (not whichever sweserve the environment installed), run in `cwd`."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), str(ROOT / "tests")])}
    return subprocess.run([sys.executable, "-m", "sweserve.cli", *args], cwd=cwd, capture_output=True, text=True,
                          env=env)


# --- R15c-1: a run with --include-unready, then `sweserve report` (ready tasks by default) -----------------------

def test_report_does_not_count_left_out_unready_tasks_as_missing(tmp_path):
    """`sweserve run --include-unready` selects A (ready) and B (not ready); both resolve. The run's manifest
    names both. `sweserve report` (unready results left out by default) must leave B out of the denominator
    too, not count it as a `missing` task that no resume will ever fill."""
    manifest(tmp_path, "r1", "a", {"A": "decoding", "B": "decoding"}, results="results.jsonl")
    a, b = record("A", "resolved"), record("B", "resolved")
    b = b.model_copy(update={"task_ready": False})
    a = a.model_copy(update={"task_ready": True})
    out = tmp_path / "results.jsonl"
    out.write_text(a.model_dump_json() + "\n" + b.model_dump_json() + "\n")
    proc = cli("report", str(out), "--json", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    (rep,) = json.loads(proc.stdout)
    assert rep["statuses"]["missing"] == 0, rep["tasks"]
    assert rep["overall"]["pass_at_1"] == pytest.approx(1.0), rep["overall"]
    proc = cli("report", str(out), "--json", "--include-unready", cwd=tmp_path)
    (rep,) = json.loads(proc.stdout)
    assert rep["overall"]["scored"] == 2 and rep["overall"]["pass_at_1"] == pytest.approx(1.0)


# --- R15c-2: a task whose ready record is stale, run with --include-unready, recorded as ready -------------------

def test_a_result_says_a_task_with_a_stale_ready_record_was_not_ready(tmp_path):
    """`run` judges readiness as recorded AND as assessed now (`ready_only`: "a stale record never lets a task
    through"); a task edited since its record said ready is left out, and taken only with --include-unready. Its
    result must then say it was not ready (`task_ready: false`), or `sweserve report`, which leaves out results of
    unready tasks by default, counts it among the ready ones."""
    from test_readiness import bundle as ready_bundle
    from test_readiness import task as ready_task

    from sweserve.agents.reference import NullAgent
    from sweserve.dataset.readiness import assess
    from sweserve.evaluation.trial import TrialRequest, record_result
    from sweserve.evaluation.trial_folder import TrialFolder
    from sweserve.models import Readiness

    b = ready_bundle(ready_task(1))
    b.task.readiness = assess(b.task, b.instruction)
    assert b.task.ready  # recorded ready
    b.task.family_confident = False  # edited since: `run` leaves it out unless --include-unready
    assert not assess(b.task, b.instruction).ready
    assert isinstance(b.task.readiness, Readiness)
    req = TrialRequest(b, NullAgent(), 1, TrialFolder(tmp_path / "trial"))
    result = record_result("r1", req, {"status": "resolved"})
    assert result.task_ready is False, "a task `run` judged not ready is recorded as ready"


# --- R15c-3: pass@1's standard error across attempts, when tasks have different numbers of attempts --------------

def test_stderr_is_zero_when_no_attempt_differs_from_another(tmp_path):
    """A is asked 3 attempts (a later `run A --attempts 3`), B once (R12b-4's per-task selection). Every attempt of
    a task had the same outcome: A always resolved, B always failed. pass@1 is 0.5 and there is no spread between
    attempts; the per-attempt rates, taken over whichever tasks have that attempt, are 0.5, 1.0, 1.0: an s.e. of
    ±16.7 points, around a mean (0.83) that is not the pass@1 it is printed beside."""
    from sweserve.reporting.summary import build_reports, read_manifests

    manifest(tmp_path, "r1", "a", {"A": "decoding", "B": "decoding"}, attempts=1, results="results.jsonl")
    manifest(tmp_path, "r2", "a", {"A": "decoding"}, attempts=3, results="results.jsonl")
    results = [record("A", "resolved", run_id="r1"), record("B", "failed", run_id="r1"),
               record("A", "resolved", attempt=2, run_id="r2"), record("A", "resolved", attempt=3, run_id="r2")]
    (rep,) = build_reports(results, read_manifests(tmp_path / "runs", "results.jsonl", {"a"}))
    assert rep.overall.pass_at_1 == pytest.approx(0.5)
    assert not rep.overall.pass_at_1_stderr, rep.overall


def test_stderr_counts_a_missing_attempt_as_pass_at_1_does(tmp_path):
    """Two attempts asked of A and B; B's second never ran (a killed run). pass@1 counts it as not resolved
    (A 2/2, B 0/2: 0.5); the s.e. leaves it out (attempt 1: 0.5, attempt 2: A alone, 1.0), so a run with a hole
    shows a spread (±25 points) no attempt had."""
    from sweserve.reporting.summary import build_reports, read_manifests

    manifest(tmp_path, "r1", "a", {"A": "decoding", "B": "decoding"}, attempts=2, results="results.jsonl")
    results = [record("A", "resolved"), record("B", "failed"), record("A", "resolved", attempt=2)]
    (rep,) = build_reports(results, read_manifests(tmp_path / "runs", "results.jsonl", {"a"}))
    assert rep.overall.pass_at_1 == pytest.approx(0.5)
    assert not rep.overall.pass_at_1_stderr, rep.overall


# --- R15c-4: one agent's attempts in two results files, reported together -----------------------------------------

def test_an_agents_attempt_in_two_results_files_counts_whatever_order_they_are_given(tmp_path):
    """Agent `a` ran task A twice, each time into its own results file (`--output first/results.jsonl`, later
    `--output second/results.jsonl`): failed, then resolved. `sweserve report first/... second/...` ("several agents
    or runs are compared") keys records by (task, agent, attempt) across files, so the second file's attempt 1
    replaces the first's: the failure vanishes, pass@1 is 100%, one attempt counted; given the other way round,
    0%. Both attempts were made; the numbers must not depend on the order of the files. Such files are now refused
    with one line naming both runs, whatever their order."""
    reports = []
    for d, status in (("first", "failed"), ("second", "resolved")):
        (tmp_path / d).mkdir()
        manifest(tmp_path / d, f"run-{d}", "a", {"A": "decoding"}, results="results.jsonl")
        (tmp_path / d / "results.jsonl").write_text(record("A", status, run_id=f"run-{d}").model_dump_json() + "\n")
    for order in (("first", "second"), ("second", "first")):
        proc = cli("report", *(str(tmp_path / d / "results.jsonl") for d in order), "--json", cwd=tmp_path)
        reports.append((proc.returncode, proc.stdout))
        assert proc.returncode != 0 and "Traceback" not in proc.stderr, (order, proc.stdout)
        assert "run-first" in proc.stderr and "run-second" in proc.stderr and len(proc.stderr.splitlines()) == 1
    assert reports[0][1] == reports[1][1] == "", "a report counted one of the two attempts"
    same = cli("report", str(tmp_path / "first" / "results.jsonl"), str(tmp_path / "first" / "results.jsonl"),
               "--json", cwd=tmp_path)  # control: one file given twice is one run
    assert same.returncode == 0, same.stderr


# --- R15c-5: a trial redone in its folder (a resumed `--run-id`), regraded from the killed try's outcomes ---------

def test_regrade_never_reads_outcomes_a_killed_earlier_try_left_in_the_folder(tmp_path, monkeypatch):
    """`run --run-id R`: a trial is graded (all hidden tests pass; `outcomes.json` saved in
    runs/R/a/<task>/1/) and the run is killed (Ctrl-C with several workers, SIGKILL) before its line reaches the
    results file. The resume with the same `--run-id` redoes that (task, attempt) in the same folder; this time the
    hidden tests time out: `failed`, no outcomes saved. `report --regrade` reads the first try's outcomes and turns
    the recorded `failed` into `resolved`."""
    from contextlib import contextmanager
    from types import SimpleNamespace

    from test_regrade import A, task

    from sweserve.agents.reference import NullAgent
    from sweserve.dataset.taskstore import save_bundle
    from sweserve.evaluation import trial
    from sweserve.evaluation.grading import TestRunError
    from sweserve.evaluation.results import ResultsWriter

    tasks = tmp_path / "tasks"
    bundle = task("o__r-1")
    save_bundle(tasks, bundle)
    out = tmp_path / "r.jsonl"
    agent = NullAgent()
    folder = trial.trial_folder(out, "R", agent, bundle, 1)
    # the killed first try: graded and saved, never recorded in r.jsonl
    folder.write("outcomes.json", json.dumps({"outcomes": {A: "passed"}}, indent=1) + "\n")

    @contextmanager
    def no_gpus(ctx, task):
        yield []

    def timed_out(*args, **kwargs):
        raise TestRunError("hidden tests timed out after 60s", timed_out=True, output="...")

    monkeypatch.setattr(trial, "cannot_run", lambda ctx, task: None)
    monkeypatch.setattr(trial, "check_prerequisites", lambda ctx, bundle: None)
    monkeypatch.setattr(trial, "reservation", no_gpus)
    monkeypatch.setattr(trial, "solve_and_grade", timed_out)
    ctx = SimpleNamespace(run_id="R", inputs=lambda b: None, image=lambda inputs: "img")
    result = trial.run_trial(ctx, trial.TrialRequest(bundle, agent, 1, folder))
    assert result.status == "failed" and "timed out" in (result.reason or "")
    with ResultsWriter(out) as w:
        w.write(result)
    proc = cli("report", str(out), "--regrade", "--tasks", str(tasks), "--json", "--include-unready", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    (rep,) = json.loads(proc.stdout)
    assert rep["tasks"][0]["status"] == "failed", rep["tasks"][0]


# --- R15c-6: a skipped attempt blocks its real result for good ---------------------------------------------------

def test_a_resume_runs_an_attempt_that_was_only_skipped(tmp_path):
    """A `skipped` attempt says nothing of the candidate, only of where or when it ran: `needs 2 GPUs (host has
    0)` on a laptop, `not validated` before `sweserve validate`, no Ray node of its class up. `pending` counts it
    finished, so the resume on the GPU host (or after validation) never runs it, `--retry-errors` neither; the
    report keeps the task out of the denominator with a reason that is no longer true. `--retry-errors` now tries
    it again (a skip costs nothing to redo; the new record supersedes it as a retried error's does); a plain resume
    leaves it, as on the same host it would be skipped again, a line each time."""
    from test_results_report import bundle, result

    from sweserve.agents.reference import NullAgent
    from sweserve.evaluation.evaluate import pending
    from sweserve.evaluation.results import ResultsWriter

    path = tmp_path / "r.jsonl"
    with ResultsWriter(path) as w:
        w.write(result("o__r-1", "resolved"))
        w.write(result("o__r-2", "skipped", reason="needs 2 GPUs (host has 0)"))
    agent = NullAgent()
    agent.name = "a"
    bundles = [bundle("o__r-1"), bundle("o__r-2", gpus=2)]
    assert [(b.task.task_id, a) for b, a in pending(bundles, agent, 1, path, retry_errors=True)] == [("o__r-2", 1)]
    assert pending(bundles, agent, 1, path) == []


# --- R15c-7: a resume under the same --run-id rewrites the run's manifest with its own selection ------------------

def test_a_resume_under_the_same_run_id_keeps_what_the_run_selected(tmp_path):
    """`sweserve run --run-id R A B C --attempts 2` is killed after A's attempts. The user resumes under the same
    run id (as SWE-bench's harness is used: the id names `<model>.R.json`) for the one task they care about first,
    `sweserve run --run-id R A` (attempts 1). `write_manifest` overwrites runs/R/manifest.json with A alone,
    attempts 1: B and C, selected and never run, leave the report's denominator (no longer `missing`), and the
    attempts asked are 1 from then on. The report shows 50% (A's 1 of 2) where 1 of the 6 selected attempts
    resolved."""
    from test_results_report import bundle

    from sweserve.agents.reference import NullAgent
    from sweserve.evaluation.evaluate import write_manifest
    from sweserve.reporting.summary import build_reports, read_manifests

    out = tmp_path / "results.jsonl"
    agent = NullAgent()
    agent.name = "a"
    a, b, c = (bundle(f"o__r-{i}") for i in (1, 2, 3))
    write_manifest(out, "R", agent, [a, b, c], attempts=2)
    results = [record("o__r-1", "resolved", run_id="R"), record("o__r-1", "failed", attempt=2, run_id="R")]
    write_manifest(out, "R", agent, [a], attempts=1)  # the resume: nothing left to do for A
    (rep,) = build_reports(results, read_manifests(tmp_path / "runs", out.name, {"a"}))
    assert {t.task_id: t.attempts for t in rep.tasks} == {"o__r-1": 2, "o__r-2": 2, "o__r-3": 2}, rep.tasks
    assert rep.statuses["missing"] == 2 and rep.overall.pass_at_1 == pytest.approx(0.5 / 3)


# --- R15c-8: the one-writer lock, taken beside the name given, not the file -------------------------------------

def test_a_second_run_on_the_same_file_through_a_link_is_refused(tmp_path):
    """`results/current.jsonl` is a link to `results/2026-12.jsonl` (a CI job appends to "current"; a person
    resumes the dated file). Each `ResultsWriter` locks `<name given>.lock`, so both runs hold "the" lock, both
    read the same pending work, both run it and append: every (task, attempt) graded twice, the later record
    replacing the earlier in every report (`latest`), a failed attempt replaced by a later success."""
    from sweserve.errors import SweserveError
    from sweserve.evaluation.results import ResultsWriter

    real = tmp_path / "results" / "2026-12.jsonl"
    real.parent.mkdir()
    real.touch()
    link = tmp_path / "results" / "current.jsonl"
    link.symlink_to(real.name)
    with ResultsWriter(link), pytest.raises(SweserveError, match="another sweserve run"):
        ResultsWriter(real)
    hard = tmp_path / "elsewhere.jsonl"  # a hard link too (red team 15c's and 15g's lead): the lock is the file's
    os.link(real, hard)
    with ResultsWriter(hard), pytest.raises(SweserveError, match="another sweserve run"):
        ResultsWriter(real)


def test_a_run_killed_while_writing_its_manifest_leaves_the_old_one_whole(tmp_path, monkeypatch):
    """Red team 15g's lead: a manifest half-written when the run was killed was read as none, and the resume
    rewrote it with only its own selection (R15c-7 again). Manifests (and every record written whole) now go
    through `loading.write_atomic`: a write cut off leaves the old file as it was."""
    from pathlib import Path

    from sweserve.loading import write_atomic

    path = tmp_path / "manifest.json"
    write_atomic(path, json.dumps({"tasks": {"A": "h", "B": "h"}}))
    real = Path.write_text

    def killed(self, text, *args, **kwargs):
        real(self, text[: len(text) // 2], *args, **kwargs)
        raise KeyboardInterrupt  # the run stops mid-write

    monkeypatch.setattr(Path, "write_text", killed)
    with pytest.raises(KeyboardInterrupt):
        write_atomic(path, json.dumps({"tasks": {"A": "h"}}))
    monkeypatch.undo()
    assert json.loads(path.read_text()) == {"tasks": {"A": "h", "B": "h"}}
    assert [p.name for p in tmp_path.iterdir()] == ["manifest.json"]  # no temporary file left either
