"""Red team 20d: counting, resume and reports after the run manifest got one model and one reader
(`models.RunManifest`, `results.read_manifest` / `manifest_or_none`). Every selected task ends in exactly one
recorded result, and the reports count honestly: a manifest no reader can read, and a `--retry-errors` killed
before its result, must not change the denominator or what a reviewer is shown."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from test_results_report import bundle, result

from sweserve.agents.reference import NullAgent
from sweserve.errors import SweserveError
from sweserve.evaluation.evaluate import next_attempt, run_evaluation, run_id_taken, write_manifest
from sweserve.evaluation.results import ResultsWriter, read_manifest
from sweserve.evaluation.trial_folder import TrialFolder, runs_root
from sweserve.reporting.summary import read_manifests


def _agent(name: str = "a") -> NullAgent:
    agent = NullAgent()
    agent.name = name
    return agent


class _Ctx:
    def __init__(self, run_id: str):
        self.run_id = run_id

    def settle(self) -> None:
        pass


def _unreadable(path: Path, how: str) -> None:
    """The manifest at path as an older (or newer) writer, a disk error or a hand edit left it."""
    data = json.loads(path.read_text())
    if how == "started_at":
        data["started_at"] = "yesterday"
    elif how == "attempts":
        data["attempts"] = 1.5
    elif how == "families":
        data["families"] = {t: 7 for t in data["tasks"]}
    elif how == "torn":
        path.write_text(path.read_text()[:40])
        return
    path.write_text(json.dumps(data))


@pytest.mark.parametrize("how", ["started_at", "attempts", "families", "torn"])
def test_r20d_1_a_resume_never_overwrites_a_manifest_it_cannot_read(tmp_path, how):
    """Attack: run R selected tasks 1 and 2 and was killed before either had a result; its manifest is one this
    version cannot read (another version's field, a hand edit). `report` refuses it ("not a run manifest"), so
    the two `missing` tasks block the board. `sweserve run --run-id R` with only task 3 read it as no manifest
    (`manifest_or_none`), found the id free, and overwrote it: the report then counted task 3 alone, tasks 1 and
    2 gone from the denominator (R15c-7's hole, reopened). The same reading let another agent take the id.
    Defence: resume reads a manifest that is there strictly (`read_manifest`): one clear line, nothing rewritten.
    """
    out = tmp_path / "results.jsonl"
    path = write_manifest(out, "R", _agent(), [bundle("o__r-1"), bundle("o__r-2")])
    _unreadable(path, how)
    before = path.read_text()
    with pytest.raises(SweserveError, match="not a run manifest"):
        read_manifests(runs_root(out), out.name)  # the report refuses it
    with pytest.raises(SweserveError, match="not a run manifest"):
        write_manifest(out, "R", _agent(), [bundle("o__r-3")])
    with pytest.raises(SweserveError, match="not a run manifest"):
        write_manifest(out, "R", _agent("b"), [bundle("o__r-3")])  # another agent taking the id
    with pytest.raises(SweserveError, match="not a run manifest"):
        run_id_taken(out, "R", "b")
    assert path.read_text() == before, "the unreadable manifest was overwritten: its selection left the denominator"


def test_r20d_1_a_session_never_takes_the_number_of_a_killed_one_whose_manifest_it_cannot_read(tmp_path):
    """Variant: a human's killed session left a manifest this version cannot read; `next_attempt` skipped it and
    the retake was attempt 1 again, read as a first try (R16b-5's hole). Defence: one clear line instead."""
    out = tmp_path / "results.jsonl"
    path = write_manifest(out, "first-session", _agent("alice"), [bundle("o__r-1")])
    _unreadable(path, "started_at")
    with pytest.raises(SweserveError, match="not a run manifest"):
        next_attempt(out, "alice", "o__r-1")


def test_r20d_1_control_resume_of_a_readable_manifest_keeps_its_selection(tmp_path):
    out = tmp_path / "results.jsonl"
    write_manifest(out, "R", _agent(), [bundle("o__r-1"), bundle("o__r-2")])
    path = write_manifest(out, "R", _agent(), [bundle("o__r-3")])
    assert set(read_manifest(path).tasks) == {"o__r-1", "o__r-2", "o__r-3"}
    assert run_id_taken(out, "fresh", "b") is None
    assert next_attempt(out, "a", "o__r-1") == 2


class _KilledExecutor:
    """The retry starts writing its trial folder and is killed (-9) before its result: nothing is recorded."""

    def map_unordered(self, fn, requests):
        for req in requests:
            req.folder.write("agent.log", "the killed retry's partial log")
            raise KeyboardInterrupt
        yield from ()


def _earlier_error(out: Path):
    folder = TrialFolder.for_trial(out, "nightly", "a", "o__r-1", 1)
    r = result("o__r-1", "error", reason="docker daemon went away")
    r.run_id, r.error_kind, r.trial_dir = "nightly", "docker", str(folder.path)
    folder.write("traceback.txt", "the earlier try's evidence")
    folder.write_result(r)
    with ResultsWriter(out) as w:
        w.write(r)
    return folder


def _found_folder(out: Path) -> Path:
    from sweserve.cli.report import _with_trial_folders
    from sweserve.evaluation.results import read_results

    r = _with_trial_folders(out, read_results(out))[-1]  # the latest record, the one reports count
    assert r.trial_dir
    return Path(r.trial_dir)


def test_r20d_2_a_retry_killed_before_its_result_leaves_the_earlier_evidence_on_the_page(tmp_path):
    """Attack: run `nightly` ended task 1 in a machinery `error`; `run --run-id nightly --retry-errors` moves the
    trial folder aside (`1.earlier-1`, R16b-6) and is killed before the retry's result. The index still holds
    the earlier error, and the report linked it to `runs/nightly/a/o__r-1/1/`: now the killed retry's partial
    folder. The reviewer saw the killed try's log as the recorded trial's, and its own traceback was on no
    page. Defence: a record's folder is the one whose `result.json` is that record (the folder, or one of its
    `.earlier-N`), so moving folders aside never moves evidence out of view."""
    out = tmp_path / "results.jsonl"
    _earlier_error(out)
    with pytest.raises(KeyboardInterrupt):
        run_evaluation(_Ctx("nightly"), [bundle("o__r-1")], _agent(), out, retry_errors=True,
                       executor=_KilledExecutor())
    found = _found_folder(out)
    assert (found / "traceback.txt").is_file(), f"the recorded error's page shows {found}, not its own trial"


def test_r20d_2_control_a_finished_retry_shows_its_own_folder(tmp_path):
    out = tmp_path / "results.jsonl"
    folder = _earlier_error(out)
    from test_attacks_redteam16b import _Executor

    ctx = _Ctx("nightly")
    run_evaluation(ctx, [bundle("o__r-1")], _agent(), out, retry_errors=True, executor=_Executor(ctx))
    found = _found_folder(out)
    assert found == folder.path and not (found / "traceback.txt").exists()


def test_r20d_2_control_a_folder_without_result_json_is_still_found(tmp_path):
    """Trial folders from before result.json (or one whose result.json could not be written) stay linked."""
    out = tmp_path / "results.jsonl"
    folder = _earlier_error(out)
    (folder.path / "result.json").unlink()
    assert _found_folder(out) == folder.path


def test_r20d_2_review_shows_the_recorded_trials_folder_after_a_killed_retry(tmp_path):
    """Variant: `sweserve review results.jsonl ID` read the record's own `trial_dir`, the killed retry's folder."""
    from sweserve.evaluation.results import read_results
    from sweserve.evaluation.trial_folder import folder_of

    out = tmp_path / "results.jsonl"
    earlier = _earlier_error(out)
    with pytest.raises(KeyboardInterrupt):
        run_evaluation(_Ctx("nightly"), [bundle("o__r-1")], _agent(), out, retry_errors=True,
                       executor=_KilledExecutor())
    (r,) = read_results(out)
    found = folder_of(out, r)
    assert found == earlier.path.with_name("1.earlier-1") and (found / "traceback.txt").is_file()


def _two_runs_one_unready_then_ready(tmp_path, monkeypatch):
    """Run R1 (`--include-unready`) selected task 1 while it was not ready and was killed before it ran; task 1
    was validated since, and run R2 selected tasks 1 and 2 (both ready) and was killed after task 2 resolved."""
    from test_report_properties import record

    import sweserve.dataset.readiness as readiness

    out = tmp_path / "results.jsonl"
    real = readiness.why_not_ready
    monkeypatch.setattr(readiness, "why_not_ready",
                        lambda task, instruction: "not validated" if task.task_id == "o__r-1" else None)
    write_manifest(out, "R1", _agent(), [bundle("o__r-1")])
    monkeypatch.setattr(readiness, "why_not_ready", lambda task, instruction: None)
    write_manifest(out, "R2", _agent(), [bundle("o__r-1"), bundle("o__r-2")])
    monkeypatch.setattr(readiness, "why_not_ready", real)
    out.write_text(record("o__r-2", "resolved", run_id="R2").model_copy(update={"task_ready": True})
                   .model_dump_json() + "\n")
    return out


def test_r20d_3_a_task_one_run_selected_ready_stays_missing_when_another_selected_it_unready(tmp_path, monkeypatch):
    """Attack: two runs of one agent on one results file; R1 judged task 1 not ready, R2 selected it ready and
    was killed before it ran. The report merged the runs' `unready` lists as a union, so task 1 (a ready task
    the run selected, with no result) left the denominator instead of counting `missing`: pass@1 100% where it
    is 50%. An agent that fails (or kills) a task can keep it off the board by having an earlier scratch run
    select it while unready. Defence: merged, a task is unready only if every run that selected it said so."""
    from test_attacks_redteam15c import cli

    out = _two_runs_one_unready_then_ready(tmp_path, monkeypatch)
    assert read_manifest(runs_root(out) / "R2" / "manifest.json").unready == []
    proc = cli("report", str(out), "--json", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    (rep,) = json.loads(proc.stdout)
    assert (rep["statuses"]["missing"], rep["overall"]["pass_at_1"]) == (1, 0.5), rep["tasks"]


def test_r20d_3_merged_selections_are_unready_only_where_every_run_said_so():
    """Variant, on the merge itself; control: a task only ever selected unready stays out of the denominator."""
    from sweserve.reporting.summary import Selection

    a = Selection(tasks={"t1": None, "t2": None}, unready=["t1"])
    b = Selection(tasks={"t1": None}, unready=["t1"])
    c = Selection(tasks={"t3": None})
    assert a.merge(b).unready == ["t1"] and a.merge(c).unready == ["t1"] and c.merge(a).unready == ["t1"]
    assert a.merge(Selection(tasks={"t1": None})).unready == []


def _report_of_manifest(tmp_path, text: str, record_attempt: int | None = None):
    import os
    import subprocess
    import sys

    from test_attacks_redteam15c import ROOT

    out = tmp_path / "results.jsonl"
    path = runs_root(out) / "R" / "manifest.json"
    path.parent.mkdir(parents=True)
    path.write_text(text)
    out.write_text("")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), str(ROOT / "tests")])}
    return subprocess.run([sys.executable, "-m", "sweserve.cli", "report", str(out), "--json"], cwd=tmp_path,
                          capture_output=True, text=True, env=env, timeout=30)


