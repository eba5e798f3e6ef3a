"""sweserve's egress policy as a mitmproxy addon (runs inside the proxy container, not in sweserve).

- Only the allowed origins pass: plain-HTTP requests whose (scheme, host, port) is allowed, to a model API's
  own paths (`model_call`: chat, completions, messages, responses, generate, embeddings, listing models; never a
  server's admin endpoints), and CONNECT tunnels to allowed https origins (TLS is passed through, never
  intercepted). Everything else gets 403.
- Every request, allowed or refused, is one JSON line in the audit log (URL clipped); a full log (LOG_LIMIT)
  refuses every later request, so the log is bounded and never silent.
- Metering: the usage each model answer states (OpenAI's, Anthropic's, Gemini's and SGLang's fields, whole or
  streamed) is summed into metered.json, with the answers it could not read and the TLS tunnels it could not
  see counted beside it: what the agent used, counted from the model server's answers, never from the sandbox.
- Closed book: hosted tools (web search, code execution, …) are removed from JSON model requests, so the
  model provider cannot look things up for the agent; only pinned models, a model client's own headers and query
  parameters pass, and no routing field nor URL the provider would fetch. Every hook fails closed: mitmproxy sends a
  request on after an addon's error. A body the proxy cannot read as JSON (a Content-Encoding
  it cannot undo, a byte that is not UTF-8) is refused: the server may read it, and the tools the proxy did not.

Configured by environment variables: SWESERVE_EGRESS_ALLOW (JSON list of "scheme://host:port"),
SWESERVE_EGRESS_CLOSED_BOOK ("1" or "0"), SWESERVE_EGRESS_DIR (where audit.jsonl and the ready marker go).
The policy functions import nothing from mitmproxy, so they are tested on the host.
"""

from __future__ import annotations

import base64
import codecs
import json
import os
import re
import time
import unicodedata
from collections.abc import Iterator, Sequence
from pathlib import Path
from urllib.parse import parse_qsl, urlsplit

DEFAULT_PORTS = {"http": 80, "https": 443}
# Gemini's API is proto JSON: it takes each of these in lowerCamelCase too (googleSearch), so keys are compared
# with "_" removed and case folded
HOSTED_KEYS = ("google_search", "google_search_retrieval", "code_execution", "url_context", "google_maps",
               "enterprise_web_search", "retrieval", "file_search")
# fields (at any depth) that switch on the provider's own search or connectors: OpenAI's search options,
# Anthropic's MCP connector, OpenRouter's plugins (web), DashScope's enable_search, xAI's Live Search, Cohere's
# connectors (web-search)
HOSTED_OPTIONS = ("web_search_options", "mcp_servers", "plugins", "enable_search", "search_parameters",
                  "connectors",
                  # SGLang's /generate runs a pickled logits processor the request carries, on a server started
                  # with --enable-custom-logit-processor: code of the agent's on the server every trial shares
                  "custom_logit_processor",
                  # a request id for the shared server: SGLang aborts every request whose rid starts with an aborted
                  # one's, so rids "0" ... "f", each hung up, abort every other trial's calls (red team 18b, R18b-4)
                  "rid")
MAX_FIELD = 2048  # characters of a URL (or method) kept in an audit line
LOG_LIMIT = 64 << 20  # bytes of audit log; past it the proxy refuses everything (the log never goes silent)


def _fold(key: str) -> str:
    return key.replace("_", "").replace("-", "").casefold()


# Go's encoding/json (Go gateways) matches keys to fields case-insensitively, with Unicode folding (ſ is s, K
# is k): every key is compared casefolded, so "Tools", "toolſ" and "TYPE" are what a Go gateway reads them as
HOSTED_OPTIONS_FOLDED = {option.casefold() for option in HOSTED_OPTIONS}


HOSTED_FOLDED = {_fold(key): key for key in HOSTED_KEYS}


def clip(text: str) -> str:
    return text if len(text) <= MAX_FIELD else f"{text[:MAX_FIELD]}...[{len(text)} characters]"


def origin(url: str) -> tuple[str, str, int]:
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    return scheme, (parts.hostname or "").lower(), parts.port or DEFAULT_PORTS.get(scheme, 0)


# what an agent asks a model server: a POST to a path ending in one of these (the server's own prefix before it:
# /v1, /openai/v1, /api/v1, Azure's deployments), a GET of its models; a shared server's other endpoints
# (SGLang's /update_weights_from_disk, /release_memory_occupation, /flush_cache, /abort_request …) would let one
# agent change or stall the model every other trial uses (red team 15f's lead)
MODEL_POSTS = ("/chat/completions", "/completions", "/messages", "/messages/count_tokens", "/responses",
               "/embeddings", ":generateContent", ":streamGenerateContent", ":countTokens")
# a native generate endpoint (SGLang's, TGI's) is the whole path: under a prefix it is a gateway's own (LiteLLM's
# POST /key/generate makes API keys)
WHOLE_POSTS = ("/generate",)
MODEL_GETS = ("/models",)
# model calls that generate nothing and whose answers state no `usage` (a token count, a model listing): the
# meter leaves them out, else an honest client's listing made its meter incomplete (red team 16e, R16e-2)
COUNT_POSTS = ("/messages/count_tokens", ":countTokens")


def generates(method: str, url: str) -> bool:
    """Whether an allowed model call may generate (and so must be metered): not a GET, not a token count."""
    return method == "POST" and not urlsplit(url).path.endswith(COUNT_POSTS)


def model_call(method: str, url: str) -> bool:
    """Whether a plain-http request is a model API call (`MODEL_POSTS`, `MODEL_GETS`, or a GET of one model
    under /models/). A path with dot segments, empty segments, percent-escapes or backslashes is none: a server
    that resolves them would route to a path this check never saw. So is a target holding '#': a request target has
    no fragment (RFC 9112), so a server may read what follows it as path and query (Go's ParseRequestURI), which
    `urlsplit` drops before every check here reads the target (red team 18a, R18a-6)."""
    if "#" in url:
        return False
    path = urlsplit(url).path
    if any(bad in path for bad in ("/./", "/../", "//", "%", "\\")) or path.endswith(("/.", "/..")):
        return False
    if method == "POST":
        return path.endswith(MODEL_POSTS) or path in WHOLE_POSTS
    if method == "GET":
        head, _, last = path.rpartition("/")
        return path.endswith(MODEL_GETS) or (head.endswith("/models") and bool(last))
    return False


# Closed book keeps only the tools the client runs itself (an allow-list: a provider's next hosted tool is
# stripped before anyone names it): OpenAI's function and custom tools and the shell and patch tools its
# clients run (Codex), Anthropic's client tools (a name and an
# input schema, no type, or its client-run versioned types: bash, text editor, computer, memory), Gemini's
# function declarations. Each keeps the keys its API defines for it and any other key, unless that key names
# a hosted tool (HOSTED_KEYS, folded): a tool with no type needs a name (or only function declarations).
CLIENT_TYPES = ("function", "custom", "shell", "local_shell", "apply_patch")
CLIENT_VERSIONED = re.compile(r"(bash|text_editor|str_replace_editor|str_replace_based_edit_tool|computer|memory)"
                              r"_\d{8}")
UNTYPED_KEYS = {"name", "description", "inputschema", "cachecontrol", "strict", "inputexamples",
                "functiondeclarations", "deferloading", "eagerinputstreaming", "allowedcallers"}


RUNS_IN_KEYS = {"environment", "container", "containerid"}
# the keys a typed client tool has (folded): OpenAI's function (chat: `function`; Responses: flat), custom and shell
# tools, Anthropic's typed tools (a custom tool's schema, the computer tool's display, the text editor's
# max_characters), where it runs (RUNS_IN_KEYS, read below); and a chat `function`'s own. A typed tool with any other
# key is no client tool: removed, as an untyped one with an unlisted key is (red team 20c, R20c-4: a Gemini key
# nobody listed, `mcp_servers`, a `server_url` rode on a `function` tool past every check, all of which skip tools)
TYPED_KEYS = UNTYPED_KEYS - {"functiondeclarations"} | RUNS_IN_KEYS | {
    "type", "function", "parameters", "format", "displaywidthpx", "displayheightpx", "displaynumber", "enablezoom",
    "maxcharacters"}
FUNCTION_KEYS = {"name", "description", "parameters", "strict"}


def local_environment(value) -> bool:
    """Whether a tool's `environment` says it runs where the client is: none, or `{"type": "local"}`."""
    if value is None:
        return True
    return isinstance(value, dict) and all(isinstance(k, str) for k in value) \
        and [(k.casefold(), v) for k, v in value.items()] == [("type", "local")]


def hosted_kind(tool) -> str | None:
    """None for a tool the client runs itself (CLIENT_TYPES, CLIENT_VERSIONED, an untyped tool with a name or
    function declarations); else what to call the stripped tool in the audit log (its type, or its first key)."""
    if not isinstance(tool, dict) or not tool:
        return "not a tool object"
    keys = [key for key in tool if isinstance(key, str)]
    if len(keys) != len(tool):
        return "not a tool object"
    hosted = next((key for key in keys if _fold(key) in HOSTED_FOLDED), None)
    if hosted is not None:
        return hosted
    # every key a case-insensitive reader (a Go gateway) may take for "type": each must name a client tool
    types = [tool[key] for key in keys if key.casefold() == "type"]
    if types:
        bad = next((kind for kind in types if not isinstance(kind, str) or not (
            kind.casefold() in CLIENT_TYPES or CLIENT_VERSIONED.fullmatch(kind))), None)
        if bad is not None:
            return bad if isinstance(bad, str) else "type " + type(bad).__name__
        # where the tool runs: a client tool runs in the client, so an execution environment other than the local
        # one (OpenAI's hosted shell: `"environment": {"type": "container_auto", "network_policy": ...}`) makes it
        # hosted (red team 17a, R17a-8)
        if other := next((key for key in keys if _fold(key) not in TYPED_KEYS), None):
            return f"{types[0]} (with {other})"
        functions = [tool[key] for key in keys if _fold(key) == "function"]
        if any(not isinstance(f, dict) or any(not isinstance(k, str) or _fold(k) not in FUNCTION_KEYS for k in f)
               for f in functions):
            return f"{types[0]} (a function with other keys)"
        runs_in = next((key for key in keys if _fold(key) in RUNS_IN_KEYS and not local_environment(tool[key])), None)
        return None if runs_in is None else f"{types[0]} (hosted: {runs_in})"
    folded = {_fold(key): key for key in keys}
    if set(folded) <= UNTYPED_KEYS and (set(folded) == {"functiondeclarations"}
                                        or isinstance(tool.get(folded.get("name", "")), str)):
        return None
    return keys[0]


def strip_hosted_tools(body) -> list[str]:
    """Remove hosted tools from a model request body in place, at any depth (a batch request nests whole
    requests); what was removed."""
    stripped: list[str] = []
    if isinstance(body, list):
        for item in body:
            stripped += strip_hosted_tools(item)
        return stripped
    if not isinstance(body, dict):
        return stripped
    for key in [key for key in body if key.casefold() in HOSTED_OPTIONS_FOLDED]:
        if body.pop(key) is not None:
            stripped.append(key)
    for key in [key for key in body if key.casefold() == "tools"]:
        tools = body[key]
        if not isinstance(tools, list):
            continue
        kept = [t for t in tools if hosted_kind(t) is None]
        stripped += [kind for kind in map(hosted_kind, tools) if kind is not None]
        if len(kept) != len(tools):
            if kept:
                body[key] = kept
            else:
                del body[key]
                for choice in [k for k in body if k.casefold() == "tool_choice"]:
                    del body[choice]
    stripped += strip_choice(body)
    for key, value in body.items():
        # the client's own tools are kept as they are (their schemas name anything), and so is what a request says
        # to the model (a tool call's arguments in the history may hold a "plugins" key: red team 16d's lead)
        if key.casefold() != "tools" and _fold(key) not in CONTENT_KEYS:
            stripped += strip_hosted_tools(value)
    return stripped


# what a `tool_choice` may name besides the tools a request keeps: a mode (OpenAI's `auto`, `none`, `required`,
# Anthropic's `any`) or the kind of choice (`{"type": "tool", "name": ...}`, `function`, `custom`, `allowed_tools`)
CHOICE_WORDS = {"auto", "none", "required", "any", "tool", "function", "custom", "allowedtools"}


def _choice_parts(value) -> Iterator[tuple[str, object]]:
    """Each (folded key, value) at any depth of a tool_choice, read without recursion."""
    stack = [value]
    while stack:
        node = stack.pop()
        if isinstance(node, dict):
            for key, item in node.items():
                yield (_fold(key) if isinstance(key, str) else "", item)
                stack.append(item)
        elif isinstance(node, list):
            stack += node


