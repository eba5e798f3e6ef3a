"""Reading a clone's history in few git processes: the walk, every commit's file changes, file contents.

Spawning a git process per commit was most of mining's time, so:

* ``walk`` reads the first-parent history (ids, parents, dates, messages) with one ``git log``;
* ``changes`` reads the file changes of many (commit, parent) pairs with one ``git diff-tree --stdin``;
  a commit whose objects cannot be read (a corrupt or missing object) gets a ``GitError`` of its own while
  the others go on;
* ``read`` takes files at a commit from one long-lived ``git cat-file --batch``.

Every failure carries git's own last message line.
"""

from __future__ import annotations

import subprocess
import tempfile
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import IO

from sweserve.gitcmd import GitError, last_line, run_git

__all__ = ["CommitInfo", "FileChange", "Git", "GitError", "count_lines", "last_line"]

_SEP_COMMIT, _SEP_FIELD = "\x1e", "\x1f"
_LOG_FORMAT = "%x1e%H%x1f%P%x1f%ct%x1f%B"




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

    @property
    def lines(self) -> int:
        return self.added + self.deleted


@dataclass
class CommitInfo:
    """One commit of the walk; attribute names follow GitPython's Commit where they overlap."""

    hexsha: str
    parents: list[str]
    committed_datetime: datetime
    message: str
    changes: list[FileChange] | None = None  # filled by Git.changes
    error: str | None = None  # why its changes could not be read


