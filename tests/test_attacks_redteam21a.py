"""Red team 21a: closed book and the meter after red team 20c's field allow-list (`images/proxy/egress_addon.py`:
`unlisted_fields`, `stored_refs`, `usage_in`; `sweserve/evaluation/trial.with_meter`).

Each attack is a test that FAILS while the attack wins and passes once defended; controls keep honest clients'
requests and records passing. All run on the host against the addon's hooks (`call`/`meter` from
test_attacks_redteam16e, `run` from test_attacks_redteam15f): no Docker.

- R21a-1 (the meter): Anthropic's server-side compaction (`context_management.edits: [{"type": "compact_20260112"}]`,
  beta `compact-2026-01-12`) runs an extra sampling step inside one Messages call: the model reads the whole
  conversation and writes a summary, then answers from the summary. The answer's top-level `usage` states only the
  final step; every step, the compaction's too, is in `usage.iterations`. `context_management` is an allowed field
  (ANY), the beta header an allowed `anthropic-` one, and the meter read the top level alone: a complete meter short
  by the compaction's 180k prompt tokens, an agent's record agreeing with it unflagged, and an honest record that
  sums the iterations disputed. Defence: a usage's `iterations` are read too, each by the same shapes; the count is
  the larger of the top level and their sum.
- R21a-2 (closed book): a stored object named by a bare id inside the conversation. The Responses API's
  `item_reference` input item has an optional `type` (it defaults to `item_reference`): `{"id": "msg_..."}` or
  `{"type": null, "id": ...}` reads a stored item into the conversation; Chat Completions' assistant message takes
  `"audio": {"id": "audio_..."}`, a previous audio answer the server reads back. `stored_refs` read only a string
  `type`, and content is ANY to the allow-list: passed. Defence: an object whose only (non-null) field is an `id`
  is a reference to a stored object, wherever it stands outside `tools`, schemas and the agent's own tool calls'
  arguments and results. Variants: vLLM's media `uuid` (the key of the shared server's multimodal processor cache,
  with the media null or beside it: another trial's image read by its uuid); an id beside nothing but a `type`.
- R21a-3 (the meter): an answer format the meter cannot read, asked for by an allowed query parameter. Google's APIs
  take the system parameter `alt` as `json`, `sse`, `media` or `proto`; closed book passed `alt` with any plain
  token, so `:generateContent?alt=proto` got a binary protobuf answer: no usage read, no stream chunks, a floor of 0
  tokens, and any record of the agent's above 0 stood unflagged (its cost too), every call so. Defence: each client
  query parameter has the values clients send (`alt`: `sse`, `json`; `beta`: `true`), not any token.
"""

from __future__ import annotations

import json

import pytest
from test_attacks_metering import SSE, events
from test_attacks_redteam15f import run
from test_attacks_redteam16e import call, meter, no_mitmproxy  # noqa: F401  (no_mitmproxy: an autouse fixture)
from test_attacks_redteam19a import HONEST

from sweserve.evaluation.trial import with_meter
from sweserve.models import AgentRun

PINNED = ["default"]

# --- R21a-1 --------------------------------------------------------------------------------------------------------

COMPACTING = {"model": "default", "max_tokens": 4096,
              "messages": [{"role": "user", "content": "a long session ..."}],
              "context_management": {"edits": [{"type": "compact_20260112",
                                                "trigger": {"type": "input_tokens", "value": 50000}}]}}
# the documented example: the compaction read 180k tokens and wrote 3.5k; the answer read the 23k left and wrote 1k
ITERATIONS = [{"type": "compaction", "input_tokens": 180000, "output_tokens": 3500},
              {"type": "message", "input_tokens": 23000, "output_tokens": 1000}]
COMPACTED = {"id": "msg_1", "type": "message", "role": "assistant", "model": "default",
             "content": [{"type": "compaction", "content": "Summary ..."}, {"type": "text", "text": "Done."}],
             "usage": {"input_tokens": 23000, "output_tokens": 1000, "iterations": ITERATIONS}}


