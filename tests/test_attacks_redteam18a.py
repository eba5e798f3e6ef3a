"""Red team 18a: closed-book model-only egress, second round (`images/proxy/egress_addon.py`, the request side).

Each attack is a test that FAILS while the attack wins and passes once defended; controls keep honest clients'
requests passing. All run on the host against the addon's request hook (`run` from test_attacks_redteam15f).

- R18a-1: objects stored at the provider. A request may name, instead of carrying, what the model reads: the
  Responses API's `previous_response_id` and `conversation` (a stored history), a stored `prompt` object (`{"id":
  "pmpt_..."}`: a prompt made in a dashboard, with its own model, tools and messages; `prompt` counted as content,
  so nothing in it was read), an `item_reference` input item, a `file_id` source (OpenAI's input_file and
  input_image, chat's file part, Anthropic's `{"type": "file"}` source), Anthropic's `container` and Gemini's
  `cachedContent`. Whatever another request stored there (an open-book trial's searched pages, a file uploaded with
  the same key, a dashboard prompt with web search on) reached the closed-book agent. Defence: a reference to a
  stored object is refused, wherever it stands outside `tools`.
- R18a-2: an honest client refused (false positive). The query allow-list (R17a-2) refused an SDK's model listing
  with pagination: Anthropic's `GET /v1/models?limit=20&after_id=...`, Gemini's `GET /v1beta/models?pageSize=50`.
  Defence: a GET of the model listing may also carry the listing's pagination parameters (plain tokens).
- R18a-3: HTTP trailers (defence in depth). The header allow-list (R17a-1) read the header section only; the addon
  left `request.trailers` (fields after a chunked body) as they came. Through the proxy image's mitmproxy 11.0.2 an
  HTTP/1 request with trailers stalls and is never forwarded (tried: no audit line, nothing reaches the server), so
  no win was shown end to end; mitmproxy forwards HTTP/2 trailers, so a later mitmproxy or an h2 front would pass
  them. Defence: closed book removes a request's trailers (no model client sends any) and names them in `stripped`.
- R18a-4: tensors the model server unpickles. vLLM's `prompt_embeds` (completions) and `image_embeds` /
  `audio_embeds` content parts are base64 of a `torch.save` file, read with `torch.load` on the server every trial
  shares (GHSA-mrw7-hf4f-83pf: a crafted sparse tensor writes out of bounds, before vLLM 0.11.1). Like SGLang's
  pickled `custom_logit_processor`, the agent's bytes were loaded as objects on the shared server. Defence: these
  fields are refused at any depth outside `tools` (content included).
- R18a-5: a host or headers in the body. R16d refused LiteLLM's `api_base`/`base_url` by name; a gateway takes other
  per-request endpoints (LiteLLM's `aws_bedrock_runtime_endpoint`, ...) and passes `extra_headers`/`extra_query` on
  to the upstream request: a host of the agent's choosing, and the headers and query parameters R17a-1/R17a-2
  remove. Defence: a URL-valued field outside the conversation and `tools` is refused whatever its name (an
  allow-list of none), and so are `extra_headers`, `headers` and `extra_query`.
- R18a-6: a '#' in the request target. Every check read `urlsplit(url)`, which drops the "fragment"; a request
  target has none (RFC 9112), and a server taking it whole (Go's ParseRequestURI) reads `?model=...` after the '#'
  as the query and the dot segments as the path. Defence: a target holding '#' is no model call.
- R18a-7: LiteLLM's other fallbacks. Only a key spelled `fallbacks` (or `models`) was read for model names; LiteLLM's
  router also takes `context_window_fallbacks` and `content_policy_fallbacks` from the request (and litellm's
  `context_window_fallback_dict`): a prompt past the pinned model's window goes to an unpinned one. Defence: any
  field whose name holds "fallback" names models (each string in it, and its mappings' keys).
"""

from __future__ import annotations

import json
import shlex
from types import SimpleNamespace

import pytest
from test_attacks_redteam15f import MODEL, addon, run