def strip_choice(body: dict) -> list[str]:
    """Remove a `tool_choice` naming a hosted tool; what was removed. Each `type` in it must be a mode or kind of choice
    (CHOICE_WORDS) or a client tool's type (`hosted_kind`), and each `name` one of the tools the request keeps, where it
    carries any (with no tools, no name is one of them). A hosted tool named only there (`{"type": "web_search_preview"}`, Anthropic's `{"type": "tool",
    "name": "web_search"}`) is one a provider or gateway may add for the choice (red team 22e, R22e-2)."""
    lists = [tools for key, tools in body.items() if isinstance(key, str) and key.casefold() == "tools"]
    kept = [tool for tools in lists if isinstance(tools, list) for tool in tools if isinstance(tool, dict)]
    names = {v for tool in kept for k, v in _choice_parts(
        {k: item for k, item in tool.items() if isinstance(k, str) and _fold(k) in ("name", "function")})
        if k == "name" and isinstance(v, str)}

    def chosen(key: str, value) -> bool:
        if key == "type":
            return isinstance(value, str) and (_fold(value) in CHOICE_WORDS or hosted_kind({"type": value}) is None)
        # a name must be one of the request's own tools: with none, no name is (red team 22i, R22i-7: a request with
        # no `tools` let a choice name a hosted tool)
        return key != "name" or (isinstance(value, str) and value in names)

    stripped: list[str] = []
    for key in [k for k in body if isinstance(k, str) and _fold(k) == "toolchoice"]:
        value = body[key]
        if value is None or (isinstance(value, str) and _fold(value) in CHOICE_WORDS) or (
                isinstance(value, dict) and all(chosen(k, v) for k, v in _choice_parts(value))):
            continue
        del body[key]
        stripped.append(f"{key} {json.dumps(value)[:100]}")
    return stripped


def online_model(body) -> bool:
    """A `model` (at any depth) that OpenRouter runs with its web plugin (the ":online" variant)."""
    if isinstance(body, list):
        return any(map(online_model, body))
    if not isinstance(body, dict):
        return False
    return any((key.casefold() == "model" and isinstance(value, str) and value.rstrip().casefold().endswith(":online"))
               or (key.casefold() != "tools" and _fold(key) not in CONTENT_KEYS and online_model(value))
               for key, value in body.items())


# the headers a model client sends (the OpenAI, Anthropic and Gemini SDKs, Claude Code, Codex, litellm): closed
# book forwards these and removes every other one, as it keeps only the client's own tools. A gateway reads its
# routing from headers as readily as from the body: Portkey's `x-portkey-config` (a provider, a model, a custom
# host), Helicone's `Helicone-Target-URL`, LiteLLM's `x-litellm-*`, a front's `X-Original-URL` path rewrite
# (red team 17a, R17a-1)
CLIENT_HEADERS = {"host", "content-type", "content-length", "content-encoding", "transfer-encoding", "connection",
                  "keep-alive", "te", "expect", "accept", "accept-encoding", "accept-language", "user-agent",
                  "authorization", "x-api-key", "api-key", "idempotency-key", "x-request-id", "cache-control",
                  "pragma", "x-goog-api-key", "x-goog-api-client", "x-app", "originator", "session_id",
                  "conversation_id", "version"}
CLIENT_HEADER_PREFIXES = ("x-stainless-", "anthropic-", "openai-")


# a request's own id, which a model server takes as its id for it: on a server every trial shares, one trial naming
# another's id collides with its requests, and a hang-up aborts by it (SGLang's body `rid`, red team 18b, R18b-4).
# Removed in both modes; the server makes its own (red team 21a's lead)
REQUEST_ID_HEADERS = {"x-request-id"}
# and in a body (folded keys): SGLang's `rid`, vLLM's `request_id` (its OpenAI server's id when no X-Request-Id header
# names one: red team 22i, R22i-4). Open book removes them from a JSON object body; closed book refuses `request_id`
# (no client sends it) and strips `rid` at any depth (HOSTED_OPTIONS)
REQUEST_ID_KEYS = {"rid", "requestid"}
# a header that shapes the answer past the meter: Google's field mask (the `fields` parameter's header), which leaves
# `usageMetadata` out. Removed in both modes, as REQUEST_ID_HEADERS are (red team 22a, R22a-3)
REMOVED_HEADERS = REQUEST_ID_HEADERS | {"x-goog-fieldmask"}


# the content codings mitmproxy undoes (`mitmproxy.net.encoding`): an answer in any other is unread by the meter, its
# floor 0 tokens. A passed call asks for these only (red team 22a, R22a-2), as mitmproxy's `constrain_encoding` does
READABLE_CODINGS = {"identity", "gzip", "deflate", "br", "zstd"}  # and no transfer coding: `constrain_transfer`


def constrain_encoding(headers) -> list[str]:
    """Keep only READABLE_CODINGS in a request's Accept-Encoding (one field; `identity` if none is left, since no
    field at all accepts any coding); what was removed."""
    names = [n for n in list(headers.keys()) if _header_name(n).lower() == "accept-encoding"]
    if not names:
        return []
    items = [item.strip() for n in names for item in str(headers[n]).split(",") if item.strip()]
    # an item of weight 0 asks for nothing (`identity;q=0` left no readable coding acceptable: red team 23g, R23g-6)
    kept = [item for item in items if item.split(";")[0].strip().lower() in READABLE_CODINGS and not _refused_q(item)]
    if kept == items and len(names) == 1:
        return []
    for name in names:
        if name in headers:
            del headers[name]
    headers["Accept-Encoding"] = ", ".join(kept) or "identity"
    return [f"Accept-Encoding {item}" for item in items if item not in kept]


# the answer formats the meter reads (`answer_usage`, `stream_output`): JSON and server-sent events, or the server's
# own choice (`*/*`, its default: JSON). Any other a server may answer in when asked by Accept (a protobuf) was an
# answer of no usage and no chunks, a floor of 0 (red team 23g, R23g-5)
READABLE_MEDIA = {"application/json", "text/event-stream", "*/*"}


def _refused_q(item: str) -> bool:
    """Whether an Accept or Accept-Encoding item states `q=0` (not acceptable)."""
    for param in item.split(";")[1:]:
        name, _, value = param.partition("=")
        if name.strip().lower() == "q":
            try:
                return float(value.strip()) == 0
            except ValueError:
                return True  # a weight no one reads alike
    return False


def constrain_accept(headers, stream: bool = True) -> list[str]:
    """Keep only READABLE_MEDIA, each acceptable (no `q=0`), in a request's Accept (one field; `application/json,
    text/event-stream` if none is left, since a field refusing both makes the server choose what it may); what was
    removed. No field at all is the server's default: left as it is. Not `stream` (a call whose usage is asked only in
    its body's stream, not streaming: `streams_asked`): no event stream either, which a gateway streaming on Accept
    answered with no usage asked (red team 23m, R23m-3)."""
    names = [n for n in list(headers.keys()) if _header_name(n).lower() == "accept"]
    if not names:
        return []
    media = READABLE_MEDIA if stream else READABLE_MEDIA - {"text/event-stream"}
    items = [item.strip() for n in names for item in str(headers[n]).split(",") if item.strip()]
    kept = [item for item in items if item.split(";")[0].strip().lower() in media and not _refused_q(item)]
    if kept == items and len(names) == 1:
        return []
    for name in names:
        if name in headers:
            del headers[name]
    headers["Accept"] = ", ".join(kept) or ("application/json, text/event-stream" if stream else "application/json")
    return [f"Accept {item}" for item in items if item not in kept]


def constrain_transfer(headers) -> list[str]:
    """Keep only `trailers` in a request's TE (removed if none is left): any transfer coding a server answers in
    (`TE: gzip`) mitmproxy forwards still coded, with no Content-Encoding the meter could undo (red team 22e, R22e-3).
    What was removed."""
    names = [n for n in list(headers.keys()) if _header_name(n).lower() == "te"]
    items = [item.strip() for n in names for item in str(headers[n]).split(",") if item.strip()]
    kept = [item for item in items if item.split(";")[0].strip().lower() == "trailers"]
    if kept == items and len(names) <= 1:
        return []
    for name in names:
        if name in headers:
            del headers[name]
    if kept:
        headers["TE"] = "trailers"
    return [f"TE {item}" for item in items if item not in kept]


def _header_name(name) -> str:
    return name.decode("utf-8", "surrogateescape") if isinstance(name, bytes) else str(name)


def foreign_headers(headers) -> list[str]:
    """The header names (as sent) a model client does not send (CLIENT_HEADERS, CLIENT_HEADER_PREFIXES)."""
    names = [_header_name(name) for name in headers.keys()]
    return list(dict.fromkeys(name for name in names if name.lower() not in CLIENT_HEADERS
                              and not name.lower().startswith(CLIENT_HEADER_PREFIXES)))


# the query parameters a model client sends: Gemini's `alt=sse` and `key`, Azure's `api-version`, the Anthropic
# SDK's `beta=true`. Closed book refuses any other, and a value that is more than a plain token: LiteLLM's proxy
# takes `?model=` over the body's, and a gateway that reads query parameters as request fields takes `api_base` or
# `plugins` there (red team 17a, R17a-2)
QUERY_VALUE = re.compile(r"[A-Za-z0-9._-]*")
# and each with the values clients send: Google's `alt` also takes `proto` and `media`, answers the meter cannot read
# (a binary protobuf: no usage, no stream chunks, a floor of 0 under any record: red team 21a, R21a-3)
CLIENT_QUERY = {"alt": re.compile(r"sse|json"), "key": QUERY_VALUE, "api-version": QUERY_VALUE,
                "beta": re.compile(r"true")}


def shaping_query(url: str) -> str:
    """The first query parameter of `url` that asks for an answer shaped other than its API's default, in either mode
    ("" if none), as `name=value`: Google's system parameters `alt` (`$alt`) other than `sse` or `json` (protobuf,
    media) and `fields` (`$fields`), a mask that leaves `usageMetadata` out. Either made an answer the meter could not
    read, a floor of 0 tokens (red team 22a, R22a-3: open book checked no query parameter). And `stream` or
    `stream_options`, which a gateway reads beside the body's (R23g-4)."""
    # read at `;` too, as a reader splitting there does (Python's parse_qsl before 3.9.2, Starlette's then; the W3C's
    # form recommendation): `?key=k;stream=true` was a `key` alone here and a stream there (red team 23m, R23m-8)
    for name, value in parse_qsl(urlsplit(url).query.replace(";", "&"), keep_blank_values=True):
        key = name.removeprefix("$")
        if key == "fields" or (key == "alt" and not CLIENT_QUERY["alt"].fullmatch(value)):
            return f"{name}={value}"
        # a stream or its options asked in the query, which a gateway reads beside the body's fields: the body named
        # no `stream`, so no usage was asked (`ask_usage`), and the stream it got was unread, its prompt floor 0
        # (red team 23g, R23g-4). No model client sends either: any value, any casing, any subscript of it
        if _fold(re.split(r"[\[.]", key, maxsplit=1)[0]) in STREAM_QUERY:
            return f"{name}={value}"
    return ""


STREAM_QUERY = {"stream", "streamoptions"}  # folded (`_fold`)


# the pagination of a model listing (a GET of .../models): Anthropic's `limit`, `after_id`, `before_id`, Gemini's
# `pageSize`, `pageToken`, OpenAI-style `after`/`order`. An SDK's models.list() sends them; refusing them refused an
# honest client (red team 18a, R18a-2). Allowed on the listing's GET only, as plain tokens like the others
LISTING_QUERY = {"limit", "after_id", "before_id", "after", "before", "order", "pageSize", "pageToken"}


def foreign_query(url: str, method: str = "POST") -> str:
    """The first query parameter of `url` a model client does not send ("" if none), as `name=value`."""
    listing = method == "GET" and urlsplit(url).path.endswith(MODEL_GETS)
    for name, value in parse_qsl(urlsplit(url).query, keep_blank_values=True):
        if not ((name in CLIENT_QUERY and CLIENT_QUERY[name].fullmatch(value))
                or (listing and name in LISTING_QUERY and QUERY_VALUE.fullmatch(value))):
            return f"{name}={value}"
    return ""


# how deep a closed-book body may nest (an honest request's deepest part, a tool's schema, is a few dozen levels):
# the checks recurse, and one that raised RecursionError (`online_model`, two frames a level, past ~500) left the
# request to mitmproxy, which logs an addon's error and sends the request on (red team 17a, R17a-4)
MAX_DEPTH = 128


def nesting(body) -> int:
    """How deep a parsed JSON body nests (a scalar is 0), read without recursion."""
    deepest, stack = 0, [(body, 1)]
    while stack:
        node, depth = stack.pop()
        if isinstance(node, (dict, list)):
            deepest = max(deepest, depth)
            stack += [(child, depth + 1) for child in (node.values() if isinstance(node, dict) else node)]
    return deepest


# what a request says to the model, not to the server: a conversation (its tool calls' arguments are objects in
# Anthropic's and Gemini's history: Claude Code's Task tool takes a `model`), a schema of the answer. No server
# routes by a `model` in these, and reading them there refused honest requests (red team 16d)
CONTENT_KEYS = {"messages", "contents", "input", "system", "systeminstruction", "prompt", "responseformat", "text",
                "functions",
                # Gemini's answer schema, in generationConfig; the rest of generationConfig is no content: Vertex's
                # routingConfig there picks the model that answers (red team 17a, R17a-5)
                "responseschema", "responsejsonschema",
                # Anthropic's structured outputs: a JSON schema (its beta `output_format`, GA `output_config`), whose
                # properties may be named `model` or `base_url` (red team 16e, R16e-4)
                "outputformat", "outputconfig",
                # vLLM's answer schemas (and SGLang's, as a string): their `$schema` and `$id` are URLs no server
                # connects to (red team 18a, R18a-5's control)
                "guidedjson", "structuredoutputs", "jsonschema",
                # OpenAI's Predicted Outputs: the code the answer is expected to repeat, which may begin with a `//`
                # comment (red team 19a, R19a-2)
                "prediction"}


# keys (folded) whose value names the model that answers: Vertex's routingConfig.manualMode.modelName
MODEL_KEYS = {"model", "modelname",
              "lorapath"}  # SGLang's LoRA adapter: another model on the same server (R17a-6)


