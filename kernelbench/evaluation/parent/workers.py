"""Worker processes as the parent sees them: starting one, calling it, and spares started ahead.

Every command goes through :func:`call`, which turns what can go wrong into three exceptions: the
command raised in the worker (:class:`WorkerFailed`), it ran past its stage's limit
(:class:`StageTimeout`; the worker is killed), or the worker died or broke the protocol
(:class:`WorkerDied`). :func:`reference_call` turns all three into :class:`ReferenceBroken`, since
a reference that fails is never a verdict on a candidate.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Future
from dataclasses import dataclass, replace
from typing import TypeVar

from kernelbench.backends import get_backend
from kernelbench.evaluation import compile_cache, isolation, protocol, transport
from kernelbench.evaluation.channel import Blobs, ChannelClosed, ChannelTimeout, ProtocolError
from kernelbench.evaluation.sandbox import Confinement, WorkerProcess, scrubbed_environment
from kernelbench.evaluation.settings import EvalJob
from kernelbench.results import Stage

log = logging.getLogger(__name__)

WORKER_START_TIMEOUT_S = 180.0
R = TypeVar("R", bound=protocol.Reply)

#: Called with ``(role, what, seconds)`` for every answered command, every wait for a started worker and every
#: spare's start and Init when set (``scripts/bench_evaluator.py`` sets it): where a job's stages spend their time,
#: command by command, on the GPU machine. May be called from the threads that start spares.
call_observer: Callable[[str, str, float], None] | None = None


def observe(role: str, what: str, seconds: float) -> None:
    """Tell :data:`call_observer`, if one is set."""
    observer = call_observer
    if observer is not None:
        observer(role, what, seconds)


class WorkerFailed(Exception):
    """A worker answered a command with an error (the candidate's code raised, or the reference's)."""

    def __init__(self, reply: protocol.ErrorReply):
        super().__init__(reply.message)
        self.reply = reply


class StageTimeout(Exception):
    def __init__(self, stage: Stage, what: str, limit_s: float):
        super().__init__(f"{what} did not finish within {limit_s:g} s")
        self.stage = stage


class WorkerDied(Exception):
    def __init__(self, what: str, description: str, tail: str):
        super().__init__(f"the worker process died during {what} ({description})")
        self.tail = tail


class ReferenceBroken(Exception):
    """The reference worker failed: never the candidate's verdict (before the candidate ran: ours entirely)."""

    def __init__(self, message: str, traceback: str | None = None, before_candidate: bool = False,
                 out_of_memory: bool = False):
        super().__init__(message)
        self.traceback = traceback
        self.before_candidate = before_candidate
        #: The reference could not allocate (its copies of a candidate's outputs, its own forward): ours before candidate
        #: code ran; after it, the candidate may be the cause (run_job records a flagged verdict).
        self.out_of_memory = out_of_memory


# ---------------------------------------------------------------------------- calls
@dataclass(frozen=True)
class Pending:
    """A command sent and not yet answered: two workers can work at once (see :func:`send`)."""

    worker: WorkerProcess
    expect: type
    deadline: float
    timeout: float
    stage: Stage
    what: str


#: A reply already waiting is read even when its deadline has passed while the parent waited on another worker.
LATE_READ_S = 0.5


def send(worker: WorkerProcess, command: protocol.Command, expect: type[R], timeout: float, stage: Stage,
         what: str, blobs: Sequence[bytes] = ()) -> Pending:
    """Send ``command`` without waiting for its reply; :func:`receive` reads it (the limit runs from now).

    Every sent command must be received before the worker is given another one, or the worker killed.
    """
    try:
        worker.channel.send(protocol.encode_command(command), blobs)
    except (ChannelClosed, OSError) as e:
        raise _died(worker, what, e) from None
    return Pending(worker, expect, time.monotonic() + timeout, timeout, stage, what)


