"""Red team 23a: open book's reading of a body and the meter's floor (`images/proxy/egress_addon.py`).

- R23a-1: a key twice in an open-book body. Open book reads the body with Python's `json.loads`, which keeps the last
  of a repeated key, and forwards it as it came unless it changed something: `{"stream": true, ..., "stream": false}`
  is no stream to Python (no `include_usage` asked) and a stream to a server keeping the first (simdjson's on-demand
  `find_field`, a hand-rolled scanner); `"stream_options": {"include_usage": false}` first and `{"include_usage": true}`
  last is already asked to Python. The stream states no usage: its prompt floor 0 under any record. Closed book sends
  what it read (R15a); open book now does too whenever a key repeats.
- R23a-2: an unread Gemini stream's floor counted only a part's `text` and `functionCall` (R22e-5): an image model's
  `inlineData`, a code execution's `executableCode` and `codeExecutionResult`, a `fileData` are output too, and a
  stream of them added 0 tokens. A part holding anything is a chunk of output now.
- R23a-3: the floor read event streams only: the same chunks as one JSON array (Gemini's `:streamGenerateContent`
  without `alt=sse`) or a JSON answer whose usage is unread added 0 tokens. A JSON answer is read as its chunks now.
- R23a-4: data after the body's JSON value (`{...}{}`): Python refuses it, open book forwarded it as it came, and Go's
  json.Decoder (gin's ShouldBindJSON: Ollama's OpenAI API) reads the first value: `stream: true` without its usage.
All run on the host against the addon's hooks: no Docker.
"""

from __future__ import annotations

import json

import pytest
from test_attacks_redteam16e import addon, call, meter, no_mitmproxy  # noqa: F401  (no_mitmproxy: an autouse fixture)
from test_attacks_redteam22i import open_book


def first_wins(raw: bytes) -> dict:
    """What a server keeping the first of a repeated key reads."""
    return json.loads(raw, object_pairs_hook=lambda pairs: dict(reversed(pairs)))


# --- R23a-1 --------------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("raw", [
    b'{"model": "default", "messages": [], "stream": true, "stream": false}',
    b'{"model": "default", "messages": [], "stream": true, "stream_options": {"include_usage": false},'
    b' "stream_options": {"include_usage": true}}',
    b'{"model": "default", "messages": [], "stream": true,'
    b' "stream_options": {"include_usage": false, "include_usage": true}}',
    b'{"model": "default", "messages": [], "rid": "x", "stream": true, "stream": false}',
], ids=["stream", "stream-options", "include-usage", "with-rid"])
def test_r23a_1_a_repeated_key_goes_on_as_open_book_read_it(tmp_path, raw):
    """Won: forwarded as it came; a first-key server streamed without `include_usage`, the stream unread."""
    req = open_book(tmp_path, raw)
    assert req is not None
    got = first_wins(req.content)
    assert got == json.loads(req.content), req.content
    assert not got.get("stream") or got.get("stream_options") == {"include_usage": True}, req.content


def test_r23a_1_control_a_body_of_no_repeated_key_goes_as_it_came(tmp_path):
    raw = b'{"model": "default", "messages": [{"role": "user", "content": "stream stream"}], "stream": false}'
    req = open_book(tmp_path, raw)
    assert req is not None and req.content == raw


# --- R23a-2 --------------------------------------------------------------------------------------------------------

def gemini_stream(*parts: dict) -> bytes:
    chunks = [{"candidates": [{"content": {"role": "model", "parts": [part]}, "index": 0}]} for part in parts]
    return b"".join(b"data: " + json.dumps(c).encode() + b"\r\n\r\n" for c in chunks)


@pytest.mark.parametrize("part", [
    {"inlineData": {"mimeType": "image/png", "data": "iVBORw0KGgo="}},
    {"executableCode": {"language": "PYTHON", "code": "print(1)"}},
    {"codeExecutionResult": {"outcome": "OUTCOME_OK", "output": "1\n"}},
    {"fileData": {"mimeType": "image/png", "fileUri": "gs://b/x.png"}},
], ids=["inline-data", "executable-code", "code-execution-result", "file-data"])
def test_r23a_2_an_unread_gemini_stream_of_parts_that_are_not_text_counts_its_chunks(part):
    """Won: 0 tokens for three chunks of generated output."""
    assert addon.stream_output(gemini_stream(part, part, part), "text/event-stream") >= 3


