"""Candidates that work inside a task sandbox: the oracle, the null agent, and any shell command."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Protocol

from .errors import SweserveError
from .grade import IN_BOX, apply_patch
from .models import TaskBundle
from .sandbox import Sandbox

INSTRUCTION_PATH = f"{IN_BOX}/instruction.md"


@dataclass
class AgentRun:
    exit_code: int | None = None
    timed_out: bool = False
    log_tail: str = ""


class Agent(Protocol):
    name: str

    def solve(self, box: Sandbox, bundle: TaskBundle) -> AgentRun: ...


class OracleAgent:
    """Applies the task's own oracle patch: the upper bound every valid task must reach."""

    name = "oracle"

    def solve(self, box: Sandbox, bundle: TaskBundle) -> AgentRun:
        apply_patch(box, bundle.oracle_patch, "oracle")
        return AgentRun(exit_code=0)


class NullAgent:
    """Changes nothing: every valid task must fail for it."""

    name = "null"

    def solve(self, box: Sandbox, bundle: TaskBundle) -> AgentRun:
        return AgentRun(exit_code=0)


class CommandAgent:
    """Runs a shell command in /testbed with the instruction in $SWESERVE_INSTRUCTION, under the task's time limit."""

    def __init__(self, command: str, name: str | None = None):
        self.command = command
        self.name = name or f"cmd-{hashlib.sha256(command.encode()).hexdigest()[:8]}"

    def solve(self, box: Sandbox, bundle: TaskBundle) -> AgentRun:
        box.put_file(INSTRUCTION_PATH, bundle.instruction.encode("utf-8"))
        env = {"SWESERVE_INSTRUCTION": INSTRUCTION_PATH, "SWESERVE_TASK_ID": bundle.task.task_id}
        res = box.exec(self.command, bundle.task.resources.timeout_s, env=env)
        return AgentRun(exit_code=res.exit_code, timed_out=res.timed_out, log_tail=res.tail(4000))


def make_agent(spec: str, name: str | None = None) -> Agent:
    if spec == "oracle":
        return OracleAgent()
    if spec == "null":
        return NullAgent()
    if not spec.strip():
        raise SweserveError("--agent needs 'oracle', 'null' or a shell command")
    return CommandAgent(spec, name)


def extract_diff(box: Sandbox, base_commit: str) -> str:
    """Everything the candidate changed against base_commit (commits, staged, untracked), binary included."""
    res = box.exec(f"git add -A && git diff --cached --binary --full-index {base_commit}", 300, user="root")
    if res.exit_code != 0:
        raise RuntimeError(f"could not take the candidate's diff: {res.tail(300).strip()}")
    return res.output
