"""A fifteenth red team's (15f) attacks on the fixes red team 15a left in model-only egress: closed book in
`images/proxy/egress_addon.py` (refuse what it cannot parse, strip hosted tools by folded key names, forward its
own re-serialized JSON).

Each test asserts the defended behaviour: it FAILS while the attack wins. All run on the host against the addon
(SimpleNamespace flows, as tests/test_attacks_redteam15a.py does); the gateway behind the allowed plain-http
origin is emulated by how its parser reads the bytes the proxy forwards.

- R15f-1 WIN: OpenRouter's server tools are `tools` entries typed `openrouter:web_search` / `openrouter:web_fetch`
  (its documented replacement for `:online`). HOSTED_TYPES is matched with startswith: a provider prefix passes.
  So do xAI's `{"type": "x_search"}` and Moonshot's `{"type": "builtin_function", "function": {"name":
  "$web_search"}}` (Kimi runs the search itself), which are not in the list at all.
  `test_provider_prefixed_hosted_tool_types_are_stripped`.
- R15f-2 WIN: hosted search switched on outside `tools`: OpenRouter `plugins: [{"id": "web"}]` and the
  `model: "...:online"` suffix, DashScope/Qwen `enable_search: true`, xAI `search_parameters`, Cohere
  `connectors: [{"id": "web-search"}]`. None is in HOSTED_OPTIONS. `test_hosted_search_switched_on_outside_tools`.
- R15f-3 WIN: batch APIs nest whole requests: Anthropic Message Batches (`requests[].params.tools`), Gemini
  batchGenerateContent (`batch.input_config.requests.requests[].request.tools`). Only top-level `tools` is read.
  `test_hosted_tools_nested_in_a_batch_request_are_stripped`.
- R15f-4 WIN: Go's encoding/json (one-api/new-api, Bifrost, Ollama: Go gateways) matches object keys to struct
  fields case-insensitively, with Unicode folding (`ſ` is `s`, `K` is `k`), the last match winning. `"Tools"`,
  `"toolſ"`, `{"TYPE": "web_search"}` and `"Web_Search_Options"` are not what Python's dict lookups check, and
  the re-serialized body keeps them as they are. `test_a_case_insensitive_parser_sees_no_hosted_tools`.
- R15f-5 WIN: the re-serialized body is ASCII JSON but the request's `Content-Type: application/json;
  charset=utf-7` is forwarded as it came. Express's json() (body-parser: any `utf-*` charset, decoded by
  iconv-lite, which has UTF-7) reads `+ACIALAAg...-` inside a JSON string as `", "tools": [{"type":
  "web_search"}], "z": "`. `test_a_charset_the_proxy_did_not_read_with_is_not_forwarded`.
- R15f-6 WIN: a `GET` with `Upgrade: websocket` to the allowed origin has no body, passes, and mitmproxy relays
  the WebSocket after the 101: the addon has no websocket hook, so no message is read or stripped (LiteLLM's
  proxy serves OpenAI's Realtime API, whose `session.update` takes `tools` incl. remote `mcp`). Checked with the
  shipped proxy image (sweserve-proxy, mitmproxy 11.0.2) and a raw socket server: the 101 came back, and a
  masked text frame `{"type":"session.update","session":{"tools":[{"type":"mcp",...}]}}` reached the server;
  the audit log has one `GET .../v1/realtime allowed` line and nothing of the messages.
  `test_a_websocket_upgrade_to_the_model_is_refused_or_inspected`.
- R15f-7 WIN (the log lies about where a request went): a proxy request `GET http://<allowed>/x` with
  `Host: other.vhost` is forwarded to the allowed address with the agent's Host header unchanged (checked with
  the real image: the server got `Host: evil.example`), and the audit line says only the allowed URL. Where
  the allowed origin is a reverse proxy routing by Host (nginx, Traefik, Envoy on the host's port 80), the agent
  reaches every virtual host behind it, and egress.log shows only model calls.
  `test_the_forwarded_host_header_is_the_allowed_origin`.
"""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest
from test_egress import load_addon

addon = load_addon()

MODEL = "http://10.0.0.5:30000"


