"""Red team 23s: the newest egress and meter fixes (round 23m) and their neighbours
(`images/proxy/egress_addon.py`: `answer_usage`, `stream_output`, `oversize_usage`, `constrain_accept`).

- R23s-1: an answer in UTF-16 (or UTF-32). `Accept: text/event-stream; charset=utf-16` passes `constrain_accept` in
  both modes (it reads an item's media type only), and open book passes `Accept-Charset: utf-16`; a server honouring
  either answers in UTF-16. JSON in it is read (Python's `json.loads` detects the encoding of bytes), but the event
  stream reader matches `data:` as UTF-8 bytes: no event found, the usage unread and the floor 0 tokens, under or
  past the size the meter parses whole.
- R23s-2: an over-size JSON answer that is an array of answers (SGLang's /generate batch, not streamed) was floored at
  its largest member's counts, not their sum: a batch of 8 metered as one.
- R23s-3 (against the honest): a completions stream with `echo: true` and `max_tokens: 0` is one chunk, the prompt
  echoed, with 0 completion tokens stated; the per-chunk floor metered 1, and the agent's true record was disputed.
- R23s-4 (against the honest): an event that is an array of chunks each stating its running usage had those usages
  summed, as a batch of answers' are: one generation's tokens metered several times over.
All run on the host against the addon's hooks: no Docker.
"""

from __future__ import annotations

import json

import pytest
from test_attacks_redteam16e import addon, call, meter, no_mitmproxy  # noqa: F401  (no_mitmproxy: an autouse fixture)
from test_attacks_redteam23m import CHAT, SSE, USAGE, chat_chunk, events

# --- R23s-1 --------------------------------------------------------------------------------------------------------

ENCODINGS = [("utf-16", f"{SSE}; charset=utf-16"), ("utf-16-le", f"{SSE}; charset=UTF-16LE"),
             ("utf-16-be", f"{SSE};charset=\"utf-16be\""), ("utf-32", f"{SSE}; charset=utf-32"),
             ("utf-16-le", SSE), ("utf-16", "application/json")]
IDS = ["utf16-bom", "utf16le", "utf16be", "utf32", "utf16le-unlabelled", "utf16-labelled-json"]


@pytest.mark.parametrize("closed_book", [True, False], ids=["closed-book", "open-book"])
@pytest.mark.parametrize(("encoding", "ctype"), ENCODINGS, ids=IDS)
def test_r23s_1_a_stream_in_utf16_is_metered(tmp_path, closed_book, encoding, ctype):
    """Won: five chunks of output and a usage of 700 prompt tokens, in UTF-16: metered as 0 tokens."""
    stream = events(*(chat_chunk("x") for _ in range(5)), USAGE).decode().encode(encoding)
    m = meter(tmp_path, [call("/v1/chat/completions", CHAT, stream, ctype=ctype)], closed_book=closed_book)
    assert (m.prompt_tokens, m.completion_tokens) == (700, 5), m


@pytest.mark.parametrize(("encoding", "ctype"), ENCODINGS, ids=IDS)
def test_r23s_1_an_unread_stream_in_utf16_keeps_its_floor(tmp_path, encoding, ctype):
    """Won: the same stream without its usage: a floor of 0."""
    stream = events(*(chat_chunk("x") for _ in range(5))).decode().encode(encoding)
    m = meter(tmp_path, [call("/v1/chat/completions", CHAT, stream, ctype=ctype)])
    assert m.completion_tokens >= 5, m


def test_r23s_1_an_oversize_stream_in_utf16_keeps_its_floor(tmp_path):
    """Won: an answer past the size parsed whole, in UTF-16: 0 tokens."""
    big = "x" * 4096
    n = addon.METER_MAX_BYTES // (2 * 4096) + 8
    stream = events(*(chat_chunk(big) for _ in range(n)), USAGE).decode().encode("utf-16")
    assert len(stream) > addon.METER_MAX_BYTES
    m = meter(tmp_path, [call("/v1/chat/completions", CHAT, stream, ctype=f"{SSE}; charset=utf-16")])
    assert m.prompt_tokens >= 700 and m.completion_tokens >= n, m


