"""A nineteenth red team's (19b) attacks on the proxy's token meter, third round: the newest fixes of red team 18b
(`images/proxy/egress_addon.py`: `oversize_floor`, `stream_output`, `Egress.response`), for an answer too large
for the meter to parse (past METER_MAX_BYTES, 32 MiB).

Each test asserts the defended behaviour: it FAILS while the attack wins. All run on the host against the addon.

- R19b-1 WIN: an over-size stream that states no usage adds nothing to the floor. `Egress.response` took the
  chunk floor (R18b-1) only of an answer under the cap, and replaced it by `oversize_floor` past it, which reads
  counts alone: an OpenAI chat stream without `include_usage` and with `logprobs`/`top_logprobs: 20` (some 1.7 KB
  a token) passes 32 MiB at about 20 000 tokens, and every one of them left the floor. The defence: an over-size
  stream is read event by event (each event no larger than the cap is parsed alone, the memory of one event at a
  time): its chunks of output each a token, as under the cap.
  `test_r19b_1_an_oversize_stream_without_usage_still_raises_the_floor`; its variant, a server that leaves out
  the blank lines between events (one event past the cap), `test_r19b_1_variant_a_stream_without_blank_lines`.
- R19b-2 WIN: an over-size stream of several generations counts one of them. `oversize_floor` took the largest
  count any field reaches anywhere: SGLang's /generate with a batch (`text: [...]`) or `n`, each member's events
  stating its own running totals, was floored at its largest member's: a batch of 8 took 7/8 of its tokens off
  the floor (and of Anthropic's prompt, split in `input_tokens` and `cache_read_input_tokens`, it took the larger
  alone). The defence: the events of an over-size stream are read as under the cap (`usage_in`, each member's
  largest counts summed); only an event itself over the cap falls back to the regex floor.
  `test_r19b_2_an_oversize_batch_counts_every_member`.
- R19b-3 WIN (against the honest): `oversize_floor` read a number the model wrote. A model's text is escaped in
  JSON strings, but a tool call's arguments are a JSON object in Gemini's `functionCall.args` (and Anthropic's
  `tool_use.input`): its keys are the model's, unescaped, and `{"completion_tokens": 900000}` there raised the
  floor past the true count, the agent's honest record disputed and its cost dropped. The defence (an over-size
  stream): counts are read only from a usage object of a parsed event (`usage_in`).
  `test_r19b_3_an_oversize_stream_reads_no_count_the_model_wrote`.
- R19b-4 LEAD (xfail): the same in one over-size JSON body (no stream): still read by the regex floor.
  `test_r19b_4_an_oversize_body_reads_no_count_the_model_wrote`.
"""

from __future__ import annotations

import json

import pytest
from test_attacks_metering import SSE
from test_attacks_redteam16e import call, meter
from test_egress import load_addon

from sweserve.evaluation.trial import with_meter
from sweserve.models import AgentRun

addon = load_addon()


@pytest.fixture(autouse=True)
def no_mitmproxy(monkeypatch):
    monkeypatch.setattr(addon.Egress, "refuse", staticmethod(lambda flow, what: None))


CHAT = {"model": "default", "messages": [{"role": "user", "content": "fix it"}], "stream": True, "logprobs": True,
        "top_logprobs": 20}


def events(objs) -> bytes:
    return b"".join(b"data: " + json.dumps(o).encode() + b"\n\n" for o in objs) + b"data: [DONE]\n\n"


# --- R19b-1 --------------------------------------------------------------------------------------------------------

def chat_logprobs_no_usage(tokens: int) -> bytes:
    """An OpenAI chat stream without include_usage, each token's chunk with its 20 top logprobs."""
    top = [{"token": f"tok{i}", "logprob": -1.25 * i, "bytes": [116, 111, 107, 48 + i % 10]} for i in range(20)]
    chunk = {"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1, "model": "default",
             "choices": [{"index": 0, "delta": {"content": "x"}, "logprobs": {"content": [
                 {"token": "x", "logprob": -0.5, "bytes": [120], "top_logprobs": top}]}, "finish_reason": None}]}
    one = b"data: " + json.dumps(chunk).encode() + b"\n\n"
    return one * tokens + b"data: [DONE]\n\n"


def test_r19b_1_an_oversize_stream_without_usage_still_raises_the_floor(tmp_path):
    """The attack: a long generation streamed without usage, with top logprobs, so that its answer passes the cap.
    Before: unread, 0 added to the floor, the record's (2 000, 100) standing with its cost. The defence: its chunks
    of output are each a token of the floor, over the cap as under it."""
    tokens = 21_000
    stream = chat_logprobs_no_usage(tokens)
    assert len(stream) > addon.METER_MAX_BYTES
    m = meter(tmp_path, [call("/v1/chat/completions", CHAT, stream, ctype=SSE)])
    assert not m.complete
    assert m.completion_tokens >= tokens, f"an over-size stream without usage added {m.completion_tokens}"
    run = with_meter(AgentRun(agent="cmd", usage_from="agent", prompt_tokens=2_000, completion_tokens=100,
                              cost_usd=0.0001), m)
    assert run.flags and run.cost_usd is None


def test_r19b_1_variant_a_stream_without_blank_lines(tmp_path):
    """The variant: a server that leaves out the blank lines between its events (read line by line under the cap,
    `sse_events`): the whole over-size stream is one event past the cap. Before the variant's fix: only the regex
    floor, 0 added. The defence: an event past the cap is read line by line too, each line parsed alone."""
    tokens = 21_000
    stream = chat_logprobs_no_usage(tokens).replace(b"\n\n", b"\n")
    m = meter(tmp_path, [call("/v1/chat/completions", CHAT, stream, ctype=SSE)])
    assert m.completion_tokens >= tokens, f"an over-size stream without blank lines added {m.completion_tokens}"


