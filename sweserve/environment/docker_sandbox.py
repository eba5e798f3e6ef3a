"""The Docker implementation of `Sandbox`: labelled containers with limits, exec with a hard timeout, files in
and out, networks, and reaping what dead harness processes left.

Every Docker failure leaves this module as `InfraError("docker", …)`.
"""

from __future__ import annotations

import io
import os
import socket
import tarfile
import time
from contextlib import contextmanager

import docker
import docker.errors

from sweserve.environment.gpus import device_requests
from sweserve.environment.sandbox import WORKDIR, ExecResult
from sweserve.errors import InfraError
from sweserve.models import Resources

LABEL = "sweserve"


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


@contextmanager
def docker_errors(what: str):
    """Turn the Docker SDK's exceptions into InfraError("docker") naming what was being done."""
    try:
        yield
    except docker.errors.DockerException as exc:
        explanation = getattr(exc, "explanation", None) or str(exc)
        raise InfraError("docker", f"{what}: {str(explanation).strip()[:300]}") from None


class DockerSandbox:
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
    ) -> "DockerSandbox":
        with docker_errors(f"creating a {role} container from {image}"):
            container = client.containers.create(
                image,
                command=["sleep", "infinity"],
                labels=labels(run_id, task_id, role),
                network=network,
                working_dir=WORKDIR,
                **run_kwargs(resources, gpu_ids or [], os.cpu_count() or 1),
            )
        try:
            with docker_errors(f"starting a {role} container from {image}"):
                container.start()
        except BaseException:  # e.g. a GPU request the host cannot serve: the created container must not stay
            container.remove(force=True)
            raise
        return cls(container)

    @property
    def name(self) -> str:
        return self.container.name

    @property
    def address(self) -> str:
        with docker_errors("reading the sandbox's address"):
            self.container.reload()
        networks = self.container.attrs["NetworkSettings"]["Networks"].values()
        return next(n["IPAddress"] for n in networks if n["IPAddress"])

    def start_background(self, argv: list[str], workdir: str = WORKDIR) -> None:
        with docker_errors(f"starting {argv[0]} in the sandbox"):
            self.container.exec_run(argv, detach=True, workdir=workdir)

    def interactive_argv(self, shell: str, tty: bool) -> list[str]:
        return ["docker", "exec", "-it" if tty else "-i", "-w", WORKDIR, self.name, "bash", "-c", shell]

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
        with docker_errors("running a command in the sandbox"):
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
        with docker_errors(f"copying {path} into the sandbox"):
            self.container.exec_run(["mkdir", "-p", directory])
            self.container.put_archive(directory, buf.getvalue())

    def read_file(self, path: str) -> bytes | None:
        try:
            with docker_errors(f"copying {path} out of the sandbox"):
                stream, _ = self.container.get_archive(path)
                buf = io.BytesIO(b"".join(stream))
        except InfraError:
            try:
                self.container.reload()
            except docker.errors.DockerException:
                raise InfraError("docker", f"the sandbox went away while reading {path}") from None
            return None  # the container is there: the file is not
        with tarfile.open(fileobj=buf) as tar:
            member = tar.next()
            fh = tar.extractfile(member) if member else None
            return fh.read() if fh else None

    def remove(self) -> None:
        try:
            self.container.remove(force=True)
        except docker.errors.NotFound:
            pass

    def __enter__(self) -> "DockerSandbox":
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
    for container in client.containers.list(all=True, filters=filters):
        owner = container.labels.get(f"{LABEL}.owner", "")
        if everything or run_id or not _owner_alive(owner):
            try:
                container.remove(force=True)
                removed.append(container.name)
            except docker.errors.APIError as exc:  # gone, or another process is removing it right now
                if exc.status_code not in (404, 409):
                    raise
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
