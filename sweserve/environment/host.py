"""What a trial needs of a machine: the `Host` protocol, free of any container engine.

A host builds a task's images from their `ImageSpec`, holds the machine's GPUs, and hands out sandboxes (the
`Sandbox` protocol). It is built once per command (or once per Ray worker, from a `HostSpec`) by exactly one
owner, which closes it: `with open_host(spec) as host: ...`. `docker_host.DockerHost` is the implementation;
evaluation/ sees only this module and `sandbox.py`.
"""

from __future__ import annotations

import uuid
from concurrent.futures import Future
from pathlib import Path
from typing import Protocol

from pydantic import BaseModel

from sweserve.environment.gpus import GpuPool
from sweserve.environment.sandbox import Sandbox
from sweserve.models import ImageSpec, Resources

OFFLINE_ROLES = ("grade",)  # the verifier's sandbox: never on a network


def new_run_id() -> str:
    return uuid.uuid4().hex[:12]


class HostSpec(BaseModel):
    """Everything needed to open a host again, e.g. in a worker process on another node."""

    run_id: str
    ca_bundle: str | None = None
    assigned_gpus: list[str] | None = None  # set by a scheduler (Ray) that chose the devices: used as they are
    registry: str | None = None


class AgentImages(Protocol):
    """The images a host builds on top of a task image."""

    def agent(self, task_image: str, agent_name: str, install: list[str]) -> str:
        """The task image with an agent's install steps on top."""

    def checked_out(self, task_image: str) -> str:
        """The task image with its tracked files in the image, for other harnesses (exports)."""


class Host(Protocol):
    run_id: str
    host_gpus: list[str]  # the machine's GPUs
    assigned_gpus: list[str] | None  # the GPUs a scheduler gave this worker, used as they are; None: the pool's
    gpu_pool: GpuPool

    @property
    def builder(self) -> AgentImages:
        """What agents build their images with (`Agent.prepare`), and exports theirs."""

    def task_image(self, spec: ImageSpec, clone: Path | None) -> str:
        """The task image of `spec`, built (from `clone`, the repository) when it is not there yet."""

    def has_image(self, tag: str) -> bool:
        """Whether the image is on this host now (what an export names must be, or other harnesses pull it)."""

    def sandbox(self, image: str, task_id: str, role: str, resources: Resources, gpu_ids: list[str],
                offline: bool = False) -> Sandbox:
        """A sandbox of `image` with the task's limits: on a network of its own, reaching no other sandbox and no
        address of the host; the verifier's role (OFFLINE_ROLES), and any sandbox asked `offline` (a candidate
        whose agent reaches no model endpoint), get no network at all. InfraError("sandbox") once the host is
        cancelled."""

    def discard(self, box: Sandbox) -> Future[None] | None:
        """Remove `box` without waiting for it (nothing more runs in it: a trial's verdict never waits on a
        container's deletion); `settle` and `close` wait for every removal so started. The removal's future, or
        None when the box is already gone."""

    def settle(self) -> None:
        """Wait until every sandbox given to `discard` is removed."""

    def spec(self) -> HostSpec: ...

    def cancel(self) -> None:
        """No sandbox starts after this: workers still running wind down instead of starting new ones."""

    def close(self) -> None:
        """Give back everything the host holds (its sandboxes; for a command's host, every container of the run)."""

    def __enter__(self) -> Host: ...

    def __exit__(self, *exc: object) -> None: ...


def open_host(spec: HostSpec, owner: bool = True) -> Host:
    """The Docker host of `spec`. A non-owner (a worker of a run another process owns) closes only its own
    sandboxes, never the run's."""
    from sweserve.environment.docker_host import DockerHost

    return DockerHost.from_spec(spec, owner=owner)


def reap_run(run_id: str) -> list[str]:
    """Remove every container and network of the run on this machine (what a Ray reaper task runs on each node)."""
    from sweserve.environment.docker_host import reap

    return reap(run_id)
