"""What a task's images are made of, as plain values: the `ImageSpec` the environment builds from.

A profile and a task decide an image: the base image, the Python, the requirements (the task's pins, or its
declared requirements the build can install, after the profile's own packages), the package index settings,
the install steps, the test env and the git history kept. They are read here once, into an `ImageSpec`
(`sweserve/models.py`); `environment/images.py` derives every tag from the spec alone and never reads a profile.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Protocol

from sweserve.dataset.locking import installable, packages_for, requirements_text
from sweserve.dataset.profiles import RepoProfile
from sweserve.models import EnvironmentLock, EnvSpec, ImageSpec, Task


class Declares(Protocol):
    profile: str
    dependencies: list[str]


def env_packages(profile: RepoProfile, dependencies: Sequence[str]) -> list[str]:
    return packages_for(profile.env_packages, list(dependencies))


def env_requirements(profile: RepoProfile, dependencies: Sequence[str] = (), lock: EnvironmentLock | None = None
                     ) -> tuple[str, list[str]]:
    """The env image's requirements.txt (index options, then the task's pins or its declared requirements)
    and the declared requirements left out because the sandbox build cannot install them."""
    if lock is not None:
        return requirements_text(lock.requirements, profile.index_options), list(lock.left_out)
    keep, left_out = installable(env_packages(profile, list(dependencies)))
    return requirements_text(keep, profile.index_options), left_out


def env_spec(profile: RepoProfile, dependencies: Sequence[str] = (), lock: EnvironmentLock | None = None) -> EnvSpec:
    """The env image of a dependency set (or of a task's pinned lock) under this profile."""
    requirements, left_out = env_requirements(profile, dependencies, lock)
    return EnvSpec(profile=profile.name, base_image=profile.base_image, python=profile.python,
                   requirements=requirements, left_out=left_out, index_url=profile.index_url,
                   constraints=list(profile.constraints))


def shared_dependencies(tasks: Iterable[Declares]) -> dict[str, list[str]]:
    """Per profile, the dependencies every one of its tasks declares (profiles with one dependency set: none)."""
    sets: dict[str, list[set[str]]] = {}
    for task in tasks:
        sets.setdefault(task.profile, []).append(set(task.dependencies))
    return {profile: sorted(set.intersection(*deps)) for profile, deps in sets.items()
            if len({frozenset(d) for d in deps}) > 1 and set.intersection(*deps)}


def image_spec(task: Task, profile: RepoProfile, shared: Sequence[str] = ()) -> ImageSpec:
    """The task image's inputs. With `shared` (what all the profile's tasks declare) and no lock, the env is a thin
    layer over the shared layer's env image."""
    shared = [d for d in shared if d in task.dependencies] if task.lock is None else []
    layered = bool(shared) and set(shared) != set(task.dependencies)
    return ImageSpec(task_id=task.task_id, repo=task.repo, base_commit=task.base_commit,
                     env=env_spec(profile, task.dependencies, task.lock),
                     shared=env_spec(profile, shared) if layered else None,
                     install=list(profile.install), test_env=dict(task.test.env), history=profile.history)