def _fallback_names(value) -> list[str]:
    """Every string in a fallback field's value, and every key of its mappings (read without recursion)."""
    names: list[str] = []
    stack = [value]
    while stack:
        node = stack.pop()
        if isinstance(node, str):
            names.append(node)
        elif isinstance(node, dict):
            names += [key for key in node if isinstance(key, str)]
            stack += list(node.values())
        elif isinstance(node, list):
            stack += node
    return names


def models_named(body) -> list[str]:
    """Every model a request body names, at any depth outside `tools` and a request's content (CONTENT_KEYS):
    each `model` (`modelName`, `lora_path`: MODEL_KEYS) value, and each entry of a `models` or `fallbacks` list
    (OpenRouter's and LiteLLM's routing to other models); keys compared case-insensitively. A value that is not a string is named by its JSON, so it
    never matches a pinned name."""
    named: list[str] = []
    if isinstance(body, list):
        for item in body:
            named += models_named(item)
    elif isinstance(body, dict):
        for key, value in body.items():
            folded = key.casefold()
            if folded == "tools" or _fold(key) in CONTENT_KEYS:
                continue
            if "fallback" in _fold(key) and folded != "fallbacks":
                # LiteLLM's router takes `context_window_fallbacks` and `content_policy_fallbacks` from a request (and
                # litellm `context_window_fallback_dict`): a model to go to when the pinned one refuses, in lists or
                # {model: [models]} maps. Every string in it, and every key, names a model (red team 18a, R18a-7)
                named += _fallback_names(value) or [json.dumps(value)[:200]]
            elif _fold(key) in MODEL_KEYS or (folded in ("models", "fallbacks")
                                              and not isinstance(value, (list, dict))):
                named.append(value if isinstance(value, str) else json.dumps(value)[:200])
            elif folded in ("models", "fallbacks") and isinstance(value, list):
                for item in value:
                    if isinstance(item, str):
                        named.append(item)
                    else:
                        named += models_named(item) or [json.dumps(item)[:200]]
            else:
                named += models_named(value)
    return named


# fields by which a gateway sends a request elsewhere than to a model it serves: LiteLLM's `api_base`,
# `base_url`, `custom_llm_provider` and `user_config` (a whole router config), OpenRouter's `preset`. With one, a
# gateway the config names becomes a way to any host (red team 16d's lead)
ROUTING_KEYS = {"apibase", "baseurl", "customllmprovider", "userconfig", "preset",
                "routingconfig",  # Vertex's model routing: a model it names, or one its autoMode picks (R17a-5)
                # a disaggregated server's peer, which the server connects to: SGLang's bootstrap host, vLLM's
                # kv_transfer_params (remote_host) (R17a-6)
                "bootstraphost", "bootstrapport", "bootstrapaddr", "kvtransferparams",
                # what a gateway adds to its upstream request: LiteLLM passes `extra_headers` (and `headers`,
                # `extra_query`) on to the provider, past the header and query allow-lists (red team 18a, R18a-5)
                "extraheaders", "headers", "extraquery"}
# a value that is a URL: a scheme and "//", a scheme-relative "//host", or a special scheme with no slashes, which a
# WHATWG URL parser (Node's) reads as "scheme://". Outside a request's content and `tools`, such a value is a place
# something connects to, whatever the field is called: LiteLLM takes per-request endpoints beside `api_base`
# (`aws_bedrock_runtime_endpoint`, ...) (R18a-5)
# Leading C0 controls and spaces are stripped, and a backslash is a slash, as a WHATWG parser reads them
URL_VALUE = re.compile(r"[\x00-\x20\s]*(?:(?:[A-Za-z][A-Za-z0-9+.-]*:)?[/\\]{2}|(?:https?|wss?|ftp|file):)",
                       re.IGNORECASE)
# stop sequences are text the server matches in the output, never a place: a code agent's `"\n//"` (a comment) is
# no URL. So are a fill-in-the-middle completion's `suffix` (code), the Responses API's `instructions` (a system
# prompt) and the grammars constrained decoding follows (SGLang's `regex`, `ebnf`, `structural_tag`, vLLM's
# `guided_*`), a MIME type asked of Gemini (`application/json`) and the Responses API's `include` (what to return):
# as a string or a list of strings, each is text (red team 19a, R19a-2)
STOP_KEYS = {"stop", "stopsequences", "suffix", "instructions", "regex", "ebnf", "grammar", "structuraltag",
             "guidedregex", "guidedgrammar", "guidedchoice", "guidedwhitespacepattern", "responsemimetype", "include",
             "stopregex", "badwords"}  # SGLang's stop regex, vLLM's banned words: text matched in the output


# a value a gateway builds a URL from need not be a URL: LiteLLM's Vertex route is
# `https://{vertex_location}-aiplatform.googleapis.com/...`, its Bedrock route
# `https://bedrock-runtime.{aws_region_name}.amazonaws.com/...`, and a gateway prepends its own scheme to a bare
# `api_host`. `vertex_location: "evil.example#"` makes the host evil.example (red team 19a, R19a-1). So, outside the
# conversation, a string that could end or name a host in a URL built from it is a place too: one holding a URL's
# delimiters (`/ \ # ? @`), a host and port (`evil:443`, not a time's `12:30`), or a dotted host name or address
# (`evil.example`, `10.0.0.9`, `my_box.evil.example`: DNS and a WHATWG parser take an underscore). A model's name
# (`Qwen/Qwen3-8B`) is read against the pinned models instead; the Responses API's `include` names (dotted, as
# `message.output_text.logprobs`) are text
HOST_VALUE = re.compile(r"[^/\\#?@%\[\]]*[/\\#?@%\[\]]"
                        r"|\s*(?![0-9]+:)(?:[\w-]+\.)*[\w-]+:[0-9]{1,5}\s*\Z"
                        r"|\s*(?:[\w-]+\.)+(?:[A-Za-z]{2,63}|[0-9]{1,3})\.?\s*\Z", re.ASCII)


# read as a host parser reads a name: NFKC (a fullwidth letter is its letter) and IDNA's (UTS 46) full stops are '.';
# a percent-escape (a WHATWG parser decodes a host's) and an IPv6 literal's brackets are delimiters above
IDNA_DOTS = str.maketrans({"\u3002": ".", "\uff0e": ".", "\uff61": "."})


def place(value) -> bool:
    """Whether a string outside a request's content is a place something connects to (URL_VALUE, HOST_VALUE), read
    as a host parser reads it (R19a-1)."""
    if not isinstance(value, str):
        return False
    value = unicodedata.normalize("NFKC", value).translate(IDNA_DOTS)
    return bool(URL_VALUE.match(value) or HOST_VALUE.match(value))


def routing_fields(body) -> list[str]:
    """The ROUTING_KEYS, and the keys of values that are places (URLs or hosts: `place`), a body holds, at any depth
    outside `tools` and its content (CONTENT_KEYS), its text (STOP_KEYS) and its models' names (MODEL_KEYS)."""
    found: list[str] = []
    if isinstance(body, list):
        for item in body:
            found += ["a URL or host in a list"] if place(item) else routing_fields(item)
    elif isinstance(body, dict):
        for key, value in body.items():
            if key.casefold() == "tools" or _fold(key) in CONTENT_KEYS:
                continue
            texts = isinstance(value, str) or isinstance(value, list) and all(isinstance(v, str) for v in value)
            if _fold(key) in STOP_KEYS and texts:
                continue
            if texts and (_fold(key) in MODEL_KEYS or key.casefold() in ("models", "fallbacks")
                          or "fallback" in _fold(key)):
                continue  # a model's name: models_named reads it against the pinned models
            if _fold(key) in FETCHED_KEYS:
                continue  # media (SGLang's `image_data`: base64 holds `/`): fetched_urls reads it
            if _fold(key) in ROUTING_KEYS or place(value):
                found.append(key)
            else:
                found += routing_fields(value)
    return found


# references to objects stored at the provider, which it reads into the conversation instead of what the request
# carries: a stored response or conversation (OpenAI's Responses API), a stored prompt (`prompt: {"id": "pmpt_..."}`,
# with its own model, tools and messages), an input item by id, a file by id (OpenAI's, Anthropic's Files API), a
# code-execution container (Anthropic), a context cache (Gemini). Whatever any other request with the same key stored
# there (an open-book trial's search results, an uploaded file) would reach the closed-book agent (red team 18a,
# R18a-1). Folded keys; `STORED_TOP` only outside a request's content, `fileid` and an item_reference anywhere
STORED_TOP = frozenset({"previousresponseid", "conversation", "container", "cachedcontent",
                        "sessionparams",  # SGLang's session on the shared server: another trial's context
                        "prompt"})  # only an object: a completion's prompt is its text
# an agent or assistant stored at the provider (Mistral's `agent_id`: its own model and tools, web_search among them),
# a prompt stored in a gateway's prompt manager (LiteLLM's `prompt_id`, with its own model and messages): any key
# that ends so, outside content (red team 19a, R19a-7)
STORED_SUFFIXES = ("agentid", "assistantid", "promptid")
STORED_ANYWHERE = frozenset({"fileid"})
STORED_TYPES = frozenset({"itemreference"})
# what an agent's own tool calls carry as arguments (Anthropic's tool_use `input`, Gemini's functionCall `args`): the
# agent's words to its own tools, which may well name a `file_id`
TOOL_CALL_TYPES = {"tooluse", "servertooluse"}


def stored_refs(body, content: bool = False, anywhere: frozenset[str] = STORED_ANYWHERE,
                top: frozenset[str] = STORED_TOP, types: frozenset[str] = STORED_TYPES,
                suffixes: tuple[str, ...] = STORED_SUFFIXES) -> list[str]:
    """The references to objects stored at the provider a body holds: `top` keys (`prompt` only as an object) outside its
    content, `anywhere` keys and objects whose type is one of `types` anywhere; never in `tools` nor the agent's own
    tool calls' arguments. Keys and types folded."""
    found: list[str] = []
    if isinstance(body, list):
        for item in body:
            found += stored_refs(item, content, anywhere, top, types, suffixes)
    elif isinstance(body, dict):
        kinds = {_fold(v) for k, v in body.items() if k.casefold() == "type" and isinstance(v, str)}
        found += sorted(kinds & types)
        for key, value in body.items():
            folded = _fold(key)
            if folded == "tools" or (content and folded == "input" and kinds & TOOL_CALL_TYPES) \
                    or (content and folded == "args" and "name" in body):
                continue
            if folded in anywhere or (not content and (folded in top or folded.endswith(suffixes))
                                      and (folded != "prompt" or isinstance(value, dict))):
                found.append(key)
            else:
                found += stored_refs(value, content or folded in CONTENT_KEYS, anywhere, top, types, suffixes)
    return found


# where an object that is only an `id` is no reference: a schema (a property named `id`, an example of the answer)
SCHEMA_KEYS = {"responseformat", "responseschema", "responsejsonschema", "outputformat", "outputconfig", "guidedjson",
               "structuredoutputs", "jsonschema", "format", "parameters", "inputschema", "prediction"}


def id_refs(body) -> list[str]:
    """The objects a body holds that are only an id (every other field but a `type` absent or null), and those naming
    a `uuid` (vLLM's media cache key): a reference to an object stored at the provider or cached on a shared server,
    whatever it is called and wherever it stands (the Responses API's item_reference, whose `type` is optional; Chat
    Completions' `"audio": {"id": ...}`, a previous audio answer: red team 21a, R21a-2).
    Never in `tools`, a schema (SCHEMA_KEYS) nor the agent's own tool calls' arguments and results (Anthropic's
    tool_use `input`, Gemini's `args` and `response` beside a `name`). Read without recursion."""
    found: list[str] = []
    stack = [body]
    while stack:
        node = stack.pop()
        if isinstance(node, list):
            stack += node
        elif isinstance(node, dict):
            present = {_fold(k) if isinstance(k, str) else k: v for k, v in node.items() if v is not None}
            if "id" in present and set(present) <= {"id", "type"} and not isinstance(present["id"], (dict, list)):
                found.append(f"an object that is only an id ({str(present['id'])[:60]!r})")
                continue
            if "uuid" in present and not isinstance(present["uuid"], (dict, list)):
                # vLLM's media uuid: the key of the shared server's multimodal processor cache, which answers by it
                # whether or not the media is beside it (another trial's cached image, read by its uuid)
                found.append(f"a cache key ({str(present['uuid'])[:60]!r})")
                continue
            kinds = {_fold(v) for k, v in node.items() if isinstance(k, str) and k.casefold() == "type"
                     and isinstance(v, str)}
            for key, value in node.items():
                folded = _fold(key) if isinstance(key, str) else ""
                if folded in ("tools", *SCHEMA_KEYS) or (folded == "input" and kinds & TOOL_CALL_TYPES) \
                        or (folded in ("args", "response") and "name" in node):
                    continue
                stack.append(value)
    return found


# what a model server loads as serialized tensors (torch.load): vLLM's `prompt_embeds` and its `image_embeds` and
# `audio_embeds` content parts, base64 of a torch.save file. The agent's bytes, unpickled on the server every trial
# shares (a crafted sparse tensor writes out of bounds before vLLM 0.11.1: GHSA-mrw7-hf4f-83pf), like SGLang's
# pickled custom_logit_processor: refused at any depth outside `tools`, content included (red team 18a, R18a-4)
TENSOR_KEYS = frozenset({"promptembeds", "imageembeds", "audioembeds", "videoembeds"})


def loaded_tensors(body) -> list[str]:
    """The fields (or content parts' types) a body holds that the server would torch.load (TENSOR_KEYS)."""
    return stored_refs(body, anywhere=TENSOR_KEYS, top=frozenset(), types=TENSOR_KEYS, suffixes=())


