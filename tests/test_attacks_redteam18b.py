"""An eighteenth red team's (18b) attacks on the proxy's token meter, second round: the newest fixes of red team
17b (`images/proxy/egress_addon.py`: `answer_usage`, `usage_in`, `Egress.response`; `evaluation/trial.with_meter`'s
floor; the reports' "metered in part").

Each test asserts the defended behaviour: it FAILS while the attack wins. All run on the host against the addon.

- R18b-1 WIN: an incomplete meter's floor leaves out every token of the calls it could not read. An agent that
  streams without `stream_options.include_usage` (the OpenAI default: no chunk states usage) gets its call
  counted `unread` and nothing else: 50 000 generated tokens add 0 to the floor `with_meter` holds a record to,
  and a record of the other calls alone stands unflagged with its cost (the board's "metered in part" is all
  that tells it from an honest run). The defence: an unread stream's chunks that carry generated output (a
  delta's content, reasoning, tool arguments; a completion's text; a Responses or Anthropic delta) are each one
  token at least, added to the meter's completion count (still incomplete: a floor, never the whole).
  `test_r18b_1_an_unread_stream_still_raises_the_floor`.
- R18b-2 WIN: a usage object the meter reads in part reads as all of it. One count under a name the meter knows
  and the rest under one it does not (`generated_tokens`, a gateway's own) read as (100, 0), complete, though
  its `total_tokens` says 5 100; counts a JSON encoder wrote as floats (`5000.0`) or strings read as 0, complete.
  The defence: a stated total above the counts read adds the rest (as completion); an integral float is its
  count; a known field holding something that is no count (a string, a negative, a bool) makes the answer
  unread (a floor), as R17b-4 did for a usage naming no known field.
  `test_r18b_2_usage_read_in_part_is_not_the_whole`.
- R18b-3 WIN: an answer too large to parse takes its tokens off the floor. The meter parses an answer of up to
  METER_MAX_BYTES (32 MiB); SGLang's /generate stream restates the text and logprobs so far in every event, so a
  request with `return_logprob` and `logprob_start_len: 0` (or a long generation alone) passes the cap with a few
  thousand tokens: unread, 0 added to the floor. The defence: the largest count each known field states anywhere
  in an over-size answer is a floor (a JSON string the model wrote escapes its quotes, and a larger number only
  raises the agent's own count). `test_r18b_3_an_answer_too_large_to_parse_still_raises_the_floor`.
- R18b-4 WIN (a lead of this round, fixed on the request side after it): a shared SGLang server's request ids
  are the agent's to choose (`rid` in a /generate body), and SGLang aborts by rid prefix: rids "0" … "f" hung up
  abort every other trial's calls. `rid` is stripped. `test_r18b_4_a_request_names_no_server_request_id`.
- R18b-5 WIN (no mark at all): a proxy whose meter cannot be read passes for no proxy. `EgressProxy.metered`
  said None (a Docker error, an empty or malformed file), which `with_meter` takes for an agent without one: the
  record kept as it was, no floor, no "metered in part". Not shown to be caused from the sandbox (the proxy's
  files are its own), but a meter the host cannot read must never read as a clean run. The defence: an
  unreadable meter is `Metered(unreadable=True)`, incomplete. `test_r18b_5_a_meter_that_cannot_be_read_is_no_meter_at_all`.
"""

from __future__ import annotations

import json

import pytest
from test_attacks_metering import SSE
from test_attacks_redteam15f import MODEL
from test_attacks_redteam16e import call, meter
from test_egress import load_addon

from sweserve.evaluation.trial import with_meter
from sweserve.models import AgentRun

addon = load_addon()


@pytest.fixture(autouse=True)
def no_mitmproxy(monkeypatch):
    monkeypatch.setattr(addon.Egress, "refuse", staticmethod(lambda flow, what: None))


def raw(*objs) -> bytes:
    return "".join(f"data: {json.dumps(o)}\n\n" for o in objs).encode() + b"data: [DONE]\n\n"


CHAT = {"model": "default", "messages": [{"role": "user", "content": "fix it"}], "stream": True}


# --- R18b-1 --------------------------------------------------------------------------------------------------------

