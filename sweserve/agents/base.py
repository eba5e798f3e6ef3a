"""Candidates that work inside a task sandbox: the oracle, the null agent, command agents, the API agent."""

from __future__ import annotations

import hashlib
import os
import time
from typing import Protocol

from sweserve.agents.config import (
    ApiAgentConfig,
    CommandAgentConfig,
    find_agent_config,
    load_agent_config,
)
from sweserve.environment.docker_sandbox import Sandbox
from sweserve.errors import SweserveError
from sweserve.evaluation.grading import IN_BOX, apply_patch
from sweserve.models import AgentRun, TaskBundle

INSTRUCTION_PATH = f"{IN_BOX}/instruction.md"


class Agent(Protocol):
    name: str

    def prepare(self, builder, image: str) -> str:
        """The image the candidate phase runs in (the task image, or a layer with the agent installed)."""

    def solve(self, box: Sandbox, bundle: TaskBundle) -> AgentRun: ...


class TaskImageAgent:
    """An agent that runs in the task image as it is, with nothing installed on top."""

    def prepare(self, builder, image: str) -> str:
        return image


class OracleAgent(TaskImageAgent):
    """Applies the task's own oracle patch: the upper bound every valid task must reach."""

    name = "oracle"

    def solve(self, box: Sandbox, bundle: TaskBundle) -> AgentRun:
        apply_patch(box, bundle.oracle_patch, "oracle")
        return AgentRun(agent=self.name, exit_code=0)


class NullAgent(TaskImageAgent):
    """Changes nothing: every valid task must fail for it."""

    name = "null"

    def solve(self, box: Sandbox, bundle: TaskBundle) -> AgentRun:
        return AgentRun(agent=self.name, exit_code=0)


def redact(text: str, secrets: list[str]) -> str:
    for value in secrets:
        if value:
            text = text.replace(value, "***")
    return text


class CommandAgent:
    """Runs a shell command in /testbed with the instruction at $SWESERVE_INSTRUCTION, under the task's time limit."""

    def __init__(self, command: str, name: str | None = None, cfg: CommandAgentConfig | None = None, env=os.environ):
        self.cfg = cfg or CommandAgentConfig(
            kind="command", command=command,
            name=name or f"cmd-{hashlib.sha256(command.encode()).hexdigest()[:8]}")
        self.name = self.cfg.name
        self.command = self.cfg.command
        self._passed = {k: env[k] for k in self.cfg.env if k in env}

    def prepare(self, builder, image: str) -> str:
        return builder.agent(image, self.cfg.name, self.cfg.install) if self.cfg.install else image

    def solve(self, box: Sandbox, bundle: TaskBundle) -> AgentRun:
        t0 = time.monotonic()
        box.put_file(INSTRUCTION_PATH, bundle.instruction.encode("utf-8"))
        env = {**self._passed, "SWESERVE_INSTRUCTION": INSTRUCTION_PATH, "SWESERVE_TASK_ID": bundle.task.task_id}
        res = box.exec(self.command, bundle.task.resources.timeout_s, env=env)
        return AgentRun(
            agent=self.name, version=self.cfg.version, model=self.cfg.model, exit_code=res.exit_code,
            exit_reason="timed_out" if res.timed_out else "finished", wall_s=round(time.monotonic() - t0, 3),
            log_tail=redact(res.tail(4000), list(self._passed.values())),
        )


def make_agent(spec: str, name: str | None = None) -> Agent:
    """`--agent`: oracle, null, a config (path or name under sweserve/agents/configs/), or a shell command."""
    if spec == "oracle":
        return OracleAgent()
    if spec == "null":
        return NullAgent()
    if not spec.strip():
        raise SweserveError("--agent needs 'oracle', 'null', an agent config or a shell command")
    path = find_agent_config(spec)
    if path is not None:
        cfg = load_agent_config(path)
        if name:
            cfg = cfg.model_copy(update={"name": name})
        if isinstance(cfg, ApiAgentConfig):
            from sweserve.agents.api import (
                ApiAgent,  # it builds on this module's TaskImageAgent
            )

            return ApiAgent(cfg)
        return CommandAgent(cfg.command, cfg=cfg)
    return CommandAgent(spec, name)


def extract_diff(box: Sandbox, base_commit: str) -> str:
    """Everything the candidate changed against base_commit (commits, staged, untracked), binary included."""
    res = box.exec(f"git add -A && git diff --cached --binary --full-index {base_commit}", 300, user="root")
    if res.exit_code != 0:
        raise RuntimeError(f"could not take the candidate's diff: {res.tail(300).strip()}")
    return res.output
