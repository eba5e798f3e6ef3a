"""A sixteenth red team's (16e) attacks on the newest defences of a report's numbers: the egress proxy's token
meter (`images/proxy/egress_addon.py`: `answer_usage`, `Egress.request`/`response`, metered.json;
`evaluation/trial.with_meter`) and closed book's second pass (`models_named`, `routing_fields`, `CONTENT_KEYS`).

Each test asserts the defended behaviour: it FAILS while the attack wins. All run on the host against the addon.

- R16e-1 WIN: a complete meter that counts a fraction of the tokens. SGLang's native `/generate` takes a batch
  (`"text": [p1, p2, ...]`) or parallel samples (`"sampling_params": {"n": 8}`); streamed, each member's chunks
  come as separate events with its own cumulative `meta_info` and an `"index"`
  (`TokenizerManager._handle_batch_request`: `result["index"] = rid_to_index[...]; yield result`). The meter
  takes the largest count each field reaches over the events (right for one running total), so a streamed batch
  of N is metered as its largest member: N generations for the tokens of one, meter complete, `usage_from:
  proxy`, nothing flagged. (The unstreamed batch, a JSON list, is summed.)
  `test_a_streamed_sglang_batch_is_metered_whole`.
- R16e-2 WIN (honest agents): a call that generates nothing makes an honest meter incomplete. GET /v1/models (an
  SDK's `models.list()`, a scaffold's health check), Anthropic's `/v1/messages/count_tokens` and Gemini's
  `:countTokens` are model calls the proxy passes and counts, but their answers state no `usage`: counted
  `unread`, so the meter is not complete and the honest agent's tokens fall back to its own record (`usage_from:
  agent`, "written in its sandbox" on the review page). `test_calls_that_generate_nothing_leave_the_meter_complete`.
- R16e-3 WIN (honest agents): every mini-swe-agent run the time limit cuts during a command is flagged
  `usage_disagrees` and loses its cost. mini-swe-agent (2.x) saves its trajectory in the `finally` after each
  whole step (query, then execute): killed while the step's command runs, its record lacks the answer the proxy
  already metered. The meter is complete and one answer larger than the record: flagged as disputed, cost dropped,
  counted in the report's "N attempts' own token counts disagree" -- an accusation of forging against an honest
  agent. `test_a_timed_out_record_one_answer_short_is_not_disputed`.
- R16e-4 WIN (honest agents): closed book refuses Anthropic structured outputs whose schema has a property named
  `model` (or `base_url`, `preset`): `output_format` (the structured-outputs beta) and `output_config.format` hold
  a JSON schema, but are not in CONTENT_KEYS, so `models_named` reads the property `model` (its value, a schema,
  "named" by its JSON) and `routing_fields` a property `base_url`. The request is refused, every time.
  `test_an_anthropic_output_schema_is_content`.
- R16e-5 WIN (a misled reviewer): a dispute never reaches the HTML board nor the review page. A record that
  disagrees with a complete meter loses its cost, and the board's cost per task is the mean of the costs left:
  an agent that forges its record on its expensive attempts (their costs dropped) is shown at the cost of its
  cheap ones, marked only "self-reported" (the mark every honest command agent's cost has). `usage_disagrees`
  is in `agent_run.flags`, which only the terminal report's summary line counts: the board's cost cell and the
  attempt's review page say nothing of it. `test_the_board_and_review_page_show_a_disputed_record`.
- R16e-6 WIN (a misled reviewer, no flag at all): the same without a dispute. An agent that leaves no record
  (mini-swe-agent's trajectory path made a directory in its last command: the save after the submitting step
  fails, the read finds no file) has a complete meter's tokens (`usage_from: proxy`) and no cost: not flagged,
  and its cost is left out of the board's mean, which is then its cheap attempts' alone.
  `test_the_board_says_its_cost_is_a_mean_of_fewer_attempts`.
"""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest
from test_attacks_metering import SSE, answer, events
from test_attacks_redteam15f import MODEL, run
from test_egress import load_addon

from sweserve.evaluation.trial import with_meter
from sweserve.models import AgentRun, Metered

