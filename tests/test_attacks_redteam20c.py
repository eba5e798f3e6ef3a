"""Red team 20c: closed book by a field allow-list (`images/proxy/egress_addon.py`, the request side).

Rounds 17a, 18a and 19a each found request fields that route, fetch or name a model and that the deny-style checks
(ROUTING_KEYS, URL and host values, stored objects, `*fallback*`) let through: the fields gateways and servers read
are open-ended. This round builds a default-deny field allow-list (`unlisted_fields`) beside those checks, then
attacks it. Each attack is a test that FAILS while the attack wins and passes once defended; controls keep honest
clients' requests passing. All run on the host against the addon's request hook (`run` from
test_attacks_redteam15f).

- R20c-1: fields no deny-list names. A pinned chat call carrying a gateway's or server's field that is no URL, no
  host and no model name: LiteLLM's tag routing (`tags`, `metadata.tags`: a deployment tagged so, another model),
  its per-request `api_key` (another account) and `cache` (`namespace`: answers cached by other trials), its
  `vertex_project`; OpenRouter's `provider` routing; vLLM's and SGLang's `priority` (with priority scheduling, a
  trial's calls jump every other trial's on the shared server), vLLM's `chat_template` (a Jinja template the shared
  server renders) and `vllm_xargs`; SGLang's `data_parallel_rank`. Won: passed. Defence: closed
  book reads each body against the fields honest clients send, per API (OpenAI-style, Anthropic, Gemini, SGLang's
  /generate), and the keys of the sub-objects that carry options (stream_options, reasoning, thinking,
  generationConfig, sampling_params, metadata, tool_choice, response_format, ...): any other field is refused.
  Content (messages, input, contents, system, prompt, schemas) stays free-form; an option's value must be a JSON
  scalar (or a list of them), never an object a gateway could read fields from.
- R20c-2: the allow-list, attacked. `metadata` is a field honest clients send (Claude Code's `user_id`, OpenAI's
  string map) that a gateway also reads for routing (LiteLLM's tag routing reads `metadata.tags`, a list): on the
  Messages API only `user_id` passes inside it, elsewhere a map of strings (OpenAI's shape), never a list or object. An allowed option holding an object (`temperature: {"api_base": ...}`, `user: {...}`) is refused by shape.
"""

from __future__ import annotations

import json

import pytest
from test_attacks_redteam15f import addon, run
from test_attacks_redteam19a import HONEST

PINNED = ["default"]
CHAT = {"model": "default", "messages": [{"role": "user", "content": "hi"}]}


def _log(tmp_path) -> list[dict]:
    return [json.loads(line) for line in (tmp_path / "audit.jsonl").read_text().splitlines()]


# --- R20c-1 --------------------------------------------------------------------------------------------------------

UNLISTED = {
    "litellm-tags": ({**CHAT, "tags": ["web-enabled"]}, "/v1/chat/completions"),
    "litellm-api-key": ({**CHAT, "api_key": "sk-other-team"}, "/v1/chat/completions"),
    "litellm-cache-namespace": ({**CHAT, "cache": {"namespace": "open-book-trials"}}, "/v1/chat/completions"),
    "litellm-vertex-project": ({**CHAT, "vertex_project": "other-project"}, "/v1/chat/completions"),
    "openrouter-provider": ({**CHAT, "provider": {"only": ["perplexity"], "allow_fallbacks": False}},
                            "/v1/chat/completions"),
    "openrouter-route": ({**CHAT, "route": "fallback"}, "/v1/chat/completions"),
    "vllm-priority": ({**CHAT, "priority": -1000}, "/v1/chat/completions"),
    "vllm-chat-template": ({**CHAT, "chat_template": "{{ messages }}"}, "/v1/chat/completions"),
    "vllm-xargs": ({**CHAT, "vllm_xargs": {"processor": "x"}}, "/v1/chat/completions"),
    "sglang-priority": ({"text": "hi", "priority": -1000, "sampling_params": {"max_new_tokens": 8}}, "/generate"),
    "sglang-dp-rank": ({"text": "hi", "data_parallel_rank": 0}, "/generate"),  # the rank other trials' calls use
    "anthropic-unlisted": ({**CHAT, "max_tokens": 8, "anthropic_routing": "x"}, "/v1/messages"),
    "gemini-unlisted-config": ({"contents": [], "generationConfig": {"modelSelectionConfig": {
        "featureSelectionPreference": "PRIORITIZE_QUALITY"}}}, "/v1beta/models/default:generateContent"),
    "gemini-retrieval-config": ({"contents": [], "toolConfig": {"retrievalConfig": {"latLng": {
        "latitude": 1, "longitude": 2}}}}, "/v1beta/models/default:generateContent"),
    "batch": (json.dumps([CHAT, {**CHAT, "tags": ["web"]}]), "/v1/chat/completions"),
}


