"""A task's dependency set: requirement strings read from the repo's own files at its base commit.

Tasks whose base commits declare the same set share one env image, whatever else changed.
"""

from __future__ import annotations

import tomllib

import git


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


def dependency_set(repo: git.Repo, commit: str, files: list[str], extras: list[str]) -> list[str]:
    """Sorted, de-duplicated requirements declared by files (pyproject.toml or requirements*.txt) at commit."""
    reqs: list[str] = []
    for path in files:
        try:
            text = repo.git.show(f"{commit}:{path}")
        except git.GitCommandError:
            continue  # not there at this commit
        try:
            reqs += _from_pyproject(text, extras) if path.endswith(".toml") else _from_requirements(text)
        except tomllib.TOMLDecodeError:
            continue
    return sorted({normalise(r) for r in reqs if r.strip()})
