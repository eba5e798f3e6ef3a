"""Pinned environments: a task's requirements resolved as of its PR's time with uv.

A task's environment is the one its PR was developed against, so its declared requirements (plus the
profile's own packages) are resolved with ``uv pip compile --exclude-newer <cutoff>``: the newest versions
the package index had then. The pins are stored with the task and the env image is keyed on them.
Requirements the sandbox build cannot install (VCS or direct URLs, local paths: the build reaches only the
package index) are left out and reported, one line each.

Locks are shared and cached (`Locker`): tasks whose requirements are the same share one lock per epoch (the
profile's ``lock_epoch``: its cutoff is the epoch's end, or the newest commit mined when that is earlier), so
a month of PRs needs one resolver run and one env image; a PR that changes a dependency file gets a lock as
of its own merge, and when that fails, one at its epoch's cutoff before it is left unpinned. Every answer is
kept under the state dir by the hash of its inputs, so mining again resolves nothing it resolved before, and
distinct locks are resolved a few at a time.

Locking is lazy by default (the profile's ``lock_when: build``): `mine` records each task's `LockRequest` (its
inputs and cache key) and fills only what is already known; `resolve_pending` resolves a request the first
time an image needs it (validate, run) or on `sweserve locks resolve`, and writes the lock into every task
with that key. The request alone re-resolves the same pins anywhere (``--exclude-newer`` is its cutoff).
"""

from __future__ import annotations

import calendar
import hashlib
import json
import os
import re
import subprocess
import sys
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, Field

from sweserve.models import EnvironmentLock, LockRequest, Task

LockEpoch = Literal["pr", "week", "month", "quarter"]

_VCS = re.compile(r"^\s*(?:[A-Za-z0-9._-]+(?:\[[^\]]*\])?\s*@\s*)?(git|hg|svn|bzr)\+", re.IGNORECASE)
_URL = re.compile(r"@\s*(https?|file|ftp)://|^\s*(https?|file|ftp)://", re.IGNORECASE)
_PATH = re.compile(r"^\s*(\.{1,2}/|/|~)|\s@\s*\.{0,2}/")
# Python of the sweserve-base images, by Debian suite: what a lock must resolve for.
SUITE_PYTHON = {"bullseye": "3.9", "bookworm": "3.11", "trixie": "3.13"}
# the wheels their glibc can load (trixie's 2.41 is past uv's newest target): 'linux' alone means manylinux_2_28
# to uv, which refuses wheels like libtpu's that a newer glibc installs
SUITE_PLATFORM = {"bullseye": "x86_64-manylinux_2_31", "bookworm": "x86_64-manylinux_2_36",
                  "trixie": "x86_64-manylinux_2_40"}


class LockError(Exception):
    """uv could not resolve the requirements; the message is uv's own, one line."""


def uninstallable(req: str) -> str | None:
    """Why the sandbox build cannot install this requirement, or None when the package index can serve it."""
    if _VCS.search(req):
        return "a version-control URL: the sandbox build reaches only the package index"
    if _URL.search(req):
        return "a direct URL: the sandbox build reaches only the package index"
    if _PATH.search(req):
        return "a local path: not in the env image's build context"
    return None


def installable(requirements: list[str]) -> tuple[list[str], list[str]]:
    """(requirements the build can install, 'requirement: why not' for the others)."""
    keep, left_out = [], []
    for req in requirements:
        why = uninstallable(req)
        if why:
            left_out.append(f"{req}: {why}")
        else:
            keep.append(req)
    return keep, left_out


def packages_for(env_packages: list[str], dependencies: list[str]) -> list[str]:
    """What an env image installs: the profile's packages, then the task's declared requirements."""
    return list(env_packages) + [d for d in dependencies if d not in env_packages]


def image_python(base_image: str, fallback: str) -> str:
    """The Python a sweserve-base:<suite> image has; the profile's least Python for any other base."""
    if base_image.startswith("sweserve-base:"):
        return SUITE_PYTHON.get(base_image.split(":", 1)[1], fallback)
    return fallback


def image_platform(base_image: str) -> str:
    """uv's --python-platform for what a sweserve-base:<suite> image can install; plain 'linux' for others."""
    if base_image.startswith("sweserve-base:"):
        return SUITE_PLATFORM.get(base_image.split(":", 1)[1], "linux")
    return "linux"


def uv_bin() -> str:
    from uv import find_uv_bin

    return find_uv_bin()


def _one_line(text: str) -> str:
    """uv's message (error, then its causes) on one line."""
    lines = [ln.strip().lstrip("×╰─▶│ ").strip() for ln in text.strip().splitlines()]
    return " ".join(ln for ln in lines if ln)[:400] or "uv failed"


