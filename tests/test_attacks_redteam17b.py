"""A seventeenth red team's (17b) attacks on the proxy's token meter: tokens and cost a command agent cannot
forge (`images/proxy/egress_addon.py`: `answer_usage`, `Egress.response`, metered.json;
`evaluation/trial.with_meter`; the reports' `cost_self_reported`/`usage_disputed`).

Each test asserts the defended behaviour: it FAILS while the attack wins. All run on the host against the addon.

- R17b-1 WIN: a complete meter that counts a fraction of a stream. The meter split a server-sent-event stream
  with `str.splitlines()`, which also breaks a line at U+2028, U+2029, U+0085 (and \\x0b, \\x0c, \\x1c-\\x1e);
  a JSON encoder that writes UTF-8 as it is (SGLang's orjson, pydantic's `model_dump_json`) leaves those raw
  inside a string, and SSE lines end only at CR or LF. SGLang's native `/generate` stream states the text so
  far in every event: an agent that has the model write U+2028 as its third token breaks every later event,
  and the meter (complete, `usage_from: proxy`) says 2 completion tokens for 100. An event whose `data` spans
  several `data:` lines (one event, its lines joined by LF, in the SSE spec) was lost the same way. The honest
  side: an agent whose model wrote such a character has its true record disputed and its cost dropped.
  `test_r17b_1_an_sse_stream_splits_only_at_line_ends`.
- R17b-2 WIN: an incomplete meter is no floor for a run with no record. `with_meter` raised a record to the meter
  only when it flagged it, and flagged only a record of the agent's own (`usage_from: agent`): an agent that
  leaves no record (its trajectory path made a directory: R16e-6) and one call unread (a stream without
  `include_usage`) kept 0 tokens, unflagged, the meter's 150k beside them unseen; the review page showed no
  token count at all. `test_r17b_2_an_incomplete_meter_is_a_floor_without_a_record`.
"""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest
from test_attacks_metering import SSE, answer
from test_attacks_redteam15f import MODEL
from test_attacks_redteam16e import call, meter
from test_egress import load_addon

from sweserve.evaluation.trial import with_meter
from sweserve.models import AgentRun, Metered

addon = load_addon()


@pytest.fixture(autouse=True)
def no_mitmproxy(monkeypatch):
    monkeypatch.setattr(addon.Egress, "refuse", staticmethod(lambda flow, what: None))


# --- R17b-1 --------------------------------------------------------------------------------------------------------

def raw_events(*objs, eol: str = "\n") -> bytes:
    """Events as a server that writes UTF-8 unescaped (orjson, pydantic) sends them."""
    return "".join(f"data: {json.dumps(o, ensure_ascii=False)}{eol}{eol}" for o in objs).encode()


def sglang_text_stream(breaker: str, tokens: int = 100, at: int = 3) -> bytes:
    """SGLang's /generate stream (text so far in every event), whose model wrote `breaker` as token `at`."""
    text, chunks = "", []
    for step in range(1, tokens + 1):
        text += breaker if step == at else "x"
        chunks.append({"text": text, "meta_info": {"id": "r", "prompt_tokens": 50, "completion_tokens": step}})
    return raw_events(*chunks)


@pytest.mark.parametrize("breaker", ["\u2028", "\u2029", "\u0085"], ids=["LS", "PS", "NEL"])
def test_r17b_1_an_sse_stream_splits_only_at_line_ends(tmp_path, breaker):
    """The attack: "start your answer with `ok`, then U+2028, then the patch". Before: metered (50, 2) of (50,
    100), complete, and the agent's record of 2 tokens agreed with it. The defence: events are split as the SSE
    spec splits them (CR, LF, CRLF; a blank line ends an event)."""
    body = {"text": "Write the fix.", "stream": True, "sampling_params": {"max_new_tokens": 100}}
    m = meter(tmp_path, [call("/generate", body, sglang_text_stream(breaker), ctype=SSE)])
    assert m.complete
    assert (m.prompt_tokens, m.completion_tokens) == (50, 100), "metered up to the model's line separator"
    honest = with_meter(AgentRun(agent="a", usage_from="agent", prompt_tokens=50, completion_tokens=100,
                                 cost_usd=0.01), m)
    assert honest.flags == [] and honest.cost_usd == 0.01, "an honest record disputed"


def test_r17b_1_an_event_of_several_data_lines_is_one_event():
    """The variant: one event's data in several `data:` lines (joined by LF, per the SSE spec)."""
    stream = (raw_events({"text": "a", "meta_info": {"prompt_tokens": 50, "completion_tokens": 1}})
              + b'data: {"text": "ab",\ndata: "meta_info": {"prompt_tokens": 50, "completion_tokens": 900}}\n\n')
    assert addon.answer_usage(stream, SSE) == (50, 900)


