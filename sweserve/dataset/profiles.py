"""Repo profiles: how a repository's PRs become tasks and how its tests run.

One JSON file per profile: given by path, or by name from the project's `.sweserve/profiles/` (or
`$SWESERVE_CONFIG_DIR/profiles/`) and then `builtin_profiles/` (see `sweserve.config_search`). A profile may
name another in ``extends``; its own keys then replace the parent's.
"""

from __future__ import annotations

import fnmatch
import functools
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Literal

from pydantic import Field, model_validator

from sweserve.config_search import ConfigSearch, looks_like_path
from sweserve.errors import SweserveError
from sweserve.loading import read_data, validate
from sweserve.models import Family, Resources, Strict

SUFFIXES = (".json",)


class FamilyRule(Strict):
    family: Family
    paths: list[str] = Field(default_factory=list, description="fnmatch globs; '*' crosses '/'")
    title_tags: list[str] = Field(default_factory=list, description="words in a '[tag]' or 'type(scope):' of the "
                                  "PR title")
    roles: list[str] = Field(default_factory=list, description="words naming modules by role, matched against the "
                             "words of a path ('tokenizer' in managers/tokenizer_manager.py; 'models/' only as a "
                             "folder) and of the title; a path's last matching word decides its family")
    labels: list[str] = Field(default_factory=list, description="GitHub label names (with --github)")


# How much each signal counts in a family's score (profile `family_weights` replaces any of them).
DEFAULT_FAMILY_WEIGHTS = {"paths": 3.0, "roles": 2.0, "tests": 1.5, "tags": 3.0, "title": 1.0, "labels": 2.0}
_WORD_SPLIT = re.compile(r"[^a-z0-9]+")


