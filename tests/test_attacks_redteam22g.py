"""Red team 22g: the newest assess-server fixes (round 22c) and their neighbours, attacked by anyone who can
reach the server: a candidate with two tabs, a page that is not the candidate's, a request of any spelling.

Each test is written to fail while the attack works and to pass once it is defended; controls keep honest
behaviour working. Real servers on 127.0.0.1 and real sockets.
"""

from __future__ import annotations

import functools
import hashlib
import http.client
import http.cookiejar
import threading
import time
import types
import urllib.error
import urllib.request
from datetime import timedelta

import pytest
from test_assess import T0, bundle
from test_attacks_redteam17d import Running, empty_server

from sweserve.assess.agent import Seat
from sweserve.assess.invites import Invite, InviteStore
from sweserve.assess.packs import choose_pack
from sweserve.assess.server import SESSION_PAGE, Assessment, cookie_name

# ---- R22g-1: a Submit names no task: a stale one ends the task that started after it


def _on_second_task(tmp_path, server) -> tuple[Assessment, Seat]:
    """A session of two tasks, the first submitted and graded, the second's clock running."""
    bundles = [bundle(1), bundle(2)]
    pack = choose_pack("p", bundles, 2, 3600)
    invite = Invite(invite_id="x", candidate="cand", pack="p.yaml", pack_version=pack.version,
                    token_sha256="0" * 64, created_at=T0, expires_at=T0)
    seat = Seat("cand")
    a = Assessment(invite, pack, bundles, tmp_path / "r.jsonl", seat, status="running", index=1)
    server.sessions[hashlib.sha256(b"cand-key").hexdigest()] = a
    seat.take(bundles[1].task.task_id, types.SimpleNamespace(), 2e9)  # type: ignore[arg-type]
    return a, seat


def _submit(port: int, query: str = "") -> int:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    conn.request("POST", f"/api/submit{query}", headers={"Cookie": f"{cookie_name(port)}=cand-key",
                                                          "Content-Length": "0",
                                                          "Origin": f"http://127.0.0.1:{port}"})
    status = conn.getresponse().status
    conn.close()
    return status


def test_r22g_1_a_submit_of_task_1_does_not_end_task_2(tmp_path):
    """POST /api/submit ends whatever task the seat holds when it lands, not the one the page showed: a second
    tab (or a background tab whose poll the browser throttles to once a minute) still shows task 1 running with
    its Submit enabled; the candidate submits task 1 in the first tab, then presses Submit in the other, or the
    POST is slow on the network, and it lands once task 2's clock runs. Task 2 ends at once, graded as it
    stands, with its whole time unused and `exit_reason: submitted` as if the candidate chose it. Won before the
    fix: the submit naming task 1 submitted task 2. Defence: the page names the task it shows
    (`?task=<index>`); a submit naming another task than the one in progress is refused (409) and changes
    nothing."""
    server = empty_server(tmp_path)
    with Running(server) as srv:
        _, seat = _on_second_task(tmp_path, server)
        assert _submit(srv.port, "?task=1") == 409
        assert not seat.submitted.is_set(), "a Submit pressed on task 1 ended task 2"
        for junk in ("?task=", "?task=x", "?task=99", "?task=-1", "?task=2&task=1"):
            assert _submit(srv.port, junk) == 409, junk
            assert not seat.submitted.is_set(), junk
    assert "/api/submit?task=" in SESSION_PAGE, "the page does not name the task its Submit is for"


def test_r22g_1_control_a_submit_of_the_task_in_progress_or_naming_none_ends_it(tmp_path):
    server = empty_server(tmp_path)
    with Running(server) as srv:
        _, seat = _on_second_task(tmp_path, server)
        assert _submit(srv.port, "?task=2") == 200
        assert seat.submitted.is_set()
        _, seat = _on_second_task(tmp_path, server)
        assert _submit(srv.port) == 200  # a script naming no task: the one in progress, as before
        assert seat.submitted.is_set()


# ---- R22g-2: two assess servers on one host share one cookie: starting on the second ends the first's session