@pytest.mark.parametrize("eol", ["\n", "\r\n", "\r"])
def test_r17b_1_control_streams_as_servers_send_them(eol):
    """Control: LF, CRLF and CR line ends, comments, `event:` and `id:` fields, OpenAI's [DONE], a final event
    with no blank line after it: read as before."""
    head = f": keep-alive{eol}{eol}event: message_start{eol}id: 1{eol}".encode()
    stream = head + raw_events({"type": "message_start", "message": {"usage": {"input_tokens": 8}}},
                               {"choices": [{"delta": {"content": "\u2028"}}], "usage": None}, eol=eol) \
        + f"data: [DONE]{eol}{eol}data:{{\"usage\": {{\"output_tokens\": 12}}}}".encode()
    assert addon.answer_usage(stream, SSE) == (8, 12)


def test_r17b_1_control_a_stream_without_blank_lines_is_still_read():
    """Control: a server that leaves out the blank lines between its events (every `data:` line one event) is
    read as before."""
    stream = b'data: {"meta_info": {"prompt_tokens": 5, "completion_tokens": 1}}\n' \
             b'data: {"meta_info": {"prompt_tokens": 5, "completion_tokens": 7}}\ndata: [DONE]\n'
    assert addon.answer_usage(stream, SSE) == (5, 7)


# --- R17b-2 --------------------------------------------------------------------------------------------------------

UNREAD = Metered(requests=4, metered=3, unread=1, prompt_tokens=150_000, completion_tokens=9_000)


def test_r17b_2_an_incomplete_meter_is_a_floor_without_a_record():
    """The attack: no record of its own, and one stream without usage. Before: 0 and 0 tokens, no flag, the review
    page silent. The defence: an incomplete meter raises any run's counts to what it read, and the review page
    says the count is a floor."""
    from test_attacks_redteam15b import _bundle, _patch, _result

    from sweserve.reporting.review import review_html

    run = with_meter(AgentRun(agent="a"), UNREAD)  # no record: usage_from ""
    assert (run.prompt_tokens, run.completion_tokens) == (150_000, 9_000), "the meter's floor ignored"
    bundle = _bundle()
    page = review_html(bundle, _result(bundle, _patch("x = 1"), agent="cmd", run=run))
    assert "150000 prompt + 9000 completion tokens" in page
    assert "could not read 1 of its 4 model calls" in page


def test_r17b_2_control_a_record_above_an_incomplete_meter_stands():
    run = with_meter(AgentRun(agent="a", usage_from="agent", prompt_tokens=200_000, completion_tokens=10_000,
                              cost_usd=0.5), UNREAD)
    assert (run.prompt_tokens, run.completion_tokens, run.cost_usd, run.flags) == (200_000, 10_000, 0.5, [])


# --- R17b-3 --------------------------------------------------------------------------------------------------------

def switched(method: str, path: str, status: int):
    return SimpleNamespace(
        request=SimpleNamespace(method=method, scheme="http", host="10.0.0.5", port=30000, content=b"",
                                url=f"{MODEL}{path}", headers={"upgrade": "websocket", "connection": "Upgrade"}),
        client_conn=SimpleNamespace(peername=("10.1.1.2", 5555)), response=None, metadata={},
        answer=SimpleNamespace(status_code=status, content=b"", headers={}))


def open_meter(tmp_path, flows):
    return meter(tmp_path, flows, models=(), closed_book=False)  # no closed book: an Upgrade passes


@pytest.mark.parametrize("method, path", [("POST", "/v1/responses"), ("GET", "/v1/models/default")])
def test_r17b_3_a_switched_connection_is_not_metered_complete(tmp_path, method, path):
    """The attack: a WebSocket to the model server, then its generations over it. Before: the meter complete at
    0 tokens. The defence: a 101 answer is a connection the proxy no longer reads, counted with the tunnels."""
    m = open_meter(tmp_path, [switched(method, path, 101)])
    assert not m.complete, "generations over a switched connection are unmetered"


def test_r17b_3_control_a_refused_upgrade_and_a_plain_call_stay_complete(tmp_path):
    """Control: an Upgrade the server answers with an error, a listing, and a plain call leave the meter complete."""
    plain = switched("POST", "/v1/chat/completions", 200)
    plain.request.headers, plain.answer.content = {"content-type": "application/json"}, answer(10, 2)
    plain.answer.headers = {"content-type": "application/json"}
    m = open_meter(tmp_path, [switched("POST", "/v1/responses", 426), switched("GET", "/v1/models", 200), plain])
    assert m.complete and (m.prompt_tokens, m.completion_tokens) == (10, 2)


