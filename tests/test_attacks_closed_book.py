"""Closed book as allow-lists (the proxy addon, `images/proxy/egress_addon.py`): the tools the client runs itself,
the models the agent's config names, a model server's own paths. Each deny-list these replace let through what
it did not name: against main 3acb2d0's addon every attack below passed except `two-types`, which its folded
`type` check already caught; pinned models had no counterpart there (any model name passed)."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest
from test_attacks_redteam15f import run
from test_egress import load_addon

addon = load_addon()


# --- hosted tools the deny-list never named --------------------------------------------------------------------

@pytest.mark.parametrize("tool", [
    {"type": "browser_search"},  # Groq's built-in browsing for its gpt-oss models: the provider fetches pages
    {"type": "document_library", "library_ids": ["lib"]},  # Mistral's agents: the provider searches documents
    {"type": "tool_search_tool_regex_20251119", "name": "tool_search"},  # Anthropic: a tool the server runs
    {"type": "Web-Search"},  # a lax server that folds case and '-' reads web_search
    {"type": "function", "TYPE": "web_search", "function": {"name": "f"}},  # a Go gateway reads the last "type"
    {"googleSearchNext": {}},  # a Gemini tool key nobody listed yet: no name, no function declarations
    {"name": "lookup", "input_schema": {}, "type": ["web_search"]},  # a type that is not a string
    "web_search",  # not an object at all: a lax gateway takes a bare string as a tool's type
], ids=["groq-browser_search", "mistral-document_library", "anthropic-tool_search", "folded-type", "two-types",
        "gemini-unlisted-key", "list-type", "bare-string"])
def test_only_client_tools_reach_the_model(tmp_path, monkeypatch, tool):
    own = {"type": "function", "function": {"name": "bash", "parameters": {"type": "object"}}}
    refused, flow = run(tmp_path, monkeypatch, {"model": "m", "tools": [own, tool]})
    assert not refused
    assert json.loads(flow.request.content)["tools"] == [own], tool


@pytest.mark.parametrize("tool", [
    {"type": "function", "function": {"name": "bash", "parameters": {"type": "object"}}},  # OpenAI chat
    {"type": "function", "name": "bash", "parameters": {}, "strict": True},  # OpenAI responses
    {"type": "custom", "name": "apply", "format": {"type": "text"}},  # OpenAI custom (freeform)
    {"name": "bash", "description": "run", "input_schema": {"type": "object"}, "cache_control": {"type": "x"}},
    {"type": "custom", "name": "bash", "input_schema": {}},  # Anthropic, typed
    {"type": "bash_20250124", "name": "bash"}, {"type": "text_editor_20250728", "name": "str_replace_based_edit_tool"},
    {"functionDeclarations": [{"name": "bash"}]},  # Gemini
    {"type": "shell"}, {"type": "apply_patch"}, {"type": "local_shell"},  # OpenAI's tools the client runs
], ids=["openai-chat", "openai-responses", "openai-custom", "anthropic", "anthropic-custom", "anthropic-bash",
        "anthropic-editor", "gemini", "openai-shell", "openai-apply_patch", "openai-local_shell"])
def test_control_client_tools_pass_untouched(tmp_path, monkeypatch, tool):
    refused, flow = run(tmp_path, monkeypatch, {"model": "m", "tools": [tool]})
    assert not refused and json.loads(flow.request.content)["tools"] == [tool]


# --- models that search by their name ---------------------------------------------------------------------------

@pytest.mark.parametrize("body, path", [
    ({"model": "gpt-4o-search-preview", "messages": []}, "/v1/chat/completions"),
    ({"model": "sonar", "messages": []}, "/v1/chat/completions"),  # Perplexity: every answer is searched
    ({"Model": "sonar-pro", "messages": []}, "/v1/chat/completions"),  # a Go gateway reads "Model"
    ({"model": "default", "models": ["perplexity/sonar"]}, "/v1/chat/completions"),  # OpenRouter's fallbacks
    ({"model": "default", "fallbacks": [{"model": "sonar"}]}, "/v1/chat/completions"),  # LiteLLM's
    (json.dumps([{"model": "default"}, {"model": "gpt-4o-search-preview"}]), "/v1/chat/completions"),  # a batch
    ({"model": ["default", "sonar"]}, "/v1/chat/completions"),  # not a string: a lax server takes one
    ({"contents": []}, "/v1beta/models/gemini-2.5-flash-search:generateContent"),  # Gemini names it in the path
], ids=["openai-search-preview", "sonar", "folded-key", "openrouter-models", "litellm-fallbacks", "batch", "list",
        "gemini-path"])
def test_only_the_pinned_models_are_asked(tmp_path, monkeypatch, body, path):
    refused, _ = run(tmp_path, monkeypatch, body, path=path, models=["default"])
    assert refused
    log = [json.loads(line) for line in (tmp_path / "audit.jsonl").read_text().splitlines()]
    assert log[-1]["allowed"] is False and "is not one the agent's config names" in log[-1]["note"]


@pytest.mark.parametrize("body, path", [
    ({"model": "default", "messages": [{"role": "user", "content": "model: sonar"}]}, "/v1/chat/completions"),
    ({"messages": []}, "/v1/chat/completions"),  # no model named: the server's own
    ({"text": "hi", "sampling_params": {}}, "/generate"),  # SGLang's native API names none
    ({"contents": []}, "/v1beta/models/default:generateContent"),
    ({"model": "default", "tools": [{"type": "function", "function": {"name": "f", "parameters": {
        "properties": {"model": {"type": "string", "default": "sonar"}}}}}]}, "/v1/chat/completions"),
], ids=["in-text", "unnamed", "sglang-generate", "gemini-path", "tool-schema"])
def test_control_the_pinned_model_passes(tmp_path, monkeypatch, body, path):
    refused, _ = run(tmp_path, monkeypatch, body, path=path, models=["default"])
    assert not refused


def test_the_config_requires_pinned_models_for_closed_book(tmp_path):
    from sweserve.agents.config import CommandAgentConfig

    with pytest.raises(ValueError, match="closed_book needs `models`"):
        CommandAgentConfig(kind="command", name="a", command="true", egress=["http://10.0.0.5:30000"],
                           closed_book=True)


# --- a gateway's own endpoints behind a model path's suffix -------------------------------------------------------

@pytest.mark.parametrize("path", ["/key/generate", "/v1/key/generate", "/team/generate"])
def test_a_gateways_generate_endpoints_are_refused(tmp_path, monkeypatch, path):
    """LiteLLM's POST /key/generate makes an API key for its proxy: `/generate` was a suffix like the others."""
    refused, _ = run(tmp_path, monkeypatch, {"models": ["default"]}, path=path)
    assert refused, path