PINNED = ["default"]
CHAT = {"model": "default", "messages": [{"role": "user", "content": "hi"}]}
RESPONSES = {"model": "default", "input": "hi"}


def _log(tmp_path) -> list[dict]:
    return [json.loads(line) for line in (tmp_path / "audit.jsonl").read_text().splitlines()]


# --- R18a-1 --------------------------------------------------------------------------------------------------------

def _user(part: dict) -> list[dict]:
    return [{"role": "user", "content": [part]}]


@pytest.mark.parametrize("body, path", [
    ({**RESPONSES, "previous_response_id": "resp_68ab"}, "/v1/responses"),
    ({**RESPONSES, "conversation": "conv_68ab"}, "/v1/responses"),
    ({**RESPONSES, "conversation": {"id": "conv_68ab"}}, "/v1/responses"),
    ({"model": "default", "prompt": {"id": "pmpt_68ab", "version": "2", "variables": {"pr": "1234"}}},
     "/v1/responses"),
    ({"model": "default", "input": [{"type": "item_reference", "id": "msg_68ab"}]}, "/v1/responses"),
    ({"model": "default", "input": _user({"type": "input_file", "file_id": "file-68ab"})}, "/v1/responses"),
    ({"model": "default", "input": _user({"type": "input_image", "file_id": "file-68ab"})}, "/v1/responses"),
    ({"model": "default", "messages": _user({"type": "file", "file": {"file_id": "file-68ab"}})},
     "/v1/chat/completions"),
    ({"model": "default", "max_tokens": 64,
      "messages": _user({"type": "document", "source": {"type": "file", "file_id": "file_011C"}})}, "/v1/messages"),
    ({"model": "default", "max_tokens": 64, "container": "container_011C", "messages": CHAT["messages"]},
     "/v1/messages"),
    ({"contents": [{"role": "user", "parts": [{"text": "hi"}]}], "cachedContent": "cachedContents/68ab"},
     "/v1beta/models/default:generateContent"),
    ({"contents": [{"role": "user", "parts": [{"text": "hi"}]}], "cached_content": "cachedContents/68ab"},
     "/v1beta/models/default:generateContent"),
    ([{**RESPONSES, "Previous_Response_ID": "resp_68ab"}], "/v1/responses"),  # a batch; a Go reader folds case
    # a request dressed as a tool call, whose `input` the check skips in a conversation's tool calls
    ({"model": "default", "type": "tool_use", "name": "x", "input": [{"type": "item_reference", "id": "msg_68ab"}]},
     "/v1/responses"),
    ({"model": "default", "name": "x", "args": {"x": 1}, "input": _user({"type": "input_file", "file_id": "f"})},
     "/v1/responses"),
    # SGLang's sessions: a request continues a session opened on the shared server (another trial's context)
    ({"text": "go on", "session_params": {"id": "9f2c", "rid": "r1", "offset": -1}}, "/generate"),
], ids=["previous_response_id", "conversation", "conversation-object", "stored-prompt", "item_reference",
        "input_file-file_id", "input_image-file_id", "chat-file-part", "anthropic-file-source", "anthropic-container",
        "gemini-cachedContent", "gemini-cached_content", "batch-folded", "request-as-tool-use",
        "request-with-args", "sglang-session"])
def test_r18a_1_objects_stored_at_the_provider_are_refused(tmp_path, monkeypatch, body, path):
    """Attack: a pinned-model request that names an object stored at the provider instead of carrying it (a stored
    response or conversation, a dashboard prompt, a file, a cache, a container).
    Won: passed; the provider reads into the closed-book conversation what another request stored (an open-book
    trial's search results, a file uploaded with the same key, a prompt whose stored tools search the web).
    Defence: a reference to a stored object is refused at any depth outside `tools`."""
    refused, _ = run(tmp_path, monkeypatch, json.dumps(body), path=path, models=PINNED)
    assert refused, f"{json.dumps(body)[:120]} passed"


