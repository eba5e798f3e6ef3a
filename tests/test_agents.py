"""Agent configs and the API agent's model client, against a scripted server on 127.0.0.1 (no Docker)."""

import time

import pytest
from fake_model import FakeModel

from sweserve.agents.api import ApiAgent, ModelError, chat
from sweserve.agents.command import CommandAgent, redact
from sweserve.agents.config import ApiAgentConfig, load_agent_config
from sweserve.agents.resolve import make_agent
from sweserve.config_search import ConfigSearch
from sweserve.errors import SweserveError


def cfg(base_url, **kw):
    return ApiAgentConfig(kind="api", name="t", model="m", base_url=base_url, request_timeout_s=1,
                          request_retries=1, **kw)


def test_shipped_configs_load():
    names = ConfigSearch().names("agents", (".yaml",))
    assert {"claude-code", "codex", "mini-swe-agent", "sglang-local"} <= set(names)
    for name in names:
        agent = make_agent(name)
        assert agent.name == name
    assert isinstance(make_agent("sglang-local"), ApiAgent)
    cc = make_agent("claude-code")
    assert isinstance(cc, CommandAgent) and cc.cfg.env == ["ANTHROPIC_API_KEY"] and cc.cfg.install


@pytest.mark.parametrize("name, api", [("claude-code", "https://api.anthropic.com:443"),
                                       ("codex", "https://api.openai.com:443")])
def test_shipped_cli_agents_reach_their_api_through_the_proxy(name, api):
    agent = make_agent(name)
    assert isinstance(agent, CommandAgent)
    assert agent.cfg.egress == [api]  # the only origin the proxy lets through (a CONNECT tunnel)
    assert not agent.cfg.closed_book  # needs plain http: the proxy cannot read TLS


def test_bad_configs_name_file_and_field(tmp_path):
    bad = tmp_path / "a.yaml"
    bad.write_text("kind: command\nname: x\n")
    with pytest.raises(SweserveError, match=r"a.yaml: field 'command.command': Field required"):
        load_agent_config(bad)
    bad.write_text("kind: api\nname: x\nmodel: m\nbase_url: u\nmax_steps: 0\n")
    with pytest.raises(SweserveError, match=r"field 'api.max_steps'"):
        load_agent_config(bad)
    bad.write_text("kind: [\n")
    with pytest.raises(SweserveError, match="not valid YAML"):
        load_agent_config(bad)
    with pytest.raises(SweserveError, match="no such agent config"):
        make_agent(str(tmp_path / "missing.yaml"))
    assert make_agent("echo hi").name.startswith("cmd-")  # not a config: a shell command


def test_chat_sends_key_and_parses():
    with FakeModel([{"role": "assistant", "content": "hi"}]) as fake:
        data = chat(cfg(fake.base_url), "sk-secret", [{"role": "user", "content": "x"}])
    assert data["choices"][0]["message"]["content"] == "hi"
    assert fake.auth == ["Bearer sk-secret"]
    assert fake.requests[0]["model"] == "m" and {t["function"]["name"] for t in fake.requests[0]["tools"]} == {"bash", "submit"}


@pytest.mark.parametrize("script, match, tries", [
    ([("status", 500)], r"HTTP 500 from model API \(2 tries\)", 2),
    ([("status", 401)], r"HTTP 401 from model API$", 1),
    ([("raw", b"{not json")], "invalid JSON", 1),
    ([("raw", b'{"choices": []}')], "invalid JSON or no choices", 1),
    ([("sleep", 3)], r"timed out after 1s \(2 tries\)", 2),
])
def test_chat_failures_become_model_errors(script, match, tries):
    with FakeModel(script) as fake:
        t0 = time.monotonic()
        with pytest.raises(ModelError, match=match):
            chat(cfg(fake.base_url), None, [])
        assert len(fake.requests) == tries and time.monotonic() - t0 < 10