def test_r21a_1_a_compaction_step_is_metered(tmp_path, monkeypatch):
    """The call passes closed book (an allowed field, an allowed beta header), and its answer used 203k prompt and 4.5k
    completion tokens. Won: metered 23k and 1k, complete; a record saying so unflagged, an honest one disputed."""
    refused, _ = run(tmp_path / "req", monkeypatch, COMPACTING, path="/v1/messages", models=PINNED,
                     headers={"content-type": "application/json", "anthropic-beta": "compact-2026-01-12"})
    assert not refused, "an honest compacting call passes"
    m = meter(tmp_path, [call("/v1/messages", COMPACTING, json.dumps(COMPACTED).encode())])
    assert m.complete
    assert (m.prompt_tokens, m.completion_tokens) == (203000, 4500), "the compaction's tokens were not metered"
    forged = AgentRun(agent="claude-code", prompt_tokens=23000, completion_tokens=1000, cost_usd=0.08,
                      usage_from="agent", exit_reason="submitted")
    assert any(f.startswith("usage_disagrees") for f in with_meter(forged, m).flags)
    honest = forged.model_copy(update={"prompt_tokens": 203000, "completion_tokens": 4500, "cost_usd": 0.68})
    assert not with_meter(honest, m).flags


def test_r21a_1_a_streamed_compaction_step_is_metered(tmp_path):
    """The same streamed: the iterations come in the last `message_delta`'s usage."""
    stream = events(
        {"type": "message_start", "message": {"id": "msg_1", "type": "message", "role": "assistant",
                                              "content": [], "usage": {"input_tokens": 23000, "output_tokens": 1}}},
        {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "Done."}},
        {"type": "message_delta", "delta": {"stop_reason": "end_turn"},
         "usage": {"input_tokens": 23000, "output_tokens": 1000, "iterations": ITERATIONS}})
    m = meter(tmp_path, [call("/v1/messages", {**COMPACTING, "stream": True}, stream, ctype=SSE)])
    assert m.complete and (m.prompt_tokens, m.completion_tokens) == (203000, 4500)


@pytest.mark.parametrize("iterations, want", [
    ([], (23000, 1000)),  # no compaction happened: the top level is the call
    ([{"type": "message", "input_tokens": 23000, "output_tokens": 1000}], (23000, 1000)),  # one step: not doubled
    ([{"type": "compaction", "input_tokens": 5, "cache_read_input_tokens": 179995, "output_tokens": 3500},
      {"type": "message", "input_tokens": 23000, "output_tokens": 1000}], (203000, 4500)),  # cache reads count
], ids=["none", "one-step", "cached"])
def test_r21a_1_control_iterations_are_neither_doubled_nor_dropped(tmp_path, iterations, want):
    answer = {**COMPACTED, "usage": {"input_tokens": 23000, "output_tokens": 1000, "iterations": iterations}}
    m = meter(tmp_path, [call("/v1/messages", COMPACTING, json.dumps(answer).encode())])
    assert m.complete and (m.prompt_tokens, m.completion_tokens) == want


def test_r21a_1_an_unreadable_iteration_is_unread(tmp_path):
    """An iteration stating a count that is none (a string) makes the answer unread, as a top-level one does."""
    answer = {**COMPACTED, "usage": {"input_tokens": 23000, "output_tokens": 1000,
                                     "iterations": [{"input_tokens": "180000", "output_tokens": 3500}]}}
    m = meter(tmp_path, [call("/v1/messages", COMPACTING, json.dumps(answer).encode())])
    assert not m.complete and m.unread == 1


# --- R21a-2 --------------------------------------------------------------------------------------------------------

