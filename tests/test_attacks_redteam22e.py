"""Red team 22e: the newest egress and meter fixes, and their neighbours (`images/proxy/egress_addon.py`).

Each attack is a test that FAILS while the attack wins and passes once defended; controls keep honest clients'
requests passing. All run on the host against the addon's hooks: no Docker.

- R22e-1 (the meter, both modes): an OpenAI chat or completions stream without `stream_options.include_usage`
  states no usage. The meter counts it unread with a floor of one completion token a chunk and 0 prompt tokens: an
  agent streaming every call (`include_usage` false, null or absent) with 100k-token prompts leaves a meter whose
  prompt floor is 0, and its own record of 0 prompt tokens (no cost) stands unflagged. Defence: the proxy asks for the
  usage itself: a passed OpenAI chat or completions call that streams goes on with `include_usage: true`.
- R22e-2 (closed book): a hosted tool named only in `tool_choice`. Stripping kept `tool_choice` whenever a client
  tool was left (or no `tools` came at all): `{"type": "web_search_preview"}`, an `allowed_tools` list of hosted
  types, Anthropic's `{"type": "tool", "name": "web_search"}` all passed the field allow-list (TOOL_CHOICE takes any
  `type` and `name`) to a provider or gateway that may add the tool it names. Defence: a `tool_choice` may name only
  the tools the request keeps (their names and types) and the modes (`auto`, `any`, `function` ...); else it goes.
- R22e-3 (the meter, both modes): a transfer coding asked in `TE` (a client header forwarded with any value).
  R22a-2 kept `Accept-Encoding` to the codings mitmproxy undoes, but `TE: gzip` asks a server for a gzip *transfer*
  coding: mitmproxy frames `Transfer-Encoding: gzip, chunked` (or `gzip` to the end) and forwards the body still
  gzipped, with no Content-Encoding: unread, its floor 0 tokens. Defence: a passed call's `TE` keeps `trailers` only
  (the one value a client sends; chunked needs none), removed when none is left.
- R22e-4 (open book): a key spelt with a JSON escape. Open book parses a body only when its bytes hold the key's
  name (`b"rid" in content`), so `"\\u0072id": "0"` (SGLang's request id, R18b-4) and `"\\u0073tream": true` (R22e-1)
  went on as they came, read by the server as `rid` and `stream`. Defence: every JSON body of a call is read.
- R22e-5 (the meter): a Gemini stream whose usage is unread (no `usageMetadata` in its chunks: Vertex states it on
  the last chunk only, and a stream cut before it has none) added 0 tokens: the per-chunk floor read only OpenAI's
  `choices` and a top-level `delta`, never Gemini's `candidates[].content.parts`. Defence: a Gemini chunk's candidate
  carrying output (a part's text or function call) is a token at least, as a choice is.
"""

from __future__ import annotations

import json

import pytest
from test_attacks_redteam15f import MODEL
from test_attacks_redteam16e import addon, call, no_mitmproxy  # noqa: F401  (no_mitmproxy: an autouse fixture)


def forwarded(tmp_path, closed_book: bool, path: str, body) -> dict | None:
    """The body the proxy sent on (None if it refused the call)."""
    e = addon.Egress([MODEL], closed_book, tmp_path, ["default"])
    e.running()
    f = call(path, body, b"")
    e.request(f)
    if not json.loads((tmp_path / "audit.jsonl").read_text().splitlines()[-1])["allowed"]:
        return None
    return json.loads(f.request.content)


CHAT = {"model": "default", "messages": [{"role": "user", "content": "x" * 1000}]}


# --- R22e-1 --------------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("closed_book", [False, True], ids=["open-book", "closed-book"])
@pytest.mark.parametrize("path, extra", [
    ("/v1/chat/completions", {}),
    ("/v1/chat/completions", {"stream_options": {"include_usage": False}}),
    ("/v1/chat/completions", {"stream_options": None}),
    ("/v1/chat/completions", {"stream_options": {"continuous_usage_stats": False}}),
    ("/v1/completions", {}),
], ids=["absent", "false", "null", "other-option", "completions"])
def test_r22e_1_an_openai_stream_goes_on_asking_for_its_usage(tmp_path, closed_book, path, extra):
    """Won: forwarded as it came; the stream stated no usage, the meter's prompt floor was 0."""
    body = {**CHAT, "stream": True, **extra} if "chat" in path else {"model": "default", "prompt": "x",
                                                                     "stream": True, **extra}
    got = forwarded(tmp_path, closed_book, path, body)
    assert got is not None, "the proxy refused the call"
    options = [v for k, v in got.items() if k.casefold() == "stream_options"]
    assert len(options) == 1 and isinstance(options[0], dict), got
    assert [v for k, v in options[0].items() if k.casefold() == "include_usage"] == [True], got
    assert {k: v for k, v in got.items() if k != "stream_options"} == {k: v for k, v in body.items()
                                                                       if k != "stream_options"}


