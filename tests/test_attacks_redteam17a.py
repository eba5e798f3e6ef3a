"""Red team 17a: closed-book model-only egress (`images/proxy/egress_addon.py`, the request side).

Each attack is a test that FAILS while the attack wins and passes once defended; controls keep honest clients'
requests passing. All run on the host against the addon's request hook (`run` from test_attacks_redteam15f).

- R17a-1: a gateway's routing *headers*. The proxy read the body's routing fields (`api_base`, `preset`, ...) but
  forwarded every header as the agent wrote it: Portkey's `x-portkey-config` (a whole routing config: provider,
  override_params.model, a custom host), `x-portkey-provider`/`x-portkey-custom-host`, Helicone's
  `Helicone-Target-URL`, LiteLLM's `x-litellm-*` and a front's `X-Original-URL`/`X-Rewrite-URL` path rewrite.
  Defence: closed book forwards only the headers a model client sends (an allow-list); every other header is
  removed and named in the audit line's `stripped`.
- R17a-2: the query string. LiteLLM's proxy takes `model` as a query parameter over the body's (`model: Optional[str]
  = None` in its route: "for azure deployments"), and a gateway reading query parameters as request fields takes
  `api_base`, `plugins`, ... there too; the proxy read only the body and the path. Defence: closed book passes only
  the query parameters model clients send (`alt`, `key`, `api-version`, `beta`).
- R17a-3: a bare `image_data`/`audio_data`/`video_data` value that is a dot-less path. INLINE took any string of
  base64's alphabet, `/` included: `/srv/shots/pr1234png` is one. SGLang's `load_image` opens any value ending in
  `png`/`jpg`/... as a file before it tries base64, and its audio and video loaders open any string that is not a
  data: or http URL: a file on the model server's host read for the agent. Defence: a bare value must be base64
  that decodes to a picture, sound or video (its signature), or a plain short word (a `detail: "auto"`).
- R17a-4: fail open on a deep body. `online_model` recurses two Python frames a level (itself and its generator),
  so JSON nested ~500-950 deep, which `json.loads` and `strip_hosted_tools` read, raises RecursionError in
  `model_refused`, outside the hook's try. mitmproxy's `safecall` logs an addon's error and sends the request on:
  an unpinned model (or anything else the later checks refuse) reaches the server with no audit line and no meter
  count. Defence: a body nested deeper than MAX_DEPTH is refused, and the hook fails closed: any error in it
  refuses the request and logs why.
- R17a-5: Vertex AI's model routing. `generationConfig.routingConfig` picks the model that answers
  (`manualMode.modelName`, or `autoMode`: Vertex chooses one of its models), over the one in the path. The proxy
  read `generationConfig` as content (the answer's schema lives there) and `modelName` as no model at all: an
  unpinned model passed. Defence: only the answer's schema in `generationConfig` is content; `routingConfig` is a
  routing field (refused); a `modelName` key names a model like `model`.
- R17a-6: a model server's own routing fields. SGLang's requests (`/generate`, chat, completions) take
  `bootstrap_host`/`bootstrap_port` (PD disaggregation: the server connects to that host for the KV cache) and
  `lora_path` (a LoRA adapter: another model on the same server); vLLM's take `kv_transfer_params` with a
  `remote_host`. None was read: the shared server reached a host of the agent's choosing, or answered as an
  unpinned adapter. Defence: the disaggregation fields are routing fields (refused); `lora_path` names a model.
- R17a-7: a model named in an OpenAI-style path. Hugging Face's inference API and router route by
  `/models/NAME/v1/chat/completions` (`base_url=.../models/{model_id}/v1/`), over the body's `model`; the proxy read
  a path's model only in Gemini's `/models/NAME:generateContent` and Azure's deployments. Defence: whatever stands
  between `/models/` and a model endpoint is a model name, like a deployment's.
- R17a-8: OpenAI's hosted shell. `{"type": "shell"}` is a client tool (Codex runs it), so the proxy kept any
  `shell` tool whatever else it held; `{"type": "shell", "environment": {"type": "container_auto", "network_policy":
  {"type": "allowlist", "allowed_domains": ["github.com"]}}}` has OpenAI run the commands in its own container,
  which fetches the upstream PR. Defence: a client tool with an execution environment other than the local one
  (`environment`, `container`) is a hosted tool, stripped.
"""

from __future__ import annotations

import base64
import json
import shlex

