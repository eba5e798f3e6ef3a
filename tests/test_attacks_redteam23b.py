"""Red team 23b: counting, results files and reports. Every view of a results file (`report`, `report --difficulty`,
the board, a scorecard) counts each selected attempt once and says when it cannot see what was selected."""

from __future__ import annotations

import json
from pathlib import Path

from test_attacks_redteam15c import cli
from test_attacks_redteam22f import _killed_run

# --- R23b-1: `report --difficulty` by a name with no runs/ beside it said nothing of the runs it could not see ------

def _difficulty(path: Path, *extra: str) -> tuple[dict, str]:
    proc = cli("report", str(path), "--difficulty", "--json", *extra, cwd=path.parent)
    assert proc.returncode == 0, proc.stderr
    text = cli("report", str(path), "--difficulty", *extra, cwd=path.parent)
    assert text.returncode == 0, text.stderr
    return json.loads(proc.stdout), text.stdout


def test_r23b_1_difficulty_says_when_a_runs_selection_is_not_beside_its_records(tmp_path):
    """Attack: run R selected A and B, A resolved and R was killed with B unfinished. By the file's own name the fit
    counts B as a's unsolved attempt (R22b-2). Hand over a copy (or a hard link's other name) instead: no runs/
    beside it, B leaves the fit, a's ability is that of an agent that solved all it was given, and A and B look
    easier. `report` says so (`runs_unselected`, R22f-3); `report --difficulty` said nothing, in JSON or text.
    Defence: the fit names the runs whose records it fits with no selection to count them against."""
    real = _killed_run(tmp_path)
    pub = tmp_path / "pub" / "results.jsonl"
    pub.parent.mkdir()
    pub.write_bytes(real.read_bytes())
    cal, text = _difficulty(pub)
    assert [t["missing"] for t in cal["tasks"]] == [0]  # what the records alone say
    assert cal.get("runs_unselected") == {"a": ["R"]}
    assert "no selection" in text


def test_r23b_1_control_difficulty_by_the_files_own_name_says_nothing_more(tmp_path):
    real = _killed_run(tmp_path)
    cal, text = _difficulty(real)
    assert {t["task_id"]: t["missing"] for t in cal["tasks"]} == {"A": 0, "B": 1}
    assert cal.get("runs_unselected", {}) == {}
    assert "no selection" not in text


# --- R23b-2: a copy beside its original: the original's manifest hid that the copy's runs have no selection --------

def _report(path: Path) -> tuple[dict, str]:
    proc = cli("report", str(path), "--json", cwd=path.parent)
    assert proc.returncode == 0, proc.stderr
    (rep,) = json.loads(proc.stdout)
    return rep, cli("report", str(path), cwd=path.parent).stdout


def test_r23b_2_a_copy_beside_its_original_says_its_run_has_no_selection(tmp_path):
    """Attack: run R on real/results.jsonl selected A and B, A resolved, R killed with B unfinished (50%). `cp
    results.jsonl final.jsonl` in the same folder and hand over `report final.jsonl`: R's manifest there names
    results.jsonl, another file, so no selection counts for final.jsonl and B leaves the denominator (100%); the
    R22f-3 warning looked only for a manifest at runs/R/, found results.jsonl's, and said nothing. Defence: a run
    has a selection only where a manifest the report counts for this file speaks for it."""
    real = _killed_run(tmp_path)
    final = real.parent / "final.jsonl"
    final.write_bytes(real.read_bytes())
    rep, text = _report(final)
    assert rep["overall"]["pass_at_1"] == 1.0  # what the records alone say
    assert rep["runs_unselected"] == ["R"]
    assert "no selection" in text


def test_r23b_2_control_a_renamed_file_keeps_its_selection(tmp_path):
    """Control: the file renamed (its manifest names the old name, gone) keeps R's selection: B missing, 50%."""
    real = _killed_run(tmp_path)
    renamed = real.rename(real.parent / "renamed.jsonl")
    rep, text = _report(renamed)
    assert rep["overall"]["pass_at_1"] == 0.5 and rep.get("runs_unselected", []) == []
    assert "no selection" not in text


# --- R23b-3: `assess pack --results` and `assess report --results` fitted a copy's records and said nothing --------

def test_r23b_3_assess_says_when_a_runs_selection_is_not_beside_its_records(tmp_path):
    """Attack (R23b-1's, on `assess`): hand `assess pack --band` (or `assess report --results`) a copy of an agent's
    results file whose run was killed mid-way: no runs/ beside the copy, the killed run's unfinished tasks leave
    the fit (the pack's band, its time budgets, the candidates' abilities beside the agent's) and nothing says so.
    Defence: `assess` says which runs it fits with no selection, as `report --difficulty` does."""
    from rich.console import Console

    from sweserve.cli.assess import _fit

    real = _killed_run(tmp_path)
    pub = tmp_path / "pub" / "results.jsonl"
    pub.parent.mkdir()
    pub.write_bytes(real.read_bytes())
    console = Console(record=True, width=200)
    _, missing = _fit([str(pub)], console)
    assert missing == []  # what the records alone say
    assert "no selection" in console.export_text()
    console = Console(record=True, width=200)
    _, missing = _fit([str(real)], console)  # control: by its own name, B is a's unsolved attempt
    assert missing == [("a", "B", "decoding")]
    assert "no selection" not in console.export_text()


# --- R23b-4: two models of one predictions file shared one SWE-bench report file: the second overwrote the first ----