@pytest.mark.parametrize("body, path", [
    ({"model": "default", "prompt": "def fib(n):", "max_tokens": 16}, "/v1/completions"),  # a completion's prompt
    ({"model": "default", "prompt": ["a", "b"]}, "/v1/completions"),
    ({"model": "default", "max_tokens": 64, "messages": [
        {"role": "user", "content": "read it"},
        {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "read",
                                           "input": {"file_id": "src/a.py", "conversation": "x"}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "ok"}]}]},
     "/v1/messages"),  # the agent's own tool, whose arguments name a file_id
    ({"contents": [{"role": "model", "parts": [{"functionCall": {"name": "read", "args": {"file_id": "a.py"}}}]}]},
     "/v1beta/models/default:generateContent"),
    ({"model": "default", "input": "hi", "store": False,
      "tools": [{"type": "function", "name": "read", "parameters": {"type": "object", "properties": {
          "file_id": {"type": "string"}, "conversation": {"type": "string"}}}}]}, "/v1/responses"),
    ({"model": "default", "messages": [{"role": "user", "content": "what is a file_id and a previous_response_id?"}]},
     "/v1/chat/completions"),
], ids=["completion-prompt", "completion-prompt-list", "anthropic-tool-use-args", "gemini-function-args",
        "tool-schema", "words-in-text"])
def test_r18a_1_control_prompts_and_the_agents_own_tool_arguments_pass(tmp_path, monkeypatch, body, path):
    """Control: a completion's `prompt` (a string or a list), and the agent's own tools' schemas and call arguments
    (which may name a `file_id`), are no stored objects."""
    refused, _ = run(tmp_path, monkeypatch, body, path=path, models=PINNED)
    assert not refused, _log(tmp_path)[-1]


# --- R18a-2 --------------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("path", [
    "/v1/models?limit=20",  # the Anthropic SDK's models.list(limit=20)
    "/v1/models?limit=20&after_id=claude-opus-4-1-20250805",  # its next page
    "/v1/models?before_id=claude-3-haiku-20240307",
    "/v1beta/models?pageSize=50",  # Gemini's models.list
    "/v1beta/models?pageSize=50&pageToken=Ch1tb2RlbHM",
], ids=["anthropic-limit", "anthropic-after", "anthropic-before", "gemini-pagesize", "gemini-pagetoken"])
def test_r18a_2_control_a_paginated_model_listing_passes(tmp_path, monkeypatch, path):
    """Honest client refused before the fix: an SDK's paginated GET of the model listing.
    Defence: a GET of the listing may carry the listing's pagination parameters (plain tokens)."""
    refused, _ = run(tmp_path, monkeypatch, b"", method="GET", path=path, models=PINNED)
    assert not refused, _log(tmp_path)[-1]


@pytest.mark.parametrize("method, path", [
    ("POST", "/v1/chat/completions?limit=20"),  # pagination is a listing's only
    ("GET", "/v1/models?limit=20&model=sonar"),
    ("GET", "/v1/models?after_id=http%3A%2F%2Fevil.example"),  # a value that is more than a token
    ("GET", "/v1/models/default?pageSize=1&model=x"),
], ids=["post-limit", "beside-model", "not-a-token", "one-model"])
def test_r18a_2_pagination_routes_nothing(tmp_path, monkeypatch, method, path):
    """Pagination is allowed on a listing's GET only, as plain tokens, never beside another parameter."""
    body = CHAT if method == "POST" else b""
    refused, _ = run(tmp_path, monkeypatch, body, method=method, path=path, models=PINNED)
    assert refused


# --- R18a-3 --------------------------------------------------------------------------------------------------------

def _run_with_trailers(tmp_path, monkeypatch, trailers):
    refused = []
    monkeypatch.setattr(addon.Egress, "refuse", staticmethod(lambda flow, what: refused.append(what)))
    e = addon.Egress([MODEL], True, tmp_path, PINNED)
    flow = SimpleNamespace(
        request=SimpleNamespace(method="POST", scheme="http", host="10.0.0.5", port=30000,
                                content=json.dumps(CHAT).encode(), url=f"{MODEL}/v1/chat/completions",
                                headers={"content-type": "application/json", "transfer-encoding": "chunked",
                                         "te": "trailers"},
                                trailers=trailers),
        client_conn=SimpleNamespace(peername=("10.1.1.2", 5555)), response=None)
    e.request(flow)
    return bool(refused), flow


