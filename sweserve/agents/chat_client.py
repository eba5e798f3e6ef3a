"""A small client for OpenAI-compatible chat endpoints, shared by the API agent and statement rewriting.

No Docker here, so `sweserve.dataset` may use it. Transient failures (5xx, 429, time-outs, refused
connections) are retried `cfg.request_retries` times, a 429 no sooner than its `Retry-After` (at most a minute);
everything else is a `ModelError` with the cause.
"""

from __future__ import annotations

import http.client
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

    def __init__(self, message: str, status: int | None = None, retry_after: float | None = None,
                 timed_out: bool = False):
        super().__init__(message)
        self.status = status
        self.retry_after = retry_after
        self.timed_out = timed_out  # its last try got no answer in time


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
    last, status, wait, timed_out = "no attempt made", None, None, False
    for attempt in range(cfg.request_retries + 1):
        if attempt:
            time.sleep(max(min(0.5 * 2 ** attempt, 5), wait or 0))
        req = urllib.request.Request(url, data=body, headers=headers, method="POST")
        try:
            with urllib.request.urlopen(req, timeout=cfg.request_timeout_s) as resp:
                raw = resp.read()
        except urllib.error.HTTPError as exc:
            last, status, timed_out = f"HTTP {exc.code} from model API", exc.code, False
            if exc.code < 500 and exc.code != 429:
                raise ModelError(last, exc.code) from None
            wait = retry_after(exc.headers.get("Retry-After") if exc.headers else None) if exc.code == 429 else None
            continue
        except (urllib.error.URLError, TimeoutError, ConnectionError, http.client.HTTPException) as exc:
            status, wait = None, None  # HTTPException: a reply cut short or not HTTP, as unreachable
            reason = getattr(exc, "reason", exc)
            timed_out = isinstance(reason, (TimeoutError, socket.timeout))
            last = f"model API timed out after {cfg.request_timeout_s:g}s" if timed_out else \
                f"model API unreachable: {reason}"
            continue
        try:
            data = json.loads(raw)
            if not isinstance(data["choices"][0]["message"], dict):
                raise TypeError
        except (ValueError, KeyError, IndexError, TypeError):
            raise ModelError("model API returned invalid JSON or no choices") from None
        return data
    raise ModelError(f"{last} ({cfg.request_retries + 1} tries)", status, wait, timed_out)


def lists_models(cfg: ApiAgentConfig, api_key: str | None, timeout_s: float = 10) -> bool:
    """Whether the endpoint answers `GET /models` (OpenAI-compatible servers list them beside, not behind, the
    requests they are computing): alive, whatever its inference queue holds."""
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    req = urllib.request.Request(cfg.base_url.rstrip("/") + "/models", headers=headers, method="GET")
    try:
        with urllib.request.urlopen(req, timeout=timeout_s) as resp:
            return 200 <= resp.status < 300
    except (urllib.error.URLError, TimeoutError, ConnectionError, http.client.HTTPException, ValueError):
        return False
