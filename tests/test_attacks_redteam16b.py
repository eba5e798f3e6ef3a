"""Red team 16b: counting, resume and reports.

Each test asserts the defended behaviour: it FAILS while the attack (or the honest user's mishap) wins. No Docker.

- R16b-1 a human candidate in `sweserve session` writes `#²` (a Unicode digit) or `#` and 5,000 digits into
  its own ~/.bash_history: `parse_history` calls `int()` on it and raises, the session ends as an `internal`
  error, which the Rasch fit (scorecards, `report --difficulty`) leaves out: a failed attempt gone on request.
- R16b-2 a task whose attempt 1 is `skipped` (a laptop run) and whose attempts 2..k ran later (the GPU host's
  `--attempts 3`) leaves the denominator whole: its failed attempts vanish and pass@1 rises.
- R16b-3 a manifest names its results file by the name the run was given: reported through a link, or after
  the file was renamed, every manifest is ignored and the selected tasks with no result stop being `missing`.
- R16b-4 a task named twice (`run $(cat a.txt b.txt)`) runs twice and records one attempt twice; the later counts.
- R15g-5 (left, fixed here) an unready task a killed `--include-unready` run selected counted `missing`.
- R16b-5 an assessment session killed before its result: the retake takes its attempt number, no trace left.
- R16b-6 a resume under the same `--run-id` redoes a killed trial in its folder: the new result's reviewer page
  shows the killed try's steps and log.
"""

from __future__ import annotations

import json

import pytest
from test_attacks_redteam15c import cli
from test_report_properties import record

# --- R16b-1: a history line the keeper cannot parse -------------------------------------------------------------


class _Box:
    """A sandbox whose only file is the candidate's bash history."""

    def __init__(self, history: bytes):
        self.history = history

    def read_file(self, path, max_bytes=0):
        return self.history


@pytest.mark.parametrize("stamp", ["#\u00b2", "#" + "9" * 5000])
def test_a_history_line_the_candidate_writes_never_turns_the_session_into_an_internal_error(stamp):
    """The candidate is root in the sandbox and owns ~/.bash_history (mode 0666). `parse_history` takes a line
    `#<digits>` as a time stamp when `str.isdigit()` says so, then `int()`s it: `²` is a digit to isdigit and
    not to int (ValueError), and 5,000 ASCII digits pass isdigit and exceed int's 4,300-digit limit (ValueError).
    `HistoryKeeper.finish()` polls once more after the shell ends and raises out of `HumanAgent.solve`:
    `run_trial` records `error`/`internal` ("a bug in sweserve"), and `assess.difficulty.response` leaves an
    internal error out of the fit (only OWN_ERRORS count as a 0), so a candidate who doubts their fix erases
    the failed attempt from their ability estimate with one `echo '#²' >> ~/.bash_history`. The keeper's
    thread dies at the first such poll too, so nothing typed after it is copied while the session runs."""
    from sweserve.agents.human import HistoryKeeper, parse_history

    text = f"#1700000000\nls\n{stamp}\ngit diff\n"
    entries = parse_history(text)  # the candidate's text: never an exception
    assert [cmd for _, cmd in entries if cmd != stamp] == ["ls", "git diff"]
    keeper = HistoryKeeper(_Box(text.encode()), poll_s=3600)
    transcript, _flags = keeper.finish()
    assert "git diff" in transcript


# --- R16b-2: attempt 1 skipped, attempts 2..k ran ---------------------------------------------------------------

