"""Mining merged PRs from a local clone's first-parent history into candidate tasks.

The history is read in a few git processes (sweserve.dataset.gitio). A PR whose commits git cannot read
(a corrupt object, a shallow clone's boundary) is rejected with git's message and the others go on.
With clusters on, a PR and its follow-ups become one task (sweserve.dataset.clusters).
"""

from __future__ import annotations

import ast
import functools
import re
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, Field

from sweserve import pyast
from sweserve.dataset import ci_registration
from sweserve.dataset.clusters import Unit, group, leak, plan
from sweserve.dataset.gaps import enclosing_def
from sweserve.dataset.gitio import CommitInfo, FileChange, Git, GitError, count_lines
from sweserve.dataset.interface import statement_of
from sweserve.dataset.locking import Locker, LockStats, image_platform, image_python
from sweserve.dataset.patches import section_paths, split_sections, touched_paths
from sweserve.dataset.profiles import RepoProfile
from sweserve.dataset.readiness import assess
from sweserve.dataset.requirements import pr_dependencies
from sweserve.dataset.statement import StatementMaker, build_statement
from sweserve.dataset.taskstore import TEXT_FILES, load_bundle, load_task, save_bundle, save_task
from sweserve.errors import SweserveError
from sweserve.models import EnvironmentLock, LockRequest, Resources, Task, TaskBundle, TestSpec

SQUASH_RE = re.compile(r"^(?P<title>.+?)\s*\(#(?P<num>\d+)\)\s*$")
MERGE_RE = re.compile(r"^Merge pull request #(?P<num>\d+) from \S+")
TRAILER_RE = re.compile(r"^(Co-authored-by|Signed-off-by|Reviewed-by|Change-Id):", re.IGNORECASE)


@dataclass
class PRCommit:
    number: int
    title: str
    body: str
    commit: CommitInfo

    @property
    def base(self) -> str:
        parent = self.commit.parents[0]
        return parent if isinstance(parent, str) else parent.hexsha


@dataclass
class Split:
    tests: list[FileChange] = field(default_factory=list)
    code: list[FileChange] = field(default_factory=list)


@dataclass
class ClusterOptions:
    """How `mine --clusters` groups PRs: by shared files or references within a window, or explicitly."""

    window_days: float = 14
    groups: list[list[int]] = field(default_factory=list)


class MineReport(BaseModel):
    repo: str
    scanned: int = 0
    candidates: int = 0
    written: list[str] = Field(default_factory=list)
    existing: list[str] = Field(default_factory=list)
    updated: list[str] = Field(default_factory=list, description="re-mined: profile-derived fields changed, "
                               "validation kept")
    replaced: list[str] = Field(default_factory=list, description="re-mined: patches changed, validation dropped")
    rejected: dict[str, list[str]] = Field(default_factory=dict)
    notes: list[str] = Field(default_factory=list, description="what stopped or limited the walk, one line each")
    statement_sources: dict[str, int] = Field(default_factory=dict, description="written tasks per statement source")
    locks: LockStats | None = Field(None, description="profiles with lock: shared, own, resolved and cached locks")
    duration_s: float = 0.0

    def reject(self, reason: str, pr: PRCommit, detail: str | None = None) -> None:
        entry = f"#{pr.number} {pr.title}" + (f": {detail}" if detail else "")
        self.rejected.setdefault(reason, []).append(entry)


def parse_pr(commit, shallow: set[str] | frozenset[str] = frozenset()) -> PRCommit | None:
    """A PR number, title and body from a squash (`title (#N)`) or merge (`Merge pull request #N`) commit; a
    root commit is none (it has no base), unless it only looks like one at a shallow clone's boundary."""
    if not commit.parents and commit.hexsha not in shallow:
        return None
    return _parse_message(commit)


def _parse_message(commit) -> PRCommit | None:
    message = commit.message if isinstance(commit.message, str) else commit.message.decode("utf-8", "replace")
    lines = message.strip().splitlines()
    if not lines:
        return None
    first, rest = lines[0].strip(), lines[1:]
    m = MERGE_RE.match(first)
    if m and len(commit.parents) > 1:
        body_lines = [ln for ln in rest if ln.strip()]
        title = body_lines[0].strip() if body_lines else first
        body = "\n".join(rest).strip()
        body = body[len(title):].strip() if body.startswith(title) else body
        return PRCommit(int(m["num"]), title, _clean_body(body), commit)
    m = SQUASH_RE.match(first)
    if m:
        return PRCommit(int(m["num"]), m["title"].strip(), _clean_body("\n".join(rest)), commit)
    return None


