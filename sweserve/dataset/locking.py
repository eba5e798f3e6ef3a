"""Pinned environments: a task's requirements resolved as of its PR's date with uv.

A task's environment is the one its PR was developed against, so its declared requirements (plus the
profile's own packages) are resolved with ``uv pip compile --exclude-newer <the PR's merge date>``: the
newest versions the package index had then. The pins are stored with the task and the env image is keyed
on them. Requirements the sandbox build cannot install (VCS or direct URLs, local paths: the build reaches
only the package index) are left out and reported, one line each.
"""

from __future__ import annotations

import re
import subprocess
import sys
from collections.abc import Sequence
from datetime import datetime, timezone

from sweserve.models import EnvironmentLock

_VCS = re.compile(r"^\s*(?:[A-Za-z0-9._-]+(?:\[[^\]]*\])?\s*@\s*)?(git|hg|svn|bzr)\+", re.IGNORECASE)
_URL = re.compile(r"@\s*(https?|file|ftp)://|^\s*(https?|file|ftp)://", re.IGNORECASE)
_PATH = re.compile(r"^\s*(\.{1,2}/|/|~)|\s@\s*\.{0,2}/")
# Python of the sweserve-base images, by Debian suite: what a lock must resolve for.
SUITE_PYTHON = {"bullseye": "3.9", "bookworm": "3.11", "trixie": "3.13"}


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


def uv_bin() -> str:
    from uv import find_uv_bin

    return find_uv_bin()


def _one_line(text: str) -> str:
    """uv's message (error, then its causes) on one line."""
    lines = [ln.strip().lstrip("×╰─▶│ ").strip() for ln in text.strip().splitlines()]
    return " ".join(ln for ln in lines if ln)[:400] or "uv failed"


def lock(requirements: list[str], python: str, as_of: datetime, index_options: Sequence[str] = (),
         timeout: float = 300) -> EnvironmentLock:
    """Resolve requirements for Linux and python with the versions the index had at as_of."""
    keep, left_out = installable(requirements)
    when = as_of.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    cmd = [uv_bin(), "pip", "compile", "-", "--quiet", "--no-header", "--no-annotate", "--exclude-newer", when,
           "--python-version", python, "--python-platform", "linux", *index_options,
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
