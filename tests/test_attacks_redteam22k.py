"""Red team 22k: the newest assess-server fixes (round 22g) and their neighbours, attacked by a candidate at the
browser terminal.

Each test is written to fail while the attack works and to pass once it is defended; controls keep honest
behaviour working. A real shell on a real pseudo-terminal (`BrowserTerminal`); the sandbox is a stand-in.
"""

from __future__ import annotations

import threading
import time

from test_assess import bundle

from sweserve.assess.agent import BrowserAgent, Seat
from sweserve.assess.recorder import BrowserTerminal

# ---- R22k-1: keys typed after the task ended (the deadline, or a Submit) still reach the shell


class _Seat(Seat):
    """A seat that keeps the terminal it was given: what a tab's websocket holds once it has connected."""

    held: BrowserTerminal | None = None

    def take(self, task_id: str, terminal: BrowserTerminal, deadline: float) -> None:
        self.held = terminal
        super().take(task_id, terminal, deadline)


class _Box:
    """A sandbox stand-in: a local shell, and a `docker kill` that takes the time a real one takes, during which
    the candidate's open websocket (the terminal it already holds) sends one more line of keys."""

    def __init__(self, seat: _Seat, late: bytes, kill_s: float = 1.5):
        self.seat, self.late, self.kill_s = seat, late, kill_s

    def put_file(self, path: str, data: bytes, mode: int | None = None) -> None:
        pass

    def interactive_argv(self, shell: str, tty: bool = False) -> list[str]:
        return ["bash", "--norc", "--noprofile", "-i"]

    def kill(self) -> None:
        assert self.seat.held is not None
        if self.late:
            self.seat.held.write(self.late)  # as `AssessServer.terminal` does for a frame of the open tab
        time.sleep(self.kill_s)


def _solve(tmp_path, late: bytes, *, before: bytes = b"", limit_s: int = 2):
    seat = _Seat("cand")
    agent = BrowserAgent("cand", seat, limit_s, lambda b: tmp_path / "t.cast")
    box = _Box(seat, late)
    if before:
        def type_early() -> None:
            end = time.monotonic() + 5
            while seat.held is None and time.monotonic() < end:
                time.sleep(0.02)
            time.sleep(0.3)
            assert seat.held is not None
            seat.held.write(before)
        threading.Thread(target=type_early, daemon=True).start()
    return agent.solve(box, bundle(1))  # type: ignore[arg-type]


def test_r22k_1_keys_typed_after_the_deadline_do_not_reach_the_shell(tmp_path):
    """At the deadline (or a Submit) `BrowserAgent.solve` takes the seat's terminal away (a new tab gets none),
    then kills the sandbox (`docker kill`, a second or so on a busy host), then stops the relay. A tab whose
    websocket is already open keeps the terminal it holds, and `BrowserTerminal.write` takes keys until the shell
    has exited: a candidate whose page sends a prepared line at the deadline (or just after pressing Submit), say
    `git apply` of a patch written out of band or `sed -i` of the fix, has it run after the task ended, before
    the kill lands, and it is graded (the tree is copied after the kill). Won before the fix: the late line ran.
    Defence: the terminal takes no key once its task has ended (`BrowserTerminal.close_input`, before the kill)."""
    marker = tmp_path / "late"
    run = _solve(tmp_path, f"touch {marker}\r".encode())
    assert run.exit_reason == "time_limit"
    assert not marker.exists(), "keys typed after the deadline ran in the sandbox"


def test_r22k_1_control_keys_typed_before_the_deadline_reach_the_shell(tmp_path):
    marker = tmp_path / "early"
    _solve(tmp_path, b"", before=f"touch {marker}\r".encode())
    assert marker.exists()
