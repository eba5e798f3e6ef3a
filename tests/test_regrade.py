"""`sweserve report --regrade`: results graded again from each trial's saved outcomes, without Docker."""

import json
import subprocess
import sys
from datetime import datetime, timezone

from sweserve.dataset.taskstore import load_bundle, save_bundle, save_task
from sweserve.evaluation.results import ResultsWriter
from sweserve.evaluation.trial_folder import OUTCOMES_FILE, TrialFolder
from sweserve.models import RunResult, Task, TaskBundle, TestResults, TestSpec, ValidationRecord

T0 = datetime(2026, 1, 1, tzinfo=timezone.utc)
A, B = "test/test_a.py::test_a", "test/test_a.py::test_b"


def task(task_id):
    t = Task(task_id=task_id, repo="o/r", profile="sglang", pr_number=1, title="t", base_commit="a" * 40,
             merge_commit="b" * 40, family="decoding", created_at=T0, test=TestSpec(files=["test/test_a.py"]),
             FAIL_TO_PASS=[A], validation=ValidationRecord(status="valid", runs=1))
    return TaskBundle(task=t, instruction="i", oracle_patch="o", tests_patch="t")


def result(task_id, status, attempt=1):
    """A result as a trial records it: a graded one carries its graded tests' outcomes."""
    tests = TestResults(fail_to_pass={A: "passed" if status == "resolved" else "failed"})
    return RunResult(run_id="r1", task_id=task_id, family="decoding", agent="a", attempt=attempt, status=status,
                     tests=tests if status in ("resolved", "failed", "tampered") else TestResults(),
                     started_at=T0, finished_at=T0, duration_s=0.0)


def report(tmp_path, *extra):
    proc = subprocess.run([sys.executable, "-m", "sweserve.cli", "report", str(tmp_path / "r.jsonl"), "--regrade",
                           "--tasks", str(tmp_path / "tasks"), "--json", *extra], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    return {row["task_id"]: row["status"] for row in json.loads(proc.stdout)[0]["tasks"]}


def test_regrade_follows_the_tasks_as_they_are_now_and_leaves_other_verdicts(tmp_path):
    tasks = tmp_path / "tasks"
    for tid in ("o__r-1", "o__r-2", "o__r-3", "o__r-4"):
        save_bundle(tasks, task(tid))
    out = tmp_path / "r.jsonl"
    saved = {"o__r-1": {A: "passed", B: "failed"}, "o__r-2": {A: "passed", B: "passed"},
             "o__r-3": {A: "passed", B: "passed"}}
    with ResultsWriter(out) as w:
        for tid, status in (("o__r-1", "resolved"), ("o__r-2", "resolved"), ("o__r-3", "tampered"),
                            ("o__r-4", "failed")):
            w.write(result(tid, status))
    for tid, outcomes in saved.items():
        TrialFolder.for_trial(out, "r1", "a", tid, 1).write(OUTCOMES_FILE, json.dumps({"outcomes": outcomes}))
    # o__r-4's folder holds a forged file: not what the grader writes, so it is ignored
    TrialFolder.for_trial(out, "r1", "a", "o__r-4", 1).write(OUTCOMES_FILE, '{"outcomes": {"x": "pwned"}}')
    assert report(tmp_path) == {"o__r-1": "resolved", "o__r-2": "resolved", "o__r-3": "tampered",
                                "o__r-4": "failed"}
    for tid in ("o__r-1", "o__r-2", "o__r-3"):  # the task now also grades test_b
        bundle = load_bundle(tasks / tid)
        bundle.task.PASS_TO_PASS = [B]
        save_task(tasks / tid, bundle.task)
    assert report(tmp_path) == {"o__r-1": "failed", "o__r-2": "resolved", "o__r-3": "tampered",
                                "o__r-4": "failed"}
