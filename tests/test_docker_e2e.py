"""End to end against a real Docker daemon: the demo's tasks built, validated, run, graded and resumed."""

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from sweserve.agents.command import CommandAgent
from sweserve.agents.reference import NullAgent, OracleAgent
from sweserve.dataset.image_spec import env_spec
from sweserve.dataset.project import Project
from sweserve.dataset.taskstore import load_all, load_bundle, save_bundle
from sweserve.demo import files
from sweserve.demo.fixture import PROFILE
from sweserve.environment.docker_host import DockerHost
from sweserve.environment.docker_sandbox import LABEL, gc, labels
from sweserve.evaluation.context import Context
from sweserve.evaluation.evaluate import run_evaluation
from sweserve.evaluation.grading import PatchError, apply_patch
from sweserve.evaluation.results import read_results
from sweserve.evaluation.trial import evaluate_task
from sweserve.models import FAMILIES
from sweserve.reporting.summary import build_reports

pytestmark = pytest.mark.docker
DIST = "sweserve-demo__sglang-mini-103"  # the merge-commit PR
QUANT = "sweserve-demo__sglang-mini-105"


def cli(*args, cwd, **kw):
    return subprocess.run([sys.executable, "-m", "sweserve.cli", *args], cwd=cwd, capture_output=True, text=True, **kw)


def test_demo_tasks_validate_with_one_fail_to_pass_each(demo):
    assert [o.status for o in demo.outcomes] == ["valid"] * 6, [o.reason for o in demo.outcomes]
    assert {o.family for o in demo.outcomes} == set(FAMILIES)
    for b in load_all(demo.tasks):
        assert len(b.task.FAIL_TO_PASS) == 1 and b.task.PASS_TO_PASS
        assert b.task.validation.runs == 2 and b.task.validation.flaky == []
        assert b.task.validation.before[b.task.FAIL_TO_PASS[0]] in ("failed", "error")


@pytest.mark.slow
def test_oracle_resolves_all_and_null_none(demo, tmp_path):
    bundles = load_all(demo.tasks)
    for agent, expected in ((OracleAgent(), "resolved"), (NullAgent(), "failed")):
        out = tmp_path / f"{agent.name}.jsonl"
        run_evaluation(demo.ctx, bundles, agent, out, workers=2)  # parallel workers share one network
        results = read_results(out)
        assert [r.status for r in results] == [expected] * 6, [r.reason for r in results]
        (rep,) = build_reports(results)
        assert rep.overall.pass_at_1 == (1.0 if expected == "resolved" else 0.0)
        assert set(rep.families) == set(FAMILIES)
        assert run_evaluation(demo.ctx, bundles, agent, out) == []  # a re-run skips finished tasks
    oracle = read_results(tmp_path / "oracle.jsonl")
    assert all(r.model_patch and r.tests.fail_to_pass for r in oracle)
    for r in oracle:  # a folder per trial: result, submission and the full test output
        folder = Path(r.trial_dir)
        assert folder == tmp_path / "runs" / r.run_id / "oracle" / r.task_id / "1"
        assert (folder / "submission.patch").read_text() == r.model_patch
        assert "passed" in (folder / "tests.log").read_text()
        saved = json.loads((folder / "outcomes.json").read_text())["outcomes"]  # what `report --regrade` reads
        assert all(saved[t] == "passed" for t in r.tests.fail_to_pass)
        assert (folder / "result.json").read_text().strip() == r.model_dump_json(indent=2)