import pytest
from test_attacks_redteam15f import run

PINNED = ["default"]
CHAT = {"model": "default", "messages": [{"role": "user", "content": "hi"}]}


def _log(tmp_path) -> list[dict]:
    return [json.loads(line) for line in (tmp_path / "audit.jsonl").read_text().splitlines()]


# --- R17a-1 --------------------------------------------------------------------------------------------------------

PORTKEY = json.dumps({"provider": "perplexity-ai", "override_params": {"model": "sonar-pro"},
                      "custom_host": "http://evil.example"})


@pytest.mark.parametrize("name, value", [
    ("x-portkey-config", PORTKEY),  # Portkey: the whole routing config rides in a header
    ("x-portkey-provider", "perplexity-ai"),
    ("x-portkey-custom-host", "https://r.jina.ai/https://github.com/sgl-project/sglang/pull/1234"),
    ("Helicone-Target-URL", "https://api.perplexity.ai"),  # Helicone's gateway sends the request there
    ("x-litellm-tags", "web"),  # LiteLLM's tag routing to another deployment
    ("X-Original-URL", "/update_weights_from_disk"),  # a front that rewrites the path by a header
    ("X-Rewrite-URL", "/flush_cache"),
    ("cf-aig-custom-cost", "{}"),  # Cloudflare's AI gateway: one of its many cf-aig-* knobs
], ids=["portkey-config", "portkey-provider", "portkey-custom-host", "helicone-target", "litellm-tags",
        "x-original-url", "x-rewrite-url", "cloudflare-aig"])
def test_r17a_1_gateway_routing_headers_never_reach_the_server(tmp_path, monkeypatch, name, value):
    """Attack: a gateway's routing header on an allowed chat call (pinned model in the body, no hosted tool).
    Won: forwarded as written; Portkey reads `x-portkey-config` over the body and asks Perplexity's sonar-pro (web
    search by name), a custom host gets the request, a front rewrites the path to an admin endpoint.
    Defence: closed book forwards only the headers model clients send; others are removed and logged."""
    headers = {"content-type": "application/json", name: value}
    refused, flow = run(tmp_path, monkeypatch, CHAT, headers=headers, models=PINNED)
    if not refused:
        sent = {key.lower() for key in flow.request.headers}
        assert name.lower() not in sent, f"{name} was forwarded to the model server"
        assert name.lower() in [s.lower() for s in _log(tmp_path)[-1].get("stripped", [])]


def test_r17a_1_control_an_sdks_headers_pass(tmp_path, monkeypatch):
    """Control: what the OpenAI, Anthropic and Gemini SDKs, Claude Code and Codex send is forwarded untouched."""
    headers = {"content-type": "application/json", "Authorization": "Bearer sk-x", "x-api-key": "k",
               "anthropic-version": "2023-06-01", "anthropic-beta": "interleaved-thinking-2025-05-14",
               "X-Stainless-Lang": "python", "X-Stainless-Retry-Count": "0", "User-Agent": "OpenAI/Python 1.99",
               "Accept": "application/json", "Accept-Encoding": "gzip", "x-app": "cli", "originator": "codex_cli_rs",
               "session_id": "s", "OpenAI-Beta": "responses=experimental", "x-goog-api-key": "g",
               "x-goog-api-client": "genai-py", "Idempotency-Key": "i"}
    refused, flow = run(tmp_path, monkeypatch, CHAT, headers=headers, models=PINNED)
    assert not refused and dict(flow.request.headers) == headers
    assert "stripped" not in _log(tmp_path)[-1]


# --- R17a-2 --------------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("query", [
    "model=sonar-pro",  # LiteLLM: the route's `model` query parameter wins over the body's
    "Model=gpt-4o-search-preview",
    "api_base=http%3A%2F%2Fevil.example",
    "plugins=web",
    "alt=sse&model=sonar",  # an honest parameter beside it
    "alt=sse;model=sonar",  # a server that splits on ';' as well
    "%6Dodel=sonar",  # percent-escaped name
    "key=AIza&key=x%26model%3Dsonar",  # a value that is more than a token
], ids=["model", "folded-model", "api_base", "plugins", "beside-alt", "semicolon", "escaped-name", "escaped-value"])
def test_r17a_2_the_query_string_routes_nothing(tmp_path, monkeypatch, query):
    """Attack: POST /v1/chat/completions?model=sonar-pro with the pinned model in the body.
    Won: passed (the proxy read only the body and the path); LiteLLM asks sonar-pro, which searches the web.
    Defence: closed book passes only the query parameters model clients send; anything else is refused."""
    refused, _ = run(tmp_path, monkeypatch, CHAT, path=f"/v1/chat/completions?{query}", models=PINNED)
    assert refused, f"?{query} passed"