# Closed book's field allow-list (red team 20c): the deny-style checks above name the routing fields found so far, but
# the fields gateways and servers read are open-ended (each of rounds 17a, 18a and 19a found several more: LiteLLM's
# `tags`, `api_key`, `cache`, vLLM's and SGLang's `priority` ...). So each body is also read against the fields honest
# clients send (the OpenAI, Anthropic and Gemini SDKs, Claude Code, Codex, litellm, SGLang's and vLLM's own): per API,
# its top-level keys and the keys of the objects that carry options. Any other field is refused. A spec maps a folded
# key (`_fold`: a case-insensitive reader's, camelCase and snake_case alike) to what its value may be:
ANY = "any"  # content (the conversation, a prompt, a schema, the client's own tools): free-form, read by the checks above
SCALAR = "scalar"  # an option: a JSON scalar or a list (of lists) of them, never an object a gateway reads fields from
MAP = "map"  # an object of scalars under any keys (logit_bias's token ids)

STREAM_OPTIONS = {"includeusage": SCALAR, "continuoususagestats": SCALAR, "includeobfuscation": SCALAR}
# the Messages API's metadata is its `user_id` (Claude Code's); OpenAI's a map of strings (a MAP): never a list or an
# object, since LiteLLM's tag routing reads `metadata.tags`, a list (R20c-2)
METADATA = {"userid": SCALAR}
TOOL_CHOICE = {"type": SCALAR, "name": SCALAR, "function": {"name": SCALAR}, "disableparalleltooluse": SCALAR,
               "mode": SCALAR, "tools": {"type": SCALAR, "name": SCALAR, "function": {"name": SCALAR}}}
SAMPLING = {  # OpenAI's and the OpenAI-compatible servers' (vLLM's, SGLang's) sampling and decoding options
    "model": SCALAR, "stream": SCALAR, "streamoptions": STREAM_OPTIONS, "temperature": SCALAR, "topp": SCALAR,
    "topk": SCALAR, "minp": SCALAR, "n": SCALAR, "seed": SCALAR, "stop": SCALAR, "maxtokens": SCALAR,
    "maxcompletiontokens": SCALAR, "presencepenalty": SCALAR, "frequencypenalty": SCALAR, "repetitionpenalty": SCALAR,
    "logitbias": MAP, "logprobs": SCALAR, "toplogprobs": SCALAR, "user": SCALAR, "servicetier": SCALAR,
    "store": SCALAR, "metadata": MAP, "mintokens": SCALAR, "ignoreeos": SCALAR, "skipspecialtokens": SCALAR,
    "spacesbetweenspecialtokens": SCALAR, "includestopstrinoutput": SCALAR, "stoptokenids": SCALAR,
    "badwords": SCALAR, "lengthpenalty": SCALAR, "addgenerationprompt": SCALAR, "continuefinalmessage": SCALAR,
    "addspecialtokens": SCALAR, "echo": SCALAR, "bestof": SCALAR, "suffix": SCALAR, "truncateprompttokens": SCALAR,
    "chattemplatekwargs": {"enablethinking": SCALAR, "thinking": SCALAR, "reasoningeffort": SCALAR},
    "separatereasoning": SCALAR, "streamreasoning": SCALAR, "nostoptrim": SCALAR, "returnhiddenstates": SCALAR,
    "regex": SCALAR, "ebnf": SCALAR, "jsonschema": ANY, "structuraltag": ANY, "guidedjson": ANY, "guidedregex": SCALAR,
    "guidedchoice": SCALAR, "guidedgrammar": SCALAR, "guidedwhitespacepattern": SCALAR,
    "guideddecodingbackend": SCALAR, "structuredoutputs": ANY, "responseformat": {"type": SCALAR, "jsonschema": ANY,
                                                                                  "schema": ANY},
    "dropparams": SCALAR,  # litellm's (mini-swe-agent sends it)
    "reasoningeffort": SCALAR, "verbosity": SCALAR, "paralleltoolcalls": SCALAR, "tools": ANY,
    "toolchoice": TOOL_CHOICE, "functions": ANY, "functioncall": {"name": SCALAR}, "prediction": ANY,
    "modalities": SCALAR, "audio": {"voice": SCALAR, "format": SCALAR}, "promptcachekey": SCALAR,
    "promptcacheretention": SCALAR, "safetyidentifier": SCALAR,
    # a region, as a plain token (19a's control): the host check above refuses one that is more
    "vertexlocation": SCALAR, "vertexailocation": SCALAR, "awsregionname": SCALAR,
}
OPENAI = {**SAMPLING, "messages": ANY, "prompt": SCALAR,  # chat; completions: a prompt is text or token ids
          # the Responses API
          "input": ANY, "instructions": SCALAR, "maxoutputtokens": SCALAR, "include": SCALAR, "truncation": SCALAR,
          "maxtoolcalls": SCALAR, "text": {"format": ANY, "verbosity": SCALAR},
          "reasoning": {"effort": SCALAR, "summary": SCALAR, "generatesummary": SCALAR},
          # embeddings
          "encodingformat": SCALAR, "dimensions": SCALAR}
ANTHROPIC = {"model": SCALAR, "messages": ANY, "system": ANY, "maxtokens": SCALAR, "metadata": METADATA,
             "stopsequences": SCALAR, "stream": SCALAR, "temperature": SCALAR, "topk": SCALAR, "topp": SCALAR,
             "tools": ANY, "toolchoice": TOOL_CHOICE, "thinking": {"type": SCALAR, "budgettokens": SCALAR},
             "servicetier": SCALAR, "outputformat": ANY, "outputconfig": ANY, "contextmanagement": ANY}
GENERATION_CONFIG = {"stopsequences": SCALAR, "responsemimetype": SCALAR, "responseschema": ANY,
                     "responsejsonschema": ANY, "responsemodalities": SCALAR, "candidatecount": SCALAR,
                     "maxoutputtokens": SCALAR, "temperature": SCALAR, "topp": SCALAR, "topk": SCALAR, "seed": SCALAR,
                     "presencepenalty": SCALAR, "frequencypenalty": SCALAR, "responselogprobs": SCALAR,
                     "logprobs": SCALAR, "mediaresolution": SCALAR,
                     "thinkingconfig": {"thinkingbudget": SCALAR, "includethoughts": SCALAR, "thinkinglevel": SCALAR}}
GEMINI: dict = {"model": SCALAR, "contents": ANY, "systeminstruction": ANY, "tools": ANY,
                "toolconfig": {"functioncallingconfig": {"mode": SCALAR, "allowedfunctionnames": SCALAR}},
                "safetysettings": {"category": SCALAR, "threshold": SCALAR, "method": SCALAR},
                "generationconfig": GENERATION_CONFIG}
GEMINI["generatecontentrequest"] = GEMINI  # countTokens may carry a whole generateContent request
SGLANG_SAMPLING = {"maxnewtokens": SCALAR, "minnewtokens": SCALAR, "temperature": SCALAR, "topp": SCALAR, "topk": SCALAR,
                   "minp": SCALAR, "frequencypenalty": SCALAR, "presencepenalty": SCALAR, "repetitionpenalty": SCALAR,
                   "stop": SCALAR, "stoptokenids": SCALAR, "stopregex": SCALAR, "ignoreeos": SCALAR,
                   "skipspecialtokens": SCALAR, "spacesbetweenspecialtokens": SCALAR, "nostoptrim": SCALAR,
                   "regex": SCALAR, "ebnf": SCALAR, "jsonschema": SCALAR, "structuraltag": SCALAR, "n": SCALAR,
                   "samplingseed": SCALAR, "logitbias": MAP,
                   "customparams": ANY}  # inert: the logits processor it is for is always removed (HOSTED_OPTIONS)
GENERATE = {"text": SCALAR, "inputids": SCALAR, "samplingparams": SGLANG_SAMPLING, "stream": SCALAR,
            "returnlogprob": SCALAR, "logprobstartlen": SCALAR, "toplogprobsnum": SCALAR, "tokenidslogprob": SCALAR,
            "returntextinlogprobs": SCALAR, "imagedata": ANY, "audiodata": ANY, "videodata": ANY, "modalities": SCALAR}
# every model-naming key is allowed where it is read against the pinned models (`models_named`): the fallbacks to
# pinned models 18a's control sends
NAMING = ("models", "fallbacks")


def request_spec(url: str) -> dict:
    """The field allow-list for the API a model call's path names (MODEL_POSTS, WHOLE_POSTS)."""
    path = urlsplit(url).path
    if path.endswith((":generateContent", ":streamGenerateContent", ":countTokens")):
        return GEMINI
    if path.endswith(("/messages", "/messages/count_tokens")):
        return ANTHROPIC
    if path in WHOLE_POSTS:
        return GENERATE
    return OPENAI


def _scalars(value) -> bool:
    """Whether a value is a JSON scalar or a list (of lists) of them, read without recursion."""
    stack = [value]
    while stack:
        node = stack.pop()
        if isinstance(node, dict):
            return False
        if isinstance(node, list):
            stack += node
    return True


def _unlisted(value, spec, where: str) -> list[str]:
    """Where `value` holds what `spec` does not list (see ANY, SCALAR, MAP; a dict spec: an object, or a list of
    objects, holding its keys only)."""
    if spec == ANY:
        return []
    if spec == SCALAR:
        return [] if _scalars(value) else [f"{where} (an object)"]
    if spec == MAP:
        return [] if isinstance(value, dict) and all(_scalars(v) and not isinstance(v, list)
                                                      for v in value.values()) else [f"{where} (not a map of values)"]
    if isinstance(value, list):
        return [found for item in value for found in _unlisted(item, spec, where)]
    if isinstance(value, str) and _fold(where.rsplit(".", 1)[-1]) in ("toolchoice", "functioncall"):
        return []  # "auto", "none", "required"
    if not isinstance(value, dict):
        return [] if value is None else [f"{where} (not an object)"]
    found: list[str] = []
    for key, item in value.items():
        name = f"{where}.{key}" if where else key
        folded = _fold(key)
        if not where and (folded in NAMING or "fallback" in folded):
            found += _naming(item, spec, name)  # model names, read against the pinned models; or requests
            continue
        if folded not in spec:
            found.append(name)
        else:
            found += _unlisted(item, spec[folded], name)
    return found


def _names(value) -> bool:
    """Whether a value is a model's name or a list of names (a flag: LiteLLM's `disable_fallbacks`)."""
    return isinstance(value, (str, bool)) or value is None or isinstance(value, list) and all(
        isinstance(item, str) for item in value)


def _naming(value, spec: dict, where: str) -> list[str]:
    """Where a model-naming field (`fallbacks`, `models`, any `*fallback*`) holds more than model names: a name, a list
    of names or requests, a map of a name to names. A request in it (LiteLLM's fallbacks are a call's whole kwargs:
    `{"model": ..., "api_key": ..., "messages": ...}`) is read against the body's own allow-list, `spec` (R20c-3)."""
    if _names(value):
        return []
    if isinstance(value, dict):
        if not any(isinstance(k, str) and _fold(k) in spec for k in value) and all(map(_names, value.values())):
            # {model: [models]} (LiteLLM's context_window_fallback_dict): its keys are names, read against the pinned
            # models too. An object with any request field (`model`) is a request
            return []
        return _unlisted(value, spec, "")  # one request
    if isinstance(value, list):
        return [found for item in value for found in _naming(item, spec, where)]
    return [f"{where} (not a model's name)"]


def unlisted_fields(body, url: str) -> list[str]:
    """The fields of a closed-book request body that no honest client sends to the API its path names (`request_spec`),
    dotted (`metadata.tags`); a batch (a list of requests) is read request by request."""
    spec = request_spec(url)
    if body is None:
        return []
    if isinstance(body, list):
        return [found for item in body for found in
                (_unlisted(item, spec, "") if isinstance(item, dict) else ["a batch member that is not an object"])]
    return _unlisted(body, spec, "") if isinstance(body, dict) else ["a body that is not an object"]

def path_models(url: str) -> list[str]:
    """The models a path names: Gemini's (`/v1beta/models/NAME:generateContent`), and Azure's deployment or an
    engine (`/openai/deployments/NAME/chat/completions`, `/engines/NAME/completions`), which LiteLLM's proxy routes
    to over the body's `model` (a `{model:path}`: everything between the marker and the endpoint), and Hugging
    Face's (`/models/NAME/v1/chat/completions`)."""
    path = urlsplit(url).path
    names = []
    head, sep, _ = path.rpartition(":")
    # Gemini's tuned models are models too, and so is a Vertex AI endpoint (`.../endpoints/ID:generateContent`): the
    # model deployed there answers, whatever the body says (red team 19a, R19a-4)
    for collection in ("/models/", "/tunedModels/", "/endpoints/"):
        _, slash, name = head.rpartition(collection)
        if sep and slash:
            names.append(name)
    # a deployment, an engine, a Vertex AI endpoint's OpenAI-style route (`.../endpoints/ID/chat/completions`, a
    # dedicated endpoint's model; its shared `openapi` endpoint answers with the body's model, read as ever)
    for marker in ("/deployments/", "/engines/", "/endpoints/"):
        if marker in path:
            rest = "/" + path.split(marker, 1)[1]
            suffix = max((end for end in MODEL_POSTS if rest.endswith(end)), key=len, default="")
            name = (rest[: len(rest) - len(suffix)] if suffix else rest)[1:]
            if name and not (marker == "/endpoints/" and name == "openapi"):
                names.append(name)
    # Hugging Face's inference API and router route by /models/NAME/v1/chat/completions, over the body's model (red
    # team 17a, R17a-7): a model endpoint under /models/ names everything between them, less an API version. The
    # endpoint is matched whole: Azure AI Model Inference's `/models/chat/completions` names none (R19a-5)
    rest = "/" + path.split("/models/", 1)[1] if "/models/" in path else ""
    suffix = max((end for end in MODEL_POSTS if rest.endswith(end)), key=len, default="")
    if suffix and (name := re.sub(r"/v\d+[a-z0-9]*$", "", rest[: len(rest) - len(suffix)])[1:]):
        names.append(name)
    return names


