"""sweserve's egress policy as a mitmproxy addon (runs inside the proxy container, not in sweserve).

- Only the allowed origins pass: plain-HTTP requests whose (scheme, host, port) is allowed, and CONNECT
  tunnels to allowed https origins (TLS is passed through, never intercepted). Everything else gets 403.
- Every request, allowed or refused, is one JSON line in the audit log (URL clipped); a full log (LOG_LIMIT)
  refuses every later request, so the log is bounded and never silent.
- Closed book: hosted tools (web search, code execution, …) are removed from JSON model requests, so the
  model provider cannot look things up for the agent. A body the proxy cannot read as JSON (a Content-Encoding
  it cannot undo, a byte that is not UTF-8) is refused: the server may read it, and the tools the proxy did not.

Configured by environment variables: SWESERVE_EGRESS_ALLOW (JSON list of "scheme://host:port"),
SWESERVE_EGRESS_CLOSED_BOOK ("1" or "0"), SWESERVE_EGRESS_DIR (where audit.jsonl and the ready marker go).
The policy functions import nothing from mitmproxy, so they are tested on the host.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Sequence
from pathlib import Path
from urllib.parse import urlsplit

DEFAULT_PORTS = {"http": 80, "https": 443}
# tool "type"s (OpenAI, Anthropic) and tool keys (Gemini) the provider runs itself
HOSTED_TYPES = ("web_search", "web_fetch", "code_interpreter", "code_execution", "file_search", "image_generation",
                "mcp", "computer_use")
# Gemini's API is proto JSON: it takes each of these in lowerCamelCase too (googleSearch), so keys are compared
# with "_" removed and case folded
HOSTED_KEYS = ("google_search", "google_search_retrieval", "code_execution", "url_context", "google_maps",
               "enterprise_web_search", "retrieval", "file_search")
# top-level fields: OpenAI's search options, Anthropic's MCP connector (the provider calls remote MCP servers)
HOSTED_OPTIONS = ("web_search_options", "mcp_servers")
MAX_FIELD = 2048  # characters of a URL (or method) kept in an audit line
LOG_LIMIT = 64 << 20  # bytes of audit log; past it the proxy refuses everything (the log never goes silent)


def _fold(key: str) -> str:
    return key.replace("_", "").replace("-", "").lower()


HOSTED_FOLDED = {_fold(key): key for key in HOSTED_KEYS}


def clip(text: str) -> str:
    return text if len(text) <= MAX_FIELD else f"{text[:MAX_FIELD]}...[{len(text)} characters]"


def origin(url: str) -> tuple[str, str, int]:
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    return scheme, (parts.hostname or "").lower(), parts.port or DEFAULT_PORTS.get(scheme, 0)


def hosted_kind(tool) -> str | None:
    """Which hosted tool this tools[] entry asks for, or None for a tool the client runs itself."""
    if not isinstance(tool, dict):
        return None
    kind = tool.get("type")
    if isinstance(kind, str) and kind.startswith(HOSTED_TYPES):
        return kind
    return next((key for key in tool if isinstance(key, str) and _fold(key) in HOSTED_FOLDED), None)


def strip_hosted_tools(body) -> list[str]:
    """Remove hosted tools from a model request body in place; what was removed."""
    if not isinstance(body, dict):
        return []
    stripped = [key for key in HOSTED_OPTIONS if body.pop(key, None) is not None]
    tools = body.get("tools")
    if isinstance(tools, list):
        kept = [t for t in tools if hosted_kind(t) is None]
        stripped += [kind for kind in map(hosted_kind, tools) if kind is not None]
        if len(kept) != len(tools):
            if kept:
                body["tools"] = kept
            else:
                del body["tools"]
                body.pop("tool_choice", None)
    return stripped


class Egress:
    def __init__(self, allow: list[str], closed_book: bool, directory: Path):
        self.allow = {origin(url) for url in allow}
        self.closed_book = closed_book
        self.log_path = directory / "audit.jsonl"
        self.ready_path = directory / "ready"
        directory.mkdir(parents=True, exist_ok=True)
        self.log_bytes = self.log_path.stat().st_size if self.log_path.exists() else 0
        self.full = False

    @classmethod
    def from_env(cls, env=os.environ) -> "Egress":
        return cls(json.loads(env.get("SWESERVE_EGRESS_ALLOW", "[]")), env.get("SWESERVE_EGRESS_CLOSED_BOOK") == "1",
                   Path(env.get("SWESERVE_EGRESS_DIR", "/tmp/sweserve-egress")))

    def record(self, flow, target: str, allowed: bool, stripped: Sequence[str] = (), note: str = "") -> bool:
        """One audit line (URL and method clipped); False once the log is full: the request must be refused."""
        if self.full:
            return False
        now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        entry = {"time": now, "client": flow.client_conn.peername[0], "method": clip(flow.request.method),
                 "url": clip(target), "allowed": allowed}
        if stripped:
            entry["stripped"] = list(stripped)
        if note:
            entry["note"] = note
        line = json.dumps(entry) + "\n"
        if self.log_bytes + len(line) > LOG_LIMIT - 4096:
            self.full = True
            line = json.dumps({"time": now, "client": entry["client"], "allowed": False,
                               "note": "audit log full: this and every later request refused"}) + "\n"
        with self.log_path.open("a", encoding="utf-8") as fh:
            fh.write(line)
        self.log_bytes += len(line)
        return not self.full

    @staticmethod
    def refuse(flow, what: str) -> None:
        from mitmproxy import http

        flow.response = http.Response.make(403, f"sweserve egress: {what} is not allowed\n".encode(),
                                           {"Content-Type": "text/plain"})

    # mitmproxy hooks

    def running(self) -> None:
        self.ready_path.write_text("ready\n")

    def tls_clienthello(self, data) -> None:
        data.ignore_connection = True  # never intercept TLS: allowed https origins are tunnelled as they are

    def http_connect(self, flow) -> None:
        target = ("https", flow.request.host.lower(), flow.request.port)
        allowed = target in self.allow
        allowed &= self.record(flow, f"{flow.request.host}:{flow.request.port}", allowed)
        if not allowed:
            self.refuse(flow, f"CONNECT {flow.request.host}:{flow.request.port}")

    def request(self, flow) -> None:
        if flow.request.method == "CONNECT" or flow.response is not None:
            return
        req = flow.request
        allowed = (req.scheme, req.host.lower(), req.port) in self.allow
        stripped: list[str] = []
        note = ""
        if allowed and self.closed_book:
            # fail closed: a body this proxy cannot read (a Content-Encoding it cannot undo, JSON nested past
            # Python's limit, not JSON at all) may still be read by the server, which need not honour a
            # request's coding nor parse as strictly
            try:
                content = req.content  # decoded by its Content-Encoding (ValueError if it cannot be)
                # a body that is not JSON to Python (one byte that is not UTF-8) is JSON to Go's and Node's
                # parsers, which replace such a byte: ValueError, refused
                body = json.loads(content) if content else None
                stripped = strip_hosted_tools(body)
                if body is not None:  # what was read, not the bytes as they came: a parser that keeps the first
                    req.content = json.dumps(body).encode()  # of two `tools` keys would read what was not checked
            except (ValueError, RecursionError) as exc:
                allowed, note = False, f"closed book: body not JSON to this proxy ({type(exc).__name__})"
        allowed &= self.record(flow, req.url, allowed, stripped, note)
        if not allowed:
            self.refuse(flow, "a body this proxy cannot read" if note else f"{req.scheme}://{req.host}:{req.port}")


addons = [Egress.from_env()] if os.environ.get("SWESERVE_EGRESS_DIR") else []
