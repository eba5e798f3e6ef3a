"""Red team 14b: the remote assessment (`sweserve assess`) attacked by its candidate, against the newest defences
(R12a-1's `commands_from_cast`, R12a-4's key queue, R13-4's DROPPED markers).

Each test asserts the defended behaviour: it FAILS while the attack wins. No Docker: a real bash 5.2 on the
server's pseudo-terminal standing in for the sandbox's shell, as tests/test_attacks_redteam12a.py does, and the
real assessment server (its ASGI app, run with the arguments `sweserve assess serve` gives uvicorn) on 127.0.0.1.

- R14b-1 WIN (the record lies): `commands_from_cast` ends a command at every \\r or \\n typed and resets its
  "cursor moved" flag there, so Backspace, ^U and ^W typed after a newline are applied as edits again. Inside
  a bracketed paste (ESC[200~ ... ESC[201~, what xterm.js sends for every paste once bash 5.1+ turns mode 2004
  on, as it does by default) readline does not edit and does not accept the line: it inserts every byte
  literally, DEL and ^U included, and the newlines too, and runs the whole buffer at the Enter after the paste.
  A candidate pastes (or sends over the websocket) ESC[200~ "\\n" "cat .../answer-key.txt #" DEL x N "ls\\n"
  ESC[201~, then Enter: bash runs `cat .../answer-key.txt` (the DELs and `ls` are in its comment); the
  reviewer's "Commands typed" (and the `RunResult` transcript, built by the same function) shows `⟨esc⟩`, `ls`,
  `⟨esc⟩`: a paste of `ls`. The same with ^U (`cat key; #` ^U). Measured: every run (bash 5.2.15).
  `test_a_command_hidden_in_a_bracketed_paste_is_in_the_commands_typed`.
  Also through `docker exec -it` into the demo task image (bash 5.2.15; a scratch run, not a test here).
- R14b-2 WIN (the record lies): the same function reads an escape sequence as ESC, `[` or `O`, then everything
  up to a byte in '@'..'~', swallowing whatever lies between: Enter (\\r), spaces, digits, punctuation and any
  non-ASCII character. readline ends an unbound CSI at its first byte that is not a parameter or intermediate
  byte. Typed `ESC [ \\r`, `. ./1` Enter, `ls` Enter: readline rings the bell on `ESC [ \\r`, then runs
  `. ./1` (a script, here one that prints the key) and `ls`; the record swallows `\\r. ./1\\rl` into one
  escape and lists `⟨esc⟩s`. Any command of digits, punctuation, spaces and non-ASCII names (`. ./1`, `./2`,
  `/???/????64 *`) runs and is in no list, and the first letter of the command after it is eaten.
  Measured: every run (also with `ESC O` and `ESC [ 1 ;`), and through `docker exec -it` into the demo task
  image (scratch run).
  `test_an_enter_inside_an_unfinished_escape_sequence_ends_a_command_in_the_record`.
- R14b-3 WIN (one candidate stalls every other; R12a-4's door, another key): the websocket handler parses each
  message with `json.loads` on the server's event loop and truncates its `data` to 64 KiB only afterwards;
  uvicorn (as `run_serve` starts it: `ws="websockets"`, defaults otherwise) takes messages of up to 16 MiB and
  negotiates permessage-deflate. A 15 MiB message of one repeated character deflates to about 15 KiB on the
  wire; each one costs the server's single event loop an inflate, a UTF-8 check, a 15 MiB `json.loads` and a
  15 MiB `encode`. A candidate sending them back to back (about 100 KiB/s of upload) holds the loop: another
  candidate's `/api/state` (and so their page, terminal and Submit) answers in seconds instead of
  milliseconds, while their clock runs on the server. Measured (2 cores, a CI run beside it; the flooding client
  in a process of its own): bob's `/api/state` 1 ms idle, 0.6-7 s during the flood, every run.
  `test_a_compressed_websocket_flood_does_not_stall_another_candidate`; the control (passes):
  `test_control_another_candidates_state_answers_at_once_without_the_flood`.
- R14b-4 WIN (one candidate takes the whole server down): each tab watching a terminal gets an unbounded
  `asyncio.Queue` (`AssessServer.terminal`: `send` puts every chunk the pty printed, `pump` sends them as the
  socket drains). Nothing bounds it: the cast stops at 64 MiB and the replay tail at 256 KiB, but a tab that
  reads slowly or not at all holds every byte printed since. A candidate opens a websocket (a raw socket: the
  handshake, then no reads) and types `yes xxxx...` in their terminal: the server's memory grows by what the
  pty relays, about 50-80 MB/s here (354 MB in 6 s; 513 MB in 10 s in a scratch run), until the host kills
  it or swaps: every candidate's session in progress ends (R12a-4's outcome: a restart, new links, retakes).
  Without a tab the same `yes` holds nothing (the control). A scratch run with a client reading as fast as a
  Python thread can (in the same process) grew as fast: the event loop sends slower than the pty prints, so an
  ordinary tab on a slow link may be enough. Measured: every run.
  `test_a_tab_that_does_not_read_holds_no_unbounded_memory_of_the_server`; the control (passes):
  `test_control_a_terminal_printing_with_no_tab_holds_no_memory`.
- R14b-5 WIN (the record lies; R13-4's door, the kernel as the dropper): while a foreground program leaves the
  terminal in canonical mode (`sleep 3`), keys typed ahead wait in the pty's line discipline (n_tty), one line of
  4095 bytes at most; past that, with no newline pending, each key overwrites the line's last byte. The
  server's queue takes them all (1 MiB), so R13-4's DROPPED marker is never written. Typed in one message:
  spaces and `cat .../answer-` to 4095 bytes; then `decoy-` (lost but its last byte, the `-` it overwrites);
  then, once readline reads again, `key.txt` Enter. bash runs `cat .../answer-key.txt`; the list shows
  `cat .../answer-decoy-key.txt`, nothing dropped. Through `docker exec -it` (production) the server's pty is
  raw and the container's own pty drops the same way: reproduced in the demo task image (scratch run).
  Measured: every run. `test_keys_the_terminals_line_buffer_dropped_are_not_listed_as_typed`.
- R14b-6 WIN (the record lies; R12a-1's door through the locale): the task images set no LANG and
  `DockerSandbox.interactive_argv` passes none, so the candidate's bash runs in the POSIX locale (checked in the
  demo task image: `locale` says POSIX). There readline reads every byte >= 0x80 as Meta plus its low 7 bits
  (convert-meta): `€` (E2 82 AC) is M-b (backward-word) and two unbound keys; `¡` (C2 A1) is M-B. The record
  decodes UTF-8, sees one printable character, and keeps applying ^U. Typed `cat .../answer-key.txt`, `€` x 6
  (the cursor now at the line's start), ^U (kills nothing there), Enter: bash runs it, the list shows an empty
  command. Measured: every run, local bash in LC_ALL=POSIX and through `docker exec -it` into the demo task
  image (scratch run; `¡` too). `test_a_non_ascii_character_that_moved_the_cursor_leaves_the_command_in_the_list`;
  the control, in C.UTF-8 the same keys run nothing (passes): `test_control_in_a_utf8_locale_the_same_keys_run_nothing`.

Defences (each test above failed before them):
- R14b-1, 2, 5, 6 (`agents/terminal.typed_lines`, now the one line rebuilder for the browser terminal and
  `sweserve session`): a bracketed paste is inserted as it is, its erasers, newlines (↵) and control keys shown
  as keys and never applied, and the command ends at the Enter after it; an escape sequence is read as ECMA-48
  has it, and a byte it does not allow ends it and is a key of its own; a line past 4095 bytes is marked (the
  terminal may have dropped keys) and no edit after the mark is applied; a non-ASCII character, and Tab (the
  completion lead below), count as keys that may move the cursor, so no edit after them is applied either. The
  record errs towards showing keys: in a UTF-8 locale the control's ^U is shown, not applied.
  (Since red team 14c, no edit is applied at all: every key is shown as typed.)
- R14b-3 (`cli/assess.run_serve`): uvicorn takes websocket messages of `WS_MAX_BYTES` (512 KiB) at most and
  negotiates no compression.
- R14b-4 (`AssessServer.terminal`): a tab's queued output is bounded (`WATCHER_BACKLOG_BYTES`, 4 MiB); past it
  the tab is unsubscribed and closed (4001), and the page reconnects to the recent output.

Leads, not reproduced:
- Two links for the same pack redeemed at once (red team 12a's lead): with the real `run_evaluation` the
  results file's lock (`ResultsWriter`, non-blocking, held for the whole task, the candidate's time included)
  makes the second session fail at once (`error`, its link spent) rather than write a second attempt 1; only the
  instant between two tasks of one session is open. `pack_attempts` would, if two records with the same attempt
  number were written, keep the later and name no earlier attempt (keyed by the attempt number).
- Tab (completion) is recorded as `⇥` without marking the line as moved: Backspace after a completion is
  applied to text the shell does not have (it completed more). A decoy needs a completion longer than the
  hidden command; not built.
- ^C with `stty -isig` typed before (visible, but obscure) is a key readline ignores; the record ends the line
  there as if aborted (`cat key^C`), and the Enter after it runs the line. Not tried.
- The replay page too large to open (up to 64 MiB of output and 128 MiB of input, embedded as JSON in one
  script): not tried in a browser (2 cores, CI beside).

Looked at, no finding: `/api/state` between two tasks (the id, title and statement hidden until `Seat.take`;
`seat.task_id` still names the previous task while the next one starts); the deadline is taken before the
instruction is written into the sandbox; `json.loads` of a deeply nested message (RecursionError ends only the
sender's own socket); huge integers in a message (Python's 4300-digit limit: a ValueError, ignored); the DROPPED
and CUT markers (written by the host only; "m" events past the input cap are not written, but the CUT marker is).
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import threading
import time
import urllib.request

import pytest
from test_assess import free_port

from sweserve.assess.recorder import commands_from_cast


def _bash_beside_a_key(tmp_path):
    from test_attacks_redteam12a import bash_beside_a_key

    return bash_beside_a_key(tmp_path)


def _type(term, chunks, pause=0.3):
    for keys in chunks:
        term.write(keys)
        time.sleep(pause)


def _end(term, shown):
    time.sleep(0.5)
    term.write(b"exit\r")
    term.exited.wait(10)
    term.stop()
    return b"".join(shown).decode(errors="replace")


# ---- R14b-1: a bracketed paste inserts DEL and ^U literally; the record applies them as edits

@pytest.mark.parametrize("eraser", ["backspace", "ctrl-u"])
def test_a_command_hidden_in_a_bracketed_paste_is_in_the_commands_typed(tmp_path, eraser):
    key, cast, term, shown = _bash_beside_a_key(tmp_path)
    try:
        time.sleep(0.5)
        hidden = f"cat {key} #"
        erase = b"\x7f" * len(hidden) if eraser == "backspace" else b"\x15"
        # what xterm.js sends for a paste while bash has bracketed paste on (it has, by default), then Enter
        _type(term, [b"\x1b[200~\n" + hidden.encode() + erase + b"ls\n\x1b[201~", b"\r"])
        screen = _end(term, shown)
    finally:
        term.stop()
    assert "SECRET-CONTENT-42" in screen  # bash ran `cat .../answer-key.txt`
    typed = [c for _, c in commands_from_cast(cast)]
    # the reviewer's list must name what ran, or at least show the erasers as keys, not as edits applied
    assert any("answer-key" in c for c in typed), typed


# ---- R14b-2: an Enter inside an unfinished escape sequence

@pytest.mark.parametrize("prefix", [b"\x1b[", b"\x1bO", b"\x1b[1;"], ids=["csi", "ss3", "csi-params"])
def test_an_enter_inside_an_unfinished_escape_sequence_ends_a_command_in_the_record(tmp_path, prefix):
    key, cast, term, shown = _bash_beside_a_key(tmp_path)
    (tmp_path / "1").write_text(f"cat {key}\n")  # a script the candidate wrote before (its command is listed)
    try:
        time.sleep(0.5)
        _type(term, [f"cd {tmp_path}\r".encode(), prefix + b"\r. ./1\rls\r"])
        screen = _end(term, shown)
    finally:
        term.stop()
    assert "SECRET-CONTENT-42" in screen  # bash ran `. ./1`
    typed = [c for _, c in commands_from_cast(cast)]
    assert any(". ./1" in c for c in typed), typed


# ---- R14b-3: a permessage-deflate flood of large messages holds the server's event loop

def _serve_as_the_cli_does(tmp_path, monkeypatch):
    """The app and uvicorn's arguments exactly as `sweserve assess serve` (`run_serve`) passes them, with the
    context, tasks and node_modules stubbed; then served on 127.0.0.1 from a thread."""
    import argparse
    import contextlib

    import uvicorn

    import sweserve.assess.server as server_mod
    import sweserve.cli.common as common
    import sweserve.dataset.taskstore as taskstore
    from sweserve.cli.assess import run_serve

    got = {}
    monkeypatch.setattr(common, "make_context", lambda args, console: contextlib.nullcontext(None))
    monkeypatch.setattr(taskstore, "load_all", lambda path: [])
    monkeypatch.setattr(server_mod, "find_node_modules", lambda given=None: tmp_path)
    monkeypatch.setattr(uvicorn, "run", lambda app, **kw: got.update(app=app, kw=kw))
    port = free_port()
    args = argparse.Namespace(node_modules=None, tasks=str(tmp_path / "tasks"), output=str(tmp_path / "out"),
                              host="127.0.0.1", port=port, state_dir=str(tmp_path / "state"))
    from rich.console import Console

    run_serve(args, Console(file=open("/dev/null", "w")))  # noqa: SIM115
    app, kw = got["app"], {**got["kw"], "log_level": "error"}
    server = next(r.endpoint.__self__ for r in app.routes if getattr(r, "path", "") == "/api/state")
    uv = uvicorn.Server(uvicorn.Config(app, **kw))
    thread = threading.Thread(target=uv.run, daemon=True)
    thread.start()
    wait = time.monotonic() + 10
    while not uv.started and time.monotonic() < wait:
        time.sleep(0.05)
    return server, uv, thread, port


def _two_candidates(tmp_path, server):
    from test_attacks_redteam12a import two_candidates

    return two_candidates(tmp_path, server)


FLOOD = textwrap.dedent("""
    import json, sys, time
    from websockets.sync.client import connect
    port, seconds = int(sys.argv[1]), float(sys.argv[2])
    msg = json.dumps({"type": "input", "data": "x" * (15 * 2**20)})  # deflated: about 15 KiB on the wire
    origin = f"http://127.0.0.1:{port}"
    end = time.monotonic() + seconds
    with connect(f"ws://127.0.0.1:{port}/ws", open_timeout=5, close_timeout=1, max_size=None,
                 additional_headers={"Origin": origin, "Cookie": f"sweserve_session_{port}=mallory-key"}) as conn:
        while time.monotonic() < end:
            conn.send(msg)
    """)


def _bobs_latency(port, probes=5):
    from sweserve.assess.server import cookie_name

    worst = 0.0
    for _ in range(probes):
        t0 = time.monotonic()
        req = urllib.request.Request(f"http://127.0.0.1:{port}/api/state",
                                     headers={"Cookie": f"{cookie_name(port)}=bob-key"})
        try:
            assert json.loads(urllib.request.urlopen(req, timeout=30).read())["status"] == "running"
        except TimeoutError:
            return 30.0
        worst = max(worst, time.monotonic() - t0)
        time.sleep(0.2)
    return worst


def _with_server(tmp_path, monkeypatch, flood: bool) -> tuple[float, float]:
    server, uv, thread, port = _serve_as_the_cli_does(tmp_path, monkeypatch)
    terms = _two_candidates(tmp_path, server)
    client = None
    try:
        idle = _bobs_latency(port, 3)
        if flood:
            client = subprocess.Popen([sys.executable, "-c", FLOOD, str(port), "15"], stderr=subprocess.DEVNULL)
            time.sleep(3)
        during = _bobs_latency(port)
        return idle, during
    finally:
        if client is not None:
            client.kill()
            client.wait()
        for term in terms.values():
            term.stop(grace_s=2)
        uv.should_exit = True
        thread.join(10)


def test_a_compressed_websocket_flood_does_not_stall_another_candidate(tmp_path, monkeypatch):
    idle, during = _with_server(tmp_path, monkeypatch, flood=True)
    assert during < 1.0, f"bob's /api/state took {during:.2f}s while mallory flooded (idle: {idle:.3f}s)"


def test_control_another_candidates_state_answers_at_once_without_the_flood(tmp_path, monkeypatch):
    idle, during = _with_server(tmp_path, monkeypatch, flood=False)
    assert during < 1.0, (idle, during)


# ---- R14b-4: a tab that does not read: every byte the terminal prints is queued for it, without bound

def _rss_mb() -> int:
    with open("/proc/self/status") as fh:
        return next(int(line.split()[1]) // 1024 for line in fh if line.startswith("VmRSS"))


def _stalled_tab(port):
    """A websocket on mallory's terminal that never reads (a raw socket: the handshake, then nothing)."""
    import socket

    from sweserve.assess.server import cookie_name

    s = socket.create_connection(("127.0.0.1", port))
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    s.sendall((f"GET /ws HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
               f"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n"
               f"Origin: http://127.0.0.1:{port}\r\nCookie: {cookie_name(port)}=mallory-key\r\n\r\n").encode())
    head = b""
    while b"\r\n\r\n" not in head:
        head += s.recv(1)
    assert head.startswith(b"HTTP/1.1 101"), head
    return s