@pytest.mark.parametrize("name, value", [
    ("x-portkey-config", json.dumps({"provider": "perplexity-ai", "override_params": {"model": "sonar-pro"}})),
    ("x-litellm-tags", "web"),
    ("content-type", "application/x-www-form-urlencoded"),  # an allowed name is no allowed trailer either
], ids=["portkey-config", "litellm-tags", "allowed-name"])
def test_r18a_3_trailers_never_reach_the_server(tmp_path, monkeypatch, name, value):
    """Attack: a chunked chat call whose trailer section holds a gateway's routing header.
    Won: the header allow-list read only the header section; mitmproxy forwards the trailers as written.
    Defence: closed book removes a request's trailers and names them in the audit line."""
    refused, flow = _run_with_trailers(tmp_path, monkeypatch, {name: value})
    if not refused:
        assert not flow.request.trailers, f"trailer {name} was forwarded"
        assert f"trailer {name}" in _log(tmp_path)[-1].get("stripped", [])


def test_r18a_3_control_no_trailers_passes_untouched(tmp_path, monkeypatch):
    refused, flow = _run_with_trailers(tmp_path, monkeypatch, None)
    assert not refused and flow.request.trailers is None
    assert "stripped" not in _log(tmp_path)[-1]


# --- R18a-4 --------------------------------------------------------------------------------------------------------

TENSOR = "UEsDBAAACAgAAAAAAAAAAAAAAAAAAAAAAAAQABIAYXJjaGl2ZS9kYXRhLnBrbA=="  # a torch.save zip's first bytes


@pytest.mark.parametrize("body, path", [
    ({"model": "default", "prompt_embeds": TENSOR, "max_tokens": 8}, "/v1/completions"),
    ({"model": "default", "prompt": "", "promptEmbeds": [TENSOR]}, "/v1/completions"),
    ({"model": "default", "messages": _user({"type": "image_embeds", "image_embeds": TENSOR})},
     "/v1/chat/completions"),
    ({"model": "default", "messages": _user({"type": "image_embeds", "image_embeds": {"image_embeds": TENSOR,
                                                                                       "image_grid_thw": TENSOR}})},
     "/v1/chat/completions"),
    ({"model": "default", "messages": _user({"type": "audio_embeds", "audio_embeds": TENSOR})},
     "/v1/chat/completions"),
    ({"model": "default", "messages": _user({"type": "Image_Embeds", "data": TENSOR})}, "/v1/chat/completions"),
    ([{"model": "default", "prompt": "", "extra_body": {"prompt_embeds": TENSOR}}], "/v1/completions"),
], ids=["prompt_embeds", "promptEmbeds-list", "image_embeds", "image_embeds-dict", "audio_embeds", "typed-part",
        "nested-batch"])
def test_r18a_4_tensors_the_server_unpickles_are_refused(tmp_path, monkeypatch, body, path):
    """Attack: vLLM's `prompt_embeds` or an `image_embeds` content part: base64 of a torch.save file.
    Won: passed; the shared model server torch.loads the agent's bytes (a crafted sparse tensor corrupts its memory
    before vLLM 0.11.1), as SGLang's pickled custom_logit_processor would run the agent's code there.
    Defence: fields the server loads as serialized tensors are refused at any depth outside `tools`."""
    refused, _ = run(tmp_path, monkeypatch, json.dumps(body), path=path, models=PINNED)
    assert refused


def test_r18a_4_control_inline_media_and_a_tool_named_embeds_pass(tmp_path, monkeypatch):
    """Control: an inline picture, and the agent's own tool whose schema names `image_embeds`, pass."""
    png = "data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg=="
    body = {"model": "default", "messages": _user({"type": "image_url", "image_url": {"url": png}}),
            "tools": [{"type": "function", "function": {"name": "embed", "parameters": {
                "type": "object", "properties": {"image_embeds": {"type": "string"}}}}}]}
    refused, _ = run(tmp_path, monkeypatch, body, models=PINNED)
    assert not refused, _log(tmp_path)[-1]