def receive(pending: Pending) -> tuple[R, list]:
    """The reply to a :func:`send`, an ``expect``; the same failures as :func:`call`."""
    worker, what = pending.worker, pending.what
    try:
        remaining = max(pending.deadline - time.monotonic(), min(LATE_READ_S, pending.timeout))
        header, out_blobs = worker.channel.recv(remaining)
        reply, mem = protocol.decode_reply(header, pending.expect)
    except ChannelTimeout:
        worker.kill()
        raise StageTimeout(pending.stage, what, pending.timeout) from None
    except (ChannelClosed, ProtocolError, OSError) as e:
        raise _died(worker, what, e) from None
    if mem and log.isEnabledFor(logging.DEBUG):
        log.debug("after %s: worker pid %s holds %.2f GiB allocated, %.2f GiB reserved", what, worker.proc.pid,
                  mem[0] / 2**30, mem[1] / 2**30)
    observe(worker.role, what, time.monotonic() - (pending.deadline - pending.timeout))
    if isinstance(reply, protocol.ErrorReply):
        raise WorkerFailed(reply)
    return reply, out_blobs


def _died(worker: WorkerProcess, what: str, e: BaseException) -> WorkerDied:
    try:
        worker.proc.wait(timeout=5)
    except Exception:
        worker.kill()
    description = worker.exit_description()
    if isinstance(e, ProtocolError):  # a worker that breaks the protocol is killed as if it had died
        description += f"; it had sent a malformed message: {e}"
    return WorkerDied(what, description, worker.output_tail())


def call(worker: WorkerProcess, command: protocol.Command, expect: type[R], timeout: float, stage: Stage,
         what: str, blobs: Sequence[bytes] = ()) -> tuple[R, list]:
    """Send ``command`` and read its reply, an ``expect``; a malformed reply counts as the worker dying."""
    return receive(send(worker, command, expect, timeout, stage, what, blobs))


def reference_call(worker: WorkerProcess, command: protocol.Command, expect: type[R], timeout: float, what: str,
                   blobs: Sequence[bytes] = ()) -> tuple[R, list]:
    """:func:`call` for a reference worker: whatever goes wrong is :class:`ReferenceBroken`."""
    return reference_receive(reference_send(worker, command, expect, timeout, what, blobs))


def reference_send(worker: WorkerProcess, command: protocol.Command, expect: type[R], timeout: float, what: str,
                   blobs: Sequence[bytes] = ()) -> Pending:
    """:func:`send` for a reference worker."""
    try:
        return send(worker, command, expect, timeout, Stage.CRASH, what, blobs)
    except WorkerDied as e:
        raise ReferenceBroken(f"reference worker failed during {what}: {e}") from None


def reference_receive(pending: Pending) -> tuple[R, list]:
    """:func:`receive` for a reference worker: whatever goes wrong is :class:`ReferenceBroken`."""
    what = pending.what
    try:
        return receive(pending)
    except WorkerFailed as e:
        r = e.reply
        raise ReferenceBroken(f"reference failed during {what}: {r.type}: {r.message}",
                              r.traceback, out_of_memory=r.type in protocol.OUT_OF_MEMORY_TYPES) from None
    except (WorkerDied, StageTimeout) as e:
        raise ReferenceBroken(f"reference worker failed during {what}: {e}") from None


def relayed(cand: WorkerProcess, reply: protocol.ExportReply, blobs: list,
            where: str) -> tuple[protocol.ExportReply, list]:
    """The candidate's tensor descriptors made openable by the reference (see WorkerProcess.relay_outputs), and its
    frames with the one descriptor a shared buffer needs; any other descriptor it sent is closed, never passed on."""
    fds = blobs.take_fds() if isinstance(blobs, Blobs) else []
    try:
        out = replace(reply, outputs=cand.relay_outputs(reply.outputs), inputs=cand.relay_outputs(reply.inputs))
        shared = transport.names_shared([*out.outputs, *out.inputs])
        if shared and len(fds) != 1:
            raise ValueError(f"shared tensors come with one descriptor, not {len(fds)}")
        keep, fds = (fds, []) if shared else ([], fds)
        return out, Blobs(blobs, keep)
    except (ValueError, OSError) as e:
        raise WorkerFailed(protocol.ErrorReply(where=where, type="TransportError", message=str(e), traceback=None,
                                               builds=None)) from None
    finally:
        Blobs((), fds).close_fds()


def publish_after_exit(worker: WorkerProcess, reply: protocol.LoadReply | protocol.ErrorReply, job: EvalJob) -> None:
    """Once the worker is gone, copy what it built into the extension cache (trusted code, hashed)."""
    builds = reply.builds
    if not builds or not isinstance(builds, list):
        return
    scope, namespace = compile_cache.source_scope(job.candidate_source), job.settings.cache_namespace

    def publish(w: WorkerProcess) -> None:
        if w.dirs is not None:
            compile_cache.publish_builds(w.dirs.build, builds, scope, namespace)

    worker.after_exit = publish


