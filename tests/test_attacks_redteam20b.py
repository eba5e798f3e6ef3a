"""Red team 20b: remote assessments for hiring teams, third round (`sweserve assess serve`, `sweserve/assess/`,
README "Assess a candidate"): the newest defences (red team 18d's write-stall cut, key thread and unrecorded-output
count) attacked by a candidate who controls the browser, every HTTP and websocket message, and the sandbox as root.

Each test is written to fail while the attack works and to pass once it is defended; controls keep honest
behaviour working. Real servers on 127.0.0.1 and real sockets; a local shell stands in for the sandbox's.
"""

from __future__ import annotations

import csv
import time
import tracemalloc

from test_assess import bundle
from test_attacks_redteam17d import Running, _deaf_tab, _flood, _session, empty_server

import sweserve.assess.server as server_mod
from sweserve.assess.server import cookie_name

# ---- R20b-1: the key thread's queue is bounded in bytes typed, not in what each queued item holds


def test_r20b_1_keys_and_resizes_behind_a_shell_that_reads_nothing_hold_no_more_than_the_pending_limit(
        tmp_path, monkeypatch):
    """R12a-4/R18d-2 bound what the event loop queues for the key thread by `INPUT_PENDING_BYTES` of keys; but the
    count is of the keys' bytes alone. Each queued message is an object of its own (a `bytes` of ~35 bytes for two
    keys, a queue slot), and each window size sent between two keys queues a `_Size` object (~100 bytes) that is
    counted as nothing: the candidate stops the shell reading (`stty -icanon; sleep`, or any program that never
    reads its terminal) and sends two keys, a resize, two keys, a resize… Won before the fix: 32 KiB of keys
    under a 64 KiB limit held ~3 MiB of the server's memory (50x the limit; the 1 MiB default: ~100 MiB per
    terminal, every candidate at once). Defence: each queued item (keys, a size, a drop count) is charged a fixed
    cost beside its bytes against the same limit; a size with no room updates the newest size still queued
    (recorded and applied there, so the replay and the terminal still agree), so the queue holds at most the limit
    over that cost items."""
    import sweserve.assess.recorder as rec

    limit = 64 * 1024
    monkeypatch.setattr(rec, "INPUT_PENDING_BYTES", limit)
    term = rec.BrowserTerminal(["bash", "--norc", "--noprofile", "-i"], tmp_path / "c.cast").start()
    try:
        term.write(b"stty -icanon; sleep 4\r")
        time.sleep(0.5)
        term.write(b"z" * 32000)  # more than the terminal's buffer, the shell asleep: the key thread waits
        time.sleep(0.3)
        tracemalloc.start()
        try:
            before = tracemalloc.get_traced_memory()[0]
            for i in range(40_000):
                term.write(b"yy")
                term.resize(21 + i % 2, 6)
            held = tracemalloc.get_traced_memory()[0] - before
        finally:
            tracemalloc.stop()
        assert held <= 4 * limit, f"{held} bytes held by the key queue under a {limit}-byte limit"
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
    # the last size still reaches the terminal and the replay, the same
    assert b"30 99" in bytes(term.record.screen)
    _, events = rec.read_cast(tmp_path / "c.cast")
    assert [data for _, code, data in events if code == "r"][-1] == "99x30"


def test_r20b_1_control_typing_and_resizing_behind_a_busy_shell_all_arrive_in_order(tmp_path):
    """An honest candidate types ahead while a command runs and resizes the window: every key reaches the shell,
    in order, on the record, and the last size applies."""
    import sweserve.assess.recorder as rec

    term = rec.BrowserTerminal(["bash", "--norc", "--noprofile", "-i"], tmp_path / "c.cast").start()
    try:
        term.write(b"sleep 1\r")
        term.write(b"echo ok-$((6*7))-")
        for i in range(200):
            term.write(f"{i % 10}".encode())
            term.resize(80 + i % 3, 24)
        term.write(b"\r")
        term.resize(100, 40)
        end = time.monotonic() + 10
        while b"ok-42" not in bytes(term.record.screen) and time.monotonic() < end:
            time.sleep(0.1)
        time.sleep(0.3)
        term.write(b"stty size\r")
        end = time.monotonic() + 10
        while b"40 100" not in bytes(term.record.screen) and time.monotonic() < end:
            time.sleep(0.1)
    finally:
        term.write(b"exit\r")
        term.exited.wait(15)
        term.stop()
    digits = "".join(f"{i % 10}" for i in range(200))
    assert f"ok-42-{digits}".encode() in bytes(term.record.screen) and b"40 100" in bytes(term.record.screen)
    _, events = rec.read_cast(tmp_path / "c.cast")
    typed = "".join(data for _, code, data in events if code == "i")
    assert digits in typed and term.dropped == 0