# --- R18a-5 --------------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("extra", [
    {"aws_bedrock_runtime_endpoint": "https://evil.example"},  # LiteLLM: a Bedrock deployment's host, per request
    {"azure_endpoint": "https://evil.example/"},
    {"api_host": "//evil.example"},  # scheme-relative
    {"metadata": {"callback": "https:evil.example/x"}},  # a WHATWG parser reads https:host as https://host
    {"litellm_params": {"endpoint": " http://10.0.0.9:8080"}},
    {"fallback_endpoints": ["HTTP://evil.example"]},
    {"api_host": "\x01https://evil.example"},  # a WHATWG parser strips leading C0 controls, which \s is not
    {"api_host": "\\\\evil.example\\v1"},  # backslashes: a WHATWG parser reads them as slashes
    {"extra_headers": {"x-portkey-config": json.dumps({"provider": "perplexity-ai"})}},  # headers by the body
    {"Extra-Headers": {"Helicone-Target-URL": "https://api.perplexity.ai"}},
    {"headers": {"X-Original-URL": "/update_weights_from_disk"}},
    {"extra_query": {"tags": "web"}},  # a query string by the body
], ids=["bedrock-endpoint", "azure-endpoint", "scheme-relative", "whatwg-https", "nested-space", "in-a-list",
        "c0-control", "backslashes", "extra_headers",
        "folded-extra-headers", "headers", "extra_query"])
def test_r18a_5_a_host_or_headers_in_the_body_route_nothing(tmp_path, monkeypatch, extra):
    """Attack: a pinned chat call whose body names a host (LiteLLM's per-request `aws_bedrock_runtime_endpoint`,
    any endpoint a gateway takes beside the api_base R16d refused) or carries headers/query parameters for the upstream
    request (LiteLLM passes `extra_headers` on to the provider).
    Won: passed; the gateway sends the request to the agent's host (which answers with what it fetched), or sends the
    routing headers and query parameters the header and query allow-lists (R17a-1, R17a-2) remove.
    Defence: a URL-valued field outside the conversation and `tools` is refused, whatever its name, and so are the
    `extra_headers`, `headers` and `extra_query` fields."""
    refused, _ = run(tmp_path, monkeypatch, {**CHAT, **extra}, models=PINNED)
    assert refused


def test_r18a_5_control_urls_in_the_conversation_and_tools_pass(tmp_path, monkeypatch):
    """Control: URLs the agent writes or reads (a message, a tool result, a tool's schema default) are words."""
    body = {"model": "default", "messages": [
        {"role": "user", "content": "Fix https://github.com/sgl-project/sglang/issues/1"},
        {"role": "assistant", "tool_calls": [{"id": "c", "type": "function", "function": {
            "name": "bash", "arguments": json.dumps({"cmd": "curl http://localhost:30000/health"})}}]},
        {"role": "tool", "tool_call_id": "c", "content": "see http://localhost:30000/docs"}],
        "tools": [{"type": "function", "function": {"name": "fetch", "parameters": {
            "type": "object", "properties": {"url": {"type": "string", "default": "http://localhost:8000"}}}}}],
        "metadata": {"user_id": "u-1"}}
    refused, _ = run(tmp_path, monkeypatch, body, models=PINNED)
    assert not refused, _log(tmp_path)[-1]


