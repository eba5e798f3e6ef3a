"""The two reference candidates every valid task is checked against: the oracle (must pass) and null (must fail)."""

from __future__ import annotations

import shlex

from sweserve.agents.base import IN_BOX, TaskImageAgent
from sweserve.environment.sandbox import Sandbox
from sweserve.models import AgentRun, TaskBundle


class OracleAgent(TaskImageAgent):
    """Applies the task's own oracle patch: the upper bound every valid task must reach."""

    name = "oracle"

    def config_hash(self) -> str:
        return "oracle"

    def solve(self, box: Sandbox, bundle: TaskBundle) -> AgentRun:
        path = f"{IN_BOX}/oracle.patch"
        box.put_file(path, bundle.oracle_patch.encode("utf-8"))
        res = box.exec(f"git apply --binary --whitespace=nowarn {shlex.quote(path)} && rm -f {shlex.quote(path)}", 120)
        if res.exit_code != 0:
            return AgentRun(agent=self.name, exit_code=res.exit_code, exit_reason="error",
                            error=f"oracle.patch does not apply: {res.tail(300).strip()}")
        return AgentRun(agent=self.name, exit_code=0)


class NullAgent(TaskImageAgent):
    """Changes nothing: every valid task must fail for it."""

    name = "null"

    def config_hash(self) -> str:
        return "null"

    def solve(self, box: Sandbox, bundle: TaskBundle) -> AgentRun:
        return AgentRun(agent=self.name, exit_code=0)