def test_sandbox_has_no_future_history_and_no_hidden_files(demo):
    b = demo.bundle(DIST)
    image = demo.ctx.task_image(b)
    ancestors = subprocess.run(["git", "rev-list", b.task.base_commit], cwd=demo.repo, capture_output=True,
                               text=True, check=True).stdout.split()
    f2p_name = b.task.FAIL_TO_PASS[0].split("::")[1]
    with demo.ctx.sandbox(image, b.task.task_id, "candidate", b.task.resources, []) as box:
        def sh(cmd):
            res = box.exec(cmd, 60)
            return res.exit_code, res.output.strip()

        assert sh("git rev-parse HEAD") == (0, b.task.base_commit)
        assert sh("git for-each-ref --format='%(refname)'") == (0, "refs/heads/main")
        code, out = sh("git rev-list --all --reflog")
        assert code == 0 and sorted(out.split()) == sorted(ancestors)
        assert sh(f"git cat-file -e {b.task.merge_commit}")[0] != 0
        assert sh("git fsck --unreachable --no-reflogs --no-progress 2>&1") == (0, "")
        assert sh("git reflog --all | wc -l") == (0, "0")
        assert sh("git status --porcelain") == (0, "")
        assert sh("test -e /sweserve")[0] != 0
        assert sh(f"grep -rI {f2p_name} / --exclude-dir=proc --exclude-dir=sys -l 2>/dev/null")[1] == ""
        assert sh("ls .git/FETCH_HEAD .git/ORIG_HEAD 2>/dev/null")[1] == ""
        code, packed = sh("grep -v '^#' .git/packed-refs")
        assert packed.split() == [b.task.base_commit, "refs/heads/main"]
        container = box.container
        container.reload()
        assert container.labels[f"{LABEL}.run"] == demo.ctx.host.run_id and container.labels[f"{LABEL}.role"] == "candidate"
        (net,) = container.attrs["NetworkSettings"]["Networks"]
        assert demo.ctx.host.client.networks.get(net).attrs["Internal"] is True
        assert container.attrs["HostConfig"]["Memory"] == 4096 * 1024 * 1024


def test_command_agent_is_graded_and_cannot_pass_by_editing_tests(demo, tmp_path):
    b = demo.bundle(DIST)
    path = "python/sglang/srt/distributed/parallel_state.py"
    fixer = CommandAgent(
        f'test -s "$SWESERVE_INSTRUCTION" && grep -q shard_range "$SWESERVE_INSTRUCTION" && '
        f"cat > {path} <<'EOF'\n{files.PR_DISTRIBUTED[path]}EOF\n", name="fixer")
    r = evaluate_task(demo.ctx, b, fixer)
    assert r.status == "resolved" and r.agent_run.exit_code == 0 and path in r.model_patch
    cheat = CommandAgent(
        "printf 'def test_uneven_split_covers_everything():\\n    pass\\n\\ndef test_even_split():\\n    pass\\n'"
        " > test/srt/test_parallel_state.py && echo 'def test_x(): pass' > test/srt/conftest.py", name="cheat")
    r = evaluate_task(demo.ctx, b, cheat)
    assert r.status == "failed", r
    assert "test/srt/test_parallel_state.py" in r.reason and "test/srt/conftest.py" in r.reason
    assert r.tests.fail_to_pass == {b.task.FAIL_TO_PASS[0]: "failed"}
    slow = CommandAgent("sleep 30", name="slow")
    quick = b.model_copy(deep=True)
    quick.task.resources.timeout_s = 2
    t0 = time.monotonic()
    r = evaluate_task(demo.ctx, quick, slow)
    assert r.status == "failed" and r.agent_run.exit_code == 137 and r.agent_run.exit_reason == "timed_out" and time.monotonic() - t0 < 25


def test_bad_patch_is_reported(demo):
    b = demo.bundle(QUANT)
    with demo.ctx.sandbox(demo.ctx.task_image(b), b.task.task_id, "grade", b.task.resources, []) as box:
        with pytest.raises(PatchError, match="README.md: patch does not apply"):
            apply_patch(box, "diff --git a/README.md b/README.md\n--- a/README.md\n+++ b/README.md\n"
                             "@@ -1 +1 @@\n-nope\n+yes\n", "candidate")
        with pytest.raises(PatchError, match="x: No such file"):
            apply_patch(box, "diff --git a/x b/x\n--- a/x\n+++ b/x\n@@ -1 +1 @@\n-nope\n+yes\n", "candidate")


def test_gpu_task_is_skipped_or_errors_never_graded(demo):
    b = demo.bundle(QUANT).model_copy(deep=True)
    b.task.resources.gpus = 1
    r = evaluate_task(demo.ctx, b, OracleAgent())
    assert (r.status, r.reason) == ("skipped", "needs 1 GPUs (host has 0)")
    # a host that claims a GPU but has no NVIDIA runtime: docker refuses the device request
    fake = Context(DockerHost(client=demo.ctx.host.client, builder=demo.ctx.host.builder, run_id=demo.ctx.run_id,
                              host_gpus=["0"]), Project(demo.ctx.state_dir, repo_path=demo.repo))
    r = evaluate_task(fake, b, OracleAgent())
    assert r.status == "error" and "gpu" in r.reason.lower(), r.reason
    assert demo.ctx.host.client.containers.list(all=True, ignore_removed=True, filters={"label": [f"{LABEL}.task={QUANT}", f"{LABEL}.run={demo.ctx.run_id}"]}) == []