def _clean_body(body: str) -> str:
    return "\n".join(ln for ln in body.strip().splitlines() if not TRAILER_RE.match(ln.strip())).strip()


def split_changes(profile: RepoProfile, changes: list[FileChange]) -> Split:
    split = Split()
    for change in changes:
        (split.tests if profile.is_test_path(change.path) else split.code).append(change)
    return split


def split_patch(patch: str, test_paths: set[str]) -> tuple[str, str]:
    """(code, tests): the sections of one diff touching a test path go to tests, the rest to code."""
    code: list[str] = []
    tests: list[str] = []
    for section in split_sections(patch):
        (tests if section_paths(section) & test_paths else code).append(section)
    return "".join(code), "".join(tests)


def instruction_text(pr: PRCommit) -> str:
    """The offline statement: title and cleaned commit message (see sweserve.dataset.statement)."""
    return build_statement(pr.title, pr.body).text


def unit_instruction(unit: Unit, first: bool = True) -> str:
    """The statement of a task: its PR's (unless first=False), then each follow-up's under its own heading."""
    text = instruction_text(unit.first) if first else ""
    for pr in unit.members[1:]:
        follow = instruction_text(pr).strip().split("\n", 1)
        text += f"\n## Follow-up: {pr.title}\n" + (f"\n{follow[1].strip()}\n" if len(follow) > 1 else "")
    return text


def task_id_for(repo_name: str, number: int) -> str:
    owner, name = repo_name.split("/", 1)
    return f"{owner}__{name}-{number}"


def unit_changes(profile: RepoProfile, unit: Unit) -> list[FileChange]:
    """The files a unit changes, excluded paths left out: one FileChange per final path, lines summed."""
    merged: dict[str, FileChange] = {}
    for pr in unit.members:
        for c in pr.commit.changes or []:
            if any(profile.is_excluded(p) for p in c.paths):
                continue
            prev = merged.get(c.path)
            if prev is None:
                merged[c.path] = FileChange(c.status, c.path, c.old_path, c.added, c.deleted, c.binary)
            else:
                prev.added, prev.deleted = prev.added + c.added, prev.deleted + c.deleted
                prev.binary, prev.status = prev.binary or c.binary, c.status
    return list(merged.values())


def resources_for(profile: RepoProfile, read, test_files: list[str]) -> Resources | str:
    """The task's resources: the profile's, then CI registration at the merge commit where the profile reads it;
    or why not."""
    resources = profile.resources.model_copy(deep=True)
    if not profile.ci_registration:
        return resources
    place = ci_registration.placement(read, test_files)
    if place is None:
        return resources
    if place.unsupported:
        return place.unsupported
    resources.gpus = place.gpus
    resources.hardware = place.hardware
    resources.gpu_memory_gb = float(ci_registration.GPU_MEMORY_GB.get(place.hardware or "", 0))
    if place.test_timeout_s:
        resources.test_timeout_s = place.test_timeout_s
    return resources


def base_functions(g: Git, base: str) -> Callable[[str, int], str | None]:
    """The function of a file at `base` that holds a line (`gaps.enclosing_def`), each file read and parsed once:
    the fix map's names of changed methods, which a hunk's header does not give."""
    @functools.lru_cache(maxsize=64)
    def tree(path: str) -> ast.Module | None:
        try:
            text = g.read(base, path)
            return pyast.parse_module(text) if text is not None else None
        except (GitError, SyntaxError, ValueError):
            return None
    return lambda path, line: enclosing_def(tree(path), line)


