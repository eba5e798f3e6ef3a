"""A task's dependency set: requirement strings read from the repo's own files.

A PR is developed against what it declares itself: the requirements at its merge commit, plus those at its
base that the PR does not declare any more (a PR that adds ``xxhash`` to its pyproject needs ``xxhash``).
Tasks declaring the same set share one env image, whatever else changed.
"""

from __future__ import annotations

import functools
import re
import tomllib

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name

from sweserve.dataset.gitio import Git


@functools.lru_cache(maxsize=256)
def _parse(path: str, text: str, extras: tuple[str, ...]) -> tuple[str, ...]:
    """Requirements of one file's text (cached: the same file text recurs across most commits)."""
    try:
        reqs = _from_pyproject(text, list(extras)) if path.endswith(".toml") else _from_requirements(text)
    except tomllib.TOMLDecodeError:
        return ()
    return tuple(reqs)


def _from_pyproject(text: str, extras: list[str]) -> list[str]:
    data = tomllib.loads(text)
    project = data.get("project", {})
    reqs = list(project.get("dependencies", []))
    optional = project.get("optional-dependencies", {})
    for extra in extras:
        reqs += optional.get(extra, [])
    return reqs


def _from_requirements(text: str) -> list[str]:
    reqs = []
    for line in text.splitlines():
        line = line.split(" #", 1)[0].strip()
        if line and not line.startswith(("#", "-")):
            reqs.append(line)
    return reqs


def normalise(req: str) -> str:
    return " ".join(req.split())


@functools.lru_cache(maxsize=4096)
def name_of(req: str) -> str:
    """The canonical project name of a requirement (its text up to the first specifier when unparsable)."""
    try:
        return canonicalize_name(Requirement(req).name)
    except InvalidRequirement:
        m = re.match(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)", req)
        return canonicalize_name(m.group(1)) if m else req.strip()


def dependency_set(source: Git, commit: str, files: list[str], extras: list[str]) -> list[str]:
    """Sorted, de-duplicated requirements declared by files (pyproject.toml or requirements*.txt) at commit."""
    reqs: list[str] = []
    for path in files:
        text = source.read(commit, path)
        if text is not None:  # else: not there at this commit
            reqs += _parse(path, text, tuple(extras))
    return sorted({normalise(r) for r in reqs if r.strip()})


def pr_dependencies(source: Git, base: str, head: str, files: list[str], extras: list[str]) -> list[str]:
    """What a PR declares at its merge commit, plus what its base declared for projects it no longer names."""
    at_head = dependency_set(source, head, files, extras)
    names = {name_of(r) for r in at_head}
    kept = [r for r in dependency_set(source, base, files, extras) if name_of(r) not in names]
    return sorted(set(at_head) | set(kept))
