"""Red team 19a: closed-book model-only egress, third round (`images/proxy/egress_addon.py`, the request side).

Each attack is a test that FAILS while the attack wins and passes once defended; controls keep honest clients'
requests passing. All run on the host against the addon's request hook (`run` from test_attacks_redteam15f).

- R19a-1: a host with no scheme. R18a-5 refused a URL-valued field outside the conversation, a URL being a value
  that starts with a scheme (or "//"). A gateway builds its upstream URL from fields that are not URLs: LiteLLM's
  Vertex route is `https://{vertex_location}-aiplatform.googleapis.com/...` and its Bedrock route
  `https://bedrock-runtime.{aws_region_name}.amazonaws.com/...`, both taken from the request body (the proxy bans
  only `api_base`/`base_url` there); a gateway that prepends its own scheme to an `api_host` takes `evil:443`.
  `vertex_location: "evil.example#"` makes the host `evil.example` (what follows `#` is the fragment), `x@evil.example/`
  makes it the userinfo's host. Won: passed; the gateway sends the call (with its own credentials) to the agent's
  host, which answers with whatever it fetched. Defence: outside the conversation, `tools`, a model's name and the
  text fields (stop sequences, grammars, a completion's suffix, instructions), a string value is refused when it
  could end or name a host in a URL built from it: it holds `/`, `\\`, `#`, `?` or `@`, or it is a host and port
  (`name:443`) or a dotted host name (`evil.example`, `10.0.0.9`).
- R19a-2: honest clients refused (false positives). R18a-5's URL check read every string outside CONTENT_KEYS as a
  place: an OpenAI Predicted Output (`prediction: {"type": "content", "content": "// utils.js ..."}`, the code the
  answer is expected to repeat) and a fill-in-the-middle completion's `suffix` (code, which may begin with a `//`
  comment) were refused as scheme-relative URLs. Defence: `prediction` is content; `suffix`, `instructions` and
  the constrained-decoding grammars (`regex`, `ebnf`, `guided_regex`, ...) are text like stop sequences.
- R19a-3: a plain word SGLang opens as a file. A fetched field (`image_data`, `audio_data`, `video_data`, ...) could
  hold a PLAIN_WORD (meant for `detail: "auto"` beside a data: URL): SGLang's `load_image` opens a value ending in
  `png`/`jpg` as a file in its working directory, and its audio and video loaders open any string that is not a
  data: or http URL (`Makefile`, `LICENSE`, `screenshotpng`): a file on the shared server's host read for the agent
  (at least its existence, told by the error). Defence: a plain word passes only beside the media (a `detail`), never
  as the media itself: a fetched field's own value, or the `url`/`data`/`uri` inside it, must be a data: URL or
  base64 of media.
- R19a-4: a Vertex AI endpoint names a model. path_models read `/models/`, `/tunedModels/`, deployments and engines;
  Vertex's `/v1/projects/P/locations/L/endpoints/ID:generateContent` (and a dedicated endpoint's
  `.../endpoints/ID/chat/completions`) answers with the model deployed there, whatever the body says, so a pinned
  agent reached any model. Defence: an endpoint names a model like a deployment (the shared `openapi` one, which
  reads the body's model, names none).
- R19a-5: an honest client refused (false positive). Azure AI Model Inference's `POST /models/chat/completions` was
  read as naming the model `chat`. Defence: the model endpoint after `/models/` is matched whole.
- R19a-6: the fetched-field check read one value once per level it nests (hardening: about 9 s of the proxy's event
  loop per 4 MiB nested 120 deep, its own trial's only). Defence: a fetched field's value is read whole, once.
- R19a-7: a stored agent or prompt by id. Mistral's `POST /v1/agents/completions` takes an `agent_id` (a console-made
  agent with its own model and tools, web_search among them) and no `model`, so the pinned list had nothing to
  refuse; LiteLLM's `prompt_id` loads a prompt stored in its prompt manager, with its own model. Defence: a key
  ending in `agent_id`, `assistant_id` or `prompt_id` outside content is a stored object's reference (R18a-1).
"""

