"""A local OpenAI-compatible chat-completions server for tests (stdlib only, 127.0.0.1).

``FakeOpenAI(responder)`` serves ``POST /v1/chat/completions`` on an ephemeral port of the
loopback interface in a daemon thread. ``responder(body)`` gets the request's JSON body and
returns the assistant text, or ``(status, message)`` for an error response. Every request's
path, headers (names lower-cased) and body are recorded in ``requests``. Use it as a context manager; it stops
itself on exit.
"""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class FakeOpenAI:
    def __init__(self, responder, max_requests: int = 1000):
        self.responder = responder
        self.max_requests = max_requests
        self.requests: list = []
        self._lock = threading.Lock()
        self._server = None
        self._thread = None

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}/v1"

    def __enter__(self):
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):  # keep the test output clean
                pass

            def _send(self, status: int, payload: dict):
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_POST(self):
                length = int(self.headers.get("Content-Length") or 0)
                body = json.loads(self.rfile.read(length) or b"{}")
                with fake._lock:
                    headers = {k.lower(): v for k, v in self.headers.items()}
                    fake.requests.append({"path": self.path, "headers": headers, "body": body})
                    too_many = len(fake.requests) > fake.max_requests
                if too_many or not self.path.rstrip("/").endswith("/chat/completions"):
                    self._send(404 if not too_many else 429, {"error": {"message": "not served", "type": "test"}})
                    return
                answer = fake.responder(body)
                if isinstance(answer, tuple):
                    status, message = answer
                    self._send(status, {"error": {"message": message, "type": "test_error", "code": status}})
                    return
                self._send(200, {
                    "id": f"chatcmpl-{len(fake.requests)}", "object": "chat.completion", "created": 0,
                    "model": body.get("model", ""),
                    "choices": [{"index": 0, "finish_reason": "stop",
                                 "message": {"role": "assistant", "content": answer}}],
                    "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15},
                })

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.05},
                                        daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)
        return False


def user_text(body: dict) -> str:
    """The last user message of a chat request."""
    return next(m["content"] for m in reversed(body.get("messages", [])) if m.get("role") == "user")
