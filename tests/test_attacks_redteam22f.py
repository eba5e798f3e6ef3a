"""Red team 22f: the newest counting fixes' neighbours. `assess`'s own results feed (`--results`, for `assess pack`
and the scorecard's fit) must count each attempt once, as `report --difficulty` does (R22b-1)."""

from __future__ import annotations

from pathlib import Path

from test_assess import bundle as assess_bundle
from test_attacks_redteam16c import ability_of, result
from test_report_properties import record

from sweserve.assess.packs import choose_pack
from sweserve.assess.scorecard import write_scorecards
from sweserve.evaluation.results import ResultsWriter, read_results


def _write(out: Path, *records) -> None:
    with ResultsWriter(out) as w:
        for r in records:
            w.write(r)


# --- R22f-1: `assess --results` fed every record of every file named into the fit ----------------------------------

def test_r22f_1_assess_results_count_each_attempt_once(tmp_path):
    """Attack: `assess pack --results r.jsonl --results r.jsonl` (or a file and its copy, or a file whose attempt 1
    was rerun after a superseded record) fed every line of each to the Rasch fit: `_results` concatenated
    `read_results`, so a file named twice doubled every observation and a rerun attempt's superseded failure (run
    while the task was not ready) still counted, moving the difficulty that sets the pack's time budgets. Defence:
    the same reading as `report`: each (task, agent, attempt) once, its latest record, a copy once; unready
    records left out as `report` leaves them."""
    from sweserve.cli.assess import _results

    out = tmp_path / "r.jsonl"
    _write(out, record("A", "failed", run_id="R1").model_copy(update={"task_ready": False}),
           record("A", "resolved", run_id="R2"), record("B", "failed", run_id="R2"))
    copy = tmp_path / "copy.jsonl"
    copy.write_bytes(out.read_bytes())
    for names in ([out], [out, out], [out, copy]):
        got = sorted((r.task_id, r.status) for r in _results([str(p) for p in names]))
        assert got == [("A", "resolved"), ("B", "failed")], names


def test_r22f_1_control_distinct_attempts_and_agents_all_count(tmp_path):
    from sweserve.cli.assess import _results

    a, b = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    _write(a, record("A", "resolved", attempt=1), record("A", "failed", attempt=2))
    _write(b, record("A", "failed", agent="b"))
    assert len(_results([str(a), str(b)])) == 3


# --- R22f-2: the pack's own results named as agents' results: a candidate's attempts counted twice -------------------

def test_r22f_2_a_candidates_own_file_in_others_does_not_double_her_attempts(tmp_path):
    """Attack: `assess report p.yaml --results out/p/carol.jsonl` (the operator names every results file it has,
    the pack's own among them, or a candidate's file is copied beside the agents'). `write_scorecards` fitted the
    pack's attempts plus `others`: carol's every attempt twice, her ability and its standard error apart from
    bob's on the same record. Defence: an attempt of the pack's own (run, candidate, task, attempt) in `others` is
    the same attempt, counted once."""
    b1, b2 = assess_bundle(1), assess_bundle(2, "serving-api")
    pack = choose_pack("p", [b1, b2], 2, 7200)
    results_dir = tmp_path / "out" / "p"
    for name in ("bob", "carol"):
        _write(results_dir / f"{name}.jsonl", result(f"human-{name}", b1, "resolved", 900),
               result(f"human-{name}", b2, "failed", 900))
    agents = [result("oracle", b, "resolved", 10) for b in (b1, b2)] + [result("null", b, "failed", 5) for b in (b1, b2)]
    others = agents + read_results(results_dir / "carol.jsonl")
    cards = write_scorecards(pack, results_dir, tmp_path / "report", None, others)
    bob, carol = (ability_of(cards.pages[n].read_text()) for n in ("bob", "carol"))
    assert bob == carol
    rows = {r.split(",")[0]: r.split(",") for r in cards.csv.read_text().splitlines()[1:]}
    assert rows["bob"][13] == rows["carol"][13], "carol's standard error shrank: her attempts were counted twice"


# --- R22f-3: a results file by a name with no runs/ beside it: a killed run's unfinished tasks vanish silently -------

def _killed_run(tmp_path: Path) -> Path:
    """Run R selected A and B; A resolved, and R was killed with B unfinished: by its own name, pass@1 50%."""
    from test_report_properties import manifest

    real = tmp_path / "real" / "results.jsonl"
    real.parent.mkdir()
    manifest(real.parent, "R", "a", {"A": "decoding", "B": "decoding"}, results=real.name)
    _write(real, record("A", "resolved", run_id="R"))
    return real


