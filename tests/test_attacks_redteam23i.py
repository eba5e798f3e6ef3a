"""Red team 23i: the counting fixes of round 23b and their neighbours: a results file's writer, the manifests a
report finds beside a results file, and the board's count of records."""

from __future__ import annotations

import os
import re
import subprocess
import sys

from test_attacks_redteam15c import ROOT, cli
from test_attacks_redteam22b import _write
from test_report_properties import manifest, record

from sweserve.evaluation.results import ResultsWriter, read_results

# --- R23i-1: a writer reopened its file by name for each record: a file replaced mid-run took records unlocked ------

def test_r23i_1_a_writer_writes_to_the_file_it_locked(tmp_path):
    """Attack: run R1 writes results.jsonl, holding the lock of its inode. Mid-run, the file is moved aside (or
    replaced: an editor's save, `mv new results.jsonl`) and run R2 starts on results.jsonl: a new inode, so its lock
    is free and R2 holds it. R1's later records were written by reopening the path: into R2's file, outside R2's
    lock, interleaved with R2's records (R1's attempts of a task R2 also runs: one overwrote the other in `latest`),
    and lost from the file R1 locked and whose runs/ manifest names them. Defence: a writer writes through the file
    it opened and locked."""
    out = tmp_path / "results.jsonl"
    w1 = ResultsWriter(out)
    try:
        w1.write(record("A", "failed", run_id="R1"))
        moved = out.rename(tmp_path / "moved.jsonl")
        with ResultsWriter(out) as w2:
            w2.write(record("B", "resolved", run_id="R2"))
            w1.write(record("B", "failed", run_id="R1"))
    finally:
        w1.close()
    assert [(r.run_id, r.task_id) for r in read_results(out)] == [("R2", "B")]
    assert [(r.run_id, r.task_id) for r in read_results(moved)] == [("R1", "A"), ("R1", "B")]


# --- R23i-2: a FIFO at runs/<id>/manifest.json hung `report` ------------------------------------------------------

def test_r23i_2_a_fifo_for_a_manifest_does_not_hang_report(tmp_path):
    """Attack: a results file handed over with its runs/ folder, one of whose `manifest.json` is a FIFO (`mkfifo`):
    `report` globs `runs/*/manifest.json` and opened each to read it, and opening a FIFO with no writer waits
    forever: `report`, `report --difficulty`, the board and `assess pack --results` hung. Defence: a manifest is
    read only when it is a regular file (opened without waiting), else it is not a run manifest: one line."""
    out = tmp_path / "results.jsonl"
    _write(out, record("A", "resolved", run_id="R"))
    manifest(tmp_path, "R", "a", {"A": "decoding"}, results=out.name)
    fifo = tmp_path / "runs" / "X" / "manifest.json"
    fifo.parent.mkdir()
    os.mkfifo(fifo)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), str(ROOT / "tests")])}
    try:
        proc = subprocess.run([sys.executable, "-m", "sweserve.cli", "report", str(out)], cwd=tmp_path,
                              capture_output=True, text=True, env=env, timeout=20)
    except subprocess.TimeoutExpired:
        raise AssertionError("report hung on a FIFO at runs/X/manifest.json") from None
    assert proc.returncode != 0 and "not a run manifest" in proc.stderr, (proc.returncode, proc.stderr)
    assert "Traceback" not in proc.stderr


def test_r23i_2_a_huge_manifest_is_refused_unread(tmp_path):
    """Attack (beside the FIFO): a sparse `runs/X/manifest.json` of 1 TiB (`truncate -s 1T`): read whole, `report`
    stalled on it, then ran out of memory. Defence: a manifest over its bound is not one, unread."""
    from sweserve.errors import SweserveError
    from sweserve.evaluation.results import read_manifest

    huge = tmp_path / "runs" / "X" / "manifest.json"
    huge.parent.mkdir(parents=True)
    with huge.open("wb") as fh:
        fh.truncate(1 << 40)
    try:
        read_manifest(huge)
    except SweserveError as exc:
        assert "not a run manifest" in str(exc)
    else:
        raise AssertionError("a 1 TiB manifest was read")


