"""Red team 23g: the meter's floor of an answer whose usage is unread, and a usage stating less than its chunks
(`images/proxy/egress_addon.py`: `stream_output`, `_chunk_output`, `answer_usage`).

- R23g-1: the floor of an unread answer looked for output only in a choice (`choices`), a Gemini candidate and an
  event's `delta` (R23a-3). An Anthropic message's `content` blocks, a Responses API answer's `output` items and
  SGLang `/generate`'s `text` sit at the answer's top level: such an answer without its usage (a gateway that leaves
  it out, SGLang without `meta_info` counts) added 0 tokens, one JSON or a stream of them.
- R23g-2: a stream's stated usage was taken as it came even when it states fewer completion tokens than the stream
  has chunks of output (a usage of one member of several, a usage stated early and never updated): five chunks of
  output metered as one token. Each chunk of output is a token at least, read usage or not.
- R23g-3: a raw control character inside a JSON string of an open-book body: Python refuses it, open book forwarded
  the body as it came, and a gateway reading with `strict=False` read `stream: true` with no usage asked.
All run on the host against the addon's hooks: no Docker.
"""

from __future__ import annotations

import json

import pytest
from test_attacks_redteam16e import addon, call, meter, no_mitmproxy  # noqa: F401  (no_mitmproxy: an autouse fixture)
from test_attacks_redteam22i import open_book


def events(*chunks) -> bytes:
    return b"".join(b"data: " + json.dumps(c).encode() + b"\n\n" for c in chunks)


# --- R23g-1 --------------------------------------------------------------------------------------------------------

ANTHROPIC = {"id": "m", "type": "message", "role": "assistant", "model": "default",
             "content": [{"type": "text", "text": "the fix"}, {"type": "tool_use", "id": "t", "name": "bash",
                                                                "input": {"command": "ls"}}]}
RESPONSES = {"id": "r", "object": "response", "status": "completed",
             "output": [{"type": "message", "role": "assistant", "content": [{"type": "output_text",
                                                                              "text": "the fix"}]}]}
GENERATE = {"text": "the fix", "meta_info": {"id": "g", "finish_reason": {"type": "stop"}}}


@pytest.mark.parametrize("answer_body", [ANTHROPIC, RESPONSES, GENERATE, [GENERATE, GENERATE]],
                         ids=["anthropic-content", "responses-output", "generate-text", "generate-batch"])
def test_r23g_1_an_unread_answer_of_top_level_output_counts_it(answer_body):
    """Won: an answer of output whose usage is unread added 0 tokens."""
    assert addon.stream_output(json.dumps(answer_body).encode(), "application/json") >= 1


def test_r23g_1_an_unread_generate_stream_counts_its_chunks():
    """Won: SGLang's /generate stream without counts, three chunks of output, 0 tokens."""
    stream = events(*({"text": "the fix"[:i], "meta_info": {"id": "g"}} for i in (1, 2, 3)))
    assert addon.stream_output(stream, "text/event-stream") >= 3


def test_r23g_1_an_unread_anthropic_answer_is_metered_as_output(tmp_path):
    body = {"model": "default", "max_tokens": 64, "messages": [{"role": "user", "content": "fix it"}]}
    m = meter(tmp_path, [call("/v1/messages", body, json.dumps(ANTHROPIC).encode())])
    assert m.unread == 1 and m.completion_tokens >= 1, m


@pytest.mark.parametrize("answer_body", [
    {"id": "m", "type": "message", "role": "assistant", "content": []},
    {"id": "r", "object": "response", "output": []},
    {"text": "", "meta_info": {}},
    {"object": "list", "data": [{"id": "default", "object": "model"}]},
], ids=["anthropic-empty", "responses-empty", "generate-empty", "listing"])
def test_r23g_1_control_an_answer_of_no_output_counts_nothing(answer_body):
    assert addon.stream_output(json.dumps(answer_body).encode(), "application/json") == 0


