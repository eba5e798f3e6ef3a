"""Tokens and cost a command agent cannot forge: its egress proxy meters the model's own answers
(`images/proxy/egress_addon.py`: `answer_usage`, `Egress.response`, metered.json), the trial takes a complete
meter's counts over the agent's record (`evaluation/trial.with_meter`), and reports say when a cost is only the
agent's word. Before, tokens and cost came from the trajectory the agent writes in its own sandbox: a record
of 0 tokens and $0 put it first on cost with nothing to tell it apart."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest
from test_attacks_redteam15f import MODEL
from test_egress import load_addon

from sweserve.evaluation.trial import with_meter
from sweserve.models import AgentRun, Metered

addon = load_addon()

SSE = "text/event-stream"


def events(*objs) -> bytes:
    return "".join(f"data: {json.dumps(o)}\n\n" for o in objs).encode() + b"data: [DONE]\n\n"


@pytest.mark.parametrize("content, ctype, want", [
    (json.dumps({"choices": [], "usage": {"prompt_tokens": 7, "completion_tokens": 3, "total_tokens": 10}}),
     "application/json", (7, 3)),  # OpenAI chat
    (json.dumps({"usage": {"input_tokens": 5, "cache_read_input_tokens": 4, "cache_creation_input_tokens": 1,
                           "output_tokens": 2}}), "application/json", (10, 2)),  # Anthropic
    (json.dumps({"usageMetadata": {"promptTokenCount": 9, "candidatesTokenCount": 4, "thoughtsTokenCount": 6}}),
     "application/json", (9, 10)),  # Gemini
    (json.dumps([{"text": "a", "meta_info": {"prompt_tokens": 2, "completion_tokens": 1}},
                 {"text": "b", "meta_info": {"prompt_tokens": 3, "completion_tokens": 4}}]),
     "application/json", (5, 5)),  # SGLang's /generate, a batch
    (events({"choices": [{"delta": {"content": "x"}}], "usage": None},
            {"choices": [], "usage": {"prompt_tokens": 11, "completion_tokens": 6}}), SSE, (11, 6)),  # OpenAI stream
    (events({"type": "message_start", "message": {"usage": {"input_tokens": 8, "output_tokens": 1}}},
            {"type": "message_delta", "usage": {"output_tokens": 12}}), SSE, (8, 12)),  # Anthropic stream
    (events({"type": "response.completed", "response": {"usage": {"input_tokens": 4, "output_tokens": 9}}}),
     SSE, (4, 9)),  # OpenAI Responses stream
    (events({"choices": [{"delta": {"content": "x"}}]}), SSE, None),  # a stream that states no usage
    # counts that are no counts: unread (a floor), never a complete 0 (red team 18b, R18b-2)
    (json.dumps({"usage": {"prompt_tokens": True, "completion_tokens": -5}}), "application/json", None),
    (b"not json", "application/json", None),
])
def test_the_proxy_reads_usage_from_the_models_answers(content, ctype, want):
    assert addon.answer_usage(content if isinstance(content, bytes) else content.encode(), ctype) == want


def flow(body: dict, answer: bytes | None, status=200, ctype="application/json"):
    return SimpleNamespace(
        request=SimpleNamespace(method="POST", scheme="http", host="10.0.0.5", port=30000,
                                content=json.dumps(body).encode(), url=f"{MODEL}/v1/chat/completions",
                                headers={"content-type": "application/json"}),
        client_conn=SimpleNamespace(peername=("10.1.1.2", 5555)), response=None, metadata={},
        answer=SimpleNamespace(status_code=status, content=answer, headers={"content-type": ctype}))


@pytest.fixture(autouse=True)
def no_mitmproxy(monkeypatch):
    monkeypatch.setattr(addon.Egress, "refuse", staticmethod(lambda flow, what: None))  # mitmproxy builds the 403


def meter_after(tmp_path, flows, connects=0):
    e = addon.Egress([MODEL, "https://api.example.com:443"], True, tmp_path, ["m"])
    e.running()
    for f in flows:
        e.request(f)
        if f.response is None and f.answer.content is not None:  # passed, and answered
            f.response = f.answer
            e.response(f)
    for _ in range(connects):
        e.http_connect(SimpleNamespace(request=SimpleNamespace(method="CONNECT", host="api.example.com", port=443),
                                       client_conn=SimpleNamespace(peername=("10.1.1.2", 5555)), response=None))
    return Metered.model_validate_json((tmp_path / "metered.json").read_text())


def answer(p, c):
    return json.dumps({"usage": {"prompt_tokens": p, "completion_tokens": c}}).encode()


def test_the_meter_counts_every_call_and_says_when_it_is_complete(tmp_path):
    m = meter_after(tmp_path, [flow({"model": "m"}, answer(100, 20)), flow({"model": "m"}, answer(50, 5)),
                               flow({"model": "m"}, b'{"error": "x"}', status=500),
                               flow({"model": "sonar"}, answer(1, 1))])  # refused by the proxy: never sent
    assert (m.requests, m.metered, m.refused, m.prompt_tokens, m.completion_tokens) == (3, 2, 1, 150, 25)
    assert m.complete


@pytest.mark.parametrize("make, why", [
    (lambda p: meter_after(p, [flow({"model": "m"}, events({"choices": []}), ctype=SSE)]), "a stream without usage"),
    (lambda p: meter_after(p, [flow({"model": "m"}, None)]), "a call with no answer (the agent hung up)"),
    (lambda p: meter_after(p, [flow({"model": "m"}, answer(1, 1))], connects=1), "an https tunnel"),
])
def test_a_meter_that_missed_something_is_not_complete(tmp_path, make, why):
    assert not make(tmp_path).complete, why


def agent_record(**kw):
    return AgentRun(agent="a", usage_from="agent", **kw)


def test_a_forged_record_yields_to_a_complete_meter():
    """The attack: a trajectory stating 10 tokens and $0.0001 for a run the model answered at 150k tokens."""
    meter = Metered(requests=3, metered=3, prompt_tokens=150_000, completion_tokens=9_000)
    run = with_meter(agent_record(prompt_tokens=10, completion_tokens=0, cost_usd=0.0001), meter)
    assert (run.prompt_tokens, run.completion_tokens, run.usage_from) == (150_000, 9_000, "proxy")
    assert run.cost_usd is None and run.flags[0].startswith("usage_disagrees")
    assert run.metered == meter


def test_control_an_honest_record_keeps_its_cost():
    meter = Metered(requests=2, metered=2, prompt_tokens=300, completion_tokens=60)
    run = with_meter(agent_record(prompt_tokens=300, completion_tokens=60, cost_usd=0.02), meter)
    assert (run.prompt_tokens, run.cost_usd, run.flags, run.usage_from) == (300, 0.02, [], "proxy")


def test_an_incomplete_meter_is_still_a_floor():
    """The variant: the agent leaves one call unmetered on purpose (a stream without usage, a call it hangs up
    on), hoping its forged record then stands."""
    meter = Metered(requests=2, metered=1, unread=1, prompt_tokens=300, completion_tokens=60)
    run = with_meter(agent_record(prompt_tokens=3, completion_tokens=1, cost_usd=0.0), meter)
    assert (run.prompt_tokens, run.completion_tokens, run.usage_from, run.metered) == (300, 60, "agent", meter)
    assert run.cost_usd is None and run.flags[0].startswith("usage_disagrees")


def test_control_an_incomplete_meter_leaves_a_record_above_it():
    meter = Metered(requests=2, metered=1, unread=1, prompt_tokens=300, completion_tokens=60)
    run = with_meter(agent_record(prompt_tokens=700, completion_tokens=90, cost_usd=0.01), meter)
    assert (run.prompt_tokens, run.cost_usd, run.flags, run.usage_from) == (700, 0.01, [], "agent")


def test_reports_say_a_cost_is_the_agents_own_word(tmp_path):
    from sweserve.models import RunResult
    from sweserve.reporting.html import _leaderboard_table
    from sweserve.reporting.summary import build_reports

    def result(agent, run, task="t-1"):
        from sweserve.models import now

        return RunResult(run_id="r", task_id=task, family="decoding", agent=agent, status="resolved",
                         agent_run=run, started_at=now(), finished_at=now(), duration_s=1.0)

    own = with_meter(agent_record(prompt_tokens=1, cost_usd=0.0), Metered(requests=1, metered=1, prompt_tokens=9))
    api = AgentRun(agent="api", usage_from="host", prompt_tokens=9, cost_usd=0.5)
    reports = build_reports([result("cmd", own), result("api", api)])
    by = {r.agent: r for r in reports}
    assert by["cmd"].cost_self_reported is False  # its cost was dropped: the tokens disagreed
    assert by["cmd"].usage_disputed == 1 and by["api"].cost_self_reported is False
    honest = agent_record(prompt_tokens=9, cost_usd=0.25)
    (rep,) = build_reports([result("cmd2", honest)])
    assert rep.cost_self_reported
    assert "self-reported" in _leaderboard_table([rep]) and "self-reported" not in _leaderboard_table(reports)


def test_the_meter_stays_a_count_results_can_hold(tmp_path):
    """Sums of counts near 2**53 (a server's bug, or one an agent found a way to make lie) would outgrow what a
    results reader takes back (R15d-1): the meter stops at sweserve's largest count."""
    big = answer(2**53 - 1, 2**53 - 1)
    m = meter_after(tmp_path, [flow({"model": "m"}, big), flow({"model": "m"}, big)])
    assert m.prompt_tokens == m.completion_tokens == 2**53 and m.complete
    run = with_meter(AgentRun(agent="a"), m)
    from sweserve.models import RunResult, now

    line = RunResult(run_id="r", task_id="t", family="decoding", agent="a", status="failed", agent_run=run,
                     started_at=now(), finished_at=now(), duration_s=1.0).model_dump_json()
    from sweserve.evaluation.results import read_results

    (tmp_path / "r.jsonl").write_text(line + "\n")
    assert read_results(tmp_path / "r.jsonl")[0].agent_run.prompt_tokens == 2**53


def test_the_review_page_says_who_counted_the_tokens():
    from test_attacks_redteam15b import _bundle, _patch, _result

    from sweserve.reporting.review import review_html

    bundle = _bundle()
    said = agent_record(steps=3, prompt_tokens=10, cost_usd=0.0001)
    page = review_html(bundle, _result(bundle, _patch("x = 1"), agent="cmd", run=said))
    assert "the agent&#x27;s own record, written in its sandbox" in page and "$0.0001 (the agent" in page
    metered = with_meter(said, Metered(requests=1, metered=1, prompt_tokens=9_000, completion_tokens=50))
    page = review_html(bundle, _result(bundle, _patch("x = 1"), agent="cmd", run=metered))
    assert "9000 prompt + 50 completion tokens (metered by its egress proxy" in page and "cost —" in page


def test_a_gemini_stream_as_one_json_array_is_not_summed():
    """`:streamGenerateContent` without `alt=sse` answers one JSON array of chunks, each with the running
    totals: summed, an honest run's tokens tripled and its own record read as a dispute."""
    chunks = [{"candidates": [], "usageMetadata": {"promptTokenCount": 9, "candidatesTokenCount": n}}
              for n in (1, 4, 7)]
    assert addon.answer_usage(json.dumps(chunks).encode(), "application/json") == (9, 7)
    batch = [{"text": "a", "meta_info": {"prompt_tokens": 2, "completion_tokens": 1}},
             {"text": "b", "meta_info": {"prompt_tokens": 3, "completion_tokens": 4}}]
    assert addon.answer_usage(json.dumps(batch).encode(), "application/json") == (5, 5)  # SGLang's batch: summed