from __future__ import annotations

import json

import pytest
from test_attacks_redteam15f import addon, run

PINNED = ["default"]
CHAT = {"model": "default", "messages": [{"role": "user", "content": "hi"}]}


def _log(tmp_path) -> list[dict]:
    return [json.loads(line) for line in (tmp_path / "audit.jsonl").read_text().splitlines()]


# --- R19a-1 --------------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("extra", [
    {"vertex_location": "evil.example#"},  # https://evil.example#-aiplatform.googleapis.com/...
    {"vertex_location": "x@evil.example/"},  # userinfo x, host evil.example
    {"vertex_ai_location": "evil.example?"},
    {"aws_region_name": "x.evil.example/#"},  # https://bedrock-runtime.x.evil.example/#.amazonaws.com
    {"api_host": "evil:443"},  # a gateway that prepends its own scheme
    {"api_host": "10.0.0.9:8080"},
    {"api_host": "evil.example"},
    {"litellm_params": {"vertex_location": "sglang:30000\\"}},  # backslash: a WHATWG parser's slash
    {"metadata": {"region": "localhost#"}},
    {"vertex_project": "p/locations/x/../../../../evil"},  # path segments of the URL
    [{"model": "default", "messages": [], "vertex_location": "evil.example#"}],  # in a batch
    {"regions": ["us-central1", "evil.example#"]},  # in a list
], ids=["fragment", "userinfo", "query", "bedrock-region", "host-port", "ip-port", "dotted-host", "nested-backslash",
        "localhost", "path-segments", "batch", "in-a-list"])
def test_r19a_1_a_host_without_a_scheme_routes_nothing(tmp_path, monkeypatch, extra):
    """Attack: a pinned chat call with LiteLLM's per-request `vertex_location: "evil.example#"` (or
    `aws_region_name`, or an `api_host` a gateway prepends its scheme to), none a URL by R18a-5's test.
    Won: passed; LiteLLM builds `https://evil.example#-aiplatform.googleapis.com/...` and sends the call, with its own
    credentials, to the agent's host, which answers with what it fetched.
    Defence: outside the conversation, tools, model names and text fields, a string that could end or name a host in
    a URL built from it (`/ \\ # ? @`, a host and port, a dotted host name) is refused."""
    body = extra if isinstance(extra, list) else {**CHAT, **extra}
    refused, _ = run(tmp_path, monkeypatch, json.dumps(body), models=PINNED)
    assert refused, f"{json.dumps(body)[:120]} passed"


@pytest.mark.parametrize("extra", [
    {"vertex_location": "us-central1"}, {"aws_region_name": "us-east-1"}, {"user": "user-4f2a"},
    {"metadata": {"user_id": "user_3f9a_account_0b1c-22_session_9d8e-77"}},
    {"reasoning_effort": "low", "service_tier": "auto", "seed": 7, "temperature": 0.2},
], ids=["region", "bedrock-region", "user", "claude-code-user-id", "options"])
def test_r19a_1_control_plain_parameters_pass(tmp_path, monkeypatch, extra):
    refused, _ = run(tmp_path, monkeypatch, {**CHAT, **extra}, models=["default", "Qwen/Qwen3-8B"])
    assert not refused, _log(tmp_path)[-1]


# --- R19a-2 and the honest clients ---------------------------------------------------------------------------------

CODE = "// utils.js\nexport function add(a, b) {\n  return a + b; // see https://x.example/#a?b\n}\n"
TOOLS_OPENAI = [{"type": "function", "function": {"name": "bash", "description": "Run a command", "parameters": {
    "type": "object", "properties": {"command": {"type": "string"}}, "required": ["command"]}}}]

