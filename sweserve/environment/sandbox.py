"""What agents and graders may do with a sandbox: the `Sandbox` protocol, free of any container engine.

Agents and the evaluation code see only this; `docker_sandbox.DockerSandbox` is the implementation.
"""

from __future__ import annotations

from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Protocol

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


class Sandbox(Protocol):
    @property
    def name(self) -> str:
        """A name the operator can find the sandbox by (the container's)."""

    @property
    def address(self) -> str:
        """The sandbox's IP address on its private network, for services started in it."""

    def forward(self, port: int) -> str:
        """host:port on the harness's machine that reaches `port` on the sandbox's loopback (sandboxes have
        no IP route to or from the host)."""

    def exec(self, command: str, timeout: float, workdir: str = WORKDIR, env: dict[str, str] | None = None,
             user: str | None = None) -> ExecResult:
        """Run `bash -c command`; the whole process group is killed after timeout seconds, and the sandbox by the
        host a few seconds later if the command is still running (`timed_out` either way)."""

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

    def put_file(self, path: str, data: bytes, mode: int = 0o644) -> None: ...

    def read_file(self, path: str, max_bytes: int = ...) -> bytes | None:
        """A regular file's bytes, None if absent; raises LimitExceeded past max_bytes."""
