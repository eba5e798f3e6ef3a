"""Results JSONL: one line per finished attempt, appended and fsynced as each ends; resumable. Beside it, each
run's manifest (`runs/<run_id>/manifest.json`: what the run selected), read here only.

One writer at a time: a writer holds an exclusive lock on the file itself while it lives, so a second run
on the same file (by any name, links too) refuses at once instead of interleaving its records.
"""

from __future__ import annotations

import fcntl
import json
import os
import stat
from pathlib import Path

from pydantic import ValidationError

from sweserve.errors import SweserveError, describe_validation_error
from sweserve.loading import read_found_text, read_regular_text
from sweserve.models import RunManifest, RunResult

MANIFEST_FILE = "manifest.json"  # a run's selection: `runs/<run_id>/manifest.json`


def read_results(path: Path) -> list[RunResult]:
    """All complete records. A torn last line (a killed writer) is ignored; a bad line elsewhere is an error."""
    if not path.exists():
        return []
    # split leaves the text after the last newline at the end: "" or a record a killed writer never finished
    lines = read_regular_text(path, "results file").split("\n")[:-1]
    results = []
    for n, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            results.append(RunResult.model_validate_json(line))
        except ValidationError as exc:
            try:
                json.loads(line)
            except (ValueError, RecursionError):  # JSONDecodeError, and an integer past int_max_str_digits
                raise SweserveError(f"{path}:{n}: not a JSON record") from None
            raise SweserveError(describe_validation_error(f"{path}:{n}", exc)) from None
    return results


def latest(results: list[RunResult]) -> dict[tuple[str, str, int], RunResult]:
    """The last record of each (task, agent, attempt): a retried error is superseded, never counted twice."""
    out: dict[tuple[str, str, int], RunResult] = {}
    for r in results:
        out[r.key] = r
    return out


def one_file_per_attempt(per_file: dict[Path, list[RunResult]]) -> None:
    """Refuse an agent's attempt of a task recorded by two runs in two of the files given: each is keyed by (task,
    agent, attempt), so the later file's replaced the earlier's, and the order of the files chose which one
    counted (a failure dropped for a later success: red team 15c, R15c-4). A resumed run in one file supersedes
    its own records; the same run's records in two files (a copy) are one attempt."""
    # a copy holds the same record: a run id alone is not a run, as two runs into two files may share one
    # `--run-id` (each file has its own runs/ folder), and then the order of the files chose again (red team 15g,
    # R15g-1); the trial folder is left out, as it is found beside each file
    seen: dict[tuple[str, str, int], tuple[Path, str, dict]] = {}
    for path, results in per_file.items():
        for key, r in latest(results).items():
            record = r.model_dump(exclude={"trial_dir"})
            other = seen.setdefault(key, (path, r.run_id, record))
            if other[0] != path and (other[1] != r.run_id or other[2] != record):
                task, agent, attempt = key
                raise SweserveError(
                    f"{agent}'s attempt {attempt} of {task} is in {other[0]} (run {other[1]}) and in {path} (run "
                    f"{r.run_id}): one report counts each attempt once; report the files apart, or give the agents "
                    "different names")


class ResultsWriter:
    def __init__(self, path: Path):
        self.path = path
        if path.is_dir():
            raise SweserveError(f"{path}: is a folder; --output names a results file")
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            # the lock is the file's own (its inode): a symbolic or hard link to it, or a folder linked to its
            # folder, takes the same lock, so two runs on one file never both hold one (red team 15c, R15c-8; a
            # lock file beside it, named after the path, let a link to the file take a second)
            # ... opened without waiting, and only a regular file: a FIFO there waited forever for a reader, and a
            # device took records nowhere (red team 23q, R23q-1); read and truncated through this descriptor too
            fd = os.open(path, os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_NONBLOCK | os.O_CLOEXEC, 0o666)
        except OSError as exc:
            raise SweserveError(f"{path}: cannot write results there ({exc.strerror})") from None
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            os.close(fd)
            raise SweserveError(f"{path}: not a regular file; --output names a results file")
        self._lock = os.fdopen(fd, "ab")  # held until close()
        try:
            fcntl.flock(self._lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            self._lock.close()
            raise SweserveError(f"{path}: another sweserve run is writing this results file") from None
        # the torn tail is cut from the file locked, not whatever has its name by now (reopened by name, a file
        # replaced between the lock and the cut lost its last record)
        size = os.fstat(fd).st_size
        if size:
            data = os.pread(fd, size, 0)
            cut = data.rfind(b"\n") + 1
            if cut != len(data):  # drop a torn tail left by a killed run
                os.ftruncate(fd, cut)

    def write(self, result: RunResult) -> None:
        # through the file this writer opened and locked: reopened by its name for each record, a file moved or
        # replaced mid-run (another run then locking the new one) took this run's records outside any lock, lost
        # from the file its manifest names (red team 23i, R23i-1); opened to append, each write lands at its end
        line = (result.model_dump_json() + "\n").encode("utf-8")
        if self._lock.closed:
            raise SweserveError(f"{self.path}: this results writer is closed")
        self._lock.write(line)
        self._lock.flush()
        os.fsync(self._lock.fileno())

    def close(self) -> None:
        if not self._lock.closed:
            fcntl.flock(self._lock, fcntl.LOCK_UN)
            self._lock.close()

    def __enter__(self) -> "ResultsWriter":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def manifest_paths(root: Path) -> list[Path]:
    """Every run's manifest under a runs folder (`trial_folder.runs_root`), in order of run id."""
    return sorted(root.glob(f"*/{MANIFEST_FILE}")) if root.is_dir() else []


def read_manifest(path: Path) -> RunManifest:
    """The run manifest at path; one clear error when it is not one (unreadable, not JSON, a field of the wrong
    kind). A manifest from before manifests named their run takes its folder's name."""
    try:
        data = json.loads(read_found_text(path))
        if isinstance(data, dict):
            data.setdefault("run_id", path.parent.name)
        return RunManifest.model_validate(data)
    # pydantic's ValidationError is a ValueError; RecursionError: brackets nested past the decoder's depth (an
    # internal error before, with a crash traceback: red team 20d, R20d-4)
    except (OSError, UnicodeDecodeError, ValueError, RecursionError):
        raise SweserveError(f"{path}: not a run manifest") from None


def manifest_or_none(path: Path) -> RunManifest | None:
    """The run manifest at path, or None (none there, or not one this version can read)."""
    try:  # a regular file only (`read_found_text`), and a path no look-up can take is none (R23q-4)
        return read_manifest(path)
    except SweserveError:
        return None