HONEST = {
    # the OpenAI SDK: Predicted Outputs (the code the answer repeats), streaming with usage
    "openai-prediction": ({"model": "default", "messages": [{"role": "user", "content": "rename add"}],
                           "prediction": {"type": "content", "content": CODE}, "stream": True,
                           "stream_options": {"include_usage": True}}, "/v1/chat/completions"),
    # a fill-in-the-middle completion: its suffix is code
    "fim-suffix": ({"model": "default", "prompt": "function add(a, b) {\n", "suffix": "// end of add\n}\n",
                    "max_tokens": 32, "stop": ["\n\n"]}, "/v1/completions"),
    # the Responses API as Codex sends it
    "codex": ({"model": "default", "instructions": "You are Codex. # Rules\n- paths like /tmp/x?y are fine\n",
               "input": [{"type": "message", "role": "user", "content": [{"type": "input_text", "text": "fix it"}]}],
               "tools": [{"type": "function", "name": "shell", "parameters": {"type": "object", "properties": {}}},
                         {"type": "local_shell"}],
               "tool_choice": "auto", "parallel_tool_calls": False, "reasoning": {"effort": "medium",
                                                                               "summary": "auto"},
               "store": False, "stream": True, "include": ["reasoning.encrypted_content"],
               "prompt_cache_key": "0199c2f4-6a3b-7c11-9d2e-1f0a2b3c4d5e", "text": {"verbosity": "low"}},
              "/v1/responses"),
    # Claude Code on the Messages API
    "claude-code": ({"model": "default", "max_tokens": 32000, "stream": True,
                     "system": [{"type": "text", "text": "You are Claude Code.", "cache_control": {
                         "type": "ephemeral"}}],
                     "messages": [{"role": "user", "content": [{"type": "text", "text": "<system-reminder>/init"}]}],
                     "tools": [{"name": "Bash", "description": "run", "input_schema": {"type": "object"}}],
                     "metadata": {"user_id": "user_3f9a0c_account_0b1c2d3e-aaaa_session_9d8e7f6a-bbbb"},
                     "thinking": {"type": "enabled", "budget_tokens": 31999}, "temperature": 1},
                    "/v1/messages"),
    # the Gemini SDK: JSON answers (a MIME type has a slash), safety settings, tool config
    "gemini": ({"contents": [{"role": "user", "parts": [{"text": "hi"}]}],
                "systemInstruction": {"parts": [{"text": "be brief"}]},
                "generationConfig": {"responseMimeType": "application/json", "temperature": 0.1,
                                     "stopSequences": ["//"], "thinkingConfig": {"thinkingBudget": 1024}},
                "safetySettings": [{"category": "HARM_CATEGORY_HARASSMENT", "threshold": "BLOCK_NONE"}],
                "toolConfig": {"functionCallingConfig": {"mode": "AUTO"}}},
               "/v1beta/models/default:generateContent"),
    # mini-swe-agent through litellm (openai/default)
    "mini-swe-agent": ({"model": "default", "messages": [
        {"role": "system", "content": "You are a helpful assistant."},
        {"role": "user", "content": "<pr_description>see https://github.com/x/y/pull/1</pr_description>"},
        {"role": "assistant", "content": "THOUGHT: look\n```bash\ncat /testbed/a.py\n```"}],
        "temperature": 0.0, "drop_params": True}, "/v1/chat/completions"),
    # SGLang's native API with constrained decoding
    "sglang-generate": ({"text": "Q: a path?\nA:", "sampling_params": {
        "max_new_tokens": 16, "regex": "(/[a-z]+)+\\.py#?", "stop": ["\n"]}}, "/generate"),
    "sglang-ebnf": ({"model": "default", "messages": CHAT["messages"],
                     "ebnf": "root ::= \"/\" [a-z]+ \"?\" \"#\""}, "/v1/chat/completions"),
    "sglang-stop-regex": ({"text": "x", "sampling_params": {"stop_regex": "\\n//|#\\?", "max_new_tokens": 8}},
                          "/generate"),
    "vllm-bad-words": ({"model": "default", "messages": CHAT["messages"], "bad_words": ["http://", "#include"],
                        "guided_whitespace_pattern": "[ /]*", "guided_decoding_backend": "xgrammar:no-fallback"},
                       "/v1/chat/completions"),
    "vllm-guided": ({"model": "default", "messages": CHAT["messages"], "guided_regex": "https?://[^ ]+",
                     "guided_choice": ["a/b", "c#d"]}, "/v1/chat/completions"),
}


