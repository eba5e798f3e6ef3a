"""A small client for OpenAI-compatible chat endpoints, shared by the API agent and statement rewriting.

No Docker here, so `sweserve.dataset` may use it. Transient failures (5xx, 429, time-outs, refused
connections) are retried `cfg.request_retries` times; everything else is a `ModelError` with the cause.
"""

from __future__ import annotations

import json
import socket
import time
import urllib.error
import urllib.request

from sweserve.agents.config import ApiAgentConfig


class ModelError(Exception):
    """The model endpoint failed in a way the caller cannot recover from; `status` is the HTTP status that
    refused the request, where one did (None for a time-out, an unreachable endpoint or a bad answer)."""

    def __init__(self, message: str, status: int | None = None):
        super().__init__(message)
        self.status = status


def chat(cfg: ApiAgentConfig, api_key: str | None, messages: list[dict], tools: list[dict] | None = None) -> dict:
    """One chat completion: the decoded response, whose choices[0].message is guaranteed to exist."""
    payload = {"model": cfg.model, "messages": messages, "temperature": cfg.temperature}
    if tools:
        payload["tools"] = tools
    body = json.dumps(payload).encode()
    headers = {"Content-Type": "application/json"}
    if api_key:
        headers["Authorization"] = f"Bearer {api_key}"
    url = cfg.base_url.rstrip("/") + "/chat/completions"
    last = "no attempt made"
    for attempt in range(cfg.request_retries + 1):
        if attempt:
            time.sleep(min(0.5 * 2 ** attempt, 5))
        req = urllib.request.Request(url, data=body, headers=headers, method="POST")
        try:
            with urllib.request.urlopen(req, timeout=cfg.request_timeout_s) as resp:
                raw = resp.read()
        except urllib.error.HTTPError as exc:
            last = f"HTTP {exc.code} from model API"
            if exc.code < 500 and exc.code != 429:
                raise ModelError(last, exc.code) from None
            continue
        except (urllib.error.URLError, TimeoutError, ConnectionError) as exc:
            reason = getattr(exc, "reason", exc)
            last = f"model API timed out after {cfg.request_timeout_s:g}s" if isinstance(
                reason, (TimeoutError, socket.timeout)) else f"model API unreachable: {reason}"
            continue
        try:
            data = json.loads(raw)
            if not isinstance(data["choices"][0]["message"], dict):
                raise TypeError
        except (ValueError, KeyError, IndexError, TypeError):
            raise ModelError("model API returned invalid JSON or no choices") from None
        return data
    raise ModelError(f"{last} ({cfg.request_retries + 1} tries)")
