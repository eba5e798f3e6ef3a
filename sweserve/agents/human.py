"""A human engineer as an agent: a shell in the task sandbox with a countdown, graded like any other candidate."""

from __future__ import annotations

import subprocess
import sys
import time

from rich.console import Console

from sweserve.agents.base import IN_BOX, INSTRUCTION_PATH, TaskImageAgent
from sweserve.environment.sandbox import Sandbox
from sweserve.models import AgentRun, TaskBundle

HISTORY = f"{IN_BOX}/history"
RCFILE = f"{IN_BOX}/bashrc"


def rcfile(deadline: int) -> str:
    """bash start-up for the candidate: timestamped history appended after every command, time left in the prompt."""
    return f"""\
export HISTFILE={HISTORY} HISTTIMEFORMAT='%s ' HISTSIZE=100000 HISTFILESIZE=100000
shopt -s histappend
SWESERVE_DEADLINE={deadline}
PROMPT_COMMAND='history -a; SWESERVE_LEFT=$(( (SWESERVE_DEADLINE - $(date +%s)) ))'
PS1='[sweserve $((SWESERVE_LEFT / 60))m$((SWESERVE_LEFT % 60))s left] \\w\\$ '
cd /testbed
"""


def parse_history(text: str) -> list[tuple[int, str]]:
    """bash's HISTTIMEFORMAT file (#<epoch> lines before each command) → [(epoch, command)]."""
    out, stamp = [], 0
    for line in text.splitlines():
        if line.startswith("#") and line[1:].isdigit():
            stamp = int(line[1:])
        elif line.strip():
            out.append((stamp, line))
    return out


class HumanAgent(TaskImageAgent):
    """The engineer types in the sandbox through `docker exec`; the time limit kills the shell."""

    def __init__(self, candidate: str, time_limit: int, console: Console, run_shell=None):
        self.candidate = candidate
        self.name = f"human-{candidate}"
        self.time_limit = time_limit
        self.console = console
        self._run_shell = run_shell or (lambda argv: subprocess.run(argv).returncode)

    def config_hash(self) -> str:
        return "human"

    def solve(self, box: Sandbox, bundle: TaskBundle) -> AgentRun:
        task, limit = bundle.task, self.time_limit
        deadline = int(time.time()) + limit
        box.put_file(INSTRUCTION_PATH, bundle.instruction.encode())
        box.put_file(RCFILE, rcfile(deadline).encode())
        box.put_file(HISTORY, b"", mode=0o666)
        self.console.rule(f"{task.task_id} — candidate {self.candidate}")
        self.console.print(bundle.instruction, markup=False, highlight=False)
        self.console.rule(f"you have {limit // 60}m{limit % 60}s; the repository is /testbed; "
                          f"type `exit` when done (instruction: {INSTRUCTION_PATH})")
        shell = f"timeout --foreground -s KILL {limit} bash --rcfile {RCFILE} -i"
        t_shell = time.monotonic()
        code = self._run_shell(box.interactive_argv(shell, tty=sys.stdin.isatty()))
        used = round(time.monotonic() - t_shell, 3)
        timed_out = code == 137 and used >= limit - 1
        history = (box.read_file(HISTORY) or b"").decode("utf-8", "replace")
        transcript = "\n".join(f"{stamp}\t{cmd}" for stamp, cmd in parse_history(history))
        self.console.print("grading …")
        return AgentRun(agent=self.name, candidate=self.candidate, exit_code=code, wall_s=used,
                        exit_reason="time_limit" if timed_out else "finished", transcript=transcript)
