"""The parent's side of a reference template (``worker/template.py``): reference workers forked, not started.

A :class:`ReferenceTemplate` is one started process per device session; :meth:`ReferenceTemplate.start_reference`
gives a :class:`~kernelbench.evaluation.sandbox.WorkerProcess` like ``start_worker("reference", ...)`` does (same
channel, same commands, its output's tail kept), whose process is a :class:`ForkedProcess`: the template's child,
not ours, so its exit status comes from the template. Whatever goes wrong with the template raises
:class:`TemplateUnavailable`, and the session starts its references the usual way from then on.
"""

from __future__ import annotations

import logging
import os
import select
import signal
import socket
import subprocess
import threading
import time
from collections.abc import Mapping

from kernelbench.evaluation import protocol
from kernelbench.evaluation.channel import Blobs, ChannelClosed, ChannelTimeout, ProtocolError
from kernelbench.evaluation.sandbox import WorkerProcess
from kernelbench.evaluation.worker.template import NVML_ADDED_ENV, NVML_CHECK_ENV

log = logging.getLogger(__name__)

#: Environment switch: "0" never forks references, "1" forks them on any device (CPU tests); unset: on a GPU only.
TEMPLATE_ENV = "KB_REFERENCE_TEMPLATE"
#: Seconds a fork or a reap may take before the template counts as lost.
TEMPLATE_REPLY_S = 30.0


def template_wanted(is_cuda: bool, env: Mapping[str, str] | None = None) -> bool:
    """Fork reference workers from a template? By default on a GPU, where a worker's start is seconds of imports."""
    value = (os.environ if env is None else env).get(TEMPLATE_ENV, "").strip()
    if value in ("0", "1"):
        return value == "1"
    if value:
        raise ValueError(f"{TEMPLATE_ENV} must be 0 or 1, not {value!r}")
    return is_cuda


class TemplateUnavailable(RuntimeError):
    """The template could not start, or stopped answering: references are started the usual way instead."""


