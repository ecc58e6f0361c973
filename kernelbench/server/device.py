"""One evaluator process per device, and the supervisor that starts, feeds, watches and kills it.

Why a process and not a thread of the server: the evaluator's parent (reference worker, spares, CUDA
build pool) is long-lived state that can die or wedge (the OOM killer, a dead GPU, a bug of ours). In
its own process it can be killed and started again while the HTTP server, its queue and every other
device's work carry on; the supervisor re-queues the job that was in it. The process runs the very
:class:`~kernelbench.evaluation.parent.Evaluator` the CLI uses, jobs and results cross as the versioned
JSON wire format of the Modal runner, over the evaluator's own framed channel.

Run as ``python -m kernelbench.server.device --fd N --device cpu`` by :class:`DeviceProcess` only.
"""

from __future__ import annotations

import argparse
import logging
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from dataclasses import replace
from pathlib import Path

from kernelbench.evaluation.channel import Channel, ChannelClosed, ChannelTimeout, ProtocolError
from kernelbench.evaluation.settings import EvalJob
from kernelbench.results import KernelResult, Stage, StageError

log = logging.getLogger(__name__)

#: Starting Python, torch and the evaluator; generous for a loaded CI machine.
START_TIMEOUT_S = 300.0


class DeviceLost(Exception):
    """The evaluator process died (or stopped answering) with a job in it; the job is not at fault."""


class DeadlineExceeded(Exception):
    """A job ran past its timeout plus grace; its evaluator process was killed."""


class Aborted(Exception):
    """The server is shutting down and the drain time is over; the job goes back to the queue."""


def crash_result(job: EvalJob, type_: str, message: str, stage: Stage = Stage.CRASH) -> KernelResult:
    """A result for a job the evaluator could not judge (the message says why; it is no verdict on speed)."""
    return KernelResult(level=job.problem.level, problem_id=job.problem.problem_id, problem_name=job.problem.name,
                        problem_hash=job.problem.hash, sample_id=job.sample_id, backend=job.settings.backend,
                        precision=job.settings.precision, error=StageError.make(stage, type_, message),
                        reduced_size=dict(job.problem.reduced_size) if job.problem.reduced_size else None)


# ---------------------------------------------------------------------------- the child process
def serve_device(fd: int, device: str, sandbox: str, allow_network: bool) -> None:
    """The evaluator process: answer ``eval`` commands with results until the channel closes."""
    from kernelbench.evaluation.parent import Evaluator
    from kernelbench.runners.wire import job_from_wire

    channel = Channel.from_fd(fd)
    try:
        evaluator = Evaluator([device], sandbox=sandbox, allow_network=allow_network)
        evaluator.session(device)  # raises here, not on the first job, when the sandbox is required but missing
    except BaseException as e:
        channel.send({"event": "failed", "message": f"{type(e).__name__}: {e}"})
        return
    channel.send({"event": "ready", "pid": os.getpid()})
    try:
        while True:
            try:
                msg, _ = channel.recv()
            except (ChannelClosed, ProtocolError):
                return
            if msg.get("cmd") != "eval":
                return
            _, job = job_from_wire(msg["job"])
            job = replace(job, settings=job.settings.with_(device=device))
            if msg.get("reduced_size"):  # not part of the Modal wire format; the result must say so
                job = replace(job, problem=replace(job.problem, reduced_size=tuple(
                    (str(k), int(v)) for k, v in msg["reduced_size"])))
            holds = False
            try:
                result = evaluator.evaluate(job)
                # Whether this job's reference worker stayed up (a candidate refused before running sets none up):
                # the server sends this process the next job of the same problem first.
                holds = evaluator.session(device).has_reference(job)
            except Exception as e:  # a bug of ours is a result, not a lost job
                log.exception("evaluation of job %s failed", msg.get("id"))
                result = crash_result(job, type(e).__name__, f"evaluator error: {e}", Stage.INFRASTRUCTURE)
            channel.send({"event": "result", "id": msg.get("id"), "result": result.model_dump(mode="json"),
                          "holds_reference": holds})
    except ChannelClosed:
        return
    finally:
        evaluator.close()


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(prog="kernelbench-device")
    p.add_argument("--fd", type=int, required=True)
    p.add_argument("--device", required=True)
    p.add_argument("--sandbox", default="auto")
    p.add_argument("--allow-network", action="store_true")
    args = p.parse_args(argv)
    logging.basicConfig(level=os.environ.get("KB_SERVER_LOG_LEVEL", "WARNING"),
                        format=f"%(levelname)s device {args.device} %(name)s: %(message)s", stream=sys.stderr)
    serve_device(args.fd, args.device, args.sandbox, args.allow_network)


# ---------------------------------------------------------------------------- the supervisor
def _stat_fields(pid: int | str) -> list[str] | None:
    """/proc/PID/stat after the command name: [state, ppid, ..., starttime at index 19]; None if gone."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    # "pid (comm) state ppid ...": comm may hold spaces and parentheses, so split after the last ')'.
    return stat[stat.rfind(")") + 2:].split()


def _children_map() -> dict[int, list[int]]:
    out: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            fields = _stat_fields(entry.name)
            if fields and len(fields) > 1:
                out.setdefault(int(fields[1]), []).append(int(entry.name))
    return out


def descendants(pid: int) -> dict[int, str]:
    """Every process below ``pid`` with its start time (Linux /proc; empty elsewhere). Workers start sessions
    of their own, so killing the evaluator's process group alone would leave a hung candidate running."""
    if not Path("/proc").is_dir():
        return {}
    children = _children_map()
    out: dict[int, str] = {}
    todo = [pid]
    while todo:
        for c in children.get(todo.pop(), []):
            fields = _stat_fields(c)
            if fields and len(fields) > 19:
                out[c] = fields[19]
            todo.append(c)
    return out


