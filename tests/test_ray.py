"""The Ray executor on a real local Ray cluster: a head and a GPU-declaring node as separate processes.

Real Docker sandboxes run the demo tasks on both nodes. There is no GPU on this machine, so Docker's device
request is the one boundary stubbed: a worker setup hook replaces it with a recorder of the ids it was given
(and of the node it ran on), so the test sees exactly which GPU ids reached Docker.
"""

import json
import os
import subprocess
import sys
import threading
import time
from types import SimpleNamespace

import pytest

from sweserve.agents.command import CommandAgent
from sweserve.agents.reference import NullAgent, OracleAgent
from sweserve.dataset.taskstore import load_all, save_bundle
from sweserve.environment.docker_sandbox import LABEL
from sweserve.evaluation.context import Context
from sweserve.evaluation.evaluate import run_evaluation
from sweserve.evaluation.ray_executor import RayExecutor, ray_options, unschedulable
from sweserve.evaluation.results import read_results
from sweserve.evaluation.validation import validate_all
from sweserve.models import Resources
from tests.test_docker_e2e import interrupt

DIST = "sweserve-demo__sglang-mini-103"
QUANT = "sweserve-demo__sglang-mini-105"
MB = 1_000_000


def test_ray_options_ask_for_what_the_task_needs():
    opts = ray_options(Resources(gpus=2, cpus=8, memory_gb=32))
    assert opts == {"num_cpus": 8, "num_gpus": 2, "memory": 32 * 2**30, "max_retries": 0}
    assert ray_options(Resources(gpus=2, cpus=8, memory_gb=32, hardware="h100"))["resources"] == {"h100": 2}
    assert ray_options(Resources(gpus=0, cpus=1, memory_gb=1, hardware="tpu-v5e"))["resources"] == {"tpu-v5e": 0.01}


def test_a_task_no_node_can_run_is_skipped_with_the_local_wording():
    gb = 2**30
    nodes = [{"CPU": 2, "memory": 8 * gb}, {"CPU": 4, "GPU": 2, "h100": 2, "memory": 16 * gb}]
    assert unschedulable(Resources(gpus=2, hardware="h100"), nodes) is None
    assert unschedulable(Resources(cpus=4, memory_gb=16), nodes) is None
    assert unschedulable(Resources(gpus=1, hardware="h200"), nodes) == \
        "needs h200 hardware (no node of the cluster declares it)"
    assert unschedulable(Resources(gpus=8), nodes) == "needs 8 GPUs (the cluster's largest node has 2)"
    cpu_only = [{"CPU": 8, "memory": 64 * gb}]
    assert unschedulable(Resources(gpus=1), cpu_only) == "needs 1 GPUs (the cluster's largest node has 0)"
    assert unschedulable(Resources(cpus=6), nodes) == "needs 6 CPUs (the cluster's largest node has 4)"
    assert unschedulable(Resources(memory_gb=32), nodes).startswith("needs 32 GB of memory")
    # enough GPUs on one node and enough CPUs on another is not enough: one node must hold all of it
    assert unschedulable(Resources(gpus=1, cpus=3, memory_gb=12), [{"CPU": 4, "memory": 16 * gb}, {"GPU": 1, "CPU": 1,
                         "memory": 16 * gb}]).startswith("needs 1 GPUs, 3 CPUs and 12 GB on one node")


def _recording_hook(record: str):
    """A worker setup hook: each sandbox's start becomes a line in `record` (the GPU ids it asks Docker for, node,
    CUDA_VISIBLE_DEVICES)."""
    def hook():
        import ray

        from sweserve.environment import docker_sandbox

        original = docker_sandbox.run_kwargs

        def run_kwargs(resources, gpu_ids, host_cpus):  # every sandbox a worker starts, and the GPUs it asks for
            line = {"ids": list(gpu_ids), "node": ray.get_runtime_context().get_node_id(),
                    "cuda": os.environ.get("CUDA_VISIBLE_DEVICES"), "pid": os.getpid()}
            with open(record, "a") as f:
                f.write(json.dumps(line) + "\n")
            return original(resources, gpu_ids, host_cpus)

        docker_sandbox.run_kwargs = run_kwargs
        docker_sandbox.device_requests = lambda ids: []  # no GPU here: Docker is asked for none
    return hook


