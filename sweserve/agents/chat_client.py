"""A small client for OpenAI-compatible chat endpoints, shared by the API agent and statement rewriting.

No Docker here, so `sweserve.dataset` may use it. Transient failures (5xx, 429, time-outs, refused
connections) are retried `cfg.request_retries` times, a 429 no sooner than its `Retry-After` (at most a minute);
everything else is a `ModelError` with the cause.
"""

from __future__ import annotations

import json
import socket
import time
import urllib.error
import urllib.request
from email.utils import parsedate_to_datetime

from sweserve.agents.config import ApiAgentConfig


class ModelError(Exception):
    """The model endpoint failed in a way the caller cannot recover from; `status` is the HTTP status that
    refused the request, where one did (None for a time-out, an unreachable endpoint or a bad answer), and
    `retry_after` the seconds a 429 asked to wait (`RATE_WINDOW_S` when it did not say)."""

    def __init__(self, message: str, status: int | None = None, retry_after: float | None = None):
        super().__init__(message)
        self.status = status
        self.retry_after = retry_after


RATE_WINDOW_S = 60.0  # what a 429 waits at most, and without a Retry-After: providers limit per minute


def retry_after(value: str | None) -> float:
    """The seconds a 429's `Retry-After` asks for (delta-seconds or an HTTP date), within [0, RATE_WINDOW_S];
    RATE_WINDOW_S when it is missing or unreadable."""
    if value is None:
        return RATE_WINDOW_S
    try:
        seconds = float(value)
    except ValueError:
        try:
            seconds = parsedate_to_datetime(value).timestamp() - time.time()
        except (TypeError, ValueError, OverflowError):
            return RATE_WINDOW_S
    return min(max(seconds, 0.0), RATE_WINDOW_S) if seconds == seconds else RATE_WINDOW_S


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
    last, status, wait = "no attempt made", None, None
    for attempt in range(cfg.request_retries + 1):
        if attempt:
            time.sleep(max(min(0.5 * 2 ** attempt, 5), wait or 0))
        req = urllib.request.Request(url, data=body, headers=headers, method="POST")
        try:
            with urllib.request.urlopen(req, timeout=cfg.request_timeout_s) as resp:
                raw = resp.read()
        except urllib.error.HTTPError as exc:
            last, status = f"HTTP {exc.code} from model API", exc.code
            if exc.code < 500 and exc.code != 429:
                raise ModelError(last, exc.code) from None
            wait = retry_after(exc.headers.get("Retry-After") if exc.headers else None) if exc.code == 429 else None
            continue
        except (urllib.error.URLError, TimeoutError, ConnectionError) as exc:
            status, wait = None, None
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
    raise ModelError(f"{last} ({cfg.request_retries + 1} tries)", status, wait)
