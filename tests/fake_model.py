"""A scripted OpenAI-compatible chat server on 127.0.0.1, standing in for a model API in tests.

Run as a script (`python3 fake_model.py PORT SCRIPT.json`) it serves on 0.0.0.0 inside a container, printing
each request body as a JSON line, for tests where the model must sit where only a proxy can reach it;
"$SELF" in the script stands for its own host:port.
"""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, HTTPServer, ThreadingHTTPServer


def tool_call(name: str, arguments: dict | str, call_id: str = "c1") -> dict:
    args = arguments if isinstance(arguments, str) else json.dumps(arguments)
    return {"role": "assistant", "content": None,
            "tool_calls": [{"id": call_id, "type": "function", "function": {"name": name, "arguments": args}}]}


class Served:
    """A scripted server on 127.0.0.1 (its `server` and `thread` set by the subclass), started and stopped as a
    context manager; `base_url` is its OpenAI-style root."""

    server: HTTPServer
    thread: threading.Thread

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/v1"

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.server.shutdown()
        self.server.server_close()


class FakeModel(Served):
    """Replays a script: each entry answers one request. An entry is a message dict, or one of
    ("status", code), ("raw", bytes), ("sleep", seconds). The last entry repeats."""

    def __init__(self, script: list, host: str = "127.0.0.1", port: int = 0, echo: bool = False,
                 fail_when: tuple | None = None):
        """`fail_when`: (text, entry[, hold_s]): a request whose body holds text is answered by entry, the script's
        place kept (an endpoint that fails on what a conversation holds, such as a context too long to answer);
        with hold_s, every request for hold_s seconds after it too (a rate limit the conversation spent). A
        ("status", code, headers) entry sends those headers."""
        self.script = script
        self.requests: list[dict] = []
        self.auth: list[str | None] = []
        self.failed: list[dict] = []
        self.held_until = 0.0
        model = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                model.requests.append(body)
                if echo:
                    print(json.dumps(body), flush=True)
                model.auth.append(self.headers.get("Authorization"))
                if fail_when is not None and (fail_when[0] in json.dumps(body)
                                              or time.monotonic() < model.held_until):
                    if len(fail_when) > 2 and fail_when[0] in json.dumps(body):
                        model.held_until = time.monotonic() + fail_when[2]
                    model.requests.pop()
                    model.failed.append(body)
                    entry = fail_when[1]
                else:
                    entry = model.script[min(len(model.requests) - 1, len(model.script) - 1)]
                if isinstance(entry, tuple) and entry[0] == "status":
                    self.send_response(entry[1])
                    for k, v in (entry[2] if len(entry) > 2 else {}).items():
                        self.send_header(k, v)
                    self.end_headers()
                    self.wfile.write(b'{"error": "boom"}')
                    return
                if isinstance(entry, tuple) and entry[0] == "sleep":
                    time.sleep(entry[1])
                    entry = {"role": "assistant", "content": "late"}
                payload = entry[1] if isinstance(entry, tuple) and entry[0] == "raw" else json.dumps({
                    "id": f"r{len(model.requests)}", "object": "chat.completion",
                    "choices": [{"index": 0, "message": entry, "finish_reason": "stop"}],
                    "usage": {"prompt_tokens": 100, "completion_tokens": 20, "total_tokens": 120},
                }).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

        self.server = ThreadingHTTPServer((host, port), Handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)


if __name__ == "__main__":
    import socket
    import sys

    port = int(sys.argv[1])
    with open(sys.argv[2]) as fh:  # "$SELF" in the script is this server's own host:port
        text = fh.read().replace("$SELF", f"{socket.gethostbyname(socket.gethostname())}:{port}")
    steps = [tuple(e) if isinstance(e, list) else e for e in json.loads(text)]
    FakeModel(steps, "0.0.0.0", port, echo=True).server.serve_forever()
