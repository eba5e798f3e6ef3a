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

import codecs
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
from collections import deque
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

KEYS_MAX_BYTES = 256 * 1024  # what was typed: a day of typing is far less; a paste flood is cut and said so
SCREEN_TAIL_BYTES = 256 * 1024  # the end of what was shown
EOF_CHAR = b"\x04"
EOF_REPEAT_S = 0.2


CUT = "typing over the recording limit: nothing typed after this was kept"
DROPPED = "keys dropped, the terminal was not taking them:"
# what a terminal sends for these keys, after the ESC: named in the record; any other ESC is shown as ⟨esc⟩
# and the characters after it as typed
KEY_NAMES = {f"{p}{k}": v for p in "[O" for k, v in {"A": "↑", "B": "↓", "C": "→", "D": "←", "H": "home",
                                                      "F": "end"}.items()}
KEY_NAMES.update({"[3~": "del", "[1~": "home", "[4~": "end", "[5~": "page up", "[6~": "page down", "[2~": "insert"})
PASTE_START, PASTE_END = "\x1b[200~", "\x1b[201~"  # what a terminal sends around a paste (bracketed paste mode)
LINE_MAX = 4095  # a terminal's line buffer in line mode (Linux n_tty): keys past it on one line may be dropped
LINE_SHOWN_MAX = 64 * 1024  # characters of one entry kept in the list (a paste flood); the cast keeps them all
# of which the entry's end: what a flood's ^C left to run is there (red team 23h, R23h-7)
LINE_TAIL_SHOWN = LINE_SHOWN_MAX // 4
HIDDEN_KINDS_MAX = 8  # kinds of key the count of an entry's unshown middle names (R23t-3)
# ^C: the terminal makes it SIGINT whatever the program reads, and a shell's readline drops a paste it was reading
# at it, so a paste's start with no end before a ^C is a paste no longer (R23h-6). ^Z and ^\ are signals too, but
# an interactive shell ignores them and reads on (measured, bash 5): a paste goes on past them
PASTE_CANCEL = "\x03"
# the record's own tokens in an entry (keys, markers, a paste's newline, Tab): nothing typed can make one, since
# `_shown` spells every character outside printable ASCII; a capturing group, so `TOKEN.split` keeps them
TOKEN = re.compile(r"(⟨[^⟩]*⟩|↵|⇥)")


class TypedLines(list[tuple[float, str]]):
    """`typed_lines`' entries; `unlisted`: how many entries it counted past its limit and did not keep (each run of
    them is one entry saying how many), so a page can say the list is not whole without reading its text."""

    unlisted: int = 0


