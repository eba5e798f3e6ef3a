"""An image that declares a VOLUME is refused as a sandbox: Docker gives each container an anonymous volume at
that path, which is no part of its writable layer, so root in the sandbox could fill the host's disk there past
the disk limit (the watchdog measures the writable layer), and the volume outlived the container."""

import io
import os
import tarfile

import pytest

from sweserve.environment.docker_sandbox import DockerSandbox
from sweserve.errors import InfraError
from sweserve.models import Resources

pytestmark = pytest.mark.docker


@pytest.fixture
def volume_image(docker_client):
    tag = f"sweserve-test-volume:{os.urandom(4).hex()}"
    dockerfile = b"FROM sweserve-base:bookworm\nVOLUME /data /srv/cache\n"
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        info = tarfile.TarInfo("Dockerfile")
        info.size = len(dockerfile)
        tar.addfile(info, io.BytesIO(dockerfile))
    buf.seek(0)
    docker_client.images.build(fileobj=buf, custom_context=True, tag=tag, rm=True)
    yield tag
    docker_client.images.remove(tag, force=True)


def test_an_image_with_a_volume_is_refused_and_leaves_nothing(docker_client, volume_image):
    run_id = f"vol-{os.urandom(3).hex()}"
    volumes_before = {v.name for v in docker_client.volumes.list()}
    with pytest.raises(InfraError, match=r"declares VOLUME /data /srv/cache: .*disk limit"):
        DockerSandbox.start(docker_client, volume_image, run_id=run_id, task_id="o__r-1", role="candidate",
                            resources=Resources(disk_gb=0.01))
    left = docker_client.containers.list(all=True, ignore_removed=True, filters={"label": f"sweserve.run={run_id}"})
    assert left == []
    assert {v.name for v in docker_client.volumes.list()} - volumes_before == set()  # anonymous volumes removed too


def test_control_an_image_without_one_starts(docker_client):
    box = DockerSandbox.start(docker_client, "sweserve-base:bookworm", run_id=f"vol-{os.urandom(3).hex()}",
                              task_id="o__r-1", role="candidate", resources=Resources(disk_gb=0.01))
    try:
        assert box.exec("echo ok", 60, workdir="/").output.strip() == "ok"
    finally:
        box.remove()