def test_r22g_2_starting_on_a_second_server_of_the_host_keeps_the_first_session(tmp_path):
    """Two hiring teams (or two packs) run `assess serve` on one host, on two ports. A browser's cookies are the
    host's, whatever the port (RFC 6265 §8.5), and both servers name theirs `sweserve_session` with path /: a
    candidate who presses Start on the second server's link while the first assessment runs has the first one's
    cookie replaced. The first tab's next poll says "No session"; the invite is spent, so nothing reopens it: its
    clock runs out and the work is graded as it stands. The same replacement is open to any service of another
    port of that host (R22c-2's threat), which can set its own session's key as the candidate's. Python's cookie
    jar keeps cookies as browsers do. Won before the fix (red team 22k): the first server's page answered 403
    after the second Start. Defence: the cookie is named after the server's port (`cookie_name`)."""
    jar = http.cookiejar.CookieJar()
    opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(jar))
    servers = [empty_server(tmp_path / n) for n in ("a", "b")]
    for n, server in zip("ab", servers, strict=True):
        (tmp_path / n).mkdir()
        server.begin = functools.partial(_begun, tmp_path / n, server, n)  # type: ignore[method-assign]
    with Running(servers[0]) as a, Running(servers[1]) as b:
        for port in (a.port, b.port):
            req = urllib.request.Request(f"http://127.0.0.1:{port}/i/token", method="POST", data=b"")
            with opener.open(req) as resp:
                assert resp.status == 200 and resp.url.endswith("/s")
        for port in (b.port, a.port):
            try:
                with opener.open(f"http://127.0.0.1:{port}/s") as resp:
                    status = resp.status
            except urllib.error.HTTPError as exc:
                status = exc.code
            assert status == 200, f"the session of the server on port {port} is gone"


def _begun(folder, server, name: str, token: str) -> str:
    """`begin` without a pack: a session of one task, its key returned."""
    key = f"{name}-key-{token}"
    pack = choose_pack("p", [bundle(1)], 1, 3600)
    invite = Invite(invite_id=name, candidate=f"cand{name}", pack="p.yaml", pack_version=pack.version,
                    token_sha256="0" * 64, created_at=T0, expires_at=T0)
    server.sessions[hashlib.sha256(key.encode()).hexdigest()] = Assessment(
        invite, pack, [bundle(1)], folder / "r.jsonl", Seat(f"cand{name}"), status="running")
    return key


# ---- R22g-3: the "already in progress" check is one server's: a second server of the host runs the same pack


def test_r22g_3_a_second_server_does_not_start_a_pack_already_in_progress_on_another(tmp_path, monkeypatch):
    """`begin` refuses a second session of the same candidate and pack while the first runs (red team 12a's lead:
    both wrote attempt 1 of the same results file and the candidate chose which counted), but it looks only at
    its own server's sessions. Two `assess serve` on one host read the same invites file (the state dir's) and,
    by default, write the same output: a candidate holding two links (a retake the team granted) opens the
    second on the other server's port while the first runs. Both sessions read `next_attempt` as 1 and append
    to one results file. Won before the fix: the second server started the session. Defence: a session holds
    an exclusive lock on its results file's lock file for as long as it runs; `begin` takes it before the token
    is spent, so another server (another process) refuses with the same sentence, and the link stays valid."""
    from test_assess import Ctx

    import sweserve.assess.server as server_mod
    from sweserve.assess.packs import save_pack
    from sweserve.assess.server import AssessServer
    from sweserve.errors import SweserveError

    release = threading.Event()

    def held(ctx, bundles, agent, results_path, **kw):
        release.wait(20)
        return []

    monkeypatch.setattr(server_mod, "run_evaluation", held)
    bundles = [bundle(1)]
    pack = choose_pack("p", bundles, 1, 3600)
    save_pack(tmp_path / "p.yaml", pack)
    store = InviteStore(tmp_path / "invites.json")
    first = store.create("alice", str(tmp_path / "p.yaml"), pack.version, timedelta(days=1))[1]
    second = store.create("alice", str(tmp_path / "p.yaml"), pack.version, timedelta(days=1))[1]
    tasks = {b.task.task_id: b for b in bundles}
    servers = [AssessServer(Ctx(), tasks, store, tmp_path / "out", tmp_path) for _ in "ab"]  # type: ignore[arg-type]
    try:
        servers[0].begin(first)
        with pytest.raises(SweserveError, match="already in progress"):
            servers[1].begin(second)
        assert store.peek(second).used_at is None, "the refused link was spent"
        # control: once the first session ends, the second link opens the retake, on either server
        release.set()
        end = time.monotonic() + 10
        while any(a.status != "done" for a in servers[0].sessions.values()) and time.monotonic() < end:
            time.sleep(0.05)
        servers[1].begin(second)
    finally:
        release.set()