@pytest.mark.parametrize("closed_book", [False, True], ids=["open-book", "closed-book"])
@pytest.mark.parametrize("path, body", [
    ("/v1/chat/completions", CHAT),
    ("/v1/chat/completions", {**CHAT, "stream": False}),
    ("/v1/chat/completions", {**CHAT, "stream": True, "stream_options": {"include_usage": True}}),
    ("/v1/responses", {"model": "default", "input": "hi", "stream": True}),
    ("/v1/messages", {"model": "default", "max_tokens": 8, "messages": [], "stream": True}),
], ids=["no-stream", "stream-false", "already-asked", "responses", "anthropic"])
def test_r22e_1_control_other_calls_go_on_as_they_came(tmp_path, closed_book, path, body):
    assert forwarded(tmp_path, closed_book, path, body) == body


# --- R22e-2 --------------------------------------------------------------------------------------------------------

FUNCTION = {"type": "function", "name": "bash", "parameters": {"type": "object"}}
CLAUDE_TOOL = {"name": "bash", "input_schema": {"type": "object"}}


def choice_named(got) -> str:
    return json.dumps([v for k, v in got.items() if k.casefold() == "tool_choice"])


@pytest.mark.parametrize("path, body", [
    ("/v1/responses", {"model": "default", "input": "hi", "tools": [FUNCTION],
                       "tool_choice": {"type": "web_search_preview"}}),
    ("/v1/responses", {"model": "default", "input": "hi", "tool_choice": {"type": "web_search"}}),
    ("/v1/responses", {"model": "default", "input": "hi", "tools": [FUNCTION], "tool_choice": {
        "type": "allowed_tools", "mode": "required", "tools": [{"type": "web_search"}, {"type": "code_interpreter"}]}}),
    ("/v1/messages", {"model": "default", "max_tokens": 8, "messages": [], "tools": [CLAUDE_TOOL],
                      "tool_choice": {"type": "tool", "name": "web_search"}}),
    ("/v1/chat/completions", {**CHAT, "tools": [{"type": "function", "function": {"name": "bash"}}],
                              "tool_choice": {"type": "function", "function": {"name": "web_search"}}}),
], ids=["hosted-type", "no-tools", "allowed-tools", "anthropic-name", "chat-function-name"])
def test_r22e_2_a_hosted_tool_named_only_in_tool_choice_goes(tmp_path, path, body):
    """Won: forwarded with the hosted tool named in tool_choice."""
    got = forwarded(tmp_path, True, path, body)
    assert got is None or not any(word in choice_named(got) for word in ("web_search", "code_interpreter")), got


@pytest.mark.parametrize("path, body", [
    ("/v1/responses", {"model": "default", "input": "hi", "tools": [FUNCTION], "tool_choice": "required"}),
    ("/v1/responses", {"model": "default", "input": "hi", "tools": [FUNCTION],
                       "tool_choice": {"type": "function", "name": "bash"}}),
    ("/v1/responses", {"model": "default", "input": "hi", "tools": [FUNCTION], "tool_choice": {
        "type": "allowed_tools", "mode": "auto", "tools": [{"type": "function", "name": "bash"}]}}),
    ("/v1/messages", {"model": "default", "max_tokens": 8, "messages": [], "tools": [CLAUDE_TOOL],
                      "tool_choice": {"type": "tool", "name": "bash", "disable_parallel_tool_use": True}}),
    ("/v1/messages", {"model": "default", "max_tokens": 8, "messages": [], "tools": [CLAUDE_TOOL],
                      "tool_choice": {"type": "any"}}),
    ("/v1/chat/completions", {**CHAT, "tools": [{"type": "function", "function": {"name": "bash"}}],
                              "tool_choice": {"type": "function", "function": {"name": "bash"}}}),
], ids=["mode", "function", "allowed-tools", "anthropic-tool", "anthropic-any", "chat-function"])
def test_r22e_2_control_a_choice_of_the_clients_own_tools_passes(tmp_path, path, body):
    assert forwarded(tmp_path, True, path, body) == body


