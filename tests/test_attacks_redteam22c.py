"""Red team 22c: remote assessments for hiring teams (`sweserve assess serve`, `sweserve/assess/`), attacked by
anyone who can reach the server (a candidate with a link, or not), every HTTP and websocket message theirs.

Each test is written to fail while the attack works and to pass once it is defended; controls keep honest
behaviour working. Real servers on 127.0.0.1 and real sockets.
"""

from __future__ import annotations

import contextlib
import hashlib
import http.client
import json
import secrets
import time
from datetime import timedelta

import pytest
from test_assess import T0, bundle
from test_attacks_redteam17d import Running, empty_server, seated

import sweserve.assess.invites as invites_mod
from sweserve.assess.agent import Seat
from sweserve.assess.invites import Invite, InviteStore, Refused
from sweserve.assess.packs import choose_pack
from sweserve.assess.server import Assessment, cookie_name

# ---- R22c-1: every look at an invite link parses the whole invites file


def _count_parses(monkeypatch) -> list[int]:
    parses = [0]
    real = invites_mod.load_model

    def counted(*args, **kwargs):
        parses[0] += 1
        return real(*args, **kwargs)

    monkeypatch.setattr(invites_mod, "load_model", counted)
    return parses


def _many_invites(store: InviteStore, n: int) -> None:
    for i in range(n):
        store.create(f"c{i}", "/packs/p.yaml", "v1", timedelta(days=3))


def test_r22c_1_a_flood_of_invite_pages_does_not_parse_the_invites_file_each_time(tmp_path, monkeypatch):
    """GET /i/<token> (and a POST of a token that is not valid) reads and parses the whole invites file, under its
    exclusive lock, for every request: the file holds every invite ever made (none is ever removed), ~300 bytes
    each, so a hiring team's 2,000 invites cost ~10 ms of the GIL per request. Anyone, with no link at all, asking
    for /i/<random> 100 times a second holds the one interpreter every candidate's terminal is relayed by, and
    the thread pool every Start button waits in. Won before the fix: each request parsed the file again.
    Defence: the store keeps the book it parsed last, with an index by token hash, for as long as the file is the
    same file (its inode, size and times): a look at a token costs a stat and a lookup; any write (`invite`,
    a redeem) replaces the file, so the next look reads it again."""
    server = empty_server(tmp_path)
    _many_invites(server.store, 50)
    parses = _count_parses(monkeypatch)
    with Running(server) as srv:
        conn = http.client.HTTPConnection("127.0.0.1", srv.port, timeout=10)
        for i in range(200):
            conn.request("GET" if i % 2 else "POST", f"/i/{secrets.token_urlsafe(32)}")
            resp = conn.getresponse()
            assert resp.status == 410
            assert b"not valid" in resp.read()
        conn.close()
    assert parses[0] <= 2, f"the invites file was parsed {parses[0]} times for 200 looks at unknown links"


def test_r22c_1_control_a_store_sees_every_change_to_its_file(tmp_path, monkeypatch):
    """What another process writes (`assess invite` while the server runs), a redeem, and expiry are all seen by
    the next look, however warm the store is."""
    path = tmp_path / "assess" / "invites.json"
    server_side, cli_side = InviteStore(path), InviteStore(path)
    with pytest.raises(Refused):
        server_side.peek("nothing-yet")
    _many_invites(cli_side, 3)
    invite, token = cli_side.create("alice", "/packs/p.yaml", "v1", timedelta(days=3))
    for _ in range(3):
        assert server_side.peek(token).invite_id == invite.invite_id
    assert server_side.redeem(token).used_at is not None
    with pytest.raises(Refused, match="already been used"):
        server_side.peek(token)
    with pytest.raises(Refused, match="already been used"):
        cli_side.peek(token)
    _, short = cli_side.create("bob", "/packs/p.yaml", "v1", timedelta(seconds=1))
    assert server_side.peek(short).candidate == "bob"
    time.sleep(1.1)
    with pytest.raises(Refused, match="expired"):
        server_side.peek(short)
    # the store's copy is never handed out to be changed: a caller editing what it got changes nothing stored
    _, carol = cli_side.create("carol", "/packs/p.yaml", "v1", timedelta(days=1))
    server_side.peek(carol).candidate = "mallory"
    assert server_side.peek(carol).candidate == "carol"
    assert [i.candidate for i in server_side.all()][-1] == "carol"


# ---- R22c-2: SameSite=Strict is not same-origin: a page of the same site submits a candidate's task


def _seated(tmp_path, server) -> Seat:
    return seated(tmp_path, server, "victim")


def _post(port: int, path: str, origin: str | None) -> int:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    headers = {"Cookie": f"{cookie_name(port)}=victim-key", "Content-Length": "0"}
    if origin is not None:
        headers["Origin"] = origin
    conn.request("POST", path, headers=headers)
    status = conn.getresponse().status
    conn.close()
    return status


