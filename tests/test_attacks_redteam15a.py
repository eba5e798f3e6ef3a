"""A fifteenth red team's (15a) attacks on model-only egress for command agents: the mitmproxy sidecar and its
addon (`images/proxy/egress_addon.py`), started by `environment/egress.py` for a command agent with `egress:`.

Each test asserts the defended behaviour: it FAILS while the attack wins. The Docker tests run the shipped proxy
image for real, as `egress_for` starts it: on a sandbox network made by `sandbox_network` (internal, no host
address), the scripted model (tests/fake_model.py) in a container on Docker's default bridge beside the proxy's
way out, and a "sandbox" container on the internal network that speaks raw HTTP to the proxy, as a root agent can.

- R15a-1 WIN (closed book bypassed, and the request missing from egress.log): a POST to the allowed model
  endpoint with a `Content-Encoding` mitmproxy cannot decode (`gzip` on a plain JSON body, or any unknown coding)
  makes `req.content` raise ValueError inside the addon's `request` hook, before the try around json.loads and
  before `record`. mitmproxy logs the addon error and forwards the request as it came: the model server (which,
  like uvicorn/Starlette and http.server, ignores a request's Content-Encoding) gets `tools: [web_search]`
  intact, and the audit log has no line for the request at all.
  `test_a_body_with_an_undecodable_content_encoding_is_stripped_or_refused_and_logged`.
- R15a-2 WIN (closed book bypassed, plain JSON): Gemini's API is proto JSON, which takes the lowerCamelCase
  field names as well as snake_case, and LiteLLM (the usual plain-http gateway in front of a provider) documents
  `tools=[{"googleSearch": {}}]`, `{"codeExecution": {}}`, `{"urlContext": {}}`. HOSTED_KEYS lists only the
  snake_case spellings (and not `google_maps`, `enterprise_web_search`, `retrieval`): the camelCase tools pass.
  `test_gemini_camel_case_hosted_tools_are_stripped`.
- R15a-3 WIN (closed book bypassed, plain JSON): Anthropic's MCP connector is a top-level `mcp_servers` field
  (not a `tools` entry): the provider itself connects to any remote MCP server (a fetch or search server) and
  runs its tools. Only `web_search_options` is stripped at top level. `test_anthropic_mcp_servers_are_stripped`.
- R15a-4 WIN (host disk and harness memory): every request's full URL is one line of audit.jsonl in the proxy
  container's writable layer (on the host's disk, no size limit), and `EgressProxy.audit_log` reads the whole
  file into the sweserve process's memory (`b"".join`) and writes it again next to the trial. Refused requests
  with 4 MiB URLs on one keep-alive connection grew the log by ~93 MB/s on this machine (931 MB in 10 s): an hour
  of it fills the host's disk; the copy at the end of the phase needs as much RAM.
  `test_the_audit_log_stays_bounded_under_a_flood_of_huge_urls`.
"""

from __future__ import annotations

import json
import textwrap

import pytest
from test_egress import ModelContainer, load_addon

addon = load_addon()

RUN = "redteam15a"


# --- the policy on the host --------------------------------------------------------------------------------------

def test_gemini_camel_case_hosted_tools_are_stripped():
    """R15a-2: the same hosted tools as google_search / code_execution / url_context, in proto JSON's camelCase."""
    for key in ("googleSearch", "googleSearchRetrieval", "codeExecution", "urlContext"):
        body = {"model": "gemini/gemini-2.5-pro", "tools": [{key: {}}, {"functionDeclarations": [{"name": "bash"}]}]}
        stripped = addon.strip_hosted_tools(body)
        assert stripped and body["tools"] == [{"functionDeclarations": [{"name": "bash"}]}], (key, body)


def test_anthropic_mcp_servers_are_stripped():
    """R15a-3: the provider connects to the named MCP server and runs its tools itself."""
    body = {"model": "claude-sonnet-4", "max_tokens": 100, "messages": [{"role": "user", "content": "hi"}],
            "mcp_servers": [{"type": "url", "url": "https://fetch.example/sse", "name": "fetch"}]}
    stripped = addon.strip_hosted_tools(body)
    assert "mcp_servers" not in body and stripped, body


def test_control_snake_case_and_the_agents_own_tools():
    """Control: what the addon already strips stays stripped, and a client-run function is kept."""
    body = {"tools": [{"google_search": {}}, {"type": "function", "function": {"name": "bash"}}]}
    assert addon.strip_hosted_tools(body) == ["google_search"]
    assert body == {"tools": [{"type": "function", "function": {"name": "bash"}}]}


