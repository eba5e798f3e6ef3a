"""Red team 18d: remote assessments for hiring teams, second round (`sweserve assess serve`, `sweserve/assess/`):
the newest defences (red team 17d's) attacked by a candidate who controls the browser, every HTTP and websocket
message, and the sandbox as root.

Each test is written to fail while the attack works and to pass once it is defended; controls keep honest
behaviour working. Real servers on 127.0.0.1 and real sockets; a local shell stands in for the sandbox's.
"""

from __future__ import annotations

import socket
import time

from test_attacks_redteam17d import Running, empty_server

import sweserve.assess.server as server_mod

# ---- R18d-1: a client that never reads its responses holds its connection for ever


def _open_connections(srv: Running) -> int:
    return len(srv.uv.server_state.connections)


def test_r18d_1_a_client_that_never_reads_its_responses_does_not_hold_a_connection(tmp_path, monkeypatch):
    """R17d-1 gave each request head a deadline, so a connection must keep sending; but nothing times a response
    the client never reads. The client pipelines thousands of whole requests in one send (each head is whole at
    once, each starts a new request cycle, so the head deadline never fires) and reads nothing: once the kernel's
    buffers are full, the handler waits in `send` for the transport to drain, for ever. No cookie is needed (a
    refused page is enough), and each such connection holds a file descriptor (a file response two): a loop of them
    fills the server's descriptors, R17d-1's outcome again. Won before the fix: the connection was still open long
    after every deadline. Defence: a response whose transport stays paused for writing (the client reads nothing)
    past a deadline of its own (`WRITE_STALL_S`) closes the connection."""
    monkeypatch.setattr(server_mod, "REQUEST_HEAD_S", 1.0, raising=False)
    monkeypatch.setattr(server_mod, "WRITE_STALL_S", 1.0, raising=False)
    with Running(empty_server(tmp_path)) as srv:
        sock = socket.socket()
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        sock.connect(("127.0.0.1", srv.port))
        sock.setblocking(False)
        heads = b"GET /i/not-a-token HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n" * 100_000
        try:
            end = time.monotonic() + 20
            while time.monotonic() < end and heads and _open_connections(srv):
                try:
                    heads = heads[sock.send(heads):]
                except BlockingIOError:
                    time.sleep(0.05)
                except OSError:
                    break
            # by now the head deadline has passed many times over; the server must have let the connection go
            end = time.monotonic() + 10
            while _open_connections(srv) and time.monotonic() < end:
                time.sleep(0.1)
            assert _open_connections(srv) == 0, "a client that reads nothing still holds its connection"
        finally:
            sock.close()


