"""A real HTTP server on 127.0.0.1 that speaks the OpenAI chat-completions API, for tests.

Tests script it with a queue of :class:`Reply` objects (status code, headers, delay, body) or a
responder function that builds a reply from the request; every request received is recorded
(path, headers, JSON body), so a test can check the prompt that was sent and that no secret
travelled where it should not.
"""

from __future__ import annotations

import json
import re
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass
class Reply:
    """One scripted answer. ``content`` is the assistant message; ``body`` overrides the whole body."""

    content: str | None = "```python\nprint('hello')\n```"
    status: int = 200
    headers: dict[str, str] = field(default_factory=dict)
    delay_s: float = 0.0
    body: Any = None
    prompt_tokens: int = 100
    completion_tokens: int = 50
    reasoning_content: str | None = None


@dataclass
class ReceivedRequest:
    path: str
    headers: dict[str, str]
    body: dict
    received_at: float = field(default_factory=time.monotonic)

    @property
    def prompt(self) -> str:
        """All message contents joined, in order."""
        return "\n".join(str(m.get("content", "")) for m in self.body.get("messages", []))


Responder = Callable[[ReceivedRequest], Reply]


def error_body(status: int, message: str) -> dict:
    return {"error": {"message": message, "type": "server_error" if status >= 500 else "invalid_request_error",
                      "code": status}}


def chat_body(reply: Reply, model: str) -> dict:
    message: dict[str, Any] = {"role": "assistant", "content": reply.content}
    if reply.reasoning_content is not None:
        message["reasoning_content"] = reply.reasoning_content
    return {
        "id": f"chatcmpl-test-{time.monotonic_ns()}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [{"index": 0, "message": message, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": reply.prompt_tokens, "completion_tokens": reply.completion_tokens,
                  "total_tokens": reply.prompt_tokens + reply.completion_tokens},
    }


class LLMServer:
    """``with LLMServer() as srv: ... srv.base_url`` -> ``http://127.0.0.1:<port>/v1``."""

    def __init__(self, replies: list[Reply] | None = None, responder: Responder | None = None,
                 default: Reply | None = None):
        self._queue: deque[Reply] = deque(replies or [])
        self.responder = responder
        self.default = default
        self.requests: list[ReceivedRequest] = []
        self._lock = threading.Lock()
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # ---- scripting ----
    def push(self, *replies: Reply) -> None:
        with self._lock:
            self._queue.extend(replies)

    def _next_reply(self, req: ReceivedRequest) -> Reply:
        with self._lock:
            if self._queue:
                return self._queue.popleft()
        if self.responder is not None:
            return self.responder(req)
        if self.default is not None:
            return self.default
        return Reply(status=500, content=None, body=error_body(500, "test server: no reply scripted"))

    # ---- lifecycle ----
    @property
    def port(self) -> int:
        assert self._httpd is not None, "server not started"
        return self._httpd.server_address[1]

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def start(self) -> LLMServer:
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:  # keep test output quiet
                return

            def _send(self, status: int, payload: Any, headers: dict[str, str] | None = None) -> None:
                data = (payload if isinstance(payload, str) else json.dumps(payload)).encode()
                try:
                    self.send_response(status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(data)))
                    for k, v in (headers or {}).items():
                        self.send_header(k, v)
                    self.end_headers()
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up (a timeout test)

            def do_GET(self) -> None:
                if re.search(r"/models/?$", self.path):
                    self._send(200, {"object": "list", "data": []})
                else:
                    self._send(404, error_body(404, f"no route {self.path}"))

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length) if length else b""
                try:
                    body = json.loads(raw or b"{}")
                except json.JSONDecodeError:
                    self._send(400, error_body(400, "body is not JSON"))
                    return
                req = ReceivedRequest(self.path, {k.lower(): v for k, v in self.headers.items()}, body)
                with server._lock:
                    server.requests.append(req)
                if not self.path.rstrip("/").endswith("/chat/completions"):
                    self._send(404, error_body(404, f"no route {self.path}"))
                    return
                reply = server._next_reply(req)
                if reply.delay_s:
                    time.sleep(reply.delay_s)
                if reply.body is not None:
                    payload = reply.body
                elif reply.status >= 400:
                    payload = error_body(reply.status, f"scripted error {reply.status}")
                else:
                    payload = chat_body(reply, str(body.get("model", "test-model")))
                self._send(reply.status, payload, reply.headers)

        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05},
                                        name="llm-test-server", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
            self._httpd = None

    def __enter__(self) -> LLMServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # ---- inspection ----
    def chat_requests(self) -> list[ReceivedRequest]:
        with self._lock:
            return [r for r in self.requests if r.path.rstrip("/").endswith("/chat/completions")]