class RepoProfile(Strict):
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
    lock_epoch: Literal["pr", "week", "month", "quarter"] = Field(
        "month", description="tasks with the same requirements share one lock (and env image) per epoch, resolved "
        "as of its end; a PR that changes a dependency file is locked as of its own merge; 'pr': every task its own")
    lock_when: Literal["mine", "build"] = Field(
        "build", description="when locks are resolved: 'build' (lazy) records each task's lock inputs while mining "
        "and resolves a lock the first time an image needs it (or `sweserve locks resolve`); 'mine' resolves them "
        "all while mining. Lazy is the default: mining stays offline-fast and only the locks of the tasks one "
        "validates are resolved")
    heavy_packages: list[str] = Field(default_factory=list, description="the largest pinned packages (torch, "
                                      "jax, jaxlib): locks are grouped by their versions, and each group's most "
                                      "common lock is a shared env layer the group's other locks build thin "
                                      "layers on (one layer cannot hold two torch versions)")
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
    family_weights: dict[str, float] = Field(default_factory=dict, description="weight of each family signal "
                                             f"(keys {', '.join(DEFAULT_FAMILY_WEIGHTS)}); unset ones keep the default")
    family_min_score: float = Field(0.5, ge=0, le=1, description="a top family score below this is not confident")
    family_min_margin: float = Field(0.2, ge=0, le=1, description="top score minus the runner-up's below this is "
                                     "not confident")
    min_statement_chars: int = Field(150, ge=0, description="a shorter statement (or the title alone) is not "
                                     "ready-eligible unless --github or --rewrite-with enriches it")
    max_forge_odds: float = Field(0.25, gt=0, le=1, description="a validated task is ready only if code in a module "
                                  "the tests import passes all its FAIL_TO_PASS tests by guessing with at most these "
                                  "odds (evaluation/guard.py: 0.25 is one twin group no prior reads; 1 requires none)")
    max_oracle_lines: int = Field(2000, gt=0)
    allow_binary: bool = True
    resources: Resources = Field(default_factory=Resources, description="every mined task's resources before CI "
                                 "registration sets its GPUs, hardware and test timeout: e.g. a memory_gb for a "
                                 "repository whose tests need more than the 4 GB default (re-mining refreshes them)")

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

    def classification(self, title: str, changes: list, pr_number: int | None = None, tests: Sequence[str] = (),
                       labels: Sequence[str] = ()) -> "Classification":
        """The family of a PR from several signals, with per-family scores and a verdict.

        changes: the oracle's files, each a path (one line) or an object with ``path``, ``added`` and
        ``deleted``; tests: the hidden test files' paths; labels: the PR's GitHub labels. Signals, each a
        distribution over families (shares summing to 1 where it has any evidence):

        - ``paths``: changed lines under each rule's globs (each path to its most specific glob);
        - ``roles``: changed lines of files whose path words name a role (``entrypoints``, ``detokenizer``, …);
        - ``tests``: hidden test files whose path words name a role or match a rule's globs;
        - ``tags``: ``[tag]`` and conventional-commit ``type(scope):`` words of the title;
        - ``title``: other words of the title that name a role or a tag;
        - ``labels``: GitHub labels naming a rule's labels, tags or roles.

        Test names alone classify nothing. A family's score is the weighted sum of its shares over the weights
        of the signals that had evidence.
        The profile's ``family_overrides`` for the PR wins outright. ``confident``: the top score is at least
        ``family_min_score`` and leads the runner-up by ``family_min_margin`` (always true for an override),
        and at least one changed line lies under the winner's paths (a family that no changed line supports
        came from names alone: on the real samples these were CI-only changes and weight-loader fixes
        labelled by a title word). ``confidence`` is the winner's score, the same number ``scores`` holds
        (one source of truth); ``share(family)`` is its share of the changed lines.
        """
        lines: dict[str, int] = {}
        role_lines: dict[str, float] = {}
        total = 0
        for change in changes:
            path, weight = _path_and_lines(change)
            total += weight
            family = self.family_of_path(path)
            if family is not None:
                lines[family] = lines.get(family, 0) + weight
            role = self.family_of_role(path)
            if role is not None:
                role_lines[role] = role_lines.get(role, 0) + weight
        test_hits: dict[str, float] = {}
        for path in tests:
            family = self.family_of_role(path) or self.family_of_path(path)
            if family is not None:
                test_hits[family] = test_hits.get(family, 0) + 1
        tag_words, title_words = _title_words(title)
        tags: dict[str, float] = {}
        words: dict[str, float] = {}
        label_hits: dict[str, float] = {}
        label_words = [_words(label) for label in labels]
        for rule in self.family_rules:
            vocab = [_words(t) for t in rule.title_tags] + [_words(r.rstrip("/")) for r in rule.roles]
            if any(_contains(tag_words, v) for v in vocab):
                tags[rule.family] = tags.get(rule.family, 0) + 1
            n = sum(_contains(title_words, v) for v in vocab)
            if n:
                words[rule.family] = words.get(rule.family, 0) + n
            named = {label.strip().lower() for label in rule.labels}
            n = sum(label.strip().lower() in named or any(_contains(lw, v) for v in vocab)
                    for label, lw in zip(labels, label_words))
            if n:
                label_hits[rule.family] = label_hits.get(rule.family, 0) + n
        counts: list[tuple[str, dict[str, float]]] = [
            ("paths", {k: float(v) for k, v in lines.items()}), ("roles", role_lines), ("tests", test_hits),
            ("tags", tags), ("title", words), ("labels", label_hits)]
        signals = {name: _shares(d) for name, d in counts if d}
        weights = {**DEFAULT_FAMILY_WEIGHTS, **self.family_weights}
        fired = sum(weights.get(name, 0) for name in signals)
        scores: dict[str, float] = {}
        for name, dist in signals.items():
            for fam, share in dist.items():
                scores[fam] = scores.get(fam, 0) + weights.get(name, 0) * share / (fired or 1)
        scores = {f: round(v, 3) for f, v in scores.items() if v > 0}
        order: dict[str, int] = {r.family: i for i, r in reversed(list(enumerate(self.family_rules)))}
        ranked = sorted(scores, key=lambda fam: (-scores[fam], order.get(fam, len(order))))

        def result(family, source, confident):
            score = scores.get(family, 0.0) if family else 0.0
            return Classification(family=family, confidence=score, lines=lines, total=total, source=source,
                                   scores=dict(sorted(scores.items(), key=lambda kv: -kv[1])), signals=signals,
                                   confident=confident)

        if pr_number is not None and pr_number in self.family_overrides:
            return result(self.family_overrides[pr_number], "override", True)
        if not ranked or set(signals) <= {"tests"}:  # test names alone do not make a family
            return result(None, "none", False)
        best = ranked[0]
        top, second = scores[best], (scores[ranked[1]] if len(ranked) > 1 else 0.0)
        confident = top >= self.family_min_score and top - second >= self.family_min_margin and lines.get(best, 0) > 0
        source = max(signals, key=lambda name: weights.get(name, 0) * signals[name].get(best, 0))
        return result(best, {"tags": "title_tag"}.get(source, source), confident)

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

    def family_of_role(self, path: str) -> Family | None:
        """The family whose role word comes last in the path's words (a file beats its folder; a longer word
        beats a shorter one ending at the same place; the first rule on a tie). A folder role (``models/``)
        owns what lies under it: words after it count only in deeper folders, not in the file's name (a model
        file named ``bailing_moe.py`` stays a model)."""
        return _family_of_role(tuple((rule.family, tuple(rule.roles)) for rule in self.family_rules), path)


