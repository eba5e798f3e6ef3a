"""Red team 23m: the meter's reading of an answer by its label, and the format a call asks by Accept
(`images/proxy/egress_addon.py`: `answer_usage`, `stream_output`, `_chunk_output`, `constrain_accept`).

- R23m-1: an event stream labelled `application/json` (or with no Content-Type at all: a gateway's fixed label, a
  FastAPI StreamingResponse left at its default) was read as JSON only: not JSON, so its usage was unread and its
  floor 0 tokens, however many chunks of output it carried.
- R23m-2: an event whose data is a JSON array of chunks (a gateway batching its upstream's chunks into one event)
  counted none of them toward the floor: `_chunk_output` read objects only. A stream without usage added 0 tokens,
  and one stating fewer tokens than its chunks was taken at its word.
- R23m-4: a call the proxy passes as generating nothing (a GET of a model, a token count: R22a-1) is metered only
  when its answer states a usage or is labelled an event stream. One whose answer carries output without its usage
  (a gateway leaving it out, a stream labelled JSON) was no call at all: the meter complete at 0 tokens, and an
  agent's record of 0 tokens stood unflagged.
- R23m-3: a chat or completions call with no `stream` in its body but `Accept: text/event-stream`: the proxy asked
  no usage (`ask_usage` reads the body), and a gateway that streams on Accept streamed without it, its prompt floor 0.
- R23m-5 (open book): a Responses API call with `background: true` is answered at once with a queued response of no
  usage (`usage: null`, nothing generated yet); the model generates afterwards, at the provider, where no answer the
  proxy sees states it, and a later call's `previous_response_id` (open book passes it) brings the output into the
  conversation. The call was counted unread with a floor of 0: its reasoning and output never metered.
All run on the host against the addon's hooks: no Docker.
"""

from __future__ import annotations

import json

import pytest
from test_attacks_redteam15f import MODEL
from test_attacks_redteam16e import addon, call, meter, no_mitmproxy  # noqa: F401  (no_mitmproxy: an autouse fixture)
from test_attacks_redteam22i import open_book

SSE = "text/event-stream"


def events(*chunks) -> bytes:
    return b"".join(b"data: " + json.dumps(c).encode() + b"\n\n" for c in chunks) + b"data: [DONE]\n\n"


def chat_chunk(text: str) -> dict:
    return {"id": "c", "object": "chat.completion.chunk", "choices": [{"index": 0, "delta": {"content": text}}]}


CHAT = {"model": "default", "messages": [{"role": "user", "content": "fix it"}], "stream": True}
USAGE = {"id": "c", "choices": [], "usage": {"prompt_tokens": 700, "completion_tokens": 5}}


# --- R23m-1 --------------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("ctype", ["application/json", ""], ids=["labelled-json", "no-content-type"])
def test_r23m_1_a_stream_labelled_json_is_read_as_a_stream(tmp_path, ctype):
    """Won: five chunks of output and a usage of 700 prompt tokens, metered as 0 tokens."""
    stream = events(*(chat_chunk("x") for _ in range(5)), USAGE)
    m = meter(tmp_path, [call("/v1/chat/completions", CHAT, stream, ctype=ctype)])
    assert (m.prompt_tokens, m.completion_tokens) == (700, 5), m


@pytest.mark.parametrize("ctype", ["application/json", ""], ids=["labelled-json", "no-content-type"])
def test_r23m_1_an_unread_stream_labelled_json_counts_its_chunks(ctype):
    """Won: the same stream without its usage: a floor of 0."""
    assert addon.stream_output(events(*(chat_chunk("x") for _ in range(5))), ctype) >= 5


def test_r23m_1_control_a_json_answer_is_read_as_json(tmp_path):
    answer = {"id": "c", "choices": [{"index": 0, "message": {"role": "assistant", "content": "ok"}}],
              "usage": {"prompt_tokens": 9, "completion_tokens": 2}}
    body = {"model": "default", "messages": [{"role": "user", "content": "fix it"}]}
    m = meter(tmp_path, [call("/v1/chat/completions", body, json.dumps(answer).encode())])
    assert m.complete and (m.prompt_tokens, m.completion_tokens) == (9, 2), m
    assert addon.answer_usage(b"not json, no stream", "application/json") is None