def test_r23i_2_control_a_manifest_reads_as_before(tmp_path):
    out = tmp_path / "results.jsonl"
    _write(out, record("A", "resolved", run_id="R"))
    manifest(tmp_path, "R", "a", {"A": "decoding", "B": "decoding"}, results=out.name)
    proc = cli("report", str(out), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "1 selected tasks have no result" in proc.stdout


# --- R23i-3: a copy (or hard link) in another folder, named beside its original: the board counted records twice ----

def test_r23i_3_the_board_counts_a_copys_records_once(tmp_path):
    """Attack (R23b-6's, from another folder): `cp real/results.jsonl pub/results.jsonl` (or `ln`), then `report
    real/results.jsonl pub/results.jsonl --html site/b.html`. Each name is kept (each may have its own runs/), and the
    pass rates count each attempt once (`latest`; `one_file_per_attempt` takes the same run's record in two files as
    one attempt), but the board's configuration said "records 4" for 2 records run. Defence: the same run's same
    record in two files is one record everywhere the report counts."""
    real = tmp_path / "real" / "results.jsonl"
    real.parent.mkdir()
    _write(real, record("A", "resolved", run_id="R"), record("B", "failed", run_id="R"))
    pub = tmp_path / "pub" / "results.jsonl"
    pub.parent.mkdir()
    pub.write_bytes(real.read_bytes())
    proc = cli("report", str(real), str(pub), "--html", "site/b.html", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    page = (tmp_path / "site" / "b.html").read_text()
    assert re.search(r"<t[hd]>records</t[hd]>\s*<td>2</td>", page), re.findall(r"records.{0,40}", page)


def test_r23i_3_control_two_runs_records_in_two_files_are_all_counted(tmp_path):
    """Control: two files of two agents' runs keep every record: 3 records."""
    one, two = tmp_path / "one" / "results.jsonl", tmp_path / "two" / "results.jsonl"
    one.parent.mkdir()
    two.parent.mkdir()
    _write(one, record("A", "resolved", run_id="R"), record("B", "failed", run_id="R"))
    _write(two, record("A", "failed", agent="b", run_id="S"))
    proc = cli("report", str(one), str(two), "--html", "site/b.html", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    page = (tmp_path / "site" / "b.html").read_text()
    assert re.search(r"<t[hd]>records</t[hd]>\s*<td>3</td>", page), re.findall(r"records.{0,40}", page)


# --- R23i-4: a FIFO in a trial folder (its result.json) hung `report` ---------------------------------------------------------

def _report_in_time(out, *extra: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), str(ROOT / "tests")])}
    try:
        return subprocess.run([sys.executable, "-m", "sweserve.cli", "report", str(out), *extra], cwd=out.parent,
                              capture_output=True, text=True, env=env, timeout=20)
    except subprocess.TimeoutExpired:
        raise AssertionError("report hung on a FIFO in a trial folder") from None


def test_r23i_4_a_fifo_for_a_trials_result_does_not_hang_report(tmp_path):
    """Attack (R23i-2's, one folder down): `runs/R/a/A/1/result.json` a FIFO. `report` looks in each record's trial
    folder for the result.json that says it is that record's, and opening the FIFO waited forever. Defence: files
    found in a trial folder are read only as regular files of bounded size; a FIFO there is no evidence."""
    out = tmp_path / "results.jsonl"
    _write(out, record("A", "resolved", run_id="R"))
    manifest(tmp_path, "R", "a", {"A": "decoding"}, results=out.name)
    trial = tmp_path / "runs" / "R" / "a" / "A" / "1"
    trial.mkdir(parents=True)
    os.mkfifo(trial / "result.json")
    proc = _report_in_time(out)
    assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr



def test_r23i_3_control_a_copy_never_changes_which_record_counts(tmp_path):
    """Control of the fix: file one holds run R's resolved record of A; file two holds it, a failed record of A by the
    same run, then the resolved one again (each file's last record is the same, so both are reported together).
    The last record read is the resolved one, with the copy or without it: pass@1 100%."""
    import json

    a_ok, a_bad = record("A", "resolved", run_id="R"), record("A", "failed", run_id="R")
    one, two = tmp_path / "one" / "results.jsonl", tmp_path / "two" / "results.jsonl"
    one.parent.mkdir()
    two.parent.mkdir()
    _write(one, a_ok)
    _write(two, a_ok, a_bad, a_ok)
    proc = cli("report", str(one), str(two), "--json", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    (rep,) = json.loads(proc.stdout)
    assert rep["overall"]["pass_at_1"] == 1.0


# --- R23i-5: a file renamed after a run of it was killed before any record: that run's selection vanished ---------

def test_r23i_5_a_renamed_files_killed_run_is_named(tmp_path):
    """Attack: run R1 on results.jsonl resolved A; run R2 on it selected B and C and was killed (or its first
    trials hung) before any record: `report results.jsonl` says B and C are missing, 33%. `mv results.jsonl
    final.jsonl` and hand over `report final.jsonl`: R2's manifest names results.jsonl, which is gone, and R2 has no
    record in final.jsonl, so it reads as a deleted scratch file's run: 100%, and nothing names R2."""
    out = tmp_path / "results.jsonl"
    _write(out, record("A", "resolved", run_id="R1"))
    manifest(tmp_path, "R1", "a", {"A": "decoding"}, results=out.name)
    manifest(tmp_path, "R2", "a", {"B": "decoding", "C": "decoding"}, results=out.name)
    assert "2 selected tasks have no result" in cli("report", str(out), cwd=tmp_path).stdout  # by its own name
    final = out.rename(tmp_path / "final.jsonl")
    proc = cli("report", str(final), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "2 selected tasks have no result" in proc.stdout or "R2" in proc.stdout, proc.stdout