addon = load_addon()


@pytest.fixture(autouse=True)
def no_mitmproxy(monkeypatch):
    monkeypatch.setattr(addon.Egress, "refuse", staticmethod(lambda flow, what: None))


def call(path: str, body, answer_body: bytes, *, method="POST", ctype="application/json"):
    return SimpleNamespace(
        request=SimpleNamespace(method=method, scheme="http", host="10.0.0.5", port=30000,
                                content=json.dumps(body).encode() if body is not None else b"",
                                url=f"{MODEL}{path}", headers={"content-type": "application/json"}),
        client_conn=SimpleNamespace(peername=("10.1.1.2", 5555)), response=None, metadata={},
        answer=SimpleNamespace(status_code=200, content=answer_body, headers={"content-type": ctype}))


def meter(tmp_path, flows, models=("default",), closed_book: bool = True) -> Metered:
    """The meter after the proxy passed each of `flows` and read its answer (each must pass)."""
    e = addon.Egress([MODEL], closed_book, tmp_path, list(models))
    e.running()
    for f in flows:
        e.request(f)
        assert f.response is None, "the proxy refused the call"
        f.response = f.answer
        e.response(f)
    return Metered.model_validate_json((tmp_path / "metered.json").read_text())


# --- R16e-1 --------------------------------------------------------------------------------------------------------

def sglang_stream(members: int, prompt: int, steps: int, index=True) -> bytes:
    """SGLang's /generate stream: each member's chunks, interleaved, with running meta_info counts."""
    chunks = []
    for step in range(1, steps + 1):
        for i in range(members):
            chunk = {"text": "x", "meta_info": {"id": f"r{i}", "prompt_tokens": prompt,
                                                        "completion_tokens": step}}
            if index:
                chunk["index"] = i
            chunks.append(chunk)
    return events(*chunks)


@pytest.mark.parametrize("body", [
    {"text": ["Write the fix."] * 8, "stream": True, "sampling_params": {"max_new_tokens": 4000}},
    {"text": "Write the fix.", "stream": True, "sampling_params": {"n": 8, "max_new_tokens": 4000}},
], ids=["batch", "parallel-samples"])
def test_a_streamed_sglang_batch_is_metered_whole(tmp_path, body):
    """8 members of 1000 prompt tokens each generate 4000 tokens: 8000 prompt and 32000 completion tokens."""
    m = meter(tmp_path, [call("/generate", body, sglang_stream(8, 1000, 4000), ctype=SSE)])
    assert m.complete
    assert (m.prompt_tokens, m.completion_tokens) == (8000, 32000), "metered as its largest member alone"


def chat_stream(n: int, prompt: int, steps: int, aggregate: bool) -> bytes:
    """SGLang's /v1/chat/completions stream with `stream_options.continuous_usage_stats`: each chunk one choice's,
    with that choice's running usage (`prompt_tokens.get(index)`); the aggregate last chunk only with include_usage."""
    chunks = [{"object": "chat.completion.chunk", "choices": [{"index": i, "delta": {"content": "x"}}],
               "usage": {"prompt_tokens": prompt, "completion_tokens": step, "total_tokens": prompt + step}}
              for step in range(1, steps + 1) for i in range(n)]
    if aggregate:
        chunks.append({"object": "chat.completion.chunk", "choices": [],
                       "usage": {"prompt_tokens": n * prompt, "completion_tokens": n * steps}})
    return events(*chunks)


def test_a_streamed_choice_per_chunk_is_metered_whole(tmp_path):
    """The same on SGLang's OpenAI API: `n: 8`, `stream_options: {include_usage: false, continuous_usage_stats:
    true}`: every chunk states one choice's running usage, and no chunk states the whole."""
    body = {"model": "default", "messages": [{"role": "user", "content": "fix it"}], "n": 8, "stream": True,
            "stream_options": {"include_usage": False, "continuous_usage_stats": True}}
    m = meter(tmp_path, [call("/v1/chat/completions", body, chat_stream(8, 1000, 400, False), ctype=SSE)])
    assert m.complete and (m.prompt_tokens, m.completion_tokens) == (8000, 3200)


