"""What every candidate is to the trial pipeline: an `Agent` that prepares its image and works in a sandbox.

Agents see only the `Sandbox` protocol and the task bundle; they never touch a container engine. The
submission is taken from the sandbox by the trial, not by the agent.
"""

from __future__ import annotations

import shlex
from typing import Protocol

from sweserve.dataset.patches import apply_command
from sweserve.environment.sandbox import Sandbox
from sweserve.models import AgentRun, TaskBundle

IN_BOX = "/sweserve"  # where instructions and patches are put inside a sandbox
INSTRUCTION_PATH = f"{IN_BOX}/instruction.md"


MIN_SECRET_CHARS = 4  # shorter values would redact half of every record


class Redactor:
    """Replaces an agent's secrets (values it was given through `env:`, its API key) in everything recorded:
    the one redactor, used by the trial for every field and file it writes, and by agents for their logs."""

    def __init__(self, secrets: list[str]):
        self.secrets = sorted({s for s in secrets if s and len(s) >= MIN_SECRET_CHARS}, key=len, reverse=True)

    def holds_secret(self, text: str) -> bool:
        return any(s in text for s in self.secrets)

    def __call__(self, text: str) -> str:
        for value in self.secrets:
            text = text.replace(value, "***")
        return text


def redact(text: str, secrets: list[str]) -> str:
    return Redactor(secrets)(text)


class PatchError(Exception):
    """A patch did not apply; `which` names it (candidate, oracle, tests), the message is git's output."""

    def __init__(self, which: str, message: str, exit_code: int = 1):
        super().__init__(message)
        self.which = which
        self.exit_code = exit_code
        self.flags: list[str] = []  # the tamper scan's, set by the verifier: they outlive the failure


def apply_patch(box: Sandbox, patch: str, name: str, timeout: float = 120, index: bool = False) -> None:
    """git apply in /testbed, through a file IN_BOX/<name>.patch removed afterwards; with index, the index
    records what it touched (new files included). An empty patch is nothing to do."""
    if not patch.strip():
        return
    path = f"{IN_BOX}/{name}.patch"
    box.put_file(path, patch.encode("utf-8"))
    res = box.exec(f"{apply_command(path, index)}; s=$?; rm -f {shlex.quote(path)}; exit $s", timeout)
    if res.exit_code != 0:
        raise PatchError(name, res.tail(1000).strip() or f"git apply exited {res.exit_code}", res.exit_code)


class ImageBuilder(Protocol):
    def agent(self, task_image: str, agent_name: str, install: list[str]) -> str: ...


class Agent(Protocol):
    name: str

    def config_hash(self) -> str:
        """Identifies what the agent does: a resumed run refuses to mix results of two different configs."""

    def prepare(self, builder: ImageBuilder, image: str) -> str:
        """The image the candidate phase runs in (the task image, or a layer with the agent installed)."""

    def solve(self, box: Sandbox, bundle: TaskBundle) -> AgentRun: ...


class TaskImageAgent:
    """An agent that runs in the task image as it is, with nothing installed on top."""

    def prepare(self, builder: ImageBuilder, image: str) -> str:
        return image