# fields in which a model API takes a URL it fetches itself (OpenAI's image_url and input_file's file_url,
# Anthropic's `{"type": "url", "url": ...}` sources, Gemini's fileData.fileUri, SGLang's and vLLM's image_data,
# video_url, audio_url): the provider would fetch for the agent (a screenshot service's picture of the upstream
# PR is read by any vision model). Honest clients send images and files inline (a data: URL, base64)
FETCHED_KEYS = {"imageurl", "fileurl", "fileuri", "imagedata", "videourl", "audiourl", "videodata", "audiodata",
                "documenturl"}  # Mistral's
# what such a field may hold: a data: URL, bare base64 of a picture, a sound or a video (its signature, below), or a
# plain word (OpenAI's `"detail": "auto"` beside a data: URL). Anything else is a place to fetch from: "https:host/x"
# is https://host/x to a WHATWG URL parser (Node's), and a dot-less path is in base64's alphabet: SGLang's
# `load_image` opens a value ending in "png" or "jpg" as a file before it tries base64, its audio and video loaders
# any string that is not a data: or http URL (red team 17a, R17a-3)
DATA_URL = re.compile(r"\s*data:.*", re.IGNORECASE | re.DOTALL)
PLAIN_WORD = re.compile(r"[A-Za-z]{0,16}")
# the signatures of media files. Each, as base64, begins with a relative name or "/9j/" (JPEG), never the path of a
# file a model server's host holds. Not an MP3's bare frame sync (0xFFE0 and up): "//srv/..." decodes to one
MEDIA_SIGNATURES = (b"\x89PNG\r\n\x1a\n", b"\xff\xd8\xff", b"GIF87a", b"GIF89a", b"RIFF", b"BM", b"II*\x00",
                    b"MM\x00*", b"ID3", b"fLaC", b"OggS", b"\x1aE\xdf\xa3", b"FORM")


# the keys beside the media, inside a fetched field, that hold a word about it (OpenAI's `"detail": "auto"`, a
# `format`, a MIME type): a PLAIN_WORD passes there only. As the media itself (the fetched field's own value, its
# `url`, `data`, any other key) a plain word is a file to SGLang: `load_image` opens "screenshotpng" in its working
# directory, its audio and video loaders "Makefile" (red team 19a, R19a-3)
WORD_KEYS = {"detail", "format", "mimetype", "type"}


def inline(value: str, word: bool = False) -> bool:
    """Whether a fetched field's value is inline data (DATA_URL, base64 of media, or, where `word`, a PLAIN_WORD), not
    a place."""
    if DATA_URL.fullmatch(value) or (word and PLAIN_WORD.fullmatch(value)):
        return True
    try:
        head = base64.b64decode(re.sub(r"\s", "", value), validate=True)[:16]
    except ValueError:
        return False
    return head.startswith(MEDIA_SIGNATURES) or head[4:8] == b"ftyp"  # ISO media: MP4, MOV, M4A, HEIC, AVIF


def _media(value, word: bool = False) -> list[tuple[str, bool]]:
    """Each string in a fetched field's value, and whether it stands under a WORD_KEYS key (a word may pass)."""
    if isinstance(value, str):
        return [(value, word)]
    if isinstance(value, dict):
        return [s for key, item in value.items() for s in _media(item, isinstance(key, str) and _fold(key) in WORD_KEYS)]
    return [s for item in value for s in _media(item, word)] if isinstance(value, list) else []


def fetched_urls(body) -> list[str]:
    """Every value a request asks the provider to fetch (a fetched field's value that is not `inline`), at any depth
    outside `tools`."""
    found: list[str] = []
    if isinstance(body, list):
        for item in body:
            found += fetched_urls(item)
    elif isinstance(body, dict):
        source = any(k.casefold() == "type" and isinstance(v, str) and v.casefold() == "url" for k, v in body.items())
        for key, value in body.items():
            if key.casefold() == "tools":
                continue
            if _fold(key) in FETCHED_KEYS or (source and key.casefold() == "url"):
                # every string in it is read here (a nested fetched field or url source too, as strictly): walking it
                # again read one value once per level it nests (red team 19a, R19a-6)
                found += [s for s, word in _media(value) if not inline(s, word)]
            else:
                found += fetched_urls(value)
    return found


USAGE_KEYS = ("usage", "usagemetadata", "metainfo")  # folded: OpenAI/Anthropic, Gemini, SGLang's native API
# Each provider's shape of one count, as the fields it sums: OpenAI's and SGLang's `prompt_tokens` (the cached
# prompt inside it); Anthropic's `input_tokens` (only what follows the last cache breakpoint) beside its cache reads
# and writes, and OpenAI Responses' `input_tokens` (cached part inside); Gemini's prompt beside its tools' results
# fed back (red team 17b, R17b-4). A usage stating several shapes states one prompt several ways (LiteLLM puts
# Anthropic's cache fields beside an OpenAI `prompt_tokens` that holds them): the largest reading is the count,
# never their sum, which counted the cached prompt twice and disputed an honest record.
PROMPT_SHAPES = (("prompt_tokens",), ("input_tokens", "cache_creation_input_tokens", "cache_read_input_tokens"),
                 ("promptTokenCount", "toolUsePromptTokenCount"))
COMPLETION_SHAPES = (("completion_tokens",), ("output_tokens",), ("candidatesTokenCount", "thoughtsTokenCount"))
PROMPT_FIELDS = tuple(f for shape in PROMPT_SHAPES for f in shape)
COMPLETION_FIELDS = tuple(f for shape in COMPLETION_SHAPES for f in shape)
RECENT = 16  # the answers the meter lists one by one, newest last (sweserve.models.Metered.recent)
METER_MAX_BYTES = 32 << 20  # an answer larger than this is not parsed: counted unread
MAX_TOKENS = 2**53  # the largest count sweserve takes (sweserve.agents.trajectory.MAX_COUNT)


TOTAL_FIELDS = ("total_tokens", "totalTokenCount")  # the whole a usage states beside its parts


def _count(value) -> int | None:
    """A count a usage field states: an int, or an integral float (a JSON encoder's 5000.0); absent or null is 0;
    None if it is no count (a string, a fraction, a negative, a bool): then the answer is unread, not 0 tokens
    (red team 18b, R18b-2)."""
    if value is None:
        return 0
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    return value if isinstance(value, int) and not isinstance(value, bool) and 0 <= value < 2**53 else None


# a usage's list of the sampling steps one call ran, each a usage of its own (folded): Anthropic's `iterations`
ITERATION_KEYS = ("iterations",)


def _usage_counts(value: dict) -> tuple[int, int] | None:
    """(prompt, completion) one usage object states by its own fields (the largest reading of each shape, a stated
    total's excess as completion), or None if a field it states is no count."""
    counts = {f: _count(value.get(f)) for f in (*PROMPT_FIELDS, *COMPLETION_FIELDS, *TOTAL_FIELDS)}
    if any(c is None for c in counts.values()):
        return None
    prompt = max(sum(counts[f] or 0 for f in shape) for shape in PROMPT_SHAPES)
    completion = max(sum(counts[f] or 0 for f in shape) for shape in COMPLETION_SHAPES)
    # a stated total above the parts read: the rest is under a name the meter does not know (a gateway's own),
    # counted as completion rather than left out (red team 18b, R18b-2)
    stated = max(counts[f] or 0 for f in TOTAL_FIELDS)
    return prompt, completion + max(stated - prompt - completion, 0)


def usage_in(node, depth: int = 0) -> tuple[int, int] | None:
    """(prompt, completion) tokens one answer (or one streamed event) states, or None if it states none: a
    usage object at the top or one level down (a Responses API event's `response`, Anthropic's `message`); a list
    (a batch of answers) sums its members', unless it is Gemini's stream as one JSON array (`:streamGenerateContent`
    without `alt=sse`), whose chunks each state the running totals: the largest of each."""
    if isinstance(node, list) and depth == 0:
        each = [u for u in (usage_in(item, 1) for item in node) if u is not None]
        if not each:
            return None
        gemini = all(isinstance(item, dict) and any(isinstance(k, str) and _fold(k) == "usagemetadata" for k in item)
                     for item in node if usage_in(item, 1) is not None)
        total = max if gemini else sum
        return total(u[0] for u in each), total(u[1] for u in each)
    if not isinstance(node, dict):
        return None
    seen = False
    for key, value in node.items():
        if isinstance(key, str) and _fold(key) in USAGE_KEYS and isinstance(value, dict):
            seen = True
            steps = [v for k, v in value.items() if isinstance(k, str) and _fold(k) in ITERATION_KEYS]
            if not any(f in value for f in (*PROMPT_FIELDS, *COMPLETION_FIELDS)) and not steps:
                continue  # it names no count the meter reads: no reading, not 0 tokens (red team 17b, R17b-4)
            top = _usage_counts(value)
            if top is None:
                return None
            # the sampling steps of one call (Anthropic's server-side compaction: the summary step is in
            # `iterations` only, the top level states the last step): their sum, when it is more (red team 21a, R21a-1)
            for step in steps:
                if not isinstance(step, list) or not all(isinstance(item, dict) for item in step):
                    return None
                read = [_usage_counts(item) for item in step]
                each = [c for c in read if c is not None]
                if len(each) != len(read):
                    return None
                top = (max(top[0], sum(c[0] for c in each)), max(top[1], sum(c[1] for c in each)))
            return top
    if depth < 1 and not seen:  # the answer's own usage, unread, is not replaced by one deeper down
        for value in node.values():
            if isinstance(value, dict) and (inner := usage_in(value, depth + 1)) is not None:
                return inner
    return None


def _member(event) -> int | None:
    """Which generation of several a streamed event's usage is of: SGLang's /generate `index`, or the one choice a
    chat or completions chunk carries (SGLang's continuous_usage_stats states that choice's usage); None if neither."""
    if not isinstance(event, dict):
        return None
    index = event.get("index")
    if index is None and isinstance(event.get("choices"), list) and len(event["choices"]) == 1 \
            and isinstance(event["choices"][0], dict):
        index = event["choices"][0].get("index")
    return index if isinstance(index, int) and not isinstance(index, bool) else None


SSE_LINE_END = re.compile(r"\r\n|\r|\n")


def sse_data(text: str) -> list[str]:
    """Each event's data in a server-sent-event stream, as the SSE spec reads it: lines end only at CR, LF or
    CRLF (`str.splitlines` also splits at U+2028, U+0085 ..., which a JSON encoder writing UTF-8 leaves raw in a
    string the model wrote: red team 17b, R17b-1), an event's `data:` lines are joined by LF, and a blank line
    (or the stream's end) ends it."""
    events: list[str] = []
    lines: list[str] = []
    for line in [*SSE_LINE_END.split(text.removeprefix("\ufeff")), ""]:
        if not line:
            if lines:
                events.append("\n".join(lines))
            lines = []
        elif line.startswith("data"):
            field, colon, value = line.partition(":")
            if field == "data":
                lines.append(value[1:] if value.startswith(" ") else value)
    return events


def _json_event(data: str):
    data = data.strip()
    try:  # an event that is not JSON (OpenAI's closing "[DONE]") states no usage
        return json.loads(data) if data.startswith(("{", "[")) else None
    except ValueError:
        return None


def sse_events(text: str) -> list:
    """The JSON of each event in a stream (`sse_data`); an event of several lines that is not JSON whole is read
    line by line too (a server that leaves out the blank lines between its events): more events read can only
    raise the meter's count, never lower it."""
    found = []
    for data in sse_data(text):
        event = _json_event(data)
        if event is None and "\n" in data:
            found += [e for e in map(_json_event, data.split("\n")) if e is not None]
        else:
            found.append(event)
    return found


SSE_LINE_END_BYTES = re.compile(rb"\r\n|\r|\n")


def _sse_lines(content: bytes) -> Iterator[bytes]:
    """A stream's lines, one at a time (ended at CR, LF or CRLF alone, as `sse_data`), then a blank one."""
    start = 3 if content.startswith(b"\xef\xbb\xbf") else 0
    for end in SSE_LINE_END_BYTES.finditer(content, start):
        yield content[start:end.start()]
        start = end.end()
    yield content[start:]
    yield b""


def stream_events(content: bytes) -> Iterator:
    """`sse_events` of a stream's bytes, one event at a time (never all of a stream's events parsed at once: the
    proxy has 512 MiB); an event whose data is itself larger than METER_MAX_BYTES is parsed line by line only, then
    yielded as its bytes (its counts read by `oversize_floor`)."""
    lines: list[bytes] = []
    for line in _sse_lines(content):
        if not line:
            if lines:
                parts, lines = lines, []
                data = b"\n".join(parts)
                if len(data) > METER_MAX_BYTES:  # too large to parse whole: each of its lines (a server that
                    for part in parts:  # leaves out the blank lines between events), and the regex floor of the whole
                        if len(part) <= METER_MAX_BYTES and (event := _json_event(part.decode("utf-8", "replace"))):
                            yield event
                    yield data
                    continue
                text = data.decode("utf-8", "replace")
                event = _json_event(text)
                if event is None and "\n" in text:
                    yield from (e for e in map(_json_event, text.split("\n")) if e is not None)
                else:
                    yield event
        elif line.startswith(b"data"):
            field, _, value = line.partition(b":")
            if field == b"data":
                lines.append(value[1:] if value.startswith(b" ") else value)


