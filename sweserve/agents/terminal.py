"""A human session's terminal, relayed and recorded on the host.

The engineer's keyboard and screen reach the sandbox through a pseudo-terminal this process holds (the
`docker exec -it` client runs on its far side). Every byte typed and every byte shown passes through
`TerminalRecorder.run`, so the record is made outside the container: disabling the shell's history,
killing the shell or rewriting files in the sandbox changes nothing in it. What was typed is the
authoritative transcript (the sandbox can print anything, but cannot type for the candidate); what was shown
is kept as a bounded tail, with terminal control sequences removed when it is rendered.

Window size follows the engineer's terminal (at start and on SIGWINCH when the session runs in the main
thread). Standard input that is not a terminal is relayed too; its end is passed on as ^D (repeated
until the far side is gone).
"""

from __future__ import annotations

import errno
import fcntl
import os
import pty
import re
import select
import signal
import struct
import termios
import threading
import time
import tty
from collections.abc import Iterable
from dataclasses import dataclass, field

KEYS_MAX_BYTES = 256 * 1024  # what was typed: a day of typing is far less; a paste flood is cut and said so
SCREEN_TAIL_BYTES = 256 * 1024  # the end of what was shown
EOF_CHAR = b"\x04"
EOF_REPEAT_S = 0.2


CUT = "typing over the recording limit: nothing typed after this was kept"
DROPPED = "keys dropped, the terminal was not taking them:"
ARROWS = {"A": "↑", "B": "↓", "C": "→", "D": "←"}  # the final byte of ESC [ X and ESC O X
PASTE_START, PASTE_END = "\x1b[200~", "\x1b[201~"  # what a terminal sends around a paste (bracketed paste mode)
LINE_MAX = 4095  # a terminal's line buffer in line mode (Linux n_tty): keys past it on one line may be dropped


def typed_lines(events: Iterable[tuple[float, str, str]]) -> list[tuple[float, str]]:
    """What was typed, one entry per Enter, with the time it was started, from asciinema-style events (time,
    code, text): input ("i") and markers ("m": `CUT`, `DROPPED`); output is never read. The one line rebuilder,
    for the browser terminal's cast and `sweserve session`'s record alike.

    Backspace, ^U and ^W edit the line, and ^Y yanks back what they cut, while the cursor cannot have moved.
    Every other key is shown (arrows and other escape sequences as ⟨↑⟩, ⟨esc⟩, Alt-keys as ⟨M-x⟩, control keys
    as ⟨^A⟩, Tab as ⇥), and once one is typed the edits after it are shown too (⟨⌫⟩, ⟨^U⟩), never applied: what
    the shell did with them is its business, and no typed character leaves the record (red team 12a, R12a-1:
    `cat key`, ^A, ^U, Enter ran `cat key`). Keys that may move the cursor, besides those: a non-ASCII
    character (readline in the POSIX locale reads its bytes as Meta keys: `€` is M-b, R14b-6) and Tab.
    A bracketed paste (ESC [200~ … ESC [201~) is inserted as it is, erasers and newlines included, and runs at
    the Enter after it (R14b-1); an escape sequence ends at the first byte ECMA-48 does not allow in it, which
    is then a key of its own (an Enter inside `ESC [` ran a command, R14b-2); and a line past `LINE_MAX` bytes
    is marked, since a terminal in line mode drops keys past it (R14b-5)."""
    out: list[tuple[float, str]] = []
    line: list[str] = []
    killed: list[str] = []
    moved = paste = over = False
    start: float | None = None
    size = 0  # bytes typed since the last Enter

    def end(at: float) -> None:
        nonlocal line, killed, moved, over, start, size
        out.append((start if start is not None else at, "".join(line)))
        line, killed, moved, over, start, size = [], [], False, False, None, 0

    def add(token: str, cursor_may_move: bool = False) -> None:
        nonlocal moved, over
        line.append(token)
        moved = moved or cursor_may_move
        if size > LINE_MAX and not over:
            line.append(f"⟨over {LINE_MAX} bytes on one line: the terminal may have dropped keys⟩")
            moved = over = True

    for t, code, data in events:
        if code == "m" and data == CUT:
            if line:
                end(t)
            out.append((t, f"⟨{CUT}⟩"))
        if code == "m" and data.startswith(DROPPED):  # keys the shell never got: in the line, and no edit after
            add(f"⟨{data.removeprefix(DROPPED).strip()} dropped⟩", cursor_may_move=True)
            start = t if start is None else start
        if code != "i":
            continue
        i = 0
        while i < len(data):
            ch = data[i]
            size += len(ch.encode("utf-8", "replace"))
            if start is None and (paste or ch not in "\r\n"):
                start = t
            if data.startswith(PASTE_START, i) or data.startswith(PASTE_END, i):
                paste = data.startswith(PASTE_START, i)
                size += len(PASTE_START) - 1
                i += len(PASTE_START)
                continue
            if paste:  # readline inserts what is pasted as it is: erasers, newlines and control keys too
                add(ch if ch.isprintable() else _spell_key(ch), cursor_may_move=not ch.isascii())
            elif ch in "\r\n":
                if line or start is not None:
                    end(t)
            elif ch in "\x7f\x08":
                if moved:
                    add("⟨⌫⟩")
                elif line:
                    line.pop()
            elif ch in "\x15\x17" and not moved:  # ^U: the line; ^W: the word before the cursor (one key a char)
                text = "".join(line)
                keep = 0 if ch == "\x15" else text.rstrip().rfind(" ") + 1
                killed, line = line[keep:], line[:keep]
            elif ch == "\x19" and not moved:  # ^Y: what ^U or ^W cut
                line += killed
            elif ch == "\x1b":
                j = _escape_end(data, i)  # the sequence's last character
                size += len(data[i + 1:j + 1].encode("utf-8", "replace"))
                seq = data[i + 1:j + 1]
                if len(seq) == 2 and seq[0] in "[O" and seq[1] in ARROWS:
                    add(f"⟨{ARROWS[seq[1]]}⟩", cursor_may_move=True)
                elif len(seq) == 1 and seq.isprintable() and seq not in "[O":
                    add(f"⟨M-{seq}⟩", cursor_may_move=True)
                else:
                    add("⟨esc⟩", cursor_may_move=True)
                i = j
            elif ch == "\x03":
                line.append("^C")
                end(t)
            elif ch.isprintable():
                add(ch, cursor_may_move=not ch.isascii())
            else:  # Tab, or any other control key: shown, and from here on the cursor may be anywhere
                add(_spell_key(ch), cursor_may_move=True)
            i += 1
    if line:
        out.append((start if start is not None else 0.0, "".join(line)))
    return out