@pytest.mark.parametrize("name", list(UNLISTED))
def test_r20c_1_a_field_no_client_sends_is_refused(tmp_path, monkeypatch, name):
    """Attack: a pinned call with a field no deny-list names and whose value is no URL, host or model name (LiteLLM's
    `tags`, `api_key`, `cache`, OpenRouter's `provider`, vLLM's and SGLang's `priority`, vLLM's `chat_template`, ...).
    Won: passed; the gateway routes by it (a tagged deployment, another account, other trials' cached answers) or the
    shared server serves the trial's calls first.
    Defence: a default-deny allow-list of the fields honest clients send, per API: any other field is refused."""
    body, path = UNLISTED[name]
    refused, _ = run(tmp_path, monkeypatch, body, path=path, models=PINNED)
    assert refused, f"{name} passed"


# what rounds 16d to 19a found through the deny-style checks: the allow-list refuses each of them on its own
EARLIER = [
    ({**CHAT, "api_base": "http://203.0.113.9/v1"}, "/v1/chat/completions"),
    ({**CHAT, "user_config": {"model_list": []}}, "/v1/chat/completions"),
    ({**CHAT, "preset": "web"}, "/v1/chat/completions"),
    ({"contents": [], "generationConfig": {"routingConfig": {"manualMode": {"modelName": "x"}}}},
     "/v1beta/models/default:generateContent"),
    ({"text": "hi", "bootstrap_host": "10.9.9.9", "bootstrap_port": 8998}, "/generate"),
    ({**CHAT, "kv_transfer_params": {"remote_host": "10.9.9.9"}}, "/v1/chat/completions"),
    ({"text": "hi", "lora_path": "sql-adapter"}, "/generate"),
    ({**CHAT, "extra_headers": {"x": "y"}}, "/v1/chat/completions"),
    ({**CHAT, "aws_bedrock_runtime_endpoint": "https://evil.example"}, "/v1/chat/completions"),
    ({**CHAT, "previous_response_id": "resp_1"}, "/v1/responses"),
    ({**CHAT, "cachedContent": "cachedContents/x"}, "/v1beta/models/default:generateContent"),
    ({"text": "hi", "session_params": {"id": "s"}}, "/generate"),
    ({**CHAT, "prompt_embeds": "gASV"}, "/v1/completions"),
    ({**CHAT, "api_host": "evil:443"}, "/v1/chat/completions"),
    ({**CHAT, "agent_id": "ag_1"}, "/v1/chat/completions"),
    # OpenAI's metadata is an open map of strings: there the URL check refuses it; the Messages API's is its user_id
    ({**CHAT, "metadata": {"API_BASE": "http://203.0.113.9"}}, "/v1/messages"),
]


@pytest.mark.parametrize("body, path", EARLIER)
def test_r20c_1_the_allow_list_alone_refuses_every_earlier_find(body, path):
    """The fields rounds 16d to 19a found, each refused by the allow-list itself (defence in depth: a deny check
    that misses a spelling is backed by it)."""
    assert addon.unlisted_fields(json.loads(body) if isinstance(body, str) else body, f"http://m{path}")