@functools.lru_cache(maxsize=16384)
def _family_of_role(rules: tuple[tuple[Family, tuple[str, ...]], ...], path: str) -> Family | None:
    """`RepoProfile.family_of_role` on the rules as plain values, memoized: mining asks it for the same paths
    again and again."""
    parts = path.lower().split("/")
    folders, name = parts[:-1], parts[-1]
    folder_roles = {role.rstrip("/").lower() for _, roles in rules for role in roles if role.endswith("/")}
    owned = max((i for i, folder in enumerate(folders) if folder in folder_roles), default=None)
    best: Family | None = None
    best_key = (-1, -1)
    offset = 0  # words before the current component
    for i, component in enumerate(folders + ([name] if owned is None else [])):
        words = _word_tuple(component)
        present = set(words)
        for family, roles in rules:
            for role in roles:
                if role.endswith("/"):
                    hit = len(words) - 1 if i < len(folders) and role.rstrip("/").lower() == component else -1
                    size = 1
                else:
                    needle = _word_tuple(role)
                    if not needle or needle[-1] not in present:
                        continue  # cheap: most roles share no word with most path components
                    hit, size = _last_end(words, needle), len(needle)
                key = (offset + hit, size)
                if hit >= 0 and key > best_key:
                    best, best_key = family, key
        offset += len(words)
    return best


@functools.lru_cache(maxsize=8192)
def _word_tuple(text: str) -> tuple[str, ...]:
    """A text's lower-case words; memoized, since mining asks for the same paths' and roles' words millions
    of times."""
    return tuple(w for w in _WORD_SPLIT.split(text.lower()) if w)


def _words(text: str) -> list[str]:
    return list(_word_tuple(text))


def _last_end(words: Sequence[str], needle: Sequence[str]) -> int:
    """The index of the last word of needle's last occurrence in words, or -1."""
    n = len(needle)
    for i in range(len(words) - n, -1, -1):
        if n and words[i:i + n] == needle:
            return i + n - 1
    return -1


def _contains(words: Sequence[str], needle: Sequence[str]) -> bool:
    return _last_end(words, needle) >= 0


_TAG = re.compile(r"\[([^\]]+)\]")
_SCOPE = re.compile(r"^\s*\w+\(([^)]+)\)!?:")


def _title_words(title: str) -> tuple[list[str], list[str]]:
    """(words of the title's [tags] and conventional-commit scope, the other words)."""
    tags = [t for t in _TAG.findall(title)]
    scope = _SCOPE.match(title)
    if scope:
        tags.append(scope[1])
    rest = _SCOPE.sub(" ", _TAG.sub(" ", title))
    tag_words: list[str] = []
    for tag in tags:
        tag_words += _words(tag) + ["|"]  # a separator: no word sequence spans two tags
    return tag_words, _words(rest)


def _shares(counts: dict[str, float]) -> dict[str, float]:
    total = sum(counts.values())
    return {k: round(v / total, 3) for k, v in counts.items() if v > 0} if total else {}


class Classification(Strict):
    family: Family | None
    confidence: float = Field(ge=0, le=1, description="the winning family's score (as in scores)")
    lines: dict[str, int] = Field(default_factory=dict, description="changed lines per family")
    total: int = Field(0, description="changed lines in all")
    source: Literal["override", "title_tag", "paths", "roles", "tests", "title", "labels", "none"] = Field(
        description="the signal that gave the winner most of its score")
    scores: dict[str, float] = Field(default_factory=dict, description="family -> weighted score in [0, 1]")
    signals: dict[str, dict[str, float]] = Field(default_factory=dict, description="signal -> family -> share")
    confident: bool = Field(False, description="the top score is high enough and far enough ahead of the next")

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
    data = read_data(source, "JSON", "profile")
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
    return validate(RepoProfile, data, source)


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