def test_r23b_4_two_models_never_share_a_run_report(tmp_path):
    """Attack: a predictions file with models "org/m" and "org__m" (agent names org-m and org__m, apart), run with
    `--run-id X`: each model's SWE-bench report is `<model, '/' as '__'>.X.json` beside the results, both
    `org__m.X.json`, and the second model's report replaced the first's: one model's results lost, the other's
    shown under its name. Defence: models whose report files would share a name are refused, as models sharing
    an agent name are."""
    import pytest

    from sweserve.agents.predictions import Prediction, PredictionSet
    from sweserve.errors import SweserveError

    preds = [Prediction(instance_id="o__r-1", model_name_or_path=m, model_patch="x") for m in ("org/m", "org__m")]
    with pytest.raises(SweserveError, match="report"):
        PredictionSet(preds, {"o__r-1"})
    # control: distinct models keep their own reports
    ok = PredictionSet([Prediction(instance_id="o__r-1", model_name_or_path=m, model_patch="x")
                        for m in ("org/m", "org/n")], {"o__r-1"})
    assert {a.name for a in ok.agents} == {"org-m", "org-n"}


# --- R23b-5: `run`'s end summary counted the records of earlier runs while the task was not ready ------------------

def test_r23b_5_the_run_summary_leaves_out_attempts_run_while_not_ready(tmp_path, monkeypatch):
    text = _summary_after_unready_run(tmp_path, monkeypatch, include_unready=False)
    assert "pass@3" not in text and "100.0%" not in text, text


def test_r23b_5_control_a_run_taking_unready_tasks_counts_them(tmp_path, monkeypatch):
    """Control: `run --include-unready` counts them, as `report --include-unready` does."""
    assert "pass@3" in _summary_after_unready_run(tmp_path, monkeypatch, include_unready=True)


def _summary_after_unready_run(tmp_path, monkeypatch, include_unready: bool) -> str:
    """Attack: `run --include-unready --attempts 3` on task A while it was not ready: attempts 1-2 failed, 3
    resolved, each recorded `task_ready: false`. A made ready, `run` (no --include-unready) redoes attempt 1
    (`pending`: an unready record does not finish a ready task) and it fails. `report` counts A's one ready attempt:
    0%. The run's end summary took every record of A in the file: 3 attempts, 1 solved, pass@3 100%, an
    unready sample shown as this run's. Defence: the summary counts what `report` counts, unready records left
    out unless the run takes unready tasks."""
    import contextlib
    from types import SimpleNamespace

    from rich.console import Console
    from test_report_properties import record
    from test_results_report import bundle

    import sweserve.cli.run as run_mod
    import sweserve.evaluation.evaluate as evaluate
    from sweserve.agents.reference import NullAgent
    from sweserve.evaluation.results import ResultsWriter

    task = bundle("o__r-1")
    tid, fam = task.task.task_id, task.task.family
    out = tmp_path / "results.jsonl"
    with ResultsWriter(out) as w:
        for n, status in ((1, "failed"), (2, "failed"), (3, "resolved")):
            w.write(record(tid, status, attempt=n, family=fam, run_id="R1").model_copy(update={"task_ready": False}))

    def fake_run_evaluation(ctx, bundles, agent, results_path, writer, **kw):
        rec = record(tid, "failed", family=fam, run_id="R2").model_copy(update={"task_ready": True})
        writer.write(rec)
        return [rec]

    class Progress:
        console = Console(quiet=True)

        def add_task(self, *a, **k):
            return 0

        def update(self, *a, **k):
            pass

    monkeypatch.setattr(evaluate, "run_evaluation", fake_run_evaluation)
    monkeypatch.setattr(run_mod, "make_context", lambda *a, **k: contextlib.nullcontext(SimpleNamespace(run_id="R2")))
    monkeypatch.setattr(run_mod, "make_executor", lambda *a, **k: None)
    monkeypatch.setattr(run_mod, "progress_bar", lambda c: contextlib.nullcontext(Progress()))
    monkeypatch.setattr(run_mod, "ready_only", lambda bundles, *a, **k: bundles)
    args = SimpleNamespace(include_unready=include_unready, state_dir=None, attempts=1, workers=None, executor="local",
                           retry_errors=False, force=False, max_submission_mb=1)
    agent = NullAgent()
    agent.name = "a"
    console = Console(record=True, width=200)
    with ResultsWriter(out) as w:
        run_mod._run(args, console, [task], agent, out, w, "R2", lambda r: tmp_path / f"a.{r}.json", None)
    return console.export_text()


# --- R23b-6: a file and its hard link named together: the board counted each record twice ---------------------------

def test_r23b_6_the_board_counts_a_hard_linked_files_records_once(tmp_path):
    """Attack (R22f-5's, by a hard link): `ln r.jsonl h.jsonl; report r.jsonl h.jsonl --html site/b.html`: each name
    is kept (each may have its own runs/ beside it), and the board's configuration said "records 4" for one file of
    2 records. Defence: the records of one file (its inode) are counted once, whatever names it."""
    import re

    from test_attacks_redteam22b import _write
    from test_report_properties import record

    out = tmp_path / "r.jsonl"
    _write(out, record("A", "resolved"), record("B", "failed"))
    (tmp_path / "h.jsonl").hardlink_to(out)
    proc = cli("report", str(out), "h.jsonl", "--html", "site/b.html", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    page = (tmp_path / "site" / "b.html").read_text()
    assert re.search(r"<t[hd]>records</t[hd]>\s*<td>2</td>", page), re.findall(r"records.{0,40}", page)
