"""The two reference candidates every valid task is checked against: the oracle (must pass) and null (must fail)."""

from __future__ import annotations

from sweserve.agents.base import PatchError, TaskImageAgent, apply_patch
from sweserve.environment.sandbox import Sandbox
from sweserve.models import AgentRun, TaskBundle


class OracleAgent(TaskImageAgent):
    """Applies the task's own oracle patch: the upper bound every valid task must reach."""

    name = "oracle"

    def config_hash(self) -> str:
        return "oracle"

    def solve(self, box: Sandbox, bundle: TaskBundle) -> AgentRun:
        try:
            apply_patch(box, bundle.oracle_patch, "oracle")
        except PatchError as exc:
            return AgentRun(agent=self.name, exit_code=exc.exit_code, exit_reason="error",
                            error=f"oracle.patch does not apply: {str(exc)[-300:].strip()}")
        return AgentRun(agent=self.name, exit_code=0)


class NullAgent(TaskImageAgent):
    """Changes nothing: every valid task must fail for it."""

    name = "null"

    def config_hash(self) -> str:
        return "null"

    def solve(self, box: Sandbox, bundle: TaskBundle) -> AgentRun:
        return AgentRun(agent=self.name, exit_code=0)