def lock(requirements: list[str], python: str, as_of: datetime, index_options: Sequence[str] = (),
         timeout: float = 300, platform: str = "linux") -> EnvironmentLock:
    """Resolve requirements for Linux and python with the versions the index had at as_of."""
    keep, left_out = installable(requirements)
    when = as_of.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    cmd = [uv_bin(), "pip", "compile", "-", "--quiet", "--no-header", "--no-annotate", "--exclude-newer", when,
           "--python-version", python, "--python-platform", platform, *index_options,
           # resolve for `python` without looking for that interpreter here (a slow search, or a download)
           "--python", sys.executable, "--no-python-downloads"]
    try:
        proc = subprocess.run(cmd, input="\n".join(keep) + "\n", capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        raise LockError(f"uv pip compile took more than {int(timeout)}s") from None
    except OSError as exc:
        raise LockError(f"cannot run uv: {exc.strerror}") from None
    if proc.returncode != 0:
        raise LockError(_one_line(proc.stderr or proc.stdout))
    pins = [ln.strip() for ln in proc.stdout.splitlines() if ln.strip() and not ln.lstrip().startswith("#")]
    return EnvironmentLock(resolved_at=as_of.astimezone(timezone.utc), python=python, requirements=pins,
                           left_out=left_out)


def requirements_text(packages: list[str], index_options: Sequence[str] = ()) -> str:
    """A pip requirements file: index options first (pip reads them there), then one requirement a line."""
    lines, opts = [], list(index_options)
    while opts:
        opt = opts.pop(0)
        if "=" not in opt and opts and not opts[0].startswith("-"):
            opt = f"{opt} {opts.pop(0)}"
        lines.append(opt)
    return "\n".join(lines + list(packages)) + "\n"


def epoch_end(when: datetime, epoch: LockEpoch) -> datetime:
    """The last second of the epoch `when` falls in (UTC); `pr` is `when` itself."""
    when = when.astimezone(timezone.utc)
    if epoch == "pr":
        return when
    day = when.replace(hour=23, minute=59, second=59, microsecond=0)
    if epoch == "week":  # ISO weeks end on Sunday
        return day + timedelta(days=6 - when.weekday())
    last_month = when.month if epoch == "month" else ((when.month - 1) // 3 + 1) * 3
    return day.replace(month=last_month, day=calendar.monthrange(when.year, last_month)[1])


class LockStats(BaseModel):
    """What one mining run's (or one build's) locking did: its share of the resolver and of the cache."""

    tasks: int = 0
    shared: int = Field(0, description="tasks given their epoch's lock (same requirements, no dependency change)")
    own: int = Field(0, description="tasks given a lock as of their own merge (their PR changes a dependency file)")
    resolved: int = Field(0, description="distinct locks uv resolved in this run")
    cached: int = Field(0, description="distinct locks answered by the cache or the task already stored")
    fallback: int = Field(0, description="own locks that failed and took the epoch's cutoff instead")
    unpinned: int = Field(0, description="tasks whose requirements could not be locked at all")
    pending: int = Field(0, description="tasks whose lock is left to the first image build (lock_when: build)")
    duration_s: float = 0.0


@dataclass(frozen=True)
class _Key:
    packages: tuple[str, ...]
    python: str
    platform: str
    index_options: tuple[str, ...]
    cutoff: datetime

    def digest(self) -> str:
        blob = json.dumps([list(self.packages), self.python, self.platform, list(self.index_options),
                           self.cutoff.isoformat()])
        return hashlib.sha256(blob.encode()).hexdigest()

    @classmethod
    def of(cls, request: LockRequest, cutoff: datetime | None = None) -> "_Key":
        return cls(tuple(request.packages), request.python, request.platform, tuple(request.index_options),
                   (cutoff or request.cutoff).astimezone(timezone.utc))


# uv's words for an answer that the same inputs always get again (an index only grows before the cutoff)
_FINAL = ("no solution found", "not found in the package registry", "no versions of", "because there are no versions")


@dataclass
class Locker:
    """Locks a batch of tasks: each distinct (requirements, Python, index, cutoff) once, a few at a time.

    `requests` records what each task's lock is made of (its `LockRequest`, keyed by the hash of its inputs);
    `settle` answers requests: from the task already stored, from the cache, and (unless `offline`) with uv.
    `lock_all` is both at once (eager locking, `lock_when: mine`). `cache_dir` keeps every answer (a lock, or
    uv's final refusal) by the hash of its inputs, so mining again, or another task with the same inputs,
    resolves nothing already resolved.
    """

    env_packages: list[str] = field(default_factory=list)
    python: str = ""
    index_options: list[str] = field(default_factory=list)
    epoch: LockEpoch = "month"
    cache_dir: Path | None = None
    platform: str = "linux"
    stored: Callable[[str], EnvironmentLock | None] = lambda _task_id: None
    workers: int = 6  # uv waits on the index as much as it computes (16 s wall for 3.4 s CPU per jax lock)
    resolve: Callable[..., EnvironmentLock] = field(default=lambda *a, **k: lock(*a, **k))
    notes: list[str] = field(default_factory=list)
    stats: LockStats = field(default_factory=LockStats)
    _transient: set[_Key] = field(default_factory=set, init=False, repr=False)  # failed for now: asked again later

    def requests(self, tasks: Iterable[Task], changes_dependencies: Callable[[Task], bool],
                 newest: datetime) -> dict[str, LockRequest]:
        """What each task's lock is resolved from. `newest` caps every cutoff: the newest commit mined."""
        newest = newest.astimezone(timezone.utc)
        out: dict[str, LockRequest] = {}
        for task in tasks:
            packages = tuple(packages_for(self.env_packages, task.dependencies))
            shared = self._key(packages, min(epoch_end(task.created_at, self.epoch), newest))
            if self.epoch != "pr" and changes_dependencies(task):
                out[task.task_id] = self._request(self._key(packages, task.created_at), shared.cutoff)
                self.stats.own += 1
            else:
                out[task.task_id] = self._request(shared, None)
                self.stats.shared += self.epoch != "pr"
            self.stats.tasks += 1
        return out

    def lock_all(self, tasks: Iterable[Task], changes_dependencies: Callable[[Task], bool],
                 newest: datetime) -> dict[str, EnvironmentLock | None]:
        """Each task's lock (None: unpinned, with a note). `newest` caps every cutoff: the newest commit mined."""
        answers = self.settle(self.requests(tasks, changes_dependencies, newest))
        return {task_id: answer for task_id, answer in answers.items() if not isinstance(answer, LockRequest)}

    def settle(self, requests: dict[str, LockRequest], offline: bool = False
               ) -> dict[str, EnvironmentLock | None | LockRequest]:
        """Each task's lock, or None (unpinned, with a note; the reason in its request's `unpinned` when uv refused,
        none when it timed out or could not reach the index, so that the next build asks again), or, `offline`,
        the request itself where only uv could answer it (still pending)."""
        import time

        started = time.monotonic()
        answers: dict[_Key, EnvironmentLock | str] = {}
        for task_id, request in requests.items():  # a lock the task already has answers for its inputs
            old = self.stored(task_id)
            first = _Key.of(request)
            if old is not None and first not in answers and self._matches(old, first):
                answers[first] = old
                self.stats.cached += 1
        self._answer({_Key.of(r) for r in requests.values()}, answers, offline)
        self._answer({_Key.of(r, r.fallback) for r in requests.values()
                      if r.fallback is not None and isinstance(answers.get(_Key.of(r)), str)}, answers, offline)
        out: dict[str, EnvironmentLock | None | LockRequest] = {}
        for task_id, request in requests.items():
            answer = answers.get(_Key.of(request))
            if isinstance(answer, str) and request.fallback is not None:
                fallback = answers.get(_Key.of(request, request.fallback))
                if fallback is None:  # offline, and the epoch's lock is not known yet
                    answer = None
                elif isinstance(fallback, EnvironmentLock):
                    self.notes.append(f"{task_id}: locking as of its merge failed ({answer}); "
                                      f"took its epoch's cutoff {request.fallback:%Y-%m-%d}")
                    self.stats.fallback += 1
                    answer = fallback
            if answer is None:
                out[task_id] = request
                self.stats.pending += 1
                continue
            if isinstance(answer, str):
                tried = [_Key.of(request)] + ([_Key.of(request, request.fallback)] if request.fallback else [])
                final = not any(key in self._transient for key in tried)
                self.notes.append(f"{task_id}: locking failed, the env image installs the declared requirements "
                                  f"unpinned{'' if final else ' (asked again at the next build)'}: {answer}")
                self.stats.unpinned += 1
                if final:  # uv's own refusal: the same inputs always get it; a time-out is tried again
                    request.unpinned = answer
                out[task_id] = None
                continue
            for line in answer.left_out:
                note = f"left out of the environment (cannot be installed in the sandbox build): {line}"
                if note not in self.notes:
                    self.notes.append(note)
            out[task_id] = answer
        self.stats.duration_s += round(time.monotonic() - started, 3)
        return out

    def _request(self, key: _Key, fallback: datetime | None) -> LockRequest:
        return LockRequest(key=key.digest(), packages=list(key.packages), python=key.python, platform=key.platform,
                           index_options=list(key.index_options), cutoff=key.cutoff, fallback=fallback)

    def _key(self, packages: tuple[str, ...], cutoff: datetime) -> _Key:
        return _Key(packages, self.python, self.platform, tuple(self.index_options), cutoff.astimezone(timezone.utc))

    @staticmethod
    def _matches(old: EnvironmentLock, key: _Key) -> bool:
        return old.python == key.python and old.resolved_at.astimezone(timezone.utc) == key.cutoff \
            and old.packages == list(key.packages)

    def _answer(self, keys: set[_Key], answers: dict[_Key, EnvironmentLock | str], offline: bool = False) -> None:
        """Fill answers for keys: from the cache, else (unless offline) uv, `workers` at a time."""
        todo = []
        for key in sorted(keys - answers.keys(), key=lambda k: (k.cutoff, k.packages)):
            cached = self._cached(key)
            if cached is None:
                todo.append(key)
            else:
                answers[key] = cached
                self.stats.cached += 1
        if not todo or offline:
            return
        with ThreadPoolExecutor(max_workers=max(1, min(self.workers, len(todo)))) as pool:
            for key, answer in zip(todo, pool.map(self._run, todo)):
                answers[key] = answer
                self.stats.resolved += 1

    def _run(self, key: _Key) -> EnvironmentLock | str:
        try:
            answer: EnvironmentLock | str = self.resolve(list(key.packages), key.python, key.cutoff,
                                                         list(key.index_options), platform=key.platform)
        except LockError as exc:
            answer = str(exc)
            if not any(word in answer.lower() for word in _FINAL):
                self._transient.add(key)
                return answer  # a time-out or an unreachable index: asked again next time
        if isinstance(answer, EnvironmentLock):
            answer = answer.model_copy(update={"packages": list(key.packages)})
        self._keep(key, answer)
        return answer

    def _path(self, key: _Key) -> Path | None:
        return self.cache_dir / f"{key.digest()}.json" if self.cache_dir is not None else None

    def _cached(self, key: _Key) -> EnvironmentLock | str | None:
        path = self._path(key)
        if path is None or not path.is_file():
            return None
        try:
            record = _CacheRecord.model_validate_json(path.read_text())
        except (OSError, ValueError):
            return None  # a torn or foreign file: resolve again and overwrite it
        return record.lock if record.lock is not None else record.error

    def _keep(self, key: _Key, answer: EnvironmentLock | str) -> None:
        path = self._path(key)
        if path is None:
            return
        record = _CacheRecord(lock=answer) if isinstance(answer, EnvironmentLock) else _CacheRecord(error=answer)
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(f".{os.getpid()}.{id(key)}.tmp")
        tmp.write_text(record.model_dump_json())
        tmp.replace(path)


class _CacheRecord(BaseModel):
    lock: EnvironmentLock | None = None
    error: str | None = None


def resolve_pending(tasks: Sequence[Task], cache_dir: Path | None, peers: Iterable[Task] = (), workers: int = 6,
                    save: Callable[[Task], None] | None = None,
                    resolve: Callable[..., EnvironmentLock] | None = None) -> Locker:
    """Resolve the pending locks of `tasks` (lazy locking: the first image build, or `sweserve locks resolve`),
    each distinct key once, `workers` at a time, through the same cache as mining. The answer goes into every
    task object of `tasks` and `peers` with that key (so one resolve settles a whole epoch), and `save` writes
    each changed task once. A lock that fails takes its epoch's cutoff, then leaves the task unpinned, with the
    reason recorded in its request and a note; the returned Locker's stats and notes say how many."""
    wanted = {t.lock_request.key for t in tasks if t.lock_pending and t.lock_request is not None}
    group: dict[str, list[Task]] = {}
    for task in [*tasks, *peers]:
        if task.lock_pending and task.lock_request is not None and task.lock_request.key in wanted:
            group.setdefault(task.task_id, []).append(task)
    locker = Locker(cache_dir=cache_dir, workers=workers)
    if resolve is not None:
        locker.resolve = resolve
    requests = {task_id: same[0].lock_request.model_copy() for task_id, same in group.items()
                if same[0].lock_request is not None}
    answers = locker.settle(requests)
    locker.stats.tasks = len(requests)
    for task_id, same in group.items():
        answer = answers[task_id]
        if isinstance(answer, LockRequest):  # cannot happen online; left pending
            continue
        for task in same:
            task.lock = answer
            task.lock_request = requests[task_id].model_copy()
        if save is not None:
            save(same[0])
    return locker