def _spell_key(ch: str) -> str:
    """A control key as the record shows it."""
    if ch in "\r\n":
        return "↵"
    if ch == "\t":
        return "⇥"
    if ch in "\x7f\x08":
        return "⟨⌫⟩"
    return f"⟨^{chr(ord(ch) + 64)}⟩" if ord(ch) < 32 else f"⟨{ch!r}⟩"


def _escape_end(data: str, i: int) -> int:
    """Where the escape sequence at data[i] (ESC) ends, inclusive: ESC [ parameters (0x30-0x3F), intermediates
    (0x20-0x2F), a final byte (0x40-0x7E), as ECMA-48 has it; ESC O and a final byte; ESC and one printable
    character (an Alt-key). A byte the sequence does not allow ends it before that byte."""
    j = i + 1
    if j >= len(data):
        return i
    if data[j] == "[":
        j += 1
        while j < len(data) and "\x30" <= data[j] <= "\x3f":
            j += 1
        while j < len(data) and "\x20" <= data[j] <= "\x2f":
            j += 1
        return j if j < len(data) and "\x40" <= data[j] <= "\x7e" else j - 1
    if data[j] == "O":
        return j + 1 if j + 1 < len(data) and "\x40" <= data[j + 1] <= "\x7e" else j
    return j if data[j].isprintable() else i


@dataclass
class TerminalRecord:
    """What passed through the terminal: keystrokes with their times (s since start) and the screen's tail."""

    keys: list[tuple[float, bytes]] = field(default_factory=list)
    keys_bytes: int = 0
    keys_dropped: int = 0
    screen: bytearray = field(default_factory=bytearray)
    screen_bytes: int = 0

    def typed(self, at: float, data: bytes) -> None:
        room = KEYS_MAX_BYTES - self.keys_bytes
        if room <= 0:
            self.keys_dropped += len(data)
            return
        self.keys.append((at, data[:room]))
        self.keys_bytes += min(len(data), room)
        self.keys_dropped += max(0, len(data) - room)

    def shown(self, data: bytes) -> None:
        self.screen_bytes += len(data)
        self.screen += data
        if len(self.screen) > 2 * SCREEN_TAIL_BYTES:  # trim now and then, not on every read
            del self.screen[:-SCREEN_TAIL_BYTES]

    def keystrokes(self) -> str:
        """What was typed, one line per Enter, each with its time: control keys spelled out (^C, <ESC>...)."""
        lines: list[str] = []
        line: list[str] = []
        start: float | None = None
        for at, data in self.keys:
            for ch in data.decode("utf-8", "replace"):
                if start is None:
                    start = at
                if ch in "\r\n":
                    lines.append(f"{start:8.1f}s  {''.join(line)}")
                    line, start = [], None
                else:
                    line.append(_spell(ch))
        if line:
            lines.append(f"{start:8.1f}s  {''.join(line)}")
        if self.keys_dropped:
            lines.append(f"[… {self.keys_dropped} more bytes typed or pasted, not kept]")
        return "\n".join(lines)

    def commands(self) -> list[str]:
        """Each line as typed (`typed_lines`: simple edits applied while the cursor cannot have moved, every
        other key shown as ⟨…⟩)."""
        return [line for _, line in typed_lines((at, "i", data.decode("utf-8", "replace")) for at, data in self.keys)]

    def screen_text(self) -> str:
        """The end of what was shown, as plain text (control sequences removed; see `plain_text`)."""
        tail = bytes(self.screen[-SCREEN_TAIL_BYTES:])
        text = plain_text(tail.decode("utf-8", "replace"))
        if self.screen_bytes > len(tail):
            text = f"[… the first {self.screen_bytes - len(tail)} bytes are not kept]\n" + text
        return text


