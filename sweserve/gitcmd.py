"""The one way sweserve runs git on the host: `run_git`, which raises `GitError` carrying git's own words.

The batched reader of a clone (dataset/gitio.py), the scratch-index reader of repository states
(dataset/interface.py) and the repository export into images (environment/images.py) all run git through
it; each turns a `GitError` into its own error with `last_line` or `reason`.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path


class GitError(Exception):
    """A git command failed; the message is git's own last line. `stderr`, `returncode` and `subcommand`
    let a caller word it otherwise."""

    def __init__(self, message: str, returncode: int = 1, subcommand: str = "git", stderr: bytes = b""):
        super().__init__(message)
        self.returncode, self.subcommand, self.stderr = returncode, subcommand, stderr


def last_line(stderr: str | bytes, fallback: str = "") -> str:
    """git's last fatal: or error: line, else its last line, else fallback."""
    if isinstance(stderr, bytes):
        stderr = stderr.decode("utf-8", "replace")
    lines = [ln.strip() for ln in stderr.strip().splitlines() if ln.strip()]
    fatal = [ln for ln in lines if ln.startswith(("fatal:", "error:"))]
    return (fatal or lines or [fallback])[-1]


def reason(stderr: str | bytes, returncode: int) -> str:
    """git's own reason: the first fatal line (a remote's too: a corrupt object in the clone), else its last
    error line, not the generic last line ("aborting due to possible repository corruption …")."""
    if isinstance(stderr, bytes):
        stderr = stderr.decode("utf-8", "replace")
    lines = [ln.strip().removeprefix("remote:").strip() for ln in stderr.splitlines() if ln.strip()]
    fatal = [ln for ln in lines if ln.startswith("fatal:")]
    if fatal:
        return fatal[0]
    return last_line("\n".join(lines), f"exit code {returncode}")


def subcommand(args: Sequence[str]) -> str:
    """The git subcommand of an argument list (options before it, and their values, skipped)."""
    skip = False
    for arg in args:
        if skip:
            skip = False
        elif arg in ("-c", "-C"):
            skip = True
        elif not arg.startswith("-"):
            return arg
    return "git"


def run_git(*args: str, repo: Path | None = None, env: Mapping[str, str] | None = None, input: bytes | None = None,
            ok: Sequence[int] = (0,)) -> bytes:
    """git's stdout for `git [-C repo] args`; env is added to this process's environment. GitError (its
    message git's last line) when the exit status is not in `ok`."""
    cmd = ["git", *(["-C", str(repo)] if repo is not None else []), *args]
    proc = subprocess.run(cmd, input=input, capture_output=True, env=None if env is None else {**os.environ, **env})
    if proc.returncode not in ok:
        sub = subcommand(args)
        raise GitError(last_line(proc.stderr, f"git {sub} exited {proc.returncode}"), proc.returncode, sub,
                       proc.stderr)
    return proc.stdout
