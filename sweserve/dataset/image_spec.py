"""What a task's images are made of, as plain values: the `ImageSpec` the environment builds from.

A profile and a task decide an image: the base image, the Python, the requirements (the task's pins, or its
declared requirements the build can install, after the profile's own packages), the package index settings,
the install steps, the test env and the git history kept. They are read here once, into an `ImageSpec`
(`sweserve/models.py`); `environment/images.py` derives every tag from the spec alone and never reads a profile.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from typing import Protocol

from sweserve.dataset.locking import installable, packages_for, requirements_text
from sweserve.dataset.profiles import RepoProfile
from sweserve.models import EnvironmentLock, EnvSpec, ImageSpec, LockRequest, Task


class Declares(Protocol):
    profile: str
    dependencies: list[str]
    lock: EnvironmentLock | None
    lock_request: LockRequest | None


def lock_group(task: Declares) -> tuple[str, ...] | None:
    """What a task's env is pinned by, for counting: its lock's pins; a pending lock's key (every task with that
    key gets the same pins, resolved together); None for an unpinned task."""
    if task.lock is not None:
        return tuple(task.lock.requirements)
    request = task.lock_request
    if request is not None and request.unpinned is None:
        return ("lock-request:", request.key)
    return None


def _name(pin: str) -> str:
    """A requirement's package name, normalized as pip compares them."""
    return re.sub(r"[-_.]+", "-", re.split(r"[\s=<>!~;\[@]", pin, maxsplit=1)[0]).lower()


def heavy_pins(requirements: Iterable[str], heavy: Iterable[str]) -> tuple[str, ...]:
    """The pins of the profile's heavy packages (torch, jax, …): the era a lock belongs to."""
    names = {_name(h) for h in heavy}
    return tuple(sorted(p for p in requirements if _name(p) in names))


def _era(task: Declares, heavy: Mapping[str, Sequence[str]]) -> tuple[str, ...] | None:
    """A locked task's heavy pins; None while its lock is pending (its era is not known yet)."""
    return heavy_pins(task.lock.requirements, heavy.get(task.profile, ())) if task.lock is not None else None


def _most_common(tasks: Iterable[Declares], heavy: Mapping[str, Sequence[str]] | None = None
                 ) -> dict[tuple[str, tuple[str, ...] | None], tuple[str, ...]]:
    """Per profile and era (its heavy pins; with `heavy` None, one era a profile) with two or more lock groups,
    the group most of its tasks have (the greater among equals)."""
    counts: dict[tuple[str, tuple[str, ...] | None], Counter] = {}
    for task in tasks:
        group = lock_group(task)
        if group is not None:
            era = _era(task, heavy) if heavy is not None else ()
            counts.setdefault((task.profile, era), Counter())[group] += 1
    return {key: max(c, key=lambda g: (c[g], g)) for key, c in counts.items() if len(c) > 1}


def pending_shared(tasks: Sequence[Declares]) -> list[Declares]:
    """The tasks whose pending lock would be their profile's most common lock: resolve them before the layers
    are chosen, so the profile's first layer does not depend on which tasks are built first. (A pending lock's
    era is not known until it is resolved: the other eras' layers are final once `sweserve locks resolve` has
    resolved every lock of the profile.)"""
    winners = {g for g in _most_common(tasks).values() if g[0] == "lock-request:"}
    return [t for t in tasks if t.lock is None and lock_group(t) in winners]


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


def shared_dependencies(tasks: Iterable[Declares], heavy: Mapping[str, Sequence[str]] | None = None
                        ) -> dict[str, list[list[str]]]:
    """Per profile, the shared layers its env images build on, first layer first. Locked tasks: the pins of the
    lock most of the profile's tasks have (the newest among equals), whose own image is the first layer; then,
    per other era of the profile's `heavy` packages (e.g. each torch version), the pins of that era's most common
    lock, whose image is a thin layer over the first (the heavy wheels installed once an era, not once a lock).
    Every other lock is a thin layer over its era's layer, or over the first. Unlocked tasks: one layer, the
    dependencies all of them declare. A profile whose tasks all install the same has none."""
    sets: dict[str, list[set[str]]] = {}
    locked: set[str] = set()
    tasks = list(tasks)
    for task in tasks:
        sets.setdefault(task.profile, []).append(set(task.dependencies))
        if lock_group(task) is not None:
            locked.add(task.profile)
    shared = {profile: [sorted(set.intersection(*deps))] for profile, deps in sets.items()
              if len({frozenset(d) for d in deps}) > 1 and set.intersection(*deps) and profile not in locked}
    for (profile, _), group in _most_common(tasks).items():
        if group[0] != "lock-request:":  # a pending winner: no shared layer until it is resolved
            shared[profile] = [list(group)]
    if heavy:
        for (profile, era), group in sorted(_most_common(tasks, heavy).items(), key=lambda kv: kv[1]):
            names = heavy.get(profile, ())
            if (profile in locked and profile in shared and group[0] != "lock-request:"
                    and era != heavy_pins(shared[profile][0], names)):
                shared[profile].append(list(group))
    return shared


def image_spec(task: Task, profile: RepoProfile, shared: Sequence[Sequence[str]] = ()) -> ImageSpec:
    """The task image's inputs. With `shared` (the profile's layers, see shared_dependencies), the env is a thin
    layer over a shared layer's env image: for a locked task, the layer of its era (itself thin over the first
    layer) or else the first layer; for an unlocked one, the image of what all the profile's tasks declare."""
    base = None
    if task.lock is not None:
        lock = task.lock

        def layer(pins: Sequence[str], over: EnvSpec | None = None) -> EnvSpec:
            spec = env_spec(profile, [], lock.model_copy(update={"requirements": list(pins), "left_out": []}))
            return spec.model_copy(update={"over": over})

        if shared:
            first, era = list(shared[0]), heavy_pins(lock.requirements, profile.heavy_packages)
            anchor = next((list(p) for p in shared[1:] if heavy_pins(p, profile.heavy_packages) == era), None)
            if anchor is not None and anchor != lock.requirements:
                base = layer(anchor, layer(first))
            elif first != lock.requirements:
                base = layer(first)
    elif shared:
        common = [d for d in shared[0] if d in task.dependencies]
        if common and set(common) != set(task.dependencies):
            base = env_spec(profile, common)
    return ImageSpec(task_id=task.task_id, repo=task.repo, base_commit=task.base_commit,
                     env=env_spec(profile, task.dependencies, task.lock), shared=base,
                     install=list(profile.install), test_env=dict(task.test.env), history=profile.history,
                     leave_out=list(task.unreadable))