def typed_lines(events: Iterable[tuple[float, str, str]], limit: int | None = None) -> TypedLines:
    """What was typed, one entry per Enter, with the time it was started, from asciinema-style events (time,
    code, text): input ("i") and markers ("m": `CUT`, `DROPPED`); output is never read. The one line rebuilder,
    for the browser terminal's cast and `sweserve session`'s record alike.

    Every key typed is in it, as typed: no edit is applied. Printable characters are themselves; erasers and
    other control keys are shown (⟨⌫⟩, ⟨^U⟩, ⟨^W⟩, ⟨^Y⟩, ⟨^C⟩, ⟨^A⟩, Tab as ⇥); the keys a terminal sends for
    arrows, Home, End and Delete are named (⟨↑⟩, ⟨home⟩, ⟨del⟩), and any other ESC is ⟨esc⟩ with the characters
    after it shown as they are. Where a key moved readline's cursor, what an eraser cut, what ^Y yanked, whether
    ^C ended the line: each was a guess, and each guess let a command run that the list did not show (red teams
    12a, 14b, 14c: ^A then ^U, a bracketed paste's erasers, the kill ring, the kernel's own ^W, an unbound escape
    prefix that swallowed text). A bracketed paste's newlines are shown (↵) and do not end the entry: the
    shell runs it at the Enter after it, and a ^C ends it, as the shell drops a paste it was reading at SIGINT
    (red team 23h, R23h-6). An entry over `LINE_SHOWN_MAX` characters keeps its start and its end, and counts
    its middle (R23h-7), naming the keys it holds (R23t-3). Escape sequences and paste markers may be split
    across events. A line past `LINE_MAX` bytes is marked, since a terminal in line mode drops keys past it.
    Past `limit` entries, the ones in between are counted, not kept, and an entry in their place says how many
    (a flood of one-key lines made a 64 MiB cast 22 million entries, GiBs of the server's memory and a 1 GB
    replay page: red team 16c, R16c-1): the first nine tenths of `limit` and the last tenth are kept, so a flood typed first never pushes
    the work typed after it off the list (red team 16f, R16f-1)."""
    keys = _keys(events)
    unlisted, unlisted_at = 0, 0.0  # entries past `limit`, and when the first of them started
    tail_max = limit // 10 if limit is not None else 0
    head_max = limit - tail_max if limit is not None else 0
    tail: deque[tuple[float, str]] = deque()  # the latest entries past the head, kept
    ahead: deque[tuple[float, str]] = deque()

    def following(n: int) -> str:  # the next n characters, across events, without taking them; not past a marker
        while len(ahead) < n and (nxt := next(keys, None)) is not None:
            ahead.append(nxt)
        chars = []
        for _, c in list(ahead)[:n]:
            if len(c) > 1:
                break
            chars.append(c)
        return "".join(chars)

    out = TypedLines()
    line: list[str] = []
    paste = over = False
    start: float | None = None
    size = shown = 0  # bytes typed since the last Enter; characters of them in the entry
    line_tail: deque[str] = deque()  # an entry's last tokens, past its first LINE_SHOWN_MAX - LINE_TAIL_SHOWN
    tail_shown = unshown = 0  # characters in line_tail; characters between the entry's head and line_tail
    # the keys in that middle, by kind (at most HIDDEN_KINDS_MAX kinds): padding the command a ^C left to run past
    # the kept end hid the ^C and the command alike (red team 23t, R23t-3); the count names them
    hidden: dict[str, int] = {}

    def end(at: float) -> None:
        nonlocal line, over, start, size, shown, unlisted, unlisted_at, tail_shown, unshown
        if unshown:
            named = ", ".join(f"{k} ×{n}" for k, n in hidden.items())
            more = " and more" if len(hidden) >= HIDDEN_KINDS_MAX else ""
            among = f", among them the keys {named}{more}" if named else ""
            line.append(f"⟨{unshown} more characters typed, not shown here{among}; the cast has them⟩")
        entry = (start if start is not None else at, "".join(line + list(line_tail)))
        line, over, start, size, shown = [], False, None, 0, 0
        line_tail.clear()
        hidden.clear()
        tail_shown = unshown = 0
        if limit is None or len(out) < head_max:
            out.append(entry)
            return
        tail.append(entry)
        if len(tail) > tail_max:
            dropped_at = tail.popleft()[0]
            unlisted_at = unlisted_at if unlisted else dropped_at
            unlisted += 1

    def flush() -> None:  # the count of entries not kept, in their place, then the tail kept
        nonlocal unlisted
        if unlisted:
            out.append((unlisted_at, f"⟨{unlisted} more commands typed, not listed here; the cast has them⟩"))
            out.unlisted += unlisted
            unlisted = 0
        out.extend(tail)
        tail.clear()

    def add(token: str, at: float) -> None:
        nonlocal over, start, shown, tail_shown, unshown
        start = at if start is None else start
        shown += len(token)
        if shown <= LINE_SHOWN_MAX - LINE_TAIL_SHOWN:
            line.append(token)
        else:  # the entry's end kept, its middle counted (R23h-7)
            line_tail.append(token)
            tail_shown += len(token)
            while tail_shown > LINE_TAIL_SHOWN:
                gone = line_tail.popleft()
                tail_shown -= len(gone)
                unshown += len(gone)
                if TOKEN.fullmatch(gone) and not gone.startswith("⟨U+"):  # a key or marker, not a character
                    kind = "keys dropped" if gone.endswith(" dropped⟩") else gone.strip("⟨⟩")
                    if kind in hidden or len(hidden) < HIDDEN_KINDS_MAX:
                        hidden[kind] = hidden.get(kind, 0) + 1
        if size > LINE_MAX and not over:
            line.append(f"⟨over {LINE_MAX} bytes on one line: the terminal may have dropped keys⟩")  # in the head
            over = True

    while (item := ahead.popleft() if ahead else next(keys, None)) is not None:
        t, ch = item
        if len(ch) > 1:  # a marker
            if ch == CUT:
                if line:
                    end(t)
                flush()  # in their place, before the cut
                out.append((t, f"⟨{CUT}⟩"))
            else:  # keys the shell never got
                add(f"⟨{ch.removeprefix(DROPPED).strip()} dropped⟩", t)
            continue
        size += len(ch.encode("utf-8", "replace"))
        if ch == "\x1b":
            seq = following(5)
            name = next((k for k in (PASTE_START[1:], PASTE_END[1:], *KEY_NAMES) if seq.startswith(k)), None)
            if name in (PASTE_START[1:], PASTE_END[1:]):
                paste = name == PASTE_START[1:]
            else:
                add(f"⟨{KEY_NAMES[name] if name else 'esc'}⟩", t)
            for _ in range(len(name or "")):
                ahead.popleft()
            size += len(name or "")
            continue
        if paste and ch == PASTE_CANCEL:
            paste = False
        if ch in "\r\n" and not paste:
            if line or start is not None:
                end(t)
        else:
            add(_shown(ch), t)
    if line:
        end(0.0)
    flush()
    return out


