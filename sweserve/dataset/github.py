"""What GitHub knows about a mined PR: its title, description, labels, merge time and linked issues.

`GitHubClient` fetches through PyGithub (base_url configurable for GitHub Enterprise) and keeps final
answers on disk under the state dir — the raw JSON of a PR or issue, or a marker for a 404 — so mining
again needs no network. A malformed response (cut short, not JSON, not GitHub's shape) is fetched again
next time; its marker is only the answer of last resort when the server cannot be reached. Other errors
(5xx, a plain 403) are never kept. Rate limits — primary (403/429 with X-RateLimit headers) and secondary
(403/429 with Retry-After, or a "secondary rate limit" message) — are waited out with a visible message,
each wait at most `max_wait_s`; the clock and the sleep are injectable. Per-PR trouble (a deleted PR
or issue, a body that is not what GitHub sends) becomes a note for the task's quality record, never a
failure; an unreachable server or a rejected token is one clear error.
"""

from __future__ import annotations

import json
import logging
import os
import re
import time
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Literal
from urllib.parse import urlsplit

from pydantic import BaseModel, Field

from sweserve.errors import SweserveError

if TYPE_CHECKING:
    from github import Github

log = logging.getLogger(__name__)

DEFAULT_API_URL = "https://api.github.com"

RefKind = Literal["closes", "part_of", "related"]
SECONDARY_WAIT_S = 60  # GitHub: without Retry-After, wait at least a minute after a secondary rate limit

# GitHub's closing keywords (close/fix/resolve and their inflections) plus the informal "part of".
_KEYWORD = r"(?P<kw>close[sd]?|fix(?:e[sd])?|resolve[sd]?|part\s+of)"
_TARGET = (r"(?:(?P<repo>[\w.-]+/[\w.-]+)#(?P<n1>\d+)"
           r"|https?://[^\s/]+/(?P<urepo>[\w.-]+/[\w.-]+)/(?:issues|pull)/(?P<n2>\d+)"
           r"|#(?P<n3>\d+))")
LINK_RE = re.compile(rf"\b{_KEYWORD}\b\s*:?\s*(?:(?:the\s+)?issue\s+)?{_TARGET}", re.IGNORECASE)
# Words before a closing keyword that make it a hope, not a claim: "Try to resolve #670", "Likely fixes #12".
_HEDGE = re.compile(r"(?:\b(?:try|tries|trying|attempts?|attempting|aims?|aiming|hopes?|hoping|helps?)\s+(?:to\s+)?|"
                    r"\b(?:likely|possibly|probably|maybe|might|may|should|could|partially|partly|hopefully|"
                    r"potentially|perhaps)\s+|\bnot\s+)$", re.IGNORECASE)
_COMMENT_RE = re.compile(r"<!--.*?(?:-->|\Z)", re.DOTALL)


class IssueRef(BaseModel):
    repo: str
    number: int
    kind: RefKind

    @property
    def label(self) -> str:
        return f"{self.repo}#{self.number}"


class IssueInfo(BaseModel):
    """A linked issue as we keep it."""

    repo: str
    number: int
    kind: RefKind = Field(description="closes: the PR fixes it; part_of: an umbrella/tracking issue; related: "
                          "the PR hopes to fix it ('Try to resolve #N')")
    title: str
    body: str = ""
    labels: list[str] = Field(default_factory=list)
    state: str = ""
    is_pull_request: bool = Field(False, description="the reference points at another PR, not an issue")
    html_url: str = ""

    @property
    def label(self) -> str:
        return f"{self.repo}#{self.number}"


class PullRequestInfo(BaseModel):
    """A PR as we keep it, with the issues its title and body link to."""

    repo: str
    number: int
    title: str
    body: str = ""
    labels: list[str] = Field(default_factory=list)
    merged_at: datetime | None = None
    html_url: str = ""
    issues: list[IssueInfo] = Field(default_factory=list)
    notes: list[str] = Field(default_factory=list, description="what went wrong fetching linked issues")