def test_a_skipped_first_attempt_does_not_hide_the_attempts_that_ran():
    """`sweserve run --attempts 1` on a laptop records the GPU task A `skipped` (needs 1 GPU, host has 0). On the
    GPU host `sweserve run --attempts 3` runs what is pending: attempts 2 and 3 (a plain resume leaves the skip,
    as documented), both failed. `build_reports` gives each task the status of its attempt 1 and `_rate` leaves
    every `skipped` row out of the denominator: A, two real failures, is not scored at all, and the agent shows
    100% where one of its two tasks never resolved. (The reverse, attempt 1 ran and 2..k skipped, counts the
    skips as failures: the same task is out or in by which attempt the host could not run.)"""
    from sweserve.reporting.summary import Selection, build_reports

    results = [record("A", "skipped", attempt=1), record("A", "failed", attempt=2), record("A", "failed", attempt=3),
               *(record("B", "resolved", attempt=n) for n in (1, 2, 3))]
    (rep,) = build_reports(results, {"a": Selection(attempts=3, tasks={"A": "decoding", "B": "decoding"})})
    assert rep.overall.scored == 2, [(t.task_id, t.status, t.attempts) for t in rep.tasks]
    assert rep.overall.pass_at_1 == pytest.approx(0.5)


def test_control_a_task_skipped_on_every_attempt_stays_out_of_the_denominator():
    from sweserve.reporting.summary import Selection, build_reports

    results = [*(record("A", "skipped", attempt=n) for n in (1, 2)), *(record("B", "resolved", attempt=n) for n in (1, 2))]
    (rep,) = build_reports(results, {"a": Selection(attempts=2, tasks={"A": "decoding", "B": "decoding"})})
    assert rep.overall.scored == 1 and rep.overall.pass_at_1 == 1.0


# --- R16b-3: manifests matched by the results file's name --------------------------------------------------------

def _killed_run(tmp_path, given: str):
    """A run on tasks A, B, C through the name `given`, killed after A resolved: B and C are selected, no result."""
    from test_results_report import bundle

    import sweserve.dataset.readiness as readiness
    from sweserve.agents.reference import NullAgent
    from sweserve.evaluation.evaluate import write_manifest

    agent = NullAgent()
    agent.name = "a"
    real, readiness.why_not_ready = readiness.why_not_ready, lambda task, instruction: None  # three ready tasks
    try:
        write_manifest(tmp_path / "results" / given, "R", agent, [bundle(f"o__r-{i}") for i in (1, 2, 3)])
    finally:
        readiness.why_not_ready = real
    (tmp_path / "results" / "real.jsonl").write_text(record("o__r-1", "resolved", run_id="R").model_dump_json() + "\n")