def _memory_while_printing(tmp_path, monkeypatch, tab: bool, seconds=6) -> int:
    server, uv, thread, port = _serve_as_the_cli_does(tmp_path, monkeypatch)
    terms = _two_candidates(tmp_path, server)
    sock = None
    try:
        if tab:
            sock = _stalled_tab(port)
        time.sleep(0.5)
        before = _rss_mb()
        terms["mallory"].write(b"stty -echo; yes " + b"x" * 2000 + b"\r")  # typed in mallory's terminal
        time.sleep(seconds)
        return _rss_mb() - before
    finally:
        for term in terms.values():
            term.stop(grace_s=2)
        if sock is not None:
            sock.close()
        uv.should_exit = True
        thread.join(10)


def test_a_tab_that_does_not_read_holds_no_unbounded_memory_of_the_server(tmp_path, monkeypatch):
    grown = _memory_while_printing(tmp_path, monkeypatch, tab=True)
    assert grown < 200, f"the server grew {grown} MB in 6 s for one tab that does not read"


def test_control_a_terminal_printing_with_no_tab_holds_no_memory(tmp_path, monkeypatch):
    grown = _memory_while_printing(tmp_path, monkeypatch, tab=False)
    assert grown < 200, grown


# ---- R14b-5: keys the kernel's canonical line buffer dropped are listed as typed