@pytest.mark.parametrize("name", list(HONEST))
def test_r20c_1_control_the_allow_list_passes_honest_clients(name):
    """Control: 19a's honest requests (the OpenAI, Anthropic and Gemini SDKs, Claude Code, Codex, mini-swe-agent,
    SGLang's and vLLM's clients) hold only listed fields."""
    body, path = HONEST[name]
    assert addon.unlisted_fields(body, f"http://m{path}") == []


@pytest.mark.parametrize("body, path", [
    ({"model": "default", "input": ["a b", "c"], "encoding_format": "float", "dimensions": 256},
     "/v1/embeddings"),
    ({"model": "default", "messages": CHAT["messages"], "tools": [], "system": "x", "thinking": {
        "type": "enabled", "budget_tokens": 1024}}, "/v1/messages/count_tokens"),
    ({"contents": [{"parts": [{"text": "hi"}]}], "generateContentRequest": {"model": "models/default", "contents": []}},
     "/v1beta/models/default:countTokens"),
    ({**CHAT, "max_completion_tokens": 64, "logit_bias": {"50256": -100}, "response_format": {
        "type": "json_schema", "json_schema": {"name": "a", "schema": {"type": "object"}, "strict": True}},
        "tools": [{"type": "function", "function": {"name": "bash", "parameters": {"type": "object"}}}],
        "tool_choice": {"type": "function", "function": {"name": "bash"}}, "n": 1, "top_logprobs": 2,
        "logprobs": True, "chat_template_kwargs": {"enable_thinking": False}, "skip_special_tokens": False},
     "/v1/chat/completions"),
    ({"text": ["a", "b"], "sampling_params": [{"max_new_tokens": 4}, {"max_new_tokens": 8, "json_schema": "{}"}],
      "return_logprob": True, "top_logprobs_num": 2}, "/generate"),
    ({"input_ids": [[1, 2], [3]], "sampling_params": {"temperature": 0}}, "/generate"),
], ids=["embeddings", "anthropic-count-tokens", "gemini-count-tokens", "chat-options", "sglang-batch", "input-ids"])
def test_r20c_1_control_other_honest_shapes_pass(tmp_path, monkeypatch, body, path):
    refused, flow = run(tmp_path, monkeypatch, body, path=path, models=["default", "models/default"])
    assert not refused, _log(tmp_path)[-1]
    assert json.loads(flow.request.content) == body


def test_r20c_1_the_log_names_the_field(tmp_path, monkeypatch):
    refused, _ = run(tmp_path, monkeypatch, {**CHAT, "cache": {"namespace": "n"}}, models=PINNED)
    assert refused and "cache" in _log(tmp_path)[-1]["note"]


# --- R20c-2 --------------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("extra", [
    {"metadata": {"tags": ["web-enabled"]}},  # LiteLLM's tag routing, read from metadata too
    {"metadata": {"tags": "web-enabled", "x": {"tags": ["web"]}}},
    {"metadata": {"user_id": "u", "tags": ["web"]}},
    {"temperature": {"api_base": "x"}},  # an option that holds an object: fields a gateway may read
    {"user": {"team_id": "open-book"}},
    {"stream_options": {"include_usage": True, "extra": 1}},
    {"reasoning_effort": ["low", {"model": "x"}]},
], ids=["metadata-tags", "metadata-nested-tags", "metadata-user-and-tags", "object-temperature", "object-user",
        "stream-options", "list-with-object"])
def test_r20c_2_an_honest_field_carries_nothing_else(tmp_path, monkeypatch, extra):
    """Attack: a field honest clients send (Claude Code's `metadata`, `user`, a sampling option, stream_options)
    carrying what a gateway reads for routing: LiteLLM's tag routing reads `metadata.tags`.
    Won: passed (metadata's `tags` names no URL, host or model).
    Defence: `metadata` is a map of strings (the Messages API's: its `user_id` alone); each option's value is a
    scalar (or a list of them), each options object holds its listed keys only."""
    refused, _ = run(tmp_path, monkeypatch, {**CHAT, **extra}, models=PINNED)
    assert refused, f"{extra} passed"


