"""Red team 22a: model-only egress, closed book and the meter (`images/proxy/egress_addon.py`).

Each attack is a test that FAILS while the attack wins and passes once defended; controls keep honest clients'
requests and records passing. All run on the host against the addon's hooks: no Docker.

- R22a-1 (the meter): a call the proxy passes as one that generates nothing (`generates`: a GET, a token count) that
  generates all the same. `model_call` passes a GET of `.../models/NAME` whatever NAME is, so
  `GET /v1beta/models/default:generateContent` with the body of a generateContent call passes; Google's front takes
  `X-HTTP-Method-Override: POST` (a header open book forwards), as a gateway's pass-through route (LiteLLM's
  `/gemini/{endpoint:path}`, any method) forwards a GET with its body. The answer states its usage, but the meter
  counted neither the call nor its answer: complete, 0 tokens, and an agent's record of 0 tokens (no cost) stood
  unflagged. Defence: an answer to any passed model call that states a usage (or streams) is metered, whatever the
  request looked like; a listing's or a token count's answer states none.
"""

from __future__ import annotations

import json

import pytest
from test_attacks_metering import SSE, events
from test_attacks_redteam15f import MODEL
from test_attacks_redteam16e import addon, call, no_mitmproxy  # noqa: F401  (no_mitmproxy: an autouse fixture)

from sweserve.evaluation.trial import with_meter
from sweserve.models import AgentRun, Metered

GEMINI_BODY = {"contents": [{"role": "user", "parts": [{"text": "fix it"}]}]}
GEMINI_ANSWER = {"candidates": [{"content": {"parts": [{"text": "done"}]}}],
                 "usageMetadata": {"promptTokenCount": 90000, "candidatesTokenCount": 4000, "totalTokenCount": 94000}}


def metered(tmp_path, flows, closed_book: bool) -> Metered:
    e = addon.Egress([MODEL], closed_book, tmp_path, ["default"])
    e.running()
    for f in flows:
        e.request(f)
        assert f.response is None, "the proxy refused the call"
        f.response = f.answer
        e.response(f)
    return Metered.model_validate_json((tmp_path / "metered.json").read_text())


# --- R22a-1 --------------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("closed_book", [False, True], ids=["open-book", "closed-book"])
@pytest.mark.parametrize("path, answer, ctype", [
    ("/v1beta/models/default:generateContent", json.dumps(GEMINI_ANSWER).encode(), "application/json"),
    ("/gemini/v1beta/models/default:streamGenerateContent?alt=sse", events(GEMINI_ANSWER), SSE),
    ("/v1/messages/count_tokens", json.dumps({"id": "msg_1", "type": "message", "content": [], "usage": {
        "input_tokens": 90000, "output_tokens": 4000}}).encode(), "application/json"),
], ids=["get-generate", "get-stream", "count-path-generates"])
def test_r22a_1_a_call_passed_as_generating_nothing_is_metered_by_its_answer(tmp_path, path, answer, ctype,
                                                                             closed_book):
    """Won: the meter complete at 0 tokens, and a record of 0 tokens stood unflagged."""
    method = "POST" if "count_tokens" in path else "GET"
    f = call(path, GEMINI_BODY if method == "GET" else {"model": "default", "max_tokens": 8, "messages": []},
             answer, method=method, ctype=ctype)
    f.request.headers["X-HTTP-Method-Override"] = "POST"
    m = metered(tmp_path, [f], closed_book)
    assert (m.prompt_tokens, m.completion_tokens) == (90000, 4000) and m.complete, m
    forged = AgentRun(agent="gemini-cli", prompt_tokens=0, completion_tokens=0, usage_from="agent",
                      exit_reason="submitted")
    assert with_meter(forged, m).prompt_tokens == 90000


@pytest.mark.parametrize("path, answer", [
    ("/v1/models", {"data": [{"id": "default", "object": "model"}]}),
    ("/v1beta/models/default", {"name": "models/default", "inputTokenLimit": 1048576}),
    ("/v1/messages/count_tokens", {"input_tokens": 12}),
    ("/v1beta/models/default:countTokens", {"totalTokens": 12}),
], ids=["listing", "one-model", "anthropic-count", "gemini-count"])
def test_r22a_1_control_calls_that_generate_nothing_leave_the_meter_complete(tmp_path, path, answer):
    method = "POST" if "count" in path.lower() else "GET"
    body = None if method == "GET" else (GEMINI_BODY if ":" in path else {"model": "default", "messages": []})
    m = metered(tmp_path, [call(path, body, json.dumps(answer).encode(), method=method)], True)
    assert m.complete and (m.requests, m.prompt_tokens, m.completion_tokens) == (0, 0, 0), m