def _spell(ch: str) -> str:
    if ch == "\x1b":
        return "<ESC>"
    if ch == "\x7f" or ch == "\x08":
        return "<BS>"
    if ch == "\t":
        return "<TAB>"
    if ord(ch) < 32:
        return "^" + chr(ord(ch) + 64)
    return ch if ch.isprintable() else f"<U+{ord(ch):04X}>"


_CONTROL = re.compile(
    r"\x1b\[[0-?]*[ -/]*[@-~]"  # CSI: colours, cursor moves, clearing
    r"|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)?"  # OSC: window titles, hyperlinks
    r"|\x1b[PX^_][^\x1b]*(?:\x1b\\)?"  # DCS, SOS, PM, APC strings
    r"|\x1b[@-Z\\-_]|\x1b[ -/][@-~]?"  # two-byte escapes
)


def plain_text(text: str) -> str:
    """Terminal output as text a page can show: escape sequences and control characters removed (what a
    sandbox prints cannot restyle, clear or rewrite a reviewer's view), line ends normalised."""
    text = _CONTROL.sub("", text).replace("\r\n", "\n").replace("\r", "\n")
    return "".join(ch for ch in text if ch in "\n\t" or (ch.isprintable() and ch != "\x1b"))


def _winsize(fd: int) -> bytes | None:
    try:
        return fcntl.ioctl(fd, termios.TIOCGWINSZ, struct.pack("HHHH", 0, 0, 0, 0))
    except OSError:
        return None


def _write_all(fd: int, data: bytes) -> None:
    while data:
        data = data[os.write(fd, data):]


def _send(master: int, data: bytes) -> None:
    """To the far side; if it is gone, the next read says so and ends the relay."""
    try:
        _write_all(master, data)
    except OSError:
        pass


class TerminalRecorder:
    """Runs argv on a pseudo-terminal, relays stdin/stdout to it and records both (see the module docstring)."""

    def __init__(self, stdin_fd: int = 0, stdout_fd: int = 1):
        self.stdin_fd, self.stdout_fd = stdin_fd, stdout_fd
        self.record = TerminalRecord()

    def run(self, argv: list[str]) -> int:
        """argv's exit code (as a shell reports it: 128 + N when killed by signal N)."""
        pid, master = pty.fork()
        if pid == 0:  # the child: exec at once (the parent may hold threads)
            try:
                os.execvp(argv[0], argv)
            finally:
                os._exit(127)
        is_tty = os.isatty(self.stdin_fd)
        saved, old_handler = None, None
        try:
            self._follow_size(master)
            if is_tty:
                saved = termios.tcgetattr(self.stdin_fd)
                tty.setraw(self.stdin_fd)
            if threading.current_thread() is threading.main_thread():
                old_handler = signal.signal(signal.SIGWINCH, lambda *_: self._follow_size(master))
            self._relay(master)
        finally:
            if saved is not None:
                termios.tcsetattr(self.stdin_fd, termios.TCSAFLUSH, saved)
            if old_handler is not None:
                signal.signal(signal.SIGWINCH, old_handler)
            os.close(master)
        _, status = os.waitpid(pid, 0)
        return os.waitstatus_to_exitcode(status) if not os.WIFSIGNALED(status) else 128 + os.WTERMSIG(status)

    def _follow_size(self, master: int) -> None:
        size = _winsize(self.stdin_fd) or _winsize(self.stdout_fd)
        if size and size != struct.pack("HHHH", 0, 0, 0, 0):
            try:
                fcntl.ioctl(master, termios.TIOCSWINSZ, size)
            except OSError:
                pass

    def _relay(self, master: int) -> None:
        t0 = time.monotonic()
        inputs = [master, self.stdin_fd]
        ended, last_eof = False, 0.0
        while True:
            ready, _, _ = select.select(inputs, [], [], EOF_REPEAT_S if ended else None)
            if ended and time.monotonic() - last_eof > EOF_REPEAT_S:
                # input ended: ^D again until the far side is gone, since one sent while the shell was busy or
                # switching terminal modes can be lost; whatever reads next sees its input end
                _send(master, EOF_CHAR)
                last_eof = time.monotonic()
            if master in ready:
                try:
                    data = os.read(master, 65536)
                except OSError as exc:  # EIO: the far side closed
                    if exc.errno != errno.EIO:
                        raise
                    data = b""
                if not data:
                    return
                self.record.shown(data)
                _write_all(self.stdout_fd, data)
            if self.stdin_fd in ready:
                data = os.read(self.stdin_fd, 65536)
                if not data:  # input ended (not a terminal)
                    inputs.remove(self.stdin_fd)
                    ended, last_eof = True, time.monotonic()
                    data = EOF_CHAR
                else:
                    self.record.typed(time.monotonic() - t0, data)
                _send(master, data)