@pytest.mark.parametrize("metadata", [{"user_id": "u", "tags": "web"}, {"user_id": "u", "team": "x"}])
def test_r20c_2_the_messages_apis_metadata_is_its_user_id(tmp_path, monkeypatch, metadata):
    refused, _ = run(tmp_path, monkeypatch, {**CHAT, "max_tokens": 8, "metadata": metadata}, path="/v1/messages",
                     models=PINNED)
    assert refused


def test_r20c_2_control_claude_codes_metadata_passes(tmp_path, monkeypatch):
    body = {**CHAT, "max_tokens": 8, "metadata": {"user_id": "user_3f9a_account_0b1c_session_9d8e"}}
    refused, _ = run(tmp_path, monkeypatch, body, path="/v1/messages", models=PINNED)
    assert not refused, _log(tmp_path)[-1]


def test_r20c_2_open_book_reads_no_fields(tmp_path, monkeypatch):
    """Control: the allow-list is closed book's; open book forwards a body's fields unread (its `rid` aside)."""
    refused = []
    monkeypatch.setattr(addon.Egress, "refuse", staticmethod(lambda flow, what: refused.append(what)))
    from types import SimpleNamespace

    from test_attacks_redteam15f import MODEL
    e = addon.Egress([MODEL], False, tmp_path)
    flow = SimpleNamespace(request=SimpleNamespace(
        method="POST", scheme="http", host="10.0.0.5", port=30000, content=json.dumps({**CHAT, "tags": ["x"]}).encode(),
        url=f"{MODEL}/v1/chat/completions", headers={"content-type": "application/json"}),
        client_conn=SimpleNamespace(peername=("10.1.1.2", 5555)), response=None)
    e.request(flow)
    assert not refused


# --- R20c-3 --------------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("extra", [
    {"fallbacks": [{"model": "default", "api_key": "sk-other-team"}]},  # LiteLLM: a fallback carries its own kwargs
    {"fallbacks": [{"model": "default", "tags": ["web-enabled"]}]},
    {"fallbacks": [{"model": "default", "cache": {"namespace": "open-book-trials"}}]},
    {"models": [{"model": "default", "priority": -1000}]},
    {"context_window_fallbacks": [{"default": [{"model": "default", "vertex_project": "other"}]}]},
    {"content_policy_fallbacks": {"default": {"model": "default", "api_key": "sk-other"}}},
], ids=["api-key", "tags", "cache", "models-priority", "map-of-requests", "map-of-request"])
def test_r20c_3_a_fallback_carries_no_unlisted_field(tmp_path, monkeypatch, extra):
    """Attack: the allow-list lets a model-naming field (`fallbacks`, `models`, any `*fallback*`) through for the
    pinned-model check to read, and that check reads only model names. LiteLLM's fallbacks are whole requests'
    kwargs (`[{"model": ..., "api_key": ..., "messages": ...}]`): a fallback to the pinned model with LiteLLM's
    `api_key`, `tags` or `cache` (none a URL, host or model) routes as R20c-1's fields do.
    Won: passed (the allow-list never read inside a fallback).
    Defence: a model-naming field holds model names (strings, lists of them, {model: [models]} maps) or requests,
    each read against the same allow-list as the body itself."""
    refused, _ = run(tmp_path, monkeypatch, {**CHAT, **extra}, models=PINNED)
    assert refused, f"{extra} passed"


@pytest.mark.parametrize("extra", [
    {"fallbacks": ["default-long"]},
    {"fallbacks": [{"model": "default-long", "messages": [{"role": "user", "content": "hi"}], "temperature": 0}]},
    {"context_window_fallbacks": [{"default": ["default-long"]}]},
    {"context_window_fallback_dict": {"default": "default-long"}},
], ids=["names", "requests", "map", "dict"])
def test_r20c_3_control_fallbacks_to_pinned_models_pass(tmp_path, monkeypatch, extra):
    refused, _ = run(tmp_path, monkeypatch, {**CHAT, **extra}, models=["default", "default-long"])
    assert not refused, _log(tmp_path)[-1]