@pytest.mark.parametrize("name", list(HONEST))
def test_r19a_2_control_honest_clients_pass_unaltered(tmp_path, monkeypatch, name):
    """Attack (false positive): an honest client's request, as the OpenAI, Anthropic and Gemini SDKs, Claude Code,
    Codex, mini-swe-agent (litellm), SGLang's and vLLM's own clients send it (code in a Predicted Output or a
    completion's suffix starts with a `//` comment).
    Won: refused as a URL (`prediction`, `suffix`); the agent could not use its model.
    Defence: `prediction` is content; a completion's `suffix`, `instructions` and the decoding grammars are text."""
    body, path = HONEST[name]
    refused, flow = run(tmp_path, monkeypatch, body, path=path, models=PINNED)
    assert not refused, _log(tmp_path)[-1]
    sent = json.loads(flow.request.content)
    if name != "codex":  # Codex's local_shell stays; nothing else is removed
        assert sent == body


# --- R19a-3 --------------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("body, path", [
    ({"text": "describe", "image_data": "screenshotpng"}, "/generate"),  # load_image opens *png as a file
    ({"text": "transcribe", "audio_data": "Makefile"}, "/generate"),  # the audio loader opens any non-URL string
    ({"text": "describe", "video_data": ["LICENSE"]}, "/generate"),
    ({"model": "default", "messages": [{"role": "user", "content": [
        {"type": "image_url", "image_url": {"url": "screenshotjpg", "detail": "auto"}}]}]}, "/v1/chat/completions"),
    ({"model": "default", "messages": [{"role": "user", "content": [
        {"type": "audio_url", "audio_url": {"url": "README"}}]}]}, "/v1/chat/completions"),
], ids=["image_data", "audio_data", "video_data-list", "image_url-url", "audio_url-url"])
def test_r19a_3_a_plain_word_is_no_media(tmp_path, monkeypatch, body, path):
    """Attack: `image_data: "screenshotpng"` (or `audio_data: "Makefile"`), a plain word, which PLAIN_WORD let pass.
    Won: passed; SGLang opens it as a file in its working directory on the shared server's host.
    Defence: a plain word stands only beside the media (`detail`), never as the media."""
    refused, _ = run(tmp_path, monkeypatch, body, path=path, models=PINNED)
    assert refused, f"{json.dumps(body)[:120]} passed"


PNG = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg=="


