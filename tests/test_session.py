"""Human sessions driven through a pseudo-terminal, as an engineer would type them."""

import subprocess
import sys

import pexpect
import pytest

from sweserve.demo import files
from sweserve.evaluation.results import read_results

pytestmark = pytest.mark.docker
DIST = "sweserve-demo__sglang-mini-103"
PATH = "python/sglang/srt/distributed/parallel_state.py"
PROMPT = r"s left\] /testbed# "


def spawn(demo, tmp_path, *extra):
    args = ["-m", "sweserve.cli", "session", DIST, "--candidate", "alice", "--tasks", str(demo.tasks),
            "--state-dir", str(demo.root / "state"), "--repo-path", str(demo.repo),
            "--output", str(tmp_path / "human.jsonl"), *extra]
    return pexpect.spawn(sys.executable, args, cwd=str(tmp_path), encoding="utf-8", timeout=120,
                         dimensions=(50, 200))


def test_engineer_fixes_the_task_in_a_session(demo, tmp_path):
    child = spawn(demo, tmp_path, "--time-limit", "600")
    child.expect("Fix uneven tensor-parallel shard ranges")
    child.expect(PROMPT)
    child.sendline("grep -c shard_range /sweserve/instruction.md")
    child.expect(PROMPT)
    child.sendline(f"cat > {PATH} <<'EOF'")
    for line in files.PR_DISTRIBUTED[PATH].splitlines():
        child.sendline(line)
    child.sendline("EOF")
    child.expect(PROMPT)
    child.sendline("git status --short")
    child.expect(PROMPT)
    child.sendline("exit")
    child.expect("resolved")
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == 0
    (r,) = read_results(tmp_path / "human.jsonl")
    assert r.status == "resolved" and r.agent == "human-alice"
    run = r.agent_run
    assert run.candidate == "alice" and run.exit_reason == "finished" and 0 < run.wall_s < 600
    commands = [line.split("\t", 1)[1] for line in run.transcript.splitlines()]
    assert commands[0] == "grep -c shard_range /sweserve/instruction.md" and "git status --short" in commands
    typed = [line.split("s  ", 1)[1] for line in run.keystrokes.splitlines()]  # recorded on the host
    assert typed[0] == "grep -c shard_range /sweserve/instruction.md" and typed[-1] == "exit"
    assert "M python/sglang/srt/distributed/parallel_state.py" in run.screen and "\x1b" not in run.screen
    folder = __import__("pathlib").Path(r.trial_dir)
    assert (folder / "keystrokes.txt").read_text() == run.keystrokes
    review = (tmp_path / f"review-alice-{DIST}.md").read_text()
    for part in ("## Instruction", "## Candidate diff", "## Oracle diff", "## Transcript", "git status --short",
                 "recorded on the host", "## Terminal", "✅ passed", "**resolved**"):
        assert part in review
    assert run.untyped_history == [] and "Shell history" not in review  # it agrees with the host's record
    html = subprocess.run([sys.executable, "-m", "sweserve.cli", "review", str(tmp_path / "human.jsonl"), DIST,
                           "--tasks", str(demo.tasks), "--html"], capture_output=True, text=True, check=True).stdout
    assert html.startswith("<!doctype html>") and "Candidate diff" in html


def test_session_ends_at_the_time_limit_and_is_graded(demo, tmp_path):
    child = spawn(demo, tmp_path, "--time-limit", "5")
    child.expect(PROMPT)
    child.sendline("sleep 60")
    child.expect("failed", timeout=90)
    child.expect(pexpect.EOF)
    (r,) = read_results(tmp_path / "human.jsonl")
    assert r.status == "failed" and r.agent_run.exit_reason == "time_limit"
    assert 4 <= r.agent_run.wall_s < 30