# --- R20c-4 --------------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("tool", [
    {"type": "function", "function": {"name": "f"}, "googleSearchNext": {}},  # a Gemini key nobody listed yet
    {"type": "function", "function": {"name": "f", "enterpriseWebSearchV2": {}}},
    {"type": "custom", "name": "x", "mcp_servers": [{"url": "http://203.0.113.9/mcp"}]},  # a URL, read nowhere
    {"type": "function", "name": "f", "parameters": {}, "server_url": "http://203.0.113.9"},
    {"type": "bash_20250124", "name": "bash", "web_fetch": {"max_uses": 5}},
], ids=["typed-gemini-key", "in-function", "mcp-servers", "server-url", "versioned"])
def test_r20c_4_a_typed_client_tool_carries_only_its_own_keys(tmp_path, monkeypatch, tool):
    """Attack: a client tool with a type (`function`, `custom`, a versioned Anthropic type) carrying a key no client
    tool has: a Gemini tool key nobody listed yet (an untyped tool with one is removed), `mcp_servers`, a
    `server_url`. Every check (hosted options, routing fields, URLs) skips `tools`.
    Won: the tool reached the model server with the key (a gateway that reads a hosted tool's key from a tool dict,
    as LiteLLM's Vertex mapping reads `googleSearch` from one, would switch it on).
    Defence: a typed tool keeps the keys its API defines (name, description, parameters, format, schema, cache
    control, display sizes ...) and its `function` those of a function; a tool with any other key is not a client
    tool: removed, as an untyped tool with an unlisted key is."""
    own = {"type": "function", "function": {"name": "bash", "parameters": {"type": "object"}}}
    refused, flow = run(tmp_path, monkeypatch, {**CHAT, "tools": [own, tool]}, models=PINNED)
    assert refused or json.loads(flow.request.content)["tools"] == [own]


def test_r20c_4_control_codex_and_claude_code_tools_pass():
    for tool in [*HONEST["codex"][0]["tools"], *HONEST["claude-code"][0]["tools"],
                 {"type": "function", "name": "shell", "description": "d", "strict": False, "parameters": {}},
                 {"type": "custom", "name": "apply_patch", "description": "d", "format": {"type": "grammar"}},
                 {"type": "computer_20250124", "name": "computer", "display_width_px": 1024, "display_height_px": 768,
                  "display_number": 1},
                 {"type": "text_editor_20250728", "name": "str_replace_based_edit_tool", "max_characters": 1000},
                 {"type": "function", "function": {"name": "f", "description": "d", "parameters": {}, "strict": True}}]:
        assert addon.hosted_kind(tool) is None, tool


# --- R20c-5 --------------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("body, path", [
    ({"model": "default", "prompt": {"id": "pmpt_1", "version": "2"}}, "/v1/completions"),  # a stored prompt
    ({"model": "default", "prompt": [{"id": "pmpt_1"}]}, "/v1/completions"),
    ({"text": {"api_base": "x"}, "sampling_params": {}}, "/generate"),
    ({"model": "default", "instructions": {"id": "pmpt_1"}, "input": "hi"}, "/v1/responses"),
], ids=["prompt-object", "prompt-list-of-objects", "generate-text-object", "instructions-object"])
def test_r20c_5_a_text_field_holds_text(body, path):
    """Attack (defence in depth): a completion's `prompt` or SGLang's `text` as an object (the Responses API's stored
    prompt, `{"id": "pmpt_..."}`): the allow-list took both as free-form content, so only the stored-object check
    (R18a-1), a deny-style list, refused it.
    Defence: a prompt, /generate's text and instructions are text: strings, token ids, lists of them."""
    assert addon.unlisted_fields(body, f"http://m{path}")


@pytest.mark.parametrize("body, path", [
    ({"model": "default", "prompt": ["a", "b"]}, "/v1/completions"), ({"model": "default", "prompt": [[1, 2]]},
                                                                       "/v1/completions"),
    ({"text": ["a", "b"]}, "/generate"),
], ids=["prompts", "token-ids", "generate-batch"])
def test_r20c_5_control_text_in_every_shape_passes(body, path):
    assert addon.unlisted_fields(body, f"http://m{path}") == []