def test_a_logits_processor_is_never_sent_to_the_shared_server(tmp_path, monkeypatch):
    """SGLang's /generate unpickles `custom_logit_processor` on a server started with
    --enable-custom-logit-processor: the agent's code would run in the server every trial shares."""
    body = {"text": "hi", "custom_logit_processor": "gASV...", "sampling_params": {"custom_params": {}}}
    refused, flow = run(tmp_path, monkeypatch, body, path="/generate")
    assert not refused and "custom_logit_processor" not in json.loads(flow.request.content)


# --- red team 16d's leads ------------------------------------------------------------------------------------------

@pytest.mark.parametrize("body", [
    {"model": "default", "api_base": "http://203.0.113.9/v1"},  # LiteLLM: call this base instead
    {"model": "default", "custom_llm_provider": "openai", "base_url": "http://203.0.113.9"},
    {"model": "default", "user_config": {"model_list": [{"model_name": "default", "litellm_params": {
        "model": "default", "api_base": "http://203.0.113.9"}}]}},  # a whole router config
    {"model": "default", "preset": "web"},  # OpenRouter's presets carry plugins and models
    {"model": "default", "metadata": {"API_BASE": "http://203.0.113.9"}},  # nested, folded
], ids=["api_base", "base_url", "user_config", "preset", "nested"])
def test_a_gateways_routing_fields_are_refused(tmp_path, monkeypatch, body):
    refused, _ = run(tmp_path, monkeypatch, body, models=["default"])
    assert refused


def test_control_a_routing_word_in_the_conversation_passes(tmp_path, monkeypatch):
    body = {"model": "default", "messages": [{"role": "assistant", "content": [{"type": "tool_use", "id": "t",
                                                                            "name": "bash", "input": {
        "command": "grep api_base config.py", "api_base": "x", "plugins": [{"id": "web"}]}}]}]}
    refused, flow = run(tmp_path, monkeypatch, body, models=["default"])
    assert not refused
    assert json.loads(flow.request.content) == body  # the history goes as the agent wrote it


def test_anthropic_client_tool_fields_keep_the_tool(tmp_path, monkeypatch):
    tool = {"name": "bash", "input_schema": {"type": "object"}, "defer_loading": True, "eager_input_streaming": True,
            "allowed_callers": ["direct"]}
    refused, flow = run(tmp_path, monkeypatch, {"model": "m", "tools": [tool]})
    assert not refused and json.loads(flow.request.content)["tools"] == [tool]


# --- a tunnel's TLS server name ----------------------------------------------------------------------------------

@pytest.mark.parametrize("host, sni, ok", [
    ("api.example.com", "api.example.com", True), ("api.example.com", "API.example.com.", True),
    ("api.example.com", "other-tenant.example.net", False),  # fronting: the same CDN, another site
    ("api.example.com", None, False),  # a host name with no SNI: the front picks the site from the Host inside TLS
    ("203.0.113.7", None, True), ("[2001:db8::1]", None, True),
    ("203.0.113.7", "other-tenant.example.net", False),
])
def test_a_tunnel_passes_only_when_its_server_name_is_the_connects_host(tmp_path, host, sni, ok):
    e = addon.Egress(["https://api.example.com:443"], False, tmp_path)
    data = SimpleNamespace(context=SimpleNamespace(server=SimpleNamespace(address=(host, 443)),
                                                   client=SimpleNamespace(peername=("10.1.1.2", 5555))),
                           client_hello=SimpleNamespace(sni=sni), ignore_connection=False,
                           establish_server_tls_first=True)
    e.tls_clienthello(data)
    assert data.ignore_connection is ok and data.establish_server_tls_first is ok
    log = (tmp_path / "audit.jsonl").read_text() if (tmp_path / "audit.jsonl").exists() else ""
    assert ("not the host the CONNECT named" in log) is not ok


def test_a_tuned_model_in_a_gemini_path_must_be_pinned(tmp_path, monkeypatch):
    refused, _ = run(tmp_path, monkeypatch, {"contents": []}, path="/v1beta/tunedModels/search-tuned:generateContent",
                     models=["default"])
    assert refused
