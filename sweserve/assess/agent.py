"""A candidate at a browser terminal, as an `Agent` the trial pipeline runs like any other.

`BrowserAgent.solve` starts the sandbox's shell on a pseudo-terminal the server holds (`recorder.BrowserTerminal`,
recording to the trial's folder), hands it to the candidate's `Seat` (what the server's pages and websocket
reach), and returns when the candidate submits, the shell ends, or the deadline passes (then the session is
submitted as it stands). The submission is taken and graded by the pipeline after that, never by this code.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from sweserve.agents.base import INSTRUCTION_PATH, TaskImageAgent
from sweserve.agents.human import HISTORY, RCFILE, rcfile
from sweserve.assess.recorder import BrowserTerminal, commands_from_cast, read_cast
from sweserve.environment.sandbox import Sandbox
from sweserve.models import AgentRun, TaskBundle

CAST_FILE = "terminal.cast"


@dataclass
class Seat:
    """What one candidate's browser reaches of the task in progress: its terminal, deadline and a submit switch."""

    candidate: str
    terminal: BrowserTerminal | None = None
    task_id: str | None = None
    deadline: float | None = None  # epoch seconds
    submitted: threading.Event = field(default_factory=threading.Event)
    changed: threading.Condition = field(default_factory=threading.Condition)

    def take(self, task_id: str, terminal: BrowserTerminal, deadline: float) -> None:
        with self.changed:
            self.task_id, self.terminal, self.deadline = task_id, terminal, deadline
            self.submitted = threading.Event()
            self.changed.notify_all()

    def leave(self) -> None:
        with self.changed:
            self.terminal, self.deadline = None, None
            self.changed.notify_all()

    def left_s(self) -> int | None:
        return None if self.deadline is None else max(0, int(self.deadline - time.time()))


class BrowserAgent(TaskImageAgent):
    def __init__(self, candidate: str, seat: Seat, time_limit_s: int, cast_path: Callable[[TaskBundle], Path]):
        self.candidate = candidate
        self.name = f"human-{candidate}"
        self.seat, self.time_limit_s, self.cast_path = seat, time_limit_s, cast_path

    def config_hash(self) -> str:
        return "human"

    def solve(self, box: Sandbox, bundle: TaskBundle) -> AgentRun:
        limit = self.time_limit_s
        deadline = time.time() + limit
        box.put_file(INSTRUCTION_PATH, bundle.instruction.encode())
        box.put_file(RCFILE, rcfile(int(deadline)).encode())
        box.put_file(HISTORY, b"", mode=0o666)
        # the shell dies at the deadline in the sandbox too; the server stops waiting then whatever it does
        shell = f"timeout --foreground -s KILL {limit + 5} bash --rcfile {RCFILE} -i"
        cast = self.cast_path(bundle)
        term = BrowserTerminal(box.interactive_argv(shell, tty=True), cast,
                               title=f"{bundle.task.task_id} — {self.candidate}")
        t0 = time.monotonic()
        term.start()
        self.seat.take(bundle.task.task_id, term, deadline)
        submitted = self.seat.submitted
        reason = "time_limit"
        try:
            while time.time() < deadline:
                if submitted.wait(0.2):
                    reason = "submitted"
                    break
                if term.exited.is_set():
                    reason = "finished"
                    break
        finally:
            # no key reaches the shell once the task has ended: a tab's open websocket still holds the terminal
            # (red team 22k, R22k-1)
            term.close_input()
            self.seat.leave()
            # first, from the host (`docker kill`): nothing the candidate left running, stopped, frozen or hidden in
            # a namespace of its own writes after the deadline; the tree is still copied out for grading
            box.kill()
            code = term.stop()
        used = round(time.monotonic() - t0, 3)
        # the transcript ("<epoch>\t<command>", as `session`'s) is the commands typed, from the host's cast: the
        # sandbox's own history is never asked
        began = int(read_cast(cast)[0].get("timestamp", 0))
        transcript = "\n".join(f"{began + int(at)}\t{command}" for at, command in commands_from_cast(cast))
        return AgentRun(agent=self.name, candidate=self.candidate, exit_code=code, wall_s=used, exit_reason=reason,
                        transcript=transcript, keystrokes=term.record.keystrokes(), screen=term.record.screen_text())
