"""Repo profiles: how a repository's PRs become tasks and how its tests run.

One JSON file per profile in this folder. A profile may name another in ``extends``;
its own keys then replace the parent's.
"""

from __future__ import annotations

import fnmatch
import json
import re
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from sweserve.errors import SweserveError, describe_validation_error
from sweserve.models import Family

PROFILE_DIR = Path(__file__).parent / "builtin_profiles"


class FamilyRule(BaseModel):
    model_config = ConfigDict(extra="forbid")
    family: Family
    paths: list[str] = Field(default_factory=list, description="fnmatch globs; '*' crosses '/'")
    title_tags: list[str] = Field(default_factory=list, description="words in a '[tag]' of the PR title")


class RepoProfile(BaseModel):
    model_config = ConfigDict(extra="forbid")
    name: str
    repo: str = Field(pattern=r"^[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+$")
    base_image: str = Field("sweserve-base:bookworm", description="image the env image builds FROM; "
                            "sweserve-base:<suite> is built with debootstrap, any other tag must exist locally")
    python: str = Field("3.11", pattern=r"^3\.\d+$", description="least Python the env image must have")
    dependency_files: list[str] = Field(default_factory=list, description="pyproject.toml / requirements files "
                                        "whose declared requirements, at each base commit, make the env image")
    dependency_extras: list[str] = Field(default_factory=list, description="optional-dependency groups to add")
    env_packages: list[str] = Field(default_factory=lambda: ["pytest"])
    lock: bool = Field(False, description="resolve each task's requirements as of its PR's date with uv "
                       "(needs the package index while mining); the env image installs the pins")
    index_options: list[str] = Field(default_factory=list, description="package index options for uv and pip, "
                                     "e.g. ['--index-url', 'https://…'] or ['--extra-index-url', '…']")
    install: list[str] = Field(default_factory=list, description="shell commands run in /testbed at base_commit")
    test_paths: list[str] = Field(description="fnmatch globs of files that count as tests")
    test_file_patterns: list[str] = Field(default_factory=lambda: ["test_*.py", "*_test.py"])
    test_workdir: str = "."
    runner: Literal["pytest", "unittest"] = "pytest"
    test_env: dict[str, str] = Field(default_factory=dict)
    family_rules: list[FamilyRule]
    exclude_paths: list[str] = Field(default_factory=list, description="fnmatch globs of files left out of "
                                     "tasks (large data files): never in an oracle or tests patch")
    ci_registration: bool = Field(False, description="read resources and test time limits from SGLang-style "
                                  "CI registration (register_*_ci calls, run_suite.py suite lists)")
    max_oracle_lines: int = Field(2000, gt=0)
    allow_binary: bool = True

    def is_test_path(self, path: str) -> bool:
        return any(fnmatch.fnmatchcase(path, pat) for pat in self.test_paths)

    def is_excluded(self, path: str) -> bool:
        return any(fnmatch.fnmatchcase(path, pat) for pat in self.exclude_paths)

    def is_test_file(self, path: str) -> bool:
        """A test module pytest should run (not a helper or fixture file)."""
        name = path.rsplit("/", 1)[-1]
        return self.is_test_path(path) and any(fnmatch.fnmatchcase(name, p) for p in self.test_file_patterns)

    def classify(self, title: str, paths: list[str]) -> Family | None:
        """The family of a PR: a matching title tag wins, else the rule matching most changed paths."""
        tags = {t.strip().lower() for t in re.findall(r"\[([^\]]+)\]", title)}
        for rule in self.family_rules:
            if tags & {t.lower() for t in rule.title_tags}:
                return rule.family
        best, best_count = None, 0
        for rule in self.family_rules:
            count = sum(1 for p in paths if any(fnmatch.fnmatchcase(p, g) for g in rule.paths))
            if count > best_count:
                best, best_count = rule.family, count
        return best


def available() -> list[str]:
    return sorted(p.stem for p in PROFILE_DIR.glob("*.json"))


def _raw(name: str, seen: tuple[str, ...] = ()) -> dict:
    path = PROFILE_DIR / f"{name}.json"
    if not path.exists():
        raise SweserveError(f"unknown profile: {name} (known: {', '.join(available())})")
    if name in seen:
        raise SweserveError(f"{path}: 'extends' loops back to {name}")
    try:
        data = json.loads(path.read_text())
    except json.JSONDecodeError as exc:
        raise SweserveError(f"{path}: not valid JSON: {exc.msg} at line {exc.lineno}") from None
    parent = data.pop("extends", None)
    if parent:
        merged = _raw(parent, seen + (name,))
        merged.update(data)
        data = merged
    return data


def load_profile(name: str) -> RepoProfile:
    data = _raw(name)
    data["name"] = name
    try:
        return RepoProfile.model_validate(data)
    except ValidationError as exc:
        raise SweserveError(describe_validation_error(str(PROFILE_DIR / f"{name}.json"), exc)) from None
