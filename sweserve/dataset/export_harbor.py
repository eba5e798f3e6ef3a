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
from pathlib import Path

from sweserve.dataset.in_image import harness_sources, hidden_test_command
from sweserve.dataset.profiles import RepoProfile
from sweserve.models import TaskBundle

PATCHES_MODULE = Path(__file__).resolve().parent / "patches.py"
ARTIFACT_PATCH = "/logs/artifacts/model.patch"
GRADE_PY = "sweserve_grade.py"

TEST_SH = f"""#!/bin/bash
# sweserve's grading of the agent's diff: writes /logs/verifier/reward.txt (1 = resolved, 0 = not).
mkdir -p /logs/verifier
echo 0 > /logs/verifier/reward.txt
exec /usr/bin/python3 -I /tests/{GRADE_PY}
"""

SOLVE_SH = """#!/bin/bash
# The oracle: the merged PR's non-test changes.
set -euo pipefail
cd /testbed
git apply --binary --whitespace=nowarn /solution/oracle.patch
"""

GRADE = r'''"""Grade the agent's diff as `sweserve run` does; config in config.json beside this file."""
import fnmatch
import json
import os
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, "/tests")
from sweserve_patches import drop_paths, touched_paths  # noqa: E402

HERE = Path("/tests")
VERIFIER = Path("/logs/verifier")
OUTCOMES = "/tmp/sweserve-outcomes.json"


def git(*args, check=True):
    proc = subprocess.run(["git", *args], cwd="/testbed", capture_output=True, text=True)
    if check and proc.returncode != 0:
        raise RuntimeError(f"git {args[0]}: {proc.stderr.strip()}")
    return proc


def finish(status, reason=None, **extra):
    resolved = status == "resolved"
    (VERIFIER / "sweserve.json").write_text(json.dumps({"status": status, "reason": reason, **extra}, indent=2))
    (VERIFIER / "reward.txt").write_text("1\n" if resolved else "0\n")
    print(f"sweserve: {status}" + (f" ({reason})" if reason else ""))
    sys.exit(0)


def main():
    cfg = json.loads((HERE / "config.json").read_text())
    patch_file = Path(cfg["artifact_patch"])
    patch = patch_file.read_text(encoding="utf-8", errors="surrogateescape") if patch_file.exists() else ""
    hidden = touched_paths((HERE / "tests.patch").read_text(encoding="utf-8"))
    test_files = set(cfg["test_files"])

    def is_test(path):
        return path in hidden or path in test_files or any(fnmatch.fnmatchcase(path, g) for g in cfg["test_paths"])

    git("reset", "-q", "--hard", cfg["base_commit"])
    git("clean", "-qfd")
    kept, dropped = drop_paths(patch, is_test)
    if kept.strip():
        Path("/tmp/sweserve-model.patch").write_text(kept, encoding="utf-8", errors="surrogateescape")
        proc = git("apply", "--binary", "--whitespace=nowarn", "/tmp/sweserve-model.patch", check=False)
        if proc.returncode != 0:
            finish("patch_failed", proc.stderr.strip()[-1000:], dropped_test_edits=dropped)
    proc = git("apply", "--binary", "--whitespace=nowarn", str(HERE / "tests.patch"), check=False)
    if proc.returncode != 0:
        finish("error", "tests.patch did not apply: " + proc.stderr.strip()[-1000:], dropped_test_edits=dropped)
    env = dict(os.environ)
    env.update(cfg["env"])
    env["PYTHONPATH"] = ":".join(p for p in (str(HERE), cfg["env"].get("PYTHONPATH", "")) if p)
    env["SWESERVE_OUTCOMES"] = OUTCOMES
    try:
        os.unlink(OUTCOMES)
    except FileNotFoundError:
        pass
    try:
        run = subprocess.run(cfg["command"], shell=True, cwd=cfg["workdir"], env=env, capture_output=True,
                             text=True, timeout=cfg["timeout_s"])
        output = run.stdout + run.stderr
    except subprocess.TimeoutExpired:
        finish("error", f"hidden tests timed out after {cfg['timeout_s']}s", dropped_test_edits=dropped)
    (VERIFIER / "test-output.txt").write_text(output)
    if not os.path.exists(OUTCOMES):
        finish("error", f"test runner exited {run.returncode} without outcomes", dropped_test_edits=dropped)
    outcomes = json.loads(Path(OUTCOMES).read_text())["outcomes"]
    f2p = {t: outcomes.get(t, "missing") for t in cfg["FAIL_TO_PASS"]}
    p2p = {t: outcomes.get(t, "missing") for t in cfg["PASS_TO_PASS"]}
    ok = all(o == "passed" for o in list(f2p.values()) + list(p2p.values()))
    finish("resolved" if ok else "failed", None, fail_to_pass=f2p, pass_to_pass=p2p, dropped_test_edits=dropped)


if __name__ == "__main__":
    main()
'''


