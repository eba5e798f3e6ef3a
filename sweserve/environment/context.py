"""What one sweserve command works with: Docker, image builder, clones, GPUs, the run's network.

Built once per command and passed down; nothing here is global.
"""

from __future__ import annotations

import json
import os
import threading
import uuid
from dataclasses import dataclass, field
from pathlib import Path

import docker
import docker.errors

from sweserve.dataset.profiles import RepoProfile, load_profile
from sweserve.environment.docker_sandbox import Sandbox, ensure_network, gc
from sweserve.environment.gpus import GpuPool, detect_gpus
from sweserve.environment.images import ImageBuilder, read_ca_bundle
from sweserve.errors import SweserveError
from sweserve.models import Resources, TaskBundle

CLONES_FILE = "clones.json"


def docker_client() -> docker.DockerClient:
    try:
        client = docker.from_env(timeout=600)
        client.ping()
        return client
    except docker.errors.DockerException as exc:
        raise SweserveError(f"cannot reach the Docker daemon ({exc.__class__.__name__}); is dockerd running?") from None


def remember_clone(state_dir: Path, repo: str, path: Path) -> None:
    """Record where a repo's clone lives, so images can be built from it later (local state only)."""
    state_dir.mkdir(parents=True, exist_ok=True)
    registry = state_dir / CLONES_FILE
    data = json.loads(registry.read_text()) if registry.exists() else {}
    data[repo] = str(path.resolve())
    registry.write_text(json.dumps(data, indent=2) + "\n")


def known_clone(state_dir: Path, repo: str) -> Path | None:
    registry = state_dir / CLONES_FILE
    if not registry.exists():
        return None
    path = json.loads(registry.read_text()).get(repo)
    return Path(path) if path and Path(path).exists() else None


def new_run_id() -> str:
    return uuid.uuid4().hex[:12]


@dataclass
class Context:
    client: docker.DockerClient
    builder: ImageBuilder
    state_dir: Path
    run_id: str
    host_gpus: list[str]
    repo_path: Path | None = None
    log: object = print
    _profiles: dict[str, RepoProfile] = field(default_factory=dict)
    _network: str | None = None

    @classmethod
    def create(cls, state_dir: Path, ca_bundle: str | None = None, repo_path: Path | None = None,
               run_id: str | None = None, log=print) -> "Context":
        client = docker_client()
        gc(client)  # containers of harness processes that died are reaped on every start
        return cls(
            client=client,
            builder=ImageBuilder(client, read_ca_bundle(ca_bundle), log=log),
            state_dir=state_dir,
            run_id=run_id or new_run_id(),
            host_gpus=detect_gpus(os.environ),
            repo_path=repo_path,
            log=log,
        )

    def __post_init__(self) -> None:
        self.gpu_pool = GpuPool(self.host_gpus)
        self._cancelled = threading.Event()
        self._network_lock = threading.Lock()

    def cancel(self) -> None:
        """No sandbox starts after this: workers still running wind down instead of starting new ones."""
        self._cancelled.set()

    def profile(self, name: str) -> RepoProfile:
        if name not in self._profiles:
            self._profiles[name] = load_profile(name)
        return self._profiles[name]

    def clone_for(self, repo: str) -> Path | None:
        return self.repo_path or known_clone(self.state_dir, repo)

    def task_image(self, bundle: TaskBundle) -> str:
        task = bundle.task
        return self.builder.task(task, self.profile(task.profile), self.clone_for(task.repo))

    @property
    def network(self) -> str:
        """The run's --internal network, created once (parallel workers must not race to make two)."""
        with self._network_lock:
            if self._network is None:
                self._network = ensure_network(self.client, f"sweserve-{self.run_id}", self.run_id)
            return self._network

    def sandbox(self, image: str, task_id: str, role: str, resources: Resources, gpu_ids: list[str]) -> Sandbox:
        if self._cancelled.is_set():
            raise RuntimeError("run cancelled")
        return Sandbox.start(
            self.client, image, run_id=self.run_id, task_id=task_id, role=role,
            resources=resources, gpu_ids=gpu_ids, network=self.network,
        )

    def close(self) -> None:
        """Reap this run's containers and network, whatever state they are in."""
        try:
            gc(self.client, run_id=self.run_id)
        except docker.errors.DockerException:
            pass
        with self._network_lock:
            self._network = None
