"""Red team 21b: counting after today's changes (resume, manifests, reports). `evaluate.pending` now runs again an
attempt recorded while its task was not ready once the task is ready; `report` judges a run's own unready records
as its selection of those tasks unready, and a task another run selected ready is counted. Every selected task ends
in exactly one counted result; orders of runs, resumes under one `--run-id`, `--tasks` and readiness that flips must
not take a task out of the denominator or count it twice."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from test_attacks_redteam15c import cli
from test_report_properties import record
from test_results_report import bundle

import sweserve.dataset.readiness as readiness
from sweserve.agents.reference import NullAgent
from sweserve.errors import SweserveError
from sweserve.evaluation.evaluate import pending, write_manifest
from sweserve.evaluation.results import ResultsWriter


def _agent(name: str = "a") -> NullAgent:
    agent = NullAgent()
    agent.name = name
    return agent


def _ready_if(monkeypatch, *ready: str) -> None:
    """Readiness as `run` judges it: the tasks named ready, every other one not validated."""
    monkeypatch.setattr(readiness, "why_not_ready",
                        lambda task, instruction: None if task.task_id in ready else "not validated")


def _write(out: Path, task_id: str, status: str, run_id: str, ready: bool, attempt: int = 1) -> None:
    with ResultsWriter(out) as w:
        w.write(record(task_id, status, run_id=run_id, attempt=attempt).model_copy(update={"task_ready": ready}))


def _tasks_folder(tmp_path: Path, ready: set[int], ids=(1, 2)) -> Path:
    """A tasks folder whose readiness is recorded: the tasks numbered in `ready` ready, the others not."""
    from test_readiness import bundle as ready_bundle
    from test_readiness import task as ready_task

    from sweserve.dataset.readiness import assess
    from sweserve.dataset.taskstore import load_all, save_bundle

    tasks = tmp_path / "tasks"
    for n in ids:
        b = ready_bundle(ready_task(n) if n in ready else ready_task(n, family_confident=False))
        b.task.readiness = assess(b.task, b.instruction)
        save_bundle(tasks, b)
    assert {b.task.task_id for b in load_all(tasks) if b.task.ready} == {f"o__r-{n}" for n in ready}
    return tasks


def _report(out: Path, *extra: str) -> dict:
    proc = cli("report", str(out), "--json", *extra, cwd=out.parent)
    assert proc.returncode == 0, proc.stderr
    (rep,) = json.loads(proc.stdout)
    return rep


def _counted(rep: dict) -> tuple[int, int, float]:
    """(tasks in the denominator, of them missing, pass@1)."""
    return rep["overall"]["scored"], rep["statuses"]["missing"], rep["overall"]["pass_at_1"]


# --- R21b-1: a task a run selected ready, then not ready now: `--tasks` took it out of the denominator ------------

def test_r21b_1_tasks_folder_never_removes_a_task_a_run_selected_ready(tmp_path, monkeypatch):
    """Attack: run R selected tasks 1 and 2, both ready; task 2 resolved and R was killed before task 1 (or the
    agent wedged it). Task 1's readiness then flips (re-validated, a lint, an edit). `report` alone counts task 1
    `missing` (pass@1 50%); `report --tasks tasks` (meant to add every ready task to the denominator) took it out:
    a task not ready now with no result was called "a run's unready selection", though R selected it ready: pass@1
    100%. Defence: the tasks folder judges only tasks no run's manifest judged; a run that selected a task ready
    keeps it in the denominator."""
    out = tmp_path / "results.jsonl"
    _ready_if(monkeypatch, "o__r-1", "o__r-2")
    write_manifest(out, "R", _agent(), [bundle("o__r-1"), bundle("o__r-2")])
    _write(out, "o__r-2", "resolved", "R", True)
    monkeypatch.undo()
    tasks = _tasks_folder(tmp_path, ready={2})
    assert _counted(_report(out)) == (2, 1, 0.5)
    assert _counted(_report(out, "--tasks", str(tasks))) == (2, 1, 0.5), "--tasks took R's selected task out"


# --- R21b-2: a task ready now in --tasks, run only while unready: neither counted nor `missing` ------------------

def _failed_unready_then_resolved(tmp_path, monkeypatch) -> Path:
    """Run R1 (`--include-unready`) failed task 1 while it was not ready; run R2 resolved task 2 (ready)."""
    out = tmp_path / "results.jsonl"
    _ready_if(monkeypatch, "o__r-2")
    write_manifest(out, "R1", _agent(), [bundle("o__r-1")])
    _write(out, "o__r-1", "failed", "R1", False)
    write_manifest(out, "R2", _agent(), [bundle("o__r-2")])
    _write(out, "o__r-2", "resolved", "R2", True)
    monkeypatch.undo()
    return out


def test_r21b_2_a_ready_task_of_the_tasks_folder_run_only_while_unready_is_missing(tmp_path, monkeypatch):
    """Attack: task 1 was run (`--include-unready`, run R1) while not ready and failed; it is ready now. `report
    --tasks tasks` counts every ready task of the folder, one with no result `missing`; but any record of the task
    run while unready took it off the board: pass@1 100% over task 2 alone, where the folder's ready tasks are two
    and one has no counted result. A failure run early, while unready, kept the task out of every report until a
    ready run finished it. Defence: a task is left out as unready only where every selection of it (each run's
    manifest, and the tasks folder) judged it unready."""
    out = _failed_unready_then_resolved(tmp_path, monkeypatch)
    tasks = _tasks_folder(tmp_path, ready={1, 2})
    assert _counted(_report(out, "--tasks", str(tasks))) == (2, 1, 0.5), "a ready task of --tasks left the board"


def test_r21b_2_control_unready_tasks_stay_out(tmp_path, monkeypatch):
    """Control: the same, with task 1 still not ready in the folder: its unready result is left out, and it is not
    `missing`; with --include-unready it counts with its failure."""
    out = _failed_unready_then_resolved(tmp_path, monkeypatch)
    tasks = _tasks_folder(tmp_path, ready={2})
    assert _counted(_report(out, "--tasks", str(tasks))) == (1, 0, 1.0)
    assert _counted(_report(out)) == (1, 0, 1.0)
    assert _counted(_report(out, "--tasks", str(tasks), "--include-unready")) == (2, 0, 0.5)


# --- R21b-3: one run id resumed once the task is ready: its old unready record outvotes its manifest --------------

def test_r21b_3_a_resume_under_one_run_id_keeps_a_task_it_now_selects_ready(tmp_path, monkeypatch):
    """Attack: `run --run-id R --include-unready` ran task 1 while not ready (failed, recorded unready). Task 1 is
    validated; `run --run-id R 1 2` (the same run resumed, ready tasks) selects both ready, and `pending` runs task
    1 again; it is killed after task 2 resolved, before task 1's new result. R's manifest says it selected task 1
    ready, but the report took R's own old unready record as "R selected it unready" (records outvote the manifest,
    keyed by run id): task 1 left the denominator, pass@1 100% where it is 50%. Defence: a manifest that records
    which of its tasks were unready speaks for its run; records fill in only for manifests from before that."""
    out = tmp_path / "results.jsonl"
    _ready_if(monkeypatch, "o__r-2")
    write_manifest(out, "R", _agent(), [bundle("o__r-1")])
    _write(out, "o__r-1", "failed", "R", False)
    _ready_if(monkeypatch, "o__r-1", "o__r-2")
    both = [bundle("o__r-1"), bundle("o__r-2")]
    assert [b.task.task_id for b, _ in pending(both, _agent(), 1, out)] == ["o__r-1", "o__r-2"]
    write_manifest(out, "R", _agent(), both)
    _write(out, "o__r-2", "resolved", "R", True)
    monkeypatch.undo()
    assert _counted(_report(out)) == (2, 1, 0.5), "the resumed run's ready task 1 left the denominator"


# --- R21b-4: one run id selected a task ready, then resumed with --include-unready once it is not ---------------

def _ready_then_unready(tmp_path, monkeypatch, run_ids: tuple[str, str]) -> Path:
    """Run R selected tasks 1 and 2 ready; task 2 resolved and R was killed before task 1. Task 1's readiness
    then flips; `run --include-unready` (under `run_ids[1]`) selects task 1 again, and is killed before it."""
    out = tmp_path / "results.jsonl"
    _ready_if(monkeypatch, "o__r-1", "o__r-2")
    write_manifest(out, run_ids[0], _agent(), [bundle("o__r-1"), bundle("o__r-2")])
    _write(out, "o__r-2", "resolved", run_ids[0], True)
    _ready_if(monkeypatch, "o__r-2")
    write_manifest(out, run_ids[1], _agent(), [bundle("o__r-1")])
    monkeypatch.undo()
    return out


def test_r21b_4_a_resume_with_include_unready_never_unselects_what_the_run_selected_ready(tmp_path, monkeypatch):
    """Attack: as R20d-3, but the second invocation resumes the same run (`--run-id R --include-unready`): the
    resume's judgement replaced the run's, R's manifest then listed task 1 unready, and the report left it out:
    pass@1 100% where two runs under two ids give 50% (task 1 `missing`). Resumed with the agent's own failure, the
    failure run while unready is left out too. Defence: a resume merges judgements as the report merges runs: a
    task stays unready only where every invocation that selected it judged it so."""
    out = _ready_then_unready(tmp_path, monkeypatch, ("R", "R"))
    assert _counted(_report(out)) == (2, 1, 0.5), "the resume took R's ready selection of task 1 out"


def test_r21b_4_control_two_run_ids_and_a_resume_that_is_unready_throughout(tmp_path, monkeypatch):
    """Controls: two run ids count task 1 `missing` (R20d-3); a run that selected task 1 unready in every
    invocation leaves it out."""
    assert _counted(_report(_ready_then_unready(tmp_path / "two", monkeypatch, ("R1", "R2")))) == (2, 1, 0.5)
    out = tmp_path / "one" / "results.jsonl"
    _ready_if(monkeypatch, "o__r-2")
    write_manifest(out, "R", _agent(), [bundle("o__r-1"), bundle("o__r-2")])
    _write(out, "o__r-2", "resolved", "R", True)
    write_manifest(out, "R", _agent(), [bundle("o__r-1")])
    monkeypatch.undo()
    assert _counted(_report(out)) == (1, 0, 1.0)


# --- R21b-5: a run through a symbolic link in another folder: its manifest beside the link, not the file ----------

def _linked(tmp_path, hard: bool = False) -> tuple[Path, Path]:
    """real/results.jsonl, and elsewhere/mine.jsonl linked to it (a symbolic link, or a hard one)."""
    real = tmp_path / "real" / "results.jsonl"
    real.parent.mkdir()
    real.write_text("")
    link = tmp_path / "elsewhere" / "mine.jsonl"
    link.parent.mkdir()
    if hard:
        link.hardlink_to(real)
    else:
        link.symlink_to(real)
    return real, link


def test_r21b_5_a_run_through_a_link_counts_in_the_files_report(tmp_path, monkeypatch):
    """Attack: `run --output elsewhere/mine.jsonl` (a symbolic link to real/results.jsonl) selected tasks 1 and 2,
    resolved 2 and was killed before 1. The record went into the file (the lock is the file's own, R15c-8), but the
    manifest went to elsewhere/runs/: `report real/results.jsonl` found no selection for run R, and task 1 left the
    denominator (pass@1 100%); `report` through the link found R's manifest named `mine.jsonl` beside no such file.
    Defence: a results file's runs folder and name are its own, followed through symbolic links
    (`trial_folder.results_home`), so every name of one file finds one runs folder."""
    real, link = _linked(tmp_path)
    _ready_if(monkeypatch, "o__r-1", "o__r-2")
    write_manifest(link, "R", _agent(), [bundle("o__r-1"), bundle("o__r-2")])
    monkeypatch.undo()
    _write(link, "o__r-2", "resolved", "R", True)
    assert _counted(_report(real)) == (2, 1, 0.5), "the run through a link left the file's denominator"
    assert _counted(_report(link)) == (2, 1, 0.5)


def test_r21b_5_a_resume_through_the_real_name_keeps_the_linked_runs_selection(tmp_path):
    """Variant: `run --run-id R --output real/results.jsonl 3` (the same file by its own name) found R free, wrote
    a manifest of task 3 alone, and the next attempt of a human's session there started again at 1."""
    from sweserve.evaluation.evaluate import next_attempt, run_id_taken

    real, link = _linked(tmp_path)
    write_manifest(link, "R", _agent(), [bundle("o__r-1"), bundle("o__r-2")])
    assert run_id_taken(real, "R", "b") == "agent a"
    path = write_manifest(real, "R", _agent(), [bundle("o__r-3")])
    from sweserve.evaluation.results import read_manifest

    assert set(read_manifest(path).tasks) == {"o__r-1", "o__r-2", "o__r-3"}
    assert next_attempt(real, "a", "o__r-1") == 2


# --- R21b-6: attempt 1 skipped, a later run's attempts selected and killed: the task left the denominator ---------

def test_r21b_6_a_skipped_first_attempt_never_hides_selected_attempts_with_no_result():
    """Attack: a laptop run recorded task A's attempt 1 `skipped` (a GPU task); the GPU host's `run --attempts 3`
    selected attempts 2 and 3 and was killed before either had a result (or the agent wedged its host). R16b-2
    scores a skipped task once a later attempt ran, but here none had a record: the row's status was its attempt 1,
    `skipped`, and the task left the denominator with its two `missing` attempts: pass@1 100% over B alone where
    A's attempts are owed. Defence: a task whose attempts are selected and missing is scored (`missing`, not
    resolved) until they have a result; once each is recorded skipped, it leaves as a skip."""
    from sweserve.reporting.summary import Selection, build_reports

    sel = Selection(attempts=3, tasks={"A": "decoding", "B": "decoding"}, per_task={"B": 1})
    recs = [record("A", "skipped", run_id="laptop"), record("B", "resolved", run_id="laptop")]
    (rep,) = build_reports(recs, {"a": sel})
    row = next(r for r in rep.tasks if r.task_id == "A")
    assert (rep.overall.scored, rep.overall.pass_at_1) == (2, 0.5), (row, rep.overall)
    assert row.missing_attempts == 2


def test_r21b_6_control_every_attempt_skipped_leaves_the_denominator():
    from sweserve.reporting.summary import Selection, build_reports

    sel = Selection(attempts=3, tasks={"A": "decoding", "B": "decoding"}, per_task={"B": 1})
    recs = [record("A", "skipped", attempt=n) for n in (1, 2, 3)] + [record("B", "resolved")]
    (rep,) = build_reports(recs, {"a": sel})
    assert (rep.overall.scored, rep.overall.pass_at_1) == (1, 1.0)
    assert next(r for r in rep.tasks if r.task_id == "A").status == "skipped"


# --- R21b-7 (lead): the same through a hard link in another folder ---------------------------------------------

def test_r21b_7_a_run_through_a_hard_link_is_refused_before_it_writes(tmp_path, monkeypatch):
    """Attack: as R21b-5 with `elsewhere/mine.jsonl` a hard link to real/results.jsonl: the lock is shared (one
    inode), the record lands in the file, and the manifest in elsewhere/runs/: task 1 leaves real's denominator.
    Defence (R22b-3): a run refuses a results file with more than one name before it writes a manifest or a
    record, so real's report never meets a run it cannot see."""
    real, link = _linked(tmp_path, hard=True)
    _ready_if(monkeypatch, "o__r-1", "o__r-2")
    with pytest.raises(SweserveError, match="hard link"):
        write_manifest(link, "R", _agent(), [bundle("o__r-1"), bundle("o__r-2")])
    assert not (link.parent / "runs").exists() and real.read_text() == ""
