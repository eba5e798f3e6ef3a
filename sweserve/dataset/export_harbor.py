"""Tasks as Harbor task folders (Terminal-Bench's harness): task.toml, instruction.md, environment/, tests/, solution/.

Each folder is graded the way `sweserve run` grades:

- `environment/Dockerfile` builds FROM the sweserve task image (repo at base_commit in /testbed, no hidden
  tests, no oracle), which must exist locally: Harbor builds it with no pull.
- The agent works in that container. When it ends, a collect hook stores its diff against base_commit
  (`git add -A; git diff --cached --binary`) as the artifact /logs/artifacts/model.patch.
- The verifier runs in a *separate*, fresh container of the same image (`environment_mode = "separate"`):
  whatever the agent did to the environment outside its diff is gone. `tests/test.sh` runs sweserve's own
  verifier there (in_image.py): the diff applied, resets, `tests.patch`, the hidden tests with their mutation
  twins and canaries under names drawn there at run time (`tests/plan.json`), run as an unprivileged user; a root process reads their outcome stream and, after they have ended, writes 1 to
  /logs/verifier/reward.txt only when every FAIL_TO_PASS and PASS_TO_PASS test passes and nothing was forged
  (details in /logs/verifier/sweserve.json).
- `solution/solve.sh` applies the oracle patch (Harbor's `oracle` agent runs it).

This module writes files only; building the task image is the caller's job (see `sweserve export`).
"""

from __future__ import annotations

import shutil
from pathlib import Path

import tomli_w

from sweserve.dataset.in_image import HARNESS, VERIFY_COMMAND, harness_files
from sweserve.dataset.patches import apply_command
from sweserve.dataset.profiles import RepoProfile
from sweserve.models import TaskBundle

ARTIFACT_PATCH = "/logs/artifacts/model.patch"
VERIFIER_DIR = "/logs/verifier"

TEST_SH = f"""#!/bin/bash
# sweserve's grading of the agent's diff (sweserve_verify.py, as `sweserve run` grades): the harness goes to
# {HARNESS}, root's alone; the verifier writes {VERIFIER_DIR}/reward.txt (1 = resolved, 0 = not) after the
# tests' process has ended, from their outcome stream.
mkdir -p {VERIFIER_DIR}
echo 0 > {VERIFIER_DIR}/reward.txt
rm -rf {HARNESS} && mkdir -p {HARNESS} && cp -r /tests/. {HARNESS}/ && rm -f {HARNESS}/test.sh
exec {VERIFY_COMMAND}
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


def _write(path: Path, text: str, executable: bool = False) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    if executable:
        path.chmod(0o755)


def export_harbor_task(bundle: TaskBundle, profile: RepoProfile, image_tag: str, out_dir: Path,
                       plan: str | None = None) -> Path:
    """Write one Harbor task folder, <out_dir>/<task_id>/, replacing an older export of it. `plan`: the grading
    plan its verifier plants (evaluation/export_plan.py); without one, plain canaries."""
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
    for name, text in harness_files(bundle, profile, "harbor", ARTIFACT_PATCH, plan, verifier_dir=VERIFIER_DIR,
                                    private=["/tests", "/logs/artifacts"]).items():
        _write(tests / name, text)
    _write(dest / "solution" / "solve.sh", SOLVE_SH, executable=True)
    _write(dest / "solution" / "oracle.patch", bundle.oracle_patch)
    return dest
