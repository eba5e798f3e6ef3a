"""Mining merged PRs from a local clone's first-parent history into candidate tasks."""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import git
from pydantic import BaseModel, Field

from sweserve.dataset.profiles import RepoProfile
from sweserve.dataset.requirements import dependency_set
from sweserve.dataset.statement import StatementMaker, build_statement
from sweserve.dataset.taskstore import save_bundle
from sweserve.errors import SweserveError
from sweserve.models import Resources, Task, TaskBundle, TestSpec

SQUASH_RE = re.compile(r"^(?P<title>.+?)\s*\(#(?P<num>\d+)\)\s*$")
MERGE_RE = re.compile(r"^Merge pull request #(?P<num>\d+) from \S+")
TRAILER_RE = re.compile(r"^(Co-authored-by|Signed-off-by|Reviewed-by|Change-Id):", re.IGNORECASE)


@dataclass
class PRCommit:
    number: int
    title: str
    body: str
    commit: git.Commit

    @property
    def base(self) -> git.Commit:
        return self.commit.parents[0]


@dataclass
class FileChange:
    status: str  # A, M, D, R, C, T
    path: str  # new path (old path for a deletion)
    old_path: str | None = None
    added: int = 0
    deleted: int = 0
    binary: bool = False

    @property
    def paths(self) -> list[str]:
        return [p for p in (self.old_path, self.path) if p]


@dataclass
class Split:
    tests: list[FileChange] = field(default_factory=list)
    code: list[FileChange] = field(default_factory=list)


class MineReport(BaseModel):
    repo: str
    scanned: int = 0
    candidates: int = 0
    written: list[str] = Field(default_factory=list)
    existing: list[str] = Field(default_factory=list)
    rejected: dict[str, list[str]] = Field(default_factory=dict)
    statement_sources: dict[str, int] = Field(default_factory=dict, description="written tasks per statement source")
    duration_s: float = 0.0

    def reject(self, reason: str, pr: PRCommit) -> None:
        self.rejected.setdefault(reason, []).append(f"#{pr.number} {pr.title}")


def parse_pr(commit: git.Commit) -> PRCommit | None:
    """A PR number, title and body from a squash (`title (#N)`) or merge (`Merge pull request #N`) commit."""
    if not commit.parents:
        return None
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


def iter_prs(repo: git.Repo, rev: str = "HEAD", since: str | None = None) -> Iterator[tuple[git.Commit, PRCommit | None]]:
    kwargs = {"first_parent": True}
    if since:
        kwargs["since"] = since
    try:
        commits = repo.iter_commits(rev, **kwargs)
        for commit in commits:
            yield commit, parse_pr(commit)
    except git.GitCommandError as exc:
        raise SweserveError(f"cannot read history of {rev}: {exc.stderr.strip() or exc}") from None


def _git_bytes(repo: git.Repo, *args: str) -> bytes:
    return repo.git.execute(["git", *args], stdout_as_string=False, strip_newline_in_stdout=False)


def file_changes(repo: git.Repo, base: str, head: str) -> list[FileChange]:
    tokens = _git_bytes(repo, "diff", "--name-status", "-M", "-z", base, head).decode("utf-8", "surrogateescape").split("\0")
    changes: dict[str, FileChange] = {}
    i = 0
    while i < len(tokens) and tokens[i]:
        status = tokens[i][0]
        if status in "RC":
            old, new = tokens[i + 1], tokens[i + 2]
            changes[new] = FileChange(status, new, old_path=old)
            i += 3
        else:
            changes[tokens[i + 1]] = FileChange(status, tokens[i + 1])
            i += 2
    numstat = _git_bytes(repo, "diff", "--numstat", "-M", "-z", base, head).decode("utf-8", "surrogateescape").split("\0")
    i = 0
    while i < len(numstat) and numstat[i]:
        added, deleted, path = numstat[i].split("\t", 2)
        if path == "":  # rename: old and new follow
            path = numstat[i + 2]
            i += 3
        else:
            i += 1
        change = changes.get(path)
        if change is None:
            continue
        if added == "-":
            change.binary = True
        else:
            change.added, change.deleted = int(added), int(deleted)
    return list(changes.values())


def split_changes(profile: RepoProfile, changes: list[FileChange]) -> Split:
    split = Split()
    for change in changes:
        (split.tests if profile.is_test_path(change.path) else split.code).append(change)
    return split