class ForkedProcess:
    """What :class:`WorkerProcess` needs of ``subprocess.Popen``, for a child of the template.

    Whether it has exited comes from a pidfd (no question to the template while it runs; an exited child stays a
    zombie until the template reaps it, so its pid cannot be reused meanwhile), and it is signalled through the pidfd.
    Its exit status is the template's to collect (``reap``); once the template is gone, or the child is no longer the
    template's, the status is unknown: -9 if we killed it, else 255. One lock per process: an abort's kill and the job
    thread's wait may come at once.
    """

    def __init__(self, template: ReferenceTemplate, pid: int, stdout, stderr):
        self.template = template
        self.pid = pid
        self.stdout, self.stderr = stdout, stderr
        self.returncode: int | None = None
        self._killed = False
        self._lock = threading.Lock()
        try:
            self._pidfd: int | None = os.pidfd_open(pid)  # the template reaps only when asked: the pid is still ours
        except (AttributeError, OSError):
            self._pidfd = None

    def _exited(self) -> bool:
        """Has the process exited (a zombie counts)? Without a pidfd (old kernels), the pid's absence or the template."""
        if self._pidfd is not None:
            try:
                readable, _, _ = select.select([self._pidfd], [], [], 0)
            except (OSError, ValueError):
                return True
            return bool(readable)
        try:
            os.kill(self.pid, 0)
        except ProcessLookupError:
            return True
        except PermissionError:
            return False
        return False

    def _settle(self, code: int) -> int:
        self.returncode = code
        if self._pidfd is not None:
            try:
                os.close(self._pidfd)
            except OSError:
                pass
            self._pidfd = None
        return code

    def poll(self) -> int | None:
        with self._lock:
            if self.returncode is not None:
                return self.returncode
            if self._pidfd is not None and not self._exited():
                return None
            unknown = -signal.SIGKILL if self._killed else 255
            try:
                code, gone = self.template.reap(self.pid)
            except TemplateUnavailable:
                return self._settle(unknown) if self._exited() else None
            if code is not None:
                return self._settle(code)
            if gone or (self._pidfd is None and self._exited()):
                return self._settle(unknown)
            return None

    def wait(self, timeout: float | None = None) -> int:
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            code = self.poll()
            if code is not None:
                return code
            if deadline is not None and time.monotonic() >= deadline:
                raise subprocess.TimeoutExpired(f"reference worker {self.pid}", timeout)
            time.sleep(0.005)

    def send_signal(self, sig: int) -> None:
        with self._lock:
            if self.returncode is not None:
                return
            if self._pidfd is not None:
                try:
                    signal.pidfd_send_signal(self._pidfd, sig)
                except (ProcessLookupError, OSError):
                    pass
                return
            try:
                os.kill(self.pid, sig)
            except (ProcessLookupError, PermissionError):
                pass

    def kill(self) -> None:
        self._killed = True
        self.send_signal(signal.SIGKILL)

    def kill_tree(self) -> None:
        """Kill the worker and whatever it started (its own process group: it called setsid), as ``os.killpg`` does
        for a started worker; the group is signalled only while the worker is alive, so its pid is not someone else's."""
        self._killed = True
        with self._lock:
            alive = self.returncode is None and not self._exited()
        if alive:
            try:
                os.killpg(self.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        self.kill()


class ReferenceTemplate:
    """One template process; forks and reaps one at a time (the spawning threads share it)."""

    def __init__(self, device: str, env: Mapping[str, str], start_timeout_s: float = 180.0):
        from kernelbench.evaluation.parent.workers import _startup_reply

        self.device = device
        self._lock = threading.Lock()
        self._lost: str | None = None
        t0 = time.monotonic()
        env = dict(env)
        if NVML_CHECK_ENV not in env:  # (see worker/template.py: its forks remove it again)
            env.update({NVML_CHECK_ENV: "1", NVML_ADDED_ENV: "1"})
        self.process = WorkerProcess("reference", device, env, template=True)
        try:
            _startup_reply(self.process, protocol.Ready, start_timeout_s, "start the template of")
            report, _ = self.process.channel.recv(start_timeout_s)
        except (RuntimeError, ChannelClosed, ChannelTimeout, ProtocolError) as e:
            self.process.kill()
            raise TemplateUnavailable(str(e)) from None
        #: Preloading steps the template left to each fork, because its forks could not have used CUDA after them.
        self.left_to_forks = [str(x) for x in report.get("left_to_forks") or []]
        if self.left_to_forks:
            log.warning("%s: the reference template left to each fork: %s", device, "; ".join(self.left_to_forks))
        self.start_s = time.monotonic() - t0

    def _request(self, msg: dict, fds: list[int] = ()) -> dict:
        """One command and its reply, under the lock; a template that fails is lost for good."""
        with self._lock:
            if self._lost is not None:
                raise TemplateUnavailable(self._lost)
            try:
                self.process.channel.send(msg, Blobs((), list(fds), owned=False))
                reply, _ = self.process.channel.recv(TEMPLATE_REPLY_S)
            except (ChannelClosed, ChannelTimeout, ProtocolError, OSError) as e:
                self._lost = f"the reference template stopped answering ({type(e).__name__}: {e})"
                self.process.kill()
                raise TemplateUnavailable(self._lost) from None
        if not reply.get("ok"):
            raise TemplateUnavailable(f"the reference template refused: {reply.get('error')}")
        return reply

    def fork(self, child_sock: socket.socket, cwd: str) -> ForkedProcess:
        """A new child of the template, serving the channel whose other end is ``child_sock``."""
        out_r, out_w = os.pipe()
        err_r, err_w = os.pipe()
        try:
            reply = self._request({"cmd": "fork", "cwd": cwd}, [child_sock.fileno(), out_w, err_w])
        except BaseException:
            os.close(out_r)
            os.close(err_r)
            raise
        finally:
            os.close(out_w)
            os.close(err_w)
        pid = reply.get("pid")
        if not isinstance(pid, int) or isinstance(pid, bool) or pid <= 0:
            os.close(out_r)
            os.close(err_r)
            raise TemplateUnavailable(f"the reference template answered a fork with pid {pid!r}")
        return ForkedProcess(self, pid, open(out_r, "rb"), open(err_r, "rb"))

    def reap(self, pid: int) -> tuple[int | None, bool]:
        """``(status, gone)``: the child's exit status once it has exited (collected once: the caller keeps it), else
        None; ``gone`` when it is not (or no longer) the template's child, so that no status will come."""
        reply = self._request({"cmd": "reap", "pid": pid})
        code = reply.get("returncode")
        code = code if isinstance(code, int) and not isinstance(code, bool) else None
        return code, bool(reply.get("gone"))

    def start_reference(self) -> WorkerProcess:
        """A reference worker forked from the template, its Ready still to come (``workers.start_forked_reference``
        waits for it). It has the template's environment, which the session started with a reference worker's."""
        return WorkerProcess("reference", self.device, {}, launcher=self.fork)

    def alive(self) -> bool:
        return self._lost is None and self.process.alive()

    def close(self) -> None:
        with self._lock:
            self._lost = self._lost or "the reference template was closed"
            self.process.close(timeout=2.0)
