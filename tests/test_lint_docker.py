"""`sweserve validate` ends with lint: the interface section from FAIL_TO_PASS, and --reject-lint."""

import shutil
import subprocess
import sys

import pytest

from sweserve.dataset.taskstore import load_bundle

pytestmark = pytest.mark.docker
SAMPLER = "sweserve-demo__sglang-mini-102"


def cli(*args, cwd):
    return subprocess.run([sys.executable, "-m", "sweserve.cli", *args], cwd=cwd, capture_output=True, text=True)


@pytest.mark.slow
def test_validate_reject_lint_rejects_a_leaky_task(demo, tmp_path):
    tasks = tmp_path / "tasks"
    shutil.copytree(demo.tasks / SAMPLER, tasks / SAMPLER)
    test_name = load_bundle(tasks / SAMPLER).task.FAIL_TO_PASS[0].split("::")[-1]
    instruction = tasks / SAMPLER / "instruction.md"
    instruction.write_text(instruction.read_text() + f"\nMake `{test_name}` pass.\n")
    common = ["--tasks", str(tasks), "--state-dir", str(demo.root / "state"), "--repo-path", str(demo.repo)]

    proc = cli("validate", "--runs", "1", "--reject-lint", *common, cwd=tmp_path)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    task = load_bundle(tasks / SAMPLER).task
    assert task.validation.status == "rejected" and not task.validated
    assert task.validation.reason == f"lint: statement names hidden tests: {test_name}"
    assert "'lint': 1" in proc.stdout  # the summary's reason bucket

    # without --reject-lint the task stays valid and the finding is recorded for `tasks show`
    proc = cli("validate", "--runs", "1", *common, cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    task = load_bundle(tasks / SAMPLER).task
    assert task.validated and task.quality.interface_from == "fail_to_pass"
    assert task.quality.leaks == [f"statement names hidden tests: {test_name}"]
    shown = cli("tasks", "show", SAMPLER, *common[:4], cwd=tmp_path)
    assert "lint: FAILED" in shown.stdout and test_name in shown.stdout