def test_r23s_1_control_utf8_and_json_keep_their_counts(tmp_path):
    stream = events(*(chat_chunk("é") for _ in range(3)),
                    {"id": "c", "choices": [], "usage": {"prompt_tokens": 9, "completion_tokens": 3}})
    m = meter(tmp_path, [call("/v1/chat/completions", CHAT, stream, ctype=f"{SSE}; charset=utf-8")])
    assert m.complete and (m.prompt_tokens, m.completion_tokens) == (9, 3), m
    answer = {"id": "c", "choices": [{"index": 0, "message": {"role": "assistant", "content": "ok"}}],
              "usage": {"prompt_tokens": 9, "completion_tokens": 2}}
    body = {"model": "default", "messages": [{"role": "user", "content": "fix it"}]}
    m = meter(tmp_path / "json", [call("/v1/chat/completions", body, json.dumps(answer).encode("utf-16"))])
    assert m.complete and (m.prompt_tokens, m.completion_tokens) == (9, 2), m


# --- R23s-2 --------------------------------------------------------------------------------------------------------
# SGLang's /generate with a batch (`text: [...]`) and no stream answers one JSON array, a member per prompt, each stating
# its own `meta_info` counts; `return_logprob` (with a long prompt's `input_token_logprobs`) makes it as large as the
# agent likes. Past the size the meter parses whole, a JSON answer was read by its counts' regex alone
# (`oversize_floor`): the largest count any member states, so a batch of 8 was floored at one member's tokens, as an
# over-size stream's was before R19b-2.

def generate_batch(members: int, prompt: int, completion: int, pad: int) -> bytes:
    logprobs = [[-0.5, 1, "x" * 4]] * pad
    return json.dumps([{"text": "y" * completion, "meta_info": {
        "id": f"r{i}", "prompt_tokens": prompt, "completion_tokens": completion, "input_token_logprobs": logprobs}}
        for i in range(members)]).encode()


BATCH = {"text": ["Write the fix."] * 8, "sampling_params": {"max_new_tokens": 400}, "return_logprob": True,
         "logprob_start_len": 0}