@pytest.mark.parametrize("path", [
    "/v1beta/models/default:streamGenerateContent?alt=sse",  # Gemini's streaming
    "/v1beta/models/default:generateContent?key=AIza",  # Gemini's API key
    "/openai/deployments/default/chat/completions?api-version=2024-10-21",  # Azure
    "/v1/messages?beta=true",  # the Anthropic SDK's beta client
    "/v1/chat/completions",
], ids=["gemini-alt", "gemini-key", "azure-api-version", "anthropic-beta", "none"])
def test_r17a_2_control_a_clients_query_passes(tmp_path, monkeypatch, path):
    body = {"contents": []} if ":" in path else CHAT
    refused, _ = run(tmp_path, monkeypatch, body, path=path, models=PINNED)
    assert not refused


# --- R17a-3 --------------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("body, path", [
    ({"text": "<image> Transcribe.", "image_data": "/srv/shots/pr1234png"}, "/generate"),
    ({"text": "<image> Transcribe.", "image_data": ["/srv/shots/pr1234jpeg"]}, "/generate"),
    ({"text": "<image> Transcribe.", "image_data": "/srv/shots/prpng"}, "/generate"),  # 16 characters: base64's length
    ({"text": "<image> Transcribe.", "image_data": "//srv/shots/xpng"}, "/generate"),  # decodes to an MP3 frame sync
    ({"text": "Transcribe.", "audio_data": "/srv/recordings/standup"}, "/generate"),  # any string not data:/http
    ({"text": "Transcribe.", "video_data": "/srv/recordings/demo"}, "/generate"),
    ({"model": "default", "messages": [{"role": "user", "content": [
        {"type": "image_url", "image_url": {"url": "/srv/shots/pr1234png"}}]}]}, "/v1/chat/completions"),
], ids=["image-path", "image-path-list", "image-path-base64-length", "double-slash",
        "audio-path", "video-path", "chat-image-path"])
def test_r17a_3_a_bare_media_value_is_never_a_path(tmp_path, monkeypatch, body, path):
    """Attack: a dot-less absolute path as SGLang's `image_data` (ending in `png`) or `audio_data`/`video_data`.
    Won: passed as "bare base64" (`/` is in base64's alphabet); SGLang opens the file on the model server's host.
    Defence: a bare value must be base64 decoding to a picture, sound or video, or a short plain word."""
    refused, _ = run(tmp_path, monkeypatch, body, path=path, models=PINNED)
    assert refused


PNG = base64.b64encode(b"\x89PNG\r\n\x1a\n" + bytes(24)).decode()
JPEG = base64.b64encode(b"\xff\xd8\xff\xe0" + bytes(20)).decode()  # "/9j/...": base64 of a JPEG starts with "/"
WAV = base64.b64encode(b"RIFF\x00\x00\x00\x00WAVEfmt " + bytes(16)).decode()
MP4 = base64.b64encode(b"\x00\x00\x00\x18ftypmp42" + bytes(16)).decode()


@pytest.mark.parametrize("body, path", [
    ({"text": "<image> describe", "image_data": [PNG, JPEG, f"data:image/png;base64,{PNG}"]}, "/generate"),
    ({"text": "listen", "audio_data": WAV}, "/generate"),
    ({"text": "watch", "video_data": MP4}, "/generate"),
    ({"model": "default", "messages": [{"role": "user", "content": [
        {"type": "image_url", "image_url": {"url": f"data:image/jpeg;base64,{JPEG}", "detail": "auto"}}]}]},
     "/v1/chat/completions"),
    ({"text": "<image> describe", "image_data": [{"url": JPEG, "detail": "high"}]}, "/generate"),
], ids=["sglang-images", "sglang-audio", "sglang-video", "openai-detail", "sglang-image-object"])
def test_r17a_3_control_inline_media_passes(tmp_path, monkeypatch, body, path):
    refused, _ = run(tmp_path, monkeypatch, body, path=path, models=PINNED)
    assert not refused