@pytest.fixture(scope="module")
def cluster(docker_client, tmp_path_factory):
    """A head (2 logical CPUs) and a node declaring 2 GPUs of class h100, each its own set of processes."""
    try:
        import ray
    except ImportError:
        if os.environ.get("SWESERVE_REQUIRE_DOCKER") == "1":
            pytest.fail("SWESERVE_REQUIRE_DOCKER=1 but ray is not installed (pip install -e '.[test]')")
        pytest.skip("ray is not installed (pip install -e '.[test]')")
    from ray.cluster_utils import Cluster

    record = tmp_path_factory.mktemp("ray") / "device_requests.jsonl"
    record.touch()
    # logical CPUs: a demo task asks for 2; the machine's real cores are shared anyway
    # a killed node is declared dead after 10-25 s instead of Ray's default 30-60 s: the lost-node test waits for
    # it. Not sooner: on two loaded cores a live node that misses a few 2 s checks in a row would be declared dead
    c = Cluster(initialize_head=True, head_node_args={
        "num_cpus": 2, "num_gpus": 0, "object_store_memory": 200 * MB, "include_dashboard": False,
        "_system_config": {"health_check_period_ms": 2000, "health_check_timeout_ms": 5000,
                           "health_check_failure_threshold": 5}})
    gpu_node = c.add_node(num_cpus=2, num_gpus=2, resources={"h100": 2}, object_store_memory=200 * MB)
    ray.init(address=c.address, runtime_env={"worker_process_setup_hook": _recording_hook(str(record))},
             logging_level="WARNING", log_to_driver=False)
    yield SimpleNamespace(cluster=c, address=c.address, gpu_node=gpu_node, head=c.head_node, record=record)
    ray.shutdown()
    c.shutdown()


def _records(cluster, since=0):
    return [json.loads(x) for x in cluster.record.read_text().splitlines()[since:]]


def _run_containers(client, run_id):
    return client.containers.list(all=True, ignore_removed=True, filters={"label": f"{LABEL}.run={run_id}"})



@pytest.mark.docker
@pytest.mark.slow
def test_runs_on_both_nodes_driver_writes_results_and_resume_is_a_no_op(demo, cluster, tmp_path):
    ctx = Context.create(demo.root / "state", repo_path=demo.repo)
    out = tmp_path / "results.jsonl"
    bundles = load_all(demo.tasks)
    since = len(_records(cluster))
    results = run_evaluation(ctx, bundles, OracleAgent(), out, executor=RayExecutor(ctx))
    assert sorted(r.status for r in results) == ["resolved"] * len(bundles), [(r.task_id, r.reason) for r in results]
    assert [r.model_dump() for r in read_results(out)] == [r.model_dump() for r in results]
    for r in results:  # each trial's folder is where the driver says, written from what the worker shipped back
        folder = tmp_path / "runs" / ctx.run_id / "oracle" / r.task_id / "1"
        assert r.trial_dir == str(folder)
        assert json.loads((folder / "result.json").read_text())["trial_dir"] == str(folder)
        assert "passed" in (folder / "tests.log").read_text()
    nodes = {x["node"] for x in _records(cluster, since)}
    assert nodes == {cluster.head.node_id, cluster.gpu_node.node_id}, "CPU tasks run on both nodes"
    assert all(x["ids"] == [] for x in _records(cluster, since)), "a CPU task asks Docker for no GPU"
    assert _run_containers(demo.ctx.host.client, ctx.run_id) == []
    # resuming from the results file: nothing left to do, nothing written twice
    again = run_evaluation(ctx, bundles, OracleAgent(), out, executor=RayExecutor(ctx))
    assert again == [] and len(read_results(out)) == len(bundles)
    # the same run goes on after its reapers ran on every node: workers make the run's network again
    (null,) = run_evaluation(ctx, bundles[:1], NullAgent(), tmp_path / "null.jsonl", executor=RayExecutor(ctx))
    assert null.status == "failed", null.reason


