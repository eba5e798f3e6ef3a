"""Bad input: one line on stderr, exit code 2, no traceback."""

import json
import subprocess
import sys

import pytest

from sweserve.dataset.taskstore import save_bundle
from sweserve.models import Task, TaskBundle, TestSpec


def run(*args, cwd):
    return subprocess.run([sys.executable, "-m", "sweserve.cli", *args], cwd=cwd, capture_output=True, text=True)


@pytest.fixture
def tasks(tmp_path):
    task = Task(task_id="o__r-1", repo="o/r", profile="sglang", pr_number=1, title="Fix it", base_commit="a" * 40,
                merge_commit="b" * 40, family="decoding", created_at="2026-01-01T00:00:00Z",
                test=TestSpec(files=["test/test_a.py"]))
    save_bundle(tmp_path / "tasks", TaskBundle(task=task, instruction="# Fix it\n", oracle_patch="o\n", tests_patch="t\n"))
    return tmp_path


def one_line_error(proc, *needles):
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr + proc.stdout
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    for n in needles:
        assert n in lines[0]


def test_tasks_list_and_show(tasks):
    proc = run("tasks", "list", "--json", cwd=tasks)
    assert proc.returncode == 0 and json.loads(proc.stdout)[0]["task_id"] == "o__r-1"
    proc = run("tasks", "show", "o__r-1", "--json", cwd=tasks)
    assert proc.returncode == 0 and json.loads(proc.stdout)["title"] == "Fix it"


def test_unknown_task(tasks):
    one_line_error(run("tasks", "show", "nope", cwd=tasks), "unknown task: nope")
    one_line_error(run("run", "--agent", "null", "nope", cwd=tasks), "unknown task: nope")


def test_malformed_task_file(tasks):
    path = tasks / "tasks" / "o__r-1" / "task.json"
    data = json.loads(path.read_text())
    data["family"] = "frontend"
    path.write_text(json.dumps(data))
    one_line_error(run("tasks", "list", cwd=tasks), "task.json", "field 'family'")
    one_line_error(run("validate", cwd=tasks), "task.json", "field 'family'")


def test_missing_repo_and_profile(tmp_path):
    one_line_error(run("mine", "--repo", str(tmp_path / "nowhere"), cwd=tmp_path), "not a git repository")
    one_line_error(run("mine", "--repo", str(tmp_path), "--profile", "nope", cwd=tmp_path), "unknown profile: nope")


def test_missing_results_and_bad_numbers(tasks):
    one_line_error(run("report", "missing.jsonl", cwd=tasks), "no such results file")
    one_line_error(run("validate", "--runs", "0", cwd=tasks), "--runs and --workers must be at least 1")


@pytest.mark.parametrize("name", ["a b/c", "..", "-x", "", "x" * 101, "é"])
def test_a_bad_agent_name_is_one_line(tasks, name):
    """It printed `internal error: ValidationError` over 4 lines; a config's name or '..' reached runs/ unchecked."""
    one_line_error(run("run", "--agent", "echo hi", f"--agent-name={name}", cwd=tasks), "--agent-name", "agent name")
    one_line_error(run("run", "--agent", "null", f"--agent-name={name}", cwd=tasks), "--agent-name")
    (tasks / "preds.jsonl").write_text(json.dumps({"instance_id": "o__r-1", "model_name_or_path": "m",
                                                   "model_patch": ""}) + "\n")
    one_line_error(run("run", "--predictions", "preds.jsonl", f"--agent-name={name}", cwd=tasks), "--agent-name")


def test_bad_export_options_are_one_line(tasks):
    (tasks / "file").write_text("")
    one_line_error(run("export", "--format", "swebench", "--out", "x", "--split", "a/b", cwd=tasks), "--split")
    one_line_error(run("export", "--format", "swebench", "--out", "x", "--split", "", cwd=tasks), "--split")
    one_line_error(run("export", "--format", "harbor", "--out", "file", cwd=tasks), "--out", "not a folder")


def test_workers_with_the_ray_executor_is_refused(tasks):
    one_line_error(run("validate", "--executor", "ray", "--workers", "2", cwd=tasks),
                   "--workers is for --executor local")
    one_line_error(run("run", "--agent", "null", "--executor", "ray", "--workers", "4", cwd=tasks),
                   "--workers is for --executor local")
    one_line_error(run("run", "--agent", "null", "--workers", "0", cwd=tasks), "--workers must be at least 1")


def test_a_bug_in_a_command_is_one_line_naming_its_saved_traceback(tasks, monkeypatch, capsys):
    from sweserve import cli
    from sweserve.cli import main
    from sweserve.dataset import taskstore

    def bug(*_):
        raise ZeroDivisionError("division by zero")

    monkeypatch.setattr(taskstore, "select", bug)
    monkeypatch.setattr(cli, "setup_logging", lambda err: None)  # the process's logging stays pytest's
    code = main(["validate", "--tasks", str(tasks / "tasks"), "--state-dir", str(tasks / "state")])
    err = capsys.readouterr().err
    assert code == 1 and "Traceback" not in err and len(err.strip().splitlines()) == 1
    assert "internal error: ZeroDivisionError: division by zero" in err
    (saved,) = (tasks / "state" / "logs").glob("crash-*.txt")
    assert str(saved) in err.replace("\n", "") and "raise ZeroDivisionError" in saved.read_text()