@pytest.mark.parametrize("part", [{"text": ""}, {}, {"thought": False}], ids=["empty-text", "empty", "flag"])
def test_r23a_2_control_a_gemini_part_of_nothing_counts_nothing(part):
    assert addon.stream_output(gemini_stream(part), "text/event-stream") == 0


# --- R23a-3 --------------------------------------------------------------------------------------------------------
# The floor read event streams only: the same chunks as one JSON array (Gemini's `:streamGenerateContent` without
# `alt=sse`, whose usage Vertex states on the last chunk alone) or a JSON answer whose usage is unread added 0 tokens,
# where the same output streamed as events added a token a chunk.

GEMINI_PATH = "/v1beta/models/default:streamGenerateContent"


def gemini_array(n: int) -> bytes:
    return json.dumps([{"candidates": [{"content": {"role": "model", "parts": [{"text": f"line {i}"}]}, "index": 0}]}
                       for i in range(n)]).encode()


def test_r23a_3_an_unread_gemini_json_array_stream_counts_its_chunks(tmp_path):
    """Won: three chunks of output, 0 tokens; the same as events counted 3 (R22e-5)."""
    body = {"contents": [{"role": "user", "parts": [{"text": "fix it"}]}]}
    m = meter(tmp_path, [call(GEMINI_PATH, body, gemini_array(3))])
    assert (m.unread, m.completion_tokens) == (1, 3), m


@pytest.mark.parametrize("answer_body", [
    {"id": "c", "object": "chat.completion", "choices": [{"index": 0, "message": {"role": "assistant",
                                                                                    "content": "the fix"}}]},
    {"id": "c", "object": "text_completion", "choices": [{"index": 0, "text": "the fix"},
                                                          {"index": 1, "text": "another"}]},
], ids=["chat", "completions-n2"])
def test_r23a_3_an_unread_json_answer_counts_its_choices_of_output(answer_body):
    """Won: an answer of output whose usage is unread added 0 tokens."""
    n = len(answer_body["choices"])
    assert addon.stream_output(json.dumps(answer_body).encode(), "application/json") >= n


@pytest.mark.parametrize("answer_body", [
    {"object": "list", "data": [{"id": "default", "object": "model"}]},
    {"choices": [{"index": 0, "message": {"role": "assistant", "content": ""}}]},
    [], "not json",
], ids=["listing", "empty-message", "empty-list", "not-json"])
def test_r23a_3_control_an_answer_of_no_output_counts_nothing(answer_body):
    raw = answer_body.encode() if isinstance(answer_body, str) else json.dumps(answer_body).encode()
    assert addon.stream_output(raw, "application/json") == 0


# --- R23a-4 --------------------------------------------------------------------------------------------------------
# Data after the body's JSON value. Python refuses the body ("Extra data") and open book forwarded it as it came; Go's
# json.Decoder, which gin's ShouldBindJSON reads a body with (Ollama's OpenAI-compatible API, a Go gateway), reads the
# first value and leaves the rest: a stream that asked for no usage, its prompt floor 0.

def first_value(raw: bytes):
    """What Go's json.Decoder reads: the first JSON value, whatever follows it."""
    return json.JSONDecoder().raw_decode(raw.decode("utf-8", "replace").lstrip())[0]


@pytest.mark.parametrize("tail", [b"{}", b" x", b"\n]", b'{"stream": false}'], ids=["object", "word", "bracket",
                                                                                    "second-body"])
def test_r23a_4_a_stream_with_data_after_its_json_asks_for_its_usage(tmp_path, tail):
    """Won: forwarded as it came; a Go server read `stream: true` and streamed without its usage."""
    raw = b'{"model": "default", "messages": [], "stream": true}' + tail
    req = open_book(tmp_path, raw)
    assert req is None or first_value(req.content).get("stream_options") == {"include_usage": True}, req.content


def test_r23a_4_a_rid_with_data_after_its_json_is_removed(tmp_path):
    req = open_book(tmp_path, b'{"model": "default", "text": "x", "rid": "0"} {}', "/generate")
    assert req is None or "rid" not in first_value(req.content), req.content


def test_r23a_4_control_a_body_with_trailing_whitespace_goes_as_it_came(tmp_path):
    raw = b'{"model": "default", "messages": [], "stream": false}\r\n'
    req = open_book(tmp_path, raw)
    assert req is not None and req.content == raw