def _keys(events: Iterable[tuple[float, str, str]]) -> Iterator[tuple[float, str]]:
    """(time, one character) of every input event, and (time, marker) of the CUT and DROPPED markers."""
    for t, code, data in events:
        if code == "i":
            for ch in data:
                yield t, ch
        elif code == "m" and (data == CUT or data.startswith(DROPPED)):
            yield t, data


def _shown(ch: str) -> str:
    """A typed character as the record shows it: printable ASCII as itself; a control key spelled (⟨^A⟩, ⟨⌫⟩,
    ⇥, ↵ in a paste); any other character by its code point (⟨U+27E8⟩), so that nothing typed looks like a key
    the record names (`cat key ⟨^C⟩` typed as text ran, and read as a cancelled line: red team 14d, R14d-3), nor
    hides (zero-width and filler characters, homoglyphs of the record's brackets)."""
    if " " <= ch <= "~":
        return ch
    if ch in "\r\n":
        return "↵"
    if ch == "\t":
        return "⇥"
    if ch in "\x7f\x08":
        return "⟨⌫⟩"
    return f"⟨^{chr(ord(ch) + 64)}⟩" if ord(ch) < 32 else f"⟨U+{ord(ch):04X}⟩"


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
        """What was typed, one line per Enter, each with its time (`typed_lines`: every key as typed, control
        keys and any character outside printable ASCII spelled, so nothing typed imitates a key)."""
        lines = [f"{at:8.1f}s  {line}" for at, line in typed_lines(self._events())]
        if self.keys_dropped:
            lines.append(f"[… {self.keys_dropped} more bytes typed or pasted, not kept]")
        return "\n".join(lines)

    def commands(self) -> list[str]:
        """Each line as typed (`typed_lines`: every key, no edit applied)."""
        return [line for _, line in typed_lines(self._events())]

    def _events(self) -> Iterator[tuple[float, str, str]]:
        dec = codecs.getincrementaldecoder("utf-8")("replace")  # a character split across two reads is one
        return ((at, "i", dec.decode(data)) for at, data in self.keys)

    def screen_text(self) -> str:
        """The end of what was shown, as plain text (control sequences removed; see `plain_text`)."""
        tail = bytes(self.screen[-SCREEN_TAIL_BYTES:])
        text = plain_text(tail.decode("utf-8", "replace"))
        if self.screen_bytes > len(tail):
            text = f"[… the first {self.screen_bytes - len(tail)} bytes are not kept]\n" + text
        return text


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


def relays_terminal(argv: list[str]) -> bool:
    """Whether argv's client relays a terminal of its own (`docker exec` with one): the keys are for the remote
    terminal's line discipline, and the client makes its own terminal raw to pass them on."""
    return len(argv) >= 2 and Path(argv[0]).name == "docker" and "exec" in argv and any(
        a in ("-t", "--tty") or (a.startswith("-") and not a.startswith("--") and "t" in a) for a in argv)