def build_unit(g: Git, profile: RepoProfile, unit: Unit, patch: bytes | None = None,
               statements: StatementMaker | None = None) -> TaskBundle | tuple[str, str | None]:
    """A task bundle for one PR or cluster, or (reason, detail) why it is rejected; patch: its diff if read;
    `statements` makes the first PR's problem statement (GitHub data, rewriting), else the commit message."""
    for pr in unit.members:
        if pr.commit.error:
            return "git_error", pr.commit.error
    base, head = unit.first.base, unit.last.commit.hexsha
    changes = unit_changes(profile, unit)
    split = split_changes(profile, changes)
    if not split.tests:
        return "no_tests", None
    if not split.code:
        return "tests_only", None
    if not profile.allow_binary and any(c.binary for c in split.code + split.tests):
        return "binary", None
    if sum(c.added + c.deleted for c in split.code) > profile.max_oracle_lines:
        return "too_large", None
    test_files = sorted(c.path for c in split.tests if c.status != "D" and profile.is_test_file(c.path))
    if not test_files:
        return ("non_python" if not any(c.path.endswith(".py") for c in split.tests) else "no_test_files"), None
    paths = sorted({p for c in changes for p in c.paths})
    if len(unit.members) > 1 and (why := leak(unit, set(paths))):
        return "cluster_interleaved", why
    family = profile.classification(unit.first.title, split.code, unit.first.number, tests=test_files)
    if family.family is None:
        return "unclassified", None
    try:
        text = patch.decode("utf-8") if patch is not None else g.diff(base, head, paths)
        resources = resources_for(profile, lambda p: g.read(head, p), test_files)
        dependencies = pr_dependencies(g, base, head, profile.dependency_files, profile.dependency_extras)
    except UnicodeDecodeError:
        return "undecodable", None
    except GitError as exc:
        return "git_error", str(exc)
    if isinstance(resources, str):
        return "unsupported_hardware", resources
    oracle, tests = split_patch(text, {p for c in split.tests for p in c.paths})
    task = Task(
        task_id=task_id_for(profile.repo, unit.first.number),
        repo=profile.repo,
        profile=profile.name,
        pr_number=unit.first.number,
        prs=unit.numbers if len(unit.members) > 1 else [],
        title=unit.first.title,
        base_commit=base,
        merge_commit=head,
        family=family.family,
        family_confidence=family.confidence,
        family_scores=family.scores,
        family_confident=family.confident,
        created_at=unit.last.commit.committed_datetime,
        resources=resources,
        dependencies=dependencies,
        test=TestSpec(files=test_files, workdir=profile.test_workdir, env=dict(profile.test_env), runner=profile.runner),
    )
    maker = replace(statements, min_chars=profile.min_statement_chars) if statements else \
        StatementMaker(profile.repo, min_chars=profile.min_statement_chars)
    statement = maker(unit.first.number, unit.first.title, unit.first.body, oracle, tests, base_functions(g, base))
    task.quality = statement.quality
    if statement.quality.labels:  # GitHub's labels are one more signal
        family = profile.classification(unit.first.title, split.code, unit.first.number, tests=test_files,
                                        labels=statement.quality.labels)
        if family.family is not None:
            task.family, task.family_confidence = family.family, family.confidence
            task.family_scores, task.family_confident = family.scores, family.confident
    return TaskBundle(task=task, instruction=statement.text + unit_instruction(unit, first=False), oracle_patch=oracle,
                      tests_patch=tests)


def open_repo(path: str | Path) -> Git:
    """The clone at path (its work tree's top folder, or a bare clone); one line when there is none."""
    g = Git(Path(path))
    try:
        if g.run("rev-parse", "--is-bare-repository").strip() == b"true":
            return g
        top = g.run("rev-parse", "--show-toplevel").decode("utf-8", "surrogateescape").strip()
    except (GitError, OSError):
        raise SweserveError(f"not a git repository: {path}") from None
    if Path(top).resolve() != Path(path).resolve():
        raise SweserveError(f"not a git repository: {path} (it is inside {top})")
    return g


def _prs(g: Git, commits: list[CommitInfo], report: MineReport, limit: int | None, on_progress) -> Iterator[PRCommit]:
    """PR commits of the walk (newest first), up to limit; a PR at a shallow boundary is rejected."""
    shallow = g.shallow_commits()
    for commit in commits:
        report.scanned += 1
        if on_progress:
            on_progress(report)
        pr = parse_pr(commit, shallow)
        if pr is None:
            continue
        if limit is not None and report.candidates >= limit:
            return
        report.candidates += 1
        if not commit.parents:
            report.reject("git_error", pr, "its parent is beyond the shallow clone's boundary (fetch more history)")
            continue
        yield pr