def chat_no_usage(tokens: int, key: str = "content") -> bytes:
    """An OpenAI chat stream without include_usage: a role chunk, one chunk per token, a finish chunk."""
    head = {"object": "chat.completion.chunk", "choices": [{"index": 0, "delta": {"role": "assistant",
                                                                                   "content": ""}}]}
    body = [{"object": "chat.completion.chunk", "choices": [{"index": 0, "delta": {key: "x"}}]}] * tokens
    tail = {"object": "chat.completion.chunk", "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}
    return raw(head, *body, tail)


def tool_no_usage(tokens: int) -> bytes:
    first = {"choices": [{"index": 0, "delta": {"tool_calls": [{"index": 0, "id": "c", "type": "function",
                                                                "function": {"name": "bash", "arguments": ""}}]}}]}
    args = {"choices": [{"index": 0, "delta": {"tool_calls": [{"index": 0, "function": {"arguments": "x"}}]}}]}
    return raw(first, *[args] * tokens)


@pytest.mark.parametrize("stream, floor", [
    (chat_no_usage(5000), 5000),
    (chat_no_usage(5000, "reasoning_content"), 5000),
    (tool_no_usage(5000), 5001),  # the tool's name is generated too
    (raw(*[{"object": "text_completion", "choices": [{"index": 0, "text": "x"}]}] * 5000), 5000),
    (raw(*[{"type": "response.output_text.delta", "delta": "x"}] * 5000), 5000),
], ids=["chat", "reasoning", "tool-arguments", "completions", "responses-delta"])
def test_r18b_1_an_unread_stream_still_raises_the_floor(tmp_path, stream, floor):
    """The attack: every large call a stream without usage, the record stating the read calls alone. Before: the
    meter's completion count 0, the record (2 000, 100) and its cost standing, unflagged. The defence: each chunk
    carrying generated output counts a token toward the floor, so the record below it is flagged."""
    m = meter(tmp_path, [call("/v1/chat/completions", {**CHAT, "stream": False}, b'{"usage": {"prompt_tokens": '
                              b'2000, "completion_tokens": 100}}'),
                         call("/v1/chat/completions", CHAT, stream, ctype=SSE)])
    assert not m.complete, "an unread stream is never the whole"
    assert m.completion_tokens >= 100 + floor, "the unread stream's tokens are missing from the floor"
    run = with_meter(AgentRun(agent="cmd", usage_from="agent", prompt_tokens=2_000, completion_tokens=100,
                              cost_usd=0.0001), m)
    assert run.flags and run.cost_usd is None and run.completion_tokens >= 100 + floor


def test_r18b_1_control_an_honest_record_above_the_floor_stands(tmp_path):
    """Control: the role chunk, the finish chunk and [DONE] count nothing; an honest record (its client counted the
    stream's 3 tokens itself) stands with its cost; a stream whose usage is read is counted as before."""
    m = meter(tmp_path, [call("/v1/chat/completions", CHAT, chat_no_usage(3), ctype=SSE)])
    assert m.unread == 1 and m.prompt_tokens == 0 and m.completion_tokens <= 3, "a chunk with no output counted"
    run = with_meter(AgentRun(agent="cmd", usage_from="agent", prompt_tokens=12, completion_tokens=3,
                              cost_usd=0.001), m)
    assert (run.flags, run.cost_usd, run.completion_tokens) == ([], 0.001, 3)
    anthropic = raw({"type": "message_start", "message": {"usage": {"input_tokens": 25, "output_tokens": 1}}},
                    {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "x"}},
                    {"type": "message_delta", "delta": {"stop_reason": "end_turn"}, "usage": {"output_tokens": 15}})
    assert addon.answer_usage(anthropic, SSE) == (25, 15)


# --- R18b-2 --------------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("usage, want", [
    ({"prompt_tokens": 100, "generated_tokens": 5000, "total_tokens": 5100}, (100, 5000)),
    ({"promptTokenCount": 100, "outputTokenCount": 5000, "totalTokenCount": 5100}, (100, 5000)),
    ({"prompt_tokens": 1000.0, "completion_tokens": 5000.0}, (1000, 5000)),
    ({"prompt_tokens": "1000", "completion_tokens": "5000"}, None),
    ({"prompt_tokens": 1000, "completion_tokens": -5000}, None),
    ({"input_tokens": 1000, "output_tokens": 5000.5}, None),
], ids=["total-openai", "total-gemini", "floats", "strings", "negative", "fraction"])
def test_r18b_2_usage_read_in_part_is_not_the_whole(usage, want):
    """Before: (100, 0), (100, 0), (0, 0), (0, 0), (1000, 0), (1000, 0): each a complete reading. The defence: the
    stated total is a floor of the reading, an integral float its count, any other value no reading."""
    assert addon.answer_usage(json.dumps({"choices": [], "usage": usage}).encode(), "application/json") == want