def test_unreachable_endpoint():
    with pytest.raises(ModelError, match="unreachable"):
        chat(cfg("http://127.0.0.1:9/v1"), None, [])


def test_redact_and_env_passthrough():
    from sweserve.agents.config import CommandAgentConfig

    host = {"A": "s3cr3t", "B": "x"}
    assert CommandAgent("true", name="n", env=host)._passed == {}  # nothing named: nothing passed
    cfg = CommandAgentConfig(kind="command", name="n", command="true", env=["A", "MISSING"])
    assert CommandAgent(cfg.command, cfg=cfg, env=host)._passed == {"A": "s3cr3t"}
    assert redact("key=s3cr3t!", ["s3cr3t", ""]) == "key=***!"


# ---- the tool server's replies: what a server in the sandbox (the agent is root there) can send the host

def _tool_server(body: bytes, status: int = 200):
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args):
            pass

        def do_POST(self):
            self.rfile.read(int(self.headers.get("Content-Length") or 0))
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.end_headers()
            self.wfile.write(body)

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


@pytest.mark.parametrize("body, status", [
    (b'{"swerexception": {"class_path": "builtins.exec", "message": "open(%r, \\"w\\").write(\\"ran\\")"}}', 511),
    (b'{"swerexception": {"class_path": "builtins.KeyboardInterrupt", "message": "bye"}}', 511),
    (b'{"output": 5}', 200),
    (b"[1, 2]", 200),
    (b'"' + b"x" * (2 * 2**20) + b'"', 200),
], ids=["exec", "keyboard-interrupt", "wrong-shape", "not-an-object", "over-the-cap"])
def test_a_tool_servers_reply_is_never_more_than_a_broken_tool_server(tmp_path, monkeypatch, body, status):
    """R14a-2 and its lead: swe-rex's client imports and calls the class an error reply names, and reads a
    reply whole. The host raises `ToolServerBroke` for any of it, and runs nothing."""
    import asyncio

    from swerex.runtime.abstract import BashAction

    import sweserve.agents.api as api

    monkeypatch.setattr(api, "REPLY_MAX_BYTES", 2**20)
    marker = tmp_path / "host-ran-it"
    server = _tool_server(body.replace(b"%r", repr(str(marker)).encode().replace(b"'", b"\\\"")), status)
    try:
        runtime = api._safe_runtime("http://127.0.0.1", server.server_address[1], "t")
        with pytest.raises(api.ToolServerBroke):
            asyncio.run(runtime.run_in_session(BashAction(command="true", check="silent")))
    finally:
        server.shutdown()
    assert not marker.exists()


@pytest.mark.parametrize("value, seconds", [
    ("3", 3.0), ("0", 0.0), ("-5", 0.0), ("7200", 60.0), ("nan", 60.0), ("soon", 60.0), (None, 60.0),
    ("Thu, 01 Jan 1970 00:00:00 GMT", 0.0), ("Fri, 31 Dec 9999 23:59:59 GMT", 60.0),
])
def test_a_429s_retry_after_is_read_within_a_minute(value, seconds):
    """What a 429's Retry-After asks the chat client and the endpoint probe to wait: never past a minute (an
    endpoint cannot hold a run), never negative, a minute when it says nothing readable."""
    from sweserve.agents.chat_client import retry_after
    assert retry_after(value) == seconds


def test_the_chat_client_retries_a_429_no_sooner_than_it_asked():
    """A 429 whose Retry-After (2 s) outlasts the client's own back-off (1 s) is retried when it asked: at once,
    the second request would be refused too and the step lost."""
    with FakeModel([("status", 429, {"Retry-After": "2"}), {"role": "assistant", "content": "hi"}]) as fake:
        t0 = time.monotonic()
        data = chat(cfg(fake.base_url), None, [{"role": "user", "content": "x"}])
    assert data["choices"][0]["message"]["content"] == "hi" and time.monotonic() - t0 >= 2
