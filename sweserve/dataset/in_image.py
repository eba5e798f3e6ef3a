"""What an exported task runs inside its task image to grade: the hidden-test command and sweserve's recorders.

Shared by the SWE-bench export (its eval_script) and the Harbor export (its tests/ folder): the pytest plugin
or unittest runner from environment/in_sandbox/ (`*_file.py`, over the recorders grading uses) writes every
test's outcome to $SWESERVE_OUTCOMES.
These graders run inside other harnesses, so they use that file, not sweserve's own verifier (isolated
interpreter, streamed nonce'd outcomes, canaries): an exported task is only as hard to forge as the harness
that grades it.
"""

from __future__ import annotations

import shlex
from pathlib import Path

from sweserve.models import Task

HARNESS_DIR = Path(__file__).resolve().parent.parent / "environment" / "in_sandbox"
HARNESS_FILES = ("sweserve_outcomes.py", "sweserve_unittest.py", "sweserve_outcomes_file.py", "sweserve_unittest_file.py")
HARBOR_VERIFIER = HARNESS_DIR / "sweserve_harbor_verifier.py"
VENV_PYTHON = "/opt/venv/bin/python"

# Our outcomes in the words of pytest's `-rA` summary, which SWE-bench's parse_log_pytest reads.
PYTEST_WORDS = {"passed": "PASSED", "failed": "FAILED", "error": "ERROR", "skipped": "SKIPPED"}


def harness_sources() -> dict[str, str]:
    return {name: (HARNESS_DIR / name).read_text(encoding="utf-8") for name in HARNESS_FILES}


def hidden_test_command(task: Task, harness_dir: str) -> str:
    """The command run in the test workdir, with harness_dir on PYTHONPATH, to run the task's hidden tests."""
    files = " ".join(shlex.quote(f) for f in task.test.files)
    if task.test.runner == "unittest":
        return f"{VENV_PYTHON} {harness_dir}/sweserve_unittest_file.py {files}"
    return (f"{VENV_PYTHON} -m pytest -p sweserve_outcomes_file -p no:cacheprovider -o addopts= -q -rN "
            f"--continue-on-collection-errors {files}")


def test_env(task: Task, harness_dir: str, outcomes_path: str) -> dict[str, str]:
    env = dict(task.test.env)
    env["PYTHONPATH"] = ":".join(p for p in (harness_dir, env.get("PYTHONPATH", "")) if p)
    env["SWESERVE_OUTCOMES"] = outcomes_path
    return env