@pytest.mark.slow
def test_validate_cli_fails_when_an_oracle_breaks(demo, tmp_path):
    tasks = tmp_path / "tasks"
    shutil.copytree(demo.tasks / DIST, tasks / DIST)
    wrong = (demo.tasks / QUANT / "oracle.patch").read_text()
    (tasks / DIST / "oracle.patch").write_text(wrong)
    common = ["--tasks", str(tasks), "--state-dir", str(demo.root / "state"), "--repo-path", str(demo.repo)]
    proc = cli("validate", "--runs", "1", *common, cwd=tmp_path)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    task = load_bundle(tasks / DIST).task
    assert task.validation.status == "rejected" and "oracle no longer passes" in task.validation.reason
    # as a fresh candidate (nothing recorded yet) the same oracle yields no FAIL_TO_PASS
    bundle = load_bundle(tasks / DIST)
    bundle.task.FAIL_TO_PASS, bundle.task.PASS_TO_PASS, bundle.task.validation = [], [], None
    save_bundle(tasks, bundle)
    proc = cli("validate", "--runs", "1", *common, cwd=tmp_path)
    assert proc.returncode == 1
    task = load_bundle(tasks / DIST).task
    assert task.validation.status == "rejected" and task.validation.reason.startswith("no FAIL_TO_PASS")
    proc = cli("run", "--agent", "oracle", "--output", str(tmp_path / "r.jsonl"), *common, cwd=tmp_path)
    assert proc.returncode == 2 and "no ready task to run" in proc.stderr  # only ready tasks, unless asked
    proc = cli("run", "--agent", "oracle", "--output", str(tmp_path / "r.jsonl"), "--include-unready", *common,
               cwd=tmp_path)
    assert proc.returncode == 0
    (r,) = read_results(tmp_path / "r.jsonl")
    assert r.status == "skipped" and "not validated" in r.reason and r.task_ready is False