def test_r20d_4_a_deeply_nested_manifest_is_one_clear_line_not_an_internal_error(tmp_path):
    """Attack: a manifest of nested brackets (a corrupted or hand-made file) raised RecursionError in json.loads,
    which `read_manifest` did not catch: `report` said "internal error ... a bug in sweserve", exit 1, and wrote a
    crash traceback. `read_results` already catches it for results lines. Defence: the same for manifests: "not a
    run manifest", exit 2."""
    proc = _report_of_manifest(tmp_path, "[" * 100_000 + "]" * 100_000)
    assert proc.returncode == 2 and "not a run manifest" in proc.stderr, proc.stderr[-300:]
    assert "internal error" not in proc.stderr


@pytest.mark.parametrize("manifest", [{"attempts": 10**15}, {"attempts": 2, "per_task": {"o__r-1": 10**15}}])
def test_r20d_5_a_manifest_asking_absurd_attempts_is_refused_not_a_hang(tmp_path, manifest):
    """Attack: a manifest asking 10^15 attempts of a task (`run --attempts` took any number; a hand edit) made
    `report` loop over every attempt for its standard error and pass@k: it never finished (no line, no exit).
    Defence: attempts are bounded (`models.MAX_ATTEMPTS`) in the manifest model, results records and
    `run --attempts`; past it the manifest is "not a run manifest", one line, exit 2."""
    import subprocess

    try:
        proc = _report_of_manifest(tmp_path, json.dumps({"agent": "a", "results": "results.jsonl",
                                                         "tasks": {"o__r-1": None}, **manifest}))
    except subprocess.TimeoutExpired:
        pytest.fail("report hung on a manifest asking 10^15 attempts")
    assert proc.returncode == 2 and "not a run manifest" in proc.stderr, proc.stderr[-300:]