BY_ID = {
    "responses-untyped-reference": ({"model": "default", "input": [
        {"role": "user", "content": "go on"}, {"id": "msg_0a1b2c3d4e5f"}]}, "/v1/responses"),
    "responses-null-type": ({"model": "default", "input": [{"type": None, "id": "rs_0a1b2c"}]}, "/v1/responses"),
    "responses-folded-key": ({"model": "default", "input": [{"ID": "msg_0a1b2c"}]}, "/v1/responses"),
    "chat-audio-by-id": ({"model": "default", "messages": [
        {"role": "user", "content": "what did you say?"},
        {"role": "assistant", "audio": {"id": "audio_0a1b2c3d"}},
        {"role": "user", "content": "repeat it"}]}, "/v1/chat/completions"),
    "anthropic-block-by-id": ({"model": "default", "max_tokens": 8, "messages": [
        {"role": "user", "content": [{"id": "srvtoolu_0a1b"}, {"type": "text", "text": "hi"}]}]}, "/v1/messages"),
}
# vLLM's media UUIDs (`vllm/entrypoints/chat_utils.py`): a content part's `uuid` is the key of the shared server's
# multimodal processor cache, and its media may be null ("already cached"): the features of whatever media another
# trial sent under that uuid enter this conversation. With media of its own beside the uuid, the cache still answers
# by the uuid.
BY_UUID = {
    "vllm-uuid-null-image": ({"model": "default", "messages": [{"role": "user", "content": [
        {"type": "image_url", "image_url": None, "uuid": "sku-1234-a"}, {"type": "text", "text": "read it"}]}]},
        "/v1/chat/completions"),
    "vllm-uuid-simple-image": ({"model": "default", "messages": [{"role": "user", "content": [
        {"image_url": None, "uuid": "sku-1234-a"}]}]}, "/v1/chat/completions"),
    "vllm-uuid-beside-data": ({"model": "default", "messages": [{"role": "user", "content": [
        {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgo="}, "uuid": "sku-1234-a"}]}]},
        "/v1/chat/completions"),
    "vllm-uuid-embeds": ({"model": "default", "messages": [{"role": "user", "content": [
        {"type": "image_embeds", "image_embeds": None, "uuid": "sku-1234-a"}]}]}, "/v1/chat/completions"),
    "typed-bare-id": ({"model": "default", "input": [{"type": "message", "id": "msg_0a1b2c"}]}, "/v1/responses"),
}
BY_ID.update(BY_UUID)


@pytest.mark.parametrize("case", BY_ID.values(), ids=BY_ID.keys())
def test_r21a_2_a_stored_object_by_bare_id_is_refused(tmp_path, monkeypatch, case):
    """Won: passed (a stored item or audio answer, read into the closed-book agent's conversation)."""
    body, path = case
    refused, _ = run(tmp_path, monkeypatch, body, path=path, models=PINNED)
    assert refused, "a reference to a stored object by its id passed"


ID_HONEST = {
    # Codex's history: reasoning and function calls carry ids beside their type and content
    "codex-history": ({"model": "default", "store": False, "input": [
        {"type": "reasoning", "id": "rs_1", "summary": [], "encrypted_content": "gAAAA"},
        {"type": "function_call", "id": "fc_1", "call_id": "call_1", "name": "shell", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "call_1", "output": "ok"}]}, "/v1/responses"),
    # a chat tool call and its result
    "chat-tool-call": ({"model": "default", "messages": [
        {"role": "assistant", "tool_calls": [{"id": "call_1", "type": "function",
                                              "function": {"name": "f", "arguments": "{\"id\": \"x\"}"}}]},
        {"role": "tool", "tool_call_id": "call_1", "content": "{}"}]}, "/v1/chat/completions"),
    # an answer schema with a property named id
    "schema-id": ({"model": "default", "messages": [{"role": "user", "content": "x"}], "response_format": {
        "type": "json_schema", "json_schema": {"name": "r", "schema": {"type": "object", "properties": {
            "id": {"type": "string"}, "uuid": {"type": "string"}}, "examples": [{"id": "abc", "uuid": "u"}]}}}},
        "/v1/chat/completions"),
    # Anthropic's tool_use input and Gemini's functionCall args and functionResponse: the agent's own tools' words
    "anthropic-tool-use": ({"model": "default", "max_tokens": 8, "messages": [
        {"role": "assistant", "content": [{"type": "tool_use", "id": "toolu_1", "name": "get", "input": {"id": "7"}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "x"}]}]},
        "/v1/messages"),
    "gemini-function": ({"contents": [
        {"role": "model", "parts": [{"functionCall": {"id": "c1", "name": "get", "args": {"id": "7"}}}]},
        {"role": "user", "parts": [{"functionResponse": {"id": "c1", "name": "get", "response": {"id": "7"}}}]}]},
        "/v1beta/models/default:generateContent"),
}


@pytest.mark.parametrize("case", [*ID_HONEST.values(), *HONEST.values()], ids=[*ID_HONEST, *HONEST])
def test_r21a_2_control_ids_beside_content_pass(tmp_path, monkeypatch, case):
    body, path = case
    refused, _ = run(tmp_path, monkeypatch, body, path=path, models=PINNED)
    assert not refused, "an honest request was refused"


# --- R21a-3 --------------------------------------------------------------------------------------------------------

GEMINI_BODY = {"contents": [{"role": "user", "parts": [{"text": "fix it"}]}]}


@pytest.mark.parametrize("path", [
    "/v1beta/models/default:generateContent?alt=proto",
    "/v1beta/models/default:streamGenerateContent?alt=proto",
    "/v1beta/models/default:generateContent?alt=media",
    "/v1beta/models/default:generateContent?key=AIza&alt=PROTO",
    "/v1/messages?beta=proto",
], ids=["proto", "stream-proto", "media", "upper-proto", "beta-value"])
def test_r21a_3_an_answer_format_the_meter_cannot_read_is_refused(tmp_path, monkeypatch, path):
    """Won: passed; the binary answer was unread, its floor 0 tokens, and a record of 1 token stood."""
    body = GEMINI_BODY if ":" in path else {"model": "default", "max_tokens": 8, "messages": []}
    refused, _ = run(tmp_path, monkeypatch, body, path=path, models=PINNED)
    assert refused, f"{path} passed"


@pytest.mark.parametrize("path", [
    "/v1beta/models/default:streamGenerateContent?alt=sse",
    "/v1beta/models/default:generateContent?alt=json",
    "/v1beta/models/default:generateContent?key=AIza-Sy_0123",
    "/openai/deployments/default/chat/completions?api-version=2024-10-21",
    "/openai/deployments/default/chat/completions?api-version=2025-04-01-preview",
    "/v1/messages?beta=true",
], ids=["sse", "json", "key", "azure", "azure-preview", "anthropic-beta"])
def test_r21a_3_control_a_clients_query_values_pass(tmp_path, monkeypatch, path):
    body = GEMINI_BODY if ":" in path else ({"model": "default", "max_tokens": 8, "messages": []}
                                           if "messages" in path else {"model": "default", "messages": []})
    refused, _ = run(tmp_path, monkeypatch, body, path=path, models=PINNED)
    assert not refused


# --- a lead red team 21a left: vLLM's request id header ------------------------------------------------------------

@pytest.mark.parametrize("closed_book", [False, True])
@pytest.mark.parametrize("name", ["X-Request-Id", "x-request-id"])
def test_a_request_names_no_server_request_id_header(tmp_path, closed_book, name):
    """vLLM's OpenAI server takes a request's `X-Request-Id` header as its request id (an allowed client header):
    on a shared server one trial choosing another's id collides with its requests, and a hang-up aborts by it, as
    SGLang's body `rid` did (R18b-4). The header is removed in both modes; the server makes its own id."""
    from test_attacks_redteam15f import MODEL
    from test_attacks_redteam16e import addon

    e = addon.Egress([MODEL], closed_book, tmp_path, ["default"])
    e.running()
    f = call("/v1/chat/completions", {"model": "default", "messages": [{"role": "user", "content": "hi"}]}, b"")
    f.request.headers[name] = "chatcmpl-0"
    e.request(f)
    line = json.loads((tmp_path / "audit.jsonl").read_text().splitlines()[-1])
    assert line["allowed"], line
    assert not [h for h in f.request.headers if h.lower() == "x-request-id"], "the agent names the server's request id"