# --- R23g-2 --------------------------------------------------------------------------------------------------------

def chat_chunk(text: str, index: int = 0) -> dict:
    return {"id": "c", "object": "chat.completion.chunk", "choices": [{"index": index, "delta": {"content": text}}]}


def test_r23g_2_a_stream_stating_fewer_tokens_than_its_chunks_counts_its_chunks():
    """Won: five chunks of output, a usage stating 1 completion token, metered as 1."""
    stream = events(*(chat_chunk("x") for _ in range(5)),
                    {"id": "c", "choices": [], "usage": {"prompt_tokens": 3, "completion_tokens": 1}})
    usage = addon.answer_usage(stream, "text/event-stream")
    assert usage is not None and usage[0] == 3 and usage[1] >= 5, usage


def test_r23g_2_control_a_stream_stating_more_tokens_keeps_its_count():
    stream = events(*(chat_chunk("x") for _ in range(3)),
                    {"id": "c", "choices": [], "usage": {"prompt_tokens": 3, "completion_tokens": 40}})
    assert addon.answer_usage(stream, "text/event-stream") == (3, 40)


def test_r23g_2_control_a_responses_stream_is_metered_at_its_usage():
    """A Responses API stream: a delta a token, then a `.done` event restating the part's whole text: its usage."""
    stream = events(*({"type": "response.output_text.delta", "delta": "x"} for _ in range(3)),
                    {"type": "response.output_text.done", "text": "xxx"},
                    {"type": "response.completed", "response": {"id": "r", "output": [
                        {"type": "message", "content": [{"type": "output_text", "text": "xxx"}]}],
                        "usage": {"input_tokens": 5, "output_tokens": 3}}})
    assert addon.answer_usage(stream, "text/event-stream") == (5, 3)


# --- R23g-3 --------------------------------------------------------------------------------------------------------
# A raw control character (a tab, a newline) inside a JSON string. Python's `json.loads` refuses it (strict), and open
# book forwarded such a body as it came; a gateway that reads bodies with `json.loads(..., strict=False)` (an LLM proxy
# tolerating an agent's literal newlines) reads `stream: true` there and streams with no usage asked: its prompt
# floor 0 under any record.
def lax_strings(raw: bytes):
    """What a gateway reading with `strict=False` reads: control characters allowed inside strings."""
    return json.loads(raw.decode("utf-8", "replace"), strict=False)


@pytest.mark.parametrize("raw", [
    b'{"model": "default", "messages": [{"role": "user", "content": "fix\tit"}], "stream": true}',
    b'{"model": "default", "messages": [{"role": "user", "content": "fix\nit\x01"}], "stream": true}',
    b'{"model": "default", "prompt": "def f():\n    pass", "stream": true}',
], ids=["tab", "newline", "completions"])
def test_r23g_3_a_stream_with_a_raw_control_character_asks_for_its_usage(tmp_path, raw):
    """Won: forwarded as it came; a lax gateway read `stream: true` and streamed without its usage."""
    path = "/v1/completions" if b'"prompt"' in raw else "/v1/chat/completions"
    req = open_book(tmp_path, raw, path)
    assert req is None or lax_strings(req.content).get("stream_options") == {"include_usage": True}, req.content


def test_r23g_3_a_rid_with_a_raw_control_character_is_removed(tmp_path):
    req = open_book(tmp_path, b'{"model": "default", "text": "a\tb", "rid": "0"}', "/generate")
    assert req is None or "rid" not in lax_strings(req.content), req.content


def test_r23g_3_control_a_body_with_escaped_control_characters_goes_as_it_came(tmp_path):
    raw = b'{"model": "default", "messages": [{"role": "user", "content": "fix\\tit\\n"}], "stream": false}'
    req = open_book(tmp_path, raw)
    assert req is not None and req.content == raw


