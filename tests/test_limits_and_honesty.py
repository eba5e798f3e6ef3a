"""Without Docker: honest denominators, one result per trial whatever happens, bounded buffers, the transcript
keeper, redaction, and bad input that ends in one line (exit 2) before Docker is contacted."""

import json
import os
import subprocess
import sys
from datetime import datetime, timezone

import pytest
from test_trial_pipeline import NoDockerContext, bundle

from sweserve.agents.human import HistoryKeeper
from sweserve.environment.docker_sandbox import OutputTail
from sweserve.evaluation.evaluate import run_evaluation
from sweserve.evaluation.grading import TestRunError
from sweserve.evaluation.results import read_results
from sweserve.evaluation.trial import Redactor, clean_reason, hidden_tests_reason
from sweserve.models import RunResult
from sweserve.reporting.summary import build_reports, read_manifests

T0 = datetime(2026, 1, 1, tzinfo=timezone.utc)
NO_DOCKER = {**os.environ, "DOCKER_HOST": "unix:///nonexistent/docker.sock"}


def cli(*args, cwd, env=NO_DOCKER):
    return subprocess.run([sys.executable, "-m", "sweserve.cli", *args], cwd=cwd, capture_output=True, text=True,
                          env=env)


def one_line_error(proc, *needles):
    assert proc.returncode == 2, proc.stderr + proc.stdout
    assert "Traceback" not in proc.stderr + proc.stdout
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    for n in needles:
        assert n in lines[0], lines[0]


def result(task_id, status="resolved", attempt=1, reason=None, agent="a", family="decoding"):
    return RunResult(run_id="r1", task_id=task_id, family=family, agent=agent, attempt=attempt, status=status,
                     reason=reason, started_at=T0, finished_at=T0, duration_s=1)


def write_run(tmp_path, results, tasks, attempts=1, agent="a"):
    out = tmp_path / "results.jsonl"
    out.write_text("".join(r.model_dump_json() + "\n" for r in results))
    manifest = tmp_path / "runs" / "r1" / "manifest.json"
    manifest.parent.mkdir(parents=True)
    manifest.write_text(json.dumps({"run_id": "r1", "agent": agent, "attempts": attempts,
                                    "tasks": {t: "h" for t in tasks}, "families": {t: "decoding" for t in tasks}}))
    return out


# --- class 6: denominators ------------------------------------------------------------------------------

def test_one_solve_and_five_crashes_is_one_in_six_not_100_percent(tmp_path):
    tasks = [f"o__r-{i}" for i in range(1, 7)]
    out = write_run(tmp_path, [result("o__r-1")], tasks)
    (rep,) = build_reports(read_results(out), read_manifests(tmp_path / "runs"))
    assert rep.overall.pass_at_1 == pytest.approx(1 / 6) and rep.overall.scored == 6
    assert rep.statuses["missing"] == 5 and rep.statuses["resolved"] == 1
    proc = cli("report", str(out), cwd=tmp_path, env={**NO_DOCKER, "COLUMNS": "200"})
    assert proc.returncode == 0, proc.stderr
    assert "16.7%" in proc.stdout and "100.0%" not in proc.stdout and "5 selected tasks have no result" in proc.stdout
    data = json.loads(cli("report", str(out), "--json", cwd=tmp_path).stdout)
    assert data[0]["statuses"]["missing"] == 5


def test_missing_attempts_count_against_pass_at_1(tmp_path):
    out = write_run(tmp_path, [result("o__r-1", attempt=1), result("o__r-2", attempt=2)], ["o__r-1", "o__r-2"],
                    attempts=3)
    (rep,) = build_reports(read_results(out), read_manifests(tmp_path / "runs"))
    rows = {r.task_id: r for r in rep.tasks}
    assert rows["o__r-1"].attempts == 3 and rows["o__r-1"].missing_attempts == 2
    assert rows["o__r-2"].status == "missing"  # its first attempt has no result
    assert rep.overall.pass_at_1 == pytest.approx((1 / 3 + 1 / 3) / 2)