@pytest.mark.docker
@pytest.mark.slow
def test_gpu_tasks_land_on_the_gpu_node_with_rays_ids(demo, cluster, tmp_path):
    tasks = tmp_path / "tasks"
    bundles = []
    for task_id, gpus in ((DIST, 1), (QUANT, 2)):
        b = demo.bundle(task_id).model_copy(deep=True)
        b.task.resources.gpus = gpus
        save_bundle(tasks, b)
        bundles.append(b)
    ctx = Context.create(demo.root / "state", repo_path=demo.repo)
    assert ctx.host.host_gpus == []  # this machine has none: only Ray's ids can reach Docker
    since = len(_records(cluster))
    outcomes = {o.task_id: o for o in validate_all(ctx, tasks, bundles, runs=1, executor=RayExecutor(ctx))}
    assert {o.status for o in outcomes.values()} == {"valid"}, outcomes
    seen = [x for x in _records(cluster, since) if x["ids"]]  # the device requests (a sandbox without GPUs makes none)
    assert seen and {x["node"] for x in _records(cluster, since)} == {cluster.gpu_node.node_id}
    by_size = {len(x["ids"]) for x in seen}
    assert by_size == {1, 2}
    for x in seen:  # what Docker was asked for is what Ray assigned this worker
        assert x["ids"] and set(x["ids"]) <= {"0", "1"} and x["cuda"] == ",".join(x["ids"])
    # the validation record was written by the driver into the real task folder
    assert json.loads((tasks / DIST / "task.json").read_text())["validation"]["status"] == "valid"


def _settled(cluster) -> None:
    """Ray's view matches the processes: every removed node declared dead, so no test plans on its CPUs."""
    import ray

    cluster.cluster.wait_for_nodes(timeout=120)
    assert ray.cluster_resources().get("CPU") == 4, ray.cluster_resources()


@pytest.mark.docker
@pytest.mark.slow
def test_a_lost_node_is_retried_once_then_recorded_as_an_error_naming_it(demo, cluster, tmp_path):
    b = demo.bundle(DIST).model_copy(deep=True)
    object.__setattr__(b.task.resources, "hardware", "victim")  # only the doomed nodes offer it
    ctx = Context.create(demo.root / "state", repo_path=demo.repo)
    client = demo.ctx.host.client
    out = tmp_path / "lost.jsonl"
    box: dict = {}
    runner = threading.Thread(target=lambda: box.update(r=run_evaluation(
        ctx, [b], CommandAgent("sleep 120", name="sleeper"), out, executor=RayExecutor(ctx))))
    seen: set[str] = set()
    killed = []

    def kill_when_running():
        deadline = time.monotonic() + 180
        while time.monotonic() < deadline:
            fresh = {c.id for c in _run_containers(client, ctx.run_id)} - seen
            if fresh:
                seen.update(fresh)
                return
            time.sleep(0.5)
        raise AssertionError("the trial never started a sandbox")

    added = []
    try:
        for i in range(2):
            node = cluster.cluster.add_node(num_cpus=2, resources={"victim": 1}, object_store_memory=100 * MB)
            added.append(node)
            if i == 0:
                runner.start()
            kill_when_running()
            cluster.cluster.remove_node(node, allow_graceful=False)
            added.remove(node)
            killed.append(node.node_id)
    finally:  # a node left behind, or not yet declared dead, would give the next tests CPUs they do not plan for
        for node in added:
            cluster.cluster.remove_node(node, allow_graceful=False)
        _settled(cluster)
    runner.join(timeout=120)
    (r,) = box["r"]
    assert (r.status, r.error_kind) == ("error", "node")
    assert killed[1][:12] in r.reason and "after 2 submissions" in r.reason, r.reason
    assert read_results(out)[0].model_dump() == r.model_dump()
    assert _run_containers(client, ctx.run_id) == []  # the survivors' reaper removed the dead workers' sandboxes