# --- R23g-4 --------------------------------------------------------------------------------------------------------
# `?stream=true` on an open-book call whose body asks no stream. A gateway that reads a stream from the query too (an
# LLM proxy's "stream=true for compatibility with some clients", one that streams on any `stream` query value) streams
# the answer; the body named no `stream`, so no usage was asked, the stream is unread and its prompt floor 0. Closed book
# refuses any query parameter no model client sends (R17a-2); open book checked only Google's `alt` and `fields`.

@pytest.mark.parametrize("query", ["stream=true", "stream=1", "stream=false", "$stream=true", "stream"],
                         ids=["true", "one", "false-string", "dollar", "bare"])
def test_r23g_4_an_open_book_stream_query_parameter_is_refused_or_asks_usage(tmp_path, query):
    """Won: passed with the body as it came, no `stream_options` asked."""
    raw = b'{"model": "default", "messages": [{"role": "user", "content": "fix it"}]}'
    req = open_book(tmp_path, raw, f"/v1/chat/completions?{query}")
    assert req is None or json.loads(req.content).get("stream_options") == {"include_usage": True}, req.content


@pytest.mark.parametrize("query", ["alt=sse", "api-version=2024-10-21", "key=abc"], ids=["alt", "azure", "key"])
def test_r23g_4_control_a_client_query_parameter_passes_in_open_book(tmp_path, query):
    raw = b'{"model": "default", "messages": [{"role": "user", "content": "fix it"}]}'
    assert open_book(tmp_path, raw, f"/v1/chat/completions?{query}") is not None


# --- R23g-5 --------------------------------------------------------------------------------------------------------
# An Accept header asking for an answer in a format the meter cannot read. A server that negotiates its answer's
# format by Accept (Google's front end answers binary protobuf to `alt=proto`, refused since R21a-3; the header never
# was checked) answers one with no usage read and no chunk of output: a floor of 0 under any record. The proxy keeps in
# Accept only what the meter reads, as it does for Accept-Encoding (R22a-2).

def sent_accept(tmp_path, accept: str, closed_book: bool) -> str | None:
    e = addon.Egress(["http://10.0.0.5:30000"], closed_book, tmp_path, ["default"])
    e.running()
    f = call("/v1beta/models/default:generateContent", {"contents": [{"role": "user", "parts": [{"text": "x"}]}]}, b"")
    f.request.headers["accept"] = accept
    e.request(f)
    assert json.loads((tmp_path / "audit.jsonl").read_text().splitlines()[-1])["allowed"]
    return next((str(v) for k, v in f.request.headers.items() if k.lower() == "accept"), None)


def readable(accept: str | None) -> bool:
    items = [item.split(";")[0].strip().lower() for item in (accept or "").split(",") if item.strip()]
    return all(item in ("application/json", "text/event-stream", "*/*") for item in items) and \
        not any("q=0" in item.replace(" ", "") and "q=0." not in item.replace(" ", "") for item in (accept or "").split(","))


@pytest.mark.parametrize("closed_book", [True, False], ids=["closed", "open"])
@pytest.mark.parametrize("accept", ["application/x-protobuf", "application/x-protobuf, application/json;q=0.1",
                                    "application/json;q=0, application/*", "text/event-stream;q=0, application/*"],
                         ids=["protobuf", "protobuf-first", "json-refused", "stream-refused"])
def test_r23g_5_an_accept_the_meter_cannot_read_is_constrained(tmp_path, accept, closed_book):
    """Won: forwarded as it came; the server answered protobuf, the meter's floor 0."""
    assert readable(sent_accept(tmp_path, accept, closed_book))


@pytest.mark.parametrize("accept", ["application/json", "text/event-stream", "*/*", "application/json, */*;q=0.5"],
                         ids=["json", "stream", "any", "json-then-any"])
def test_r23g_5_control_a_client_accept_goes_as_it_came(tmp_path, accept):
    assert sent_accept(tmp_path, accept, False) == accept