@dataclass
class Git:
    """A clone read through a few long-lived or batched git processes."""

    path: Path
    _cat: subprocess.Popen[bytes] | None = field(default=None, repr=False)
    _cat_errors: IO[bytes] | None = field(default=None, repr=False)

    def _cmd(self, *args: str) -> list[str]:
        return ["git", "-C", str(self.path), "-c", "core.quotepath=off", *args]

    def run(self, *args: str, input: bytes | None = None) -> bytes:
        return run_git("-c", "core.quotepath=off", *args, repo=self.path, input=input)

    def shallow_commits(self) -> set[str]:
        """Commits at a shallow clone's boundary: their parents are not in the clone."""
        try:
            git_dir = Path(self.run("rev-parse", "--absolute-git-dir").decode().strip())
        except GitError:
            return set()
        shallow = git_dir / "shallow"
        return set(shallow.read_text().split()) if shallow.exists() else set()

    # -- the walk ---------------------------------------------------------------------------------------

    def walk(self, rev: str = "HEAD", since: str | None = None) -> tuple[list[CommitInfo], str | None]:
        """rev's first-parent history, newest first, and git's message if it stopped early."""
        args = ["log", "--first-parent", f"--format={_LOG_FORMAT}", "--end-of-options", rev]
        if since:
            args.insert(1, f"--since={since}")
        proc = subprocess.run(self._cmd(*args), capture_output=True)
        commits = list(_parse_log(proc.stdout.decode("utf-8", "replace")))
        if proc.returncode != 0:
            return commits, last_line(proc.stderr, f"git log exited {proc.returncode}")
        return commits, None

    # -- file changes -----------------------------------------------------------------------------------

    def changes(self, commits: Iterable[CommitInfo], numstat: bool = True) -> None:
        """Fill each commit's changes against its first parent; a commit git cannot diff gets .error.

        Without numstat only names and statuses are read (no file contents but rename candidates): much
        faster; count_lines can fill the line counts from the patches read later."""
        pending = [c for c in commits if c.parents and c.changes is None and c.error is None]

        def keep(commit: CommitInfo, raw: bytes) -> None:
            commit.changes = _parse_changes(raw.decode("utf-8", "surrogateescape"))

        args = ["-z", "--raw", "--numstat"] if numstat else ["-z", "--raw"]
        for commit, err in self._per_commit(pending, args, keep):
            commit.changes, commit.error = None, err

    def patches(self, commits: Iterable[CommitInfo], exclude: Sequence[str] = ()) -> dict[str, bytes]:
        """Each commit's patch against its first parent (binary hunks in), paths matching exclude left out;
        a commit git cannot diff is left out too."""
        out: dict[str, bytes] = {}
        pending = [c for c in commits if c.parents and c.error is None]
        args = ["-p", "--binary", "--full-index"]
        if exclude:
            args += ["--", ".", *(f":(exclude){pat}" for pat in exclude)]

        def keep(commit: CommitInfo, raw: bytes) -> None:
            out[commit.hexsha] = raw

        for commit, _ in self._per_commit(pending, args, keep):
            out.pop(commit.hexsha, None)
        return out

    def _per_commit(self, commits: list[CommitInfo], args: list[str], keep) -> Iterator[tuple[CommitInfo, str]]:
        """Run `git diff-tree --stdin` over commits in as few processes as git allows, calling keep(commit,
        output) for each; yields (commit, git's message) for each commit git could not diff."""
        pending = list(commits)
        while pending:
            done, err = self._diff_tree(pending, args, keep)
            if err is None:
                return
            # The batch died on a commit: all but the last one printed are complete. Retry the first
            # unfinished one alone to tell whether it is the bad one, then go on after it.
            pending = pending[max(done - 1, 0):]
            suspect = pending.pop(0)
            _, err = self._diff_tree([suspect], args, keep)
            if err is not None:
                yield suspect, err

    def _diff_tree(self, commits: list[CommitInfo], args: list[str], keep) -> tuple[int, str | None]:
        """One `git diff-tree --stdin` over commits; how many got output, and git's message if it failed."""
        stdin = "".join(f"{c.hexsha} {c.parents[0]}\n" for c in commits).encode()
        pathspec = args[args.index("--"):] if "--" in args else []
        options = args[:len(args) - len(pathspec)]
        proc = subprocess.run(
            self._cmd("diff-tree", "--stdin", "--always", "-r", "-M", "--no-abbrev", *options, *pathspec),
            input=stdin, capture_output=True,
        )
        chunks = _split_by_commit(proc.stdout, [c.hexsha for c in commits], nul="-z" in options)
        for commit, raw in zip(commits, chunks):
            keep(commit, raw)
        if proc.returncode != 0:
            return len(chunks), last_line(proc.stderr, f"git diff-tree exited {proc.returncode}")
        return len(chunks), None

    def diff(self, base: str, head: str, paths: list[str] | None = None) -> str:
        """A `git apply`-able patch from base to head (binary hunks included)."""
        args = ["diff", "--binary", "--full-index", "-M", base, head]
        if paths is not None:
            args += ["--", *paths]
        return self.run(*args).decode("utf-8")  # UnicodeDecodeError is the caller's to handle

    # -- whole trees ------------------------------------------------------------------------------------

    def tree_blobs(self, commit: str) -> dict[str, str]:
        """{path: blob id} of every file in commit's tree (submodules left out); GitError when git cannot
        read the commit or one of its trees."""
        return {path: meta[2] for path, meta in self._ls_tree(commit, long=False).items()}

    def tree_sizes(self, commit: str) -> dict[str, tuple[str, int]]:
        """{path: (blob id, size in bytes)} of every file in commit's tree (submodules left out): a reader can
        leave large blobs unread. GitError when git cannot read the commit, one of its trees or a blob's size."""
        return {path: (meta[2], int(meta[3])) for path, meta in self._ls_tree(commit, long=True).items()
                if meta[3].isdigit()}

    def _ls_tree(self, commit: str, long: bool) -> dict[str, list[str]]:
        """{path: [mode, type, id(, size)]} of each blob of commit's tree (`git ls-tree -r`, `-l` with long)."""
        raw = self.run("ls-tree", "-r", "-z", *(["-l"] if long else []), "--full-tree", "--end-of-options",
                       commit).decode("utf-8", "replace")
        blobs = {}
        for entry in raw.split("\0"):
            meta, _, path = entry.partition("\t")
            parts = meta.split()
            if len(parts) == (4 if long else 3) and parts[1] == "blob":
                blobs[path] = parts
        return blobs

    def history_blobs(self, commit: str) -> dict[str, tuple[str, int]]:
        """{blob id: (the path it was first seen at, size in bytes)} of every file version in commit and its
        ancestors (`git rev-list --objects`): what a repository kept with its history holds. GitError when git
        cannot walk the history or size an object."""
        named: dict[str, str] = {}
        for line in self.run("rev-list", "--objects", "--missing=allow-any", "--end-of-options", commit).decode("utf-8", "replace").splitlines():
            oid, _, path = line.partition(" ")
            if path:
                named.setdefault(oid, path)
        if not named:
            return {}
        out = {}
        for line in self._batch_check(named, "=%(objectname) %(objecttype) %(objectsize)").stdout.decode().splitlines():
            parts = line.split()
            if len(parts) == 3 and parts[1] == "blob" and parts[2].isdigit():
                out[parts[0]] = (named[parts[0]], int(parts[2]))
        return out

    def _batch_check(self, ids: Iterable[str], format: str = "") -> subprocess.CompletedProcess[bytes]:
        """One `git cat-file --batch-check[=format]` over `ids`; GitError when it fails."""
        proc = subprocess.run(self._cmd("cat-file", f"--batch-check{format}"),
                              input="".join(f"{i}\n" for i in ids).encode(), capture_output=True)
        if proc.returncode != 0:
            raise GitError(last_line(proc.stderr, f"git cat-file exited {proc.returncode}"))
        return proc

    def unreadable_blobs(self, commit: str) -> dict[str, str]:
        """{path: why} for the files of commit's tree whose objects git cannot read (missing, or corrupt
        beyond reading their header): one `git cat-file --batch-check` over the whole tree."""
        blobs = self.tree_blobs(commit)
        ids = sorted(set(blobs.values()))
        if not ids:
            return {}
        proc = self._batch_check(ids)
        bad = {line.split()[0] for line in proc.stdout.decode().splitlines() if line.endswith(" missing")}
        if not bad:
            return {}
        errors = proc.stderr.decode("utf-8", "replace")
        why = {}
        for path, blob in blobs.items():
            if blob in bad:
                said = [ln for ln in errors.splitlines() if blob in ln]
                why[path] = last_line("\n".join(said)) if said else f"object {blob[:12]} is missing"
        return why

    # -- file contents ----------------------------------------------------------------------------------

    def read(self, commit: str, path: str) -> str | None:
        """The text of path at commit, None when it is not there; GitError when git cannot read it."""
        data = self.read_bytes(commit, path)
        return None if data is None else data.decode("utf-8", "replace")

    def read_bytes(self, commit: str, path: str) -> bytes | None:
        if "\n" in path:
            return None
        return self._object(f"{commit}:{path}", f"cannot read {path} at {commit[:12]}")

    def read_blob_bytes(self, blob: str) -> bytes | None:
        """A blob by its id (`tree_blobs` gives them), None when it is not there."""
        if not blob or "\n" in blob:
            return None
        return self._object(blob, f"cannot read blob {blob[:12]}")

    def _object(self, spec: str, failure: str) -> bytes | None:
        cat, errors = self._cat_process()
        seen = errors.tell()
        try:
            cat.stdin.write(f"{spec}\n".encode())
            cat.stdin.flush()
            header = cat.stdout.readline().decode()
            parts = header.split()
            if len(parts) == 3 and parts[1] in ("blob", "tree", "commit", "tag"):
                size = int(parts[2])
                data = cat.stdout.read(size)
                cat.stdout.read(1)
                if len(data) != size:
                    raise BrokenPipeError
                return data if parts[1] == "blob" else None
            if not header.endswith(("missing\n", "ambiguous\n")):
                raise BrokenPipeError
        except (BrokenPipeError, ValueError, OSError):
            self.close()
            raise GitError(self._errors_since(errors, seen) or failure) from None
        # cat-file answers "missing" for an object it cannot unpack too, and says why on stderr
        if (why := self._errors_since(errors, seen)):
            raise GitError(why)
        return None

    @staticmethod
    def _errors_since(errors, offset: int) -> str:
        errors.flush()
        errors.seek(offset)
        text = errors.read()
        errors.seek(0, 2)
        return last_line(text) if text.strip() else ""

    def _cat_process(self):
        if self._cat is None or self._cat.poll() is not None:
            self.close()
            self._cat_errors = tempfile.TemporaryFile()
            self._cat = subprocess.Popen(self._cmd("cat-file", "--batch"), stdin=subprocess.PIPE,
                                         stdout=subprocess.PIPE, stderr=self._cat_errors)
        return self._cat, self._cat_errors

    def close(self) -> None:
        if self._cat is not None:
            cat, self._cat = self._cat, None
            assert cat.stdin is not None and cat.stdout is not None  # both pipes, opened by _cat_process
            try:
                cat.stdin.close()
            except OSError:
                pass
            try:
                cat.wait(timeout=10)
            except subprocess.TimeoutExpired:
                cat.kill()
                cat.wait()
            cat.stdout.close()
        if self._cat_errors is not None:
            self._cat_errors.close()
            self._cat_errors = None

    def __enter__(self) -> Git:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def _parse_log(text: str) -> Iterator[CommitInfo]:
    for record in text.split(_SEP_COMMIT)[1:]:
        parts = record.split(_SEP_FIELD, 3)
        if len(parts) < 4:
            continue
        sha, parents, ts, message = parts
        yield CommitInfo(hexsha=sha, parents=parents.split(),
                         committed_datetime=datetime.fromtimestamp(int(ts), tz=timezone.utc),
                         message=message.rstrip("\n") + "\n")


