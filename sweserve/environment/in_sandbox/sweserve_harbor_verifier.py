"""Harbor verifier for an exported sweserve task: grades the agent's diff as `sweserve run` does.

Copied into the task's tests/ folder by `sweserve export --format harbor` (dataset/export_harbor.py) and run
by tests/test.sh with the system Python (stdlib only) in a fresh container of the task image. Reads
tests/config.json; the agent's diff is the artifact a collect hook saved in the agent's container.
"""
import fnmatch
import json
import os
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, "/tests")
from sweserve_patches import APPLY, drop_paths, is_interpreter_hook, touched_paths  # noqa: E402

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
        return (path in hidden or path in test_files or is_interpreter_hook(path)
                or any(fnmatch.fnmatchcase(path, g) for g in cfg["test_paths"]))

    git("reset", "-q", "--hard", cfg["base_commit"])
    git("clean", "-qfd")
    kept, dropped = drop_paths(patch, is_test)
    if kept.strip():
        Path("/tmp/sweserve-model.patch").write_text(kept, encoding="utf-8", errors="surrogateescape")
        proc = git(*APPLY[1:], "/tmp/sweserve-model.patch", check=False)
        if proc.returncode != 0:
            finish("patch_failed", proc.stderr.strip()[-1000:], dropped_test_edits=dropped)
    proc = git(*APPLY[1:], str(HERE / "tests.patch"), check=False)
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