# ---------------------------------------------------------------------------- starting
def worker_env(role: str, device: str, backend: str | None, arch: str | None,
                env_extra: Mapping[str, str] | None = None) -> dict[str, str]:
    extra: dict[str, str] = dict(env_extra or {})
    # Idle OpenMP threads must not spin: workers take turns, and CI machines are small.
    if "OMP_WAIT_POLICY" not in os.environ:
        extra["OMP_WAIT_POLICY"] = "PASSIVE"
    if device == "cpu":
        extra["CUDA_VISIBLE_DEVICES"] = ""
    if backend is not None:
        extra.update(get_backend(backend).worker_env(on_gpu=device != "cpu"))
    if arch and "TORCH_CUDA_ARCH_LIST" not in os.environ:
        extra["TORCH_CUDA_ARCH_LIST"] = arch
    if role == "compile":
        extra["CUDA_VISIBLE_DEVICES"] = ""
        extra.setdefault("MAX_JOBS", "2")
    return scrubbed_environment(extra=extra)


def start_worker(role: str, device: str, backend: str | None = None, arch: str | None = None,
                 init: bool = True, env_extra: Mapping[str, str] | None = None,
                 confinement: Confinement | None = None) -> WorkerProcess:
    """Start a worker; with ``init`` also create its CUDA context (see :class:`Spare` for why not always).

    ``env_extra`` adds environment variables (the compile warm-up points torch.compile's caches);
    ``confinement`` runs it in the OS sandbox (candidate and compile workers only).
    """
    if confinement is not None and role == "reference":
        raise ValueError("the reference worker runs trusted code only and is never confined")
    t0 = time.monotonic()
    w = WorkerProcess(role, device, worker_env(role, device, backend, arch, env_extra), confinement=confinement)
    _ready(w, STARTED, t0)
    if init:
        finish_init(w, send_init(w))
    return w


def start_forked_reference(template, device: str) -> WorkerProcess:
    """A reference worker forked from ``template`` (a :class:`~.template.ReferenceTemplate`), started as
    :func:`start_worker` starts one with ``init=False``; raises :class:`~.template.TemplateUnavailable` when the
    template cannot fork, RuntimeError when the fork could not start."""
    t0 = time.monotonic()
    return _ready(template.start_reference(), FORKED_START, t0)


def _ready(w: WorkerProcess, how: str, t0: float) -> WorkerProcess:
    """Wait for a new worker's Ready, record its start since ``t0`` as ``how``, and find its main pid now, while it
    runs trusted code only."""
    _startup_reply(w, protocol.Ready, WORKER_START_TIMEOUT_S, "start")
    observe(w.role, how, time.monotonic() - t0)
    _ = w.main_pid
    return w


#: What :func:`observe` calls a reference worker's start when it was forked from the template (a started worker's is
#: "process start (in the background)"): ``scripts/bench_evaluator.py`` counts both.
FORKED_START = "process start (forked from the template)"
STARTED = "process start (in the background)"


def _startup_reply(w: WorkerProcess, expect: type[R], timeout: float, verb: str) -> R:
    """A starting worker's ``Ready`` or ``InitReply``; anything else kills it and raises a RuntimeError
    saying it could not ``verb`` (start, initialise), with the tail of its output."""
    try:
        header, _ = w.channel.recv(timeout)
        msg, _ = protocol.decode_reply(header, expect)
    except (ChannelTimeout, ChannelClosed, ProtocolError):
        tail = w.output_tail()
        w.kill()
        raise RuntimeError(f"could not {verb} a {w.role} worker on {w.device}: {w.exit_description()}\n{tail}") from None
    if isinstance(msg, protocol.ErrorReply):
        w.kill()
        raise RuntimeError(f"{w.role} worker on {w.device} failed to {verb}: {msg.type}: {msg.message}")
    return msg


def send_init(w: WorkerProcess, warm: bool = True) -> float:
    """Ask the worker to create its CUDA context (with ``warm``, also to warm its libraries); returns when (for
    :func:`finish_init`'s deadline)."""
    w.channel.send(protocol.encode_command(protocol.Init(warm=warm)))
    return time.monotonic()


