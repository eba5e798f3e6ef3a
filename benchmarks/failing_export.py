"""How long `sweserve validate` takes to report a task whose repository export fails, and whether it built an
image first (issue 18's target: under 10 s, no image).

The demo repository is mined; one task is given a dependency no env image has (so reusing a cached image
cannot hide a build) and its clone loses the object of a hidden test file. `sweserve validate` of that task
must end with an `error` of kind git naming the file, before any image is built.

Run: .venv/bin/python benchmarks/failing_export.py   (needs Docker; about 10 s)
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from sweserve.dataset.profiles import load_profile
from sweserve.dataset.taskstore import load_task, save_task
from sweserve.demo.fixture import PROFILE, REPO, build_demo_repo
from sweserve.environment.docker_host import docker_client
from sweserve.environment.images import env_image_tag, read_ca_bundle

TARGET_S = 10.0


def main() -> int:
    client = docker_client()
    with tempfile.TemporaryDirectory(prefix="sweserve-bench-") as tmp:
        root = Path(tmp)
        repo = build_demo_repo(root / "repo")
        common = ["--tasks", str(root / "tasks"), "--state-dir", str(root / "state")]
        subprocess.run([sys.executable, "-m", "sweserve.cli", "mine", "--repo", str(repo), "--profile", PROFILE,
                        *common], check=True, capture_output=True)
        task_id = REPO.replace("/", "__") + "-106"
        task = load_task(root / "tasks" / task_id)
        task.dependencies = [f"sweserve-never-built-{int(time.time())}==0.0.1"]
        save_task(root / "tasks" / task_id, task)
        blob = subprocess.run(["git", "rev-parse", f"{task.base_commit}:test/srt/test_radix_cache.py"], cwd=repo,
                              check=True, capture_output=True, text=True).stdout.strip()
        (repo / ".git" / "objects" / blob[:2] / blob[2:]).unlink()
        before = {img.id for img in client.images.list()}
        started = time.monotonic()
        proc = subprocess.run([sys.executable, "-m", "sweserve.cli", "validate", "--runs", "1", "--repo-path",
                               str(repo), task_id, "--json", str(root / "v.json"), *common], capture_output=True,
                              text=True)
        took = time.monotonic() - started
        (outcome,) = json.loads((root / "v.json").read_text())
        env_tag = env_image_tag(load_profile(PROFILE), read_ca_bundle(None), task.dependencies)
        built = client.images.list(name=env_tag) or [i for i in client.images.list() if i.id not in before
                                                    and any(task_id in t for t in i.tags)]
    print(f"validate exit {proc.returncode}, outcome {outcome['status']} ({outcome['error_kind']}): "
          f"{outcome['reason'][:160]}…")
    print(f"failing export reported in {took:.1f} s (target {TARGET_S:.0f} s): ratio {took / TARGET_S:.2f}; "
          f"images built: {len(built)}")
    return 0 if took < TARGET_S and not built and outcome["error_kind"] == "git" else 1


if __name__ == "__main__":
    sys.exit(main())
