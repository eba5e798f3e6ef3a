"""Red team 22c: remote assessments for hiring teams (`sweserve assess serve`, `sweserve/assess/`), attacked by
anyone who can reach the server (a candidate with a link, or not), every HTTP and websocket message theirs.

Each test is written to fail while the attack works and to pass once it is defended; controls keep honest
behaviour working. Real servers on 127.0.0.1 and real sockets.
"""

from __future__ import annotations

import http.client
import secrets
from datetime import timedelta

import pytest
from test_attacks_redteam17d import Running, empty_server

import sweserve.assess.invites as invites_mod
from sweserve.assess.invites import InviteStore, Refused

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
    import time

    time.sleep(1.1)
    with pytest.raises(Refused, match="expired"):
        server_side.peek(short)
    # the store's copy is never handed out to be changed: a caller editing what it got changes nothing stored
    _, carol = cli_side.create("carol", "/packs/p.yaml", "v1", timedelta(days=1))
    server_side.peek(carol).candidate = "mallory"
    assert server_side.peek(carol).candidate == "carol"
    assert [i.candidate for i in server_side.all()][-1] == "carol"
