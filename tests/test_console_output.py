"""Output outside a terminal (CI logs, files): nothing cut at 80 columns, long steps show what runs and for how long."""

import io
import json
import logging
import os
import subprocess
import sys
import threading
import time
import uuid
from datetime import datetime, timezone

import pytest
from rich.console import Console
from rich.progress import Progress

from sweserve.cli.common import WIDE, LineProgress, make_console, progress_bar
from sweserve.environment.images import BuildLog
from sweserve.models import RunResult
from sweserve.reporting.summary import build_reports, render

T0 = datetime(2026, 1, 1, tzinfo=timezone.utc)
LONG_ID = "sgl-project-with-a-long-org-name__sglang-inference-engine-fork-" + "x" * 40 + "-12345"
LONG_REASON = ("patch_failed: error: patch failed: python/sglang/srt/layers/attention/flashinfer_backend.py:412 "
               "[Errno 2] hunk #3 does not apply; " + "context " * 30 + "END-OF-REASON")


def _wait_for(pred, timeout=10.0):
    done = threading.Event()
    deadline = time.monotonic() + timeout
    while not pred():
        if time.monotonic() > deadline:
            return False
        done.wait(0.01)
    return True


@pytest.fixture
def no_columns(monkeypatch):
    monkeypatch.delenv("COLUMNS", raising=False)


def test_console_is_wide_when_not_a_terminal(no_columns):
    buf = io.StringIO()
    console = make_console(file=buf)
    assert not console.is_terminal and console.width == WIDE
    r = RunResult(run_id="r", task_id=LONG_ID, family="decoding", agent="a", status="patch_failed",
                  reason=LONG_REASON, started_at=T0, finished_at=T0, duration_s=1)
    render(build_reports([r]), console)
    out = buf.getvalue()
    line = next(ln for ln in out.splitlines() if LONG_ID in ln)
    assert LONG_REASON in line  # the id and the whole reason, brackets included, on one line
    # what rich does by default in a pipe: 80 columns, the id and the reason cut or folded
    narrow = io.StringIO()
    render(build_reports([r]), Console(file=narrow))
    assert not any(LONG_REASON in ln for ln in narrow.getvalue().splitlines())


def test_report_command_in_a_pipe_keeps_ids_and_reasons_whole(tmp_path, no_columns):
    path = tmp_path / "r.jsonl"
    r = RunResult(run_id="r", task_id=LONG_ID, family="decoding", agent="a", status="skipped", reason=LONG_REASON,
                  started_at=T0, finished_at=T0, duration_s=1)
    path.write_text(r.model_dump_json() + "\n")
    env = {k: v for k, v in os.environ.items() if k != "COLUMNS"}
    proc = subprocess.run([sys.executable, "-m", "sweserve.cli", "report", str(path)], capture_output=True,
                          text=True, env=env)
    assert proc.returncode == 0, proc.stderr
    assert any(LONG_ID in ln and f"skipped: {LONG_REASON}" in ln for ln in proc.stdout.splitlines()), proc.stdout


def test_progress_is_lines_with_elapsed_time_and_heartbeats(no_columns):
    buf = io.StringIO()
    console = make_console(file=buf)
    now = [100.0]
    with progress_bar(console) as real:
        assert isinstance(real, LineProgress)
    assert isinstance(progress_bar(Console(file=io.StringIO(), force_terminal=True)), Progress)

    progress = LineProgress(console, interval=3600, clock=lambda: now[0])
    with progress:
        bar = progress.add_task("validating", total=2)
        now[0] += 65
        progress.update(bar, description=f"validating {LONG_ID}")
        now[0] += 3600
        progress.beat()
        progress.advance(bar)
        progress.update(bar, description="validating b")
        progress.advance(bar)
        progress.beat()  # nothing left running: no heartbeat
        counted = progress.add_task("validating", total=2)  # as validate counts: the named task is counted
        progress.update(counted, description="validated x: valid", advance=1)
        progress.update(counted, description="validated y: valid", advance=1)
    lines = buf.getvalue().splitlines()
    assert lines == [
        "[0:00:00] validating (0/2)",
        f"[0:01:05] validating {LONG_ID} (0/2)",
        f"[1:01:05] validating {LONG_ID} (0/2) … still running",
        "[1:01:05] validating b (1/2)",
        "[1:01:05] validating b (2/2) done",
        "[0:00:00] validating (0/2)",
        "[0:00:00] validated x: valid (1/2)",
        "[0:00:00] validated y: valid (2/2)",
    ]


def test_heartbeat_thread_speaks_while_a_step_is_silent(no_columns):
    buf = io.StringIO()
    with LineProgress(make_console(file=buf), interval=0.02) as progress:
        progress.add_task("running oracle", total=None)
        assert _wait_for(lambda: "running oracle … still running" in buf.getvalue())
    lines = []
    with BuildLog("build img:1", lines.append, interval=0.02) as out:
        out.line("Step 1/2 : FROM x")
        assert _wait_for(lambda: any(ln.endswith("build img:1: still running") for ln in lines))
    assert lines[0] == "  [0:00] build img:1: Step 1/2 : FROM x"