# --- R23m-2 --------------------------------------------------------------------------------------------------------

def test_r23m_2_an_event_of_several_chunks_counts_each():
    """Won: two events, each an array of chunks of output, 0 tokens."""
    stream = events([chat_chunk("x"), chat_chunk("y"), chat_chunk("z")], [chat_chunk("w"), chat_chunk("v")])
    assert addon.stream_output(stream, SSE) >= 5


def test_r23m_2_a_usage_stating_fewer_than_its_arrayed_chunks_counts_the_chunks():
    """Won: five chunks in arrays, a usage stating 1 completion token, metered as 1."""
    stream = events([chat_chunk("x") for _ in range(5)],
                    {"id": "c", "choices": [], "usage": {"prompt_tokens": 3, "completion_tokens": 1}})
    usage = addon.answer_usage(stream, SSE)
    assert usage is not None and usage[0] == 3 and usage[1] >= 5, usage


def test_r23m_2_control_an_arrayed_stream_stating_more_keeps_its_count():
    stream = events([chat_chunk("x") for _ in range(3)],
                    {"id": "c", "choices": [], "usage": {"prompt_tokens": 3, "completion_tokens": 40}})
    assert addon.answer_usage(stream, SSE) == (3, 40)


# --- R23m-3 --------------------------------------------------------------------------------------------------------
# A gateway that streams when the client accepts an event stream (content negotiation), whatever the body says: the
# body named no `stream`, so the proxy asked no usage (`ask_usage`), and the stream came without it, its prompt floor
# 0 under any record.

def sent(tmp_path, body, accept: str, closed_book: bool, path: str = "/v1/chat/completions"):
    """The request the proxy sent on, with `Accept: accept` (None if it refused the call)."""
    e = addon.Egress([MODEL], closed_book, tmp_path, ["default"])
    e.running()
    f = call(path, body, b"")
    f.request.headers["accept"] = accept
    e.request(f)
    refused = not json.loads((tmp_path / "audit.jsonl").read_text().splitlines()[-1])["allowed"]
    return None if refused else f.request


def accepted(req) -> str:
    return next(str(v) for k, v in req.headers.items() if k.lower() == "accept")


def usage_asked(req) -> bool:
    body = json.loads(req.content)
    return isinstance(body.get("stream_options"), dict) and body["stream_options"].get("include_usage") is True


NOT_STREAMING = {"model": "default", "messages": [{"role": "user", "content": "fix it"}]}


@pytest.mark.parametrize("closed_book", [True, False], ids=["closed-book", "open-book"])
@pytest.mark.parametrize("accept", ["text/event-stream", "application/json, text/event-stream", "TEXT/Event-Stream"])
@pytest.mark.parametrize("path", ["/v1/chat/completions", "/v1/completions"])
def test_r23m_3_a_call_not_streaming_asks_no_stream_by_accept(tmp_path, closed_book, accept, path):
    """Won: `Accept: text/event-stream` went on beside a body of no `stream`, and no usage was asked."""
    body = NOT_STREAMING if path.endswith("chat/completions") else {"model": "default", "prompt": "def f():"}
    req = sent(tmp_path, body, accept, closed_book, path)
    assert req is None or "event-stream" not in accepted(req).lower() or usage_asked(req), (accepted(req), req.content)


@pytest.mark.parametrize("closed_book", [True, False], ids=["closed-book", "open-book"])
def test_r23m_3_control_a_stream_keeps_its_accept(tmp_path, closed_book):
    req = sent(tmp_path, CHAT, "text/event-stream", closed_book)
    assert req is not None and accepted(req) == "text/event-stream" and usage_asked(req)