# ---- R20b-2: two candidates' replays written to one file name


def test_r20b_2_replay_pages_of_two_candidates_never_share_a_file(tmp_path):
    """Replays are written as `replay-<candidate>-<task>.html`, and both a candidate's name and a task id may hold
    `-`: candidate `bob` on task `x-o__r-1` and candidate `bob-x` on task `o__r-1` of the same pack both write
    `replay-bob-x-o__r-1.html`, and the second written replaces the first. Won before the fix: bob's scorecard
    linked to bob-x's replay (a reviewer saw another candidate's commands as bob's; a candidate named so by the
    team has his replay hidden behind the other's). Defence: the name and the task are joined by `.`, which a
    candidate's name cannot hold (its pattern has no dot), so the file name is one pair's only."""
    from test_attacks_redteam16c import result

    from sweserve.assess.packs import choose_pack
    from sweserve.assess.scorecard import write_scorecards
    from sweserve.evaluation.results import ResultsWriter

    b1 = bundle(1)
    b2 = bundle(1, "serving-api")
    b2 = b2.model_copy(update={"task": b2.task.model_copy(update={"task_id": "x-o__r-1", "repo": "x-o/r"})})
    pack = choose_pack("p", [b1, b2], 2, 7200)
    assert sorted(t.task_id for t in pack.tasks) == ["o__r-1", "x-o__r-1"]
    results_dir = tmp_path / "out" / "p"
    for name, b in (("bob", b2), ("bob-x", b1)):
        with ResultsWriter(results_dir / f"{name}.jsonl") as w:
            w.write(result(f"human-{name}", b, "resolved", 300, attempt=1, run_id=f"run-{name}",
                           trial_dir=str(tmp_path / "nowhere")))
    cards = write_scorecards(pack, results_dir, tmp_path / "report", None, [])
    replays = sorted((tmp_path / "report").glob("replay-*.html"))
    assert len(replays) == 2, f"two candidates' replays in {[p.name for p in replays]}"
    for name in ("bob", "bob-x"):
        page = cards.pages[name].read_text()
        link = page.split("href='replay-", 1)[1].split("'", 1)[0]
        assert f"human-{name}" in (tmp_path / "report" / f"replay-{link}").read_text() or \
            name in (tmp_path / "report" / f"replay-{link}").read_text().split("<title>", 1)[1].split("</title>")[0]
    assert {r["candidate"] for r in csv.DictReader(cards.csv.open())} == {"bob", "bob-x"}


# ---- R20b-3: a websocket that stops reading is not cut by the write-stall deadline


def test_r20b_3_a_websocket_that_never_reads_its_output_does_not_hold_its_connection(tmp_path, monkeypatch):
    """R18d-1's write-stall cut is on the HTTP protocol: once a connection is upgraded to a websocket its
    protocol is websockets', and nothing times a send the client never reads. The candidate opens a tab, reads
    nothing, and prints in the sandbox: the tab's output handler waits in `send` for ever, and the websocket's
    keep-alive ping (which would time it out) waits behind it in the same drain, so the ping timeout never runs.
    Won before the fix: the connection (a descriptor, the kernel's buffers, the transport's, one of the
    terminal's `MAX_WATCHERS` places) was still open long after every deadline. Defence: the websocket protocol
    `assess serve` runs has the same write-stall cut (`WRITE_STALL_S`) as the HTTP one."""
    monkeypatch.setattr(server_mod, "WRITE_STALL_S", 1.0, raising=False)
    server = empty_server(tmp_path)
    term = _session(tmp_path, server)
    sock = None
    try:
        with Running(server) as srv:
            sock, watches = _deaf_tab(srv.port)
            assert watches
            _flood(term, 12)
            end = time.monotonic() + 15
            while len(srv.uv.server_state.connections) and time.monotonic() < end:
                time.sleep(0.1)
            assert len(srv.uv.server_state.connections) == 0, "a websocket that reads nothing holds its connection"
    finally:
        if sock is not None:
            sock.close()
        term.write(b"exit\r")
        term.exited.wait(10)
        term.stop()