def run(tmp_path, monkeypatch, body: bytes | str | dict, *, method="POST", headers=None, path="/v1/chat/completions",
        models=()):
    """The addon's request hook on one request to the allowed model (closed book, `models` pinned when named);
    (refused?, the flow) afterwards."""
    refused = []
    monkeypatch.setattr(addon.Egress, "refuse", staticmethod(lambda flow, what: refused.append(what)))
    e = addon.Egress([MODEL], True, tmp_path, models)
    if isinstance(body, dict):
        body = json.dumps(body)
    if isinstance(body, str):
        body = body.encode()
    flow = SimpleNamespace(
        request=SimpleNamespace(method=method, scheme="http", host="10.0.0.5", port=30000, content=body,
                                url=f"{MODEL}{path}",
                                headers=dict(headers or {"content-type": "application/json"})),
        client_conn=SimpleNamespace(peername=("10.1.1.2", 5555)), response=None)
    e.request(flow)
    return bool(refused), flow


# --- R15f-1 --------------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("tool", [
    {"type": "openrouter:web_search"}, {"type": "openrouter:web_fetch"},
    {"type": "x_search"},  # xAI's Agent Tools: searches X posts server-side
    {"type": "builtin_function", "function": {"name": "$web_search"}},  # Moonshot (Kimi): Moonshot runs the search
], ids=["openrouter-web_search", "openrouter-web_fetch", "xai-x_search", "moonshot-builtin"])
def test_provider_prefixed_hosted_tool_types_are_stripped(tmp_path, monkeypatch, tool):
    body = {"model": "openai/gpt-5", "messages": [{"role": "user", "content": "hi"}],
            "tools": [tool, {"type": "function", "function": {"name": "bash"}}]}
    refused, flow = run(tmp_path, monkeypatch, body)
    if not refused:
        sent = json.loads(flow.request.content)
        assert [t["type"] for t in sent.get("tools", [])] == ["function"], sent


def test_control_the_agents_own_function_passes_untouched(tmp_path, monkeypatch):
    """Control: a client-run function, whose schema happens to name fields like the hosted ones, is kept whole."""
    schema = {"type": "object", "properties": {"plugins": {"type": "array"}, "connectors": {"type": "string"},
                                               "model": {"type": "string", "default": "x:online"}}}
    body = {"model": "m", "messages": [{"role": "user", "content": "hi"}],
            "tools": [{"type": "function", "function": {"name": "bash", "parameters": schema}}]}
    refused, flow = run(tmp_path, monkeypatch, body)
    assert not refused and json.loads(flow.request.content) == body


# --- R15f-2 --------------------------------------------------------------------------------------------------------

SWITCHES = {
    "openrouter-plugins": ({"plugins": [{"id": "web", "max_results": 5}]}, lambda b: "plugins" in b),
    "openrouter-online": ({"model": "openai/gpt-4o:online"}, lambda b: str(b.get("model")).endswith(":online")),
    "dashscope-enable_search": ({"model": "qwen-plus", "enable_search": True}, lambda b: b.get("enable_search")),
    "xai-search_parameters": ({"model": "grok-3", "search_parameters": {"mode": "on"}},
                              lambda b: "search_parameters" in b),
    "cohere-connectors": ({"connectors": [{"id": "web-search"}]}, lambda b: "connectors" in b),
}


@pytest.mark.parametrize("name", list(SWITCHES))
def test_hosted_search_switched_on_outside_tools(tmp_path, monkeypatch, name):
    extra, still_on = SWITCHES[name]
    body = {"model": "m", "messages": [{"role": "user", "content": "what fixed sglang#12345?"}], **extra}
    refused, flow = run(tmp_path, monkeypatch, body)
    assert refused or not still_on(json.loads(flow.request.content)), (name, flow.request.content)


# --- R15f-3 --------------------------------------------------------------------------------------------------------

def _hosted_anywhere(node) -> list[str]:
    """Hosted tools in any `tools` list at any depth (what a batch endpoint runs, one request per entry)."""
    found = []
    if isinstance(node, dict):
        found += addon.strip_hosted_tools(json.loads(json.dumps(node)))
        for value in node.values():
            found += _hosted_anywhere(value)
    elif isinstance(node, list):
        for value in node:
            found += _hosted_anywhere(value)
    return found