# --- R19b-2 --------------------------------------------------------------------------------------------------------

def sglang_batch_stream(members: int, tokens: int, pad: int) -> bytes:
    """SGLang's /generate batch stream with `return_logprob`: each member's events interleaved, each restating
    its logprobs so far and its own running counts."""
    logprobs = [[-0.5, 1, "x" * 4]] * pad
    return b"".join(b"data: " + json.dumps({"index": i, "text": "x", "meta_info": {
        "id": f"r{i}", "prompt_tokens": 3000, "completion_tokens": step, "input_token_logprobs": logprobs}}).encode()
        + b"\n\n" for step in range(1, tokens + 1) for i in range(members)) + b"data: [DONE]\n\n"


def test_r19b_2_an_oversize_batch_counts_every_member(tmp_path):
    """The attack: a batch of 8 prompts in one over-size /generate stream. Before: the floor (3 000, 400), one
    member's; the true use (24 000, 3 200). The defence: each member's largest counts, summed."""
    stream = sglang_batch_stream(8, 400, 1200)
    assert len(stream) > addon.METER_MAX_BYTES
    body = {"text": ["fix it"] * 8, "stream": True, "return_logprob": True, "logprob_start_len": 0}
    m = meter(tmp_path, [call("/generate", body, stream, ctype=SSE)])
    assert not m.complete
    assert (m.prompt_tokens, m.completion_tokens) >= (24_000, 3_200), \
        f"an over-size batch floored at one member: {(m.prompt_tokens, m.completion_tokens)}"


# --- R19b-3 --------------------------------------------------------------------------------------------------------

def gemini_tool_stream(chunks: int, pad: int) -> bytes:
    """Gemini's stream (alt=sse), a tool call whose arguments (an object the model wrote) name a count, padded past
    the cap by long text parts; each chunk states the running usage."""
    out = []
    for step in range(1, chunks + 1):
        parts = [{"text": "y" * pad}]
        if step == chunks:
            parts.append({"functionCall": {"name": "record", "args": {"completion_tokens": 900_000,
                                                                      "promptTokenCount": 900_000}}})
        out.append({"candidates": [{"content": {"role": "model", "parts": parts}}],
                    "usageMetadata": {"promptTokenCount": 500, "candidatesTokenCount": step * 10,
                                      "totalTokenCount": 500 + step * 10}})
    return events(out)


def test_r19b_3_an_oversize_stream_reads_no_count_the_model_wrote(tmp_path):
    """The attack (on the honest, or to dispute one's own record on purpose): a tool call whose argument names a
    count, in an over-size answer. Before: the floor (900 000, 900 000), the agent's true record (500, 4 000)
    disputed and its cost dropped. The defence: counts are read from the events' usage objects alone."""
    stream = gemini_tool_stream(400, 90_000)
    assert len(stream) > addon.METER_MAX_BYTES
    m = meter(tmp_path, [call("/v1beta/models/default:streamGenerateContent?alt=sse", {"contents": [
        {"role": "user", "parts": [{"text": "fix it"}]}]}, stream, ctype=SSE)])
    assert not m.complete
    assert (m.prompt_tokens, m.completion_tokens) == (500, 4000), "a count the model wrote was read"
    run = with_meter(AgentRun(agent="cmd", usage_from="agent", prompt_tokens=500, completion_tokens=4000,
                              cost_usd=0.01), m)
    assert (run.flags, run.cost_usd) == ([], 0.01)


# --- controls ------------------------------------------------------------------------------------------------------

def test_r19b_control_an_event_over_the_cap_still_states_its_counts(tmp_path):
    """Control: an over-size answer that is one JSON body, or a stream whose one event is itself past the cap, is
    still floored by the counts it states (the regex floor of R18b-3)."""
    big = {"text": "x" * (addon.METER_MAX_BYTES + 10), "meta_info": {"prompt_tokens": 12, "completion_tokens": 7}}
    body = json.dumps(big).encode()
    assert addon.oversize_floor(body) == (12, 7)
    m = meter(tmp_path, [call("/generate", {"text": "fix it", "stream": True}, events([big]), ctype=SSE)])
    assert (m.unread, m.prompt_tokens, m.completion_tokens) == (1, 12, 7)


# --- R19b-4 (a lead) -----------------------------------------------------------------------------------------------

@pytest.mark.xfail(strict=True, reason="R19b-4: an over-size answer that is no stream is still read by the regex "
                   "floor, which cannot tell a usage object's key from a tool call argument's")
def test_r19b_4_an_oversize_body_reads_no_count_the_model_wrote():
    """The attack: R19b-3 in one JSON body (no stream) past the cap: Gemini's `functionCall.args` naming a count.
    It still wins: the floor is (900 000, 900 000) for a true (500, 40). A fix needs a reader that knows each key's
    depth without parsing the whole (an incremental JSON scanner), not a pattern."""
    body = {"candidates": [{"content": {"parts": [{"text": "y" * (addon.METER_MAX_BYTES + 10)}, {"functionCall": {
        "name": "record", "args": {"completion_tokens": 900_000, "promptTokenCount": 900_000}}}]}}],
        "usageMetadata": {"promptTokenCount": 500, "candidatesTokenCount": 40, "totalTokenCount": 540}}
    assert addon.oversize_usage(json.dumps(body).encode(), "application/json") == (500, 40)
