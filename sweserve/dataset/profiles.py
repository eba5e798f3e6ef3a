"""Repo profiles: how a repository's PRs become tasks and how its tests run.

One JSON file per profile: given by path, or by name from the project's `.sweserve/profiles/` (or
`$SWESERVE_CONFIG_DIR/profiles/`) and then `builtin_profiles/` (see `sweserve.config_search`). A profile may
name another in ``extends``; its own keys then replace the parent's.
"""

from __future__ import annotations

import fnmatch
import json
import re
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from sweserve.config_search import ConfigSearch, looks_like_path
from sweserve.errors import SweserveError, describe_validation_error
from sweserve.models import Family

SUFFIXES = (".json",)


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
    index_url: str | None = Field(None, description="package index the env image installs from, e.g. a CPU-only "
                                  "torch index (default: pip's, PyPI)")
    constraints: list[str] = Field(default_factory=list, description="lines of a pip constraints file applied to "
                                   "every install into the env image (pins without adding packages)")
    history: Literal["none", "ancestors"] = Field("none", description="git history in task images: 'none' keeps the "
                                                  "base commit alone (a shallow repository, same commit id), "
                                                  "'ancestors' keeps every ancestor of it")
    test_paths: list[str] = Field(description="fnmatch globs of files that count as tests")
    test_file_patterns: list[str] = Field(default_factory=lambda: ["test_*.py", "*_test.py"])
    test_workdir: str = "."
    runner: Literal["pytest", "unittest"] = "pytest"
    test_env: dict[str, str] = Field(default_factory=dict)
    pytest_plugins: list[str] = Field(default_factory=list, description="plugin modules of the env image loaded "
                                      "with -p when grading; autoloading is off, so no other plugin loads")
    family_rules: list[FamilyRule]
    family_overrides: dict[int, Family] = Field(default_factory=dict, description="PR number -> family; wins "
                                                "over rules and title tags")
    exclude_paths: list[str] = Field(default_factory=list, description="fnmatch globs of files left out of "
                                     "tasks (large data files): never in an oracle or tests patch")
    ci_registration: bool = Field(False, description="read resources and test time limits from SGLang-style "
                                  "CI registration (register_*_ci calls, run_suite.py suite lists)")
    max_oracle_lines: int = Field(2000, gt=0)
    allow_binary: bool = True

    @model_validator(mode="before")
    @classmethod
    def _no_fail_on_flags(cls, data):
        if isinstance(data, dict) and "fail_on_flags" in data:
            raise ValueError("fail_on_flags was removed: the tamper scan's flags are a reviewer's aid and no grade "
                             "depends on them (see the README's 'Grading and its defences'); delete the key")
        return data

    def is_test_path(self, path: str) -> bool:
        return any(fnmatch.fnmatchcase(path, pat) for pat in self.test_paths)

    def is_excluded(self, path: str) -> bool:
        return any(fnmatch.fnmatchcase(path, pat) for pat in self.exclude_paths)

    def is_test_file(self, path: str) -> bool:
        """A test module pytest should run (not a helper or fixture file)."""
        name = path.rsplit("/", 1)[-1]
        return self.is_test_path(path) and any(fnmatch.fnmatchcase(name, p) for p in self.test_file_patterns)

    def classification(self, title: str, changes: list, pr_number: int | None = None) -> "Classification":
        """The family of a PR, weighted by changed lines, with how sure the paths make it.

        changes: the oracle's files, each a path (one line) or an object with ``path``, ``added`` and
        ``deleted``. Order of precedence: this profile's ``family_overrides`` for the PR, a ``[tag]`` of the
        title, then the family whose paths hold most changed lines. Each path counts for the one rule glob
        that matches it most specifically (most literal characters), so ``layers/*sampler*`` beats
        ``layers/*``. confidence is the winning family's share of all changed lines.
        """
        lines: dict[str, int] = {}
        total = 0
        for change in changes:
            path, weight = _path_and_lines(change)
            total += weight
            family = self.family_of_path(path)
            if family is not None:
                lines[family] = lines.get(family, 0) + weight

        def result(family, source):
            share = round(lines.get(family, 0) / total, 3) if total and family else 0.0
            return Classification(family=family, confidence=share, lines=lines, total=total, source=source)

        if pr_number is not None and pr_number in self.family_overrides:
            return result(self.family_overrides[pr_number], "override")
        tags = {t.strip().lower() for t in re.findall(r"\[([^\]]+)\]", title)}
        for rule in self.family_rules:
            if tags & {t.lower() for t in rule.title_tags}:
                return result(rule.family, "title_tag")
        order = {r.family: i for i, r in reversed(list(enumerate(self.family_rules)))}
        best = max(lines, key=lambda fam: (lines[fam], -order[fam]), default=None)
        if best is None or lines[best] == 0:
            return result(None, "none")
        return result(best, "paths")

    def classify(self, title: str, changes: list) -> Family | None:
        """The family of a PR (see classification)."""
        return self.classification(title, changes).family

    def family_of_path(self, path: str) -> Family | None:
        """The family of the rule glob that matches this path most specifically (first rule on a tie)."""
        best, best_score = None, -1
        for rule in self.family_rules:
            for glob in rule.paths:
                if fnmatch.fnmatchcase(path, glob):
                    score = len(re.sub(r"[*?]|\[[^\]]*\]", "", glob))
                    if score > best_score:
                        best, best_score = rule.family, score
        return best