BATCHES = {
    "anthropic-message-batches": ("/v1/messages/batches", {"requests": [{"custom_id": "a", "params": {
        "model": "claude-sonnet-4-5", "max_tokens": 1024, "messages": [{"role": "user", "content": "hi"}],
        "tools": [{"type": "web_search_20250305", "name": "web_search", "max_uses": 5}]}}]}),
    "gemini-batch-inline": ("/v1beta/models/gemini-2.5-pro:batchGenerateContent", {"batch": {
        "display_name": "b", "input_config": {"requests": {"requests": [{"request": {
            "contents": [{"parts": [{"text": "hi"}]}], "tools": [{"googleSearch": {}}]},
            "metadata": {"key": "1"}}]}}}}),
}


@pytest.mark.parametrize("name", list(BATCHES))
def test_hosted_tools_nested_in_a_batch_request_are_stripped(tmp_path, monkeypatch, name):
    path, body = BATCHES[name]
    refused, flow = run(tmp_path, monkeypatch, body, path=path)
    assert refused or _hosted_anywhere(json.loads(flow.request.content)) == [], flow.request.content


# --- R15f-4 --------------------------------------------------------------------------------------------------------

FIELDS = ("model", "messages", "tools", "type", "function", "name", "web_search_options", "mcp_servers")


def go_view(raw: bytes):
    """What Go's encoding/json puts in `struct{Tools []Tool `json:"tools"`; ...}`: keys matched to the struct's
    field names case-insensitively (strings.EqualFold-like folding: `ſ`→s, `K`→k), the last match winning."""
    def pairs(items):
        out = {}
        for key, value in items:
            field = next((f for f in FIELDS if key.casefold() == f), key)
            out[field] = value
        return out
    return json.loads(raw, object_pairs_hook=pairs)


@pytest.mark.parametrize("body", [
    '{"model": "m", "Tools": [{"type": "web_search"}]}',
    '{"model": "m", "tools": [{"type": "function"}], "TOOLS": [{"type": "web_search"}]}',
    '{"model": "m", "tool\\u017f": [{"type": "web_search"}]}',
    '{"model": "m", "tools": [{"TYPE": "web_search"}, {"type": "function"}]}',
    '{"model": "m", "Web_Search_Options": {"search_context_size": "high"}}',
    '{"model": "m", "MCP_Servers": [{"type": "url", "url": "https://fetch.example/sse", "name": "f"}]}',
], ids=["Tools", "TOOLS-after-tools", "long-s", "TYPE", "Web_Search_Options", "MCP_Servers"])
def test_a_case_insensitive_parser_sees_no_hosted_tools(tmp_path, monkeypatch, body):
    refused, flow = run(tmp_path, monkeypatch, body)
    if not refused:
        seen = go_view(flow.request.content)
        assert addon.strip_hosted_tools(go_view(flow.request.content)) == [], seen


# --- R15f-5 --------------------------------------------------------------------------------------------------------

def _utf7_smuggle(payload: str) -> str:
    import base64

    return "+" + base64.b64encode(payload.encode("utf-16-be")).decode().rstrip("=") + "-"


def test_a_charset_the_proxy_did_not_read_with_is_not_forwarded(tmp_path, monkeypatch):
    hidden = _utf7_smuggle('", "tools": [{"type": "web_search"}], "z": "')
    body = '{"model": "m", "messages": [{"role": "user", "content": "hi"}], "note": "' + hidden + '"}'
    assert addon.strip_hosted_tools(json.loads(body)) == []  # to Python: one harmless string
    refused, flow = run(tmp_path, monkeypatch, body,
                        headers={"content-type": "application/json; charset=utf-7"})
    if not refused:
        ctype = flow.request.headers.get("content-type", "")
        charset = ctype.partition("charset=")[2].strip() or "utf-8"
        seen = json.loads(flow.request.content.decode(charset))  # as body-parser + iconv-lite read it
        assert addon.strip_hosted_tools(dict(seen)) == [], seen


def test_control_a_utf8_charset_still_passes(tmp_path, monkeypatch):
    body = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}
    refused, flow = run(tmp_path, monkeypatch, body, headers={"content-type": "application/json; charset=utf-8"})
    assert not refused and json.loads(flow.request.content) == body


# --- R15f-6 --------------------------------------------------------------------------------------------------------

