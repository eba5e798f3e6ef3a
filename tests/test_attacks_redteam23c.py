"""Red team 23c: remote assessments for hiring teams (`sweserve assess serve`, `sweserve/assess/`), attacked by
anyone who can reach the server or set a cookie on its site (a page on another port of the host, a sibling
subdomain), every HTTP message theirs.

Each test is written to fail while the attack works and to pass once it is defended; controls keep honest
behaviour working. Real servers on 127.0.0.1 and real sockets.
"""

from __future__ import annotations

import functools
import http.client
import json
import time

import pytest
from test_attacks_redteam17d import Running, empty_server
from test_attacks_redteam22c import _two_seats, _with_cookies, shell_in_a_box
from test_attacks_redteam22g import _begun

from sweserve.assess.server import cookie_name

# ---- R23c-1: any cookie of the session's name, tossed in beside the candidate's own, locks the candidate out


def test_r23c_1_a_tossed_cookie_of_no_session_does_not_lock_the_candidate_out(tmp_path):
    """R22c-5's defence made a request naming the session cookie twice name no session. Any page of the host (any
    port: cookies ignore ports) or a sibling subdomain can set `sweserve_session_<port>=x` for the site without
    holding any session at all: the candidate's browser then sends two, and every poll, Submit and websocket of
    the candidate's running assessment is refused while its clock runs out (a denial of service by anyone).
    Won before the fix: 403. Defence: of the values sent under the name, the one that opens a session is taken;
    two that open different sessions still name none (R22c-5)."""
    server = empty_server(tmp_path)
    victim, _ = _two_seats(tmp_path, server)
    with Running(server) as srv:
        name = cookie_name(srv.port)
        for cookies in (f"{name}=junk; {name}=victim-key", f"{name}=victim-key; {name}=junk", f"{name}=; {name}=victim-key"):
            status, body = _with_cookies(srv.port, "GET", "/api/state", cookies)
            assert status == 200 and json.loads(body)["candidate"] == "victim", (cookies, status)
        assert _with_cookies(srv.port, "POST", "/api/submit", f"{name}=junk; {name}=victim-key")[0] == 200
    assert victim.submitted.is_set()


def test_r23c_1_control_two_sessions_named_are_still_none(tmp_path):
    server = empty_server(tmp_path)
    victim, mallory = _two_seats(tmp_path, server)
    with Running(server) as srv:
        name = cookie_name(srv.port)
        status, body = _with_cookies(srv.port, "GET", "/api/state", f"{name}=victim-key; x=1; {name}=mallory-key")
        assert status == 403 and b"mallory" not in body
    assert not victim.submitted.is_set() and not mallory.submitted.is_set()


# ---- R23c-2: over https, the session cookie has no `__Host-` prefix: a sibling subdomain can toss one in


def _start(port: int, proto: str) -> str:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    conn.request("POST", "/i/token", headers={"X-Forwarded-Proto": proto, "Content-Length": "0"})
    resp = conn.getresponse()
    resp.read()
    conn.close()
    assert resp.status == 303, resp.status
    return resp.getheader("set-cookie") or ""


def test_r23c_2_over_https_the_session_cookie_is_one_no_other_site_can_set(tmp_path):
    """Behind a TLS proxy (uvicorn takes `X-Forwarded-Proto` from 127.0.0.1, where such a proxy runs), the session
    cookie was `sweserve_session_<port>`, a name any sibling subdomain may set for the whole site (`Domain=`):
    with R22c-5's rule its victim is locked out, and with a value of the tosser's own session no rule on the
    server can tell which of two sessions is the browser's. A `__Host-` cookie is one a browser accepts only from
    this very host over https, with no Domain and Path=/: no other site can set or shadow it. Won before the fix:
    the cookie set on Start had no prefix, and the server read the tossable name."""
    server = empty_server(tmp_path)
    (tmp_path / "s").mkdir()
    server.begin = functools.partial(_begun, tmp_path / "s", server, "s")  # type: ignore[method-assign]
    with Running(server) as srv:
        set_cookie = _start(srv.port, "https")
        name, _, rest = set_cookie.partition("=")
        attrs = [a.strip().lower() for a in rest.split(";")[1:]]
        assert name == f"__Host-{cookie_name(srv.port)}", set_cookie
        assert "secure" in attrs and "path=/" in attrs and not any(a.startswith("domain") for a in attrs), set_cookie
        key = rest.split(";")[0]
        # the tossed cookie (the unprefixed name, another session's key) is not read; the candidate's own is
        conn = http.client.HTTPConnection("127.0.0.1", srv.port, timeout=10)
        conn.request("GET", "/api/state", headers={"X-Forwarded-Proto": "https",
                                                   "Cookie": f"{cookie_name(srv.port)}=s-key-other; {name}={key}"})
        resp = conn.getresponse()
        body = resp.read()
        conn.close()
        assert resp.status == 200 and json.loads(body)["candidate"] == "cands", body


def test_r23c_2_control_over_http_the_cookie_is_named_as_before(tmp_path):
    server = empty_server(tmp_path)
    (tmp_path / "s").mkdir()
    server.begin = functools.partial(_begun, tmp_path / "s", server, "s")  # type: ignore[method-assign]
    with Running(server) as srv:
        set_cookie = _start(srv.port, "http")
        assert set_cookie.startswith(f"{cookie_name(srv.port)}=s-key-token;"), set_cookie
        status, body = _with_cookies(srv.port, "GET", "/api/state", f"{cookie_name(srv.port)}=s-key-token")
        assert status == 200 and json.loads(body)["candidate"] == "cands"


