"""A forged session transcript (issue #15, point 7).

The reviewer's record of a human session is what the host recorded: keystrokes with their times and the
screen. The shell's history lives in the sandbox, where the candidate can write anything into it: commands
invented there must never read as the record, and the real ones (typed with history off) must.
"""

from __future__ import annotations

import base64
import sys
import time
from datetime import datetime, timezone

import pytest

from sweserve.agents.human import untyped_history
from sweserve.agents.terminal import TerminalRecord
from sweserve.models import AgentRun, RunResult, Task, TaskBundle, TestSpec
from sweserve.reporting.review import review_markdown

DIST = "sweserve-demo__sglang-mini-103"
FORGED = "pytest test/srt -q && echo all-47-tests-pass"  # never typed: written into the history file


def _section(review: str, title: str) -> str:
    start = review.find(f"## {title}")
    if start < 0:
        return ""
    end = review.find("\n## ", start + 1)
    return review[start:] if end < 0 else review[start:end]


def test_typed_commands_are_every_key_as_typed():
    rec = TerminalRecord()
    rec.typed(0.1, b"lss\x7f -la\r")                 # a backspace: shown, never applied (a guess: red team 14c)
    rec.typed(0.5, b"rm -rf /\x15echo safe\r")
    rec.typed(0.9, b"git status --shrot\x17--short\r")
    rec.typed(1.2, b"\x1b[Acat x\x1bOB\r")             # arrow keys are named
    assert rec.commands() == ["lss⟨⌫⟩ -la", "rm -rf /⟨^U⟩echo safe", "git status --shrot⟨^W⟩--short",
                              "⟨↑⟩cat x⟨↓⟩"]
    # the shell history's copy of the same commands is no disagreement: erasers are applied there, as a guess
    assert untyped_history([(1, "ls -la"), (2, "echo safe"), (3, "git status --short")], rec.commands()) == []


def test_a_session_record_applies_no_edit_once_the_cursor_may_have_moved():
    """`sweserve session`'s record rebuilds lines with the browser terminal's rebuilder (one of each): `cat key`,
    ^A, ^U, Enter runs `cat key` in bash (^U cuts before the cursor, which ^A put at the start), so the record must
    not say an empty line ran, and the history's `cat key` is no disagreement (red team 12a's R12a-1, left in
    `TerminalRecord.commands` until it used `typed_lines`)."""
    rec = TerminalRecord()
    rec.typed(0.1, b"cat key\x01\x15\r")
    rec.typed(0.4, b"cd sw\t\r")              # completion: bash ran `cd sweserve/`
    rec.typed(0.8, b"\x1b[A -la\r")           # recall of `ls`, then ` -la`: bash ran `ls -la`
    rec.typed(1.0, b"\x1b[200~echo a\necho b\x7f\x1b[201~\r")  # a paste of two lines, a DEL in it, then Enter
    assert rec.commands() == ["cat key⟨^A⟩⟨^U⟩", "cd sw⇥", "⟨↑⟩ -la", "echo a↵echo b⟨⌫⟩"]
    history = [(1, "cat key"), (2, "cd sweserve/"), (3, "ls -la"), (4, "echo a"), (5, "echo b\x7f"), (6, FORGED)]
    assert untyped_history(history, rec.commands()) == [FORGED]
    assert untyped_history([(1, "rm -rf x")], ["⟨↑⟩", "⇥"]) == ["rm -rf x"]  # keys alone explain nothing


def test_history_entries_nobody_typed_are_listed():
    history = [(100, "ls -la"), (101, FORGED), (102, "  echo safe"), (103, FORGED)]
    assert untyped_history(history, ["ls -la", "echo safe", "exit"]) == [FORGED]
    assert untyped_history(history[:1], ["ls -la"]) == []


def _result(run: AgentRun) -> tuple[TaskBundle, RunResult]:
    task = Task(task_id="o__r-1", repo="o/r", profile="p", pr_number=1, title="t", base_commit="a" * 40,
                merge_commit="b" * 40, family="decoding", created_at="2026-01-01T00:00:00Z",
                test=TestSpec(files=["test/t.py"]))
    now = datetime.now(timezone.utc)
    result = RunResult(run_id="r", task_id=task.task_id, family="decoding", agent="human-mallory", status="failed",
                       started_at=now, finished_at=now, duration_s=1, trial_dir="/tmp/x", agent_config_hash="human",
                       task_hash="h", agent_run=run, flags=run.flags)
    return TaskBundle(task=task, instruction="# t\n", oracle_patch="o\n", tests_patch="t\n"), result