def _missing(tmp_path, name: str):
    proc = cli("report", str(tmp_path / "results" / name), "--json", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    (rep,) = json.loads(proc.stdout)
    return rep["statuses"]["missing"], rep["overall"]["pass_at_1"]


def test_control_the_killed_run_reported_by_its_own_name_counts_its_missing_tasks(tmp_path):
    (tmp_path / "results").mkdir()
    _killed_run(tmp_path, "real.jsonl")
    assert _missing(tmp_path, "real.jsonl") == (2, pytest.approx(1 / 3))


def test_a_run_through_a_link_reported_by_the_files_own_name_keeps_its_missing_tasks(tmp_path):
    """R15c-8's setup: CI runs `--output results/current.jsonl`, a link to the month's file `real.jsonl`; the run
    is killed after 1 of 3 tasks. Its manifest says `"results": "current.jsonl"`; `report results/real.jsonl`
    reads manifests for `real.jsonl` only, so B and C (selected, never run) leave the denominator: 100%, where
    the same file reported through the link says 33%."""
    (tmp_path / "results").mkdir()
    (tmp_path / "results" / "current.jsonl").symlink_to("real.jsonl")
    _killed_run(tmp_path, "current.jsonl")
    assert _missing(tmp_path, "current.jsonl") == (2, pytest.approx(1 / 3))
    assert _missing(tmp_path, "real.jsonl") == (2, pytest.approx(1 / 3))


def test_a_renamed_results_file_keeps_its_missing_tasks(tmp_path):
    """`mv results/a.jsonl results/a-2026-12.jsonl` (archiving a month) beside its runs/ folder: every manifest
    names `a.jsonl`, which is no longer there, and `report results/a-2026-12.jsonl` reads none of them: the killed
    run's unrun tasks stop being `missing`, pass@1 goes from 33% to 100%."""
    (tmp_path / "results").mkdir()
    _killed_run(tmp_path, "a.jsonl")
    (tmp_path / "results" / "real.jsonl").rename(tmp_path / "results" / "a-2026-12.jsonl")
    assert _missing(tmp_path, "a-2026-12.jsonl") == (2, pytest.approx(1 / 3))


# --- R16b-4: a task named twice on the command line -------------------------------------------------------------

class _Ctx:
    def __init__(self, run_id: str):
        self.run_id = run_id

    def settle(self) -> None:
        pass


class _Executor:
    """Runs no sandbox: each trial ends `failed`, then `resolved` (a second sample of an unsure agent)."""

    def __init__(self, ctx):
        self.ctx, self.statuses = ctx, iter(["failed", "resolved", "resolved"])

    def map_unordered(self, fn, requests):
        from sweserve.evaluation.trial import record_result

        for req in requests:
            yield record_result(self.ctx.run_id, req, {"status": next(self.statuses)})


def test_a_task_named_twice_is_run_and_recorded_once(tmp_path):
    """`sweserve run $(cat hard.txt easy.txt) --agent X` where a task is in both lists: `select` keeps both
    copies, `pending` gives (A, 1) twice, and both trials run (with --workers 2, at once in one trial folder)
    and are recorded under one key. The report keeps the later record: attempt 1 of A is the better of two
    samples (failed, then resolved), and the results file holds two records of one attempt."""
    from test_results_report import bundle

    from sweserve.agents.reference import NullAgent
    from sweserve.evaluation.evaluate import run_evaluation
    from sweserve.evaluation.results import read_results

    agent = NullAgent()
    agent.name = "a"
    out = tmp_path / "results.jsonl"
    ctx = _Ctx("R")
    run_evaluation(ctx, [bundle("o__r-1"), bundle("o__r-1")], agent, out, executor=_Executor(ctx))
    assert [(r.task_id, r.attempt, r.status) for r in read_results(out)] == [("o__r-1", 1, "failed")]


# --- known (red team 15g's R15g-5, left): an unready selected task with no result, reported without --tasks ------

def test_an_unready_task_a_killed_run_selected_is_not_missing_without_tasks_folder(tmp_path, monkeypatch):
    """`sweserve run --include-unready A B` (B not ready) is killed after A resolved. `report results.jsonl`
    leaves unready results out by default, but B has none to say it was unready, and the manifest said nothing of
    readiness: B counted `missing` (pass@1 50%, where the report claims to count ready tasks only: 100%). The
    manifest now records which selected tasks were not ready when selected."""
    from test_results_report import bundle

    import sweserve.dataset.readiness as readiness
    from sweserve.agents.reference import NullAgent
    from sweserve.evaluation.evaluate import write_manifest

    real = readiness.why_not_ready
    monkeypatch.setattr(readiness, "why_not_ready",
                        lambda task, instruction: None if task.task_id == "o__r-1" else real(task, instruction))
    agent = NullAgent()
    agent.name = "a"
    out = tmp_path / "results.jsonl"
    write_manifest(out, "R", agent, [bundle("o__r-1"), bundle("o__r-2")])
    out.write_text(record("o__r-1", "resolved", run_id="R").model_copy(update={"task_ready": True})
                   .model_dump_json() + "\n")
    monkeypatch.undo()
    proc = cli("report", str(out), "--json", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    (rep,) = json.loads(proc.stdout)
    assert (rep["statuses"]["missing"], rep["overall"]["pass_at_1"]) == (0, 1.0), rep["tasks"]
    proc = cli("report", str(out), "--json", "--include-unready", cwd=tmp_path)
    (rep,) = json.loads(proc.stdout)
    assert rep["statuses"]["missing"] == 1  # with --include-unready, B is selected and has no result


# --- R16b-5: an assessment session killed before its result: the retake reuses its attempt number ------------------

def test_a_session_killed_before_its_result_is_not_retaken_under_its_attempt_number(tmp_path, monkeypatch):
    """The assess server (or `sweserve session`) is killed (-9, a crash, a reboot) while alice works task 1: its
    run wrote the manifest (attempt 1) and the terminal cast into the trial folder, and no result. Her next link
    numbers the attempt `1 + max(recorded attempts)` = 1 again: the retake IS attempt 1. The report shows one
    attempt, never missing; the scorecard's `earlier attempts` (R12a-3: a retake is said) is empty; the first
    session, where she read the task and worked it out, is on no page. Started attempts (a manifest selected
    them) must count: the retake is attempt 2, and attempt 1 stays `missing`."""
    from test_assess import Ctx
    from test_assess import bundle as assess_bundle

    import sweserve.assess.server as server_mod
    from sweserve.assess.agent import BrowserAgent, Seat
    from sweserve.assess.invites import Invite
    from sweserve.assess.packs import check_pack, choose_pack
    from sweserve.assess.server import Assessment
    from sweserve.evaluation.evaluate import write_manifest

    results = tmp_path / "r.jsonl"
    task = assess_bundle(1)
    killed = BrowserAgent("alice", Seat("alice"), 60, lambda b: tmp_path / "cast")
    write_manifest(results, "first-session", killed, [task], attempts=1)  # the killed session's run
    seen = []

    def fake_run_evaluation(ctx, bundles, agent, results_path, **kw):
        seen.append(kw["first_attempt"])
        return []

    monkeypatch.setattr(server_mod, "run_evaluation", fake_run_evaluation)
    pack = choose_pack("p", [task], 1, 7200)
    invite = Invite(invite_id="x", candidate="alice", pack="p.yaml", pack_version=pack.version,
                    token_sha256="0" * 64, created_at="2026-01-01T00:00:00Z", expires_at="2026-01-01T00:00:00Z")
    a = Assessment(invite, pack, check_pack(pack, {task.task.task_id: task}), results, Seat("alice"))
    a.run(Ctx())
    assert seen == [2], "the retake took the killed session's attempt number"


# --- R16b-6: a resume under the same --run-id redoes a killed trial in the killed try's folder ------------------------

def test_a_redone_trial_never_shows_the_killed_trys_files_as_its_own(tmp_path):
    """`sweserve run --run-id nightly` is killed (-9) while task A is graded: A's trial folder holds the killed
    try's steps.json, agent.log, submission.patch and outcomes.json, and the index no record. The resume
    `sweserve run --run-id nightly` redoes A #1 in the same folder; where the new try writes no trajectory (its
    agent died early, an image build failed), the reviewer page of the new result reads the
    killed try's steps (`read_steps`), its `agent.log` and `tests.log`: another attempt's work shown as this
    one's. The folder of a try that left no record is set aside, not reused."""
    from test_results_report import bundle

    from sweserve.agents.reference import NullAgent
    from sweserve.evaluation.evaluate import run_evaluation
    from sweserve.evaluation.trial_folder import TrialFolder
    from sweserve.reporting.review import read_steps

    out = tmp_path / "results.jsonl"
    killed = TrialFolder.for_trial(out, "nightly", "a", "o__r-1", 1)
    killed.write("steps.json", json.dumps([{"thought": "the killed try's plan", "command": "ls", "output": ""}]))
    killed.write("agent.log", "the killed try's log")
    agent = NullAgent()
    agent.name = "a"
    ctx = _Ctx("nightly")
    (result,) = run_evaluation(ctx, [bundle("o__r-1")], agent, out, executor=_Executor(ctx))
    assert read_steps(result) == [], "the redone trial's page shows the killed try's steps"
    assert not (killed.path / "agent.log").exists()