def test_report_given_a_tasks_folder_counts_tasks_with_no_result(tmp_path):
    from sweserve.dataset.taskstore import save_bundle

    for i in (1, 2, 3):
        save_bundle(tmp_path / "tasks", bundle(f"o__r-{i}"))
    out = tmp_path / "results.jsonl"
    out.write_text(result("o__r-1").model_dump_json() + "\n")
    data = json.loads(cli("report", str(out), "--tasks", str(tmp_path / "tasks"), "--json", "--include-unready",
                          cwd=tmp_path).stdout)
    assert data[0]["overall"]["scored"] == 3 and data[0]["statuses"]["missing"] == 2
    # by default only ready tasks count: these were never validated
    data = json.loads(cli("report", str(out), "--tasks", str(tmp_path / "tasks"), "--json", cwd=tmp_path).stdout)
    assert data[0]["overall"]["scored"] == 1


class Quitter:
    """An agent whose code ends the interpreter mid-trial (SystemExit is not an Exception)."""

    name = "quitter"

    def config_hash(self):
        return "q"

    def prepare(self, builder, image):
        return image

    def solve(self, box, bundle):
        raise SystemExit(3)


class FakeBox:
    name = "fake"

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return None

    def remove(self):
        return None


class FakeSandboxContext(NoDockerContext):
    def sandbox(self, *a, **kw):
        return FakeBox()


def test_every_trial_ends_in_exactly_one_result_even_when_the_pipeline_itself_dies(tmp_path):
    ctx = FakeSandboxContext(tmp_path, lambda: "img")
    out = tmp_path / "r.jsonl"
    tasks = [bundle("o__r-1"), bundle("o__r-2"), bundle("o__r-3")]
    run_evaluation(ctx, tasks, Quitter(), out, workers=2)
    results = read_results(out)
    assert sorted(r.task_id for r in results) == ["o__r-1", "o__r-2", "o__r-3"]
    assert {(r.status, r.error_kind) for r in results} == {("error", "internal")}
    assert all("SystemExit" in r.reason for r in results)


# --- hidden tests never in reasons; reasons are one bounded, printable line -------------------------------

def test_reasons_never_carry_test_output():
    leaky = TestRunError("test runner exited 1 before reporting all outcomes",
                         detail="assert shards == [(0, 3), (3, 6)]  # hidden", output="assert shards # hidden")
    assert hidden_tests_reason(leaky) == "test runner exited 1 before reporting all outcomes"
    assert "hidden" in str(leaky)  # the detail is for logs
    assert hidden_tests_reason(TestRunError("hidden tests timed out after 5s", True)) == "hidden tests timed out after 5s"
    line = clean_reason("a\nb\x1b[31m" + "x" * 1000)
    assert "\n" not in line and "\x1b" not in line and len(line) <= 300


def test_redactor_replaces_every_secret_and_ignores_tiny_ones():
    redact = Redactor(["sk-abcdef", "sk-abcdef-longer", "ab", ""])
    assert redact("key sk-abcdef-longer and sk-abcdef; ab") == "key *** and ***; ab"
    assert redact.holds_secret("x sk-abcdef") and not redact.holds_secret("ab")


# --- class 7: bounded buffers ---------------------------------------------------------------------------

def test_output_tail_keeps_only_the_end():
    tail = OutputTail(1000)
    for i in range(10_000):
        tail.add(b"%08d\n" % i)
    assert tail.total == 90_000 and len(tail.buf) <= 2000
    assert tail.bytes().endswith(b"00009999\n") and len(tail.bytes()) == 1000


# --- class 8: the transcript is kept on the host ----------------------------------------------------------

class HistoryBox:
    def __init__(self):
        self.content: bytes | None = b""

    def read_file(self, path, max_bytes=0):
        return self.content


def test_history_keeper_keeps_commands_the_candidate_erased_and_flags_it():
    box = HistoryBox()
    keeper = HistoryKeeper(box, poll_s=3600)
    box.content = b"#100\ncat secret-plan\n"
    keeper.poll()
    box.content = b"#100\ncat secret-plan\n#101\nls\n"
    keeper.poll()
    assert not keeper.tampered
    box.content = b"#102\necho innocent\n"  # rewritten
    transcript, flags = keeper.finish()
    assert transcript.splitlines() == ["100\tcat secret-plan", "101\tls", "102\techo innocent"]
    assert flags == ["transcript_tampered"]
    gone = HistoryKeeper(box, poll_s=3600)
    box.content = b"#1\nx\n"
    gone.poll()
    box.content = None  # removed (or replaced by a link or a folder)
    assert gone.finish() == ("1\tx", ["transcript_tampered"])