# --- R17a-4 --------------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("depth", [300, 500, 600, 750, 900])
def test_r17a_4_a_deep_body_never_fails_open(tmp_path, monkeypatch, depth):
    """Attack: `{"model": "sonar", "metadata": [[[...]]]}`, ~600 levels deep, to a proxy pinning `default`.
    Won: the hook raised RecursionError in `online_model` (not caught); mitmproxy logs an addon error and forwards
    the request: sonar asked, nothing in the audit log, nothing metered.
    Defence: a body nested past MAX_DEPTH is refused; any error in the hook refuses the request."""
    body = '{"model": "sonar-pro", "metadata": %s, "messages": []}' % ("[" * depth + "]" * depth)
    try:
        refused, _ = run(tmp_path, monkeypatch, body, models=PINNED)
    except RecursionError:
        pytest.fail("the request hook raised: mitmproxy logs the error and sends the request on")
    assert refused
    assert _log(tmp_path)[-1]["allowed"] is False


def test_r17a_4_any_error_in_the_hook_refuses(tmp_path, monkeypatch):
    """The mechanism itself: whatever a check raises (here a later check's bug), the request is refused and logged,
    never left to mitmproxy, which sends a request on after an addon's error."""
    import test_attacks_redteam15f

    def broken(body):
        raise KeyError("a check's bug")

    monkeypatch.setattr(test_attacks_redteam15f.addon, "fetched_urls", broken)
    try:
        refused, _ = run(tmp_path, monkeypatch, CHAT, models=PINNED)
    except KeyError:
        pytest.fail("the request hook raised: mitmproxy logs the error and sends the request on")
    assert refused and _log(tmp_path)[-1]["allowed"] is False


def test_r17a_4_control_an_honest_deep_schema_passes(tmp_path, monkeypatch):
    """Control: a tool schema nested a few dozen levels (a recursive JSON schema spelled out) still passes."""
    schema: dict = {"type": "string"}
    for _ in range(30):
        schema = {"type": "object", "properties": {"child": schema}}
    body = {**CHAT, "tools": [{"type": "function", "function": {"name": "f", "parameters": schema}}]}
    refused, _ = run(tmp_path, monkeypatch, body, models=PINNED)
    assert not refused


# --- R17a-5 --------------------------------------------------------------------------------------------------------

GEMINI = "/v1beta/models/default:generateContent"


@pytest.mark.parametrize("body", [
    {"contents": [], "generationConfig": {"routingConfig": {"manualMode": {"modelName": "gemini-2.5-pro"}}}},
    {"contents": [], "generationConfig": {"routingConfig": {"autoMode": {"modelRoutingPreference": "PRIORITIZE_QUALITY"}}}},
    {"contents": [], "generation_config": {"routing_config": {"manual_mode": {"model_name": "gemini-2.5-pro"}}}},
], ids=["manual-mode", "auto-mode", "snake-case"])
def test_r17a_5_vertex_routing_never_picks_another_model(tmp_path, monkeypatch, body):
    """Attack: Gemini/Vertex `generateContent` on the pinned model's path with `generationConfig.routingConfig`.
    Won: passed; Vertex answers from `manualMode.modelName` (or a model its `autoMode` picks), not the pinned one.
    Defence: `routingConfig` is a routing field, `modelName` a model; only the answer's schema is content."""
    refused, _ = run(tmp_path, monkeypatch, body, path=GEMINI, models=PINNED)
    assert refused


def test_r17a_5_control_a_gemini_answer_schema_is_content(tmp_path, monkeypatch):
    """Control: a response schema with properties named `model`, `modelName`, `base_url` and ordinary settings."""
    props = {"model": {"type": "STRING"}, "modelName": {"type": "STRING"}, "base_url": {"type": "STRING"}}
    body = {"contents": [], "generationConfig": {
        "temperature": 0.2, "maxOutputTokens": 512, "thinkingConfig": {"thinkingBudget": 128},
        "responseMimeType": "application/json", "responseSchema": {"type": "OBJECT", "properties": props},
        "responseJsonSchema": {"type": "object", "properties": props}}}
    refused, _ = run(tmp_path, monkeypatch, body, path=GEMINI, models=PINNED)
    assert not refused