@pytest.mark.parametrize("body, path", [
    ({"text": "describe", "image_data": PNG}, "/generate"),
    ({"text": "describe", "image_data": f"data:image/png;base64,{PNG}"}, "/generate"),
    ({"model": "default", "messages": [{"role": "user", "content": [
        {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{PNG}", "detail": "high"}}]}]},
     "/v1/chat/completions"),
    ({"model": "default", "input": [{"role": "user", "content": [
        {"type": "input_image", "image_url": f"data:image/png;base64,{PNG}", "detail": "auto"}]}]}, "/v1/responses"),
], ids=["sglang-base64", "sglang-data-url", "openai-detail", "responses-detail"])
def test_r19a_3_control_inline_media_with_its_detail_passes(tmp_path, monkeypatch, body, path):
    refused, _ = run(tmp_path, monkeypatch, body, path=path, models=PINNED)
    assert not refused, _log(tmp_path)[-1]


def test_r19a_1_the_checks_name_the_field():
    assert addon.routing_fields({"vertex_location": "evil.example#"}) == ["vertex_location"]


@pytest.mark.parametrize("value", [
    "evil\u3002example",  # an ideographic full stop: IDNA (UTS 46) maps it to '.'
    "evil\uff0eexample",  # a fullwidth full stop
    "evil%2eexample",  # a WHATWG parser percent-decodes a host
    "\uff45vil.example",  # a fullwidth letter (NFKC: e)
    "[::1]",  # an IPv6 literal (the gateway's own host)
    "[fd00::9]:8080",
    "my_box.evil.example",  # an underscore: DNS and a WHATWG parser take it in a name
    "a_b:8080",
], ids=["ideographic-stop", "fullwidth-stop", "percent", "fullwidth-letter", "ipv6", "ipv6-port", "underscore",
        "underscore-port"])
def test_r19a_1_a_host_spelled_otherwise_is_a_host(tmp_path, monkeypatch, value):
    """Attack (on R19a-1's defence): `api_host` spelled as a URL parser reads it, not as ASCII: an IDNA full stop,
    a percent-escape, a fullwidth letter, an IPv6 literal.
    Won: passed HOST_VALUE, which read only ASCII dots and letters; a WHATWG or IDNA host parser reads evil.example.
    Defence: the value is read as a host parser reads it (NFKC, the IDNA full stops), and `%`, `[`, `]` are a URL's
    delimiters too."""
    refused, _ = run(tmp_path, monkeypatch, json.dumps({**CHAT, "api_host": value}), models=PINNED)
    assert refused, f"{value!r} passed"


def test_r19a_1_control_words_in_other_scripts_pass(tmp_path, monkeypatch):
    body = {**CHAT, "metadata": {"team": "\u30c1\u30fc\u30e0", "note": "r\u00e9sum\u00e9 50 pct"},
            # the Responses API's include: dotted names of what to return, which a resolver would take for hosts
            "include": ["message.output_text.logprobs", "file_search_call.results", "reasoning.encrypted_content"]}
    refused, _ = run(tmp_path, monkeypatch, body, models=PINNED)
    assert not refused, _log(tmp_path)[-1]


# --- R19a-4 and R19a-5: models in a path ---------------------------------------------------------------------------

@pytest.mark.parametrize("path, body", [
    ("/v1/projects/p/locations/us-central1/endpoints/1234567:generateContent",
     {"contents": [{"role": "user", "parts": [{"text": "hi"}]}]}),
    ("/v1beta1/projects/p/locations/us-central1/endpoints/1234567:streamGenerateContent",
     {"contents": [{"role": "user", "parts": [{"text": "hi"}]}]}),
    ("/vertex_ai/v1/projects/p/locations/l/endpoints/99:generateContent",  # LiteLLM's Vertex pass-through
     {"contents": [{"role": "user", "parts": [{"text": "hi"}]}]}),
    ("/v1/projects/p/locations/us-central1/endpoints/1234567/chat/completions", CHAT),  # a dedicated endpoint
], ids=["vertex-endpoint", "vertex-endpoint-stream", "litellm-passthrough", "dedicated-openai"])
def test_r19a_4_a_vertex_endpoint_names_a_model(tmp_path, monkeypatch, path, body):
    """Attack: a pinned closed-book agent calls a Vertex AI endpoint (`.../endpoints/ID:generateContent`, or a
    dedicated endpoint's OpenAI-style `.../endpoints/ID/chat/completions`): the model deployed there answers,
    whatever the body says.
    Won: passed; path_models read `/models/`, `/tunedModels/`, deployments and engines, never `/endpoints/`, so no
    model was named and the pinned list was never consulted: any model (a tuned one, a Model Garden one) answers.
    Defence: an endpoint in the path names a model like a deployment; Vertex's shared `openapi` endpoint, which
    answers with the body's model (read as ever), names none."""
    refused, _ = run(tmp_path, monkeypatch, body, path=path, models=PINNED)
    assert refused


@pytest.mark.parametrize("path, body", [
    ("/models/chat/completions?api-version=2024-05-01-preview", CHAT),  # Azure AI Model Inference
    ("/v1beta1/projects/p/locations/us-central1/endpoints/openapi/chat/completions", CHAT),  # Vertex MaaS
    ("/v1/projects/p/locations/us-central1/endpoints/default:generateContent",
     {"contents": [{"role": "user", "parts": [{"text": "hi"}]}]}),
    ("/models/default/v1/chat/completions", CHAT),  # Hugging Face, pinned
], ids=["azure-ai-inference", "vertex-openapi", "pinned-endpoint", "hugging-face"])
def test_r19a_5_control_a_model_path_without_a_name_passes(tmp_path, monkeypatch, path, body):
    """Attack (false positive): Azure AI Model Inference's `POST /models/chat/completions` (the model in the body).
    Won: refused; path_models read `chat` as the model between `/models/` and `/completions`.
    Defence: the model endpoint is matched whole (`/chat/completions`): nothing stands between it and `/models/`."""
    refused, _ = run(tmp_path, monkeypatch, body, path=path, models=PINNED)
    assert not refused, _log(tmp_path)[-1]


# --- R19a-6 --------------------------------------------------------------------------------------------------------

def test_r19a_6_each_media_value_is_read_once(monkeypatch):
    """Attack: one large value under fetched fields nested 120 deep (`{"image_data": {"image_data": ... "AAAA..."}}`).
    Won: fetched_urls read the whole value at every level (each level's `_media`, then its own recursion), so the
    string was base64-decoded 120 times: about 9 s of the proxy's event loop per 4 MiB, during which every other
    flow of the proxy waits (its own trial's only: hardening, no closed-book win).
    Defence: a fetched field's value is read whole once, and not walked again."""
    calls = []
    real = addon.inline
    monkeypatch.setattr(addon, "inline", lambda value, word=False: calls.append(value) or real(value, word))
    node: object = "AAAA"
    for _ in range(120):
        node = {"image_data": node}
    assert addon.fetched_urls(node) == ["AAAA"]
    assert len(calls) == 1


# --- R19a-7 --------------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("body, path", [
    # Mistral's Agents API: an agent made in its console, with its own model and tools (web_search, ...)
    ({"agent_id": "ag_0198a2b3c4", "messages": [{"role": "user", "content": "hi"}]}, "/v1/agents/completions"),
    ({"model": "default", "agent_id": "ag_0198a2b3c4", "messages": CHAT["messages"]}, "/v1/chat/completions"),
    # LiteLLM's prompt management: a prompt stored in the gateway's prompt manager (its own model and messages)
    ({**CHAT, "prompt_id": "pr-search", "prompt_variables": {"pr": "1234"}}, "/v1/chat/completions"),
    ({**CHAT, "litellm_prompt_id": "pr-search"}, "/v1/chat/completions"),
    ({**CHAT, "assistant_id": "asst_abc"}, "/v1/chat/completions"),
], ids=["mistral-agent", "agent-beside-model", "litellm-prompt", "litellm-prompt-prefixed", "assistant"])
def test_r19a_7_a_stored_agent_or_prompt_is_refused(tmp_path, monkeypatch, body, path):
    """Attack: a closed-book call that names an agent or a prompt stored at the provider or the gateway: Mistral's
    `POST /v1/agents/completions` with an `agent_id` (no `model` at all), LiteLLM's `prompt_id`.
    Won: passed; R18a-1 refused a stored response, conversation, prompt object, file and cache, not an agent nor a
    gateway's prompt by id, and a request naming no model named none the pinned list could refuse. The stored agent's
    model and tools (Mistral's web_search connector) answer.
    Defence: an `agent_id`, `assistant_id` or `prompt_id` (any key ending so) is a stored object's reference."""
    refused, _ = run(tmp_path, monkeypatch, body, path=path, models=PINNED)
    assert refused
