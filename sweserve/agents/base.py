"""What every candidate is to the trial pipeline: an `Agent` that prepares its image and works in a sandbox.

Agents see only the `Sandbox` protocol and the task bundle; they never touch a container engine. The
submission is taken from the sandbox by the trial, not by the agent.
"""

from __future__ import annotations

from typing import Protocol

from sweserve.environment.sandbox import Sandbox
from sweserve.models import AgentRun, TaskBundle

IN_BOX = "/sweserve"  # where instructions and patches are put inside a sandbox
INSTRUCTION_PATH = f"{IN_BOX}/instruction.md"


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