def test_control_a_choice_stream_with_its_total_is_not_counted_twice():
    assert addon.answer_usage(chat_stream(8, 1000, 400, True), SSE) == (8000, 3200)


def test_control_one_sglang_stream_is_its_running_total():
    assert addon.answer_usage(sglang_stream(1, 1000, 50, index=False), SSE) == (1000, 50)


# --- R16e-2 --------------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("path, method, body, said", [
    ("/v1/models", "GET", None, {"object": "list", "data": [{"id": "default", "object": "model"}]}),
    ("/v1/models/default", "GET", None, {"id": "default", "object": "model"}),
    ("/v1/messages/count_tokens", "POST", {"model": "default", "messages": [{"role": "user", "content": "hi"}]},
     {"input_tokens": 12}),
    ("/v1beta/models/default:countTokens", "POST", {"contents": [{"parts": [{"text": "hi"}]}]}, {"totalTokens": 3}),
], ids=["list-models", "get-model", "anthropic-count_tokens", "gemini-countTokens"])
def test_calls_that_generate_nothing_leave_the_meter_complete(tmp_path, path, method, body, said):
    chat = {"model": "default", "messages": [{"role": "user", "content": "fix it"}]}
    m = meter(tmp_path, [call(path, body, json.dumps(said).encode(), method=method),
                         call("/v1/chat/completions", chat, answer(100, 20))])
    assert (m.prompt_tokens, m.completion_tokens) == (100, 20)
    assert m.complete, f"an honest agent's meter made incomplete by {method} {path}: {m}"
    run = with_meter(AgentRun(agent="mini", usage_from="agent", prompt_tokens=100, completion_tokens=20,
                              cost_usd=0.01), m)
    assert run.usage_from == "proxy"


# --- R16e-3 --------------------------------------------------------------------------------------------------------

def ten_steps(tmp_path) -> Metered:
    """The proxy's meter of ten calls: nine of 10k prompt and 500 completion tokens, then one of 12k and 600."""
    chat = {"model": "default", "messages": [{"role": "user", "content": "fix it"}]}
    return meter(tmp_path, [call("/v1/chat/completions", chat, answer(10_000, 500)) for _ in range(9)]
                 + [call("/v1/chat/completions", chat, answer(12_000, 600))])


def test_a_timed_out_record_one_answer_short_is_not_disputed(tmp_path):
    """Steps 1-9 saved (90k prompt, 4.5k completion tokens); step 10's answer (12k, 600) metered, its command cut
    by the time limit before mini-swe-agent's `finally: self.save(...)`."""
    m = ten_steps(tmp_path)
    saved = AgentRun(agent="mini", usage_from="agent", exit_reason="timed_out", prompt_tokens=90_000,
                     completion_tokens=4_500, cost_usd=0.3)
    run = with_meter(saved, m)
    assert (run.prompt_tokens, run.completion_tokens, run.usage_from) == (102_000, 5_100, "proxy")
    assert not [f for f in run.flags if f.startswith("usage_disagrees")], run.flags


@pytest.mark.parametrize("exit_reason, said", [
    ("finished", (90_000, 4_500)),  # finished: its record saved every answer
    ("timed_out", (10, 1)),  # cut, but short by more than the last answer: forged
    ("timed_out", (90_000, 4_000)),
])
def test_control_a_record_below_its_meter_is_still_disputed(tmp_path, exit_reason, said):
    run = with_meter(AgentRun(agent="mini", usage_from="agent", exit_reason=exit_reason, prompt_tokens=said[0],
                              completion_tokens=said[1], cost_usd=0.0001), ten_steps(tmp_path))
    assert run.flags[0].startswith("usage_disagrees") and run.cost_usd is None
    assert (run.prompt_tokens, run.completion_tokens) == (102_000, 5_100)


# --- R16e-4 --------------------------------------------------------------------------------------------------------