def test_keys_the_terminals_line_buffer_dropped_are_not_listed_as_typed(tmp_path):
    """R13-4 with the kernel as the dropper: while a foreground `sleep` leaves the terminal in canonical mode, a
    line typed ahead is held by the pty's line discipline (n_tty), 4095 bytes at most; past that, with no newline
    pending, each key overwrites the line's last byte. The server's queue takes every key, so no DROPPED marker is
    written. Typed: spaces and `cat .../answer-` up to 4095 bytes, then `decoy-` (all but its last byte, which
    equals the `-` it overwrites, lost), then, once `sleep` is over and readline reads, `key.txt` Enter."""
    key, cast, term, shown = _bash_beside_a_key(tmp_path)
    try:
        time.sleep(0.5)
        head = f"cat {tmp_path}/answer-".encode()
        _type(term, [b"sleep 3\r", b" " * (4095 - len(head)) + head, b"decoy-"])
        time.sleep(3.5)
        _type(term, [b"key.txt\r"])
        screen = _end(term, shown)
    finally:
        term.stop()
    assert "SECRET-CONTENT-42" in screen  # bash ran `cat .../answer-key.txt`
    typed = [c.strip() for _, c in commands_from_cast(cast)]
    assert term.dropped == 0  # the server's queue dropped nothing: R13-4's marker is not what is missing
    # the list must not name a command that never ran as the one typed (or must say keys were lost)
    assert not any("answer-decoy-key" in c and "dropped" not in c for c in typed), typed