def test_r22c_2_a_page_of_another_origin_of_the_same_site_cannot_submit_a_candidates_task(tmp_path):
    """The session cookie is SameSite=Strict, and POST /api/submit trusts it alone: but a site is the scheme and
    registrable domain, not the origin, so a browser sends the cookie with a form posted from any other port of
    the same host, or any sibling subdomain (another candidate's page on the hiring team's site, another service
    of that host). Another candidate (or anyone) who gets the victim to open such a page ends the victim's task
    at once (graded as it stands), and spends a Start link the victim opens there (POST /i/<token>). The
    websocket already checks its Origin; these did not. Won before the fix: the submit was taken (200) and the
    seat submitted. Defence: a POST whose Origin names another host than the request's is refused (403); a client
    that sends no Origin (not a browser) is served as before."""
    server = empty_server(tmp_path)
    seat = _seated(tmp_path, server)
    invite, token = server.store.create("victim2", "/packs/p.yaml", "v1", timedelta(days=1))
    with Running(server) as srv:
        for origin in (f"http://127.0.0.1:{srv.port + 1}", f"http://evil.127.0.0.1:{srv.port}", "null"):
            assert _post(srv.port, "/api/submit", origin) == 403, origin
            assert not seat.submitted.is_set(), f"a page of {origin} submitted the candidate's task"
            assert _post(srv.port, f"/i/{token}", origin) == 403, origin
    assert server.store.peek(token).used_at is None, "a page of another origin spent the candidate's link"


def test_r22c_2_control_the_candidates_own_page_and_a_client_with_no_origin_submit(tmp_path):
    server = empty_server(tmp_path)
    with Running(server) as srv:
        seat = _seated(tmp_path, server)
        assert _post(srv.port, "/api/submit", f"http://127.0.0.1:{srv.port}") == 200
        assert seat.submitted.is_set()
        seat = _seated(tmp_path, server)
        assert _post(srv.port, "/api/submit", None) == 200
        assert seat.submitted.is_set()


# ---- R22c-3: two keys end the candidate's task: `docker exec -it`'s detach sequence, ^P ^Q


@pytest.mark.docker
def test_r22c_3_ctrl_p_ctrl_q_does_not_end_the_candidates_task(tmp_path):
    """The candidate's shell is `docker exec -it … bash` on the server's pseudo-terminal. The docker client reads
    ^P ^Q (its default detach keys) as "detach": it exits, the relay ends, and `BrowserAgent.solve` takes that as
    the shell finished: the task is graded as it stands, with no confirmation and time left (the page says only
    `exit` and Submit end a task). ^P is readline's previous-history key and ^Q the XON that unfreezes a terminal
    after ^S, so an honest candidate hits it; and the docker client holds every ^P back until the next key, so
    ^P alone does nothing on screen. Won before red team 23c's fix: the terminal ended at ^P ^Q."""
    with shell_in_a_box(tmp_path, "rt22c") as (_, term):
        term.write(b"\x10")
        time.sleep(0.3)
        term.write(b"\x11")
        assert not term.exited.wait(3), "^P ^Q ended the candidate's terminal"


@contextlib.contextmanager
def shell_in_a_box(tmp_path, prefix: str):
    """(argv, terminal): `bash --norc -i` through the sandbox's own `interactive_argv` (`docker exec -it`, its
    detach keys) in a bare container, relayed by a `BrowserTerminal`, once its shell has answered."""
    import subprocess
    import types

    from sweserve.assess.recorder import BrowserTerminal
    from sweserve.environment.docker_sandbox import DockerSandbox
    from sweserve.environment.images import PROXY_BASE
    from sweserve.environment.sandbox import WORKDIR

    if subprocess.run(["docker", "image", "inspect", PROXY_BASE], capture_output=True).returncode:
        pytest.skip(f"{PROXY_BASE} is not built here")
    name = f"{prefix}-detach-{secrets.token_hex(4)}"
    # `-w`: the folder `interactive_argv` starts the shell in exists; without it the exec failed at once, whatever
    # was typed (red team 23c)
    subprocess.run(["docker", "run", "-d", "--rm", "--network", "none", "-w", WORKDIR, "--name", name, PROXY_BASE,
                    "sleep", "300"], check=True, capture_output=True)
    try:
        box = types.SimpleNamespace(name=name, _check_out_tree=lambda: None, _arm=lambda: None)
        argv = DockerSandbox.interactive_argv(box, "bash --norc -i", tty=True)  # type: ignore[arg-type]
        term = BrowserTerminal(argv, tmp_path / "c.cast").start()
        try:
            term.write(b"echo ready-$((6*7))\r")
            end = time.monotonic() + 20
            while b"ready-42" not in bytes(term.record.screen) and time.monotonic() < end:
                time.sleep(0.1)
            assert b"ready-42" in bytes(term.record.screen), "the shell never started"
            yield argv, term
        finally:
            term.stop()
    finally:
        subprocess.run(["docker", "rm", "-f", name], capture_output=True)


# ---- R22c-4: each poll of the page's state renders the task statement again, on the event loop