# ---- R23c-3: the docker client's detach keys, typed, end the candidate's task (R22c-3, any detach sequence)


def _detach_keys(argv: list[str]) -> bytes:
    """The bytes that make `docker exec -t` detach, as argv configures them (docker's default: ^P ^Q)."""
    spec = "ctrl-p,ctrl-q"
    for i, arg in enumerate(argv):
        if arg.startswith("--detach-keys="):
            spec = arg.split("=", 1)[1]
        elif arg == "--detach-keys":
            spec = argv[i + 1]
    return bytes(ord(k[5:].upper()) & 0x1F if k.startswith("ctrl-") else ord(k) for k in spec.split(","))


@pytest.mark.docker
def test_r23c_3_the_detach_keys_typed_do_not_end_the_candidates_task(tmp_path):
    """The candidate's shell is `docker exec -it … bash` on the server's pseudo-terminal, and the docker client
    reads its detach keys (^P ^Q unless set) as "detach": it exits, the relay ends, and `BrowserAgent.solve` takes
    that as the shell finished, grading the task at once with time left. Another detach sequence alone is still
    typeable (a websocket message carries any bytes). Won before the fix: the terminal ended at ^P ^Q. Defence:
    docker's detach sequence is one no honest typing forms, and the relay never delivers its last key."""
    with shell_in_a_box(tmp_path, "rt23c") as (argv, term):
        for key in _detach_keys(argv):  # a key a message, as docker matches them
            term.write(bytes([key]))
            time.sleep(0.3)
        assert not term.exited.wait(3), "the detach keys ended the candidate's terminal"
        term.write(b"\x15echo still-$((6*8))\r")  # control: the shell still takes keys
        end = time.monotonic() + 10
        while b"still-48" not in bytes(term.record.screen) and time.monotonic() < end:
            time.sleep(0.1)
        assert b"still-48" in bytes(term.record.screen)


def test_r23c_3_the_relay_holds_back_the_last_detach_key_however_split(tmp_path):
    """No docker: the relay's own guard. The sequence typed a key a message, split across messages, or after keys
    dropped never reaches the terminal whole (`_deliver` counts each key held back as dropped)."""
    from sweserve.assess.recorder import BrowserTerminal

    argv = ["docker", "exec", "-it", "--detach-keys=ctrl-],ctrl-^,ctrl-_,ctrl-@", "box", "bash"]
    term = BrowserTerminal(argv, tmp_path / "c.cast")
    assert term.detach == b"\x1d\x1e\x1f\x00"
    given = bytearray()
    for chunk in (b"ls\r\x1d", b"\x1e", b"\x1f\x00x", b"\x1d\x1e\x1f\x00\x1d\x1e\x1f\x00", b"\x00ok"):
        keys, term._delivered = term._undetached(chunk)
        given += keys
    assert b"\x1d\x1e\x1f\x00" not in given and given.endswith(b"\x1d\x1e\x1fok") and given.count(b"\x00") == 0
    # the default sequence, and commands that are not docker's terminal, guarded or not as they need
    assert BrowserTerminal(["docker", "exec", "-it", "b", "bash"], tmp_path / "d.cast").detach == b"\x10\x11"
    assert BrowserTerminal(["bash", "-i"], tmp_path / "e.cast").detach == b""


def test_r23c_3_control_honest_keys_pass_untouched(tmp_path):
    from sweserve.assess.recorder import BrowserTerminal

    term = BrowserTerminal(["docker", "exec", "-it", "b", "bash"], tmp_path / "c.cast")
    for chunk in (b"\x10\x10\x1b[A", b"git log\r", b"\x11\x13\x11", "é\r".encode()):
        keys, term._delivered = term._undetached(chunk)
        assert keys == chunk


def test_r23c_2_control_over_https_the_terminal_takes_the_prefixed_cookie(tmp_path):
    """The websocket reads the same name as the pages (its scheme behind the proxy is wss): the candidate's own
    `__Host-` cookie reaches the session (4000: no terminal yet), the unprefixed name does not (4403)."""
    import socket

    server = empty_server(tmp_path)
    (tmp_path / "s").mkdir()
    server.begin = functools.partial(_begun, tmp_path / "s", server, "s")  # type: ignore[method-assign]

    def close_code(port: int, cookie: str) -> int:
        with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
            sock.sendall((f"GET /ws HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nUpgrade: websocket\r\n"
                          f"Connection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"
                          f"Sec-WebSocket-Version: 13\r\nX-Forwarded-Proto: https\r\nCookie: {cookie}\r\n\r\n").encode())
            data = b""
            while b"\r\n\r\n" not in data or len(data.split(b"\r\n\r\n", 1)[1]) < 4:
                chunk = sock.recv(4096)
                if not chunk:
                    break
                data += chunk
            head, _, frame = data.partition(b"\r\n\r\n")
            if not head.startswith(b"HTTP/1.1 101"):
                return 4403  # refused before the handshake
            assert frame[0] == 0x88, frame
            return int.from_bytes(frame[2:4], "big")

    with Running(server) as srv:
        name, _, rest = _start(srv.port, "https").partition("=")
        key = rest.split(";")[0]
        assert close_code(srv.port, f"{name}={key}") == 4000
        assert close_code(srv.port, f"{cookie_name(srv.port)}={key}") == 4403