# --- R17a-6 --------------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("body, path", [
    ({"text": "hi", "bootstrap_host": "10.9.9.9", "bootstrap_port": 8998, "bootstrap_room": 7}, "/generate"),
    ({**CHAT, "bootstrap_host": ["evil.example"], "bootstrap_room": [7]}, "/v1/chat/completions"),
    ({**CHAT, "kv_transfer_params": {"do_remote_prefill": True, "remote_host": "10.9.9.9", "remote_port": 5600}},
     "/v1/chat/completions"),  # vLLM's disaggregated prefill (NIXL): the decode server pulls from remote_host
    ({"text": "hi", "lora_path": "sql-adapter"}, "/generate"),  # another adapter: another model
    ({**CHAT, "lora_path": "sql-adapter"}, "/v1/chat/completions"),
], ids=["sglang-bootstrap", "sglang-chat-bootstrap", "vllm-kv-transfer", "sglang-lora", "sglang-chat-lora"])
def test_r17a_6_the_servers_own_routing_fields_are_refused(tmp_path, monkeypatch, body, path):
    """Attack: SGLang's `bootstrap_host` / vLLM's `kv_transfer_params.remote_host` on an allowed call, or a
    `lora_path` naming an adapter the config does not pin.
    Won: passed; a PD-disaggregated server connects to the agent's host, a LoRA server answers as the adapter.
    Defence: the disaggregation fields are routing fields, `lora_path` a model name (must be pinned)."""
    refused, _ = run(tmp_path, monkeypatch, body, path=path, models=PINNED)
    assert refused


def test_r17a_6_control_an_sglang_generate_passes(tmp_path, monkeypatch):
    body = {"text": "hi", "rid": "r1", "stream": True, "return_logprob": False,
            "sampling_params": {"max_new_tokens": 64, "temperature": 0, "stop": ["\n"]}}
    refused, _ = run(tmp_path, monkeypatch, body, path="/generate", models=PINNED)
    assert not refused


# --- R17a-7 --------------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("path", [
    "/models/perplexity-ai/sonar/v1/chat/completions",  # Hugging Face's inference API (api-inference.../models/M/v1/)
    "/hf-inference/models/gpt-4o-search-preview/v1/chat/completions",  # its router, a provider before /models/
    "/models/sonar/v1/completions",
], ids=["hf-inference", "hf-router", "hf-completions"])
def test_r17a_7_a_model_in_an_openai_style_path_must_be_pinned(tmp_path, monkeypatch, path):
    """Attack: POST /models/perplexity-ai/sonar/v1/chat/completions with `"model": "default"` in the body.
    Won: passed; a server routing by the path's model answers from sonar (web search by name).
    Defence: the path segment(s) between `/models/` and the endpoint name a model that must be pinned."""
    refused, _ = run(tmp_path, monkeypatch, CHAT, path=path, models=PINNED)
    assert refused


def test_r17a_7_control_a_pinned_model_in_the_path_passes(tmp_path, monkeypatch):
    refused, _ = run(tmp_path, monkeypatch, CHAT, path="/models/default/v1/chat/completions", models=PINNED)
    assert not refused


# --- R17a-8 --------------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("tool", [
    {"type": "shell", "environment": {"type": "container_auto", "network_policy": {
        "type": "allowlist", "allowed_domains": ["github.com", "patch-diff.githubusercontent.com"]}}},
    {"type": "shell", "environment": {"type": "container_reference", "container_id": "cntr_1"}},
    {"type": "shell", "Environment": "container_auto"},  # a lax or Go reader: folded key, a bare string
    {"type": "local_shell", "container": {"type": "auto"}},
    {"type": "apply_patch", "environment": {"type": "container_auto"}},
], ids=["container-auto-allowlist", "container-reference", "folded-string", "local-shell-container", "apply-patch"])
def test_r17a_8_a_hosted_shell_is_not_a_client_tool(tmp_path, monkeypatch, tool):
    """Attack: a `shell` tool whose environment is OpenAI's container (`container_auto`, network allow-list naming
    github.com), sent to /v1/responses with the pinned model.
    Won: kept as a client tool; OpenAI runs `curl github.com/...` in its container and the answer holds the PR.
    Defence: a client tool with an environment other than the local one is hosted, and stripped."""
    own = {"type": "function", "name": "bash", "parameters": {}}
    body = {"model": "default", "input": "fix it", "tools": [own, tool]}
    refused, flow = run(tmp_path, monkeypatch, body, path="/v1/responses", models=PINNED)
    assert refused or json.loads(flow.request.content)["tools"] == [own]


