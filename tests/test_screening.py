"""Blind review (dataset/screening.py, `sweserve tasks review`): packets read in order, verdicts recorded,
and readiness that drops a task most reviewers judge BAD."""

import json
import subprocess
import sys
from datetime import datetime, timedelta, timezone

import pytest
from pydantic import ValidationError

from sweserve.dataset.readiness import assess, instruction_digest
from sweserve.dataset.taskstore import load_task, save_bundle
from sweserve.models import Review, TaskBundle
from tests.test_readiness import task

GOOD = dict(sufficient=2, leak=False, fair_tests=True, family_ok=True, verdict="GOOD", reason="clear")
BAD = dict(sufficient=1, leak=False, fair_tests=False, family_ok=True, verdict="BAD", reason="a test pins an "
           "argument order the statement never gives")


def review(who: str, kind: dict, minutes: int = 0, task_id: str = "o__r-1") -> Review:
    at = datetime(2026, 12, 4, tzinfo=timezone.utc) + timedelta(minutes=minutes)
    return Review(task=task_id, reviewer=who, at=at, **kind)


def test_a_verdict_must_follow_the_rubric():
    with pytest.raises(ValidationError, match="contradicts the rubric"):
        Review(task="t", reviewer="a", **{**GOOD, "leak": True})
    with pytest.raises(ValidationError, match="contradicts the rubric"):
        Review(task="t", reviewer="a", **{**BAD, "sufficient": 3, "fair_tests": True})
    with pytest.raises(ValidationError):
        Review(task="t", reviewer="a", **{**GOOD, "sufficient": 4})


def test_most_reviewers_decide_a_tie_drops_and_a_reviewers_latest_verdict_counts():
    def keys(*reviews):
        return [r.key for r in assess(task(reviews=list(reviews))).reasons]

    assert keys() == [] and "reviewed_good" not in assess(task()).checks  # no review: readiness as before
    assert keys(review("a", GOOD)) == [] and assess(task(reviews=[review("a", GOOD)])).checks["reviewed_good"]
    assert keys(review("a", BAD)) == ["review:bad"]
    assert keys(review("a", GOOD), review("b", BAD)) == ["review:bad"]  # precision first
    assert keys(review("a", GOOD), review("b", BAD), review("c", GOOD)) == []
    assert keys(review("a", BAD), review("a", GOOD, minutes=5)) == []  # changed their mind
    detail = assess(task(reviews=[review("a", BAD)])).reasons[0].detail
    assert detail.startswith("blind review: BAD (1 of 1 reviewers): a test pins an argument order")


def cli(*args, cwd):
    return subprocess.run([sys.executable, "-m", "sweserve.cli", "tasks", "review", *args], cwd=cwd,
                          capture_output=True, text=True)


def test_packet_then_record_end_to_end(tmp_path):
    tasks = tmp_path / "tasks"
    for n in (1, 2):
        t = task(n)
        t.validation.forge_odds_instruction = instruction_digest(f"# Fix pages {n}\n")  # measured with it
        t.readiness = assess(t)
        save_bundle(tasks, TaskBundle(task=t, instruction=f"# Fix pages {n}\n",
                                      oracle_patch="diff --git a/pool.py b/pool.py\n+FIX\n",
                                      tests_patch="diff --git a/t.py b/t.py\n+def test_pages(): ...\n"))
    save_bundle(tasks, TaskBundle(task=task(3, validation=None, FAIL_TO_PASS=[]), instruction="# unvalidated\n",
                                  oracle_patch="diff --git a/x b/x\n", tests_patch="diff --git a/t b/t\n"))
    common = ["--tasks", str(tasks), "--state-dir", str(tmp_path / "state")]
    proc = cli("packet", "--out", str(tmp_path / "packet"), *common, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    packet = tmp_path / "packet"
    assert sorted(p.name for p in packet.iterdir()) == ["RUBRIC.md", "o__r-1", "o__r-2"]  # the ready ones
    one = packet / "o__r-1"
    # what the reviewer reads first holds nothing of the tests or the fix; the evidence is apart
    assert sorted(p.name for p in one.iterdir()) == ["BASE", "evidence", "instruction.md"]
    assert "FIX" not in (one / "instruction.md").read_text() and "test_pages" not in (one / "instruction.md").read_text()
    assert (one / "BASE").read_text().strip() == "a" * 40
    assert "+FIX" in (one / "evidence" / "oracle.patch").read_text()
    facts = json.loads((one / "evidence" / "facts.json").read_text())
    assert facts["family"] == "decoding" and facts["FAIL_TO_PASS"] == ["test/test_a.py::test_a"]

    results = tmp_path / "results.jsonl"
    results.write_text(json.dumps({"task": "o__r-1", "reviewer": "a", **BAD}) + "\n\n"
                       + json.dumps({"task": "o__r-2", "reviewer": "a", **GOOD}) + "\n")
    dry = cli("record", str(results), *common, cwd=tmp_path)
    assert dry.returncode == 0 and "not written" in dry.stdout and not load_task(tasks / "o__r-1").reviews
    proc = cli("record", str(results), "--write", *common, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "o__r-1: 0 of 1 GOOD; not ready" in proc.stdout and "o__r-2: 1 of 1 GOOD; ready" in proc.stdout
    first = load_task(tasks / "o__r-1")
    assert not first.ready and [r.key for r in first.readiness.reasons] == ["review:bad"]
    assert load_task(tasks / "o__r-2").ready and len(load_task(tasks / "o__r-2").reviews) == 1
    from sweserve.dataset.funnel import compute

    funnel = compute(tasks)
    assert {s.stage: s for s in funnel.stages}["ready"].dropped == {"review:bad": 1}
    assert "1 of 1 ready tasks have a blind review most reviewers judged GOOD" in " ".join(funnel.notes)
    # the same reviewer again replaces their verdict, never adds a second vote
    cli("record", str(results), "--write", *common, cwd=tmp_path)
    assert len(load_task(tasks / "o__r-2").reviews) == 1

    # bad input: one line naming the file and the line, no traceback, nothing written
    broken = tmp_path / "broken.jsonl"
    broken.write_text(json.dumps({"task": "o__r-2", "reviewer": "b", **GOOD}) + "\n"
                      + json.dumps({"task": "o__r-2", "reviewer": "b", **{**GOOD, "leak": True}}) + "\n")
    proc = cli("record", str(broken), "--write", *common, cwd=tmp_path)
    assert proc.returncode != 0 and "Traceback" not in proc.stderr
    assert "broken.jsonl line 2" in proc.stderr + proc.stdout and "contradicts the rubric" in proc.stderr + proc.stdout
    assert len(load_task(tasks / "o__r-2").reviews) == 1
    unknown = tmp_path / "unknown.jsonl"
    unknown.write_text(json.dumps({"task": "o__r-9", "reviewer": "b", **GOOD}) + "\n")
    proc = cli("record", str(unknown), *common, cwd=tmp_path)
    assert proc.returncode != 0 and "no task o__r-9" in proc.stderr + proc.stdout
