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
- R22a-2 (the meter): an answer in a content coding the proxy cannot undo. `Accept-Encoding` is a client header
  forwarded with any value, in both modes: asked for `x-gzip`, `compress`, `dcz` (or `*` with `gzip;q=0`), a server
  that has the coding answers in it; mitmproxy decodes identity, gzip, deflate, br and zstd only, so the answer is
  unread and its floor 0 tokens (`resp.content` raises): every call so, and any record of the agent's stood.
  Defence: a passed call asks only for codings the proxy reads (the others are removed from `Accept-Encoding`;
  none left, `identity`), as mitmproxy's own `constrain_encoding` does.
- R22a-3 (the meter, open book): Google's system parameters shape the answer in open book, which checks no query
  parameter nor header: `?alt=proto` (or `$alt`, R21a-3's defence was closed book's only) answers in protobuf, and a
  field mask (`?fields=candidates`, `$fields`, the `X-Goog-FieldMask` header) leaves `usageMetadata` out of the
  answer. Each call unread with a floor of 0 tokens (a Gemini chunk of output is no OpenAI `choices` one). Defence: in
  both modes, a call may not ask for an answer shaped other than its API's default: `alt` only `sse` or `json`, no
  field mask (a query parameter refused, the header removed).
"""

from __future__ import annotations

import json

import pytest
from test_attacks_metering import SSE, events
from test_attacks_redteam15f import MODEL
from test_attacks_redteam16e import addon, call, meter, no_mitmproxy  # noqa: F401  (no_mitmproxy: an autouse fixture)

from sweserve.evaluation.trial import with_meter
from sweserve.models import AgentRun

GEMINI_BODY = {"contents": [{"role": "user", "parts": [{"text": "fix it"}]}]}
GEMINI_ANSWER = {"candidates": [{"content": {"parts": [{"text": "done"}]}}],
                 "usageMetadata": {"promptTokenCount": 90000, "candidatesTokenCount": 4000, "totalTokenCount": 94000}}




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
    m = meter(tmp_path, [f], closed_book=closed_book)
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
    m = meter(tmp_path, [call(path, body, json.dumps(answer).encode(), method=method)])
    assert m.complete and (m.requests, m.prompt_tokens, m.completion_tokens) == (0, 0, 0), m


# --- R22a-2 --------------------------------------------------------------------------------------------------------

def forwarded_encoding(tmp_path, closed_book: bool, value: str) -> str:
    e = addon.Egress([MODEL], closed_book, tmp_path, ["default"])
    e.running()
    f = call("/v1/chat/completions", {"model": "default", "messages": [{"role": "user", "content": "hi"}]}, b"")
    f.request.headers["Accept-Encoding"] = value
    e.request(f)
    assert f.response is None, "the proxy refused the call"
    got = [v for k, v in f.request.headers.items() if k.lower() == "accept-encoding"]
    assert len(got) == 1, got
    return got[0]


READABLE = {"identity", "gzip", "deflate", "br", "zstd"}


@pytest.mark.parametrize("closed_book", [False, True], ids=["open-book", "closed-book"])
@pytest.mark.parametrize("value", ["x-gzip", "compress", "dcz, dcb", "*, gzip;q=0", "gzip;q=0.1, x-bzip2"],
                         ids=["x-gzip", "compress", "dictionary", "any", "one-unread"])
def test_r22a_2_a_call_asks_only_for_codings_the_proxy_reads(tmp_path, closed_book, value):
    """Won: forwarded as it came; the server's answer in that coding was unread, its floor 0 tokens."""
    got = forwarded_encoding(tmp_path, closed_book, value)
    codings = {item.split(";")[0].strip().lower() for item in got.split(",") if item.strip()}
    assert codings and codings <= READABLE, f"forwarded Accept-Encoding {got!r}"


@pytest.mark.parametrize("value", ["gzip, deflate", "gzip, deflate, br, zstd", "identity", "br;q=1.0, gzip;q=0.8"])
def test_r22a_2_control_a_clients_codings_pass_as_they_are(tmp_path, value):
    assert forwarded_encoding(tmp_path, True, value) == value


# --- R22a-3 --------------------------------------------------------------------------------------------------------

def passed(tmp_path, closed_book: bool, path: str, headers: dict | None = None) -> bool:
    """Whether the call went on with what it asked (a header asking it removed: it did not)."""
    e = addon.Egress([MODEL], closed_book, tmp_path, ["default"])
    e.running()
    f = call(path, GEMINI_BODY, b"")
    f.request.headers.update(headers or {})
    e.request(f)
    kept = {k.lower() for k in f.request.headers} >= {k.lower() for k in headers or {}}
    return json.loads((tmp_path / "audit.jsonl").read_text().splitlines()[-1])["allowed"] and kept


SHAPED = {
    "alt-proto": ("/v1beta/models/default:generateContent?alt=proto", None),
    "dollar-alt": ("/v1beta/models/default:streamGenerateContent?$alt=proto", None),
    "escaped-dollar-alt": ("/v1beta/models/default:generateContent?%24alt=media", None),
    "fields": ("/v1beta/models/default:generateContent?fields=candidates", None),
    "dollar-fields": ("/v1beta/models/default:streamGenerateContent?alt=sse&$fields=candidates", None),
    "fieldmask-header": ("/v1beta/models/default:generateContent", {"X-Goog-FieldMask": "candidates"}),
}


@pytest.mark.parametrize("closed_book", [False, True], ids=["open-book", "closed-book"])
@pytest.mark.parametrize("path, headers", SHAPED.values(), ids=SHAPED.keys())
def test_r22a_3_an_answer_shaped_past_the_meter_is_refused(tmp_path, closed_book, path, headers):
    """Won (open book): passed; the answer was protobuf or had no usageMetadata: unread, floor 0 tokens."""
    assert not passed(tmp_path, closed_book, path, headers), f"{path} {headers} passed"


@pytest.mark.parametrize("path", [
    "/v1beta/models/default:streamGenerateContent?alt=sse",
    "/v1beta/models/default:generateContent?key=AIza-Sy_0123&alt=json",
    "/v1beta/models/default:generateContent?anything=else",  # open book reads no other parameter
])
def test_r22a_3_control_open_book_passes_a_clients_query(tmp_path, path):
    assert passed(tmp_path, False, path, {"x-goog-api-client": "genai-js/1.0"})