@pytest.mark.parametrize("usage, want", [
    ({"prompt_tokens": 7, "completion_tokens": 3, "total_tokens": 10}, (7, 3)),
    ({"prompt_tokens": 8, "completion_tokens": None, "total_tokens": 8}, (8, 0)),  # an embedding (vLLM, SGLang)
    ({"promptTokenCount": 9, "cachedContentTokenCount": 5, "candidatesTokenCount": 4, "thoughtsTokenCount": 6,
      "toolUsePromptTokenCount": 2, "totalTokenCount": 21}, (11, 10)),
    ({"input_tokens": 5, "output_tokens": 2, "total_tokens": 7,
      "input_tokens_details": {"cached_tokens": 3}, "output_tokens_details": {"reasoning_tokens": 1}}, (5, 2)),
], ids=["openai", "embedding", "gemini", "responses"])
def test_r18b_2_control_usage_as_servers_state_it(usage, want):
    assert addon.answer_usage(json.dumps({"usage": usage}).encode(), "application/json") == want


# --- R18b-3 --------------------------------------------------------------------------------------------------------

def sglang_logprob_stream(tokens: int, pad: int) -> bytes:
    """SGLang's /generate stream with `return_logprob` (and `logprob_start_len: 0`): every event restates the
    text and the logprobs so far, so the stream grows with the square of its length."""
    logprobs = [[-0.5, 1, "x" * 4]] * pad
    return b"".join(b"data: " + json.dumps({"text": "x" * step, "meta_info": {
        "id": "r", "prompt_tokens": 9000, "completion_tokens": step, "input_token_logprobs": logprobs}}).encode()
        + b"\n\n" for step in range(1, tokens + 1)) + b"data: [DONE]\n\n"


def test_r18b_3_an_answer_too_large_to_parse_still_raises_the_floor(tmp_path):
    """The attack: a /generate stream made larger than the meter parses (METER_MAX_BYTES, 32 MiB) by asking for
    the prompt's logprobs in every event. Before: unread, nothing added to the floor, 9 000 prompt and 2 000
    completion tokens gone from it. The defence: an answer too large to parse still states its counts: the largest
    each known field reaches in it (a running total's last, one member's at least) is added as a floor."""
    stream = sglang_logprob_stream(2000, 1000)
    assert len(stream) > addon.METER_MAX_BYTES
    body = {"text": "fix it", "stream": True, "return_logprob": True, "logprob_start_len": 0}
    m = meter(tmp_path, [call("/generate", body, stream, ctype=SSE)])
    assert not m.complete
    assert m.prompt_tokens >= 9000 and m.completion_tokens >= 2000, "an answer too large to parse adds nothing"


def test_r18b_3_control_the_model_text_states_no_count():
    """Control: a count the model wrote (in a JSON string, its quotes escaped) is no field; an over-size answer
    naming no count adds nothing."""
    text = json.dumps({"text": 'usage: {"prompt_tokens": 0, "completion_tokens": 1}', "pad": "x"}).encode()
    assert addon.oversize_floor(text) == (0, 0)
    assert addon.oversize_floor(b'{"meta_info": {"prompt_tokens": 12, "completion_tokens": 7}}') == (12, 7)


# --- R18b-4 (a lead, out of this round's side of the addon) -----------------------------------------------------

@pytest.mark.parametrize("closed_book", [False, True])
def test_r18b_4_a_request_names_no_server_request_id(tmp_path, closed_book):
    """The attack: SGLang's /generate takes the request's `rid`; every abort (a client that hangs up, the global
    timeout) matches `req.rid.startswith(aborted.rid)` over the waiting and running requests. Sixteen calls with
    rids "0" … "f", each hung up at once, abort every other trial's calls on the shared server (uuid4 hex rids):
    their answers are errors, counted refused, their agents stalled. A rid another trial chose itself (its own
    scaffold's "req-1") is also taken over. The defence: `rid` is stripped from a request body (closed book: at any
    depth, as a hosted option; open book: a JSON object body's own)."""
    e = addon.Egress([MODEL], closed_book, tmp_path, ["default"])
    e.running()
    f = call("/generate", {"text": "fix it", "rid": "a", "stream": True}, b"")
    e.request(f)
    line = json.loads((tmp_path / "audit.jsonl").read_text().splitlines()[-1])
    assert not line["allowed"] or b'"rid"' not in f.request.content, "the agent names the server's request id"


def test_r18b_4_control_an_open_book_body_without_a_request_id_goes_as_it_came(tmp_path):
    """Open book reads no body: one without `rid` (a key that only holds the letters, a text that says rid) is
    forwarded byte for byte, and one Python cannot read goes as it came."""
    e = addon.Egress([MODEL], False, tmp_path)
    e.running()
    for body in (b'{"text": "a rid here", "sampling_params": {"max_new_tokens": 8}, "grid": 1}', b'{"rid": 1,,}'):
        f = call("/generate", {}, b"")
        f.request.content = body
        e.request(f)
        assert f.request.content == body