@pytest.mark.docker
def test_docker_build_output_is_streamed_with_elapsed_time(docker_client, tmp_path, monkeypatch, caplog):
    from sweserve.environment.images import _docker_build
    from sweserve.errors import InfraError

    caplog.set_level(logging.INFO, logger="sweserve.environment.images")

    monkeypatch.setenv("SWESERVE_HEARTBEAT_S", "0.05")
    (tmp_path / "Dockerfile").write_text(
        "FROM sweserve-base:bookworm\nRUN echo sweserve-build-says-hello && sleep 0.3\n")
    tag = f"sweserve-test-buildlog:{uuid.uuid4().hex[:8]}"
    try:
        _docker_build(docker_client, tmp_path, "Dockerfile", tag, {}, {"sweserve": "1"})
    finally:
        try:
            docker_client.images.remove(tag, force=True)
        except Exception:  # noqa: BLE001 - the build may have failed before tagging
            pass
    lines = [r.getMessage() for r in caplog.records]
    assert any("] build " + tag + ": Step 1/3 : FROM sweserve-base:bookworm" in ln for ln in lines), lines
    assert any(ln.endswith(": sweserve-build-says-hello") and ln.startswith("  [0:0") for ln in lines), lines
    assert any(ln.endswith("still running") for ln in lines), lines
    assert lines[-1].startswith(f"built {tag} in 0:0")

    (tmp_path / "Dockerfile").write_text("FROM sweserve-base:bookworm\nRUN echo about-to-fail && exit 3\n")
    with pytest.raises(InfraError, match=r"building sweserve-test-buildlog:bad failed: .*about-to-fail.*"):
        _docker_build(docker_client, tmp_path, "Dockerfile", "sweserve-test-buildlog:bad", {}, {})


def test_log_lines_outside_a_terminal_are_plain_and_unpadded(no_columns):
    """rich's handler padded every log line to the console's 1,000 columns and let Docker's colours through."""
    from rich.logging import RichHandler

    from sweserve.cli import PlainLogHandler, setup_logging

    buf = io.StringIO()
    setup_logging(make_console(stderr=True, file=buf))
    log = logging.getLogger("sweserve.environment.images")
    with BuildLog("build img:1", log.info, interval=3600) as out:
        out.line("\x1b[1m\x1b[34mStep 1/2 : RUN pip install\x1b[0m " + "pkg " * 200)
    log.warning("left out: \x1b]0;title\x07x")
    lines = buf.getvalue().splitlines()
    assert len(lines) == 2 and "\x1b" not in buf.getvalue()
    assert lines[0].startswith("  [0:00] build img:1: Step 1/2 : RUN pip install pkg") and lines[0].endswith("…")
    assert len(lines[0]) < 300 and lines[1] == "left out: x"
    assert isinstance(logging.getLogger("sweserve").handlers[0], PlainLogHandler)
    setup_logging(Console(file=io.StringIO(), force_terminal=True))  # a terminal keeps rich's handler
    assert isinstance(logging.getLogger("sweserve").handlers[0], RichHandler)


@pytest.mark.docker
@pytest.mark.slow
def test_demo_written_to_a_file_reads_as_plain_lines(docker_client, tmp_path, no_columns):
    """`make demo`'s command with its output in a file: every step's line, no escape codes, no padded lines."""
    log = tmp_path / "demo.log"
    env = {k: v for k, v in os.environ.items() if k != "COLUMNS"}  # readline under pytest exports COLUMNS=80
    with log.open("w") as fh:
        proc = subprocess.run([sys.executable, "-m", "sweserve.cli", "demo", "--state-dir", str(tmp_path / "state")],
                              stdout=fh, stderr=subprocess.STDOUT, cwd=tmp_path, timeout=1800, env=env)
    text = log.read_text()
    assert proc.returncode == 0, text[-3000:]
    assert "\x1b" not in text
    lines = text.splitlines()
    assert max(len(ln) for ln in lines) <= 300, max(lines, key=len)
    # nothing padded to the console's 1,000 columns (a table's centred title is padded to the table's width)
    assert not [ln for ln in lines if len(ln) - len(ln.rstrip()) > 60]
    for step in ("1/5 built demo repository", "2/5 mined", "3/5 validated 6/6 tasks", "4/5 ran the oracle and null",
                 "5/5 demo OK"):
        assert any(ln.startswith(step) for ln in lines), step
    assert sum(ln.startswith("  oracle sweserve-demo__") for ln in lines) == 6
    assert sum(ln.startswith("  null sweserve-demo__") for ln in lines) == 6
    runs = tmp_path / "state" / "demo" / "results" / "runs"
    manifests = [json.loads(p.read_text()) for p in runs.glob("*/manifest.json")]
    assert sorted(m["agent"] for m in manifests) == ["null", "oracle"]  # one run id per agent
