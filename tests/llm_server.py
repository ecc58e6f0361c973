"""A real HTTP server on 127.0.0.1 that speaks the OpenAI chat-completions API, for tests.

Tests script it with a queue of :class:`Reply` objects (status code, headers, delay, body) or a
responder function that builds a reply from the request; every request received is recorded
(path, headers, JSON body), so a test can check the prompt that was sent and that no secret
travelled where it should not.

The end of the module holds tiny KernelBench problems and real Triton kernels for them, so that
tests can run generate -> evaluate -> analyse on the CPU path in seconds (the built-in suite is
sized for an H100 and the CPU path runs Triton under the interpreter).
"""

from __future__ import annotations

import json
import re
import textwrap
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
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


# ---------------------------------------------------------------- tiny problems and kernel replies
ADD_RELU = textwrap.dedent('''
    import torch
    import torch.nn as nn


    class Model(nn.Module):
        def __init__(self):
            super().__init__()

        def forward(self, a, b):
            return torch.relu(a + b)


    def get_inputs():
        return [torch.randn(48, 80), torch.randn(48, 80)]


    def get_init_inputs():
        return []
''').lstrip()

SCALE = textwrap.dedent('''
    import torch
    import torch.nn as nn


    class Model(nn.Module):
        def __init__(self, factor):
            super().__init__()
            self.factor = factor

        def forward(self, x):
            return x * self.factor


    def get_inputs():
        return [torch.randn(33, 65)]


    def get_init_inputs():
        return [3.0]
''').lstrip()

# A correct Triton candidate for each tiny problem.
TRITON_ADD_RELU = textwrap.dedent('''
    import torch
    import torch.nn as nn
    import triton
    import triton.language as tl


    @triton.jit
    def add_relu_kernel(a_ptr, b_ptr, out_ptr, n, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        mask = offs < n
        a = tl.load(a_ptr + offs, mask=mask)
        b = tl.load(b_ptr + offs, mask=mask)
        tl.store(out_ptr + offs, tl.maximum(a + b, 0.0), mask=mask)


    class ModelNew(nn.Module):
        def __init__(self):
            super().__init__()

        def forward(self, a, b):
            a = a.contiguous()
            b = b.contiguous()
            out = torch.empty_like(a)
            n = out.numel()
            add_relu_kernel[(triton.cdiv(n, 1024),)](a, b, out, n, BLOCK=1024)
            return out
''').lstrip()

TRITON_SCALE = textwrap.dedent('''
    import torch
    import torch.nn as nn
    import triton
    import triton.language as tl


    @triton.jit
    def scale_kernel(x_ptr, out_ptr, factor, n, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        mask = offs < n
        tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask) * factor, mask=mask)


    class ModelNew(nn.Module):
        def __init__(self, factor):
            super().__init__()
            self.factor = factor

        def forward(self, x):
            x = x.contiguous()
            out = torch.empty_like(x)
            n = out.numel()
            scale_kernel[(triton.cdiv(n, 1024),)](x, out, self.factor, n, BLOCK=1024)
            return out
''').lstrip()

# Wrong on purpose: ignores the factor, so the correctness check must fail it.
TRITON_SCALE_WRONG = TRITON_SCALE.replace("* factor", "* 2.0")

KERNELS = {1: TRITON_ADD_RELU, 2: TRITON_SCALE}


def make_problem_dir(root: Path) -> Path:
    level = root / "level1"
    level.mkdir(parents=True, exist_ok=True)
    (level / "1_Add_ReLU.py").write_text(ADD_RELU)
    (level / "2_Scale.py").write_text(SCALE)
    return root


def fenced(code: str, lang: str = "python") -> str:
    return f"```{lang}\n{code.rstrip()}\n```"


def problem_id_in(prompt: str) -> int:
    m = re.search(r"level \d+, problem (\d+):", prompt)
    assert m, "prompt does not name its problem"
    return int(m.group(1))


def kernel_reply(req: ReceivedRequest) -> Reply:
    """Answer each prompt with the right kernel, wrapped the way models wrap it."""
    pid = problem_id_in(req.prompt)
    return Reply(content=f"<think>\nDraft:\n{fenced('class ModelNew: pass')}\n</think>\nHere is the kernel:\n"
                         f"{fenced(KERNELS[pid])}\nIt fuses the work into one launch.")
