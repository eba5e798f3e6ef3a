"""Image disk accounting with the daemon's own numbers, and what `gc --images` may remove."""

import io
import os
import subprocess
import sys
import tarfile

import pytest

from sweserve.environment.disk import prunable, remove, sweserve_images, usage

pytestmark = pytest.mark.docker
MB = 1_000_000


def build(client, tag: str, parent: str, payload_mb: int, labels: dict) -> None:
    """An image FROM parent with payload_mb of incompressible bytes, built by the classic builder."""
    dockerfile = f"FROM {parent}\nCOPY blob /blob-{tag.replace(':', '-')}\n"
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        for name, data in (("Dockerfile", dockerfile.encode()), ("blob", os.urandom(payload_mb * MB))):
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    buf.seek(0)
    client.images.build(fileobj=buf, custom_context=True, tag=tag, labels=labels, rm=True)


@pytest.fixture
def images(docker_client):
    """sweserve-env + two task images over it (and an agent image over one), under a profile of their own."""
    suffix = os.urandom(4).hex()
    profile = f"disktest-{suffix}"
    env = f"sweserve-env:{profile}-e"
    tasks = {n: f"sweserve-task:{profile}-t{n}" for n in (1, 2)}
    agent = f"sweserve-agent:{profile}-a"
    build(docker_client, env, "sweserve-base:bookworm", 6, {"sweserve": "1", "sweserve.profile": profile})
    for n, tag in tasks.items():
        build(docker_client, tag, env, 2, {"sweserve": "1", "sweserve.task": f"o__r-{n}", "sweserve.base_commit": "c" * 40})
    build(docker_client, agent, tasks[2], 1, {"sweserve": "1", "sweserve.agent": "x"})
    yield profile, env, tasks, agent
    for tag in (agent, *tasks.values(), env):
        try:
            docker_client.images.remove(tag, force=True)
        except Exception:  # noqa: BLE001 - already gone
            pass


def test_disk_is_counted_once_per_layer_and_gc_keeps_what_validated_tasks_use(docker_client, images):
    profile, env, tasks, agent = images
    every = sweserve_images(docker_client)
    assert {i.kind for i in every if i.profile == profile} - {"intermediate"} == {"env", "task", "agent"}
    [row] = [u for u in usage(every) if u.profile == profile]
    mine = every  # other images on this daemon stay out of the assertions below
    assert (row.env_images, row.task_images, row.images) == (1, 2, 4)
    # the env layer (6 MB) is counted once, not under each of the three images built on it
    assert 6 * MB + 5 * MB <= row.disk_bytes < 6 * MB + 5 * MB + MB // 2
    assert row.naive_bytes > 4 * 6 * MB  # what `docker images` would make of it
    assert row.unique_bytes < 6 * MB and row.shared_bytes >= 6 * MB

    # task 1 is validated: its image and the env under it stay; task 2 and its agent image go
    spare = [i for i in prunable(mine, {("o__r-1", "c" * 40)}) if i.profile == profile]
    assert sorted(t for i in spare for t in i.tags) == sorted([tasks[2], agent])
    assert not [i for i in prunable(mine, {("o__r-1", "c" * 40), ("o__r-2", "c" * 40)}) if i.profile == profile]
    assert {t for i in prunable(mine, set()) if i.profile == profile for t in i.tags} == {env, agent, *tasks.values()}
    assert sorted(remove(docker_client, spare)) == sorted([tasks[2], agent])
    left = {t for i in sweserve_images(docker_client) if i.profile == profile for t in i.tags}
    assert left == {env, tasks[1]}


def test_images_du_and_gc_dry_run_from_the_cli(docker_client, images, tmp_path):
    profile, env, tasks, agent = images
    def cli(*args):
        return subprocess.run([sys.executable, "-m", "sweserve.cli", *args], cwd=tmp_path, capture_output=True,
                              text=True)
    assert cli("gc", "--images", "--dry-run").stderr.strip() == "error: tasks: no such tasks folder"  # never all
    (tmp_path / "tasks").mkdir()
    du = cli("images", "du", "--json")
    assert du.returncode == 0, du.stderr
    import json

    report = json.loads(du.stdout)
    [row] = [r for r in report["profiles"] if r["profile"] == profile]
    assert row["env_images"] == 1 and row["task_images"] == 2
    assert agent in report["prunable"]["images"]  # no validated task in this empty folder
    text = cli("images", "du")
    assert text.returncode == 0 and "gc --images" in text.stdout
    dry = cli("gc", "--images", "--dry-run")
    assert dry.returncode == 0 and f"would remove {agent}" in dry.stdout
    assert {t for i in sweserve_images(docker_client) if i.profile == profile for t in i.tags} >= {env, agent}