def _report(path: Path) -> tuple[dict, str]:
    import json

    from test_attacks_redteam15c import cli

    proc = cli("report", str(path), "--json", cwd=path.parent)
    assert proc.returncode == 0, proc.stderr
    (rep,) = json.loads(proc.stdout)
    return rep, cli("report", str(path), cwd=path.parent).stdout


def test_r22f_3_a_report_says_when_a_runs_selection_is_not_beside_its_records(tmp_path):
    """Attack: `ln real/results.jsonl pub/results.jsonl` after the run began (R22b-3 refuses the link only at a
    run's start), or `cp` it, and hand over `report pub/results.jsonl`: no runs/ beside that name, so run R's
    selection is read from nowhere, B leaves the denominator and the report says 100% with no word of it (by the
    real name: 50%, B missing). A report cannot find a hard link's other names nor a copy's origin; it can say
    which runs' records it reports with no selection to count them against. Defence: `runs_unselected` (JSON,
    text, board) names them."""
    real = _killed_run(tmp_path)
    pub = tmp_path / "pub" / "results.jsonl"
    pub.parent.mkdir()
    pub.hardlink_to(real)
    rep, text = _report(pub)
    assert rep["overall"]["pass_at_1"] == 1.0  # what the records alone say
    assert rep["runs_unselected"] == ["R"]
    assert "no selection" in text
    from sweserve.reporting.html import write_html_report
    from sweserve.reporting.summary import AgentReport

    board = write_html_report([AgentReport.model_validate(rep)], [], {}, tmp_path / "site" / "b.html").read_text()
    assert 'id="lb-a-runs_unselected"' in board


def test_r22f_3_control_a_report_by_the_files_own_name_says_nothing_more(tmp_path):
    rep, text = _report(_killed_run(tmp_path))
    assert rep["overall"]["pass_at_1"] == 0.5 and rep.get("runs_unselected", []) == []
    assert "no selection" not in text


# --- R22f-4: `assess`'s fit read no manifest: an agent's killed run left its unfinished tasks out -------------------

def test_r22f_4_assess_fits_a_selected_attempt_with_no_result_as_unsolved(tmp_path):
    """Attack (R22b-2's, on `assess`): agent a's run selected A and B, resolved A, and was killed on B. `report
    --difficulty` counts B's attempt unsolved (missing); `assess pack --results` and the scorecard's fit read the
    records alone: a solved all it tried, B fitted without its failure, and the pack's difficulty (its time
    budgets, `--band`) and a candidate's ability beside the agents' differed from the report's. Defence: `assess`
    fits what `report --difficulty` fits."""
    import json

    from test_attacks_redteam15c import cli
    from test_report_properties import manifest

    from sweserve.assess.difficulty import calibrate
    from sweserve.cli.assess import _fit

    out = tmp_path / "r.jsonl"
    manifest(tmp_path, "R", "a", {"A": "decoding", "B": "decoding"}, results=out.name)
    manifest(tmp_path, "S", "b", {"A": "decoding", "B": "decoding"}, results=out.name)
    _write(out, record("A", "resolved", run_id="R"), record("A", "resolved", agent="b", run_id="S"),
           record("B", "resolved", agent="b", run_id="S"))
    reported = json.loads(cli("report", str(out), "--difficulty", "--json", cwd=tmp_path).stdout)
    want = {t["task_id"]: round(t["difficulty"], 6) for t in reported["tasks"]}
    got = {t: round(d, 6) for t, d in calibrate(*_fit([str(out)])).difficulty().items()}
    assert got == want


# --- R22f-5: a file named twice: the board's configuration counted its records twice --------------------------------

def test_r22f_5_the_board_counts_a_file_named_twice_once(tmp_path):
    """Attack: `report r.jsonl r.jsonl --html site/b.html`: every count is each attempt's latest record, but the
    board's configuration block said "records 4" and listed the file twice, for a file of 2 records. Defence: a
    file named twice is read once."""
    import re

    from test_attacks_redteam15c import cli

    out = tmp_path / "r.jsonl"
    _write(out, record("A", "resolved"), record("B", "failed"))
    proc = cli("report", str(out), str(out), "--html", "site/b.html", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    page = (tmp_path / "site" / "b.html").read_text()
    assert re.search(r"<t[hd]>records</t[hd]>\s*<td>2</td>", page), re.findall(r"records.{0,40}", page)