@pytest.mark.docker
@pytest.mark.slow
def test_ctrl_c_cancels_remote_tasks_and_reaps_every_node(demo, cluster, tmp_path):
    _settled(cluster)  # two nodes of 2 CPUs: two of the demo's 2-CPU trials run at once, the rest wait
    args = [sys.executable, "-m", "sweserve.cli", "run", "--agent", "sleep 120", "--agent-name", "interrupted",
            "--tasks", str(demo.tasks), "--state-dir", str(demo.root / "state"), "--repo-path", str(demo.repo),
            "--output", str(tmp_path / "i.jsonl"), "--executor", "ray", "--ray-address", cluster.address]
    proc = subprocess.Popen(args, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            env=dict(os.environ, PYTHONFAULTHANDLER="1"))
    first = proc.stdout.readline()
    assert first.startswith("run "), first
    run_id = first.split()[1].rstrip(":")
    client = demo.ctx.host.client
    def candidates():  # each trial's grade sandbox starts beside its candidate's, while the candidate works
        return [c for c in _run_containers(client, run_id) if c.labels.get(f"{LABEL}.role") == "candidate"]

    deadline = time.monotonic() + 180
    while time.monotonic() < deadline and len(candidates()) < 2:
        time.sleep(0.5)
    boxes = _run_containers(client, run_id)
    assert len(candidates()) == 2 and len(boxes) <= 4, [
        (c.labels.get(f"{LABEL}.role"), c.labels.get(f"{LABEL}.task"), c.status) for c in boxes]
    rest = interrupt(proc, 120)
    assert proc.returncode == 130, first + rest
    assert "Traceback" not in rest
    assert _run_containers(client, run_id) == []
    assert read_results(tmp_path / "i.jsonl") == []


@pytest.fixture(scope="module")
def registry(tmp_path_factory):
    """A real registry (Debian's docker-registry) on 127.0.0.1, no auth: docker trusts 127.0.0.0/8 without TLS."""
    import shutil
    import socket
    import urllib.request

    binary = shutil.which("docker-registry")
    if binary is None:
        if os.environ.get("SWESERVE_REQUIRE_DOCKER") == "1":
            pytest.fail("docker-registry is not installed (scripts/setup.sh installs it)")
        pytest.skip("docker-registry is not installed (apt-get install -y docker-registry)")
    root = tmp_path_factory.mktemp("registry")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    (root / "config.yml").write_text(
        "version: 0.1\nstorage:\n  filesystem:\n    rootdirectory: " + str(root / "data")
        + f"\n  delete:\n    enabled: true\nhttp:\n  addr: 127.0.0.1:{port}\n")
    proc = subprocess.Popen([binary, "serve", str(root / "config.yml")], stdout=subprocess.DEVNULL,
                            stderr=open(root / "log", "w"))
    address = f"127.0.0.1:{port}"
    deadline = time.monotonic() + 30
    while True:
        try:
            urllib.request.urlopen(f"http://{address}/v2/", timeout=1)
            break
        except OSError:
            if time.monotonic() > deadline or proc.poll() is not None:
                raise AssertionError((root / "log").read_text()[-500:])
            time.sleep(0.2)
    yield address
    proc.terminate()
    proc.wait(timeout=10)


@pytest.mark.docker
@pytest.mark.slow
def test_a_layer_built_on_one_node_is_pulled_by_another_through_the_registry(demo, registry, monkeypatch):
    import urllib.request

    from sweserve.dataset.image_spec import image_spec
    from sweserve.environment import images
    from sweserve.environment.images import ImageBuilder, read_ca_bundle

    client = demo.ctx.host.client
    b = demo.bundle(DIST).model_copy(deep=True)
    b.task.task_id = f"sweserve-demo__registry-probe-{os.getpid()}"  # a task image no node has yet
    profile = demo.ctx.profile(b.task.profile)
    first = ImageBuilder(client, read_ca_bundle(None), registry=registry)
    tag = first.task(image_spec(b.task, profile), demo.repo)
    built_id = client.images.get(tag).id
    catalog = json.load(urllib.request.urlopen(f"http://{registry}/v2/_catalog"))["repositories"]
    assert "sweserve-task" in catalog
    try:
        # "another node": the image is gone here, building is forbidden, the registry must provide it
        client.images.remove(tag, force=True)
        client.images.remove(f"{registry}/{tag}", force=True)

        def no_build(*a, **k):
            raise AssertionError("built instead of pulled")

        monkeypatch.setattr(images, "_docker_build", no_build)
        second = ImageBuilder(client, read_ca_bundle(None), registry=registry)
        assert second.task(image_spec(b.task, profile), None) == tag  # no clone needed: nothing is built
        assert client.images.get(tag).id == built_id
    finally:
        for t in (tag, f"{registry}/{tag}"):
            try:
                client.images.remove(t, force=True)
            except Exception:
                pass