def _toml_str(s: str) -> str:
    return json.dumps(s)  # a JSON string is a valid TOML basic string


def _toml_value(v) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (int, float)):
        return repr(v)
    if isinstance(v, list):
        return "[" + ", ".join(_toml_value(x) for x in v) + "]"
    return _toml_str(str(v))


def task_toml(bundle: TaskBundle, image_tag: str) -> str:
    task, res = bundle.task, bundle.task.resources
    base = task.base_commit
    collect = (f"mkdir -p /logs/artifacts && cd /testbed && git add -A && "
               f"git diff --cached --binary --full-index {base} > {ARTIFACT_PATCH}")
    meta = {"family": task.family, "repo": task.repo, "pr_number": task.pr_number, "base_commit": base,
            "profile": task.profile, "sweserve_image": image_tag, "gpu_memory_gb": res.gpu_memory_gb}
    if res.needs_accelerator:
        meta["needs_accelerator"] = res.needs_accelerator
    env_lines = [f"cpus = {_toml_value(res.cpus)}", f"memory_mb = {int(res.memory_gb * 1024)}"]
    if res.gpus:
        env_lines.append(f"gpus = {res.gpus}")
    lines = [
        'schema_version = "1.4"',
        "",
        "[task]",
        f"name = {_toml_str('sweserve/' + task.task_id.lower())}",
        f"description = {_toml_str(task.title)}",
        f"keywords = {_toml_value(['sweserve', task.family, task.repo])}",
        "",
        "[metadata]",
        *(f"{k} = {_toml_value(v)}" for k, v in meta.items()),
        "",
        "[agent]",
        f"timeout_sec = {float(res.timeout_s)}",
        "",
        "[verifier]",
        f"timeout_sec = {float(res.test_timeout_s + 300)}",
        'environment_mode = "separate"',
        "",
        "[[verifier.collect]]",
        f"command = {_toml_str(collect)}",
        "timeout_sec = 300.0",
        "",
        "[environment]",
        "build_timeout_sec = 600.0",
        *env_lines,
        'workdir = "/testbed"',
        "",
    ]
    return "\n".join(lines)


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
    _write(dest / "task.toml", task_toml(bundle, image_tag))
    _write(dest / "instruction.md", bundle.instruction.rstrip() + "\n")
    _write(dest / "environment" / "Dockerfile",
           f"# The sweserve task image: the repo at {task.base_commit[:12]} in /testbed, nothing of the hidden\n"
           f"# tests or the oracle. Built locally by `sweserve export --format harbor`; never pulled.\n"
           f"FROM {image_tag}\nWORKDIR /testbed\n")
    tests = dest / "tests"
    _write(tests / "test.sh", TEST_SH, executable=True)
    _write(tests / GRADE_PY, GRADE)
    _write(tests / "config.json", json.dumps(grade_config(bundle, profile), indent=2) + "\n")
    _write(tests / "tests.patch", bundle.tests_patch)
    _write(tests / "sweserve_patches.py", PATCHES_MODULE.read_text())
    for name, source in harness_sources().items():
        _write(tests / name, source)
    _write(dest / "solution" / "solve.sh", SOLVE_SH, executable=True)
    _write(dest / "solution" / "oracle.patch", bundle.oracle_patch)
    return dest
