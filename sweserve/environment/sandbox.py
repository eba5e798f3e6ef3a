"""What agents and graders may do with a sandbox: the `Sandbox` protocol, free of any container engine.

Agents and the evaluation code see only this (and `host.Host`, which hands sandboxes out);
`docker_sandbox.DockerSandbox` is the implementation, and the only one that is an isolation boundary.
Everything a trial does with a sandbox is here: run a command (whole, or streamed as it runs), put and read
single files, copy a tree out (bounded) and in, reach a service in it, attach an egress proxy, and remove it.
"""

from __future__ import annotations

import io
import tarfile
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Protocol

WORKDIR = "/testbed"


@dataclass
class ExecResult:
    exit_code: int
    output: str
    timed_out: bool = False
    duration_s: float = 0.0
    truncated: bool = False  # output is only the end of what the command wrote (output_bytes in all)
    output_bytes: int = 0

    def tail(self, n: int = 2000) -> str:
        return self.output[-n:]


class Clock(Protocol):
    """A host-side deadline (`environment/watchdog.Deadline`): `fired` once it killed the sandbox."""

    @property
    def fired(self) -> bool: ...


class TreeTooLarge(Exception):
    """A tree copied out of a sandbox is over its byte limit: the submission cannot be taken."""


def streamed(tar: tarfile.TarFile) -> Iterator[tarfile.TarInfo]:
    """The members of a tar read as a stream (`mode="r|"`), none kept once the next is read: tarfile keeps every
    member it reads (name, link name and both again in its PAX headers), some 9 KB of the harness's memory for a
    long-named entry of a candidate's tree (red team 18c, R18c-2). Also clears what `tar.addfile` keeps of a tar
    being written, when passed as `written`."""
    for member in tar:
        yield member
        tar.members.clear()  # type: ignore[attr-defined]  # iteration reads on from the stream (its index is never below len(members))


def tar_of(files: dict[str, bytes], mode: int = 0o644) -> bytes:
    """Several files (relative path -> content) as one tar, for one `Sandbox.copy_tree_in`."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        for name, data in files.items():
            info = tarfile.TarInfo(name)
            info.size, info.mode, info.mtime = len(data), mode, int(time.time())
            tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()


class Sandbox(Protocol):
    """One sandbox of a task image: /testbed holds the repository at its base commit.

    The candidate may be root in it and may have changed anything inside, so nothing a method returns is
    trusted more than the command that produced it: outputs and files come back bounded, and trees are
    copied out by the backend, never by a program running inside.

    A backend whose commands see the sandbox's own `/` (a container) may say so with a class attribute
    `unpacks_at_root = True`: the verifier then sends small files inside a command (a tar it unpacks at `/`)
    instead of a copy of their own (`unpacks_at_root`); any other backend gets the copies.
    """

    @property
    def name(self) -> str:
        """A name the operator can find the sandbox by (the container's)."""

    @property
    def test_user(self) -> str | None:
        """The unprivileged account hidden tests run as here (the boot script drops to it, see sweserve_drop), or
        None where the backend cannot take the machine's root away from them (a backend of local processes,
        which is no isolation boundary, must never lock and drop on the machine that runs sweserve)."""

    @property
    def address(self) -> str:
        """The sandbox's IP address on its private network, for services started in it."""

    def forward(self, port: int) -> str:
        """host:port on the harness's machine that reaches `port` on the sandbox's loopback (sandboxes have
        no IP route to or from the host)."""

    def exec(self, command: str, timeout: float, workdir: str = WORKDIR, env: dict[str, str] | None = None,
             user: str | None = None) -> ExecResult:
        """Run `bash -c command`; the whole process group is killed after timeout seconds, and the sandbox by the
        host a few seconds later if the command is still running (`timed_out` either way).

        Only the end of the output is kept (`ExecResult.truncated` says when some was lost); a limit the sandbox
        broke meanwhile (disk) raises `LimitExceeded`, a backend failure `InfraError`."""

    def exec_stream(self, command: str, timeout: float, on_output: Callable[[bytes], None],
                    workdir: str = WORKDIR, env: dict[str, str] | None = None,
                    user: str | None = None) -> ExecResult:
        """`exec`, with every chunk of output also passed to on_output as it arrives (in order, unbounded:
        the callback decides what to keep), under the same host-side clock."""

    def kill(self) -> None:
        """Stop every process in the sandbox now, from the host: nothing inside can delay or refuse it. Its files
        can still be read out; nothing more runs in it."""

    def deadline(self, limit: float) -> AbstractContextManager[Clock]:
        """A host-side clock for a block: the sandbox is killed if the block still runs a few seconds after
        `limit` (for what runs inside without `exec`, e.g. an interactive session)."""

    def start_background(self, argv: list[str], workdir: str = WORKDIR) -> None:
        """Start a long-running process (e.g. a tool server) and return at once."""

    def interactive_argv(self, shell: str, tty: bool) -> list[str]:
        """The host command that attaches a terminal to `bash -c shell` in the sandbox."""

    def put_file(self, path: str, data: bytes, mode: int = 0o644) -> None:
        """Write one file (its folder made when missing)."""

    def read_file(self, path: str, max_bytes: int = ...) -> bytes | None:
        """A regular file's bytes, None if absent (or a link, a folder, a device); raises LimitExceeded past
        max_bytes."""

    def copy_tree_out(self, path: str, max_bytes: int, prefix: str = "") -> IO[bytes]:
        """The tree at `path` as a tar (positioned at 0), its paths relative to `path` behind `prefix`.

        Copied by the backend, never by a program in the sandbox. Only directories, regular files, symlinks
        (as links, never followed) and hard links to kept files are kept; `.git` (anywhere), `__pycache__`
        and `.pytest_cache` are left out. Raises TreeTooLarge past max_bytes of file content."""

    def copy_tree_in(self, dest: str, tar: bytes | IO[bytes]) -> None:
        """Unpack a tar (from `copy_tree_out` or `tar_of`) into dest ("/": the tar's own paths make the
        directories)."""

    def attach_egress(self, allow: list[str], closed_book: bool, audit_path: Path | None, *,
                      models: Sequence[str] = ()) -> AbstractContextManager[Sandbox]:
        """The sandbox with egress to exactly the `allow`ed origins ("scheme://host:port") through a proxy,
        for the life of the returned context; with closed_book, hosted tools stripped from model requests and
        any model but `models` (when named) refused.
        Every request, allowed or refused, goes to audit_path when the context ends."""

    def remove(self) -> None:
        """Tear the sandbox down, whatever state it is in (idempotent)."""

    def __enter__(self) -> Sandbox: ...

    def __exit__(self, *exc: object) -> None:
        """`remove()`."""


def unpacks_at_root(box: object) -> bool:
    """Whether a tar a command unpacks at `/` in `box` lands where `copy_tree_in("/", …)` would put it (the
    backend says so, see `Sandbox`)."""
    return getattr(type(box), "unpacks_at_root", False) is True
