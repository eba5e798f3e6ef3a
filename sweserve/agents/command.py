"""Command agents: a CLI (Claude Code, Codex, mini-swe-agent, a script) run in /testbed under the task's time limit."""

from __future__ import annotations

import hashlib
import os
import time

from sweserve.agents.base import INSTRUCTION_PATH, ImageBuilder, redact
from sweserve.agents.config import CommandAgentConfig
from sweserve.environment.sandbox import Sandbox
from sweserve.models import AgentRun, TaskBundle


class CommandAgent:
    """Runs a shell command in /testbed with the instruction at $SWESERVE_INSTRUCTION."""

    def __init__(self, command: str, name: str | None = None, cfg: CommandAgentConfig | None = None, env=os.environ):
        self.cfg = cfg or CommandAgentConfig(
            kind="command", command=command,
            name=name or f"cmd-{hashlib.sha256(command.encode()).hexdigest()[:8]}")
        self.name = self.cfg.name
        self.command = self.cfg.command
        self._passed = {k: env[k] for k in self.cfg.env if k in env}

    @property
    def egress(self) -> list[str]:
        """The model endpoints the sandbox may reach (through the egress proxy); empty: no network at all."""
        return self.cfg.egress

    @property
    def closed_book(self) -> bool:
        return self.cfg.closed_book

    def secrets(self) -> list[str]:
        """The values passed through `env:`: redacted from everything the trial records."""
        return list(self._passed.values())

    def config_hash(self) -> str:
        # egress settings count only when set, so results of configs written before they existed still resume
        unset = {f for f in ("egress", "closed_book") if not getattr(self.cfg, f)}
        return hashlib.sha256(self.cfg.model_dump_json(exclude={"name", *unset}).encode()).hexdigest()[:16]

    def prepare(self, builder: ImageBuilder, image: str) -> str:
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
