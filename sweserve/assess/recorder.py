"""The candidate's terminal, held and recorded by the server: a pseudo-terminal relaying a sandbox shell.

The server forks the sandbox's interactive command (`Sandbox.interactive_argv`, e.g. `docker exec -it … bash`)
on a pseudo-terminal it holds. Every byte typed (from the websocket) and every byte shown (from the shell) passes
through `BrowserTerminal` in this process, which writes it, with its time, to an asciinema v2 cast on the host
(`CastWriter`) before relaying it. Nothing in the sandbox can reach that file or the relay: what a program there
prints lands in an output ("o") event as JSON-escaped text, never as an input ("i") event, so the commands a
reviewer sees (`commands_from_cast`, from input events only) are what the candidate typed. The keystroke and
screen summaries a `RunResult` carries are agents/terminal.py's `TerminalRecord`, fed from the same relay.

Several browser tabs may watch one terminal; a tab that reconnects is sent the recent output first, so it
resumes the same shell where it was.
"""

from __future__ import annotations

import codecs
import dataclasses
import errno
import fcntl
import json
import os
import pty
import queue
import select
import signal
import struct
import termios
import threading
import time
from collections.abc import Callable
from pathlib import Path

from sweserve.agents.terminal import (
    CUT,
    DROPPED,
    TerminalRecord,
    TypedLines,
    detach_sequence,
    make_raw,
    relays_terminal,
    typed_lines,
    undetached,
)

CAST_MAX_BYTES = 64 * 2**20  # past this, output is no longer written, and input past as much again; a marker says so
RESIZE_MAX_BYTES = 2**20  # window-size events kept (tens of thousands of resizes)
MAX_WATCHERS = 4  # browser tabs on one terminal at once
REPLAY_TAIL_BYTES = 128 * 1024  # sent to a tab that (re)connects
# entries in the commands typed list (the transcript, the replay page); a day of honest typing is far less, while
# a flood of one-key lines within the cast's input budget made 22 million (red team 16c, R16c-1)
COMMANDS_MAX = 20_000
# keys typed and not yet taken by the terminal; past it, keys are dropped (as a terminal's own full queue drops
# them), so a shell that stops reading holds nothing of the server's (red team 12a, R12a-4)
INPUT_PENDING_BYTES = 1 << 20
# what one queued item (keys, a size, a drop count) holds beyond its bytes (its object, its slot), charged against
# INPUT_PENDING_BYTES: counted in keys' bytes alone, two keys and a resize at a time held 50 times the limit
# (red team 20b, R20b-1)
QUEUED_ITEM_COST = 128
# the cast's last marker when output past its budget was shown and not kept, with how many bytes (red team 18d, R18d-3)
OUTPUT_UNKEPT = "output shown past the recording limit, not kept:"