def linked_issue_refs(text: str, repo: str, *, exclude: int | None = None, limit: int = 5) -> list[IssueRef]:
    """Issues a PR title/body links to: closing keywords (`Fixes #12`, `closes o/r#3`, `fix <issue URL>`)
    and `Part of #N`, in order of appearance, closing references first; HTML comments are ignored. A
    closing keyword after a hedge ("Try to resolve #670", "Likely fixes #12") only relates the issue."""
    refs: dict[tuple[str, int], IssueRef] = {}
    text_without_comments = _COMMENT_RE.sub("", text or "")
    for m in LINK_RE.finditer(text_without_comments):
        target_repo = m["repo"] or m["urepo"] or repo
        if any(part in (".", "..") for part in target_repo.split("/")):
            continue
        number = int(m["n1"] or m["n2"] or m["n3"])
        kind: RefKind = "part_of" if m["kw"].lower().startswith("part") else "closes"
        before = re.sub(r"[*_]+", "", text_without_comments[max(0, m.start() - 40):m.start()])
        if kind == "closes" and _HEDGE.search(before):
            kind = "related"
        key = (target_repo.lower(), number)
        if (target_repo.lower() == repo.lower() and number == exclude) or key in refs:
            if key in refs and kind == "closes":
                refs[key] = refs[key].model_copy(update={"kind": "closes"})
            continue
        refs[key] = IssueRef(repo=target_repo, number=number, kind=kind)
    ordered = sorted(refs.values(), key=lambda r: ("closes", "part_of", "related").index(r.kind))
    return ordered[:limit]


def cache_key(base_url: str) -> str:
    """A folder name for an API host: `api.github.com`, `ghe.example.com_api_v3`, `127.0.0.1_8080`."""
    parts = urlsplit(base_url)
    return re.sub(r"[^A-Za-z0-9.-]+", "_", f"{parts.netloc}{parts.path}".strip("/")) or "github"


