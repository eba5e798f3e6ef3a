"""The Docker implementation of `Host`: a Docker client, the image builder, the GPU pool and the sandbox factory.

Opened by one owner (a command, or a Ray worker from a `HostSpec`) and closed by it. Opening reaps the
containers of harness processes that died; closing an owner's host reaps every container of its run.
"""

from __future__ import annotations

import os
import threading
import weakref
from concurrent.futures import Future, wait
from dataclasses import dataclass
from pathlib import Path

import docker
import docker.errors

from sweserve.environment.docker_sandbox import DockerSandbox, docker_errors, gc
from sweserve.environment.gpus import GpuPool, detect_gpus
from sweserve.environment.host import OFFLINE_ROLES, HostSpec, new_run_id
from sweserve.environment.images import ImageBuilder, image_exists, read_ca_bundle
from sweserve.environment.sandbox import Sandbox
from sweserve.errors import InfraError, SweserveError
from sweserve.models import ImageSpec, Resources


def docker_client() -> docker.DockerClient:
    try:
        client = docker.from_env(timeout=600)
        client.ping()
        return client
    except docker.errors.DockerException as exc:
        raise SweserveError(f"cannot reach the Docker daemon ({exc.__class__.__name__}); is dockerd running?") from None


def reap(run_id: str) -> list[str]:
    """Remove every container and network of the run on this machine."""
    return gc(docker_client(), run_id=run_id)


@dataclass
class DockerHost:
    client: docker.DockerClient
    builder: ImageBuilder
    run_id: str
    host_gpus: list[str]
    ca_bundle_path: str | None = None
    assigned_gpus: list[str] | None = None
    registry: str | None = None
    owner: bool = True  # closing reaps the whole run (else only the sandboxes this host started)

    @classmethod
    def create(cls, ca_bundle: str | None = None, run_id: str | None = None, assigned_gpus: list[str] | None = None,
               registry: str | None = None, owner: bool = True) -> "DockerHost":
        client = docker_client()
        with docker_errors("reaping containers of dead runs"):
            gc(client)  # containers of harness processes that died are reaped on every start
        return cls(client=client, builder=ImageBuilder(client, read_ca_bundle(ca_bundle), registry=registry),
                   run_id=run_id or new_run_id(), host_gpus=detect_gpus(os.environ), ca_bundle_path=ca_bundle,
                   assigned_gpus=assigned_gpus, registry=registry, owner=owner)

    @classmethod
    def from_spec(cls, spec: HostSpec, owner: bool = True) -> "DockerHost":
        return cls.create(spec.ca_bundle, spec.run_id, spec.assigned_gpus, spec.registry, owner=owner)

    def spec(self) -> HostSpec:
        return HostSpec(run_id=self.run_id, ca_bundle=self.ca_bundle_path, assigned_gpus=self.assigned_gpus,
                        registry=self.registry)

    def __post_init__(self) -> None:
        self.gpu_pool = GpuPool(self.host_gpus)
        self._cancelled = threading.Event()
        self._started: weakref.WeakSet[DockerSandbox] = weakref.WeakSet()
        self._removing: set[Future[None]] = set()
        self._lock = threading.Lock()

    def discard(self, box: Sandbox) -> Future[None]:
        """Remove `box` in the background (its container is killed and deleted by dockerd while the caller goes
        on); `settle` and `close` wait for it. A removal that fails leaves the box to `close`, which reaps it."""
        # each on a thread of its own: on a shared pool, two removals a candidate's code made slow (a grade
        # sandbox's million files) queued every other candidate's behind them, and each one's task end waited for
        # its own removal (red team 16f, R16f-6). A host has as many at once as trials end at once.
        removal: Future[None] = Future()

        def remove() -> None:
            if not removal.set_running_or_notify_cancel():
                return
            try:
                box.remove()
            except BaseException as exc:  # noqa: BLE001 - the removal's error is its future's, as on a pool
                removal.set_exception(exc)
            else:
                removal.set_result(None)

        with self._lock:
            self._removing.add(removal)
        removal.add_done_callback(self._removed)
        threading.Thread(target=remove, name="sweserve-remove").start()
        return removal

    def _removed(self, removal: "Future[None]") -> None:
        with self._lock:
            self._removing.discard(removal)

    def settle(self) -> None:
        """Wait for every removal `discard` started (their errors are `close`'s to clean up after)."""
        with self._lock:
            pending = list(self._removing)
        wait(pending)

    def cancel(self) -> None:
        """No sandbox starts after this: workers still running wind down instead of starting new ones."""
        self._cancelled.set()

    def task_image(self, spec: ImageSpec, clone: Path | None) -> str:
        return self.builder.task(spec, clone)

    def has_image(self, tag: str) -> bool:
        return image_exists(self.client, tag)

    def sandbox(self, image: str, task_id: str, role: str, resources: Resources, gpu_ids: list[str],
                offline: bool = False) -> DockerSandbox:
        """A sandbox on a network of its own (`docker_sandbox.sandbox_network`): no other sandbox of this or any
        run, and no address of the host, can be reached from it; it and its network go when it is removed.
        The verifier's role (OFFLINE_ROLES) and `offline` sandboxes get no network at all (`none`: loopback
        alone, and no network to create or remove)."""
        if self._cancelled.is_set():
            raise InfraError("sandbox", "run cancelled")
        box = DockerSandbox.start(
            self.client, image, run_id=self.run_id, task_id=task_id, role=role,
            resources=resources, gpu_ids=gpu_ids, network="none" if offline or role in OFFLINE_ROLES else None, host=self,
        )
        self._started.add(box)
        return box

    def close(self) -> None:
        """Remove the sandboxes this host started; an owner's host reaps every container and network of its run,
        whatever state they are in."""
        self.settle()
        for box in list(self._started):
            try:
                box.remove()
            except docker.errors.DockerException:
                pass
        if self.owner:
            try:
                gc(self.client, run_id=self.run_id)
            except docker.errors.DockerException:
                pass

    def __enter__(self) -> "DockerHost":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
