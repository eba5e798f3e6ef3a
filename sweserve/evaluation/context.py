"""What a command hands to its trials: the machine (`Host`) and the project's configuration (`Project`).

The two are kept apart by role: the host (Docker client, image builder, GPU pool, sandbox factory) is what a Ray
worker opens again from a `HostSpec`; the project (profiles, clones, state dir) is pure data. The command that
makes a Context owns it and closes it (`with Context.create(...) as ctx:`): closing closes the host, which
reaps the run's sandboxes. Nothing here names a container engine.
"""

from __future__ import annotations

import threading
from concurrent.futures import Future, wait
from dataclasses import dataclass, field
from pathlib import Path

from pydantic import BaseModel

from sweserve.config_search import ConfigSearch
from sweserve.dataset.profiles import RepoProfile
from sweserve.dataset.project import Project, ProjectSpec, TaskInputs
from sweserve.environment.host import Host, HostSpec, new_run_id, open_host
from sweserve.environment.sandbox import Sandbox
from sweserve.evaluation.guard import NumbersCache
from sweserve.models import Resources, Task, TaskBundle


class ContextSpec(BaseModel):
    """Everything needed to build a Context again, e.g. in a worker process on another node."""

    host: HostSpec
    project: ProjectSpec
    run_id: str | None = None  # the results' run id, when it is not the host's


@dataclass
class Context:
    host: Host
    project: Project
    results_run_id: str | None = None  # a second agent of one command records a run of its own (see run_id)
    numbers: NumbersCache = field(default_factory=NumbersCache)  # the numbers repository files write, by blob
    # the removals this context started (a copy, `dataclasses.replace`, starts with none): `settle` waits for
    # these alone, so one assessment's task end never waits on another candidate's sandbox, which its code can
    # make slow to delete (red team 16c, R16c-4); a host that removes at once (None) is settled as a whole
    _removals: set[Future[None]] = field(default_factory=set, init=False, repr=False, compare=False)
    _untracked: bool = field(default=False, init=False, repr=False, compare=False)
    _removals_lock: threading.Lock = field(default_factory=threading.Lock, init=False, repr=False, compare=False)

    @classmethod
    def create(cls, state_dir: Path, ca_bundle: str | None = None, repo_path: Path | None = None,
               run_id: str | None = None, search: ConfigSearch | None = None,
               assigned_gpus: list[str] | None = None, registry: str | None = None,
               shared_deps: dict[str, list[list[str]]] | None = None) -> "Context":
        """A command's context on this machine's Docker host (the command owns it: close it, or use `with`)."""
        project = Project(state_dir, search or ConfigSearch.for_project(state_dir), repo_path, shared_deps or {})
        host = open_host(HostSpec(run_id=run_id or new_run_id(), ca_bundle=ca_bundle, assigned_gpus=assigned_gpus,
                                  registry=registry))
        return cls(host, project)

    @classmethod
    def from_spec(cls, spec: ContextSpec, owner: bool = False) -> "Context":
        """A worker's context: the same project, its own host (a worker closes only the sandboxes it started)."""
        return cls(open_host(spec.host, owner=owner), Project.from_spec(spec.project), spec.run_id)

    def spec(self) -> ContextSpec:
        return ContextSpec(host=self.host.spec(), project=self.project.spec(), run_id=self.results_run_id)

    @property
    def run_id(self) -> str:
        """The run id results and trial folders are recorded under: the host's (which labels its sandboxes),
        unless a second agent of the same command was given one of its own."""
        return self.results_run_id or self.host.run_id

    @run_id.setter
    def run_id(self, value: str) -> None:
        self.results_run_id = value

    @property
    def state_dir(self) -> Path:
        return self.project.state_dir

    @property
    def search(self) -> ConfigSearch:
        return self.project.search

    def profile(self, name: str) -> RepoProfile:
        return self.project.profile(name)

    def clone_for(self, repo: str) -> Path | None:
        return self.project.clone_for(repo)

    def share_env_layers(self, tasks: list[Task]) -> None:
        self.project.share_env_layers(tasks)

    def inputs(self, bundle: TaskBundle) -> TaskInputs:
        """The task's profile, image spec and clone, read once: a trial passes these values down."""
        return self.project.inputs(bundle.task)

    def image(self, inputs: TaskInputs) -> str:
        """The task image of resolved inputs (built when missing)."""
        return self.host.task_image(inputs.image, inputs.clone)

    def task_image(self, bundle: TaskBundle) -> str:
        """The task image of a bundle (for callers outside a trial: export, tests)."""
        return self.image(self.inputs(bundle))

    def sandbox(self, image: str, task_id: str, role: str, resources: Resources, gpu_ids: list[str],
                offline: bool = False) -> Sandbox:
        return self.host.sandbox(image, task_id, role, resources, gpu_ids, offline)

    def discard(self, box: Sandbox) -> None:
        removal = self.host.discard(box)
        with self._removals_lock:
            if isinstance(removal, Future):
                self._removals.add(removal)
            else:
                self._untracked = True

    def settle(self) -> None:
        with self._removals_lock:
            mine, untracked = list(self._removals), self._untracked
            self._removals.difference_update(mine)
        wait(mine)
        if untracked:
            self.host.settle()

    def cancel(self) -> None:
        self.host.cancel()

    def close(self) -> None:
        self.host.close()

    def __enter__(self) -> "Context":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
