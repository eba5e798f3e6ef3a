"""Interactive sessions for human engineers: a shell in the task sandbox with a countdown, graded like any agent."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

from sweserve.agents.base import INSTRUCTION_PATH, extract_diff
from sweserve.environment.context import Context
from sweserve.environment.gpus import skip_reason
from sweserve.errors import SweserveError
from sweserve.evaluation.results import ResultsWriter
from sweserve.evaluation.trial import _result, grade_patch
from sweserve.models import AgentRun, RunResult, TaskBundle, now

HISTORY = "/sweserve/history"
RCFILE = "/sweserve/bashrc"


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


class HumanAgent:
    def __init__(self, candidate: str):
        self.candidate = candidate
        self.name = f"human-{candidate}"


def run_session(ctx: Context, bundle: TaskBundle, candidate: str, time_limit: int, output: Path,
                console, attempt: int = 1) -> RunResult:
    task = bundle.task
    agent = HumanAgent(candidate)
    started, t0 = now(), time.monotonic()
    done = lambda **kw: _result(ctx, bundle, agent, attempt, started, t0, **kw)  # noqa: E731
    if not task.validated:
        raise SweserveError(f"{task.task_id} is not validated: run `sweserve validate` first")
    if (why := skip_reason(task.resources.gpus, ctx.host_gpus)):
        raise SweserveError(f"{task.task_id} cannot run here: {why}")
    gpu_ids = ctx.gpu_pool.acquire(task.resources.gpus)
    writer = ResultsWriter(output)
    try:
        image = ctx.task_image(bundle)
        with ctx.sandbox(image, task.task_id, "candidate", task.resources, gpu_ids) as box:
            deadline = int(time.time()) + time_limit
            box.put_file(INSTRUCTION_PATH, bundle.instruction.encode())
            box.put_file(RCFILE, rcfile(deadline).encode())
            box.put_file(HISTORY, b"", mode=0o666)
            console.rule(f"{task.task_id} — candidate {candidate}")
            console.print(bundle.instruction, markup=False, highlight=False)
            console.rule(f"you have {time_limit // 60}m{time_limit % 60}s; the repository is /testbed; "
                         f"type `exit` when done (instruction: {INSTRUCTION_PATH})")
            tty = ["-it"] if sys.stdin.isatty() else ["-i"]
            shell = f"timeout --foreground -s KILL {time_limit} bash --rcfile {RCFILE} -i"
            t_shell = time.monotonic()
            proc = subprocess.run(["docker", "exec", *tty, "-w", "/testbed", box.name, "bash", "-c", shell])
            used = round(time.monotonic() - t_shell, 3)
            timed_out = proc.returncode == 137 and used >= time_limit - 1
            history = (box.read_file(HISTORY) or b"").decode("utf-8", "replace")
            patch = extract_diff(box, task.base_commit)
        transcript = "\n".join(f"{stamp}\t{cmd}" for stamp, cmd in parse_history(history))
        run = AgentRun(agent=agent.name, candidate=candidate, exit_code=proc.returncode, wall_s=used,
                       exit_reason="time_limit" if timed_out else "finished", transcript=transcript)
        console.print("grading …")
        result = grade_patch(ctx, bundle, image, patch, gpu_ids, done, run)
    finally:
        ctx.gpu_pool.release(gpu_ids)
        ctx.close()
    writer.write(result)
    return result