class CastWriter:
    """An asciinema v2 cast: a header line, then one JSON array per event: [seconds, code, text]."""

    def __init__(self, path: Path, width: int, height: int, title: str = ""):
        path.parent.mkdir(parents=True, exist_ok=True)
        self.path = path
        self._fh = path.open("w", encoding="utf-8")
        self._lock = threading.Lock()
        self._t0 = time.monotonic()
        self.bytes = 0
        self.kept = {"o": 0, "i": 0, "r": 0}  # bytes written of each kind of event
        self.capped = False
        self.output_unkept = 0  # bytes of output past the budget: relayed to the candidate, not in the cast
        self.input_capped = False
        self._cut: set[str] = set()  # kinds of event past their budget: none of them is written again
        self._dec = {"o": codecs.getincrementaldecoder("utf-8")("replace"),
                     "i": codecs.getincrementaldecoder("utf-8")("replace")}
        header = {"version": 2, "width": width, "height": height, "timestamp": int(time.time()),
                  "env": {"TERM": "xterm-256color", "SHELL": "/bin/bash"}, "title": title}
        self._line(json.dumps(header))

    def _line(self, line: str) -> None:
        self._fh.write(line + "\n")
        self._fh.flush()
        self.bytes += len(line) + 1

    def event(self, code: str, data: bytes | str) -> bool:
        """Write one event; whether it is on the record (False: past its kind's budget, or the cast is closed)."""
        with self._lock:
            if self._fh.closed:
                return False
            kind = code if code in ("o", "r") else "i"
            # the cut is final: checked event by event, a message too big for what was left was dropped and the
            # smaller ones after it kept, under a marker saying nothing after it was (red team 17d, R17d-3)
            if kind in self._cut:
                self._unkept(kind, data)
                return False
            text = self._dec[code].decode(data) if isinstance(data, bytes) else data
            if not text:
                return True  # the start of a character, kept until the rest of it comes
            # each kind of event has a budget of its own: output past its limit is dropped; input (and the
            # markers of keys dropped) past its own (a paste flood, never typing), with a marker of its own where
            # it stops, where the commands typed list ends saying so (red team 12a, R12a-6); resizes past theirs,
            # so that no flood of one kind spends what keeps another (red team 14c, R14c-10: resizes spent the
            # input's)
            line = json.dumps([self.elapsed(), code, text])
            if self.kept[kind] + len(line) > (RESIZE_MAX_BYTES if kind == "r" else CAST_MAX_BYTES):
                self._cut.add(kind)
                self._unkept(kind, data)
                if kind == "o":
                    self.capped = True
                    self._line(json.dumps([self.elapsed(), "m", "over the recording limit: the rest not kept"]))
                elif kind == "i":
                    self.input_capped = True
                    self._line(json.dumps([self.elapsed(), "m", CUT]))
                return False
            self.kept[kind] += len(line) + 1
            self._line(line)
            return True

    def _unkept(self, kind: str, data: bytes | str) -> None:
        if kind == "o":
            self.output_unkept += len(data) if isinstance(data, bytes) else len(data.encode("utf-8", "replace"))

    def elapsed(self) -> float:
        return round(time.monotonic() - self._t0, 6)

    def close(self) -> None:
        with self._lock:
            if not self._fh.closed:
                if self.output_unkept:  # what the candidate saw that the replay does not hold, said at the end
                    self._line(json.dumps([self.elapsed(), "m", f"{OUTPUT_UNKEPT} {self.output_unkept} bytes"]))
                os.fsync(self._fh.fileno())
                self._fh.close()


def read_cast(path: Path) -> tuple[dict, list[tuple[float, str, str]]]:
    """A cast's header and events; a torn last line (a killed server) is ignored."""
    lines = path.read_text(encoding="utf-8", errors="replace").splitlines()
    header = json.loads(lines[0]) if lines else {}
    events = []
    for line in lines[1:]:
        try:
            t, code, data = json.loads(line)
        except (ValueError, TypeError):
            continue
        events.append((float(t), str(code), str(data)))
    return header, events


def output_unkept(path: Path) -> int:
    """Bytes of output the candidate was shown that the cast does not hold (past its budget): its closing marker's
    count, or 1 when the cast was cut and never closed (a killed server: how much is unknown, but not none)."""
    _, events = read_cast(path)
    marks = [data for _, code, data in events if code == "m"]
    for data in marks:
        if data.startswith(OUTPUT_UNKEPT):
            try:
                return int(data.removeprefix(OUTPUT_UNKEPT).split()[0])
            except (ValueError, IndexError):
                return 1
    return 1 if any(data.startswith("over the recording limit") for data in marks) else 0


def commands_from_cast(path: Path) -> TypedLines:
    """What the candidate typed, one entry per Enter, with the time it was started: rebuilt from the cast's input
    events and markers only (`agents.terminal.typed_lines`, the one line rebuilder); past `COMMANDS_MAX`
    entries, a last one says how many more the cast holds."""
    _, events = read_cast(path)
    return typed_lines(events, COMMANDS_MAX)


@dataclasses.dataclass
class _Size:
    cols: int
    rows: int
    charged: int = 0  # of the pending budget, given back when the key thread takes it


@dataclasses.dataclass
class _Drop:
    n: int  # bytes
    charged: int = 0