def _add_usage(found: dict, event) -> None:
    """One streamed event's usage into `found` (each member's largest counts, `_member`). An event that is an array is
    its chunks (R23m-2), each read as if it came alone: their running totals were summed as a batch's answers are
    (`usage_in` of a list), one generation's tokens metered once for each chunk (red team 23s, R23s-4)."""
    if isinstance(event, list):
        for item in event:
            if isinstance(item, dict):
                _add_usage(found, item)
        return
    usage = usage_in(event)
    if usage is not None:
        key = _member(event)
        top = found.get(key, (0, 0))
        found[key] = (max(top[0], usage[0]), max(top[1], usage[1]))


def _stream_total(found: dict) -> tuple[int, int]:
    """The tokens a stream states, from each member's largest counts: an event of no member states the whole
    (OpenAI's last chunk with include_usage): the larger of it and the members' sum, so the whole is never counted
    twice nor a member's alone."""
    whole = found.get(None, (0, 0))
    members = [u for k, u in found.items() if k is not None]
    return (min(max(whole[0], sum(u[0] for u in members)), MAX_TOKENS),
            min(max(whole[1], sum(u[1] for u in members)), MAX_TOKENS))


def answer_usage(content: bytes, content_type: str, echo: bool = False) -> tuple[int, int] | None:
    """The tokens a model answer states: a JSON body, or a stream of server-sent events (the largest count each
    field reaches over the events, since streams state usage once at the end or as running totals). `echo`: the call
    asked its prompt echoed (`echoes`), so the first chunk of output of each choice is that prompt, not generated."""
    if not content or len(content) > METER_MAX_BYTES:
        return None
    try:
        # an answer is read as what its bytes are, whatever its label: JSON (an event stream never begins as JSON), or
        # else an event stream. A stream labelled JSON (R23m-1) and JSON labelled a stream (R23m-9) were unread, floor 0
        try:
            return usage_in(json.loads(content))
        except ValueError:
            pass
        # a stream of several generations (SGLang's /generate with a batch or `n`: each member's events carry
        # its `index` and its own running totals) is the sum of each member's largest counts (red team 16e)
        found: dict = {}
        # and each chunk of output is a completion token at least, as the over-size path reads (`oversize_usage`):
        # a usage stating fewer (one member's, one stated early and never updated) was taken as it came, five
        # chunks of output metered as one token (red team 23g, R23g-2). Only the streamed pieces count here
        # (`whole=False`): a Responses API `.done` event restates a part's whole `text`
        chunks, echoed = 0, set()
        for event in stream_events(content):
            _add_usage(found, event)
            pieces = _chunk_output(event, whole=False)
            if echo and pieces and (choice := _member(event)) not in echoed:
                # the prompt echoed: a completions stream's with `max_tokens: 0` is this chunk alone, 0 tokens
                # generated, which the floor metered as 1 and an honest record was disputed (red team 23s, R23s-3)
                echoed.add(choice)
                pieces -= 1
            chunks += pieces
        if not found:
            return None
        read = _stream_total(found)
        return read[0], min(max(read[1], chunks), MAX_TOKENS)
    except (ValueError, RecursionError):
        return None


# where a streamed chunk carries what the model generated: an OpenAI chat delta (its text, reasoning, refusal, a tool
# call's name and arguments), a completion's `text`, a Responses API event's `delta`, an Anthropic delta's text,
# thinking or tool input
OUTPUT_KEYS = ("content", "reasoning_content", "reasoning", "refusal", "text", "thinking", "partial_json",
               "arguments", "name", "tool_calls", "function", "delta", "output",
               "content_block")  # Anthropic's streamed block start: a tool call's `name` (R23m-6)


def _output(node, depth: int = 0) -> bool:
    """Whether a chunk's part holds generated output: a non-empty string under one of OUTPUT_KEYS."""
    if isinstance(node, str):
        return bool(node)
    if depth > 4:
        return False
    if isinstance(node, list):
        return any(_output(item, depth + 1) for item in node)
    if isinstance(node, dict):
        return any(isinstance(k, str) and k in OUTPUT_KEYS and _output(v, depth + 1) for k, v in node.items())
    return False


ECHO_ASKED = ("/completions",)  # OpenAI's legacy completions: `echo` sends the prompt back as the first output


def echoes(flow) -> bool:
    """Whether a call's body (as sent on) asks a completions stream to echo its prompt (any casing of `echo`, read as
    a lax server reads `stream`: `_streams`)."""
    try:
        path = urlsplit(str(flow.request.url)).path
        if not path.endswith(ECHO_ASKED) or path.endswith("/chat/completions"):
            return False
        content = flow.request.content
        body = json.loads(content) if content else None
    except (AttributeError, ValueError, RecursionError):
        return False
    return isinstance(body, dict) and any(_streams(v) for k, v in body.items()
                                          if isinstance(k, str) and k.casefold() == "echo")


def stream_output(content: bytes, content_type: str) -> int:
    """A floor of the tokens an answer (an event stream, or JSON: its chunks, R23a-3) whose usage could not be read
    generated: each chunk (each choice in
    it) carrying generated output is a token at least; a chunk of no output (a role, a finish reason, [DONE]) is
    none. An unread stream added nothing to the meter, so a stream without `include_usage` took its tokens off
    the floor an agent's record is held to (red team 18b, R18b-1)."""
    if not content or len(content) > METER_MAX_BYTES:
        return 0
    count = 0
    try:
        # a JSON answer is its chunks: Gemini's stream as one JSON array (no `alt=sse`), or one answer's choices. Only
        # event streams were read, and the same output as JSON added 0 (red team 23a, R23a-3). Read by what its bytes
        # are, whatever its label, as `answer_usage` reads it (R23m-1, R23m-9)
        try:
            answer = json.loads(content)
        except ValueError:
            pass  # not JSON: an event stream, read below
        else:
            return min(sum(map(_chunk_output, answer if isinstance(answer, list) else [answer])), MAX_TOKENS)
        for event in stream_events(content):
            count += _chunk_output(event)
    except RecursionError:
        return count
    return min(count, MAX_TOKENS)


def _chunk_output(event, whole: bool = True) -> int:
    """The tokens of output one streamed event carries at least: one for each choice of it carrying output. `whole`:
    and output a whole answer carries at its top level (TOP_OUTPUT_KEYS), not only a streamed `delta`. An event that
    is an array is its chunks, each read so (one level): its chunks counted none (red team 23m, R23m-2)."""
    if isinstance(event, list):
        return sum(_chunk_output(item, whole) for item in event if isinstance(item, dict))
    if not isinstance(event, dict):
        return 0
    choices = event.get("choices")
    parts = [c for c in choices if isinstance(c, dict)] if isinstance(choices, list) else []
    # Gemini's candidates: a part's text or function call (red team 22e, R22e-5)
    candidates = event.get("candidates")
    gemini = [c.get("content") for c in candidates if isinstance(c, dict)] if isinstance(candidates, list) else []
    # a choice's streamed `delta` or `text`, or a whole answer's `message` (R23a-3)
    return (sum(_output({k: v for k, v in c.items() if k in ("delta", "text")})
                or isinstance(c.get("message"), dict) and _output(c["message"]) for c in parts)
            # a part holding anything (text, a function call, an image's inlineData, executableCode and its result):
            # only a part's `text` and `functionCall` were read, a stream of the others added 0 (red team 23a, R23a-2)
            + sum(isinstance(c, dict) and isinstance(c.get("parts"), list) and any(
                isinstance(p, dict) and any(v not in (None, False, "", [], {}) for v in p.values())
                for p in c["parts"]) for c in gemini)
            # an answer's own output at its top level: an event's `delta`, Anthropic's `content` blocks, the Responses
            # API's `output` items, SGLang /generate's `text`; only `delta` was read, and an unread answer of the
            # others added 0 (red team 23g, R23g-1). And a streamed block's start (Anthropic's `content_block`: a tool
            # call's `name`), a piece of its own that no delta restates (red team 23m, R23m-6)
            + _output({k: v for k, v in event.items() if k in (TOP_OUTPUT_KEYS if whole else STREAMED_KEYS)}))


STREAMED_KEYS = ("delta", "content_block")
TOP_OUTPUT_KEYS = (*STREAMED_KEYS, "content", "output", "text")


COUNT_FIELD = re.compile(rb'"(' + b"|".join(f.encode() for f in (*PROMPT_FIELDS, *COMPLETION_FIELDS))
                         + rb')"\s*:\s*([0-9]{1,16})(?![0-9.eE])')


def oversize_floor(content: bytes) -> tuple[int, int]:
    """A floor of the tokens an answer too large to parse (past METER_MAX_BYTES) states: the largest count any
    known prompt field and any known completion field reaches in it (a running total's last; one member's of a
    batch). A model's text is inside JSON strings, whose quotes are escaped: it matches no field, and a larger
    number only raises the agent's own count. An answer over the cap added nothing, and SGLang's /generate stream,
    which restates the text and logprobs so far in every event, passes it in a few thousand tokens (red team 18b,
    R18b-3)."""
    top = {True: 0, False: 0}
    prompt = {f.encode() for f in PROMPT_FIELDS}
    for match in COUNT_FIELD.finditer(content):
        side = match.group(1) in prompt
        top[side] = max(top[side], min(int(match.group(2)), MAX_TOKENS))
    return top[True], top[False]


JSON_START = re.compile(rb"(?:\xef\xbb\xbf)?[ \t\r\n]*[\[{]")  # how a JSON answer (an object, an array) begins
ARRAY_START = re.compile(rb"(?:\xef\xbb\xbf)?[ \t\r\n]*\[")
# what `json_members` steps over to find each member's end: a container holding no other (its strings, escapes skipped
# whole, inside it: one step for a logprob's `[-0.5, 1, "x"]`), a string, or a bracket
_STRING = rb'"[^"\\]*(?:\\.[^"\\]*)*"'
JSON_TOKEN = re.compile(rb'[\[{](?:[^\[\]{}"]+|' + _STRING + rb')*[\]}]|' + _STRING + rb'|[\[\]{}]', re.DOTALL)


def json_members(content: bytes) -> Iterator[bytes]:
    """The bytes of each object or array member of a JSON array (`ARRAY_START`), one at a time, found by bracket
    depth over its strings and brackets: never the whole answer parsed at once (the proxy has 512 MiB)."""
    depth, start = 0, 0
    opening, closing = frozenset(b"[{"), frozenset(b"]}")
    for token in JSON_TOKEN.finditer(content):
        begin, end = token.span()
        kind = content[begin]
        if kind in opening:
            if end - begin > 1:  # a container holding no other: a member when at depth 1
                if depth == 1:
                    yield content[begin:end]
                continue
            depth += 1
            if depth == 2:
                start = begin
        elif kind in closing:
            depth -= 1
            if depth == 1:
                yield content[start:end]
            elif depth <= 0:
                return


def oversize_array(content: bytes) -> tuple[int, int]:
    """A floor of the tokens an over-size JSON array of answers states, read as under the cap (`usage_in` of a list):
    each member parsed alone, their usages summed (Gemini's chunks, running totals: the largest), a member itself
    too large read by `oversize_floor`; with no usage at all, each chunk of output a completion token (`_chunk_output`).
    The regex floor of the whole took the largest member's counts: SGLang's /generate batch (a JSON array, a member
    a prompt, each its own `meta_info`) metered as one member (red team 23s, R23s-2)."""
    each: list[tuple[int, int]] = []
    gemini, chunks = True, 0
    for member in json_members(content):
        try:
            if len(member) > METER_MAX_BYTES:
                raise ValueError("a member too large to parse")
            node = json.loads(member)
        except (ValueError, RecursionError):
            floor = oversize_floor(member)
            if floor != (0, 0):
                each.append(floor)
                gemini = False
            continue
        chunks += _chunk_output(node)
        if (usage := usage_in(node, 1)) is not None:
            each.append(usage)
            gemini &= isinstance(node, dict) and any(isinstance(k, str) and _fold(k) == "usagemetadata" for k in node)
    if not each:
        return 0, min(chunks, MAX_TOKENS)
    total = max if gemini else sum
    return min(total(u[0] for u in each), MAX_TOKENS), min(total(u[1] for u in each), MAX_TOKENS)


def oversize_usage(content: bytes, content_type: str) -> tuple[int, int]:
    """A floor of the tokens an answer too large to parse whole states. A stream is read event by event as under
    the cap (`stream_events`: one event parsed at a time): each member's largest counts summed (`usage_in`: only a
    usage object's counts, never a key of a tool call's arguments the model wrote), and each chunk of output a
    completion token at least; only an event itself too large to parse, or an answer that is no stream, falls back
    to `oversize_floor`. Red team 19b: an over-size stream without usage added nothing (R19b-1), a batch's counted
    one member (R19b-2), and a tool call's argument naming a count was read (R19b-3)."""
    if JSON_START.match(content):  # JSON, whatever its label (R23m-9): an array its members (R23s-2)
        if not ARRAY_START.match(content):
            return oversize_floor(content)
        try:
            read, floor = oversize_array(content), oversize_floor(content)
        except RecursionError:
            return oversize_floor(content)
        return max(read[0], floor[0]), max(read[1], floor[1])
    if "event-stream" not in content_type.lower():
        # no JSON: an event stream under another label (red team 23m, R23m-7), read as one, the regex floor beside
        read, floor = oversize_usage(content, "text/event-stream"), oversize_floor(content)
        return max(read[0], floor[0]), max(read[1], floor[1])
    found: dict = {}
    raw, chunks, pieces = (0, 0), 0, 0
    try:
        for event in stream_events(content):
            if isinstance(event, bytes):
                floor = oversize_floor(event)
                raw = (max(raw[0], floor[0]), max(raw[1], floor[1]))
            else:
                _add_usage(found, event)
                chunks += _chunk_output(event)
                pieces += _chunk_output(event, whole=False)
    except RecursionError:
        pass
    read = _stream_total(found)
    # a stream stating its usage is held to its streamed pieces only, as under the cap (`answer_usage`, R23g-2)
    return max(read[0], raw[0]), min(max(read[1], raw[1], pieces if found else chunks), MAX_TOKENS)


