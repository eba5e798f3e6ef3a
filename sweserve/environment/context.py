"""What one sweserve command works with on a host: Docker, the image builder, clones, GPUs, the run's sandboxes.

Built once per command (or once per worker process, from a `ContextSpec`) and passed down; nothing is global.
"""

from __future__ import annotations

import os
import threading
import uuid
from dataclasses import dataclass, field
from pathlib import Path

import docker
import docker.errors
from pydantic import BaseModel

from sweserve.config_search import ConfigSearch
from sweserve.dataset.clones import known_clone
from sweserve.dataset.profiles import RepoProfile, load_profile
from sweserve.environment.docker_sandbox import DockerSandbox, docker_errors, gc
from sweserve.environment.gpus import GpuPool, detect_gpus
from sweserve.environment.images import ImageBuilder, read_ca_bundle, shared_dependencies
from sweserve.errors import InfraError, SweserveError
from sweserve.models import Resources, Task, TaskBundle

OFFLINE_ROLES = ("grade", "submission")  # the verifier's sandboxes: never on a network


def docker_client() -> docker.DockerClient:
    try:
        client = docker.from_env(timeout=600)
        client.ping()
        return client
    except docker.errors.DockerException as exc:
        raise SweserveError(f"cannot reach the Docker daemon ({exc.__class__.__name__}); is dockerd running?") from None


def new_run_id() -> str:
    return uuid.uuid4().hex[:12]


class ContextSpec(BaseModel):
    """Everything needed to build a Context again, e.g. in a worker process on another node."""

    state_dir: Path
    ca_bundle: str | None = None
    repo_path: Path | None = None
    run_id: str
    config_dir: Path | None = None
    assigned_gpus: list[str] | None = None
    registry: str | None = None
    shared_deps: dict[str, list[str]] = {}


@dataclass
class Context:
    client: docker.DockerClient
    builder: ImageBuilder
    state_dir: Path
    run_id: str
    host_gpus: list[str]
    repo_path: Path | None = None
    search: ConfigSearch = field(default_factory=ConfigSearch.for_project)
    ca_bundle_path: str | None = None
    assigned_gpus: list[str] | None = None  # set by a scheduler (Ray) that chose the devices: used as they are
    registry: str | None = None
    shared_deps: dict[str, list[str]] = field(default_factory=dict)  # profile → what all its tasks declare
    _profiles: dict[str, RepoProfile] = field(default_factory=dict)

    @classmethod
    def create(cls, state_dir: Path, ca_bundle: str | None = None, repo_path: Path | None = None,
               run_id: str | None = None, search: ConfigSearch | None = None,
               assigned_gpus: list[str] | None = None, registry: str | None = None,
               shared_deps: dict[str, list[str]] | None = None) -> "Context":
        client = docker_client()
        with docker_errors("reaping containers of dead runs"):
            gc(client)  # containers of harness processes that died are reaped on every start
        return cls(
            client=client,
            builder=ImageBuilder(client, read_ca_bundle(ca_bundle), registry=registry),
            state_dir=state_dir,
            run_id=run_id or new_run_id(),
            host_gpus=detect_gpus(os.environ),
            repo_path=repo_path,
            search=search or ConfigSearch.for_project(state_dir),
            ca_bundle_path=ca_bundle,
            assigned_gpus=assigned_gpus,
            registry=registry,
            shared_deps=shared_deps or {},
        )

    @classmethod
    def from_spec(cls, spec: ContextSpec) -> "Context":
        return cls.create(spec.state_dir, spec.ca_bundle, spec.repo_path, spec.run_id, ConfigSearch(spec.config_dir),
                          spec.assigned_gpus, spec.registry, spec.shared_deps)

    def spec(self) -> ContextSpec:
        return ContextSpec(state_dir=self.state_dir, ca_bundle=self.ca_bundle_path, repo_path=self.repo_path,
                           run_id=self.run_id, config_dir=self.search.user_dir, assigned_gpus=self.assigned_gpus,
                           registry=self.registry, shared_deps=self.shared_deps)

    def __post_init__(self) -> None:
        self.gpu_pool = GpuPool(self.host_gpus)
        self._cancelled = threading.Event()
        self._profile_lock = threading.Lock()

    def cancel(self) -> None:
        """No sandbox starts after this: workers still running wind down instead of starting new ones."""
        self._cancelled.set()

    def profile(self, name: str) -> RepoProfile:
        with self._profile_lock:
            if name not in self._profiles:
                self._profiles[name] = load_profile(name, self.search)
            return self._profiles[name]

    def clone_for(self, repo: str) -> Path | None:
        return self.repo_path or known_clone(self.state_dir, repo)

    def share_env_layers(self, tasks: list[Task]) -> None:
        """Build env images as a layer shared by each profile's tasks (what they all declare) plus a thin
        per-dependency-set layer: pass every task of the project, not just those run now, so the shared layer
        does not change with the selection."""
        self.shared_deps = shared_dependencies(tasks)

    def env_image(self, bundle: TaskBundle) -> str:
        task = bundle.task
        return self.builder.env(self.profile(task.profile), task.dependencies, task.lock,
                                self.shared_deps.get(task.profile, []))

    def task_image(self, bundle: TaskBundle) -> str:
        task = bundle.task
        return self.builder.task(task, self.profile(task.profile), self.clone_for(task.repo),
                                 self.shared_deps.get(task.profile, []))

    def sandbox(self, image: str, task_id: str, role: str, resources: Resources, gpu_ids: list[str]) -> DockerSandbox:
        """A sandbox on a network of its own (`docker_sandbox.sandbox_network`): no other sandbox of this or any
        run, and no address of the host, can be reached from it; it and its network go when it is removed.
        The verifier's roles (OFFLINE_ROLES) get no network at all."""
        if self._cancelled.is_set():
            raise InfraError("sandbox", "run cancelled")
        return DockerSandbox.start(
            self.client, image, run_id=self.run_id, task_id=task_id, role=role,
            resources=resources, gpu_ids=gpu_ids, network="none" if role in OFFLINE_ROLES else None,
        )

    def close(self) -> None:
        """Reap this run's containers and networks, whatever state they are in."""
        try:
            gc(self.client, run_id=self.run_id)
        except docker.errors.DockerException:
            pass