def finish_init(w: WorkerProcess, sent_at: float) -> None:
    """Wait for the worker's :class:`~kernelbench.evaluation.protocol.InitReply`; keep its environment."""
    remaining = max(1.0, WORKER_START_TIMEOUT_S - (time.monotonic() - sent_at))
    reply = _startup_reply(w, protocol.InitReply, remaining, "initialise")
    w.info = reply.env or {}
    w.preloaded = list(reply.preloaded or [])
    if isinstance(reply.init_s, (int, float)):
        observe(w.role, INIT_LABEL, float(reply.init_s))


def send_warm(w: WorkerProcess, pieces: int = 0) -> float:
    """Ask a worker initialised without its warm-up to run ``pieces`` pieces of it now (0: all); returns when."""
    w.channel.send(protocol.encode_command(protocol.Warm(pieces=pieces)))
    return time.monotonic()


def finish_warm(w: WorkerProcess, sent_at: float) -> int:
    """Wait for the warm-up's reply; returns the pieces it has left (0: warm)."""
    remaining = max(1.0, WORKER_START_TIMEOUT_S - (time.monotonic() - sent_at))
    reply = _startup_reply(w, protocol.WarmReply, remaining, "warm up")
    if isinstance(reply.warm_s, (int, float)):
        observe(w.role, WARM_LABEL, float(reply.warm_s))
    left = reply.left
    return left if isinstance(left, int) and not isinstance(left, bool) and left > 0 else 0


#: What :func:`observe` calls a spare's Init (its CUDA context) and its warm-up, as the workers report them.
INIT_LABEL = "Init in the worker (context; mostly beside other work)"
WARM_LABEL = "a piece of the warm-up in the worker (libraries; beside untimed work)"