# OpenAI's chat and completions streams state their usage only when asked (`stream_options.include_usage`); one not
# asked is unread, its floor a token a chunk of output and 0 prompt tokens (red team 22e, R22e-1): the proxy asks
USAGE_ASKED = ("/chat/completions", "/completions")
NOT_STREAMING = {"", "0", "false", "f", "no", "n", "off"}  # what a lax reader (pydantic) takes as `stream: false`


def _streams(value) -> bool:
    if isinstance(value, str):
        return value.strip().casefold() not in NOT_STREAMING
    return value is not None and value is not False and value != 0


def ask_usage(body, url: str) -> list[str]:
    """Make an OpenAI chat or completions request that streams (`USAGE_ASKED`) ask for its usage, in place: its
    `stream_options` (other casings of it and of `include_usage` removed) with `include_usage: true`. What it set."""
    if not urlsplit(url).path.endswith(USAGE_ASKED):
        return []
    asked: list[str] = []
    for item in body if isinstance(body, list) else [body]:
        if not isinstance(item, dict) or not any(_streams(v) for k, v in item.items()
                                                 if isinstance(k, str) and k.casefold() == "stream"):
            continue
        keys = [k for k in item if isinstance(k, str) and k.casefold() == "stream_options"]
        options = next((item[k] for k in keys if isinstance(item[k], dict)), None) or {}
        options = {k: v for k, v in options.items() if not (isinstance(k, str) and k.casefold() == "include_usage")}
        wanted = {**options, "include_usage": True}
        if keys == ["stream_options"] and item["stream_options"] == wanted:
            continue
        for key in keys:
            del item[key]
        item["stream_options"] = wanted
        asked.append("stream_options.include_usage (set true: the stream states its usage)")
    return asked


def streams_asked(content: bytes, url: str) -> bool:
    """Whether a call may be answered as a stream: any call but OpenAI's chat and completions (`USAGE_ASKED`, whose
    stream states its usage only when its body asks, `ask_usage`), and one of those whose body (the body sent on)
    streams, or that this proxy cannot read (left as it is)."""
    if not urlsplit(url).path.endswith(USAGE_ASKED):
        return True
    try:
        body = json.loads(content) if content else None
    except (ValueError, RecursionError):
        return True
    return any(isinstance(item, dict) and any(_streams(v) for k, v in item.items()
                                              if isinstance(k, str) and k.casefold() == "stream")
               for item in (body if isinstance(body, list) else [body]))


def as_utf8(content: bytes, content_type: str) -> bytes:
    """An answer's bytes in UTF-8, which every reader of the meter reads (`stream_events` matches `data:` as bytes):
    decoded as its bytes say (a UTF-16 or UTF-32 byte order mark, or the zero bytes of ASCII text in one: JSON's
    own detection, RFC 4627), else as its Content-Type's charset says. A server honouring `Accept: ...; charset=utf-16`
    or Accept-Charset answered in UTF-16: JSON in it was read (`json.loads` detects it), a stream was not, its usage
    unread and its floor 0 tokens (red team 23s, R23s-1). An encoding no codec here knows leaves the bytes as they
    are."""
    encoding: str = json.detect_encoding(content[:4])
    if encoding in ("utf-8", "utf-8-sig"):
        encoding = charset(content_type)
    try:
        if not encoding or codecs.lookup(encoding).name == "utf-8":
            return content
        return content.decode(encoding, "replace").encode("utf-8", "surrogatepass")
    except (LookupError, ValueError):
        return content


def generated(resp) -> bool:
    """Whether an answer to a call passed as generating nothing says it generated: a stream of events, or one
    stating a usage or carrying output (a listing's, a token count's answer does neither). One the proxy cannot decode
    is read as generated (unread), never as nothing."""
    if resp is None or not 200 <= resp.status_code < 300:
        return False
    try:
        ctype = resp.headers.get("content-type", "")
        content = as_utf8(resp.content or b"", ctype)
    except ValueError:
        return True
    if "event-stream" in ctype.lower() or len(content) > METER_MAX_BYTES:
        return True
    # or one carrying output (`stream_output`) without its usage: one that stated none (a gateway leaving it out, a
    # stream labelled JSON) was no call, the meter complete at 0 tokens (red team 23m, R23m-4)
    return answer_usage(content, ctype) is not None or stream_output(content, ctype) > 0


def sni_matches(host: str, sni: str | None) -> bool:
    """Whether a ClientHello's server name is the CONNECT's host (case and a final dot aside); an IP address is
    named by no SNI, a host name always is (every TLS client sends it)."""
    if sni is None:
        return bool(re.fullmatch(r"[0-9.]+|\[?[0-9a-fA-F:]+\]?", host or ""))
    return sni.rstrip(".").lower() == (host or "").rstrip(".").lower()


def _now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


def charset(content_type: str) -> str:
    """The charset parameter of a Content-Type ("" if none)."""
    for param in content_type.split(";")[1:]:
        name, _, value = param.partition("=")
        if name.strip().lower() == "charset":
            return value.strip().strip('"').lower()
    return ""


class Unreadable(ValueError):
    """A body a server may read as JSON that this proxy cannot."""


class Unmetered(Exception):
    """A call whose answer is not its generation: the meter would never see what it generated."""


# fields (folded) by which a call asks to be answered later (OpenAI's and SGLang's Responses API `background`): the
# answer is a queued response of no usage, the model generates afterwards at the provider, where no answer the proxy
# sees states it, and a later call's `previous_response_id` reads its output (red team 23m, R23m-5). Refused in both
# modes (closed book's allow-list never had it); read as a lax reader reads a flag (`_streams`)
DEFERRED_KEYS = {"background"}


def deferred(body) -> str:
    """The first field of a body (or of a batch's member) asking for its answer later (DEFERRED_KEYS), "" if none."""
    for item in body if isinstance(body, list) else [body]:
        if isinstance(item, dict):
            for key, value in item.items():
                if isinstance(key, str) and _fold(key) in DEFERRED_KEYS and _streams(value):
                    return f"{key}={json.dumps(value)[:40]}"
    return ""


def lax_body(content: bytes, content_type: str) -> tuple[object, bool]:
    """A call's JSON body as the laxest server reads it, and whether it must be forwarded as read (a server may read
    the bytes as they came otherwise). ValueError if it is JSON to no reader; `Unreadable` if a server may read it and
    this proxy cannot. Open book read the bytes as Python's `json.loads` does, and sent on as it came a body some
    server reads otherwise (red team 22i):
    - a charset other than UTF-8 (Express's json() decodes by it, utf-7 too) is read by it, and the body forwarded as
      read, in UTF-8 (R22i-3); a charset Python does not know is `Unreadable`;
    - a byte that is not UTF-8 (Go's encoding/json and Node's parsers replace it) is replaced, the body forwarded as
      read (R22i-1);
    - a body nested past Python's recursion limit (Go's encoding/json reads 10000 levels) is `Unreadable` (R22i-2);
    - a JSON body labelled other than JSON (a form) is forwarded as read, labelled `application/json` (R22i-6);
    - a repeated key (R23a-1), data after the JSON value (R23a-4), a raw control character in a string (R23g-3) or an
      integer past Python's conversion limit (R23g-7): forwarded as read."""
    # every charset parameter: a parser keeping the last of a repeated one (Express's) reads another than the first
    # (R22i-5); two that are not UTF-8 name no one reading
    names = {value.strip().strip('"').lower() for param in content_type.split(";")[1:]
             for key, _, value in [param.partition("=")] if key.strip().lower() == "charset"} - {"", "utf-8", "utf8"}
    if len(names) > 1:
        raise Unreadable(f"charsets {sorted(names)!r}"[:80])
    name = next(iter(names), "")
    # a JSON body labelled otherwise (a form: LiteLLM reads `&stream=true&` in a JSON string as a field) goes labelled
    # JSON, as closed book sends every body (R22i-6)
    media = content_type.split(";")[0].strip().lower()
    relabel = not (media == "application/json" or media.endswith("+json"))
    # what a server may read otherwise, forwarded as read: a key twice in one object, which Python keeps the last of and
    # a server may keep the first of (`"stream": true, "stream": false` was no stream here and a stream without
    # include_usage there, R23a-1), data after the JSON value (`loads`, R23a-4)
    repeated: list[bool] = []

    def pairs(items: list) -> dict:
        read = dict(items)
        if len(read) != len(items):
            repeated.append(True)
        return read

    def number(digits: str) -> int | float:
        """An integer; one past Python's conversion limit (4300 digits: a plain ValueError, and the body went on as it
        came) is read as JSON.parse reads it, a float (infinite), and the body forwarded as read (red team 23g,
        R23g-7)."""
        if len(digits) > 4000:
            repeated.append(True)
            return float(digits)
        return int(digits)

    def loads(text: str | bytes):
        """The body's JSON value, as the laxest reader reads it and forwarded as read: data after it (Python's "Extra
        data") is left out, as Go's json.Decoder (gin's ShouldBindJSON: Ollama) reads a body (R23a-4), and a raw
        control character inside a string (a tab, a newline) is read, as a gateway reading with `strict=False` does;
        Python refused it and open book forwarded the body as it came (red team 23g, R23g-3)."""
        try:
            return json.loads(text, object_pairs_hook=pairs, parse_int=number)
        except json.JSONDecodeError as exc:
            repeated.append(True)
            doc = exc.doc
            lax = json.JSONDecoder(object_pairs_hook=pairs, strict=False, parse_int=number)
            return lax.raw_decode(doc, len(doc) - len(doc.lstrip(" \t\n\r")))[0]

    try:
        if name:
            try:
                text = content.decode(name, "replace")
            except LookupError:
                raise Unreadable(f"charset {name[:40]!r}") from None
            return loads(text), True
        try:
            body = loads(content)
        except UnicodeDecodeError:
            return loads(content.decode("utf-8", "replace")), True
        return body, relabel or bool(repeated)
    except RecursionError:
        raise Unreadable("nested past this proxy's recursion limit") from None


