"""A scripted OpenAI-compatible chat server on 127.0.0.1, standing in for a model API in tests."""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


def tool_call(name: str, arguments: dict | str, call_id: str = "c1") -> dict:
    args = arguments if isinstance(arguments, str) else json.dumps(arguments)
    return {"role": "assistant", "content": None,
            "tool_calls": [{"id": call_id, "type": "function", "function": {"name": name, "arguments": args}}]}


class FakeModel:
    """Replays a script: each entry answers one request. An entry is a message dict, or one of
    ("status", code), ("raw", bytes), ("sleep", seconds). The last entry repeats."""

    def __init__(self, script: list):
        self.script = script
        self.requests: list[dict] = []
        self.auth: list[str | None] = []
        model = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                model.requests.append(body)
                model.auth.append(self.headers.get("Authorization"))
                entry = model.script[min(len(model.requests) - 1, len(model.script) - 1)]
                if isinstance(entry, tuple) and entry[0] == "status":
                    self.send_response(entry[1])
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

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/v1"

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.server.shutdown()
        self.server.server_close()