@pytest.mark.slow
def test_killed_run_resumes_without_loss_or_duplicates(demo, tmp_path):
    out = tmp_path / "slow.jsonl"
    args = [sys.executable, "-m", "sweserve.cli", "run", "--agent", "sleep 2", "--agent-name", "slow",
            "--tasks", str(demo.tasks), "--state-dir", str(demo.root / "state"), "--repo-path", str(demo.repo),
            "--output", str(out)]
    proc = subprocess.Popen(args, cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True)
    deadline = time.monotonic() + 240
    while time.monotonic() < deadline and (not out.exists() or len(out.read_text().splitlines()) < 2):
        time.sleep(0.2)
    time.sleep(1.5)  # kill it while the next task is in flight
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    first = read_results(out)
    assert 2 <= len(first) < 6
    left = demo.ctx.host.client.containers.list(all=True, filters={"label": f"{LABEL}.owner"}, ignore_removed=True)
    stale = [c for c in left if c.labels[f"{LABEL}.owner"].endswith(f":{proc.pid}")]
    done = cli(*args[3:], cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    results = read_results(out)
    assert sorted(r.task_id for r in results) == sorted(b.task.task_id for b in load_all(demo.tasks))
    assert [r.model_dump() for r in results[:len(first)]] == [r.model_dump() for r in first]
    assert all(r.status == "failed" for r in results)
    for c in stale:  # the dead run's containers were reaped by the next start
        with pytest.raises(Exception):
            c.reload()


def test_gc_reaps_only_dead_owners(demo):
    dead = subprocess.Popen(["true"])
    dead.wait()
    mine_labels = labels("gc-test", "t", "candidate")
    dead_labels = {**mine_labels, f"{LABEL}.owner": mine_labels[f"{LABEL}.owner"].rsplit(":", 1)[0] + f":{dead.pid}"}
    image = demo.ctx.task_image(demo.bundle(QUANT))
    client = demo.ctx.host.client
    live = client.containers.run(image, ["sleep", "infinity"], detach=True, labels=mine_labels)
    orphan = client.containers.run(image, ["sleep", "infinity"], detach=True, labels=dead_labels)
    try:
        removed = gc(client)
        assert orphan.name in removed and live.name not in removed
        live.reload()
        assert gc(client, run_id="gc-test") == [live.name]
    finally:
        for c in (live, orphan):
            try:
                c.remove(force=True)
            except Exception:
                pass


def test_images_are_cached_and_layered(demo):
    b1, b2 = demo.bundle(DIST), demo.bundle(QUANT)
    t0 = time.monotonic()
    tag1, tag2 = demo.ctx.task_image(b1), demo.ctx.task_image(b2)
    assert time.monotonic() - t0 < 5
    client = demo.ctx.host.client
    env_tag = demo.ctx.host.builder.env(env_spec(demo.ctx.profile(PROFILE)))
    env_layers = client.images.get(env_tag).attrs["RootFS"]["Layers"]
    for tag in (tag1, tag2):
        assert client.images.get(tag).attrs["RootFS"]["Layers"][:len(env_layers)] == env_layers
    assert json.loads(json.dumps(client.images.get(tag1).labels))["sweserve.base_commit"] == b1.task.base_commit


def interrupt(proc: subprocess.Popen, timeout: float) -> str:
    """Ctrl-C to a `sweserve` process started with PYTHONFAULTHANDLER=1, and what it printed; one still running
    `timeout` seconds later is aborted, and the test fails with every thread's stack (where it hung)."""
    proc.send_signal(signal.SIGINT)
    try:
        return proc.communicate(timeout=timeout)[0]
    except subprocess.TimeoutExpired:
        proc.send_signal(signal.SIGABRT)  # faulthandler prints each thread's traceback
        out = proc.communicate(timeout=30)[0]
        pytest.fail(f"still running {timeout} s after Ctrl-C:\n{out[-12000:]}")


def test_ctrl_c_leaves_no_container_behind(demo, tmp_path):
    args = [sys.executable, "-m", "sweserve.cli", "run", "--agent", "sleep 60", "--agent-name", "interrupted",
            "--tasks", str(demo.tasks), "--state-dir", str(demo.root / "state"), "--repo-path", str(demo.repo),
            "--output", str(tmp_path / "i.jsonl"), "--workers", "2"]
    proc = subprocess.Popen(args, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            env=dict(os.environ, PYTHONFAULTHANDLER="1"))
    client = demo.ctx.host.client
    owner = {"label": f"{LABEL}.owner={labels('x', 'x', 'x')[f'{LABEL}.owner'].rsplit(':', 1)[0]}:{proc.pid}"}

    def candidates():  # each trial's grade sandbox starts beside its candidate's, while the candidate works
        return [c for c in client.containers.list(ignore_removed=True, filters=owner) if c.labels.get(f"{LABEL}.role") == "candidate"]

    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and len(candidates()) < 2:
        time.sleep(0.2)
    assert len(candidates()) == 2 and len(client.containers.list(ignore_removed=True, filters=owner)) <= 4
    out = interrupt(proc, 60)
    assert proc.returncode == 130, out
    assert "Traceback" not in out and "interrupted" in out
    assert client.containers.list(all=True, ignore_removed=True, filters=owner) == []
    assert read_results(tmp_path / "i.jsonl") == []


def test_a_discarded_sandbox_is_gone_once_the_host_settles(demo):
    """A trial's grade sandbox is removed in the background once graded; settling (what evaluate_task,
    run_evaluation and closing the host do) waits until it is gone, so no run leaves a container behind."""
    b = demo.bundle(QUANT)
    box = demo.ctx.sandbox(demo.ctx.task_image(b), b.task.task_id, "grade", b.task.resources, [])
    name = box.name
    box.start_background(["sleep", "600"])
    demo.ctx.discard(box)
    demo.ctx.settle()
    assert demo.ctx.host.client.containers.list(all=True, ignore_removed=True, filters={"name": name}) == []


def test_candidate_limits_and_process_tree_kill(demo):
    b = demo.bundle(QUANT).model_copy(deep=True)
    b.task.resources.timeout_s = 3
    probe = CommandAgent(
        "cat /sys/fs/cgroup/pids.max /sys/fs/cgroup/pids/pids.max 2>/dev/null; nproc; "
        "setsid sleep 600 & (sleep 500 &) ; sleep 120", name="probe")
    t0 = time.monotonic()
    r = evaluate_task(demo.ctx, b, probe)
    assert time.monotonic() - t0 < 40 and r.agent_run.exit_reason == "timed_out"
    assert "4096" in r.agent_run.log_tail
    leftovers = demo.ctx.host.client.containers.list(all=True, ignore_removed=True, filters={"label": [f"{LABEL}.task={QUANT}", f"{LABEL}.run={demo.ctx.run_id}"]})
    assert leftovers == []  # the sandbox, and every process in it, is gone