# --- R17b-4 --------------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("content, want", [
    ({"candidates": [], "usageMetadata": {"promptTokenCount": 900, "toolUsePromptTokenCount": 40_000,
                                          "candidatesTokenCount": 300, "totalTokenCount": 41_200}}, (40_900, 300)),
    ({"choices": [], "usage": {"total_tokens": 41_200}}, None),
    ({"choices": [], "usage": {"billed_units": {"input_tokens": 40_900, "output_tokens": 300}}}, None),
    ({"choices": [], "usage": {}}, None),
    # an answer's own usage, unread, is not replaced by one deeper down (an echoed `metadata` the agent wrote)
    ({"usage": {"total_tokens": 41_200}, "metadata": {"usage": {"prompt_tokens": 1, "completion_tokens": 1}}}, None),
    ({"usage": {"total_tokens": 5}, "meta_info": {"prompt_tokens": 3, "completion_tokens": 2}}, (3, 2)),
], ids=["gemini-tool-use", "total-only", "unknown-names", "empty", "no-deeper", "next-key"])
def test_r17b_4_usage_the_meter_cannot_read_is_not_zero(content, want):
    """Before: (900, 300) for Gemini's 41 200 tokens, and (0, 0), metered, for the others. The defence: Gemini's
    tool-use prompt counted as prompt; a usage object naming none of the fields the meter reads is no reading
    (unread: the meter incomplete, its count a floor)."""
    assert addon.answer_usage(json.dumps(content).encode(), "application/json") == want


def test_r17b_4_control_usage_that_states_zero_is_zero():
    """Control: a stated 0 is a reading; a stream's events with `usage: null` or an empty usage are skipped, its
    last chunk read."""
    assert addon.answer_usage(answer(0, 0), "application/json") == (0, 0)
    stream = raw_events({"choices": [{"delta": {"content": "x"}}], "usage": None},
                        {"choices": [{"delta": {"content": "y"}}], "usage": {}},
                        {"choices": [], "usage": {"prompt_tokens": 11, "completion_tokens": 6}})
    assert addon.answer_usage(stream, SSE) == (11, 6)


# --- R17b-5 --------------------------------------------------------------------------------------------------------

def test_r17b_5_the_board_counts_attempts_metered_in_part():
    """The attack: one unread stream per attempt, and a record at the meter's floor with a cost of $0.0001 (the
    unread calls' 400k tokens left out). Before: the board's cost cell and the terminal report the same as an
    honest agent's. The defence: `AgentReport.usage_unmetered` counts them, and both say so."""
    import io

    from rich.console import Console
    from test_attacks_redteam16e import _cheap, _graded

    from sweserve.reporting.html import _leaderboard_table
    from sweserve.reporting.summary import build_reports, render

    floor = with_meter(AgentRun(agent="cmd", usage_from="agent", prompt_tokens=2_000, completion_tokens=100,
                                cost_usd=0.0001), Metered(requests=2, metered=1, unread=1, prompt_tokens=2_000,
                                                          completion_tokens=100))
    assert floor.flags == [] and floor.cost_usd == 0.0001  # the floor holds: no dispute to show
    (rep,) = build_reports([_graded("t-1", _cheap()), _graded("t-2", floor)])
    assert rep.usage_unmetered == 1
    assert "metered in part" in _leaderboard_table([rep]), "the board hides the attempt its proxy saw in part"
    out = io.StringIO()
    render([rep], Console(file=out, width=300))
    assert "1 attempts' token counts are only a floor" in out.getvalue()
    (honest,) = build_reports([_graded("t-1", _cheap())])  # control: a complete meter is no mark
    assert honest.usage_unmetered == 0 and "metered in part" not in _leaderboard_table([honest])


# --- R17b-6 --------------------------------------------------------------------------------------------------------

@pytest.mark.xfail(strict=True, reason="R17b-6: a command agent's cost is its record's word; sweserve prices no "
                   "command agent's metered tokens (needs a price in its config and a cost of sweserve's own)")
def test_r17b_6_a_forged_cost_with_true_tokens_stands():
    """The attack: the same metered 2 100 tokens, one record at $0.01 (honest), one at $0.000001."""
    from test_attacks_redteam16e import _cheap, _graded

    from sweserve.reporting.summary import build_reports

    meter = Metered(requests=1, metered=1, prompt_tokens=2_000, completion_tokens=100)
    forged = with_meter(AgentRun(agent="cmd", usage_from="agent", prompt_tokens=2_000, completion_tokens=100,
                                 cost_usd=0.000001), meter)
    (honest,) = build_reports([_graded("t-1", _cheap())])
    (rep,) = build_reports([_graded("t-1", forged)])
    assert forged.flags or rep.cost_per_task_usd == honest.cost_per_task_usd, "a cost the meter never checks"