def test_r23s_2_an_oversize_json_batch_counts_every_member(tmp_path):
    """Won: 8 members of 3 000 prompt and 400 completion tokens, metered as (3 000, 400)."""
    answer = generate_batch(8, 3000, 400, addon.METER_MAX_BYTES // (8 * 16) + 64)
    assert len(answer) > addon.METER_MAX_BYTES
    m = meter(tmp_path, [call("/generate", BATCH, answer)])
    assert m.prompt_tokens >= 24000 and m.completion_tokens >= 3200, m


def test_r23s_2_control_an_oversize_gemini_array_takes_its_running_totals(tmp_path):
    chunk = {"candidates": [{"content": {"parts": [{"text": "x" * 4096}], "role": "model"}}]}
    n = addon.METER_MAX_BYTES // 4096 + 16
    answer = json.dumps([{**chunk, "usageMetadata": {"promptTokenCount": 50, "candidatesTokenCount": step}}
                         for step in range(1, n + 1)]).encode()
    body = {"contents": [{"role": "user", "parts": [{"text": "fix it"}]}]}
    m = meter(tmp_path, [call("/v1beta/models/default:streamGenerateContent", body, answer)])
    assert (m.prompt_tokens, m.completion_tokens) == (50, n), m


# --- R23s-3 --------------------------------------------------------------------------------------------------------
# Against the honest: a completions stream with `echo: true` and `max_tokens: 0` (a prompt's logprobs, nothing
# generated) is one chunk, the prompt echoed, and a usage of 0 completion tokens. The per-chunk floor (R23g-2) counted
# that chunk as a token generated: the meter 1 completion token, the agent's true record of 0 disputed
# (`usage_disagrees`) and its cost dropped.

def completion_chunk(text: str, index: int = 0, finish: str | None = None) -> dict:
    return {"id": "c", "object": "text_completion",
            "choices": [{"index": index, "text": text, "logprobs": None, "finish_reason": finish}]}


ECHO = {"model": "default", "prompt": "def f():", "echo": True, "max_tokens": 0, "stream": True, "logprobs": 1}


def test_r23s_3_an_echoed_prompt_is_no_token_generated(tmp_path):
    """Won (against the honest): 4 prompt and 0 completion tokens, metered as 4 and 1."""
    stream = events(completion_chunk("def f():", finish="length"),
                    {"id": "c", "choices": [], "usage": {"prompt_tokens": 4, "completion_tokens": 0}})
    m = meter(tmp_path, [call("/v1/completions", ECHO, stream, ctype=SSE)])
    assert m.complete and (m.prompt_tokens, m.completion_tokens) == (4, 0), m


def test_r23s_3_control_an_echo_still_floors_its_generated_chunks(tmp_path):
    """An echo asked does not free a stream's generated chunks from the floor: 4 generated pieces after the echo."""
    body = {**ECHO, "max_tokens": 16}
    stream = events(completion_chunk("def f():" + "x"), *(completion_chunk("y") for _ in range(4)),
                    {"id": "c", "choices": [], "usage": {"prompt_tokens": 4, "completion_tokens": 1}})
    m = meter(tmp_path, [call("/v1/completions", body, stream, ctype=SSE)])
    assert m.completion_tokens >= 4, m


def test_r23s_3_control_without_echo_the_first_chunk_counts(tmp_path):
    body = {**ECHO, "echo": False, "max_tokens": 16}
    stream = events(completion_chunk("x"), {"id": "c", "choices": [], "usage": {"prompt_tokens": 4,
                                                                                  "completion_tokens": 0}})
    m = meter(tmp_path, [call("/v1/completions", body, stream, ctype=SSE)])
    assert m.completion_tokens >= 1, m


# --- R23s-4 --------------------------------------------------------------------------------------------------------
# Against the honest: an event whose data is an array of chunks (a gateway batching its upstream's chunks: R23m-2)
# whose chunks each state their running usage (SGLang's and vLLM's `continuous_usage_stats`). The array's usages were
# summed as a batch of answers' are (`usage_in` of a list), so three chunks of one generation, running to 10 prompt and
# 3 completion tokens, were metered as 30 and 6: the agent's true record disputed and its cost dropped.

def running_chunk(text: str, completion: int) -> dict:
    return {**chat_chunk(text), "usage": {"prompt_tokens": 10, "completion_tokens": completion}}


def test_r23s_4_an_array_event_of_running_totals_is_read_as_its_chunks(tmp_path):
    """Won (against the honest): 10 and 3 tokens metered as 30 and 6."""
    stream = events([running_chunk("x", 1), running_chunk("y", 2), running_chunk("z", 3)],
                    {"id": "c", "choices": [], "usage": {"prompt_tokens": 10, "completion_tokens": 3}})
    m = meter(tmp_path, [call("/v1/chat/completions", CHAT, stream, ctype=SSE)])
    assert m.complete and (m.prompt_tokens, m.completion_tokens) == (10, 3), m


def test_r23s_4_control_an_array_event_of_members_sums_them(tmp_path):
    """Two generations (SGLang's /generate batch, each chunk its `index`) in one array event: each member's counts."""
    member = [{"index": i, "text": "x", "meta_info": {"id": f"r{i}", "prompt_tokens": 5, "completion_tokens": 4}}
              for i in range(2)]
    stream = events(member)
    body = {"text": ["a", "b"], "stream": True}
    m = meter(tmp_path, [call("/generate", body, stream, ctype=SSE)])
    assert (m.prompt_tokens, m.completion_tokens) == (10, 8), m