# --- the proxy for real ------------------------------------------------------------------------------------------

SENDER = textwrap.dedent("""
    import socket, sys, time
    host, port = sys.argv[1], int(sys.argv[2])
    data = open(sys.argv[3], "rb").read()
    repeat = int(sys.argv[4]) if len(sys.argv) > 4 else 1
    s = socket.create_connection((host, port), 10)
    s.settimeout(10)
    f = s.makefile("rb")
    for _ in range(repeat):
        s.sendall(data)
        status = f.readline()
        length = 0
        while True:
            line = f.readline()
            if line in (b"\\r\\n", b""):
                break
            if line.lower().startswith(b"content-length:"):
                length = int(line.split(b":")[1])
        f.read(length)
        print("STATUS", status.decode().strip(), flush=True)
""")


class Rig:
    def __init__(self, client, model, proxy, sandbox):
        self.client, self.model, self.proxy, self.sandbox = client, model, proxy, sandbox
        host, port = proxy.url.removeprefix("http://").split(":")
        self.proxy_host, self.proxy_port = host, int(port)

    def send(self, raw: bytes, repeat: int = 1) -> str:
        """raw bytes from the sandbox to the proxy (repeat times on one keep-alive connection)."""
        import io
        import tarfile

        buf = io.BytesIO()
        with tarfile.open(fileobj=buf, mode="w") as tar:
            for name, data in (("send.py", SENDER.encode()), ("req.bin", raw)):
                info = tarfile.TarInfo(name)
                info.size = len(data)
                tar.addfile(info, io.BytesIO(data))
        self.sandbox.put_archive("/tmp", buf.getvalue())
        code, out = self.sandbox.exec_run(["python3", "/tmp/send.py", self.proxy_host, str(self.proxy_port),
                                           "/tmp/req.bin", str(repeat)])
        return out.decode("utf-8", "replace")

    def audit(self) -> list[dict]:
        return [json.loads(line) for line in self.proxy.audit_log().splitlines()]


@pytest.fixture
def rig(docker_client):
    from sweserve.environment.docker_sandbox import labels, sandbox_network
    from sweserve.environment.egress import EgressProxy
    from sweserve.environment.images import ImageBuilder, read_ca_bundle

    image = ImageBuilder(docker_client, read_ca_bundle(None)).proxy()
    network = sandbox_network(docker_client, RUN, "egress-probe", "candidate")
    model = proxy = sandbox = None
    try:
        model = ModelContainer(docker_client, [{"role": "assistant", "content": "ok"}])
        proxy = EgressProxy.start(docker_client, image, network, [model.endpoint], True, run_id=RUN,
                                  task_id="egress-probe")
        sandbox = docker_client.containers.run("sweserve-base:bookworm", ["sleep", "600"], detach=True,
                                               network=network, labels=labels(RUN, "egress-probe", "candidate"))
        yield Rig(docker_client, model, proxy, sandbox)
    finally:
        for thing in (sandbox, model, proxy):
            if thing is not None:
                thing.remove(force=True) if hasattr(thing, "attrs") else thing.remove()
        docker_client.networks.get(network).remove()


def post(rig, body: bytes, *headers: str) -> bytes:
    target = f"{rig.model.ip}:{rig.model.port}"
    head = [f"POST http://{target}/v1/chat/completions HTTP/1.1", f"Host: {target}",
            "Content-Type: application/json", f"Content-Length: {len(body)}", *headers]
    return ("\r\n".join(head) + "\r\n\r\n").encode() + body


@pytest.mark.docker
def test_a_body_with_an_undecodable_content_encoding_is_stripped_or_refused_and_logged(rig):
    """R15a-1: `Content-Encoding: gzip` on plain JSON (or an unknown coding) gets web_search past closed book,
    and leaves no line in the audit log. Each request is told apart at the model by its `user` (a field closed
    book's allow-list passes: red team 20c)."""
    control = json.dumps({"model": "m", "tools": [{"type": "web_search"}], "user": "control"}).encode()
    assert "STATUS HTTP/1.0 200" in rig.send(post(rig, control))
    for coding in ("gzip", "x-sweserve"):
        body = json.dumps({"model": "m", "tools": [{"type": "web_search"}, {"type": "function"}],
                           "user": coding}).encode()
        rig.send(post(rig, body, f"Content-Encoding: {coding}"))
    seen = {r.get("user"): r for r in rig.model.requests()}
    assert seen["control"] == {"model": "m", "user": "control"}  # control: stripped
    for coding in ("gzip", "x-sweserve"):
        if coding in seen:  # reached the model: then without its hosted tool
            assert seen[coding].get("tools") == [{"type": "function"}], (coding, seen[coding])
    audit = rig.audit()
    assert len(audit) == 3, audit  # one line per request, whatever its body
    assert audit[0]["stripped"] == ["web_search"]