class BrowserTerminal:
    """argv on a pseudo-terminal this process holds; input from `write`, output to subscribers and the cast."""

    def __init__(self, argv: list[str], cast_path: Path, cols: int = 120, rows: int = 32, title: str = ""):
        self.argv = argv
        self.cast = CastWriter(cast_path, cols, rows, title)
        self.record = TerminalRecord()
        self.cols, self.rows = cols, rows
        self._subscribers: list[Callable[[bytes], None]] = []
        # the tabs holding a place among MAX_WATCHERS: each from `subscribe` until `unsubscribe` (its connection
        # ended), a muted one too: a tab that fell behind is still a connection of the server's until it is gone
        # (red team 17d, R17d-2)
        self._tabs: list[Callable[[bytes], None]] = []
        self._tail = bytearray()
        self._lock = threading.Lock()
        self._t0 = time.monotonic()
        self.exited = threading.Event()
        # set when the task ends (`close_input`), before its sandbox is killed: a tab's open websocket holds this
        # terminal, and its keys reached the shell until the kill landed, run after the deadline and graded (red
        # team 22k, R22k-1)
        self.input_closed = threading.Event()
        self.exit_code: int | None = None
        self.pid = 0
        self.master = -1
        # what the event loop hands the key thread, in order: keys (bytes), a window size, a count of keys dropped,
        # or None (the end); a size or a count queued since the last keys is updated in place rather than queued
        # again, so a flood of sizes and drops queues two items at most between keys (a size's place among drops
        # with no key between them changes nothing)
        self._keys: queue.SimpleQueue[bytes | _Size | _Drop | None] = queue.SimpleQueue()
        self._last: dict[type, _Size | _Drop] = {}  # the size and drop count queued since the last keys, not taken
        self._newest_size: _Size | None = None  # the size queued last, until the key thread takes it
        self._pending = 0
        self.dropped = 0  # bytes typed that the terminal never took
        # the client's detach keys (`detach_sequence`): typed in a row, they ended the relay and so the task with
        # time left (red team 22c, R22c-3; 23c, R23c-3); the last of them is never delivered after the others.
        # `_delivered` is the end of what the terminal was given, as long as the sequence less one key
        self.detach = detach_sequence(argv)
        self._delivered = b""
        # set once the terminal has shown something. A client relaying a terminal of its own (`relays_terminal`)
        # is given no key before: the sandbox's shell is not yet managing its terminal, whose line discipline made
        # a ^C typed then SIGINT for the shell (or its `timeout`), ending the relay (red team 23k, R23k-1)
        self.spoke = threading.Event()
        if not relays_terminal(argv):
            self.spoke.set()

    def start(self) -> "BrowserTerminal":
        pid, master = pty.fork()
        if pid == 0:  # the child: exec at once (this process holds threads)
            try:
                os.execvp(self.argv[0], self.argv)
            finally:
                os._exit(127)
        self.pid, self.master = pid, master
        if relays_terminal(self.argv):
            # raw from the start, before any key is written: until the client had made it raw itself (a tenth of a
            # second to a second), the line discipline turned ^C and ^\ into signals for the client, not the
            # sandbox's shell, and the relay, so the task, ended with time left (red team 23k, R23k-1)
            make_raw(master)
        # non-blocking: `write` runs on the server's event loop, and a program that does not read its terminal
        # must never hold that loop (every candidate's session runs on it); the feeder waits instead
        os.set_blocking(master, False)
        self._set_size()
        threading.Thread(target=self._pump, name=f"terminal-{pid}", daemon=True).start()
        threading.Thread(target=self._feed, name=f"terminal-keys-{pid}", daemon=True).start()
        return self

    def _set_size(self) -> None:
        try:
            fcntl.ioctl(self.master, termios.TIOCSWINSZ, struct.pack("HHHH", self.rows, self.cols, 0, 0))
        except OSError:
            pass

    def _pump(self) -> None:
        while True:
            try:
                data = os.read(self.master, 65536)
            except BlockingIOError:
                if self._wait(read=True):
                    continue
                data = b""
            except OSError as exc:
                if exc.errno not in (errno.EIO, errno.EBADF):
                    raise
                data = b""
            if not data:
                break
            self.spoke.set()
            self.cast.event("o", data)  # recorded before anyone sees it
            self.record.shown(data)
            with self._lock:
                self._tail += data
                if len(self._tail) > 2 * REPLAY_TAIL_BYTES:
                    del self._tail[:-REPLAY_TAIL_BYTES]
                subscribers = list(self._subscribers)
            for send in subscribers:
                send(data)
        _, status = os.waitpid(self.pid, 0)
        self.exit_code = os.waitstatus_to_exitcode(status) if not os.WIFSIGNALED(status) else 128 + os.WTERMSIG(status)
        self.cast.close()
        self.exited.set()
        self._keys.put(None)
        with self._lock:
            subscribers = list(self._subscribers)
        for send in subscribers:
            send(b"")  # the end

    def write(self, data: bytes) -> None:
        """Keys typed in a browser tab: handed to the key thread, which records them, then passes them to the shell.
        This runs on the server's one event loop, so it never touches the disk: a slow disk (or the cast's final
        fsync, under the cast's lock) stalled every candidate's session for each key typed (red team 18d, R18d-2)."""
        if self.exited.is_set() or self.input_closed.is_set() or not data:
            return
        with self._lock:
            # (a message is always taken into an empty queue: it is a websocket message's, MAX_INPUT_BYTES at most)
            taken = not self._pending or self._pending + len(data) + QUEUED_ITEM_COST <= INPUT_PENDING_BYTES
            if taken:
                self._pending += len(data) + QUEUED_ITEM_COST
                self._last.clear()
                self._keys.put(data)
                return
            # every drop, where it happened: the commands typed list shows it in the line (R13-4); drops one after
            # another are one count, so a flood of them queues nothing more
            self.dropped += len(data)
            if isinstance(drop := self._last.get(_Drop), _Drop):
                drop.n += len(data)
                return
            self._last[_Drop] = drop = _Drop(len(data))
            self._keys.put(drop)

    def _wait(self, read: bool) -> bool:
        """Until the terminal can be read (or written), a second at most; False once it is gone."""
        fd = self.master
        if fd < 0:
            return False
        try:
            select.select([fd] if read else [], [] if read else [fd], [], 1.0)
        except (OSError, ValueError):
            return False
        return True

    def _feed(self) -> None:
        """Keys, window sizes and drop markers from the event loop, in order, each recorded in the cast first, on
        this thread of its own; then keys to the terminal as it takes them, and sizes applied."""
        while (item := self._keys.get()) is not None:
            if isinstance(item, bytes):
                while not (self.spoke.wait(0.2) or self.exited.is_set() or self.input_closed.is_set()):
                    pass  # held until the far side has spoken (`spoke`)
                self._deliver(item)
                continue
            with self._lock:  # a copy as it is now: the loop updates the one queued last until it is taken
                if self._last.get(type(item)) is item:
                    del self._last[type(item)]
                if self._newest_size is item:
                    self._newest_size = None
                self._pending -= item.charged
                item = dataclasses.replace(item)
            if isinstance(item, _Drop):
                self.cast.event("m", f"{DROPPED} {item.n} bytes")
            # recorded first, applied only if recorded: past the resize budget the terminal kept changing size while
            # the replay drew everything after at the last size recorded (red team 17d, R17d-4)
            elif (item.cols, item.rows) != (self.cols, self.rows) and self.cast.event("r", f"{item.cols}x{item.rows}"):
                self.cols, self.rows = item.cols, item.rows
                self._set_size()

    def _deliver(self, data: bytes) -> None:
        # recorded as taken, before the terminal has it; a key the cast does not keep (past its input budget) never
        # reaches the terminal: delivered, it ran on no record (red team 17d, R17d-3); nor one still queued when
        # the task ended (`close_input`): the shell would run it after the end
        if self.input_closed.is_set():
            view = memoryview(b"")
        elif self.cast.event("i", (kept := self._undetached(data))[0]):
            keys, delivered = kept
            self._delivered = delivered
            if len(keys) < len(data):
                self.cast.event("m", f"{DROPPED} {len(data) - len(keys)} bytes")
                with self._lock:
                    self.dropped += len(data) - len(keys)
            self.record.typed(time.monotonic() - self._t0, keys)
            view = memoryview(keys)
        else:
            with self._lock:
                self.dropped += len(data)
            view = memoryview(b"")
        while view and not self.exited.is_set() and not self.input_closed.is_set():
            try:
                view = view[os.write(self.master, view):]
            except BlockingIOError:
                if not self._wait(read=False):
                    break
            except OSError:
                break
        with self._lock:
            self._pending -= len(data) + QUEUED_ITEM_COST

    def _undetached(self, data: bytes) -> tuple[bytes, bytes]:
        """`data` less each key that would complete the detach sequence (`undetached`), and the end of what the
        terminal will have been given then (nothing changes until the caller keeps it)."""
        return undetached(self.detach, self._delivered, data)

    def resize(self, cols: int, rows: int) -> None:
        """A tab's window size, handed to the key thread (recorded there, then applied): on the event loop, like
        `write`, nothing touches the disk. Sizes one after another are one: only the last of them is queued."""
        if self.exited.is_set() or self.input_closed.is_set():
            return
        cols, rows = max(20, min(cols, 500)), max(5, min(rows, 200))
        with self._lock:
            if isinstance(size := self._last.get(_Size), _Size):
                size.cols, size.rows = cols, rows
                return
            if self._pending + QUEUED_ITEM_COST > INPUT_PENDING_BYTES and self._newest_size is not None:
                # no room: the newest size still queued becomes this one (recorded and applied where it is queued,
                # a few keys early: the replay and the terminal still agree), so a flood of them queues nothing
                self._newest_size.cols, self._newest_size.rows = cols, rows
                return
            self._last[_Size] = self._newest_size = size = _Size(cols, rows, QUEUED_ITEM_COST)
            self._pending += QUEUED_ITEM_COST
            self._keys.put(size)

    def subscribe(self, send: Callable[[bytes], None]) -> bytes | None:
        """Add a watcher; returns the recent output, to draw the screen as it was (a reconnect), or None when
        MAX_WATCHERS tabs already watch."""
        with self._lock:
            if len(self._tabs) >= MAX_WATCHERS:
                return None
            self._tabs.append(send)
            self._subscribers.append(send)
            tail = bytes(self._tail[-REPLAY_TAIL_BYTES:])
        # the pump sets `exited` before it lists the subscribers it sends the end: one that came after that list
        # (a tab connecting as the task ends) is sent it here, or its socket stayed open on a dead terminal and the
        # page never connected to the next task's (red team 22k, R22k-2); a second end is harmless
        if self.exited.is_set():
            send(b"")
        return tail

    def mute(self, send: Callable[[bytes], None]) -> None:
        """Send the watcher no more output; it keeps its place until `unsubscribe` (its connection has ended)."""
        with self._lock:
            if send in self._subscribers:
                self._subscribers.remove(send)

    def unsubscribe(self, send: Callable[[bytes], None]) -> None:
        """The watcher is gone: no more output, and its place is free."""
        with self._lock:
            if send in self._subscribers:
                self._subscribers.remove(send)
            if send in self._tabs:
                self._tabs.remove(send)

    def close_input(self) -> None:
        """The task has ended: no key (nor window size) reaches the shell from now on, whoever still holds this
        terminal; its output is still relayed and recorded until it exits."""
        self.input_closed.set()

    def stop(self, grace_s: float = 3.0) -> int | None:
        """End the relay: hang up the terminal, then kill the client if it lingers; the exit code."""
        if self.pid and not self.exited.is_set():
            for sig in (signal.SIGHUP, signal.SIGKILL):
                try:
                    os.kill(self.pid, sig)
                except ProcessLookupError:
                    break
                if self.exited.wait(grace_s):
                    break
        self._keys.put(None)
        if self.exited.wait(grace_s) and self.master >= 0:  # the pump is done with it
            try:
                os.close(self.master)
            except OSError:
                pass
            self.master = -1
        self.cast.close()
        return self.exit_code
