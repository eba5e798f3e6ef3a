"""What an exported task runs inside its task image to grade: `sweserve run`'s verifier, shipped as files.

Shared by the SWE-bench export (its eval_script) and the Harbor export (its tests/ folder). Both put the same
harness in /tmp/sweserve/harness and run `sweserve_verify.py` there as root with the system Python: the
submission applied with `git apply --index`, the resets of `evaluation/resets.py`, tests.patch, the grading
plan of `sweserve run` (graded tests, mutation twins and canaries under names drawn in the box at run time:
`harness/sweserve_plan.py`, shipped by `evaluation/export_plan.py`; plain canaries where no plan is shipped),
the hidden tests run by the boot script as an unprivileged user over a root-owned
tree, outcomes streamed behind a nonce to the root verifier, which decides after the tests' process has ended
(see harness/sweserve_verify.py). The modules are read as files, never imported here.
"""

from __future__ import annotations

import json
from importlib import resources
from importlib.resources.abc import Traversable
from pathlib import Path, PurePosixPath

from sweserve.dataset.profiles import RepoProfile
from sweserve.models import TaskBundle

PACKAGE = Path(__file__).resolve().parent.parent
HARNESS_FILES = resources.files("sweserve.harness")  # harness/ at the repository root, sweserve/harness in the wheel
# name in the box -> the file it is (the grading modules under their harness names)
SHIPPED: dict[str, Traversable] = {
    **{name: HARNESS_FILES / name for name in (
        "sweserve_verify.py", "sweserve_boot.py", "sweserve_outcomes.py", "sweserve_unittest.py", "sweserve_drop.py",
        "sweserve_protocol.py", "sweserve_canaries.py", "sweserve_twins.py", "sweserve_plan.py")},
    "sweserve_resets.py": PACKAGE / "evaluation" / "resets.py",
}
HARNESS = "/tmp/sweserve/harness"  # where `sweserve run` puts its harness too
CONFIG = "verify.json"
PLAN = "plan.json"
VENV_PYTHON = "/opt/venv/bin/python"
TEST_USER = "nobody"
VERIFY_COMMAND = f"/usr/bin/python3 -I {HARNESS}/sweserve_verify.py {HARNESS}/{CONFIG}"


def verify_config(bundle: TaskBundle, profile: RepoProfile, fmt: str, patch: str, **extra: object) -> dict:
    """verify.json: the task's graded ids and tests, the profile's test paths and plugins, where the submission
    is (`patch`: a file the harness left, or "" for its working tree) and what the format needs (`extra`)."""
    task = bundle.task
    return {"format": fmt, "base_commit": task.base_commit, "FAIL_TO_PASS": task.FAIL_TO_PASS,
            "PASS_TO_PASS": task.PASS_TO_PASS, "test_files": task.test.files, "runner": task.test.runner,
            "test_paths": profile.test_paths, "plugins": profile.pytest_plugins,
            "workdir": str(PurePosixPath("/testbed") / task.test.workdir), "env": task.test.env,
            "timeout_s": task.resources.test_timeout_s, "python": VENV_PYTHON, "user": TEST_USER,
            "patch": patch, **extra}


def harness_files(bundle: TaskBundle, profile: RepoProfile, fmt: str, patch: str, plan: str | None = None,
                  **extra: object) -> dict[str, str]:
    """Every file of the in-box harness, by name: the modules, verify.json, tests.patch and, where the exporter
    made one (`plan`: evaluation/export_plan.py), the grading plan with the task's mutation twins."""
    files = {name: path.read_text(encoding="utf-8") for name, path in SHIPPED.items()}
    if plan is not None:
        extra = {**extra, "plan_file": f"{HARNESS}/{PLAN}"}
        files[PLAN] = plan
    files[CONFIG] = json.dumps(verify_config(bundle, profile, fmt, patch, **extra), indent=2) + "\n"
    files["tests.patch"] = bundle.tests_patch
    return files
