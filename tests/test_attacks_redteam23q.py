"""Red team 23q: the counting fixes of round 23i and their neighbours: results files that are not regular files,
and a renamed file's killed run."""

from __future__ import annotations

import os
import subprocess
import sys

from test_attacks_redteam15c import ROOT, cli
from test_attacks_redteam22b import _write
from test_report_properties import record


def _python_in_time(code: str, cwd, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), str(ROOT / "tests")])}
    try:
        return subprocess.run([sys.executable, *(["-c", code] if code else []), *args], cwd=cwd,
                              capture_output=True, text=True, env=env, timeout=20)
    except subprocess.TimeoutExpired:
        raise AssertionError(f"hung: {code or args}") from None


# --- R23q-1: a results file that is a FIFO: `report`, `run` and `assess`'s pack folders hung ----------------------

def test_r23q_1_report_refuses_a_fifo_results_file_at_once(tmp_path):
    """Attack: a handed-over folder whose `results.jsonl` is a FIFO (`mkfifo`); `report results.jsonl` (or
    `report handed/*.jsonl`) opened it by name to read it and waited forever for a writer. R23i-2 made files found
    in runs/ read without waiting; the results file itself was not. Defence: a results file is read only as a
    regular file, opened without waiting: anything else is refused in one line."""
    fifo = tmp_path / "results.jsonl"
    os.mkfifo(fifo)
    proc = _python_in_time("", tmp_path, "-m", "sweserve.cli", "report", str(fifo))
    assert proc.returncode != 0 and "Traceback" not in proc.stderr, proc.stderr
    assert "regular file" in proc.stderr, proc.stderr


def test_r23q_1_a_writer_refuses_a_fifo_at_once(tmp_path):
    """Attack: `run --output results.jsonl` where results.jsonl is a FIFO: the writer opened it to append, which
    waits for a reader forever (the run hung before Docker, holding nothing). Defence: a results file is written
    only when it is a regular file, opened without waiting."""
    fifo = tmp_path / "results.jsonl"
    os.mkfifo(fifo)
    code = ("import sys\nfrom pathlib import Path\nfrom sweserve.errors import SweserveError\n"
            "from sweserve.evaluation.results import ResultsWriter\n"
            "try:\n    ResultsWriter(Path('results.jsonl'))\nexcept SweserveError as e:\n    sys.exit(str(e))\n")
    proc = _python_in_time(code, tmp_path)
    assert proc.returncode != 0 and "regular file" in proc.stderr, proc.stderr


def test_r23q_1_a_fifo_in_a_pack_folder_does_not_hang_assess(tmp_path):
    """Attack: a `*.jsonl` FIFO in a pack's results folder (or in another pack's folder beside it, which
    `other_packs` reads for retakes): the scorecard read it and hung. Defence: as above; a pack folder's file that
    is no results file is refused in one line (another pack's folder is skipped, R16f-7)."""
    pack = tmp_path / "out" / "p1"
    pack.mkdir(parents=True)
    _write(pack / "alice.jsonl", record("A", "resolved", agent="alice", run_id="R"))
    other = tmp_path / "out" / "p0"
    other.mkdir()
    os.mkfifo(other / "x.jsonl")
    code = ("from pathlib import Path\nfrom sweserve.assess.scorecard import other_packs\n"
            "print(sorted(other_packs(Path('out/p1'))))\n")
    proc = _python_in_time(code, tmp_path)
    assert proc.returncode == 0, proc.stderr