def test_the_review_records_the_hosts_transcript_and_flags_a_forged_history():
    rec = TerminalRecord()
    rec.typed(0.5, b"set +o history; echo real-work\r")
    rec.typed(2.0, b"exit\r")
    history = [(1_700_000_000, "set +o history; echo real-work"), (1_700_000_001, FORGED)]
    untyped = untyped_history(history, rec.commands())
    run = AgentRun(agent="human-mallory", candidate="mallory", keystrokes=rec.keystrokes(), screen="real-work\n",
                   transcript="\n".join(f"{s}\t{c}" for s, c in history), untyped_history=untyped,
                   flags=["history_disagrees"])
    review = review_markdown(*_result(run))
    record = _section(review, "Transcript")
    assert "echo real-work" in record and FORGED not in record and "recorded on the host" in record
    shown = _section(review, "Shell history")
    assert "disagrees" in shown and "!" in next(line for line in shown.splitlines() if FORGED in line)
    # a history that agrees with the host's record is not shown at all
    honest = run.model_copy(update={"transcript": "1700000000\tset +o history; echo real-work",
                                    "untyped_history": [], "flags": []})
    review = review_markdown(*_result(honest))
    assert "Shell history" not in review and "echo real-work" in _section(review, "Transcript")


@pytest.mark.docker
def test_commands_forged_into_the_sandboxs_history_are_not_the_record(demo, tmp_path):
    pexpect = pytest.importorskip("pexpect")
    from sweserve.evaluation.results import read_results

    args = ["-m", "sweserve.cli", "session", DIST, "--candidate", "mallory", "--tasks", str(demo.tasks),
            "--state-dir", str(demo.root / "state"), "--repo-path", str(demo.repo),
            "--output", str(tmp_path / "human.jsonl"), "--time-limit", "600"]
    child = pexpect.spawn(sys.executable, args, cwd=str(tmp_path), encoding="utf-8", timeout=120,
                          dimensions=(50, 200))
    prompt = r"s left\] /testbed# "
    try:
        child.expect(prompt)
        child.sendline("ls python  # evidence")
        child.expect(prompt)
        entry = base64.b64encode(f"#{int(time.time())}\n{FORGED}\n".encode()).decode()
        child.sendline(f"echo {entry} | base64 -d >> /sweserve/history")  # the forged command, never typed
        child.expect(prompt)
        child.sendline("set +o history; echo real-$((6*7)) > /tmp/work  # unrecorded by the shell")
        child.expect(prompt)
        time.sleep(1.5)  # the host copies the history every second
        child.sendline("exit")
        child.expect(pexpect.EOF, timeout=240)
    finally:
        child.close(force=True)
    (r,) = read_results(tmp_path / "human.jsonl")
    run = r.agent_run
    assert FORGED in run.transcript  # the sandbox's history holds it …
    assert run.untyped_history == [FORGED] and "history_disagrees" in r.flags
    review = (tmp_path / f"review-mallory-{DIST}.md").read_text()
    record = _section(review, "Transcript")
    assert FORGED not in record  # … the record does not
    assert "set +o history; echo real-$((6*7)) > /tmp/work  # unrecorded by the shell" in record
    assert "ls python  # evidence" in record
    flagged = [line for line in _section(review, "Shell history").splitlines() if FORGED in line]
    assert flagged and flagged[0].startswith("!"), flagged


def test_a_marker_inside_an_escape_sequence_is_kept_and_splits_it():
    """Keys dropped between an ESC and the rest of an arrow's sequence: the marker stays where it was (the line
    is not what the shell got), and what follows it is not read as part of the ESC's sequence."""
    from sweserve.agents.terminal import DROPPED, typed_lines

    events = [(0.1, "i", "ls\x1b"), (0.2, "m", f"{DROPPED} 5 bytes"), (0.3, "i", "[Ax\r")]
    assert typed_lines(events) == [(0.1, "ls⟨esc⟩⟨5 bytes dropped⟩[Ax")]
