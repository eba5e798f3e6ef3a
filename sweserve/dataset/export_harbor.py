"""Tasks as Harbor task folders (Terminal-Bench's harness): task.toml, instruction.md, environment/, tests/, solution/.

Each folder is graded the way `sweserve run` grades:

- `environment/Dockerfile` builds FROM the sweserve task image (repo at base_commit in /testbed, no hidden
  tests, no oracle), which must exist locally: Harbor builds it with no pull.
- The agent works in that container. When it ends, a collect hook stores its diff against base_commit
  (`git add -A; git diff --cached --binary`) as the artifact /logs/artifacts/model.patch.
- The verifier runs in a *separate*, fresh container of the same image (`environment_mode = "separate"`):
  whatever the agent did to the environment outside its diff is gone. `tests/test.sh` drops the diff's
  edits to test files, applies it, applies `tests.patch`, runs the hidden tests with sweserve's outcome
  recorder, and writes 1 to /logs/verifier/reward.txt only when every FAIL_TO_PASS and PASS_TO_PASS
  test passes (details in /logs/verifier/sweserve.json).
- `solution/solve.sh` applies the oracle patch (Harbor's `oracle` agent runs it).

This module writes files only; building the task image is the caller's job (see `sweserve export`).
"""

from __future__ import annotations

import json
import shutil
from importlib.resources import files
from pathlib import Path

import tomli_w

from sweserve.dataset.in_image import HARBOR_VERIFIER, harness_sources, hidden_test_command
from sweserve.dataset.patches import apply_command
from sweserve.dataset.profiles import RepoProfile
from sweserve.models import TaskBundle

ARTIFACT_PATCH = "/logs/artifacts/model.patch"
GRADE_PY = "sweserve_grade.py"

TEST_SH = f"""#!/bin/bash
# sweserve's grading of the agent's diff: writes /logs/verifier/reward.txt (1 = resolved, 0 = not).
mkdir -p /logs/verifier
echo 0 > /logs/verifier/reward.txt
exec /usr/bin/python3 -I /tests/{GRADE_PY}
"""

SOLVE_SH = f"""#!/bin/bash
# The oracle: the merged PR's non-test changes.
set -euo pipefail
cd /testbed
{apply_command("/solution/oracle.patch")}
"""

def task_config(bundle: TaskBundle, image_tag: str) -> dict:
    """task.toml's content (Harbor's TaskConfig schema 1.4)."""
    task, res = bundle.task, bundle.task.resources
    collect = (f"mkdir -p /logs/artifacts && cd /testbed && git add -A && "
               f"git diff --cached --binary --full-index {task.base_commit} > {ARTIFACT_PATCH}")
    metadata = {"family": task.family, "repo": task.repo, "pr_number": task.pr_number,
                "base_commit": task.base_commit, "profile": task.profile, "sweserve_image": image_tag,
                "gpu_memory_gb": res.gpu_memory_gb}
    if res.needs_accelerator:
        metadata["needs_accelerator"] = res.needs_accelerator
    environment = {"build_timeout_sec": 600.0, "cpus": res.cpus, "memory_mb": int(res.memory_gb * 1024),
                   "workdir": "/testbed"}
    if res.gpus:
        environment["gpus"] = res.gpus
    return {
        "schema_version": "1.4",
        "task": {"name": f"sweserve/{task.task_id.lower()}", "description": task.title,
                 "keywords": ["sweserve", task.family, task.repo]},
        "metadata": metadata,
        "agent": {"timeout_sec": float(res.timeout_s)},
        "verifier": {"timeout_sec": float(res.test_timeout_s + 300), "environment_mode": "separate",
                     "collect": [{"command": collect, "timeout_sec": 300.0}]},
        "environment": environment,
    }


def grade_config(bundle: TaskBundle, profile: RepoProfile) -> dict:
    task = bundle.task
    return {
        "task_id": task.task_id,
        "base_commit": task.base_commit,
        "FAIL_TO_PASS": task.FAIL_TO_PASS,
        "PASS_TO_PASS": task.PASS_TO_PASS,
        "test_files": task.test.files,
        "test_paths": profile.test_paths,
        "command": hidden_test_command(task, "/tests"),
        "workdir": str(Path("/testbed") / task.test.workdir),
        "env": task.test.env,
        "timeout_s": task.resources.test_timeout_s,
        "artifact_patch": ARTIFACT_PATCH,
    }


def _write(path: Path, text: str, executable: bool = False) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    if executable:
        path.chmod(0o755)


def export_harbor_task(bundle: TaskBundle, profile: RepoProfile, image_tag: str, out_dir: Path) -> Path:
    """Write one Harbor task folder, <out_dir>/<task_id>/, replacing an older export of it."""
    task = bundle.task
    dest = out_dir / task.task_id
    if dest.exists():
        shutil.rmtree(dest)
    _write(dest / "task.toml", tomli_w.dumps(task_config(bundle, image_tag)))
    _write(dest / "instruction.md", bundle.instruction.rstrip() + "\n")
    _write(dest / "environment" / "Dockerfile",
           f"# The sweserve task image: the repo at {task.base_commit[:12]} in /testbed, nothing of the hidden\n"
           f"# tests or the oracle. Built locally by `sweserve export --format harbor`; never pulled.\n"
           f"FROM {image_tag}\nWORKDIR /testbed\n"
           f"# the task image keeps the tracked files in .git until a container starts; Harbor's gets them here\n"
           f"RUN [\"/usr/local/bin/sweserve-tree\", \"restore\"]\n")
    tests = dest / "tests"
    _write(tests / "test.sh", TEST_SH, executable=True)
    _write(tests / GRADE_PY, HARBOR_VERIFIER.read_text(encoding="utf-8"))
    _write(tests / "config.json", json.dumps(grade_config(bundle, profile), indent=2) + "\n")
    _write(tests / "tests.patch", bundle.tests_patch)
    _write(tests / "sweserve_patches.py", files("sweserve.dataset").joinpath("patches.py").read_text())
    for name, source in harness_sources().items():
        _write(tests / name, source)
    _write(dest / "solution" / "solve.sh", SOLVE_SH, executable=True)
    _write(dest / "solution" / "oracle.patch", bundle.oracle_patch)
    return dest