def test_a_websocket_upgrade_to_the_model_is_refused_or_inspected(tmp_path, monkeypatch):
    refused, flow = run(tmp_path, monkeypatch, b"", method="GET", path="/v1/realtime?model=gpt-realtime",
                        headers={"upgrade": "websocket", "connection": "Upgrade",
                                 "sec-websocket-key": "dGhlIHNhbXBsZSBub25jZQ==", "sec-websocket-version": "13"})
    assert refused or hasattr(addon.Egress, "websocket_message"), \
        "the WebSocket to the model passes and none of its messages is read by closed book"


# --- R15f-7 --------------------------------------------------------------------------------------------------------

def test_the_forwarded_host_header_is_the_allowed_origin(tmp_path, monkeypatch):
    refused, flow = run(tmp_path, monkeypatch, b"", method="GET", path="/admin",
                        headers={"host": "grafana.internal"})
    assert refused or flow.request.headers.get("host") in ("10.0.0.5:30000",), flow.request.headers


class TwoHosts(dict):
    """mitmproxy's Headers as the addon reads them: get() gives the first of repeated fields, get_all() all."""

    def get_all(self, name):
        return ["10.0.0.5:30000", "grafana.internal"] if name == "host" else [v for k, v in self.items() if k == name]


def test_a_second_host_header_is_refused(tmp_path, monkeypatch):
    """R15f-7 with two Host fields (checked with the real image after the first fix: mitmproxy forwarded both,
    and a server or reverse proxy that takes the last one routes to the other virtual host)."""
    refused = []
    monkeypatch.setattr(addon.Egress, "refuse", staticmethod(lambda flow, what: refused.append(what)))
    e = addon.Egress([MODEL], True, tmp_path)
    flow = SimpleNamespace(
        request=SimpleNamespace(method="GET", scheme="http", host="10.0.0.5", port=30000, content=b"",
                                url=f"{MODEL}/admin", headers=TwoHosts(host="10.0.0.5:30000")),
        client_conn=SimpleNamespace(peername=("10.1.1.2", 5555)), response=None)
    e.request(flow)
    assert refused


def test_control_a_matching_host_header_passes(tmp_path, monkeypatch):
    refused, flow = run(tmp_path, monkeypatch, b"", method="GET", path="/v1/models",
                        headers={"host": "10.0.0.5:30000"})
    assert not refused


@pytest.mark.parametrize("method, path", [
    ("POST", "/update_weights_from_disk"), ("POST", "/release_memory_occupation"), ("POST", "/flush_cache"),
    ("GET", "/flush_cache"), ("POST", "/abort_request"), ("GET", "/get_server_info"), ("POST", "/v1/../flush_cache"),
    ("POST", "/v1/chat%2Fcompletions"), ("POST", "//flush_cache"), ("PUT", "/v1/chat/completions"),
    ("DELETE", "/v1/models/m"), ("POST", "/flush_cache?then=/v1/chat/completions"),
])
def test_a_shared_model_servers_admin_endpoints_are_refused(tmp_path, monkeypatch, method, path):
    """Red team 15f's lead: the allow list named an origin, any path. The shipped mini-swe-agent config points at
    an SGLang server every trial shares, whose admin endpoints (update or release the weights, flush the cache,
    abort requests) answer without a key unless one is set: one agent could change or stall the model of every
    other trial. Only a model API's own calls pass now."""
    refused, _ = run(tmp_path, monkeypatch, b"{}" if method == "POST" else b"", method=method, path=path)
    assert refused, (method, path)


@pytest.mark.parametrize("method, path", [
    ("POST", "/v1/chat/completions"), ("POST", "/chat/completions"), ("POST", "/openai/v1/chat/completions"),
    ("POST", "/v1/completions"), ("POST", "/v1/messages"), ("POST", "/v1/responses"), ("POST", "/generate"),
    ("POST", "/v1beta/models/gemini-2.5-pro:generateContent"), ("GET", "/v1/models"), ("GET", "/v1/models/m-1"),
])
def test_control_a_model_apis_own_calls_pass(tmp_path, monkeypatch, method, path):
    refused, _ = run(tmp_path, monkeypatch, b"{}" if method == "POST" else b"", method=method, path=path)
    assert not refused, (method, path)