def test_r23q_1_control_a_results_file_reports_as_before(tmp_path):
    out = tmp_path / "results.jsonl"
    _write(out, record("A", "resolved", run_id="R"))
    proc = cli("report", str(out), "--json", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    link = tmp_path / "link.jsonl"
    link.symlink_to(out)
    assert cli("report", str(link), "--json", cwd=tmp_path).returncode == 0


# --- R23i-5 closed: a run of a results file that is gone, with no record here, is named (never counted) -----------

def test_r23i_5_control_a_deleted_scratch_files_run_is_named_not_charged(tmp_path):
    """R16f-2 kept: a deleted scratch file's run is not charged to the file beside it (pass@1 stays 100%), and now
    named, as it may as well be this file's own, renamed; a run of another file that is still there is neither."""
    import json

    from test_report_properties import manifest

    out = tmp_path / "a.jsonl"
    _write(out, record("A", "resolved", run_id="R"))
    manifest(tmp_path, "R", "a", {"A": "decoding"}, results=out.name)
    manifest(tmp_path, "S", "a", {"B": "decoding", "C": "decoding"}, results="scratch.jsonl")
    _write(tmp_path / "b.jsonl", record("D", "failed", run_id="T"))
    manifest(tmp_path, "T", "a", {"D": "decoding"}, results="b.jsonl")
    proc = cli("report", str(out), "--json", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    (rep,) = json.loads(proc.stdout)
    assert rep["overall"]["pass_at_1"] == 1.0 and rep["statuses"].get("missing", 0) == 0
    assert rep["runs_file_gone"] == ["S"]


# --- R23q-2: the fit of difficulty left a renamed file's killed run out with no word (R23i-5's, one mode over) ------

def test_r23q_2_difficulty_names_a_renamed_files_killed_run(tmp_path):
    """Attack: R23i-5's renamed file, reported with `--difficulty --json` (the fit `assess` and the board read): R2's
    selected and never finished tasks are no one's unsolved attempts, and the output said nothing of R2. Defence:
    the fit's output names the runs the report names (`runs_file_gone`)."""
    import json

    from test_report_properties import manifest

    out = tmp_path / "results.jsonl"
    _write(out, record("A", "resolved", run_id="R1"))
    manifest(tmp_path, "R1", "a", {"A": "decoding"}, results=out.name)
    manifest(tmp_path, "R2", "a", {"B": "decoding", "C": "decoding"}, results=out.name)
    final = out.rename(tmp_path / "final.jsonl")
    proc = cli("report", str(final), "--difficulty", "--json", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout).get("runs_file_gone") == {"a": ["R2"]}, proc.stdout[-400:]


# --- R23q-3: a manifest naming a results file no file system can hold crashed `report` ---------------------------

def test_r23q_3_a_manifest_naming_an_impossible_results_file_is_no_crash(tmp_path):
    """Attack: beside a handed-over results file, `runs/X/manifest.json` whose `results` is 5000 characters long
    (or holds a NUL): `report` asked whether that file exists, the look-up raised (ENAMETOOLONG, or ValueError),
    and `report`, the board, `--difficulty` and `assess pack --results` ended in an internal error. Defence: a
    results file the look-up cannot find is not there; the run is one of a file gone (named, never counted)."""
    import json

    from test_report_properties import manifest

    out = tmp_path / "results.jsonl"
    _write(out, record("A", "resolved", run_id="R"))
    manifest(tmp_path, "R", "a", {"A": "decoding"}, results=out.name)
    manifest(tmp_path, "X", "a", {"B": "decoding"}, results="x" * 5000)
    manifest(tmp_path, "Y", "a", {"C": "decoding"}, results="y\0.jsonl")
    for extra in ((), ("--difficulty",)):
        proc = cli("report", str(out), "--json", *extra, cwd=tmp_path)
        assert proc.returncode == 0 and "internal error" not in proc.stderr, proc.stderr[-300:]
    proc = cli("report", str(out), "--json", cwd=tmp_path)
    (rep,) = json.loads(proc.stdout)
    assert rep["overall"]["pass_at_1"] == 1.0 and rep["runs_file_gone"] == ["X", "Y"]


# --- R23q-4: a record whose run id no file system can hold as a folder crashed `report` ---------------------------

def test_r23q_4_a_record_naming_an_impossible_trial_folder_is_no_crash(tmp_path):
    """Attack: a handed-over results file with a record whose run id is 5000 characters long (or whose task id
    climbs out with `..`): `report` looks for each record's trial folder (`runs/<run>/<agent>/<task>/<attempt>`),
    the look-up raised ENAMETOOLONG and `report`, the board and `assess` ended in an internal error (the `..` one
    took a folder outside runs/ for the trial's evidence). Defence: a record's trial folder is looked for only where
    each of its names is one plain folder name; else it has none."""
    import json

    out = tmp_path / "results.jsonl"
    _write(out, record("A", "resolved", run_id="R" * 5000), record("B", "failed", run_id="S"))
    proc = cli("report", str(out), "--json", cwd=tmp_path)
    assert proc.returncode == 0 and "internal error" not in proc.stderr, proc.stderr[-300:]
    assert [t["status"] for t in json.loads(proc.stdout)[0]["tasks"]] == ["resolved", "failed"]


def test_r23q_4_a_task_id_climbing_out_of_runs_finds_no_trial_folder(tmp_path):
    from sweserve.evaluation.trial_folder import folder_of

    out = tmp_path / "d" / "results.jsonl"
    out.parent.mkdir()
    outside = tmp_path / "secret" / "1"
    outside.mkdir(parents=True)
    r = record("../../../../secret", "resolved", run_id="R")
    (out.parent / "runs" / "R" / r.agent).mkdir(parents=True)
    assert folder_of(out, r) is None


def test_r23q_4_control_a_records_own_trial_folder_is_found(tmp_path):
    from sweserve.evaluation.trial_folder import folder_of

    out = tmp_path / "results.jsonl"
    r = record("o__r-1", "resolved", run_id="R")
    own = tmp_path / "runs" / "R" / r.agent / "o__r-1" / "1"
    own.mkdir(parents=True)
    assert folder_of(out, r) == own
