"""Red team 15e: the Harbor export (`sweserve export --format harbor`), run by the real Harbor.

The attacker is the agent in Harbor's agent container (root there); Harbor's `oracle` agent runs each task
copy's `solution/solve.sh` as that agent. What Harbor does with a trial (settled by reading harbor 0.26's
trial/single_step.py, trial/trial.py, models/trial/error_policy.py and models/job/result.py):

- in `environment_mode = "separate"` the agent's container is stopped (`compose down`) after the collect hook
  and before the verifier's container starts; the two share one host folder, the trial's `verifier/`, mounted
  at /logs/verifier in both, which the verifier's container empties before test.sh runs. A daemon the agent
  leaves behind does not outlive its container (control below).
- a trial whose verifier ends in an exception (VerifierTimeoutError, ...) has no valid reward: Harbor leaves it
  out of the job's mean (`reward_valid` false; `n_trials` counts only valid rewards) and counts it as an
  error. An agent that cannot solve a task gains by turning its 0 into an error: the task drops out of the
  denominator.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess

import pytest
from test_export import DECODING, HARBOR, TASKS, cli, require_harbor

pytestmark = [pytest.mark.docker, pytest.mark.slow]

# R15e-1: python/pyproject.toml (in base) replaced by a link to /dev/ptmx. The in-box verifier, root, reads a
# changed pyproject.toml to see whether its pytest section changed (`config_changed`, following the link):
# reading a pty master nobody opened the other end of blocks for ever, before the tests' own time limit runs.
PTMX_SOLVE = """#!/bin/bash
cd /testbed
rm -f python/pyproject.toml && ln -s /dev/ptmx python/pyproject.toml
"""

# Control for question (1): a daemon left in the agent's container that keeps writing a reward of 1 into the
# folder the verifier's container shares. It dies with the agent's container, before the verifier starts.
DAEMON_SOLVE = """#!/bin/bash
cd /testbed
setsid nohup bash -c 'while :; do echo 1 > /logs/verifier/reward.txt; echo "{\\"reward\\": 1}" > /logs/verifier/reward.json; sleep 0.1; done' </dev/null >/dev/null 2>&1 &
"""

# R15e-2: model.patch is the agent's text, not a diff sweserve took (as `sweserve run` takes it, from the tree):
# the agent writes it before it ends and makes the collect hook's `git add -A` fail (a stale index.lock in the
# image's GIT_DIR), so the hook never overwrites it. The patch (~0.8 MB): a 32 MB file of "a" lines created by
# a binary literal (~0.2 MB), then a hunk on that file of 100k context lines around one line it lacks. `git
# apply` tries the hunk at every one of the 16M lines, comparing up to 50k lines at each (~8e11 compares,
# far past the export's own limit of test_timeout_s + 300 = 900 s; a patch of 345 KB already kept it over 100 s).
BOMB_SOLVE = """#!/bin/bash
cp /solution/bomb.patch /logs/artifacts/model.patch
touch "${GIT_DIR:-/testbed/.git}/index.lock"
"""
BOMB_LINES, BOMB_CONTEXT = 16_000_000, 50_000


def _apply_bomb(tmp) -> str:
    """A created file of BOMB_LINES lines as a git binary literal, then a hunk that matches nowhere in it."""
    work = tmp / "bomb"
    subprocess.run(["git", "init", "-q", str(work)], check=True)
    (work / "big.txt").write_text("a\n" * BOMB_LINES)
    (work / ".git" / "info" / "attributes").write_text("big.txt -diff\n")  # written as a binary literal
    subprocess.run(["git", "add", "big.txt"], cwd=work, check=True)
    literal = subprocess.run(["git", "diff", "--cached", "--binary", "--full-index"], cwd=work, check=True,
                             capture_output=True, text=True).stdout
    h, at = BOMB_CONTEXT, BOMB_LINES // 2
    hunk = (f"diff --git a/big.txt b/big.txt\n--- a/big.txt\n+++ b/big.txt\n@@ -{at},{2 * h + 1} +{at},{2 * h + 1} @@\n"
            + " a\n" * h + "-b\n+c\n" + " a\n" * h)
    return literal + hunk


SOLUTIONS = {"ptmx-pyproject": PTMX_SOLVE, "reward-daemon": DAEMON_SOLVE, "apply-bomb": BOMB_SOLVE}
# the honest verifier takes ~20 s on this task: a limit of 240 s (instead of the export's test_timeout_s + 300)
# only shortens how long the test waits for the hang; it changes nothing the verifier does
VERIFIER_TIMEOUT_S = 240


@pytest.fixture(scope="module")
def harbor_trials(docker_client, tmp_path_factory):
    """{task name: (result.json, sweserve.json or None)} of one `harbor run -a oracle` over the task copies."""
    require_harbor()
    from sweserve.demo.fixture import build_demo_repo

    root = tmp_path_factory.mktemp("rt15e")
    repo = build_demo_repo(root / "repo")
    export = root / "export"
    proc = cli("export", DECODING, "--format", "harbor", "--out", str(export), "--tasks", str(TASKS),
               "--repo-path", str(repo), "--state-dir", str(root / "state"))
    assert proc.returncode == 0, proc.stderr
    dataset = root / "dataset"
    for name, solve in SOLUTIONS.items():
        task = dataset / name
        shutil.copytree(export / DECODING, task)
        toml = task / "task.toml"
        text = toml.read_text().replace(f'name = "sweserve/{DECODING}"', f'name = "sweserve/{name}"')
        head, verifier = text.split("[verifier]\n", 1)
        assert verifier.startswith("timeout_sec = "), verifier
        verifier = f"timeout_sec = {float(VERIFIER_TIMEOUT_S)}" + verifier[verifier.index("\n"):]
        toml.write_text(f"{head}[verifier]\n{verifier}")
        (task / "solution" / "solve.sh").write_text(solve)
        if solve is BOMB_SOLVE:
            (task / "solution" / "bomb.patch").write_text(_apply_bomb(root))
    jobs = root / "jobs"
    env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    proc = subprocess.run([str(HARBOR), "run", "-p", str(dataset), "-a", "oracle", "-e", "docker", "-n", "2", "-y",
                           "-o", str(jobs)], capture_output=True, text=True, env=env, timeout=900)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    trials = {}
    for result in jobs.glob("*/*/result.json"):
        data = json.loads(result.read_text())
        verdict = result.parent / "verifier" / "sweserve.json"
        trials[data["task_name"].split("/", 1)[1]] = (data, json.loads(verdict.read_text()) if verdict.exists() else None)
    (job,) = [json.loads(p.read_text()) for p in jobs.glob("*/result.json")]
    return trials, job


def _summary(trial):
    data, verdict = trial
    return {"exception": (data.get("exception_info") or {}).get("exception_type"),
            "reward_valid": data.get("reward_valid"), "verifier_result": data.get("verifier_result"),
            "sweserve": verdict and {k: verdict.get(k) for k in ("status", "reason", "resets")}}


def test_r15e_1_a_pyproject_linked_to_a_pty_does_not_hang_the_verifier_into_an_excluded_trial(harbor_trials):
    """R15e-1. A submission that links python/pyproject.toml to /dev/ptmx hung sweserve_verify.py as root in
    `config_changed` (open().read() through the link) until Harbor's verifier limit: VerifierTimeoutError, no
    reward, and Harbor leaves the trial out of the job's mean (a failed task turned into an excluded error).
    Defended: the verifier ends with its own verdict, reward 0, and the trial counts."""
    trials, job = harbor_trials
    trial = trials["ptmx-pyproject"]
    data, verdict = trial
    assert data.get("exception_info") is None, _summary(trial)
    assert data["reward_valid"] and data["verifier_result"]["rewards"]["reward"] == 0.0, _summary(trial)
    assert verdict is not None and verdict["status"] != "resolved", _summary(trial)


def test_r15e_2_a_patch_git_apply_takes_hours_over_does_not_hang_the_verifier_into_an_excluded_trial(harbor_trials):
    """R15e-2. The agent's own model.patch (the collect hook made to fail before it overwrites it): a sub-MB
    patch `git apply --index` spends far longer on than Harbor's verifier limit. sweserve_verify.py runs it with
    no limit: VerifierTimeoutError, no reward, the trial left out of the job's mean. Defended: a verdict
    (`patch_failed` or `error`) with reward 0 that counts."""
    trials, _ = harbor_trials
    trial = trials["apply-bomb"]
    data, verdict = trial
    assert data.get("exception_info") is None, _summary(trial)
    assert data["reward_valid"] and data["verifier_result"]["rewards"]["reward"] == 0.0, _summary(trial)
    assert verdict is not None and verdict["status"] != "resolved", _summary(trial)


def test_r15e_control_a_daemon_left_in_the_agent_container_cannot_write_the_reward(harbor_trials):
    """Control, question (1): the agent's container is stopped before the verifier's starts, and the shared
    /logs/verifier is emptied first: a daemon rewriting reward.txt/reward.json to 1 changes nothing."""
    trials, _ = harbor_trials
    trial = trials["reward-daemon"]
    data, verdict = trial
    assert data.get("exception_info") is None and data["reward_valid"], _summary(trial)
    assert data["verifier_result"]["rewards"] == {"reward": 0.0}, _summary(trial)
    assert verdict["status"] == "failed", _summary(trial)