def test_r18d_1_a_large_response_never_read_on_a_closing_connection_does_not_hold_it(tmp_path, monkeypatch):
    """The same with one request, `Connection: close`, for a file larger than the kernel's buffers: once the
    response ends, uvicorn closes the transport, which waits for its buffer to drain to a client that never reads
    (asyncio's `close` has no deadline), holding the socket and the file. Defence: the stall deadline aborts a
    closing transport too, and the head deadline aborts rather than closes."""
    monkeypatch.setattr(server_mod, "REQUEST_HEAD_S", 1.0, raising=False)
    monkeypatch.setattr(server_mod, "WRITE_STALL_S", 1.0, raising=False)
    nm = tmp_path / "nm"
    for rel in server_mod.VENDOR.values():
        (nm / rel).parent.mkdir(parents=True, exist_ok=True)
        (nm / rel).write_bytes(b"x" * (16 * 2**20))
    server = empty_server(tmp_path)
    server.node_modules = nm
    with Running(server) as srv:
        sock = socket.socket()
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        sock.connect(("127.0.0.1", srv.port))
        try:
            sock.sendall(b"GET /vendor/xterm.js HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
            time.sleep(3)
            end = time.monotonic() + 5
            while _open_connections(srv) and time.monotonic() < end:
                time.sleep(0.1)
            assert _open_connections(srv) == 0, "a client that reads nothing still holds its connection"
        finally:
            sock.close()


def test_r18d_1_control_a_slow_reader_gets_its_whole_response(tmp_path, monkeypatch):
    """A client that reads slowly but steadily (each pause shorter than the stall deadline) gets all of a response
    larger than the kernel's buffers."""
    monkeypatch.setattr(server_mod, "WRITE_STALL_S", 1.0, raising=False)
    nm = tmp_path / "nm"
    for rel in server_mod.VENDOR.values():
        (nm / rel).parent.mkdir(parents=True, exist_ok=True)
        (nm / rel).write_bytes(b"x" * (4 * 2**20))
    server = empty_server(tmp_path)
    server.node_modules = nm
    with Running(server) as srv:
        sock = socket.socket()
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 65536)
        sock.connect(("127.0.0.1", srv.port))
        sock.settimeout(10)
        try:
            sock.sendall(b"GET /vendor/xterm.js HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
            got = b""
            while chunk := sock.recv(1 << 20):
                got += chunk
                time.sleep(0.3 if len(got) < 2**20 else 0)  # slow for the first MiB, then read the rest
        finally:
            sock.close()
    assert got.startswith(b"HTTP/1.1 200") and got.endswith(b"x" * 1000) and len(got) > 4 * 2**20


# ---- R18d-2: the cast's disk writes on the server's one event loop


class _SlowDisk:
    """A cast file on a slow disk: each flush takes `delay` seconds (a full or throttled disk, network storage)."""

    def __init__(self, fh, delay: float):
        self._fh, self.delay = fh, delay

    def __getattr__(self, name):
        return getattr(self._fh, name)

    def flush(self) -> None:
        time.sleep(self.delay)
        self._fh.flush()


def _slowest_write(term, calls) -> float:
    worst = 0.0
    for data, size in calls:
        t = time.monotonic()
        if size:
            term.resize(*size)
        else:
            term.write(data)
        worst = max(worst, time.monotonic() - t)
    return worst


def test_r18d_2_a_slow_cast_disk_does_not_stall_the_event_loop(tmp_path):
    """`BrowserTerminal.write` and `resize` run on the server's one event loop (every candidate's pages, keys and
    output), and each wrote its event to the cast and flushed it there, under the cast's lock, which the output pump
    also holds while it writes 64 KiB events. A disk that is slow (a full disk, throttled or network storage, or one
    the candidate's own output flood keeps busy) stalls every candidate for as long as each write takes, once per key.
    Won before the fix: a key took the flush's whole delay on the loop. Defence: the loop never writes the cast: keys,
    resizes and drop markers are recorded by the terminal's key thread, in the order they came, before the key
    reaches the terminal (or the size is applied), as before."""
    from sweserve.assess.recorder import BrowserTerminal, read_cast

    term = BrowserTerminal(["bash", "--norc", "--noprofile", "-i"], tmp_path / "c.cast").start()
    try:
        term.cast._fh = _SlowDisk(term.cast._fh, 0.5)
        worst = _slowest_write(term, [(b"echo one\r", None), (b"", (100, 40)), (b"echo two\r", None)])
        assert worst < 0.2, f"a key held the event loop {worst:.2f} s on a slow disk"
        end = time.monotonic() + 15
        while b"two" not in bytes(term.record.screen) and time.monotonic() < end:
            time.sleep(0.1)
    finally:
        term.write(b"exit\r")
        term.exited.wait(15)
        term.stop()
    _, events = read_cast(tmp_path / "c.cast")
    kept = [(code, data) for _, code, data in events if code in "ir"]
    assert kept[:3] == [("i", "echo one\r"), ("r", "100x40"), ("i", "echo two\r")]


def test_r18d_2_the_final_flush_does_not_stall_the_event_loop(tmp_path, monkeypatch):
    """The same at the end: the pump closes the cast (an fsync of up to 128 MiB of it) under the cast's lock, before
    the terminal counts as exited, so a key typed meanwhile waited on the loop for the whole fsync. The candidate
    floods output and types `exit` while their tab keeps sending keys. Defence: as above."""
    import sweserve.assess.recorder as rec

    real_fsync = rec.os.fsync

    def slow_fsync(fd: int) -> None:
        time.sleep(2.0)
        real_fsync(fd)

    monkeypatch.setattr(rec.os, "fsync", slow_fsync)
    term = rec.BrowserTerminal(["bash", "--norc", "--noprofile", "-i"], tmp_path / "c.cast").start()
    try:
        term.write(b"exit\r")
        time.sleep(1.0)  # the shell is gone, the pump is in its fsync
        worst = _slowest_write(term, [(b"x", None)] * 3)
        assert worst < 0.2, f"a key held the event loop {worst:.2f} s during the cast's final flush"
    finally:
        term.exited.wait(15)
        term.stop()


def test_r18d_2_control_keys_past_the_pending_limit_are_marked_where_they_were_dropped(tmp_path, monkeypatch):
    """Keys dropped (the terminal not taking them) are still marked in the cast, between the keys kept before and
    after them, and never reach the shell."""
    import sweserve.assess.recorder as rec

    monkeypatch.setattr(rec, "INPUT_PENDING_BYTES", 64)
    term = rec.BrowserTerminal(["bash", "--norc", "--noprofile", "-i"], tmp_path / "c.cast").start()
    try:
        term.write(b"sleep 2\r")
        time.sleep(0.5)
        term.write(b"a" * 60)  # queued: bash is asleep and the terminal's line holds them... or the queue does
        term.write(b"b" * 100)  # past the limit: dropped
        term.write(b"b" * 100)
        time.sleep(3)
        term.write(b"\x15echo done-$((6*7))\r")
        end = time.monotonic() + 10
        while b"done-42" not in bytes(term.record.screen) and time.monotonic() < end:
            time.sleep(0.1)
    finally:
        term.write(b"exit\r")
        term.exited.wait(15)
        term.stop()
    _, events = rec.read_cast(tmp_path / "c.cast")
    assert b"done-42" in bytes(term.record.screen) and term.dropped == 200
    codes = [(code, data[:20]) for _, code, data in events if code in "im"]
    assert codes[:4] == [("i", "sleep 2\r"), ("i", "a" * 20), ("m", f"{rec.DROPPED} 100 bytes"[:20]),
                         ("m", f"{rec.DROPPED} 100 bytes"[:20])] or \
        codes[:3] == [("i", "sleep 2\r"), ("i", "a" * 20), ("m", f"{rec.DROPPED} 200 bytes"[:20])]
    assert "b" not in "".join(data for code, data in codes if code == "i")


def test_r18d_2_resizes_and_drops_while_the_shell_takes_no_keys_queue_nothing_more(tmp_path, monkeypatch):
    """Variant: with the recording moved to the key thread, what the loop queues while the terminal takes no keys
    must stay bounded: a flood of resize messages and of dropped keys behind a program that never reads is one
    queued size and one queued count, and the cast gets the last size and the whole count."""
    import sweserve.assess.recorder as rec

    monkeypatch.setattr(rec, "INPUT_PENDING_BYTES", 32768)
    term = rec.BrowserTerminal(["bash", "--norc", "--noprofile", "-i"], tmp_path / "c.cast").start()
    try:
        term.write(b"stty -icanon; sleep 3\r")
        time.sleep(0.5)
        term.write(b"z" * 32000)  # taken: more than the terminal's buffer, the shell asleep: the key thread waits
        for i in range(20_000):
            term.resize(21 + i % 2, 6)
            term.write(b"y" * 2000)  # dropped
        assert term._keys.qsize() <= 4
        term.resize(99, 30)
        time.sleep(4)
        term.write(b"\x03\rstty size\r")
        end = time.monotonic() + 10
        while b"30 99" not in bytes(term.record.screen) and time.monotonic() < end:
            time.sleep(0.1)
    finally:
        term.write(b"exit\r")
        term.exited.wait(15)
        term.stop()
    assert b"30 99" in bytes(term.record.screen)
    _, events = rec.read_cast(tmp_path / "c.cast")
    assert [data for _, code, data in events if code == "r"][-1] == "99x30"
    dropped = sum(int(data.split()[-2]) for _, code, data in events if code == "m" and data.startswith(rec.DROPPED))
    assert dropped == term.dropped == 20_000 * 2000


# ---- R18d-3: output past the recording limit is still shown to the candidate, and nothing says so


def test_r18d_3_output_shown_but_not_recorded_is_disclosed_on_the_scorecard_and_csv(tmp_path, monkeypatch):
    """Past the cast's output budget (64 MiB) the pump still relays every byte to the candidate's tab, and records
    none: one `head -c 64M /dev/zero` (a second of the sandbox's time) and the rest of the session's output, the
    candidate's whole view of their work (a solution printed from wherever, a test run), is on no record, while the
    scorecard and the CSV read as an ordinary session and the replay simply goes quiet. Won before the fix: the
    candidate's screen showed `SECRET-42`, the cast did not, and neither the scorecard nor the CSV said anything.
    Defence: the cast counts the output shown and not kept and says so in its last marker; the scorecard row and
    the CSV (`output_unrecorded_bytes`) say how much the candidate saw that the replay does not hold. The budget is
    made small here; the mechanism is the same at 64 MiB. Control: alice's ordinary session shows 0."""
    import csv

    from test_assess import bundle
    from test_attacks_redteam16c import result
    from test_attacks_redteam16f import _alice_resolved

    import sweserve.assess.recorder as rec
    from sweserve.assess.agent import CAST_FILE, BrowserAgent, Seat
    from sweserve.assess.scorecard import write_scorecards
    from sweserve.evaluation.evaluate import write_manifest
    from sweserve.evaluation.results import ResultsWriter

    monkeypatch.setattr(rec, "CAST_MAX_BYTES", 64 * 1024)
    pack, out = _alice_resolved(tmp_path)
    trial = tmp_path / "mallory-trial"
    term = rec.BrowserTerminal(["bash", "--norc", "--noprofile", "-i"], trial / CAST_FILE).start()
    try:
        term.write(b"head -c 200000 /dev/zero | tr '\\0' a; echo\r")
        time.sleep(1)
        term.write(b"echo SECRET-$((6*7))\r")
        end = time.monotonic() + 10
        while b"SECRET-42" not in bytes(term.record.screen) and time.monotonic() < end:
            time.sleep(0.1)
    finally:
        term.write(b"exit\r")
        term.exited.wait(15)
        term.stop()
    assert b"SECRET-42" in bytes(term.record.screen)  # the candidate saw it
    assert "SECRET-42" not in (trial / CAST_FILE).read_text()  # the replay does not hold it
    path = out / pack.name / "mallory.jsonl"
    write_manifest(path, "run-m", BrowserAgent("mallory", Seat("mallory"), 1800, lambda _b: None), [bundle(1)], 1)
    with ResultsWriter(path) as w:
        w.write(result("human-mallory", bundle(1), "resolved", 300, attempt=1, run_id="run-m", trial_dir=str(trial)))
    cards = write_scorecards(pack, out / pack.name, tmp_path / "report", None, [])
    rows = {r["candidate"]: r for r in csv.DictReader(cards.csv.open())}
    assert int(rows["mallory"].get("output_unrecorded_bytes") or 0) > 0, "the CSV does not say output went unrecorded"
    assert rows["alice"]["output_unrecorded_bytes"] == "0"
    assert "output shown to the candidate is not in the replay" in cards.pages["mallory"].read_text()
    assert "not in the replay" not in cards.pages["alice"].read_text()


def test_r18d_3_a_cast_cut_and_never_closed_still_counts_as_unrecorded(tmp_path, monkeypatch):
    """Variant: a server killed before the cast's closing marker (its count) leaves the output cut marker alone:
    how much is unknown, but the count is not 0; a whole cast counts exactly."""
    import sweserve.assess.recorder as rec

    monkeypatch.setattr(rec, "CAST_MAX_BYTES", 4096)
    cast = rec.CastWriter(tmp_path / "a.cast", 80, 24)
    for _ in range(3):
        cast.event("o", b"x" * 3000)
    cast._fh.flush()
    assert rec.output_unkept(tmp_path / "a.cast") >= 1  # never closed
    cast.close()
    assert rec.output_unkept(tmp_path / "a.cast") == 6000
    whole = rec.CastWriter(tmp_path / "b.cast", 80, 24)
    whole.event("o", b"y" * 100)
    whole.close()
    assert rec.output_unkept(tmp_path / "b.cast") == 0