# Fields of a task that come from the profile and the repo, and may change when either does.
DERIVED = ("family", "family_confidence", "family_scores", "family_confident", "resources", "test", "dependencies", "lock", "lock_request", "prs", "title")


def store(tasks_dir: Path, bundle: TaskBundle, report: MineReport) -> None:
    """Write a new task; re-mined, update what changed, keeping validation while the patches are the same."""
    task_id = bundle.task.task_id
    task_dir = tasks_dir / task_id
    if not (task_dir / "task.json").exists():
        save_bundle(tasks_dir, bundle)
        report.written.append(task_id)
        return
    try:
        old = load_bundle(task_dir)
    except SweserveError:
        save_bundle(tasks_dir, bundle)
        report.replaced.append(task_id)
        return
    if (old.oracle_patch, old.tests_patch, old.task.base_commit) != (
            bundle.oracle_patch, bundle.tests_patch, bundle.task.base_commit):
        save_bundle(tasks_dir, bundle)
        report.replaced.append(task_id)
        return
    new = bundle.task
    if old.task.family_override:  # a family set by hand stays, whatever the rules say now
        new.family, new.family_confidence = old.task.family_override, old.task.family_confidence
        new.family_confident = True
    # what validation learnt about the hardware stays
    if old.task.resources.needs_accelerator:
        new.resources.needs_accelerator = old.task.resources.needs_accelerator
        if new.resources.needs_accelerator == "gpu":
            new.resources.gpus = max(new.resources.gpus, 1)
    updates = {f: getattr(new, f) for f in DERIVED if getattr(new, f) != getattr(old.task, f)}
    restated = statement_of(old.instruction) != statement_of(bundle.instruction)
    if restated:
        # a new statement (mined again with --github, or by a newer statement builder): what lint read of the
        # old one no longer holds, so the quality record is mining's until `tasks lint --write` runs again
        (task_dir / TEXT_FILES["instruction"]).write_text(bundle.instruction, encoding="utf-8")
        updates["quality"] = new.quality
    if not updates:
        report.existing.append(task_id)
        return
    task = old.task.model_copy(update=updates)
    if task.readiness is not None:  # readiness reads the quality and family records
        task.readiness = assess(task, bundle.instruction)
    save_task(task_dir, task)
    report.updated.append(task_id)


def mine(
    repo: Git,
    profile: RepoProfile,
    tasks_dir: Path,
    rev: str = "HEAD",
    since: str | None = None,
    limit: int | None = None,
    on_progress=None,
    clusters: ClusterOptions | None = None,
    statements: StatementMaker | None = None,
    lock_cache: Path | None = None,
    lock_when: Literal["mine", "build"] | None = None,
) -> MineReport:
    """Write a candidate task for every PR (or cluster of PRs) on rev's first-parent history that passes the filters."""
    started = time.monotonic()
    report = MineReport(repo=profile.repo)
    bundles: list[TaskBundle] = []
    with Git(repo.path) as g:  # its own processes, closed here
        commits, stopped = g.walk(rev, since)
        if stopped and not commits:
            raise SweserveError(f"cannot read history of {rev}: {stopped}")
        if stopped:
            report.notes.append(f"history read up to {commits[-1].hexsha[:12]} only: {stopped}")
        prs = list(_prs(g, commits, report, limit, on_progress))
        if clusters is not None:
            last = next((i for i, c in enumerate(commits) if prs and c is prs[-1].commit), -1)
            g.changes(commits[:last + 1])  # the commits between members are checked too
            history = list(reversed(commits[:last + 1]))
            units = plan(group(list(reversed(prs)), profile.is_test_path, clusters.window_days, clusters.groups),
                         history, clusters.groups)
            units.reverse()  # newest first, like the walk
        else:
            g.changes((pr.commit for pr in prs), numstat=False)  # line counts come from the patches below
            units = [Unit([pr]) for pr in prs]
        patches = g.patches([u.first.commit for u in units if len(u.members) == 1 and _may_be_task(profile, u)],
                            profile.exclude_paths)
        if clusters is None:
            for pr in prs:
                if pr.commit.hexsha in patches and pr.commit.changes:
                    count_lines(pr.commit.changes, patches[pr.commit.hexsha].decode("utf-8", "replace"))
        while units:
            unit = units.pop(0)
            patch = patches.get(unit.first.commit.hexsha) if len(unit.members) == 1 else None
            outcome = build_unit(g, profile, unit, patch, statements)
            if isinstance(outcome, tuple):
                reason, detail = outcome
                if len(unit.members) > 1 and not unit.explicit:
                    # a cluster found automatically that cannot be one task: its PRs go on alone
                    units[:0] = [Unit([pr]) for pr in reversed(unit.members)]
                    reason = reason if reason.startswith("cluster_") else f"cluster_{reason}"
                report.reject(reason, unit.first if len(unit.members) == 1 else _cluster_pr(unit), detail)
                continue
            bundles.append(outcome)
        newest = commits[0].committed_datetime if commits else None
    if profile.lock and bundles and newest is not None:
        lock_tasks(profile, tasks_dir, bundles, newest, lock_cache, report, lock_when or profile.lock_when)
    for bundle in bundles:
        store(tasks_dir, bundle, report)
        if report.written and report.written[-1] == bundle.task.task_id:
            source = bundle.task.quality.statement_source if bundle.task.quality else "title_only"
            report.statement_sources[source] = report.statement_sources.get(source, 0) + 1
    report.duration_s = round(time.monotonic() - started, 3)
    return report