# --- R18a-6 --------------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("path", [
    "/v1/chat/completions#?model=sonar-pro",  # Go's ParseRequestURI: path ".../completions#", query model=sonar-pro
    "/v1/chat/completions#/../../flush_cache",  # the dot segments model_call refuses, behind a '#'
    "/v1beta/models/default:generateContent#/../../evil:generateContent",
    "/openai/deployments/default/chat/completions#/../../sonar-pro/chat/completions",
], ids=["query-after-hash", "dot-segments", "gemini-model", "azure-deployment"])
def test_r18a_6_a_fragment_hides_nothing_from_the_checks(tmp_path, monkeypatch, path):
    """Attack: a request target with a '#': `POST /v1/chat/completions#?model=sonar-pro` (no HTTP client sends a
    fragment; a raw socket does, and mitmproxy forwards the target as it came).
    Won: passed; model_call, foreign_query and path_models read `urlsplit(url)`, which drops everything from the '#',
    so the query allow-list saw no query and the dot-segment check no dot segment, while a server that takes the
    target as RFC 9112 says (no fragment in it: Go's ParseRequestURI) reads `model=sonar-pro` as the query.
    Defence: a target holding a '#' is no model call: the checks read the whole target the server gets."""
    refused, _ = run(tmp_path, monkeypatch, CHAT if ":" not in path else {"contents": []}, path=path, models=PINNED)
    assert refused


# --- the real proxy (mitmproxy 11 in the proxy image) ----------------------------------------------------------------

SERVER = """
import socket, threading
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1); s.bind(("127.0.0.1", 30000)); s.listen(8)
def handle(c):
    head = b""
    while b"\\r\\n\\r\\n" not in head:
        head += c.recv(65536)
    print("SERVER", head.split(b"\\r\\n", 1)[0].decode(), flush=True)
    out = b'{"usage": {"prompt_tokens": 1, "completion_tokens": 1}, "data": []}'
    c.sendall(b"HTTP/1.1 200 OK\\r\\ncontent-type: application/json\\r\\nconnection: close\\r\\ncontent-length: %d\\r\\n\\r\\n"
              % len(out) + out)
    c.close()
while True:
    threading.Thread(target=handle, args=(s.accept()[0],)).start()
"""
RAW_CLIENT = """
import json, socket
def send(name, method, target, body=b""):
    c = socket.create_connection(("127.0.0.1", 3128), timeout=20)
    c.sendall(b"%s http://127.0.0.1:30000%s HTTP/1.1\\r\\nhost: 127.0.0.1:30000\\r\\ncontent-type: application/json\\r\\n"
              b"content-length: %d\\r\\nconnection: close\\r\\n\\r\\n" % (method, target, len(body)) + body)
    out = b""
    while chunk := c.recv(65536):
        out += chunk
    print(name, out.split(b" ", 2)[1].decode(), flush=True)
chat = json.dumps({"model": "default", "messages": [{"role": "user", "content": "hi"}]}).encode()
send("HASH", b"POST", b"/v1/chat/completions#?model=sonar-pro", chat)
send("STORED", b"POST", b"/v1/responses", json.dumps({"model": "default", "input": "hi",
                                                      "previous_response_id": "resp_1"}).encode())
send("LISTING", b"GET", b"/v1/models?limit=20&after_id=claude-x")
"""


@pytest.mark.docker
def test_r18a_the_real_proxy_refuses_a_fragment_and_a_stored_object_and_passes_a_listing(docker_client):
    """R18a-6, -1 and -2 through mitmproxy itself. Against a8da3b3's addon, `POST /v1/chat/completions#?model=sonar-pro`
    reached the server as that very target (logged allowed), `previous_response_id` passed, and the paginated
    listing was refused."""
    from sweserve.environment.images import ImageBuilder, read_ca_bundle

    image = ImageBuilder(docker_client, read_ca_bundle(None)).proxy()
    script = "\n".join([
        "set -u; cd /tmp",
        f"python3 -c {shlex.quote(SERVER)} &",
        "SWESERVE_EGRESS_ALLOW='[\"http://127.0.0.1:30000\"]' SWESERVE_EGRESS_CLOSED_BOOK=1 "
        "SWESERVE_EGRESS_MODELS='[\"default\"]' SWESERVE_EGRESS_DIR=/tmp/eg /opt/mitmproxy/bin/mitmdump -q "
        "--listen-host 127.0.0.1 --listen-port 3128 --set confdir=/tmp/mitmproxy --set onboarding=false "
        "-s /opt/sweserve/egress_addon.py >/tmp/mitm.log 2>&1 &",
        "for i in $(seq 300); do test -f /tmp/eg/ready && break; sleep 0.1; done",
        f"python3 -c {shlex.quote(RAW_CLIENT)}",
    ])
    out = docker_client.containers.run(image, ["-c", script], entrypoint="bash", remove=True, network_mode="none",
                                       stdout=True, stderr=True).decode()
    lines = dict(line.split(" ", 1) for line in out.splitlines() if " " in line and not line.startswith("SERVER"))
    assert lines.get("HASH") == "403" and lines.get("STORED") == "403", out
    assert lines.get("LISTING") == "200" and "SERVER GET /v1/models?limit=20&after_id=claude-x" in out, out
    assert "#" not in "".join(line for line in out.splitlines() if line.startswith("SERVER")), out