@pytest.mark.parametrize("closed_book", [True, False], ids=["closed-book", "open-book"])
def test_r23m_3_control_a_call_not_streaming_keeps_its_json_accept(tmp_path, closed_book):
    req = sent(tmp_path, NOT_STREAMING, "application/json", closed_book)
    assert req is not None and accepted(req) == "application/json"
    assert "stream_options" not in json.loads(req.content)


def test_r23m_3_control_an_anthropic_call_keeps_its_accept(tmp_path):
    """Anthropic's stream states its usage unasked: its Accept is left as it is."""
    body = {"model": "default", "max_tokens": 64, "messages": [{"role": "user", "content": "fix it"}]}
    req = sent(tmp_path, body, "application/json, text/event-stream", True, "/v1/messages")
    assert req is not None and accepted(req) == "application/json, text/event-stream"


# --- R23m-4 --------------------------------------------------------------------------------------------------------

GEMINI_BODY = {"contents": [{"role": "user", "parts": [{"text": "fix it"}]}]}
GEMINI_OUTPUT = {"candidates": [{"content": {"parts": [{"text": "the whole fix"}], "role": "model"}}]}


@pytest.mark.parametrize("closed_book", [False, True], ids=["open-book", "closed-book"])
@pytest.mark.parametrize("answer, ctype", [
    (json.dumps(GEMINI_OUTPUT).encode(), "application/json"),
    (events(GEMINI_OUTPUT, GEMINI_OUTPUT), "application/json"),
    (events(GEMINI_OUTPUT, GEMINI_OUTPUT), ""),
], ids=["json-without-usage", "stream-labelled-json", "stream-unlabelled"])
def test_r23m_4_an_answer_of_output_to_a_call_passed_as_generating_nothing_is_metered(tmp_path, answer, ctype,
                                                                                        closed_book):
    """Won: the meter complete at 0 tokens."""
    f = call("/v1beta/models/default:generateContent", GEMINI_BODY, answer, method="GET", ctype=ctype)
    f.request.headers["X-HTTP-Method-Override"] = "POST"
    m = meter(tmp_path, [f], closed_book=closed_book)
    assert m.requests == 1 and not m.complete and m.completion_tokens >= 1, m


@pytest.mark.parametrize("path, answer", [
    ("/v1/models", {"object": "list", "data": [{"id": "default", "object": "model", "owned_by": "sglang"}]}),
    ("/v1beta/models/default", {"name": "models/default", "displayName": "default", "description": "a model"}),
    ("/v1/messages/count_tokens", {"input_tokens": 12}),
], ids=["listing", "one-model", "anthropic-count"])
def test_r23m_4_control_a_listing_or_count_is_no_call(tmp_path, path, answer):
    method = "POST" if "count" in path else "GET"
    body = None if method == "GET" else {"model": "default", "messages": [{"role": "user", "content": "hi"}]}
    m = meter(tmp_path, [call(path, body, json.dumps(answer).encode(), method=method)])
    assert m.complete and (m.requests, m.prompt_tokens, m.completion_tokens) == (0, 0, 0), m


# --- R23m-5 --------------------------------------------------------------------------------------------------------

RESPONSES_CALL = {"model": "default", "input": "fix it", "reasoning": {"effort": "high"}}


@pytest.mark.parametrize("background", [True, "true", 1, "yes"], ids=["true", "string", "one", "yes"])
@pytest.mark.parametrize("key", ["background", "Background"])
def test_r23m_5_a_call_answered_later_is_refused_in_open_book(tmp_path, background, key):
    """Won: passed; its answer a queued response of no usage, the generation never metered."""
    raw = json.dumps({**RESPONSES_CALL, key: background}).encode()
    assert open_book(tmp_path, raw, "/v1/responses") is None


@pytest.mark.parametrize("background", [False, None, "false", 0])
def test_r23m_5_control_a_call_answered_now_passes(tmp_path, background):
    raw = json.dumps({**RESPONSES_CALL, "background": background}).encode()
    assert open_book(tmp_path, raw, "/v1/responses") is not None
    assert open_book(tmp_path, json.dumps(RESPONSES_CALL).encode(), "/v1/responses") is not None