# --- R22e-3 --------------------------------------------------------------------------------------------------------

def forwarded_te(tmp_path, closed_book: bool, value: str) -> list[str]:
    e = addon.Egress([MODEL], closed_book, tmp_path, ["default"])
    e.running()
    f = call("/v1/chat/completions", CHAT, b"")
    f.request.headers["TE"] = value
    e.request(f)
    assert f.response is None, "the proxy refused the call"
    return [v for k, v in f.request.headers.items() if k.lower() == "te"]


@pytest.mark.parametrize("closed_book", [False, True], ids=["open-book", "closed-book"])
@pytest.mark.parametrize("value", ["gzip", "trailers, deflate;q=0.5", "compress", "x-gzip, trailers"])
def test_r22e_3_a_call_asks_for_no_transfer_coding(tmp_path, closed_book, value):
    """Won: forwarded as it came; a server answering in that transfer coding was unread, its floor 0 tokens."""
    got = forwarded_te(tmp_path, closed_book, value)
    items = {item.split(";")[0].strip().lower() for v in got for item in v.split(",") if item.strip()}
    assert items <= {"trailers"}, f"forwarded TE {got!r}"


def test_r22e_3_control_te_trailers_passes(tmp_path):
    assert forwarded_te(tmp_path, True, "trailers") == ["trailers"]


# --- R22e-4 --------------------------------------------------------------------------------------------------------

def open_book_forwarded(tmp_path, raw: bytes) -> dict:
    e = addon.Egress([MODEL], False, tmp_path, ["default"])
    e.running()
    f = call("/v1/chat/completions", None, b"")
    f.request.content = raw
    e.request(f)
    assert f.response is None, "the proxy refused the call"
    return json.loads(f.request.content)


@pytest.mark.parametrize("raw", [
    b'{"model": "default", "messages": [], "\\u0072id": "0"}',
    b'{"model": "default", "messages": [], "\\u0052ID": "0"}',
    b'{"model": "default", "messages": [], "r\\u0069d": ["0", "1"]}',
], ids=["escaped-r", "escaped-upper", "escaped-i"])
def test_r22e_4_an_escaped_rid_is_removed_in_open_book(tmp_path, raw):
    """Won: forwarded as it came; the shared server read `rid` and aborted every other trial's calls by its prefix."""
    got = open_book_forwarded(tmp_path, raw)
    assert not [k for k in got if k.casefold() == "rid"], got


def test_r22e_4_an_escaped_stream_asks_for_its_usage_in_open_book(tmp_path):
    """Won: forwarded without include_usage; the stream was unread, its prompt floor 0."""
    got = open_book_forwarded(tmp_path, b'{"model": "default", "messages": [], "\\u0073tream": true}')
    assert got.get("stream_options") == {"include_usage": True}, got


def test_r22e_4_control_a_plain_body_goes_as_it_came(tmp_path):
    raw = b'{"model": "default", "messages": [{"role": "user", "content": "rid stream"}]}'
    assert open_book_forwarded(tmp_path, raw) == json.loads(raw)


# --- R22e-5 --------------------------------------------------------------------------------------------------------

def gemini_chunk(text: str | None = None, call: dict | None = None) -> dict:
    part = {"text": text} if text is not None else {"functionCall": call}
    return {"candidates": [{"content": {"role": "model", "parts": [part]}, "index": 0}]}


def test_r22e_5_an_unread_gemini_stream_still_counts_its_chunks_of_output():
    """Won: 0 tokens added for a stream of output with no usage."""
    chunks = [gemini_chunk("def fix():"), gemini_chunk(" return 1"), gemini_chunk(call={"name": "bash", "args": {}})]
    raw = b"".join(b"data: " + json.dumps(c).encode() + b"\r\n\r\n" for c in chunks)
    assert addon.stream_output(raw, "text/event-stream") >= 3


def test_r22e_5_control_a_gemini_chunk_of_no_output_counts_nothing():
    empty = {"candidates": [{"content": {"role": "model", "parts": [{"text": ""}]}, "finishReason": "STOP"}]}
    raw = b"data: " + json.dumps(empty).encode() + b"\r\n\r\n"
    assert addon.stream_output(raw, "text/event-stream") == 0