class Egress:
    def __init__(self, allow: list[str], closed_book: bool, directory: Path, models: Sequence[str] = ()):
        self.allow = {origin(url) for url in allow}
        self.closed_book = closed_book
        self.models = frozenset(models)  # with closed book: the only models a request may name (none: any)
        self.log_path = directory / "audit.jsonl"
        self.ready_path = directory / "ready"
        directory.mkdir(parents=True, exist_ok=True)
        self.log_bytes = self.log_path.stat().st_size if self.log_path.exists() else 0
        self.full = False
        self.meter_path = directory / "metered.json"
        # requests: model calls passed that may generate (`generates`); metered: answers whose usage was read;
        # refused: error answers (4xx, 5xx: nothing generated); unread: answers with no usage it could read (a
        # stream's chunks of output still add a token each to completion_tokens: a floor, red team 18b, R18b-1);
        # tunnels: https CONNECTs, never read. A call with no answer (the client hung up, the server died) is in
        # requests alone.
        # last_*: the last answer read (an agent's record saved after each step lacks it when a time limit cuts the
        # step's command: red team 16e, R16e-3); recent: the last RECENT answers' [prompt, completion], oldest first
        # (a step of parallel calls the cut fell in lacks several: red team 18b, R18b-6)
        self.meter = {"requests": 0, "metered": 0, "refused": 0, "unread": 0, "tunnels": 0, "prompt_tokens": 0,
                      "completion_tokens": 0, "last_prompt_tokens": 0, "last_completion_tokens": 0}
        self.recent: list[list[int]] = []

    @classmethod
    def from_env(cls, env=os.environ) -> "Egress":
        return cls(json.loads(env.get("SWESERVE_EGRESS_ALLOW", "[]")), env.get("SWESERVE_EGRESS_CLOSED_BOOK") == "1",
                   Path(env.get("SWESERVE_EGRESS_DIR", "/tmp/sweserve-egress")),
                   json.loads(env.get("SWESERVE_EGRESS_MODELS", "[]")))

    def record(self, flow, target: str, allowed: bool, stripped: Sequence[str] = (), note: str = "") -> bool:
        """One audit line (URL and method clipped); False once the log is full: the request must be refused."""
        entry = {"time": _now(), "client": flow.client_conn.peername[0], "method": clip(flow.request.method),
                 "url": clip(target), "allowed": allowed}
        if stripped:
            entry["stripped"] = list(stripped)
        if note:
            entry["note"] = note
        return self.record_line(entry)

    def record_line(self, entry: dict) -> bool:
        """`entry` as one line of the audit log, unless it is full (LOG_LIMIT); False once it is."""
        if self.full:
            return False
        line = json.dumps(entry) + "\n"
        if self.log_bytes + len(line) > LOG_LIMIT - 4096:
            self.full = True
            line = json.dumps({"time": entry["time"], "client": entry["client"], "allowed": False,
                               "note": "audit log full: this and every later request refused"}) + "\n"
        with self.log_path.open("a", encoding="utf-8") as fh:
            fh.write(line)
        self.log_bytes += len(line)
        return not self.full

    def model_refused(self, body, url: str) -> str:
        """Why closed book refuses the model a request asks for ("" if it does not): an OpenRouter `:online`
        variant, or, when the config pins its models, any model it does not name. A model that searches by its
        name alone (gpt-4o-search-preview, sonar) is no tool to strip: pinned models shut that out."""
        if online_model(body):
            return "a model that searches the web by its name (:online)"
        if routing := routing_fields(body):
            return f"a gateway's routing field {routing[0][:100]!r} (it would send the request elsewhere)"
        if stored := stored_refs(body) or id_refs(body):
            return f"a reference to an object stored at the provider ({stored[0][:100]!r})"
        if tensors := loaded_tensors(body):
            return f"serialized tensors the model server would load ({tensors[0][:100]!r})"
        if unlisted := unlisted_fields(body, url):
            return f"a field no model client sends to this API ({unlisted[0][:100]!r})"
        if self.models:
            asked = [*models_named(body), *path_models(url)]
            if other := next((name for name in asked if name not in self.models), None):
                return f"model {other[:100]!r} is not one the agent's config names (`models`)"
        return ""

    @staticmethod
    def refuse(flow, what: str) -> None:
        from mitmproxy import http

        flow.response = http.Response.make(403, f"sweserve egress: {what} is not allowed\n".encode(),
                                           {"Content-Type": "text/plain"})

    # mitmproxy hooks

    def write_meter(self) -> None:
        part = self.meter_path.with_suffix(".part")
        part.write_text(json.dumps({**self.meter, "recent": self.recent}))
        os.replace(part, self.meter_path)

    def running(self) -> None:
        self.write_meter()
        self.ready_path.write_text("ready\n")

    def tls_clienthello(self, data) -> None:
        """Never intercept TLS: an allowed https origin's tunnel passes as it is, when its ClientHello names the
        host the CONNECT named. One naming another (SNI) would reach another site behind the same front (a CDN
        routes by SNI): it is refused, its handshake failed by `tls_start_client`, and never sent on."""
        host, sni = (data.context.server.address or ("", 0))[0], data.client_hello.sni
        if sni_matches(host, sni):
            data.ignore_connection = True
            return
        data.establish_server_tls_first = False  # no TLS to the server: nothing of this connection goes there
        self.record_line({"time": _now(), "client": data.context.client.peername[0], "method": "TLS",
                          "url": clip(f"{host} (SNI {sni!r})"), "allowed": False,
                          "note": "the TLS server name is not the host the CONNECT named"})

    @staticmethod
    def tls_start_client(tls_start) -> None:
        """The handshake of a tunnel `tls_clienthello` refused: with no certificate, it fails at once."""
        host = (tls_start.context.server.address or ("", 0))[0]
        if sni_matches(host, tls_start.conn.sni):
            return
        from OpenSSL import SSL

        refused = SSL.Connection(SSL.Context(SSL.TLS_METHOD))
        refused.set_accept_state()
        tls_start.ssl_conn = refused

    def _fail_closed(self, flow, hook, target: str) -> None:
        """Run a request hook; on any error, refuse the request and log why. mitmproxy logs an addon's error and
        sends the request (or opens the tunnel) on: a check that raised would let through what it checks."""
        try:
            hook(flow)
        except Exception as exc:
            note = f"refused: the proxy's check failed ({type(exc).__name__}: {exc})"[:300]
            self.refuse(flow, "this request (the proxy could not check it)")
            try:
                self.record(flow, target, False, note=note)
            except Exception:  # the refusal stands without its line
                pass

    def http_connect(self, flow) -> None:
        self._fail_closed(flow, self._http_connect, f"{flow.request.host}:{flow.request.port}")

    def _http_connect(self, flow) -> None:
        target = ("https", flow.request.host.lower(), flow.request.port)
        allowed = target in self.allow
        allowed &= self.record(flow, f"{flow.request.host}:{flow.request.port}", allowed)
        if not allowed:
            self.refuse(flow, f"CONNECT {flow.request.host}:{flow.request.port}")
        else:  # its requests and answers pass through unread: the meter says it saw only part
            self.meter["tunnels"] += 1
            self.write_meter()

    def request(self, flow) -> None:
        if flow.request.method == "CONNECT" or flow.response is not None:
            return
        self._fail_closed(flow, self._request, flow.request.url)

    def _request(self, flow) -> None:
        req = flow.request
        headers = getattr(req, "headers", None) or {}
        allowed = (req.scheme, req.host.lower(), req.port) in self.allow
        stripped: list[str] = []
        note = ""
        fields = headers.get_all("host") if hasattr(headers, "get_all") else [headers.get("host")]
        hosts = [str(host) for host in fields if host is not None]
        if allowed and (len(hosts) > 1 or any(origin(f"{req.scheme}://{host}") != (req.scheme, req.host.lower(),
                                                                                     req.port) for host in hosts)):
            # mitmproxy forwards the client's Host fields as they are (two of them, too): a reverse proxy at the
            # allowed address would route by one to a host the log never names
            allowed, note = False, f"Host header {clip(', '.join(hosts))!r} is not the allowed origin"
        if allowed and not model_call(req.method, req.url):
            allowed, note = False, "not a model API call (a method and path a model server answers)"
        if allowed and (query := shaping_query(req.url)):
            allowed, note = False, f"an answer format the meter cannot read ({query!r})"[:300]
        if allowed and self.closed_book and headers.get("upgrade") is not None:
            # a WebSocket's messages pass through mitmproxy unread: closed book cannot strip them
            allowed, note = False, "closed book: a protocol upgrade (WebSocket) is not read by this proxy"
        if allowed and self.closed_book:
            for name in foreign_headers(headers):
                del headers[name]
                stripped.append(name)
            # a chunked body's trailer section is header fields too, which mitmproxy forwards as they came: no model
            # client sends any, so every one goes (a server that merges trailers into headers read `x-portkey-config`
            # there: red team 18a, R18a-3)
            if trailers := getattr(req, "trailers", None):
                stripped += [f"trailer {name}" for name in dict.fromkeys(
                    n.decode("utf-8", "surrogateescape") if isinstance(n, bytes) else str(n) for n in trailers.keys())]
                req.trailers = None
            if query := foreign_query(req.url, req.method):
                allowed, note = False, f"closed book: a query parameter a model client does not send ({query!r})"[:300]
        if allowed and self.closed_book:
            # fail closed: a body this proxy cannot read (a Content-Encoding it cannot undo, JSON nested past
            # Python's limit, not JSON at all) may still be read by the server, which need not honour a
            # request's coding nor parse as strictly
            try:
                content = req.content  # decoded by its Content-Encoding (ValueError if it cannot be)
                if content and charset(headers.get("content-type", "")) not in ("", "utf-8", "utf8"):
                    # the forwarded body is ASCII JSON, but a server honouring charset=utf-7 reads "+ACI-" as '"'
                    raise ValueError("a charset other than utf-8")
                # a body that is not JSON to Python (one byte that is not UTF-8) is JSON to Go's and Node's
                # parsers, which replace such a byte: ValueError, refused
                body = json.loads(content) if content else None
                if nesting(body) > MAX_DEPTH:
                    raise ValueError(f"nested deeper than {MAX_DEPTH} levels")
                stripped += strip_hosted_tools(body)
                stripped += ask_usage(body, req.url)
                if body is not None:  # what was read, not the bytes as they came: a parser that keeps the first
                    req.content = json.dumps(body).encode()  # of two `tools` keys would read what was not checked
                    # and labelled as what it is: LiteLLM reads a body whose Content-Type has "form" in it as a
                    # form, where `&model=...&` inside a JSON string is a field (red team 16d)
                    req.headers["content-type"] = "application/json"
            except (ValueError, RecursionError) as exc:
                allowed, note = False, f"closed book: body not JSON to this proxy ({type(exc).__name__}: {exc})"[:300]
            else:
                if why := self.model_refused(body, req.url):
                    allowed, note = False, f"closed book: {why}"[:300]
                elif urls := fetched_urls(body):
                    allowed, note = False, f"closed book: a URL the provider would fetch ({urls[0][:100]!r})"
        if allowed and not self.closed_book:
            try:
                stripped += self.open_book_body(req)
            except Unreadable as exc:
                allowed, note = False, f"open book: a body a server may read and this proxy cannot ({exc})"[:300]
            except Unmetered as exc:
                allowed, note = False, f"open book: a call answered later, never metered ({exc})"[:300]
        if allowed:
            try:
                stream = streams_asked(req.content or b"", req.url)
            except ValueError:  # a Content-Encoding it cannot undo: left as it is
                stream = True
            stripped += constrain_encoding(headers) + constrain_transfer(headers) + constrain_accept(headers, stream)
        if allowed:  # REMOVED_HEADERS: vLLM's request id (a shared server's for every trial, as `rid`), Google's field mask
            for name in [n for n in list(headers.keys()) if _header_name(n).lower() in REMOVED_HEADERS]:
                if name not in headers:  # a second casing of one mitmproxy already removed
                    continue
                del headers[name]
                stripped.append(_header_name(name))
        allowed &= self.record(flow, req.url, allowed, stripped, note)
        if not allowed:
            self.refuse(flow, f"this request ({note})" if note else f"{req.scheme}://{req.host}:{req.port}")
        else:
            metadata = getattr(flow, "metadata", None)
            if generates(req.method, req.url):
                self.meter["requests"] += 1
                self.write_meter()
                if metadata is not None:
                    metadata["sweserve_meter"] = True
            elif metadata is not None:  # a listing, a token count: its answer is still read (`response`)
                metadata["sweserve_passed"] = True

    @staticmethod
    def open_book_body(req) -> list[str]:
        """Open book reads no body but a call's JSON: a request id (REQUEST_ID_KEYS: a shared server's request ids are
        every trial's; SGLang aborts by a `rid`'s prefix, R18b-4) is removed from a JSON object body, and an OpenAI chat or completions stream
        asks for its usage (`ask_usage`, R22e-1). The body is read as the laxest server reads it (`lax_body`), and
        forwarded as read when it changed or when the server may read it otherwise; one that is JSON to no reader goes
        as it came (closed book, which refuses such bodies, strips `rid` at any depth). `Unreadable` for a body a server
        may read and this proxy cannot: the call is refused (red team 22i)."""
        try:
            content = req.content  # ValueError: a Content-Encoding it cannot undo (goes as it came, as ever)
            if not content:
                return []
            body, resend = lax_body(content, str(req.headers.get("content-type", "")))
        except Unreadable:
            raise
        except ValueError:
            return []
        if why := deferred(body):
            raise Unmetered(why)
        changed: list[str] = []
        if isinstance(body, dict) and (ids := [k for k in body if isinstance(k, str) and _fold(k) in REQUEST_ID_KEYS]):
            for key in ids:
                del body[key]
            changed += ids
        changed += ask_usage(body, req.url)
        if changed or resend:
            req.content = json.dumps(body).encode()
            if resend:
                req.headers["content-type"] = "application/json"
        return changed

    def response(self, flow) -> None:
        """Meter a model call's answer (what the model server says it used); an answer it cannot read, or a
        call that got none, stays counted unread. A connection switched to another protocol (101: a WebSocket) is
        counted with the tunnels, whatever the call: what passes over it next is never read (red team 17b, R17b-3)."""
        resp = flow.response
        switched = resp is not None and resp.status_code == 101
        if switched:
            self.meter["tunnels"] += 1
        metadata = getattr(flow, "metadata", None) or {}
        if not metadata.get("sweserve_meter") and metadata.get("sweserve_passed") and generated(resp):
            # a call passed as one that generates nothing (a GET, a token count) whose answer generated all the
            # same: a method override, a gateway's any-method route (red team 22a, R22a-1). The answer says what
            # it was: metered as a call
            self.meter["requests"] += 1
            metadata["sweserve_meter"] = True
        if not metadata.get("sweserve_meter"):
            if switched:
                self.write_meter()
            return
        usage = None
        content, ctype = b"", resp.headers.get("content-type", "")
        if 200 <= resp.status_code < 300:
            try:
                content = as_utf8(resp.content or b"", ctype)  # read in UTF-8 whatever it came in (R23s-1)
                usage = answer_usage(content, ctype, echoes(flow))
            except ValueError:  # a Content-Encoding it cannot undo
                pass
        if resp.status_code < 200:  # not a final answer to the call: what followed was not read
            self.meter["unread"] += 1
        elif not 200 <= resp.status_code < 300:
            self.meter["refused"] += 1
        elif usage is None:
            self.meter["unread"] += 1
            # still a floor: each chunk of output a token at least (red team 18b, R18b-1), an answer too large to parse
            # its largest counts (R18b-3); `content` is empty when it could not be decoded
            floor = oversize_usage(content, ctype) if len(content) > METER_MAX_BYTES else \
                (0, stream_output(content, ctype))
            for field, count in zip(("prompt_tokens", "completion_tokens"), floor):
                self.meter[field] = min(self.meter[field] + count, MAX_TOKENS)
        else:
            self.meter["metered"] += 1
            for field, count in (("prompt_tokens", usage[0]), ("completion_tokens", usage[1])):
                self.meter[field] = min(self.meter[field] + count, MAX_TOKENS)  # a count results can hold
                self.meter[f"last_{field}"] = min(count, MAX_TOKENS)
            self.recent = [*self.recent, [min(usage[0], MAX_TOKENS), min(usage[1], MAX_TOKENS)]][-RECENT:]
        self.write_meter()


addons = [Egress.from_env()] if os.environ.get("SWESERVE_EGRESS_DIR") else []
