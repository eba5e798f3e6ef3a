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
from dataclasses import dataclass, field

KEYS_MAX_BYTES = 256 * 1024  # what was typed: a day of typing is far less; a paste flood is cut and said so
SCREEN_TAIL_BYTES = 256 * 1024  # the end of what was shown
EOF_CHAR = b"\x04"
EOF_REPEAT_S = 0.2


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
        """Each line as typed, with the line editor's simple edits applied (backspace, ^U, ^W) and other control
        keys and escape sequences left out: the command a shell ran, unless completion or history recall (Tab,
        arrows, ^R) changed it."""
        lines: list[str] = []
        line: list[str] = []
        escape = ""  # "" outside an escape sequence, else what it began with
        for _, data in self.keys:
            for ch in data.decode("utf-8", "replace"):
                if escape:
                    if escape == "\x1b":
                        escape = ch if ch in "[O" else ""
                    elif escape == "O" or "@" <= ch <= "~":
                        escape = ""
                    continue
                if ch == "\x1b":
                    escape = ch
                elif ch in "\r\n":
                    lines.append("".join(line))
                    line = []
                elif ch in "\x7f\x08":
                    del line[-1:]
                elif ch == "\x15":  # ^U: the line so far
                    line = []
                elif ch == "\x17":  # ^W: the word before the cursor
                    text = "".join(line).rstrip()
                    line = list(text[:text.rfind(" ") + 1])
                elif ch == "\t" or ch.isprintable():
                    line.append(ch)
        if line:
            lines.append("".join(line))
        return lines

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
