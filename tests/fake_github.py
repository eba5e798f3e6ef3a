"""A GitHub REST API stand-in on 127.0.0.1: GET /repos/{o}/{r}/pulls/{n} and /issues/{n}, GitHub's JSON shapes.

Served under a GitHub-Enterprise-style prefix (`/api/v3`) so PyGithub's base_url handling is exercised.
Each route answers from a queue: a dict (200 JSON), ("status", code, json_body, headers), ("raw", bytes), or
("cut", bytes): a 200 whose Content-Length promises more than the bytes sent before the connection closes;
the last entry repeats. Unknown routes answer GitHub's 404.
"""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

PREFIX = "/api/v3"
NOT_FOUND = ("status", 404, {"message": "Not Found",
                              "documentation_url": "https://docs.github.com/rest", "status": "404"}, {})


def pull_json(repo: str, number: int, title: str, body: str | None, labels=(), merged_at="2026-06-10T12:00:00Z") -> dict:
    url = f"https://api.github.com/repos/{repo}/pulls/{number}"
    return {
        "url": url, "id": 1000 + number, "number": number, "state": "closed", "locked": False,
        "title": title, "body": body, "user": {"login": "dev", "id": 1, "type": "User"},
        "labels": [{"id": i, "name": name, "color": "ededed", "default": False} for i, name in enumerate(labels)],
        "created_at": "2026-06-09T08:00:00Z", "updated_at": "2026-06-10T12:00:00Z",
        "closed_at": merged_at, "merged_at": merged_at, "merged": merged_at is not None,
        "merge_commit_sha": "0" * 40, "draft": False,
        "html_url": f"https://github.com/{repo}/pull/{number}",
        "issue_url": f"https://api.github.com/repos/{repo}/issues/{number}",
        "head": {"ref": "feature", "sha": "1" * 40}, "base": {"ref": "main", "sha": "2" * 40},
        "comments": 0, "commits": 3, "additions": 10, "deletions": 2, "changed_files": 2,
    }


def issue_json(repo: str, number: int, title: str, body: str | None, labels=(), is_pr=False) -> dict:
    data = {
        "url": f"https://api.github.com/repos/{repo}/issues/{number}", "id": 5000 + number, "number": number,
        "title": title, "body": body, "state": "closed", "user": {"login": "reporter", "id": 2, "type": "User"},
        "labels": [{"id": i, "name": name, "color": "ededed", "default": False} for i, name in enumerate(labels)],
        "html_url": f"https://github.com/{repo}/issues/{number}", "comments": 1,
        "created_at": "2026-06-01T08:00:00Z", "updated_at": "2026-06-10T12:00:00Z", "closed_at": "2026-06-10T12:00:00Z",
    }
    if is_pr:
        data["pull_request"] = {"url": f"https://api.github.com/repos/{repo}/pulls/{number}",
                                "html_url": f"https://github.com/{repo}/pull/{number}"}
    return data


def rate_limited(reset_epoch: int | None = None, retry_after: int | None = None, status: int = 403) -> tuple:
    headers = {"X-RateLimit-Limit": "5000", "X-RateLimit-Remaining": "0", "X-RateLimit-Used": "5000",
               "X-RateLimit-Resource": "core"}
    if reset_epoch is not None:
        headers["X-RateLimit-Reset"] = str(reset_epoch)
    if retry_after is not None:
        headers["Retry-After"] = str(retry_after)
    return ("status", status, {"message": "API rate limit exceeded for user ID 1.",
                               "documentation_url": "https://docs.github.com/rest/rate-limit"}, headers)


def secondary_rate_limited(retry_after: int | None = 60) -> tuple:
    """GitHub's secondary (abuse) limit: a 403 with Retry-After (or no header at all), no X-RateLimit ones."""
    headers = {} if retry_after is None else {"Retry-After": str(retry_after)}
    return ("status", 403, {"message": "You have exceeded a secondary rate limit. Please wait a few minutes before "
                                       "you try again.",
                            "documentation_url": "https://docs.github.com/rest/using-the-rest-api/rate-limits-for-the-"
                                                 "rest-api#about-secondary-rate-limits"}, headers)


class FakeGitHub:
    def __init__(self, routes: dict[str, list | dict | tuple] | None = None):
        self.routes: dict[str, list] = {}
        for path, answer in (routes or {}).items():
            self.add(path, answer)
        self.requests: list[str] = []
        self.auth: list[str | None] = []
        self._served: dict[str, int] = {}
        gh = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_GET(self):
                path = self.path.split("?", 1)[0]
                gh.requests.append(path)
                gh.auth.append(self.headers.get("Authorization"))
                queue = gh.routes.get(path[len(PREFIX):] if path.startswith(PREFIX) else None, [NOT_FOUND])
                i = gh._served.get(path, 0)
                gh._served[path] = i + 1
                answer = queue[min(i, len(queue) - 1)]
                status, headers, length = 200, {}, None
                if isinstance(answer, tuple) and answer[0] == "cut":
                    payload, length = answer[1], len(answer[1]) + 1000
                    self.close_connection = True
                elif isinstance(answer, tuple) and answer[0] == "status":
                    _, status, body, headers = answer
                    payload = json.dumps(body).encode()
                elif isinstance(answer, tuple) and answer[0] == "raw":
                    payload = answer[1]
                else:
                    payload = json.dumps(answer).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json; charset=utf-8")
                self.send_header("Content-Length", str(length or len(payload)))
                for k, v in headers.items():
                    self.send_header(k, v)
                self.end_headers()
                self.wfile.write(payload)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)

    def add(self, path: str, answer) -> None:
        self.routes[path] = answer if isinstance(answer, list) else [answer]

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}{PREFIX}"

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.stop()

    def stop(self):
        if self.thread.is_alive():
            self.server.shutdown()
        self.server.server_close()