# ---- R14b-6: in the sandbox's POSIX locale, a non-ASCII character is Meta keys to readline

def _euro_then_ctrl_u(tmp_path, locale):
    from sweserve.assess.recorder import BrowserTerminal

    key = tmp_path / "answer-key.txt"
    key.write_text("SECRET-CONTENT-42\n")
    cast = tmp_path / "c.cast"
    term = BrowserTerminal(["env", "-u", "LANG", "-u", "LANGUAGE", f"LC_ALL={locale}", "bash", "--norc",
                            "--noprofile", "-i"], cast).start()
    shown: list[bytes] = []
    term.subscribe(shown.append)
    try:
        time.sleep(0.5)
        _type(term, [f"cat {key}".encode(), "€".encode() * 6, b"\x15", b"\r"])
        screen = _end(term, shown)
    finally:
        term.stop()
    ran = "SECRET-CONTENT-42\r\n" in screen.replace(f"cat {key}", "")
    return ran, [c for _, c in commands_from_cast(cast)]


def test_a_non_ascii_character_that_moved_the_cursor_leaves_the_command_in_the_list(tmp_path):
    """The task images set no LANG (`docker image inspect`: PATH, PIP_*, SSL_*, GIT_*; `locale`: POSIX), and
    `DockerSandbox.interactive_argv` passes none: the candidate's bash runs in the POSIX locale, where readline
    reads a byte >= 0x80 as Meta plus its low 7 bits (convert-meta). `€` (E2 82 AC) is M-b (backward-word) then
    two unbound keys; the record reads one printable character and goes on applying edits. Typed
    `cat .../answer-key.txt`, `€` six times (the cursor at the line's start), ^U (kills nothing there), Enter."""
    ran, typed = _euro_then_ctrl_u(tmp_path, "POSIX")  # the sandbox's shell: no locale in its environment
    assert ran  # bash ran `cat .../answer-key.txt`
    assert any("answer-key" in c for c in typed), typed


def test_control_in_a_utf8_locale_the_same_keys_run_nothing(tmp_path):
    """The control for R14b-6: in C.UTF-8, `€` is one character and ^U kills the line, so nothing ran; the
    record, which cannot know the locale, shows the ^U as a key rather than applying it."""
    ran, typed = _euro_then_ctrl_u(tmp_path, "C.UTF-8")
    assert not ran and typed[0].endswith("⟨U+20AC⟩" * 6 + "⟨^U⟩"), typed