def make_patch(repo: git.Repo, base: str, head: str, changes: list[FileChange]) -> str:
    """A `git apply`-able patch (binary hunks included) of just these changes."""
    if not changes:
        return ""
    paths = sorted({p for c in changes for p in c.paths})
    raw = _git_bytes(repo, "diff", "--binary", "--full-index", "-M", base, head, "--", *paths)
    return raw.decode("utf-8")  # UnicodeDecodeError is turned into a rejection by the caller


def instruction_text(pr: PRCommit) -> str:
    """The offline statement: title and cleaned commit message (see sweserve.dataset.statement)."""
    return build_statement(pr.title, pr.body).text


def task_id_for(repo_name: str, number: int) -> str:
    owner, name = repo_name.split("/", 1)
    return f"{owner}__{name}-{number}"


def build_candidate(repo: git.Repo, profile: RepoProfile, pr: PRCommit,
                    statements: StatementMaker | None = None) -> TaskBundle | str:
    """A task bundle for this PR, or the reason it is rejected; `statements` makes its problem statement."""
    base, head = pr.base.hexsha, pr.commit.hexsha
    split = split_changes(profile, file_changes(repo, base, head))
    if not split.tests:
        return "no_tests"
    if not split.code:
        return "tests_only"
    if not profile.allow_binary and any(c.binary for c in split.code + split.tests):
        return "binary"
    if sum(c.added + c.deleted for c in split.code) > profile.max_oracle_lines:
        return "too_large"
    test_files = sorted(c.path for c in split.tests if c.status != "D" and profile.is_test_file(c.path))
    if not test_files:
        return "non_python" if not any(c.path.endswith(".py") for c in split.tests) else "no_test_files"
    family = profile.classification(pr.title, split.code, pr.number)
    if family.family is None:
        return "unclassified"
    try:
        oracle = make_patch(repo, base, head, split.code)
        tests = make_patch(repo, base, head, split.tests)
    except UnicodeDecodeError:
        return "undecodable"
    statement = (statements or StatementMaker(profile.repo))(pr.number, pr.title, pr.body, oracle, tests)
    task = Task(
        task_id=task_id_for(profile.repo, pr.number),
        repo=profile.repo,
        profile=profile.name,
        pr_number=pr.number,
        title=pr.title,
        base_commit=base,
        merge_commit=head,
        family=family.family,
        family_confidence=family.confidence,
        created_at=pr.commit.committed_datetime,
        resources=Resources(),
        dependencies=dependency_set(repo, base, profile.dependency_files, profile.dependency_extras),
        test=TestSpec(files=test_files, workdir=profile.test_workdir, env=dict(profile.test_env), runner=profile.runner),
        quality=statement.quality,
    )
    return TaskBundle(task=task, instruction=statement.text, oracle_patch=oracle, tests_patch=tests)


def open_repo(path: str | Path) -> git.Repo:
    try:
        return git.Repo(path)
    except (git.NoSuchPathError, git.InvalidGitRepositoryError):
        raise SweserveError(f"not a git repository: {path}") from None


def mine(
    repo: git.Repo,
    profile: RepoProfile,
    tasks_dir: Path,
    rev: str = "HEAD",
    since: str | None = None,
    limit: int | None = None,
    on_progress=None,
    statements: StatementMaker | None = None,
) -> MineReport:
    """Write a candidate task for every PR on rev's first-parent history that passes the filters.

    `statements` makes each task's statement (GitHub data, rewriting); without it, from the commit message."""
    started = time.monotonic()
    report = MineReport(repo=profile.repo)
    for commit, pr in iter_prs(repo, rev, since):
        report.scanned += 1
        if on_progress:
            on_progress(report)
        if pr is None:
            continue
        if limit is not None and report.candidates >= limit:
            break
        report.candidates += 1
        if (tasks_dir / task_id_for(profile.repo, pr.number) / "task.json").exists():  # before any GitHub/model call
            report.existing.append(task_id_for(profile.repo, pr.number))
            continue
        outcome = build_candidate(repo, profile, pr, statements)
        if isinstance(outcome, str):
            report.reject(outcome, pr)
            continue
        save_bundle(tasks_dir, outcome)
        report.written.append(outcome.task.task_id)
        source = outcome.task.quality.statement_source if outcome.task.quality else "title_only"
        report.statement_sources[source] = report.statement_sources.get(source, 0) + 1
    report.duration_s = round(time.monotonic() - started, 3)
    return report