class Classification(BaseModel):
    model_config = ConfigDict(extra="forbid")
    family: Family | None
    confidence: float = Field(ge=0, le=1)
    lines: dict[str, int] = Field(default_factory=dict, description="changed lines per family")
    total: int = Field(0, description="changed lines in all")
    source: Literal["override", "title_tag", "paths", "none"]

    def share(self, family: str | None) -> float:
        """The family's share of all changed lines."""
        return round(self.lines.get(family, 0) / self.total, 3) if self.total and family else 0.0


def _path_and_lines(change) -> tuple[str, int]:
    if isinstance(change, str):
        return change, 1
    return change.path, max(int(change.added) + int(change.deleted), 1)


def available(search: ConfigSearch) -> list[str]:
    return search.names("profiles", SUFFIXES)


def _locate(spec: str, search: ConfigSearch):
    if looks_like_path(spec, SUFFIXES):
        path = Path(spec)
        if not path.is_file():
            raise SweserveError(f"{spec}: no such profile file")
        return path
    found = search.find("profiles", spec, SUFFIXES)
    if found is None:
        raise SweserveError(f"unknown profile: {spec} (known: {', '.join(available(search))})")
    return found


def _raw(spec: str, search: ConfigSearch, seen: tuple[str, ...] = ()) -> tuple[dict, str]:
    """The profile's merged keys and the file it came from."""
    source = _locate(spec, search)
    name = source.name.rsplit(".", 1)[0]
    if name in seen:
        raise SweserveError(f"{source}: 'extends' loops back to {name}")
    try:
        data = json.loads(source.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        why = f"{exc.msg} at line {exc.lineno}" if isinstance(exc, json.JSONDecodeError) else "not UTF-8"
        raise SweserveError(f"{source}: not valid JSON: {why}") from None
    if not isinstance(data, dict):
        raise SweserveError(f"{source}: a profile must be a JSON object")
    parent = data.pop("extends", None)
    if parent:
        merged, _ = _raw(parent, search, seen + (name,))
        merged.update(data)
        data = merged
    return data, str(source)


def load_profile(spec: str, search: ConfigSearch | None = None) -> RepoProfile:
    """A profile by path or name; its name is the file's stem."""
    search = search or ConfigSearch.for_project()
    data, source = _raw(spec, search)
    data["name"] = Path(source).stem
    try:
        return RepoProfile.model_validate(data)
    except ValidationError as exc:
        raise SweserveError(describe_validation_error(source, exc)) from None


def keep_profile_file(spec: str, search: ConfigSearch) -> Path | None:
    """A profile given by path is copied into the project's profiles folder, so tasks can name it later.

    Returns where it was kept (None when it was given by name or is there already); a different profile of
    the same name there is an error rather than silently replaced.
    """
    if not looks_like_path(spec, SUFFIXES) or search.user_dir is None:
        return None
    source = Path(spec)
    target = search.user_dir / "profiles" / source.name
    if target.exists() and target.resolve() == source.resolve():
        return None
    text = source.read_text(encoding="utf-8")
    if target.exists():
        if target.read_text(encoding="utf-8") == text:
            return None
        raise SweserveError(f"{target} is another profile named {source.stem}: rename one of them")
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(text, encoding="utf-8")
    return target
