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
All run on the host against the addon's hooks: no Docker.
"""

from __future__ import annotations

import json

import pytest
from test_attacks_redteam16e import addon, no_mitmproxy  # noqa: F401  (no_mitmproxy: an autouse fixture)
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