def test_r22c_4_polling_the_state_does_not_render_the_statement_each_time(tmp_path):
    """GET /api/state renders the task's markdown statement to HTML on every request, on the one event loop that
    relays every candidate's terminal: ~40 ms for an 18 KB statement. The page polls once a second per tab (four
    tabs: 160 ms a second of the loop, per candidate, honestly), and a candidate looping on the endpoint (a
    100-byte request) holds the loop whole: every other candidate's keys and output wait. Won before the fix:
    one render per request. Defence: a statement is rendered once (the server keeps the HTML by statement), so
    a poll costs a lookup."""
    server = empty_server(tmp_path)
    text = "## Problem\n\nSome *text* with `code` and [a link](https://example.com). " * 200
    pack = choose_pack("p", [bundle(1, instruction=text)], 1, 3600)
    invite = Invite(invite_id="x", candidate="poller", pack="p.yaml", pack_version=pack.version,
                    token_sha256="0" * 64, created_at=T0, expires_at=T0)
    seat = Seat("poller")
    server.sessions[hashlib.sha256(b"victim-key").hexdigest()] = Assessment(
        invite, pack, [bundle(1, instruction=text)], tmp_path / "r.jsonl", seat, status="running")
    seat.take("o__r-1", object(), time.time() + 600)  # type: ignore[arg-type]  # a clock running: shown
    renders = [0]
    real = server.md.render

    def counted(src, env=None):
        renders[0] += 1
        return real(src, env)

    server.md.render = counted  # type: ignore[method-assign]
    with Running(server) as srv:
        conn = http.client.HTTPConnection("127.0.0.1", srv.port, timeout=10)
        bodies = set()
        for _ in range(30):
            conn.request("GET", "/api/state", headers={"Cookie": f"{cookie_name(srv.port)}=victim-key"})
            resp = conn.getresponse()
            assert resp.status == 200
            bodies.add(json.loads(resp.read())["instruction_html"])
        conn.close()
    assert len(bodies) == 1 and "<h2>Problem</h2>" in bodies.pop()  # the statement, as rendered
    assert renders[0] <= 1, f"the statement was rendered {renders[0]} times for 30 polls"


# ---- R22c-5: a session cookie tossed in by a sibling of the site takes over another candidate's browser


def _two_seats(tmp_path, server) -> tuple[Seat, Seat]:
    pack = choose_pack("p", [bundle(1)], 1, 3600)
    seats = []
    for name in ("victim", "mallory"):
        invite = Invite(invite_id=name, candidate=name, pack="p.yaml", pack_version=pack.version,
                        token_sha256="0" * 64, created_at=T0, expires_at=T0)
        seat = Seat(name)
        server.sessions[hashlib.sha256(f"{name}-key".encode()).hexdigest()] = Assessment(
            invite, pack, [bundle(1)], tmp_path / f"{name}.jsonl", seat, status="running")
        seats.append(seat)
    return seats[0], seats[1]


def _with_cookies(port: int, method: str, path: str, cookie: str) -> tuple[int, bytes]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    conn.request(method, path, headers={"Cookie": cookie, "Content-Length": "0"})
    resp = conn.getresponse()
    out = resp.status, resp.read()
    conn.close()
    return out


def test_r22c_5_two_session_cookies_never_choose_another_candidates_session(tmp_path):
    """A cookie set with `Domain=<the site>` by any sibling subdomain (cookie tossing) reaches the assess server
    beside the candidate's own host-only one: the browser sends both under the one name, in an order the sender
    of the second chooses (a path as long, set later), and the server took the last. Mallory tosses their own
    session's cookie into the victim's browser: the victim's page now shows Mallory's task and terminal, the
    victim's keys solve Mallory's task (credited to Mallory), and the victim's own task runs out unseen, or the
    victim's Submit ends Mallory's. Won before the fix: the state of Mallory's session was served, and the submit
    taken for Mallory's seat. Defence: a request naming the session cookie more than once names no session (403,
    the page says to reopen the link); one cookie, beside any others, is served as before."""
    server = empty_server(tmp_path)
    victim, mallory = _two_seats(tmp_path, server)
    with Running(server) as srv:
        two = f"{cookie_name(srv.port)}=victim-key; other=1; {cookie_name(srv.port)}=mallory-key"
        status, body = _with_cookies(srv.port, "GET", "/api/state", two)
        assert status == 403 and b"mallory" not in body, body
        status, _ = _with_cookies(srv.port, "POST", "/api/submit", two)
        assert status == 403
    assert not mallory.submitted.is_set() and not victim.submitted.is_set()


def test_r22c_5_control_one_session_cookie_among_others_is_served(tmp_path):
    server = empty_server(tmp_path)
    victim, _ = _two_seats(tmp_path, server)
    with Running(server) as srv:
        status, body = _with_cookies(srv.port, "GET", "/api/state", f"a=1; {cookie_name(srv.port)}=victim-key; b=2")
        assert status == 200 and json.loads(body)["candidate"] == "victim"
        assert _with_cookies(srv.port, "POST", "/api/submit", f"{cookie_name(srv.port)}=victim-key; z=3")[0] == 200
    assert victim.submitted.is_set()
