"""Red team 22i: open book's reading of a body, against the newest egress fixes (`images/proxy/egress_addon.py`).

Open book reads no body but a call's JSON: it removes SGLang's `rid` (R18b-4, R22e-4) and makes an OpenAI chat or
completions stream ask for its usage (R22e-1). Both read the body with Python's `json.loads` and forward one Python
cannot read as it came. The server need not read as Python does: what it reads and Python did not is a `rid` that
aborts every other trial's calls, or a stream that states no usage (its prompt floor 0 under any record). All run on
the host against the addon's hooks: no Docker.

- R22i-1: a byte that is not UTF-8 inside a string. Python refuses the body (UnicodeDecodeError); Go's encoding/json
  (Ollama's OpenAI-compatible API, a Go gateway) and Node's parsers replace the byte and read the rest: `stream: true`
  went on without `include_usage`, `rid` went on.
- R22i-2: a body nested past Python's recursion limit (a 2000-deep list in a field the server ignores). Python raises
  RecursionError; Go's encoding/json reads 10000 levels: the same two went on.
- R22i-3: a charset parameter. Open book read the bytes as UTF-8 whatever the Content-Type said; Express's json()
  (body-parser, iconv-lite) decodes by it: under `charset=utf-7` `"+ACIALAAgACI-stream+ACI-: true` in a string is a key.
  A body whose keys Python never saw went on as it came.
- R22i-4: vLLM's body `request_id`. Both modes remove the `X-Request-Id` header (vLLM's request id, R21a's lead) and
  open book SGLang's `rid`, but vLLM's OpenAI server takes its request id from the body's `request_id` as readily
  (`_base_request_id`: the header, else the body's field): on a server every trial shares, one trial naming another's
  id collides with its requests, and a hang-up aborts by it. Open book sent it on.
- R22i-5: two charset parameters. R22i-3's fix read the first (`charset=utf-8; charset=utf-7`); Express's
  content-type parser keeps the last of a repeated parameter: the body went on as it came, read as utf-7 there.
- R22i-6: a JSON body labelled a form. LiteLLM's proxy reads a body whose Content-Type has "form" in it as a form
  (R16d): `"&stream=true&rid=0&"` inside a JSON string is two fields there. Closed book relabels every body
  `application/json`; open book sent the label on as it came.
"""

from __future__ import annotations

import json

import pytest
from test_attacks_redteam15f import MODEL
from test_attacks_redteam16e import addon, call, no_mitmproxy  # noqa: F401  (no_mitmproxy: an autouse fixture)
from test_attacks_redteam22e import CHAT, forwarded


def open_book(tmp_path, raw: bytes, path: str = "/v1/chat/completions", ctype: str = "application/json"):
    """The request open book sent on (None if it refused the call)."""
    e = addon.Egress([MODEL], False, tmp_path, ["default"])
    e.running()
    f = call(path, None, b"")
    f.request.content = raw
    f.request.headers["content-type"] = ctype
    e.request(f)
    refused = not json.loads((tmp_path / "audit.jsonl").read_text().splitlines()[-1])["allowed"]
    return None if refused else f.request


def lax(raw: bytes, encoding: str = "utf-8"):
    """What a lax server (Go's encoding/json, Node's) reads: bad bytes replaced, any depth (no recursion)."""
    text = raw.decode(encoding, "replace")
    return json.JSONDecoder().decode(text) if text.count("[") < 900 else None


def deep(n: int) -> str:
    return "[" * n + "]" * n


# --- R22i-1 --------------------------------------------------------------------------------------------------------

BAD_BYTE = b'{"model": "default", "messages": [{"role": "user", "content": "fix \xff it"}], '


@pytest.mark.parametrize("raw, path", [
    (BAD_BYTE + b'"stream": true}', "/v1/chat/completions"),
    (b'{"model": "default", "prompt": "\xc3(", "stream": true}', "/v1/completions"),
], ids=["chat", "completions"])
def test_r22i_1_a_stream_with_a_byte_not_utf8_asks_for_its_usage(tmp_path, raw, path):
    """Won: forwarded as it came; a Go or Node server read `stream: true`, the stream stated no usage."""
    req = open_book(tmp_path, raw, path)
    assert req is None or lax(req.content).get("stream_options") == {"include_usage": True}, req.content


def test_r22i_1_a_rid_beside_a_byte_not_utf8_is_removed(tmp_path):
    """Won: forwarded as it came; the server read `rid` (R18b-4)."""
    req = open_book(tmp_path, BAD_BYTE + b'"rid": "0"}', "/generate")
    assert req is None or "rid" not in lax(req.content), req.content


# --- R22i-2 --------------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("tail, path", [(b'"stream": true}', "/v1/chat/completions"), (b'"rid": "0"}', "/generate")],
                         ids=["stream", "rid"])
def test_r22i_2_a_body_nested_past_pythons_limit_is_not_sent_unread(tmp_path, tail, path):
    """Won: forwarded as it came (RecursionError); Go reads 10000 levels, and the stream or the rid with them."""
    raw = b'{"model": "default", "messages": [], "x": ' + deep(2000).encode() + b", " + tail
    req = open_book(tmp_path, raw, path)
    assert req is None or req.content != raw, "forwarded unread"