@pytest.mark.docker
def test_the_audit_log_stays_bounded_under_a_flood_of_huge_urls(rig):
    """R15a-4: 40 refused requests with 1 MiB URLs must not put 40 MiB in the audit log (and the host's memory)."""
    raw = f"GET http://10.9.9.9/{'a' * (1 << 20)} HTTP/1.1\r\nHost: 10.9.9.9\r\n\r\n".encode()
    rig.send(raw, repeat=40)  # on today's proxy: 40 times 403, and 40 lines of 1 MiB each
    log = rig.proxy.audit_log()
    assert log.count("\n") >= 1 and len(log) < (1 << 20), f"audit log of {len(log)} bytes after 40 requests"


def test_a_full_audit_log_refuses_instead_of_growing_or_going_silent(tmp_path, monkeypatch):
    """R15a-4 on the host: short URLs at a high rate must not grow the log past its limit either; once full, the
    proxy refuses (the agent loses only its own model) and the log says so, rather than letting requests pass
    unrecorded."""
    from types import SimpleNamespace

    monkeypatch.setattr(addon, "LOG_LIMIT", 64 << 10, raising=False)
    refused = []
    monkeypatch.setattr(addon.Egress, "refuse", staticmethod(lambda flow, what: refused.append(what)))
    e = addon.Egress(["http://10.0.0.5:30000"], False, tmp_path)

    def flow(host, port):
        return SimpleNamespace(
            request=SimpleNamespace(method="GET", scheme="http", host=host, port=port, content=b"",
                                    url=f"http://{host}:{port}/{'x' * 900}"),
            client_conn=SimpleNamespace(peername=("10.1.1.2", 5555)), response=None)
    for _ in range(200):
        e.request(flow("10.9.9.9", 80))
    e.request(flow("10.0.0.5", 30000))  # the model itself, after the flood
    log = (tmp_path / "audit.jsonl").read_text()
    assert len(log) <= 64 << 10, len(log)
    assert len(refused) == 201  # once the log is full, even the allowed origin is refused: nothing passes unlogged
    assert "audit log full" in log.splitlines()[-1]


def test_a_body_python_cannot_decode_is_not_forwarded_with_its_hosted_tools(tmp_path, monkeypatch):
    """R15a-5: one byte that is not UTF-8 inside a JSON string (`"note": "\\xff"`) makes the addon's json.loads
    fail, so the body is forwarded as it came, tools and all. A gateway that is not Python reads it: Go's
    encoding/json and Node's body-parser replace an invalid byte with U+FFFD and parse the rest (emulated here by
    decoding with errors="replace"), and pass `web_search` on to the provider."""
    from test_attacks_redteam15f import run

    body = b'{"model": "m", "note": "\xff", "tools": [{"type": "web_search"}, {"type": "function"}]}'
    refused, flow = run(tmp_path, monkeypatch, body)
    if not refused:  # forwarded: then what a lenient server reads of it has no hosted tool left
        seen = json.loads(flow.request.content.decode("utf-8", "replace"))
        assert addon.strip_hosted_tools(seen) == [], seen


def test_a_duplicate_key_is_not_read_one_way_by_the_proxy_and_another_by_the_server(tmp_path, monkeypatch):
    """Red team 15a's lead, reproduced after the fixes: `{"tools": [web_search], "tools": []}`. Python's json keeps
    the last `tools` (empty: nothing to strip), and the proxy forwarded the bytes as they came; a parser that keeps
    the first (some Go and Java gateways, JSON's RFC leaves it open) handed `web_search` to the provider. The proxy
    now forwards what it read, re-serialized: one `tools`, the one it checked."""
    from test_attacks_redteam15f import run

    body = b'{"model": "m", "tools": [{"type": "web_search"}], "tools": [{"type": "function"}]}'
    refused, flow = run(tmp_path, monkeypatch, body)
    assert not refused
    first_wins = json.loads(flow.request.content, object_pairs_hook=lambda pairs: dict(reversed(pairs)))
    assert addon.strip_hosted_tools(first_wins) == [], flow.request.content
