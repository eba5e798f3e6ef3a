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


# ---- R22k-2: a tab that connects as its terminal exits is never told the end, and never reconnects


def test_r22k_2_a_watcher_that_subscribes_as_the_terminal_exits_is_told_the_end(tmp_path):
    """`AssessServer.terminal` checks `term.exited`, then subscribes; the terminal's pump thread sets `exited`, then
    sends the end (b"") to the subscribers it lists. A tab whose subscribe falls between the two (the task's
    deadline or Submit as the page reconnects, once a second while a tab polls) is listed too late and was never
    told the end: its websocket stays open on a dead terminal (the server's pings keep it alive), the page's
    `connect()` does nothing while it has a socket, and the next task's terminal never shows in that tab: its keys
    go nowhere while task 2's clock runs. Modelled by the interleaving itself: a subscribe after `exited` is set.
    Won before the fix: the watcher got the recent output and never the end. Defence: a watcher subscribed to a
    terminal that has exited is sent the end at once."""
    term = BrowserTerminal(["true"], tmp_path / "t.cast").start()
    assert term.exited.wait(10)
    got: list[bytes] = []
    assert term.subscribe(got.append) is not None
    assert b"" in got, "a watcher of an exited terminal is never told the end"
    term.stop()


def test_r22k_2_control_a_watcher_of_a_live_terminal_is_sent_its_output_and_then_the_end(tmp_path):
    term = BrowserTerminal(["bash", "--norc", "--noprofile", "-i"], tmp_path / "t.cast").start()
    got: list[bytes] = []
    assert term.subscribe(got.append) is not None
    assert b"" not in got
    term.write(b"echo hi-$((40+2)); exit\r")
    assert term.exited.wait(10)
    term.stop()
    assert b"hi-42" in b"".join(got) and got[-1] == b""


# ---- R22k-3: the results file's lock is opened following a link, truncating it, or waiting on a FIFO -----------

def _lock_server(tmp_path, monkeypatch):
    from datetime import timedelta

    from test_assess import Ctx

    import sweserve.assess.server as server_mod
    from sweserve.assess.invites import InviteStore
    from sweserve.assess.packs import choose_pack, save_pack
    from sweserve.assess.server import AssessServer, results_file

    monkeypatch.setattr(server_mod, "run_evaluation", lambda *a, **kw: [])
    bundles = [bundle(1)]
    pack = choose_pack("p", bundles, 1, 3600)
    save_pack(tmp_path / "p.yaml", pack)
    store = InviteStore(tmp_path / "invites.json")
    token = store.create("alice", str(tmp_path / "p.yaml"), pack.version, timedelta(days=1))[1]
    srv = AssessServer(Ctx(), {b.task.task_id: b for b in bundles}, store, tmp_path / "out", tmp_path)  # type: ignore[arg-type]
    lock = results_file(tmp_path / "out", pack, "alice")
    lock = lock.with_name(lock.name + ".lock")
    lock.parent.mkdir(parents=True)
    return srv, store, token, lock


def test_r22k_3_a_linked_lock_file_is_neither_followed_nor_truncated(tmp_path, monkeypatch):
    """A link planted at `<candidate>.jsonl.lock` (anyone who can write the output folder) was opened with "w": the
    file it names was truncated, and the session held a lock on it. Defence: the lock is opened without following a
    link or truncating; such a lock file refuses the session with one line, and the link stays valid."""
    import pytest

    from sweserve.errors import SweserveError

    srv, store, token, lock = _lock_server(tmp_path, monkeypatch)
    victim = tmp_path / "victim.txt"
    victim.write_text("keep me\n")
    lock.symlink_to(victim)
    with pytest.raises(SweserveError, match="cannot be opened"):
        srv.begin(token)
    assert victim.read_text() == "keep me\n", "the link's target was truncated"
    assert store.peek(token).used_at is None, "the refused link was spent"


def test_r22k_3_a_fifo_lock_file_does_not_hold_the_server(tmp_path, monkeypatch):
    """A FIFO at the lock's path: `open(..., "w")` waited for a reader forever, under the server's lock, so no
    candidate of that server could start. Defence: opened without waiting (O_NONBLOCK): refused at once."""
    import os

    from sweserve.errors import SweserveError

    srv, store, token, lock = _lock_server(tmp_path, monkeypatch)
    os.mkfifo(lock)
    out: list[BaseException | None] = []

    def begin():
        try:
            srv.begin(token)
            out.append(None)
        except BaseException as exc:  # noqa: BLE001 - the test reads what it raised
            out.append(exc)

    thread = threading.Thread(target=begin, daemon=True)
    thread.start()
    thread.join(10)
    assert out, "begin still waits on the FIFO"
    assert isinstance(out[0], SweserveError), out


def test_r22k_3_control_a_plain_lock_file_left_behind_is_reused(tmp_path, monkeypatch):
    srv, store, token, lock = _lock_server(tmp_path, monkeypatch)
    lock.write_text("")
    assert srv.begin(token)