# --- R22i-3 --------------------------------------------------------------------------------------------------------

UTF7_STREAM_PARAMS = ["charset=utf-7", "charset=utf-8; charset=utf-7"]


@pytest.mark.parametrize("params", UTF7_STREAM_PARAMS, ids=["utf-7", "r22i_5-second-charset"])
def test_r22i_3_a_body_read_by_its_charset_asks_for_its_usage(tmp_path, params):
    """Won: forwarded as it came; under utf-7 the server read `"stream": true` (Python read a string `x`). R22i-5:
    the second charset parameter, the one Express reads."""
    q = b"+ACI-"  # '"' in utf-7; "+ACIALAAgACI-" is '", "'
    raw = b'{"model": "default", "messages": [], "x": "+ACIALAAgACI-stream' + q + b": true, " + q + b"y" + q + b": " + q \
        + b'q", "z": 1}'
    assert lax(raw, "utf-7")["stream"] is True and "stream" not in json.loads(raw)  # the two readings
    req = open_book(tmp_path, raw, ctype=f"application/json; {params}")
    if req is None:
        return
    ctype = req.headers["content-type"]
    assert "charset" not in ctype or ctype.count("charset") == 1, ctype
    read = lax(req.content, addon.charset(ctype) or "utf-8")
    assert read.get("stream_options") == {"include_usage": True}, (ctype, req.content)


# --- R22i-4 --------------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("key", ["request_id", "requestId", "Request_ID"])
def test_r22i_4_an_open_book_body_names_no_vllm_request_id(tmp_path, key):
    """Won: forwarded with the shared server's request id."""
    raw = json.dumps({"model": "default", "messages": [], key: "chatcmpl-0"}).encode()
    req = open_book(tmp_path, raw)
    assert req is None or not [k for k in json.loads(req.content) if k.replace("_", "").casefold() == "requestid"]


# --- R22i-6 --------------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("ctype", ["application/x-www-form-urlencoded", "multipart/form-data; boundary=x",
                                   "text/plain"])
def test_r22i_6_a_json_body_goes_labelled_json(tmp_path, ctype):
    """Won: forwarded labelled a form; a form reader took `stream` and `rid` from inside a JSON string."""
    raw = b'{"model": "default", "messages": [], "user": "&stream=true&rid=0&"}'
    req = open_book(tmp_path, raw, ctype=ctype)
    assert req is None or req.headers["content-type"] == "application/json", req.headers


# --- controls ------------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("raw", [
    b'{"model": "default", "messages": [{"role": "user", "content": "caf\xc3\xa9"}]}',
    b'{"model": "default", "messages": [], "x": ' + deep(100).encode() + b"}",
    b'{"rid": 1,,}',
], ids=["utf8", "nested-100", "not-json"])
def test_r22i_control_a_body_without_rid_or_stream_goes_byte_for_byte(tmp_path, raw):
    req = open_book(tmp_path, raw)
    assert req is not None and req.content == raw


def test_r22i_control_a_utf8_charset_stream_is_read_as_ever(tmp_path):
    raw = b'{"model": "default", "messages": [], "stream": true}'
    req = open_book(tmp_path, raw, ctype="application/json; charset=UTF-8")
    assert req is not None and json.loads(req.content)["stream_options"] == {"include_usage": True}


# --- R22i-7 (closed book) ------------------------------------------------------------------------------------------
# R22e-2's rule let a `tool_choice` name any tool when the request carried no `tools` at all (a name is checked only
# against the tools the request keeps, and there were none to check): Anthropic's `{"type": "tool", "name":
# "web_search"}`, Chat's `{"type": "function", "function": {"name": "web_search"}}` or the Responses API's
# `{"type": "function", "name": "code_interpreter"}` went on naming a hosted tool a gateway may add for the choice.
# A name must be one of the request's own tools, and with none there is no such name.

def _choice_only(path: str, choice: dict) -> dict:
    base = ({"model": "default", "max_tokens": 8, "messages": []} if path == "/v1/messages"
            else {"model": "default", "input": "hi"} if path == "/v1/responses" else dict(CHAT))
    return {**base, "tool_choice": choice}


@pytest.mark.parametrize("path, choice", [
    ("/v1/messages", {"type": "tool", "name": "web_search"}),
    ("/v1/chat/completions", {"type": "function", "function": {"name": "web_search"}}),
    ("/v1/responses", {"type": "function", "name": "code_interpreter"}),
], ids=["anthropic", "chat", "responses"])
def test_r22i_7_a_named_choice_with_no_tools_goes(tmp_path, path, choice):
    """Won: forwarded naming a hosted tool, as the request had no tools to check the name against."""
    got = forwarded(tmp_path, True, path, _choice_only(path, choice))
    assert got is None or not any(k.casefold() == "tool_choice" for k in got), got


@pytest.mark.parametrize("path, choice", [
    ("/v1/messages", {"type": "auto"}), ("/v1/chat/completions", {"type": "none"}),
], ids=["anthropic-auto", "chat-none"])
def test_r22i_7_control_a_mode_with_no_tools_passes(tmp_path, path, choice):
    assert forwarded(tmp_path, True, path, _choice_only(path, choice)) == _choice_only(path, choice)