SCHEMA = {"type": "object", "additionalProperties": False, "required": ["model", "base_url"],
          "properties": {"model": {"type": "string", "description": "the model class the fix touches"},
                         "base_url": {"type": "string"}, "preset": {"type": "string"}}}


@pytest.mark.parametrize("extra", [
    {"output_format": {"type": "json_schema", "schema": SCHEMA}},  # structured-outputs-2025-11-13 (beta)
    {"output_config": {"format": {"type": "json_schema", "schema": SCHEMA}}},  # its GA form
], ids=["output_format", "output_config"])
def test_an_anthropic_output_schema_is_content(tmp_path, monkeypatch, extra):
    body = {"model": "default", "max_tokens": 1024, "messages": [{"role": "user", "content": "Summarise the fix."}],
            **extra}
    refused, flow = run(tmp_path, monkeypatch, body, path="/v1/messages", models=["default"])
    assert not refused, "an honest structured-output request refused"


def test_control_a_model_outside_the_content_is_still_refused(tmp_path, monkeypatch):
    body = {"model": "default", "max_tokens": 1024, "messages": [{"role": "user", "content": "hi"}],
            "output_config": {"format": {"type": "json_schema", "schema": SCHEMA}}, "fallbacks": ["sonar"]}
    refused, _ = run(tmp_path, monkeypatch, body, path="/v1/messages", models=["default"])
    assert refused


def _graded(task, run):
    from sweserve.models import RunResult, now

    return RunResult(run_id="r", task_id=task, family="decoding", agent="cmd", status="resolved", agent_run=run,
                     started_at=now(), finished_at=now(), duration_s=1.0)


def _cheap():
    """An honest attempt: its record agrees with its proxy's meter."""
    return with_meter(AgentRun(agent="cmd", usage_from="agent", prompt_tokens=2_000, completion_tokens=100,
                               cost_usd=0.01), Metered(requests=1, metered=1, prompt_tokens=2_000, completion_tokens=100))


# --- R16e-5 --------------------------------------------------------------------------------------------------------

def test_the_board_and_review_page_show_a_disputed_record():
    from test_attacks_redteam15b import _bundle, _patch, _result

    from sweserve.reporting.html import _leaderboard_table
    from sweserve.reporting.review import review_html
    from sweserve.reporting.summary import build_reports

    cheap = _cheap()
    # really 600k tokens (~$2): the record says 10 tokens and $0.0001
    forged = with_meter(AgentRun(agent="cmd", usage_from="agent", prompt_tokens=10, completion_tokens=0,
                                 cost_usd=0.0001), Metered(requests=40, metered=40, prompt_tokens=600_000,
                                                           completion_tokens=20_000))
    (rep,) = build_reports([_graded("t-1", cheap), _graded("t-2", forged)])
    assert rep.cost_per_task_usd == 0.01 and rep.usage_disputed == 1  # the mean of the cheap attempt alone
    board = _leaderboard_table([rep])
    assert "disput" in board or "disagree" in board, "the board's cost cell hides the disputed attempt"
    bundle = _bundle()
    page = review_html(bundle, _result(bundle, _patch("x = 1"), agent="cmd", run=forged))
    assert "usage_disagrees" in page or "disagree" in page, "the review page hides the dispute"


# --- R16e-6 --------------------------------------------------------------------------------------------------------

def test_the_board_says_its_cost_is_a_mean_of_fewer_attempts():
    from sweserve.reporting.html import _leaderboard_table
    from sweserve.reporting.summary import build_reports

    cheap = _cheap()
    unrecorded = with_meter(AgentRun(agent="cmd", exit_code=1), Metered(requests=40, metered=40,
                                                                        prompt_tokens=600_000,
                                                                        completion_tokens=20_000))
    assert unrecorded.flags == [] and unrecorded.cost_usd is None and unrecorded.usage_from == "proxy"
    (rep,) = build_reports([_graded("t-1", cheap), _graded("t-2", unrecorded)])
    assert rep.cost_per_task_usd == 0.01
    board = _leaderboard_table([rep])
    assert "1 of 2" in board, "the board's cost per task is one attempt's of two, and does not say so"
