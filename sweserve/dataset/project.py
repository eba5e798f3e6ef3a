"""The project's configuration, as one command sees it: state dir, profiles, clones, the shared env layers.

Pure data: nothing here touches Docker. A trial asks it once for what a task is made of (`inputs`) and passes
those values down; a Ray worker rebuilds it from a `ProjectSpec`.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from decimal import Decimal
from pathlib import Path

from pydantic import BaseModel

from sweserve.config_search import ConfigSearch
from sweserve.dataset.clones import known_clone
from sweserve.dataset.image_spec import Declares, image_spec, shared_dependencies
from sweserve.dataset.profiles import RepoProfile, load_profile
from sweserve.errors import SweserveError
from sweserve.models import ImageSpec, Task


class ProjectSpec(BaseModel):
    """Everything needed to build a Project again, e.g. in a worker process on another node."""

    state_dir: Path
    repo_path: Path | None = None
    config_dir: Path | None = None
    shared_deps: dict[str, list[list[str]]] = {}


@dataclass(frozen=True)
class TaskInputs:
    """What one task is made of, resolved once by the trial and passed down as values."""

    profile: RepoProfile
    image: ImageSpec
    clone: Path | None  # the clone its task image is built from (None: the image must already exist)
    # the numbers the repository's other test files write at base (`guard.repository_numbers`), read by validation:
    # its candidate twins keep each value's membership in them equal to the real one's (`twins.grading_plan`)
    repository: Mapping[str, frozenset[Decimal]] | None = None


@dataclass
class Project:
    state_dir: Path
    search: ConfigSearch = field(default_factory=ConfigSearch.for_project)
    repo_path: Path | None = None  # --repo-path: the clone of every task's repository
    shared_deps: dict[str, list[list[str]]] = field(default_factory=dict)  # profile → its shared layers
    _profiles: dict[str, RepoProfile] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self._profile_lock = threading.Lock()

    @classmethod
    def from_spec(cls, spec: ProjectSpec) -> "Project":
        return cls(spec.state_dir, ConfigSearch(spec.config_dir), spec.repo_path, dict(spec.shared_deps))

    def spec(self) -> ProjectSpec:
        return ProjectSpec(state_dir=self.state_dir, repo_path=self.repo_path, config_dir=self.search.user_dir,
                           shared_deps=self.shared_deps)

    def profile(self, name: str) -> RepoProfile:
        with self._profile_lock:
            if name not in self._profiles:
                self._profiles[name] = load_profile(name, self.search)
            return self._profiles[name]

    def clone_for(self, repo: str) -> Path | None:
        return self.repo_path or known_clone(self.state_dir, repo)

    def share_env_layers(self, tasks: Iterable[Declares]) -> None:
        """Build env images as a layer shared by each profile's tasks (per era of its heavy pins, for locked
        tasks) plus a thin per-dependency-set layer: pass every task of the project, not just those run now, so
        the shared layers do not change with the selection."""
        tasks = list(tasks)
        self.shared_deps = shared_dependencies(tasks, {name: self._heavy(name) for name in {t.profile for t in tasks}})

    def _heavy(self, name: str) -> list[str]:
        """A profile's heavy packages; none for a profile that cannot be read (its own tasks say so when built,
        and the other tasks of the folder are not held up by it)."""
        try:
            return self.profile(name).heavy_packages
        except SweserveError:
            return []

    def image_spec(self, task: Task, profile: RepoProfile | None = None) -> ImageSpec:
        profile = profile or self.profile(task.profile)
        return image_spec(task, profile, self.shared_deps.get(task.profile, []))

    def inputs(self, task: Task) -> TaskInputs:
        """The task's profile, image spec and clone: read once per trial."""
        profile = self.profile(task.profile)
        return TaskInputs(profile, self.image_spec(task, profile), self.clone_for(task.repo))