# --- bad input: one line, exit 2, before Docker ---------------------------------------------------------

@pytest.fixture
def tasks(tmp_path):
    from sweserve.dataset.taskstore import save_bundle

    save_bundle(tmp_path / "tasks", bundle("o__r-1"))
    return tmp_path


def test_output_that_is_a_folder_or_unwritable_is_refused_before_docker(tasks):
    (tasks / "out").mkdir()
    one_line_error(cli("run", "--agent", "null", "--output", str(tasks / "out"), cwd=tasks), "is a folder")
    (tasks / "file").write_text("x")
    one_line_error(cli("run", "--agent", "null", "--output", str(tasks / "file" / "r.jsonl"), cwd=tasks),
                   "cannot write results there")
    one_line_error(cli("run", "--agent", "null", "--max-submission-mb", "0", cwd=tasks), "--max-submission-mb")


def test_a_second_run_on_one_results_file_refuses_and_records_never_interleave(tasks):
    out = tasks / "shared.jsonl"
    holder = subprocess.Popen(
        [sys.executable, "-c", "import sys, time; from pathlib import Path; "
                               "from sweserve.evaluation.results import ResultsWriter; "
                               f"w = ResultsWriter(Path({str(out)!r})); print('locked', flush=True); time.sleep(60)"],
        stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "locked"
        one_line_error(cli("run", "--agent", "null", "--output", str(out), cwd=tasks),
                       "another sweserve run is writing this results file")
    finally:
        holder.kill()
        holder.wait()
    assert out.read_text() == ""
    # once the holder is gone the lock is free again (the check reaches Docker, which is absent here)
    proc = cli("run", "--agent", "null", "--output", str(out), cwd=tasks)
    assert "another sweserve run" not in proc.stderr and "Traceback" not in proc.stderr


def test_non_utf8_inputs_are_one_line_errors(tasks):
    task_json = tasks / "tasks" / "o__r-1" / "task.json"
    good = task_json.read_bytes()
    task_json.write_bytes(good.replace(b'"title": "t"', b'"title": "\xff\xfe"'))
    one_line_error(cli("tasks", "list", cwd=tasks), "task.json")
    task_json.write_bytes(good)
    patch = tasks / "tasks" / "o__r-1" / "tests.patch"
    patch.write_bytes(b"diff \xff\xfe\n")
    one_line_error(cli("run", "--agent", "null", "--output", str(tasks / "r.jsonl"), cwd=tasks), "tests.patch")
    patch.write_text("t")
    cfg = tasks / "agent.yaml"
    cfg.write_bytes(b"kind: command\nname: x\ncommand: echo \xff\n")
    one_line_error(cli("run", "--agent", str(cfg), cwd=tasks), "not UTF-8")
    res = tasks / "bad.jsonl"
    res.write_bytes(result("o__r-1").model_dump_json().encode() + b"\n\xff\xfe\n")
    one_line_error(cli("report", str(res), cwd=tasks), "not UTF-8")


def test_markup_in_reasons_and_ids_is_printed_as_text(tmp_path):
    out = tmp_path / "r.jsonl"
    evil = "[/] [bold red]RESOLVED[/bold red] [link=http://evil]click[/link] [/]"
    out.write_text(result("o__r-1", status="failed", reason=evil).model_dump_json() + "\n"
                   + result("o__r-2", status="error", reason="[/", agent="[bold]x").model_dump_json() + "\n")
    proc = cli("report", str(out), cwd=tmp_path, env={**NO_DOCKER, "COLUMNS": "300"})
    assert proc.returncode == 0, proc.stderr
    assert evil in proc.stdout and "agent: [bold]x" in proc.stdout


def test_manifest_that_is_not_one_is_a_one_line_error(tmp_path):
    out = tmp_path / "r.jsonl"
    out.write_text("")
    (tmp_path / "runs" / "x").mkdir(parents=True)
    (tmp_path / "runs" / "x" / "manifest.json").write_bytes(b"\xff")
    one_line_error(cli("report", str(out), cwd=tmp_path), "not a run manifest")