def count_lines(changes: list[FileChange], patch: str) -> None:
    """Fill added/deleted/binary of changes from their patch (as --numstat would)."""
    from sweserve.dataset.patches import section_paths, split_sections

    stats: dict[str, tuple[int, int, bool]] = {}
    for section in split_sections(patch):
        hunks = section.find("\n@@")
        body = section[hunks:] if hunks >= 0 else ""
        binary = hunks < 0 and ("\nGIT binary patch" in section or "\nBinary files " in section)
        counts = (body.count("\n+"), body.count("\n-"), binary)
        for path in section_paths(section):
            stats[path] = counts
    for change in changes:
        if change.path in stats:
            change.added, change.deleted, change.binary = stats[change.path]


def _split_by_commit(out: bytes, shas: list[str], nul: bool) -> list[bytes]:
    """diff-tree --stdin output cut at each commit's id line (in input order): one chunk per commit printed.

    An id line is the expected 40-hex id alone on a line (NUL-terminated with -z); no line of a patch or of
    raw/numstat output can be that.
    """
    end = b"\0" if nul else b"\n"
    spans: list[tuple[int, int]] = []
    pos = 0
    for sha in shas:
        marker = sha.encode() + end
        if pos == 0 and out.startswith(marker):
            start = 0
        else:
            found = out.find(end + marker, pos)
            if found < 0:
                break
            start = found + 1
        spans.append((start, start + len(marker)))
        pos = start + len(marker)
    return [out[body:(spans[n + 1][0] if n + 1 < len(spans) else len(out))] for n, (_, body) in enumerate(spans)]


def _parse_changes(text: str) -> list[FileChange]:
    """One commit's `-z --raw --numstat` output as FileChanges."""
    tokens = text.split("\0")
    changes: dict[str, FileChange] = {}
    i = 0
    while i < len(tokens):
        tok = tokens[i]
        if tok.startswith(":"):  # raw: ":mode mode sha sha STATUS" then path(s)
            status = tok.split()[-1][0]
            if status in "RC":
                old, new = tokens[i + 1], tokens[i + 2]
                changes[new] = FileChange(status, new, old_path=old)
                i += 3
            else:
                changes[tokens[i + 1]] = FileChange(status, tokens[i + 1])
                i += 2
        elif "\t" in tok:  # numstat: "added\tdeleted\tpath", or "added\tdeleted\t" then old, new
            added, deleted, path = tok.split("\t", 2)
            if path == "":
                path = tokens[i + 2]
                i += 3
            else:
                i += 1
            change = changes.get(path)
            if change is not None:
                if added == "-":
                    change.binary = True
                else:
                    change.added, change.deleted = int(added), int(deleted)
        else:
            i += 1
    return list(changes.values())