def kill_tree(procs: dict[int, str]) -> None:
    """SIGKILL each process (and the group it leads) that is still the one recorded: same pid, same start time,
    so a pid reused since the snapshot is never touched."""
    for pid, started in procs.items():
        fields = _stat_fields(pid)
        if not fields or len(fields) <= 19 or fields[19] != started:
            continue
        try:
            os.killpg(pid, signal.SIGKILL)  # the session (and group) each worker leads
        except (ProcessLookupError, PermissionError):
            try:
                os.kill(pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass


class DeviceProcess:
    """The supervisor's handle on one device's evaluator process (started on first use, again after a death)."""

    def __init__(self, device: str, sandbox: str = "auto", allow_network: bool = False,
                 env: dict[str, str] | None = None):
        self.device = device
        self.sandbox, self.allow_network = sandbox, allow_network
        self.env = env
        self.proc: subprocess.Popen | None = None
        self.channel: Channel | None = None
        self.restarts = 0
        #: The workers below the evaluator at the last look: if it dies, they are orphans to kill (a hung
        #: candidate would otherwise run on, its parent gone).
        self._below: dict[int, str] = {}
        self._looked = 0.0
        self._started_once = False
        self._lock = threading.Lock()
        #: Whether the process, after the last job that ran returned a result, holds that job's reference worker.
        self.holds_reference = False

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc is not None and self.proc.poll() is None else None

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None and self.channel is not None

    def start(self) -> None:
        """Start the process and wait until its evaluator is ready (raises RuntimeError if it cannot start)."""
        parent_sock, child_sock = socket.socketpair()
        child_fd = child_sock.fileno()
        cmd = [sys.executable, "-m", "kernelbench.server.device", "--fd", str(child_fd), "--device", self.device,
               "--sandbox", self.sandbox] + (["--allow-network"] if self.allow_network else [])
        with self._lock:
            self.proc = subprocess.Popen(cmd, pass_fds=(child_fd,), stdin=subprocess.DEVNULL, env=self.env,
                                         start_new_session=True)
            child_sock.close()
            self.channel = Channel(parent_sock)
        if self._started_once:
            self.restarts += 1
        self._started_once = True
        try:
            msg, _ = self.channel.recv(START_TIMEOUT_S)
        except (ChannelTimeout, ChannelClosed, ProtocolError):
            self.kill()
            raise RuntimeError(f"the evaluator process for {self.device} did not start") from None
        if msg.get("event") != "ready":
            self.kill()
            raise RuntimeError(f"the evaluator process for {self.device} failed to start: {msg.get('message')}")
        log.info("evaluator process for %s ready (pid %s)", self.device, self.proc.pid)

    def run(self, job_id: str, wire_job: dict, limit_s: float, abort: threading.Event,
            reduced_size: list[tuple[str, int]] | None = None) -> KernelResult:
        """Evaluate one job within ``limit_s`` seconds (counted once the process is up, so restarting it after
        the last job's failure does not eat this job's time); raises DeviceLost, DeadlineExceeded or Aborted
        (the latter two after killing the process)."""
        self.holds_reference = False
        if not self.alive():
            self.start()
        assert self.channel is not None
        deadline = time.monotonic() + limit_s
        try:
            self.channel.send({"cmd": "eval", "id": job_id, "job": wire_job, "reduced_size": reduced_size})
        except (ChannelClosed, OSError):
            self.kill()
            raise DeviceLost(f"the evaluator process for {self.device} was gone when the job was sent") from None
        while True:
            if abort.is_set():
                self.kill()
                raise Aborted()
            left = deadline - time.monotonic()
            if left <= 0:
                self.kill()
                raise DeadlineExceeded()
            try:
                msg, _ = self.channel.recv(min(0.5, left))
            except ChannelTimeout:
                if time.monotonic() - self._looked > 2.0 and self.proc is not None:
                    self._below, self._looked = descendants(self.proc.pid), time.monotonic()
                continue
            except (ChannelClosed, ProtocolError, OSError) as e:
                code = self.proc.poll() if self.proc is not None else None
                self.kill()
                raise DeviceLost(f"the evaluator process for {self.device} died (exit status {code}; "
                                 f"{type(e).__name__}: {e})") from None
            if msg.get("event") == "result" and msg.get("id") == job_id:
                self.holds_reference = bool(msg.get("holds_reference"))
                return KernelResult.from_dict(msg["result"])
            log.warning("ignoring an unexpected message from the %s evaluator: %s", self.device, str(msg)[:200])

    def kill(self) -> None:
        """Kill the evaluator process and every worker below it (they run in sessions of their own)."""
        with self._lock:
            proc, channel = self.proc, self.channel
            self.proc, self.channel = None, None
        if proc is None:
            return
        below = descendants(proc.pid) if proc.poll() is None else {}
        if proc.poll() is None:
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                proc.kill()
        kill_tree({**self._below, **below})  # the last snapshot covers an evaluator that died on its own
        self._below = {}
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            log.warning("evaluator process %s did not die after SIGKILL", proc.pid)
        if channel is not None:
            channel.close()

    def stop(self, timeout: float = 10.0) -> None:
        """Ask the evaluator to close its workers and exit; kill it if it does not."""
        with self._lock:
            proc, channel = self.proc, self.channel
        if proc is not None and channel is not None and proc.poll() is None:
            try:
                channel.send({"cmd": "exit"})
                proc.wait(timeout=timeout)
            except (ChannelClosed, OSError, subprocess.TimeoutExpired):
                pass
        self.kill()


if __name__ == "__main__":
    main()
