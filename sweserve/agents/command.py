"""Command agents: a CLI (Claude Code, Codex, mini-swe-agent, a script) run in /testbed under the task's time limit.

What it leaves in the trial folder: `agent.log`, its whole output (the sandbox keeps up to its last 8 MiB);
with `trajectory:` set in its config, the framework's own record (`trajectory.json` for mini-swe-agent,
which writes it to $SWESERVE_TRAJECTORY; `trajectory.jsonl` for Claude Code's stream-json and Codex's --json
events, which are its stdout) and `steps.json`, each step's thought, command and output read from it. Steps,
tokens and cost in the result come from that record (`agents/trajectory.py`).
"""

from __future__ import annotations

import hashlib
import os
import time

from sweserve.agents.base import IN_BOX, INSTRUCTION_PATH, ImageBuilder, redact
from sweserve.agents.config import CommandAgentConfig
from sweserve.agents.trajectory import parse_trajectory, steps_json
from sweserve.environment.sandbox import Sandbox
from sweserve.errors import InfraError
from sweserve.models import TRAJECTORY_STEPS_FILE, AgentRun, TaskBundle

TRAJECTORY_PATH = f"{IN_BOX}/trajectory.json"  # $SWESERVE_TRAJECTORY: where a framework saves its own record
TRAJECTORY_MAX_BYTES = 16 * 2**20
LOG_TAIL_CHARS = 4000  # of the log kept in the results index; the trial folder has all of it


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

    @property
    def models(self) -> list[str]:
        """With closed book, the only models its requests may name."""
        return self.cfg.models

    def secrets(self) -> list[str]:
        """The values passed through `env:`: redacted from everything the trial records."""
        return list(self._passed.values())

    def config_hash(self) -> str:
        # egress settings count only when set, so results of configs written before they existed still resume
        unset = {f for f in ("egress", "closed_book", "models", "trajectory") if not getattr(self.cfg, f)}
        return hashlib.sha256(self.cfg.model_dump_json(exclude={"name", *unset}).encode()).hexdigest()[:16]

    def prepare(self, builder: ImageBuilder, image: str) -> str:
        return builder.agent(image, self.cfg.name, self.cfg.install) if self.cfg.install else image

    def solve(self, box: Sandbox, bundle: TaskBundle) -> AgentRun:
        t0 = time.monotonic()
        box.put_file(INSTRUCTION_PATH, bundle.instruction.encode("utf-8"))
        env = {**self._passed, "SWESERVE_INSTRUCTION": INSTRUCTION_PATH, "SWESERVE_TASK_ID": bundle.task.task_id,
               "SWESERVE_TRAJECTORY": TRAJECTORY_PATH}
        res = box.exec(self.command, bundle.task.resources.timeout_s, env=env)
        secrets = list(self._passed.values())
        log = res.output
        if res.truncated:
            cut = res.output_bytes - len(res.output.encode())
            log = f"[sweserve: the first {cut} bytes of this log were cut]\n" + log
        run = AgentRun(
            agent=self.name, version=self.cfg.version, model=self.cfg.model, exit_code=res.exit_code,
            exit_reason="timed_out" if res.timed_out else "finished", wall_s=round(time.monotonic() - t0, 3),
            log_tail=redact(res.tail(LOG_TAIL_CHARS), secrets),
            records={"agent.log": redact(log, secrets)},
        )
        return self._read_trajectory(box, run, res.output) if self.cfg.trajectory else run

    def _read_trajectory(self, box: Sandbox, run: AgentRun, stdout: str) -> AgentRun:
        """Copy the framework's record into the run's records and take steps, tokens and cost from it."""
        fmt = self.cfg.trajectory or ""
        if fmt == "mini-swe-agent":
            try:
                raw = box.read_file(TRAJECTORY_PATH, max_bytes=TRAJECTORY_MAX_BYTES)
            except InfraError:  # too big, or the sandbox is gone: the run stands without it
                raw = None
            text, name = (raw or b"").decode("utf-8", "replace"), "trajectory.json"
        else:
            text, name = stdout, "trajectory.jsonl"
        if not text.strip():
            return run
        traj = parse_trajectory(fmt, text)
        secrets = list(self._passed.values())
        records = {**run.records, name: redact(text, secrets),
                   TRAJECTORY_STEPS_FILE: redact(steps_json(traj), secrets)}
        return run.model_copy(update={
            "steps": traj.calls, "prompt_tokens": traj.prompt_tokens, "completion_tokens": traj.completion_tokens,
            "cost_usd": traj.cost_usd, "usage_from": "agent", "records": records})
