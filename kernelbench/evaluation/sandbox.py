"""Starting and stopping worker processes: scrubbed environment, own process group, captured output.

Workers are started with ``subprocess`` rather than ``multiprocessing`` so that the parent
chooses their environment exactly (no secrets, no inherited state) without touching its own
``os.environ``, and so that a whole process group (a candidate may start children) can be killed.
"""

from __future__ import annotations

import collections
import logging
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Mapping
from pathlib import Path

from kernelbench.evaluation.channel import Channel

log = logging.getLogger(__name__)

_SECRET_NAME = re.compile(
    r"(_API_KEY|_APIKEY|_TOKEN|_SECRET|_SECRET_KEY|_ACCESS_KEY|_PASSWORD|_PASSWD|_CREDENTIALS)$|"
    r"^(MODAL_|HF_TOKEN|HUGGING_FACE_HUB_TOKEN|GITHUB_TOKEN|GH_TOKEN|ACTIONS_RUNTIME_TOKEN|ACTIONS_ID_TOKEN)",
    re.IGNORECASE,
)
OUTPUT_TAIL_BYTES = 64 * 1024


def is_secret_name(name: str) -> bool:
    return bool(_SECRET_NAME.search(name)) or "SECRET" in name.upper() or "PASSWORD" in name.upper()


def scrubbed_environment(base: Mapping[str, str] | None = None, extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """A copy of ``base`` (default: this process's environment) without secrets, plus ``extra``."""
    env = {k: v for k, v in (os.environ if base is None else base).items() if not is_secret_name(k)}
    if extra:
        env.update(extra)
    return env


class _TailReader(threading.Thread):
    """Drains a pipe, keeping only its last bytes, so a flood of output costs neither memory nor disk."""

    def __init__(self, stream, limit: int = OUTPUT_TAIL_BYTES):
        super().__init__(daemon=True)
        self.stream = stream
        self.limit = limit
        self.chunks: collections.deque[bytes] = collections.deque()
        self.size = 0
        self.total = 0
        self.lock = threading.Lock()

    def run(self) -> None:
        while True:
            try:
                data = self.stream.read1(65536) if hasattr(self.stream, "read1") else self.stream.read(65536)
            except (OSError, ValueError):
                break
            if not data:
                break
            with self.lock:
                self.chunks.append(data)
                self.size += len(data)
                self.total += len(data)
                while self.size > self.limit and len(self.chunks) > 1:
                    self.size -= len(self.chunks.popleft())

    def tail(self) -> str:
        with self.lock:
            data = b"".join(self.chunks)[-self.limit:]
        text = data.decode("utf-8", errors="replace")
        if self.total > len(data):
            text = f"[... {self.total - len(data)} earlier bytes dropped ...]\n" + text
        return text


class WorkerProcess:
    """One worker: a child process, its channel, and the tails of its stdout and stderr."""

    def __init__(self, role: str, device: str, env: Mapping[str, str], cwd: str | None = None):
        self.role = role
        self.device = device
        parent_sock, child_sock = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        child_fd = child_sock.fileno()
        self._tmpdir = None
        if cwd is None:
            self._tmpdir = tempfile.TemporaryDirectory(prefix=f"kb-{role}-")
            cwd = self._tmpdir.name
        pkg_root = str(Path(__file__).resolve().parents[2])
        env = dict(env)
        env["PYTHONPATH"] = pkg_root + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
        env.setdefault("PYTHONUNBUFFERED", "1")
        cmd = [sys.executable, "-m", "kernelbench.evaluation.worker", "--fd", str(child_fd),
               "--role", role, "--device", device]
        self.proc = subprocess.Popen(
            cmd, env=env, cwd=cwd, pass_fds=(child_fd,), stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True,
        )
        child_sock.close()
        self.channel = Channel(parent_sock)
        self._out = _TailReader(self.proc.stdout)
        self._err = _TailReader(self.proc.stderr)
        self._out.start()
        self._err.start()
        self.started = time.monotonic()
        self.info: dict = {}
        self.preloaded: list[str] = []  # modules a reference worker imported at start (baselines)

    @property
    def pid(self) -> int:
        return self.proc.pid

    def alive(self) -> bool:
        return self.proc.poll() is None

    def exit_description(self) -> str:
        code = self.proc.poll()
        if code is None:
            return "still running"
        if code < 0:
            try:
                name = signal.Signals(-code).name
            except ValueError:
                name = f"signal {-code}"
            return f"killed by {name}"
        return f"exited with status {code}"

    def output_tail(self, limit: int = 4000) -> str:
        self._out.join(timeout=0.5)
        self._err.join(timeout=0.5)
        parts = []
        err = self._err.tail()[-limit:]
        out = self._out.tail()[-limit:]
        if err.strip():
            parts.append("stderr:\n" + err)
        if out.strip():
            parts.append("stdout:\n" + out)
        return "\n".join(parts)

    def kill(self) -> None:
        """Kill the worker and anything it started."""
        if self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                self.proc.kill()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            log.warning("worker %s did not die after SIGKILL", self.proc.pid)
        self.channel.close()
        if self._tmpdir is not None:
            self._tmpdir.cleanup()
            self._tmpdir = None

    def close(self, timeout: float = 5.0) -> None:
        """Ask politely, then kill."""
        if self.proc.poll() is None:
            try:
                self.channel.send({"cmd": "exit"})
                self.proc.wait(timeout=timeout)
            except Exception:
                pass
        self.kill()