class Spare:
    """A worker started ahead of need.

    Starting Python and importing torch happens whenever. Its CUDA context (``Init`` without the warm-up,
    ``begin_init``) and then its libraries' warm-up (``Warm``, one piece of 0.1-0.2 s at a time, ``begin_warm``)
    only while nothing is timed, each as soon as the session allows: a timing about to begin waits for the step under
    way, so the steps are short (parent/session.py, PAUSE_INITS_ENV, says what each does to a timing). A thread of
    its own reads the replies as they come, and tells the session when the context is ready or a piece is done
    (``on_step``: it sends the next piece there if the GPU is quiet). ``take`` waits for all of it, sending what is
    left; ``pause``/``resume`` stop and continue a step under way (``KB_PAUSE_INITS=1``)."""

    def __init__(self, future: Future, on_step: Callable[[Spare], None] | None = None):
        self.future = future
        self.worker: WorkerProcess | None = None
        self.init_sent: float | None = None
        #: When the first piece of the warm-up was sent, and the piece under way (None: none).
        self.warm_sent: float | None = None
        self.piece_sent: float | None = None
        #: Every reply read, or failed, or the spare discarded.
        self.ready = False
        #: Why its Init or warm-up failed (its worker is then killed): take() raises it rather than hand out a dead one.
        self.error: Exception | None = None
        self._on_step = on_step
        # begin_init may come from the thread that started the process (DeviceSession: as soon as it has started)
        # while the job's thread takes it or a quiesce() finishes its warm-up: each command sent once.
        self._lock = threading.Lock()
        self._context = threading.Event()  # the Init answered (or failed)
        self._warm_go = threading.Event()  # a piece sent, or the spare discarded: the reader goes on
        self._idle = threading.Event()  # no piece under way
        self._idle.set()
        self._done = threading.Event()  # every reply read (or failed, or discarded)
        self._discarded = False
        self._reader: threading.Thread | None = None
        #: Stopped by :meth:`pause` and not yet resumed.
        self.paused = False

    @property
    def context_ready(self) -> bool:
        return self._context.is_set() and self.error is None

    def begin_init(self) -> None:
        """Send the Init (the context alone) once the process has started; a thread reads its reply."""
        with self._lock:
            if self.init_sent is not None or self.error is not None or self._discarded or not self.future.done():
                return
            try:
                self.worker = self.future.result()
                self.init_sent = send_init(self.worker, warm=False)
            except Exception as e:
                self._failed(e)  # a broken spare: take() raises this
                return
            self._reader = threading.Thread(target=self._read_replies, name="spare-init", daemon=True)
            self._reader.start()

    def begin_warm(self) -> None:
        """Send the warm-up's next piece once the context is ready and no piece is under way (the caller knows nothing
        is timed)."""
        with self._lock:
            if not self.context_ready or self.piece_sent is not None or self._discarded or self._done.is_set():
                return
            try:
                self.piece_sent = send_warm(self.worker, pieces=1)
                self.warm_sent = self.warm_sent or self.piece_sent
                self._idle.clear()
            except Exception as e:
                self.worker.kill()
                self._failed(e)
            self._warm_go.set()

    @property
    def warming(self) -> bool:
        """A piece of the warm-up sent and not answered yet."""
        return self.piece_sent is not None and not self._done.is_set()

    @property
    def stepping(self) -> bool:
        """An Init or a piece of the warm-up sent and not answered yet: the worker is using the GPU now."""
        if self.error is not None or self.init_sent is None:
            return False
        return not self._context.is_set() or self.warming

    def pause(self) -> bool:
        """Stop the worker where it stands (its Init or warm-up under way as a timing begins); False if it could not
        be stopped (the caller then waits for the step instead)."""
        self.paused = self.worker is not None and self.worker.pause()
        return self.paused

    def resume(self) -> None:
        """Let a paused worker go on (nothing to do for one never paused)."""
        if self.paused:
            self.paused = False
            self.worker.resume()

    def _failed(self, e: Exception) -> None:
        self.error = self.error or e
        self.ready = True
        self._context.set()
        self._warm_go.set()
        self._idle.set()
        self._done.set()

    def _stepped(self) -> None:
        if self._on_step is not None:
            try:
                self._on_step(self)
            except Exception:  # the session's bookkeeping must not lose the spare: take() warms it
                log.exception("a spare's step callback failed")

    def _read_replies(self) -> None:
        worker = self.worker
        try:
            finish_init(worker, self.init_sent)
        except Exception as e:  # (the worker is killed by then)
            self._failed(e)
            return
        self._context.set()
        self._stepped()
        while True:
            self._warm_go.wait()
            with self._lock:
                sent = self.piece_sent
                if sent is None or self.error is not None:  # discarded: nothing under way, nothing more to read
                    self.ready = True
                    self._idle.set()
                    self._done.set()
                    return
            try:
                left = finish_warm(worker, sent)
            except Exception as e:
                self._failed(e)
                return
            with self._lock:
                self.piece_sent = None
                if not self._discarded:
                    self._warm_go.clear()
                if left == 0:
                    self.ready = True
                    self._done.set()
                self._idle.set()
            if left == 0:
                return
            self._stepped()

    def finish_warm(self) -> None:
        """Wait for the piece of the warm-up under way (a timing is about to begin); raises why it failed."""
        self._idle.wait()
        if self.error is not None:
            raise self.error

    def finish_init(self) -> None:
        """Wait for what was sent to be answered (a timing is about to begin); raises why it failed."""
        if self.init_sent is not None:
            self._context.wait()
        self.finish_warm()

    def take(self) -> WorkerProcess:
        """The worker, initialised and warm; raises why not (its start, Init or warm-up failed) instead of handing out
        a dead one."""
        worker = self.future.result()
        self.begin_init()
        self._context.wait()
        while not self._done.is_set():  # (a job takes its workers while nothing is timed)
            self.begin_warm()
            self._idle.wait()
            if self.error is not None:
                break
        self._done.wait()
        if self.error is not None:
            raise self.error
        return worker

    def discard(self) -> None:
        try:
            worker = self.future.result(timeout=WORKER_START_TIMEOUT_S)
        except Exception:
            return
        with self._lock:
            self._discarded = True
            self._warm_go.set()
        self.resume()  # (paused at a timing's start: a stopped worker could neither answer nor exit politely)
        if self._reader is not None:
            self._reader.join(WORKER_START_TIMEOUT_S)
        worker.close()


def confinement_for(mode: str, gpu: bool, allow_network: bool = False) -> Confinement | None:
    """The sandbox candidate workers get under ``mode`` (None: process isolation; may raise SandboxUnavailable)."""
    support = isolation.resolve(mode, gpu, allow_network)
    if support is None or support.bwrap is None:
        return None
    root = compile_cache.base_root()
    root.mkdir(parents=True, exist_ok=True)  # bound read-only into the sandbox: it must exist first
    return Confinement(support.bwrap, allow_network, str(root))