# --- R23g-6 --------------------------------------------------------------------------------------------------------
# `Accept-Encoding: identity;q=0`: every coding the proxy kept refused by its weight. A server may then answer in one
# the client never named, or `406` the call; the proxy forwarded it as it came, since each item named a coding it reads.
# An item of weight 0 asks for nothing: it goes, as the unread codings do (R22a-2).

def sent_encoding(tmp_path, value: str, closed_book: bool) -> str | None:
    e = addon.Egress(["http://10.0.0.5:30000"], closed_book, tmp_path, ["default"])
    e.running()
    f = call("/v1/chat/completions", {"model": "default", "messages": [{"role": "user", "content": "hi"}]}, b"")
    f.request.headers["Accept-Encoding"] = value
    e.request(f)
    return next((str(v) for k, v in f.request.headers.items() if k.lower() == "accept-encoding"), None)


@pytest.mark.parametrize("closed_book", [True, False], ids=["closed", "open"])
@pytest.mark.parametrize("value", ["identity;q=0", "gzip;q=0, identity;q=0", "br;q=0.0, identity; q=0"],
                         ids=["identity", "gzip-identity", "spaced"])
def test_r23g_6_a_coding_refused_by_its_weight_is_not_forwarded(tmp_path, value, closed_book):
    """Won: forwarded as it came; no readable coding acceptable."""
    got = sent_encoding(tmp_path, value, closed_book) or ""
    assert not any(addon._refused_q(item) for item in got.split(",")), got


def test_r23g_6_control_weighted_codings_go_as_they_came(tmp_path):
    assert sent_encoding(tmp_path, "br;q=1.0, gzip;q=0.8, identity;q=0.1", False) == "br;q=1.0, gzip;q=0.8, identity;q=0.1"


# --- R23g-7 --------------------------------------------------------------------------------------------------------
# An integer of more than 4300 digits anywhere in an open-book body (a `seed`, a `logit_bias` weight). Python's
# `json.loads` raises a plain ValueError past its integer conversion limit, and open book forwarded the body as it came;
# JSON.parse (a Node gateway: Portkey's) and jiter (pydantic) read it, and read `stream: true` with no usage asked.
BIG = b"1" * 5000


def as_js(raw: bytes):
    """What JSON.parse reads: a number past a double's range is a float (Infinity), never an error."""
    return json.loads(raw, parse_int=float)


@pytest.mark.parametrize("field", [b'"seed": ' + BIG, b'"logit_bias": {"50256": ' + BIG + b"}",
                                   b'"metadata": {"n": -' + BIG + b"}"], ids=["seed", "logit-bias", "negative"])
def test_r23g_7_a_stream_with_a_huge_integer_asks_for_its_usage(tmp_path, field):
    """Won: forwarded as it came; a Node gateway read `stream: true` and streamed without its usage."""
    raw = b'{"model": "default", "messages": [], "stream": true, ' + field + b"}"
    req = open_book(tmp_path, raw)
    assert req is None or as_js(req.content).get("stream_options") == {"include_usage": True}, req.content[:200]


def test_r23g_7_control_a_large_integer_python_reads_goes_as_it_came(tmp_path):
    raw = b'{"model": "default", "messages": [], "seed": ' + b"9" * 400 + b"}"
    req = open_book(tmp_path, raw)
    assert req is not None and req.content == raw


def test_r23g_2_control_an_over_size_responses_stream_is_metered_at_its_usage(monkeypatch):
    """Over the cap too: a `.done` event's restated text never lifts a stream's stated usage."""
    monkeypatch.setattr(addon, "METER_MAX_BYTES", 120)  # each event parsed, the stream over
    stream = events(*({"type": "response.output_text.delta", "delta": "x"} for _ in range(3)),
                    {"type": "response.output_text.done", "text": "xxx"},
                    {"type": "response.completed", "response": {"usage": {"input_tokens": 5, "output_tokens": 3}}})
    assert addon.oversize_usage(stream, "text/event-stream") == (5, 3)