# --- R18b-5 --------------------------------------------------------------------------------------------------------

def proxy_whose_meter(answer):
    """An EgressProxy whose container answers the meter's read with `answer` (an exception, or a file's bytes)."""
    import io
    import tarfile
    from types import SimpleNamespace

    from sweserve.environment.egress import EgressProxy

    def get_archive(container_id, path, chunk_size=None):
        if isinstance(answer, Exception):
            raise answer
        buf = io.BytesIO()
        with tarfile.open(fileobj=buf, mode="w") as tar:
            info = tarfile.TarInfo("metered.json")
            info.size = len(answer)
            tar.addfile(info, io.BytesIO(answer))
        return iter([buf.getvalue()]), {"size": len(answer)}

    container = SimpleNamespace(id="proxy", client=SimpleNamespace(api=SimpleNamespace(get_archive=get_archive)))
    return EgressProxy(container, "http://10.0.0.9:3128")


@pytest.mark.parametrize("answer", ["docker-error", b"", b'{"requests": 1, "metered": "x"}', b" " * 5000],
                         ids=["docker-error", "empty", "not-a-meter", "too-large"])
def test_r18b_5_a_meter_that_cannot_be_read_is_no_meter_at_all(answer):
    """The attack: a proxy whose meter cannot be read when the phase ends (its container gone, its file not a
    meter). Before: `metered()` said None, as for an agent with no proxy at all, and `with_meter` kept the agent's
    record as it was: no floor, no "metered in part" on the board, no word on the review page. The defence: a
    proxy's meter that cannot be read is an incomplete meter of nothing (`unreadable`), so the run is marked."""
    import docker.errors

    if answer == "docker-error":
        answer = docker.errors.NotFound("no such container")
    meter_read = proxy_whose_meter(answer).metered()
    assert meter_read is not None and not meter_read.complete, "an unreadable meter passes for no proxy"
    run = with_meter(AgentRun(agent="cmd", usage_from="agent", prompt_tokens=5, completion_tokens=1,
                              cost_usd=0.000001), meter_read)
    assert run.metered is not None and not run.metered.complete


def test_r18b_5_control_a_readable_meter_is_read():
    m = proxy_whose_meter(b'{"requests": 1, "metered": 1, "prompt_tokens": 7, "completion_tokens": 3}').metered()
    assert m is not None and m.complete and (m.prompt_tokens, m.completion_tokens) == (7, 3)


# --- R18b-6 (a lead) -----------------------------------------------------------------------------------------------

def test_r18b_6_a_timed_out_parallel_step_is_no_dispute():
    """Two answers (3 000 + 200 and 2 500 + 150 tokens) read in the step the time limit cut; the record, saved
    after the step before, lacks both. The meter lists its last answers one by one (`recent`)."""
    from sweserve.models import Metered

    m = Metered(requests=4, metered=4, prompt_tokens=8_000, completion_tokens=600, last_prompt_tokens=2_500,
                last_completion_tokens=150, recent=[(1_000, 100), (1_500, 100), (3_000, 200), (2_500, 150)])
    run = with_meter(AgentRun(agent="cmd", usage_from="agent", exit_reason="timed_out", prompt_tokens=2_500,
                              completion_tokens=250, cost_usd=0.01), m)
    assert run.flags == [], "an honest parallel agent cut by the time limit is disputed"


def test_r18b_6_through_the_proxys_meter(tmp_path):
    """The same through the real addon: four answers, the record saved before the last two (a parallel step the
    time limit cut) is no dispute; short by the second and the fourth (no suffix of what was read), it is."""
    from test_attacks_metering import answer

    chat = {"model": "default", "messages": [{"role": "user", "content": "fix it"}]}
    m = meter(tmp_path, [call("/v1/chat/completions", chat, answer(p, c))
                         for p, c in ((1_000, 100), (1_500, 100), (3_000, 200), (2_500, 150))])
    assert m.recent == [(1_000, 100), (1_500, 100), (3_000, 200), (2_500, 150)]
    cut = with_meter(AgentRun(agent="cmd", usage_from="agent", exit_reason="timed_out", prompt_tokens=2_500,
                              completion_tokens=200, cost_usd=0.01), m)  # the first two answers
    assert cut.flags == [] and cut.cost_usd is None and (cut.prompt_tokens, cut.completion_tokens) == (8_000, 550)
    forged = with_meter(AgentRun(agent="cmd", usage_from="agent", exit_reason="timed_out", prompt_tokens=4_000,
                                 completion_tokens=300, cost_usd=0.01), m)
    assert forged.flags and forged.flags[0].startswith("usage_disagrees")