class GitHubClient:
    """Fetches PRs and issues through PyGithub, answering from the on-disk cache when it can."""

    def __init__(
        self,
        cache_dir: Path,
        token: str | None = None,
        base_url: str = DEFAULT_API_URL,
        *,
        sleep: Callable[[float], None] = time.sleep,
        clock: Callable[[], float] = time.time,
        min_interval_s: float | None = 0.25,
        timeout_s: int = 30,
        max_waits: int = 5,
        max_wait_s: float = 3700,
        max_issues: int = 5,
    ):
        self.base_url = base_url.rstrip("/")
        self.cache_dir = Path(cache_dir) / cache_key(self.base_url)
        self.token = token
        self.sleep, self.clock = sleep, clock
        self.min_interval_s, self.timeout_s = min_interval_s, timeout_s
        self.max_waits, self.max_wait_s, self.max_issues = max_waits, max_wait_s, max_issues
        self._gh: Github | None = None

    @classmethod
    def from_env(cls, state_dir: Path, base_url: str | None = None, env=os.environ, **kwargs) -> GitHubClient:
        url = base_url or env.get("SWESERVE_GITHUB_URL") or DEFAULT_API_URL
        return cls(Path(state_dir) / "github", token=env.get("GITHUB_TOKEN") or None, base_url=url, **kwargs)

    @property
    def gh(self):
        if self._gh is None:
            from github import Auth, Github

            self._gh = Github(auth=Auth.Token(self.token) if self.token else None, base_url=self.base_url,
                              timeout=self.timeout_s, retry=None, lazy=True,
                              seconds_between_requests=self.min_interval_s)
        return self._gh

    # -- raw answers, cached --------------------------------------------------------------------------

    def _cache_path(self, repo: str, kind: str, number: int) -> Path:
        return self.cache_dir / repo.replace("/", "__") / kind / f"{number}.json"

    def raw(self, repo: str, kind: Literal["pulls", "issues"], number: int) -> dict:
        """{"status": 200, "data": …} | {"status": 404} | {"status": "malformed", "detail": …} | other status."""
        path = self._cache_path(repo, kind, number)
        cached = None
        if path.exists():
            try:
                cached = json.loads(path.read_text())
            except (OSError, ValueError):
                pass  # a torn cache file is fetched again
        if isinstance(cached, dict) and cached.get("status") in (200, 404):  # final answers
            return cached
        try:
            entry = self._fetch(repo, kind, number)
        except _Unreachable:
            if isinstance(cached, dict) and cached.get("status") == "malformed":
                return cached  # offline: last time's malformed answer stands, and is fetched again next time
            raise
        if entry["status"] in (200, 404, "malformed"):  # 5xx and other errors are not kept at all
            self._store(path, entry)
        return entry

    def _store(self, path: Path, entry: dict) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(entry))
        tmp.replace(path)

    def _malformed(self, repo: str, kind: str, number: int, why: str) -> None:
        """A kept 200 that is not GitHub's shape becomes a malformed marker: fetched again next time."""
        self._store(self._cache_path(repo, kind, number), {"status": "malformed", "detail": why})

    def _fetch(self, repo: str, kind: str, number: int) -> dict:
        import requests
        from github import GithubException, UnknownObjectException

        waits = 0
        while True:
            try:
                gh_repo = self.gh.get_repo(repo)
                obj = gh_repo.get_pull(number) if kind == "pulls" else gh_repo.get_issue(number)
                if not isinstance(obj.raw_data, dict):
                    return {"status": "malformed", "detail": "response is not a JSON object"}
                return {"status": 200, "data": obj.raw_data}
            except UnknownObjectException:
                return {"status": 404}
            except GithubException as exc:
                message = exc.data.get("message") if isinstance(exc.data, dict) else None
                limit = self._rate_limit_wait(exc.status, exc.headers or {}, str(message or ""))
                if limit is not None:
                    which, wait = limit
                    if waits >= self.max_waits:
                        raise SweserveError(f"GitHub {which} still exceeded after {waits} waits; "
                                            "try again later") from None
                    if wait > self.max_wait_s:
                        raise SweserveError(f"GitHub {which} reached (HTTP {exc.status}): it asks for a {wait:.0f}s "
                                            f"wait, over the {self.max_wait_s:.0f}s limit; try again later") from None
                    waits += 1
                    reset = time.strftime("%H:%M:%S", time.gmtime(self.clock() + wait))
                    log.warning("GitHub %s reached (HTTP %s) fetching %s %s #%s; waiting %.0fs for the reset at %s UTC",
                                which, exc.status, repo, kind, number, wait, reset)
                    self.sleep(wait)
                    continue
                if exc.status == 401:
                    raise SweserveError(f"GitHub at {self.base_url} rejected the credentials (401): check GITHUB_TOKEN") from None
                return {"status": exc.status, "detail": str(message or exc.data)[:200]}
            except ValueError as exc:  # JSON that does not parse
                return {"status": "malformed", "detail": f"response is not JSON ({exc.__class__.__name__})"}
            except (requests.exceptions.ChunkedEncodingError, requests.exceptions.ContentDecodingError) as exc:
                return {"status": "malformed", "detail": f"response cut short ({exc.__class__.__name__})"}
            except requests.RequestException as exc:
                raise _Unreachable(f"cannot reach the GitHub API at {self.base_url}: "
                                   f"{exc.__class__.__name__}") from None

    def _rate_limit_wait(self, status: int, headers: dict, message: str = "") -> tuple[str, float] | None:
        """(which limit, seconds to wait) when a 403/429 is a rate limit, else None. Primary: X-RateLimit headers;
        secondary: Retry-After, or GitHub's "secondary rate limit" message without any header (a minute)."""
        if status not in (403, 429):
            return None
        h = {str(k).lower(): str(v) for k, v in headers.items()}
        primary = h.get("x-ratelimit-remaining") == "0"
        which = "rate limit" if primary else "secondary rate limit"
        try:
            if "retry-after" in h:
                return which, max(float(h["retry-after"]), 0.0) + 1
            if primary and "x-ratelimit-reset" in h:
                return which, max(float(h["x-ratelimit-reset"]) - self.clock() + 1, 0.0)
        except ValueError:
            return None
        if re.search(r"secondary rate limit|abuse detection", message, re.IGNORECASE):
            return which, float(SECONDARY_WAIT_S)
        return None

    # -- what we keep -----------------------------------------------------------------------------------

    def pull_request(self, repo: str, number: int) -> tuple[PullRequestInfo | None, list[str]]:
        """The PR with its linked issues, or None and why (a note for the quality record)."""
        from github.PullRequest import PullRequest

        entry = self.raw(repo, "pulls", number)
        problem = _problem(entry, f"PR {repo}#{number}")
        if problem:
            return None, [problem]
        try:
            obj = self.gh.create_from_raw_data(PullRequest, entry["data"])
            info = PullRequestInfo(repo=repo, number=number, title=_text(obj.title, required=True),
                                   body=_text(obj.body), labels=_labels(obj.labels), merged_at=obj.merged_at,
                                   html_url=_text(obj.html_url))
        except Exception as exc:  # noqa: BLE001 - PyGithub's BadAttributeException, pydantic, type errors
            self._malformed(repo, "pulls", number, _why(exc))
            return None, [f"GitHub: PR {repo}#{number}: malformed response ({_why(exc)}); not used"]
        for ref in linked_issue_refs(f"{info.title}\n{info.body}", repo, exclude=number, limit=self.max_issues):
            issue, note = self.issue(ref)
            if issue:
                info.issues.append(issue)
            if note:
                info.notes.append(note)
        return info, list(info.notes)

    def issue(self, ref: IssueRef) -> tuple[IssueInfo | None, str | None]:
        from github.Issue import Issue

        entry = self.raw(ref.repo, "issues", ref.number)
        problem = _problem(entry, f"issue {ref.label}")
        if problem:
            return None, problem
        try:
            obj = self.gh.create_from_raw_data(Issue, entry["data"])
            return IssueInfo(repo=ref.repo, number=ref.number, kind=ref.kind, title=_text(obj.title, required=True),
                             body=_text(obj.body), labels=_labels(obj.labels), state=_text(obj.state),
                             is_pull_request=obj.pull_request is not None, html_url=_text(obj.html_url)), None
        except Exception as exc:  # noqa: BLE001
            self._malformed(ref.repo, "issues", ref.number, _why(exc))
            return None, f"GitHub: issue {ref.label}: malformed response ({_why(exc)}); not used"


class _Unreachable(SweserveError):
    """The API cannot be reached at all (connection refused, DNS, time-out)."""


def _problem(entry: dict, what: str) -> str | None:
    status = entry.get("status")
    if status == 200 and isinstance(entry.get("data"), dict):
        return None
    if status == 404:
        return f"GitHub: {what} not found (404, deleted or private)"
    if status == "malformed":
        return f"GitHub: {what}: malformed response ({entry.get('detail', '')}); not used"
    return f"GitHub: {what}: HTTP {status} {entry.get('detail', '')}".rstrip()


def _text(value, required: bool = False) -> str:
    if value is None and not required:
        return ""
    if not isinstance(value, str) or (required and not value.strip()):
        raise TypeError(f"expected text, got {type(value).__name__}")
    return value


def _labels(labels) -> list[str]:
    return [_text(label.name, required=True) for label in (labels or [])]


def _why(exc: Exception) -> str:
    first = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    return f"{exc.__class__.__name__}: {first}"[:160] if first else exc.__class__.__name__