def test_r20d_5_control_many_attempts_within_bounds_report(tmp_path):
    proc = _report_of_manifest(tmp_path, json.dumps({"agent": "a", "results": "results.jsonl",
                                                     "tasks": {"o__r-1": None}, "attempts": 50}))
    assert proc.returncode == 0, proc.stderr
    (rep,) = json.loads(proc.stdout)
    assert rep["tasks"][0]["missing_attempts"] == 50


@pytest.mark.xfail(strict=True, reason="R20d-6: a manifest names its results file by name only; a file renamed away and "
                                       "a new one under the old name cannot be told apart (needs the file's identity)")
def test_r20d_6_a_renamed_file_and_a_new_one_under_its_old_name_keep_their_own_selections(tmp_path):
    """Attack: run R (task 1) on a.jsonl resolved nothing and was killed; a.jsonl is renamed b.jsonl, and run S
    (task 2) writes a fresh a.jsonl. `report b.jsonl` skipped R's manifest (it names a.jsonl, which exists and is
    another file): R's missing task 1 left b's denominator; `report a.jsonl` counted it, a task no run of that
    file selected. Lead: record the results file's identity (a token written as its first line, or its inode and
    birth time) in the manifest, and match on it."""
    from test_report_properties import record

    a, b = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    write_manifest(a, "R", _agent(), [bundle("o__r-1"), bundle("o__r-3")])
    a.write_text(record("o__r-3", "failed", run_id="R").model_dump_json() + "\n")
    a.rename(b)
    write_manifest(a, "S", _agent(), [bundle("o__r-2")])
    a.write_text(record("o__r-2", "resolved", run_id="S").model_dump_json() + "\n")
    of_b = read_manifests(runs_root(b), b.name, {"a"}, {"R"})
    of_a = read_manifests(runs_root(a), a.name, {"a"}, {"S"})
    assert set(of_a["a"].tasks) == {"o__r-2"}, "a.jsonl's report counts R's tasks, which it never selected"
    assert "a" in of_b and set(of_b["a"].tasks) == {"o__r-1", "o__r-3"}, "R's missing task left b.jsonl's report"