def detach_sequence(argv: list[str]) -> bytes:
    """The keys that make argv's client detach, ending the relay while the shell runs on: `docker exec` with a
    terminal reads its `--detach-keys` (^P ^Q unless given) on its input; b"" for any other command."""
    if not relays_terminal(argv):
        return b""
    spec = "ctrl-p,ctrl-q"
    for i, arg in enumerate(argv):
        if arg.startswith("--detach-keys="):
            spec = arg.split("=", 1)[1]
        elif arg == "--detach-keys" and i + 1 < len(argv):
            spec = argv[i + 1]
    return bytes(ord(k[5:].upper()) & 0x1F if k.startswith("ctrl-") else ord(k[:1] or " ")
                 for k in spec.split(",") if k)


def make_raw(fd: int) -> None:
    """The terminal's line discipline passes every key on as it is (no signal, line editing, end of file or flow
    control), as `docker exec -t`'s client sets it; output is still post-processed (a client's own messages end
    their lines). A pseudo-terminal's master sets its slave's modes."""
    try:
        attrs = termios.tcgetattr(fd)
        attrs[0] &= ~(termios.IGNBRK | termios.BRKINT | termios.PARMRK | termios.ISTRIP | termios.INLCR
                      | termios.IGNCR | termios.ICRNL | termios.IXON | termios.IXOFF)
        attrs[2] = (attrs[2] & ~(termios.CSIZE | termios.PARENB)) | termios.CS8
        attrs[3] &= ~(termios.ECHO | termios.ECHONL | termios.ICANON | termios.ISIG | termios.IEXTEN)
        attrs[6][termios.VMIN], attrs[6][termios.VTIME] = 1, 0
        termios.tcsetattr(fd, termios.TCSANOW, attrs)
    except termios.error:
        pass


def undetached(seq: bytes, tail: bytes, data: bytes) -> tuple[bytes, bytes]:
    """`data` less each key that would complete the detach sequence `seq` after `tail`, the end of what the
    terminal was given before it (as long as `seq` less one key), and that end once `data` is given."""
    if not seq:
        return data, tail
    if seq[-1] not in data:  # nothing to hold back: the usual case, no loop over the keys
        return data, (tail + data)[-(len(seq) - 1):] if len(seq) > 1 else b""
    keys = bytearray()
    for b in data:
        seen = tail + bytes([b])
        if seen.endswith(seq):
            continue  # held back: the client would detach on it
        keys.append(b)
        tail = seen[-(len(seq) - 1):] if len(seq) > 1 else b""
    return bytes(keys), tail


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
        relays = relays_terminal(argv)
        if relays:
            # raw from the start, as the browser relay's (red team 23k, R23k-1; 23t, R23t-1): cooked until the
            # client had made it raw, a ^C or ^\ typed as the session opened was a signal for the client itself
            make_raw(master)
        try:
            self._follow_size(master)
            if is_tty:
                saved = termios.tcgetattr(self.stdin_fd)
                tty.setraw(self.stdin_fd)
            if threading.current_thread() is threading.main_thread():
                old_handler = signal.signal(signal.SIGWINCH, lambda *_: self._follow_size(master))
            self._relay(master, spoke=not relays, detach=detach_sequence(argv))
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

    def _relay(self, master: int, spoke: bool = True, detach: bytes = b"") -> None:
        """Until the far side is gone. Keys are read only once it has shown something (`spoke`: a client relaying a
        terminal of its own gave a ^C typed before its shell had taken its terminal to the shell, which died: red
        team 23k, R23k-1; 23t, R23t-1), and the key that would complete the client's `detach` keys after what it
        was given is never sent: the client detached, ending the session with time left (R22c-3, R23t-2)."""
        t0 = time.monotonic()
        inputs = [master, self.stdin_fd] if spoke else [master]
        delivered = b""  # the end of what the far side was given (`undetached`)
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
                if not spoke:
                    spoke = True
                    inputs.append(self.stdin_fd)
            if self.stdin_fd in ready:
                data = os.read(self.stdin_fd, 65536)
                if not data:  # input ended (not a terminal)
                    inputs.remove(self.stdin_fd)
                    ended, last_eof = True, time.monotonic()
                    data = EOF_CHAR
                else:
                    data, delivered = undetached(detach, delivered, data)
                    self.record.typed(time.monotonic() - t0, data)
                _send(master, data)