@pytest.mark.parametrize("extra", [
    {"guided_json": {"$schema": "http://json-schema.org/draft-07/schema#", "type": "object"}},  # vLLM's
    {"structured_outputs": {"json": {"$id": "https://example.com/patch.schema.json", "type": "object"}}},
    {"response_format": {"type": "json_schema", "json_schema": {"name": "p", "schema": {
        "type": "object", "properties": {"url": {"type": "string", "default": "https://example.com"}}}}}},
], ids=["vllm-guided_json", "vllm-structured_outputs", "openai-response_format"])
def test_r18a_5_control_an_answer_schema_with_urls_passes(tmp_path, monkeypatch, extra):
    """Control: an answer's JSON schema is what the request says to the model: its `$schema`, `$id` and defaults
    are URLs no server connects to."""
    refused, _ = run(tmp_path, monkeypatch, {**CHAT, **extra}, models=PINNED)
    assert not refused, _log(tmp_path)[-1]


# --- R18a-7 --------------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("extra", [
    {"context_window_fallbacks": [{"default": ["sonar-pro"]}]},  # LiteLLM's router pops these from the request
    {"content_policy_fallbacks": [{"default": ["sonar-pro"]}]},
    {"context_window_fallback_dict": {"default": "sonar-pro"}},  # litellm.completion's
    {"metadata": {"Context_Window_Fallbacks": [{"default": ["sonar-pro"]}]}},
    {"fallbacks": [{"default": ["sonar-pro"]}]},  # held before: the plain name
], ids=["context-window", "content-policy", "fallback-dict", "nested-folded", "plain-fallbacks"])
def test_r18a_7_every_fallback_list_names_models(tmp_path, monkeypatch, extra):
    """Attack: the pinned model, with LiteLLM's per-request `context_window_fallbacks` (or `content_policy_fallbacks`,
    `context_window_fallback_dict`) naming sonar-pro, and a prompt longer than the pinned model's window.
    Won: passed; only a key spelled `fallbacks` (or `models`) was read for model names, so LiteLLM's router falls back
    to sonar-pro, which searches the web by its name.
    Defence: any field whose name holds "fallback" names models: every string in it (and its mappings' keys)."""
    refused, _ = run(tmp_path, monkeypatch, {**CHAT, **extra}, models=PINNED)
    assert refused


def test_r18a_7_control_fallbacks_to_pinned_models_pass(tmp_path, monkeypatch):
    body = {**CHAT, "context_window_fallbacks": [{"default": ["default-long"]}]}
    refused, _ = run(tmp_path, monkeypatch, body, models=["default", "default-long"])
    assert not refused, _log(tmp_path)[-1]


@pytest.mark.parametrize("stop", [["//"], ["\n//", "\n#"], "//"], ids=["list", "comment-lines", "string"])
def test_r18a_5_control_stop_sequences_are_text(stop):
    """Control: a code agent's stop sequences (`"\\n//"`, a comment's start) are text the server matches in its
    output, never a place it connects to; a stop list that holds more than strings is read as any other field."""
    assert addon.routing_fields({"model": "default", "stop": stop, "stop_sequences": stop}) == []
    assert addon.routing_fields({"model": "default", "stop": [{"u": "https://x.example"}]}) == ["u"]