def test_r20b_3_control_a_websocket_that_reads_slowly_keeps_its_terminal(tmp_path, monkeypatch):
    """A tab on a slow network that takes its output in small bites, with pauses shorter than the deadline, keeps
    its connection and sees the shell's output."""
    from websockets.sync.client import connect

    monkeypatch.setattr(server_mod, "WRITE_STALL_S", 2.0, raising=False)
    server = empty_server(tmp_path)
    term = _session(tmp_path, server)
    try:
        with Running(server) as srv:
            with connect(f"ws://127.0.0.1:{srv.port}/ws", additional_headers={
                    "Cookie": f"{cookie_name(srv.port)}=mallory-key", "Origin": f"http://127.0.0.1:{srv.port}"},
                    max_size=None) as ws:
                term.write(b"head -c 3000000 /dev/zero | tr '\\0' a; echo; echo fin-$((6*7))\r")
                seen = b""
                end = time.monotonic() + 40
                while b"fin-42" not in seen[-4096:] and time.monotonic() < end:
                    msg = ws.recv(timeout=10)
                    seen += msg if isinstance(msg, bytes) else msg.encode()
                    time.sleep(0.02)  # a slow reader: bites of up to 64 KiB, 50 a second at most
                assert b"fin-42" in seen[-4096:]
    finally:
        term.write(b"exit\r")
        term.exited.wait(10)
        term.stop()


# ---- R20b-4: a reader that takes a trickle dodges the write-stall cut for ever


def test_r20b_4_a_client_that_reads_a_trickle_does_not_hold_its_connection_for_ever(monkeypatch):
    """R18d-1's cut spares a connection whose unsent output shrank at all within `WRITE_STALL_S`: a client that
    takes a byte or a segment each time (far less than any network honestly delivers: one TCP segment per 30 s)
    re-arms it for ever, and each such connection holds a descriptor, the transport's buffer and a response's file
    (a loop of them: R17d-1's outcome again, at a cost of a few bytes a second each). The protocol is driven here
    with a transport whose client takes 1,460 bytes (a segment) per deadline, so the test does not hang on
    loopback's 64 KiB window updates. Won before the fix: never aborted, however many deadlines passed. Defence: a
    connection must take at least `WRITE_STALL_MIN_BYTES` (64 KiB: ~2 KiB a second at the default deadline, slower
    than any honest network) per deadline, or all it has left, to count as a reader. Control: one that takes
    more per deadline is kept."""

    class Transport:
        def __init__(self, per_deadline: int):
            self.unsent, self.per_deadline, self.aborted = 4 * 2**20, per_deadline, False

        def get_write_buffer_size(self) -> int:
            return self.unsent

        def get_extra_info(self, name):
            return None

        def get_protocol(self):
            return proto

        def abort(self) -> None:
            self.aborted = True

    class Loop:
        def __init__(self):
            self.timers: list = []

        def call_later(self, delay, fn, *args):
            self.timers.append((fn, args))

    class Proto(server_mod.WriteStallCut):
        def _write_paused(self) -> bool:
            return True

    for per_deadline, cut in ((1460, True), (128 * 1024, False)):
        proto = Proto()
        proto.transport, proto.loop = Transport(per_deadline), Loop()  # type: ignore[assignment]
        proto._stall_armed()
        for _ in range(20):  # twenty deadlines: ten minutes at the default
            if not proto.loop.timers or proto.transport.aborted:
                break
            fn, args = proto.loop.timers.pop()
            proto.transport.unsent -= proto.transport.per_deadline
            fn(*args)
        assert proto.transport.aborted is cut, (per_deadline, "bytes a deadline", proto.transport.aborted)
