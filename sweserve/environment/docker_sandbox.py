"""Labelled containers with limits: start, exec with a hard timeout, copy files in and out, reap."""

from __future__ import annotations

import io
import os
import socket
import tarfile
import time
from dataclasses import dataclass

import docker
import docker.errors

from sweserve.environment.gpus import device_requests
from sweserve.models import Resources

LABEL = "sweserve"
WORKDIR = "/testbed"


def owner_label() -> str:
    return f"{socket.gethostname()}:{os.getpid()}"


def labels(run_id: str, task_id: str, role: str) -> dict[str, str]:
    return {
        LABEL: "1",
        f"{LABEL}.run": run_id,
        f"{LABEL}.task": task_id,
        f"{LABEL}.role": role,
        f"{LABEL}.owner": owner_label(),
    }


def run_kwargs(resources: Resources, gpu_ids: list[str], host_cpus: int) -> dict:
    """The docker run options a task's resources ask for (CPUs capped at what the host has)."""
    cpus = min(resources.cpus, float(host_cpus))
    return {
        "mem_limit": f"{int(resources.memory_gb * 1024)}m",
        "nano_cpus": int(cpus * 1e9),
        "pids_limit": 4096,
        "device_requests": device_requests(gpu_ids),
        "security_opt": ["no-new-privileges"],
        "init": True,
        "environment": {"PYTHONDONTWRITEBYTECODE": "1"},
    }


@dataclass
class ExecResult:
    exit_code: int
    output: str
    timed_out: bool = False
    duration_s: float = 0.0

    def tail(self, n: int = 2000) -> str:
        return self.output[-n:]


def ensure_network(client: docker.DockerClient, name: str, run_id: str) -> str:
    """An --internal bridge (no egress) for one run's sandboxes."""
    try:
        client.networks.get(name)
    except docker.errors.NotFound:
        client.networks.create(
            name, driver="bridge", internal=True,
            labels={LABEL: "1", f"{LABEL}.run": run_id, f"{LABEL}.owner": owner_label()},
        )
    return name


class Sandbox:
    def __init__(self, container):
        self.container = container

    @classmethod
    def start(
        cls,
        client: docker.DockerClient,
        image: str,
        *,
        run_id: str,
        task_id: str,
        role: str,
        resources: Resources,
        gpu_ids: list[str] | None = None,
        network: str | None = None,
    ) -> "Sandbox":
        container = client.containers.create(
            image,
            command=["sleep", "infinity"],
            labels=labels(run_id, task_id, role),
            network=network,
            working_dir=WORKDIR,
            **run_kwargs(resources, gpu_ids or [], os.cpu_count() or 1),
        )
        try:
            container.start()
        except BaseException:  # e.g. a GPU request the host cannot serve: the created container must not stay
            container.remove(force=True)
            raise
        return cls(container)

    @property
    def name(self) -> str:
        return self.container.name

    def exec(
        self,
        command: str,
        timeout: float,
        workdir: str = WORKDIR,
        env: dict[str, str] | None = None,
        user: str | None = None,
    ) -> ExecResult:
        """Run `bash -c command`; the whole process group is killed after timeout seconds."""
        started = time.monotonic()
        argv = ["timeout", "-s", "KILL", str(max(1, int(timeout))), "bash", "-c", command]
        kwargs = {"workdir": workdir, "environment": env or {}, "demux": False}
        if user:
            kwargs["user"] = user
        code, out = self.container.exec_run(argv, **kwargs)
        elapsed = time.monotonic() - started
        text = (out or b"").decode("utf-8", "replace")
        timed_out = code == 137 and elapsed >= int(timeout) - 0.5
        return ExecResult(code, text, timed_out, round(elapsed, 3))

    def put_file(self, path: str, data: bytes, mode: int = 0o644) -> None:
        directory, name = os.path.split(path)
        buf = io.BytesIO()
        with tarfile.open(fileobj=buf, mode="w") as tar:
            info = tarfile.TarInfo(name)
            info.size, info.mode, info.mtime = len(data), mode, int(time.time())
            tar.addfile(info, io.BytesIO(data))
        self.container.exec_run(["mkdir", "-p", directory])
        self.container.put_archive(directory, buf.getvalue())

    def read_file(self, path: str) -> bytes | None:
        try:
            stream, _ = self.container.get_archive(path)
        except docker.errors.NotFound:
            return None
        buf = io.BytesIO(b"".join(stream))
        with tarfile.open(fileobj=buf) as tar:
            member = tar.next()
            fh = tar.extractfile(member) if member else None
            return fh.read() if fh else None

    def remove(self) -> None:
        try:
            self.container.remove(force=True)
        except docker.errors.NotFound:
            pass

    def __enter__(self) -> "Sandbox":
        return self

    def __exit__(self, *exc) -> None:
        self.remove()


def _owner_alive(owner: str) -> bool:
    host, _, pid = owner.rpartition(":")
    if host != socket.gethostname() or not pid.isdigit():
        return True  # another machine's run: not ours to judge
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def gc(client: docker.DockerClient, everything: bool = False, run_id: str | None = None) -> list[str]:
    """Remove sweserve containers (and their networks) left by dead harness processes.

    everything=True removes all of them; run_id limits it to one run's.
    """
    filters = {"label": [LABEL] + ([f"{LABEL}.run={run_id}"] if run_id else [])}
    removed = []
    # ignore_removed: on a shared daemon another process may remove a listed container before it is inspected
    for container in client.containers.list(all=True, filters=filters, ignore_removed=True):
        owner = container.labels.get(f"{LABEL}.owner", "")
        if everything or run_id or not _owner_alive(owner):
            try:
                container.remove(force=True)
                removed.append(container.name)
            except docker.errors.NotFound:
                pass
    for network in client.networks.list(filters=filters):
        owner = network.attrs.get("Labels", {}).get(f"{LABEL}.owner", "")
        if not (everything or run_id or not _owner_alive(owner)):
            continue
        try:
            network.reload()
            if not network.containers:
                network.remove()
        except docker.errors.APIError:
            pass
    return removed
