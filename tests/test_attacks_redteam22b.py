"""Red team 22b: counting, resume, readiness and reports. Every selected (task, attempt) is counted once, in every
view of a results file: `report`, `report --difficulty`, the board; a resume, a copy of a file or a rerun of an
attempt must not count an attempt twice nor drop one."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from test_attacks_redteam15c import cli
from test_attacks_redteam21b import _agent
from test_report_properties import manifest, record
from test_results_report import bundle

from sweserve.errors import SweserveError
from sweserve.evaluation.evaluate import write_manifest
from sweserve.evaluation.results import ResultsWriter


def _write(out: Path, *records) -> None:
    with ResultsWriter(out) as w:
        for r in records:
            w.write(r)


def _difficulty(out: Path, *extra: str) -> dict:
    proc = cli("report", *extra, "--difficulty", "--json", cwd=out.parent)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def _tasks(cal: dict) -> dict[str, tuple[int, int]]:
    """task → (attempts counted, of them solved)."""
    return {t["task_id"]: (t["attempts"], t["solved"]) for t in cal["tasks"]}


# --- R22b-1: `report --difficulty` counted every record, not each attempt's latest --------------------------------

def test_r22b_1_difficulty_counts_a_rerun_attempt_once(tmp_path):
    """Attack: attempt 1 of task A failed while A was not ready; the task made ready, the resume ran attempt 1 again
    (`pending`) and it resolved. `report --include-unready` counts attempt 1 once (its latest record, resolved);
    `report --difficulty --include-unready` counted both records: 2 attempts, solve rate 50%, a second observation
    in the Rasch fit. Naming one file twice (`report --difficulty r.jsonl r.jsonl`), or a file and its copy (one
    attempt for `report`), doubled every attempt: the fit's standard errors shrank as if the agent had run twice.
    Defence: the fit takes what the report counts, the latest record of each (task, agent, attempt)."""
    out = tmp_path / "r.jsonl"
    _write(out, record("A", "failed", run_id="R1").model_copy(update={"task_ready": False}),
           record("A", "resolved", run_id="R2"), record("B", "failed", run_id="R2"))
    assert _tasks(_difficulty(out, str(out), "--include-unready")) == {"A": (1, 1), "B": (1, 0)}
    assert _tasks(_difficulty(out, str(out), str(out))) == {"A": (1, 1), "B": (1, 0)}
    copy = tmp_path / "copy.jsonl"
    copy.write_bytes(out.read_bytes())
    assert _tasks(_difficulty(out, str(out), str(copy))) == {"A": (1, 1), "B": (1, 0)}


def test_r22b_1_control_every_attempt_and_agent_is_counted(tmp_path):
    """Control: distinct attempts and agents each count: 3 attempts of A by a (2 solved), 1 by b."""
    out = tmp_path / "r.jsonl"
    _write(out, record("A", "resolved", attempt=1), record("A", "failed", attempt=2),
           record("A", "resolved", attempt=3), record("A", "failed", agent="b"))
    cal = _difficulty(out, str(out))
    assert _tasks(cal) == {"A": (4, 2)}
    assert {a["name"] for a in cal["abilities"]} == {"a", "b"}


# --- R22b-2: `report --difficulty` read no manifest: a killed attempt left the fit ---------------------------------

def test_r22b_2_difficulty_counts_a_selected_attempt_with_no_result_as_not_solved(tmp_path):
    """Attack: agent a's run R selected tasks A and B; A resolved, and the operator killed R while B was going
    badly (or the agent wedged it) and never resumed. `report` counts B `missing`, not resolved: pass@1 50%.
    `report --difficulty` read only the records: a solved 1 of 1, its ability as if it had solved everything it
    was given, and B's difficulty fitted without a's try. Defence: the fit counts what the report counts, a
    selected attempt with no result an unsolved one (shown as missing)."""
    out = tmp_path / "r.jsonl"
    manifest(tmp_path, "R", "a", {"A": "decoding", "B": "decoding"}, results=out.name)
    manifest(tmp_path, "S", "b", {"A": "decoding", "B": "decoding"}, results=out.name)
    _write(out, record("A", "resolved", run_id="R"), record("A", "resolved", agent="b", run_id="S"),
           record("B", "resolved", agent="b", run_id="S"))
    cal = _difficulty(out, str(out))
    assert _tasks(cal) == {"A": (2, 2), "B": (2, 1)}
    assert {t["task_id"]: t["missing"] for t in cal["tasks"]} == {"A": 0, "B": 1}
    ability = {a["name"]: a["ability"] for a in cal["abilities"]}
    assert ability["a"] < ability["b"]


def test_r22b_2_control_a_task_selected_and_skipped_stays_out_of_the_fit(tmp_path):
    """Control: a selected task skipped (the host cannot run it) says nothing of the task, as before; every
    selected attempt recorded leaves nothing missing."""
    out = tmp_path / "r.jsonl"
    manifest(tmp_path, "R", "a", {"A": "decoding", "B": "decoding"}, results=out.name)
    _write(out, record("A", "failed", run_id="R"), record("B", "skipped", run_id="R"))
    cal = _difficulty(out, str(out))
    assert _tasks(cal) == {"A": (1, 0)}
    assert cal["tasks"][0].get("missing", 0) == 0


# --- R22b-3: R21b-7's hard link: a run through another name of the results file, in another folder ---------------

def _two_names(tmp_path: Path, hard: bool) -> tuple[Path, Path]:
    real = tmp_path / "real" / "results.jsonl"
    real.parent.mkdir()
    real.write_text("")
    link = tmp_path / "elsewhere" / "mine.jsonl"
    link.parent.mkdir()
    (link.hardlink_to if hard else link.symlink_to)(real)
    return real, link


def test_r22b_3_a_run_through_a_hard_link_is_refused(tmp_path):
    """Attack (R21b-7): `run --output elsewhere/mine.jsonl`, a hard link to real/results.jsonl: the lock is the
    file's, the records land in it, and the manifest in elsewhere/runs/, where no report of real/results.jsonl
    looks: a task the run selected and never finished left real's denominator. A hard link names no file to follow
    (a symbolic one is followed, R21b-5). Defence: a run refuses a results file with more than one name, before it
    selects anything; it names the way out (a copy, or the one name)."""


    real, link = _two_names(tmp_path, hard=True)
    for name in (link, real):
        with pytest.raises(SweserveError, match="hard link"):
            write_manifest(name, "R", _agent(), [bundle("o__r-1")])
    assert not (link.parent / "runs").exists() and not (real.parent / "runs").exists()


def test_r22b_3_control_one_name_or_a_symbolic_link_runs(tmp_path):
    """Control: a results file with one name, reached by it or through a symbolic link, takes its run."""


    real, link = _two_names(tmp_path, hard=False)
    assert write_manifest(link, "R", _agent(), [bundle("o__r-1")]).parent == real.parent / "runs" / "R"
    fresh = tmp_path / "fresh" / "new.jsonl"  # a run's first: no file yet
    assert write_manifest(fresh, "S", _agent(), [bundle("o__r-1")]).exists()


# --- R22b-4: the board's pass@k column showed an agent's pass@1 under another agent's k --------------------------

def _board(tmp_path: Path, records) -> str:
    import re

    from sweserve.reporting.html import write_html_report
    from sweserve.reporting.summary import build_reports

    page = write_html_report(build_reports(records), records, {}, tmp_path / "site" / "report.html")
    return {m[0]: m[1] for m in re.findall(r'id="lb-([a-z]+)-pass_at_k">(.*?)</td>', page.read_text())}


def test_r22b_4_the_boards_pass_at_k_column_never_shows_another_k(tmp_path):
    """Attack: agent b ran `--attempts 3` (pass@3 100%: A solved once in three, B once), agent a one attempt each
    (pass@1 50%). The board's column is "pass@3", the most attempts of any agent, and each agent's cell its own
    pass@k: a's pass@1 stood as its pass@3, 50% against b's 100%, a comparison no report made (the text report
    titles each agent's k). Defence: an agent with another k shows no number in that column, and says its own k."""
    records = [record("A", "resolved"), record("B", "failed")]
    records += [record(t, "resolved" if n == 1 else "failed", agent="b", attempt=n) for t in "AB" for n in (1, 2, 3)]
    cells = _board(tmp_path, records)
    assert "100.0%" in cells["b"]
    assert cells["a"].startswith("—") and "pass@1" in cells["a"]


def test_r22b_4_control_agents_with_the_same_k_show_their_pass_at_k(tmp_path):
    records = [record(t, "resolved" if n == 1 else "failed", agent=ag, attempt=n)
               for ag in "ab" for t in "AB" for n in (1, 2)]
    assert _board(tmp_path, records) == {"a": "100.0%", "b": "100.0%"}


# --- R22b-5: more attempts for the tasks that failed, chosen after seeing them ------------------------------------

def test_r22b_5_a_report_says_when_tasks_were_asked_different_attempts(tmp_path):
    """Attack: run R (A and B, one attempt each): A failed, B resolved, pass@1 50%. The operator, having seen A
    fail, runs `sweserve run A --attempts 3` on the same file: A's attempts 2 and 3 resolve. pass@1 is the mean of
    each task's share (R12b-4): A 2/3, B 1/1, 83%; the attempts were added where the first failed, never where it
    passed, and the report read as one measurement of every task alike. The number is the documented estimator;
    the defence is that the report says which tasks were asked more attempts than others (JSON, text, board)."""
    out = tmp_path / "r.jsonl"
    manifest(tmp_path, "R", "a", {"A": "decoding", "B": "decoding"}, results=out.name)
    manifest(tmp_path, "S", "a", {"A": "decoding"}, attempts=3, results=out.name)
    _write(out, record("A", "failed", run_id="R"), record("B", "resolved", run_id="R"),
           record("A", "resolved", attempt=2, run_id="S"), record("A", "resolved", attempt=3, run_id="S"))
    proc = cli("report", str(out), "--json", cwd=tmp_path)
    (rep,) = json.loads(proc.stdout)
    assert rep["uneven_attempts"] == ["A"]
    text = cli("report", str(out), cwd=tmp_path).stdout
    assert "asked more attempts" in text
    from sweserve.reporting.html import write_html_report

    board = write_html_report([_rep_of(rep)], [], {}, tmp_path / "site" / "b.html").read_text()
    assert 'id="lb-a-uneven_attempts"' in board


def _rep_of(data: dict):
    from sweserve.reporting.summary import AgentReport

    return AgentReport.model_validate(data)


def test_r22b_5_control_every_task_asked_alike(tmp_path):
    out = tmp_path / "r.jsonl"
    manifest(tmp_path, "R", "a", {"A": "decoding", "B": "decoding"}, attempts=2, results=out.name)
    _write(out, *(record(t, "failed", attempt=n, run_id="R") for t in "AB" for n in (1, 2)))
    (rep,) = json.loads(cli("report", str(out), "--json", cwd=tmp_path).stdout)
    assert rep.get("uneven_attempts", []) == []
    assert "asked more attempts" not in cli("report", str(out), cwd=tmp_path).stdout


def test_r22b_2_control_a_folders_task_no_run_selected_is_no_ones_attempt(tmp_path):
    """Control: `report --difficulty --tasks tasks`: a task of the folder that no run selected (a pack's task a
    candidate was never given) is no one's unsolved attempt; the folder only judges readiness."""
    from test_attacks_redteam21b import _tasks_folder

    _tasks_folder(tmp_path, ready={1, 2})
    out = tmp_path / "r.jsonl"
    manifest(tmp_path, "R", "a", {"o__r-1": "decoding"}, results=out.name)
    _write(out, record("o__r-1", "resolved", run_id="R"))
    cal = _difficulty(out, str(out), "--tasks", "tasks")
    assert _tasks(cal) == {"o__r-1": (1, 1)}