@pytest.mark.parametrize("tool", [
    {"type": "shell"}, {"type": "shell", "environment": {"type": "local"}}, {"type": "local_shell"},
    {"type": "apply_patch"},
], ids=["shell", "shell-local", "local_shell", "apply_patch"])
def test_r17a_8_control_a_local_shell_passes(tmp_path, monkeypatch, tool):
    body = {"model": "default", "input": "fix it", "tools": [tool]}
    refused, flow = run(tmp_path, monkeypatch, body, path="/v1/responses", models=PINNED)
    assert not refused and json.loads(flow.request.content)["tools"] == [tool]


# --- the real proxy (mitmproxy 11 in the proxy image) ----------------------------------------------------------------

ECHO = """
import json, http.server
class H(http.server.BaseHTTPRequestHandler):
    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("content-length") or 0))
        out = json.dumps({"headers": sorted(k.lower() for k in self.headers), "usage": {"prompt_tokens": 1}}).encode()
        self.send_response(200); self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(out))); self.end_headers(); self.wfile.write(out)
    def log_message(self, *a): pass
http.server.ThreadingHTTPServer(("127.0.0.1", 30000), H).serve_forever()
"""
CLIENT = """
import json, urllib.request, urllib.error
op = urllib.request.build_opener(urllib.request.ProxyHandler({"http": "http://127.0.0.1:3128"}))
def post(name, path, body, headers={}):
    req = urllib.request.Request("http://127.0.0.1:30000" + path, data=body.encode(), method="POST",
                                 headers={"content-type": "application/json", **headers})
    try:
        r = op.open(req, timeout=20); print(name, r.status, json.dumps(json.loads(r.read())["headers"]))
    except urllib.error.HTTPError as e:
        print(name, e.code)
chat = json.dumps({"model": "default", "messages": []})
post("HEADERS", "/v1/chat/completions", chat, {"x-portkey-config": "{}", "Authorization": "Bearer k"})
post("QUERY", "/v1/chat/completions?model=sonar", chat)
post("DEEP", "/v1/chat/completions", '{"model": "sonar", "metadata": %s}' % ("[" * 700 + "]" * 700))
"""


@pytest.mark.docker
def test_r17a_the_real_proxy_strips_headers_refuses_queries_and_fails_closed(docker_client):
    """R17a-1, -2 and -4 through mitmproxy itself: against 359f69a's addon the Portkey header reached the server,
    `?model=sonar` passed, and a 700-deep body naming sonar was forwarded (the hook's RecursionError logged by
    mitmproxy, the request sent on) with no audit line and no meter count."""
    from sweserve.environment.images import ImageBuilder, read_ca_bundle

    image = ImageBuilder(docker_client, read_ca_bundle(None)).proxy()
    script = "\n".join([
        "set -u; cd /tmp",
        f"python3 -c {shlex.quote(ECHO)} &",
        "SWESERVE_EGRESS_ALLOW='[\"http://127.0.0.1:30000\"]' SWESERVE_EGRESS_CLOSED_BOOK=1 "
        "SWESERVE_EGRESS_MODELS='[\"default\"]' SWESERVE_EGRESS_DIR=/tmp/eg /opt/mitmproxy/bin/mitmdump -q "
        "--listen-host 127.0.0.1 --listen-port 3128 --set confdir=/tmp/mitmproxy --set onboarding=false "
        "-s /opt/sweserve/egress_addon.py >/tmp/mitm.log 2>&1 &",
        "for i in $(seq 300); do test -f /tmp/eg/ready && break; sleep 0.1; done",
        f"python3 -c {shlex.quote(CLIENT)}",
        "cat /tmp/eg/audit.jsonl",
    ])
    out = docker_client.containers.run(image, ["-c", script], entrypoint="bash", remove=True, network_mode="none",
                                       stdout=True, stderr=True).decode()
    lines = {line.split(" ", 1)[0]: line for line in out.splitlines() if not line.startswith("{")}
    assert lines["HEADERS"].startswith("HEADERS 200") and "authorization" in lines["HEADERS"], out
    assert "x-portkey-config" not in lines["HEADERS"], out
    assert lines["QUERY"] == "QUERY 403" and lines["DEEP"] == "DEEP 403", out
    audit = [json.loads(line) for line in out.splitlines() if line.startswith("{")]
    assert len(audit) == 3 and [a["allowed"] for a in audit] == [True, False, False], out