def test_a_task_run_while_unready_is_run_again_once_ready_and_counted(tmp_path, monkeypatch):
    """Lead left by red team 20d: run R1 (`--include-unready`) recorded task 1 while it was not ready; task 1 was
    validated since, and run R2 (ready tasks only) on the same file skipped it as done. The report leaves out
    results run while not ready, so task 1, a ready task R2 selected, was neither counted nor `missing`: it left
    the denominator (pass@1 100% where R2 resolved one of two). Defence: a result recorded while the task was not
    ready does not finish it for a run that finds it ready (`pending`); the report reads each attempt's latest
    record, so the ready run's result is the one counted."""
    from test_attacks_redteam15c import cli
    from test_report_properties import record

    import sweserve.dataset.readiness as readiness
    from sweserve.evaluation.evaluate import pending

    out = tmp_path / "results.jsonl"
    real = readiness.why_not_ready
    monkeypatch.setattr(readiness, "why_not_ready",
                        lambda task, instruction: "not validated" if task.task_id == "o__r-1" else None)
    write_manifest(out, "R1", _agent(), [bundle("o__r-1")])
    with ResultsWriter(out) as w:
        w.write(record("o__r-1", "resolved", run_id="R1").model_copy(update={"task_ready": False}))
    monkeypatch.setattr(readiness, "why_not_ready", lambda task, instruction: None)
    both = [bundle("o__r-1"), bundle("o__r-2")]
    assert [b.task.task_id for b, _ in pending(both, _agent(), 1, out)] == ["o__r-1", "o__r-2"]
    write_manifest(out, "R2", _agent(), both)
    with ResultsWriter(out) as w:
        w.write(record("o__r-2", "resolved", run_id="R2").model_copy(update={"task_ready": True}))
    monkeypatch.setattr(readiness, "why_not_ready", real)
    proc = cli("report", str(out), "--json", cwd=tmp_path)  # R2 killed before it ran task 1 again
    assert proc.returncode == 0, proc.stderr
    (rep,) = json.loads(proc.stdout)
    assert (rep["statuses"]["missing"], rep["overall"]["pass_at_1"]) == (1, 0.5), rep["tasks"]
    with ResultsWriter(out) as w:  # and run again: the ready run's own record is the one counted
        w.write(record("o__r-1", "failed", run_id="R2").model_copy(update={"task_ready": True}))
    proc = cli("report", str(out), "--json", cwd=tmp_path)
    (rep,) = json.loads(proc.stdout)
    assert (rep["statuses"]["missing"], rep["overall"]["pass_at_1"]) == (0, 0.5), rep["tasks"]
    monkeypatch.setattr(readiness, "why_not_ready", lambda task, instruction: "not validated")
    assert pending(both[:1], _agent(), 1, out) == []  # control: an unready run takes any record as done