def lock_tasks(profile: RepoProfile, tasks_dir: Path, bundles: list[TaskBundle], newest, cache: Path | None,
               report: MineReport, when: Literal["mine", "build"] = "mine") -> None:
    """Give each bundle its lock request (shared per epoch, own for a PR that changes its dependencies) and, with
    `when` 'mine', its lock; with 'build', only the locks the stored tasks or the cache already know: the others
    stay pending until an image needs them (`resolve_pending`)."""

    known: dict[str, Task | None] = {}

    def stored_task(task_id: str) -> Task | None:
        if task_id not in known:
            try:
                known[task_id] = load_task(tasks_dir / task_id)
            except SweserveError:
                known[task_id] = None
        return known[task_id]

    def stored(task_id: str) -> EnvironmentLock | None:
        task = stored_task(task_id)
        return task.lock if task is not None else None

    patches = {b.task.task_id: b.oracle_patch + b.tests_patch for b in bundles}
    deps = set(profile.dependency_files)
    locker = Locker(profile.env_packages, image_python(profile.base_image, profile.python), profile.index_options,
                    profile.lock_epoch, cache, image_platform(profile.base_image), stored)
    requests = locker.requests([b.task for b in bundles], lambda t: bool(touched_paths(patches[t.task_id]) & deps),
                               newest)
    answers = locker.settle(requests, offline=when == "build")
    for bundle in bundles:
        bundle.task.lock_request = requests[bundle.task.task_id]
        answer = answers[bundle.task.task_id]
        old = stored_task(bundle.task.task_id)
        if isinstance(answer, LockRequest) and old is not None and old.lock_request is not None \
                and old.lock_request.key == answer.key and not old.lock_pending:
            # settled by an earlier build (its epoch's lock after a failure, or unpinned): the same inputs, kept
            bundle.task.lock_request = old.lock_request
            answer = old.lock
            locker.stats.pending -= 1
            locker.stats.cached += 1
        bundle.task.lock = answer if isinstance(answer, EnvironmentLock) else None
    report.notes.extend(locker.notes)
    report.locks = locker.stats


def _may_be_task(profile: RepoProfile, unit: Unit) -> bool:
    """Worth reading the patch of, ahead of the checks in build_unit: it changes code and tests."""
    split = split_changes(profile, unit_changes(profile, unit))
    return bool(split.tests and split.code)


def _cluster_pr(unit: Unit) -> PRCommit:
    """A stand-in PR naming every member, for the rejection list."""
    numbers = " + ".join(f"#{n}" for n in unit.numbers[1:])
    return PRCommit(unit.first.number, f"{unit.first.title} (with {numbers})", "", unit.first.commit)

