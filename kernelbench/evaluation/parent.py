"""The trusted parent: runs jobs through reference and candidate workers and decides verdicts.

This process never imports candidate code and never creates a CUDA context; the workers do
the GPU work. The reference worker (trusted code only) is kept per problem and device; every
candidate gets a fresh process, and a spare is started ahead so the next candidate does not
wait for Python, torch and CUDA to start. CUDA candidates of a batch are built on all CPU cores
in parallel (compile workers fill the extension cache) while the GPUs evaluate what is ready.
"""

from __future__ import annotations

import ast
import logging
import os
import sys
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from typing import TypeVar

from kernelbench.evaluation import compile_cache, isolation, protocol
from kernelbench.evaluation import seeds as seedlib
from kernelbench.evaluation.channel import ChannelClosed, ChannelTimeout, ProtocolError
from kernelbench.evaluation.compare import fingerprints_match
from kernelbench.evaluation.cpu_affinity import CoreReservation, pinned
from kernelbench.evaluation.environment import gpu_compute_capability_from_smi
from kernelbench.evaluation.guards import runtime as rt
from kernelbench.evaluation.provenance import host_share
from kernelbench.evaluation.sandbox import Confinement, WorkerProcess, scrubbed_environment
from kernelbench.evaluation.settings import EvalJob, EvalSettings
from kernelbench.evaluation.timing import (
    MIN_ROUNDS,
    StopRule,
    block_order,
    block_size,
    should_stop,
    side_stream_gap_suspicious,
)
from kernelbench.results import (
    CorrectnessDetail,
    EnvironmentInfo,
    GuardFinding,
    KernelResult,
    Stage,
    StageError,
    TimingStats,
    trim,
)
from kernelbench.speedup import IMPRECISE_HALF_WIDTH

log = logging.getLogger(__name__)

WORKER_START_TIMEOUT_S = 180.0
#: Seconds an interrupted batch waits for its device threads to notice before re-raising the interrupt.
INTERRUPT_GRACE_S = 10.0
_COMPILE_ERROR_TYPES = {"CompilationError", "CompileTimeAssertionFailure", "MLIRCompilationError",
                        "PTXASError", "OutOfResources"}
ResultCallback = Callable[[int, KernelResult], None]
#: ``(job index, stage name, seconds)`` as each stage of a job finishes, for progress displays.
StageCallback = Callable[[int, str, float], None]
R = TypeVar("R", bound=protocol.Reply)


class _StageTimes(dict):
    """Stage durations that also report each one as it is recorded (progress while a job runs)."""

    def __init__(self, report: Callable[[str, float], None]):
        super().__init__()
        self._report = report

    def __setitem__(self, key: str, value: float) -> None:
        super().__setitem__(key, value)
        try:
            self._report(key, value)
        except Exception:  # a display must never break an evaluation
            log.exception("stage callback failed")


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


@dataclass
class _Verdict:
    """What a job has established so far; becomes a KernelResult at the end."""

    compiled: bool = False
    correct: bool = False
    error: StageError | None = None
    correctness: CorrectnessDetail | None = None
    runtime: TimingStats | None = None
    ref_runtime: TimingStats | None = None
    timing_note: str | None = None
    findings: list[GuardFinding] = field(default_factory=list)
    flags: list[str] = field(default_factory=list)
    compile_log: str | None = None
    environment: EnvironmentInfo | None = None
    stage_times: dict[str, float] = field(default_factory=dict)
    host_share: float | None = None
    own_kernel_share: float | None = None

    def fail(self, stage: Stage, type_: str, message: str, traceback: str | None = None) -> None:
        if self.error is None:
            self.error = StageError.make(stage, type_, message, traceback)
        self.correct = False


# ---------------------------------------------------------------------------- worker calls
def _call(worker: WorkerProcess, command: protocol.Command, expect: type[R], timeout: float, stage: Stage,
          what: str, blobs: Sequence[bytes] = ()) -> tuple[R, list]:
    """Send ``command`` and read its reply, an ``expect``; a malformed reply counts as the worker dying."""
    try:
        worker.channel.send(protocol.encode_command(command), blobs)
        header, out_blobs = worker.channel.recv(timeout)
        reply, mem = protocol.decode_reply(header, expect)
    except ChannelTimeout:
        worker.kill()
        raise StageTimeout(stage, what, timeout) from None
    except (ChannelClosed, ProtocolError, OSError) as e:
        try:
            worker.proc.wait(timeout=5)
        except Exception:
            worker.kill()
        description = worker.exit_description()
        if isinstance(e, ProtocolError):  # a worker that breaks the protocol is killed as if it had died
            description += f"; it had sent a malformed message: {e}"
        raise WorkerDied(what, description, worker.output_tail()) from None
    if mem and log.isEnabledFor(logging.DEBUG):
        log.debug("after %s: worker pid %s holds %.2f GiB allocated, %.2f GiB reserved", what, worker.proc.pid,
                  mem[0] / 2**30, mem[1] / 2**30)
    if isinstance(reply, protocol.ErrorReply):
        raise WorkerFailed(reply)
    return reply, out_blobs


def _worker_env(role: str, device: str, backend: str | None, arch: str | None,
                env_extra: Mapping[str, str] | None = None) -> dict[str, str]:
    extra: dict[str, str] = dict(env_extra or {})
    # Idle OpenMP threads must not spin: workers take turns, and CI machines are small.
    if "OMP_WAIT_POLICY" not in os.environ:
        extra["OMP_WAIT_POLICY"] = "PASSIVE"
    if device == "cpu":
        extra["CUDA_VISIBLE_DEVICES"] = ""
        if backend == "triton":
            extra["TRITON_INTERPRET"] = "1"
    if arch and "TORCH_CUDA_ARCH_LIST" not in os.environ:
        extra["TORCH_CUDA_ARCH_LIST"] = arch
    if role == "compile":
        extra["CUDA_VISIBLE_DEVICES"] = ""
        extra.setdefault("MAX_JOBS", "2")
    return scrubbed_environment(extra=extra)


def start_worker(role: str, device: str, backend: str | None = None, arch: str | None = None,
                 init: bool = True, env_extra: Mapping[str, str] | None = None,
                 confinement: Confinement | None = None) -> WorkerProcess:
    """Start a worker; with ``init`` also create its CUDA context (see :class:`_Spare` for why not always).

    ``env_extra`` adds environment variables (the compile warm-up points torch.compile's caches);
    ``confinement`` runs it in the OS sandbox (candidate and compile workers only).
    """
    if confinement is not None and role == "reference":
        raise ValueError("the reference worker runs trusted code only and is never confined")
    w = WorkerProcess(role, device, _worker_env(role, device, backend, arch, env_extra), confinement=confinement)
    try:
        header, _ = w.channel.recv(WORKER_START_TIMEOUT_S)
        msg, _ = protocol.decode_reply(header, protocol.Ready)
    except (ChannelTimeout, ChannelClosed, ProtocolError):
        tail = w.output_tail()
        w.kill()
        raise RuntimeError(f"could not start a {role} worker on {device}: {w.exit_description()}\n{tail}") from None
    if isinstance(msg, protocol.ErrorReply):
        w.kill()
        raise RuntimeError(f"{role} worker on {device} failed to start: {msg.type}: {msg.message}")
    _ = w.main_pid  # found now, while the worker runs trusted code only
    if init:
        _finish_init(w, _send_init(w))
    return w


def _send_init(w: WorkerProcess) -> float:
    w.channel.send(protocol.encode_command(protocol.Init()))
    return time.monotonic()


def _finish_init(w: WorkerProcess, sent_at: float) -> None:
    remaining = max(1.0, WORKER_START_TIMEOUT_S - (time.monotonic() - sent_at))
    try:
        header, _ = w.channel.recv(remaining)
        reply, _ = protocol.decode_reply(header, protocol.InitReply)
    except (ChannelTimeout, ChannelClosed, ProtocolError):
        tail = w.output_tail()
        w.kill()
        raise RuntimeError(f"could not initialise a {w.role} worker on {w.device}: {w.exit_description()}\n{tail}") from None
    if isinstance(reply, protocol.ErrorReply):
        w.kill()
        raise RuntimeError(f"{w.role} worker on {w.device} failed to initialise: {reply.type}: "
                           f"{reply.message}")
    w.info = reply.env or {}
    w.preloaded = list(reply.preloaded or [])


class _Spare:
    """A worker started ahead of need.

    Starting Python and importing torch happens whenever; creating the CUDA context (and starting
    the profiler) disturbs other processes' GPU timings, so it happens only when the session says
    nothing is being timed (``begin_init``), and is finished before the next timing (``finish_init``).
    """

    def __init__(self, future: Future):
        self.future = future
        self.worker: WorkerProcess | None = None
        self.init_sent: float | None = None
        self.ready = False

    def begin_init(self) -> None:
        if self.ready or self.init_sent is not None or not self.future.done():
            return
        try:
            self.worker = self.future.result()
            self.init_sent = _send_init(self.worker)
        except Exception:
            self.ready = True  # a broken spare; take() re-raises its error

    def finish_init(self) -> None:
        if self.init_sent is not None and not self.ready:
            self.ready = True
            _finish_init(self.worker, self.init_sent)

    def take(self) -> WorkerProcess:
        worker = self.future.result()
        if self.init_sent is None:
            self.worker = worker
            self.init_sent = _send_init(worker)
        self.finish_init()
        return worker

    def discard(self) -> None:
        try:
            worker = self.future.result(timeout=WORKER_START_TIMEOUT_S)
        except Exception:
            return
        if self.init_sent is not None and not self.ready:
            try:
                self.finish_init()
            except Exception:
                return
        worker.close()


# ---------------------------------------------------------------------------- sessions
def _ref_key(job: EvalJob) -> tuple:
    s = job.settings
    tol = s.tolerance
    return (job.problem.hash, job.problem.level, job.problem.problem_id, s.precision, tol.atol, tol.rtol)


class DeviceSession:
    """One device: its reference worker and the spare workers started ahead of need."""

    def __init__(self, device: str, arch: str | None = None, spares: int | None = None,
                 reference_env: Mapping[str, str] | None = None, sandbox: str = "auto", allow_network: bool = False):
        self.device = device
        self.sandbox_mode, self.allow_network = sandbox, allow_network
        # Raises SandboxUnavailable under "require" before any worker starts.
        self.confinement = confinement_for(sandbox, device.startswith("cuda"), allow_network)
        self.reference_env = dict(reference_env or {})  # extra environment for every reference worker
        self.is_cuda = device.startswith("cuda")
        self.arch = arch
        # A spare takes about 6 s to start (Python, torch, the profiler's imports) and a job about 4 s
        # on a GPU, each consuming one candidate worker: four keep a started one always waiting.
        self.depth = spares if spares is not None else (4 if self.is_cuda else 1)
        self._pool = ThreadPoolExecutor(max_workers=self.depth + 1, thread_name_prefix=f"spawn-{device}")
        self._spare_candidates: dict[str | None, list[_Spare]] = {}
        self._spare_references: list[_Spare] = []
        self.reference: WorkerProcess | None = None
        self.reference_key: tuple | None = None
        self.reference_info: dict = {}
        # While timing, the reference and candidate main threads share one reserved CPU (one per GPU),
        # so a host-bound forward sees the same host speed on both sides; everything else keeps off it.
        self.slot = int(device.split(":", 1)[1]) if self.is_cuda and ":" in device else 0
        self.cores = CoreReservation.acquire(max(1, len(visible_devices()))) if self.is_cuda else None
        self._released = not self.is_cuda
        #: The candidate worker of the job under way, so that :meth:`abort` can stop it from another thread.
        self.in_flight: WorkerProcess | None = None
        self.aborted = False

    @property
    def isolation(self) -> str:
        """What stands between candidate code and this machine: ``sandbox`` or ``process``."""
        return "sandbox" if self.confinement is not None else "process"

    def check_settings(self, settings: EvalSettings) -> None:
        if (settings.sandbox, settings.allow_network) != (self.sandbox_mode, self.allow_network):
            raise ValueError("all jobs on one device session must share the sandbox settings "
                             f"(session: sandbox={self.sandbox_mode}, allow_network={self.allow_network}; job: "
                             f"sandbox={settings.sandbox}, allow_network={settings.allow_network})")

    def _spawn(self, role: str, backend: str | None) -> _Spare:
        env = self.reference_env if role == "reference" else None
        conf = self.confinement if role == "candidate" else None
        return _Spare(self._pool.submit(start_worker, role, self.device, backend, self.arch, False, env, conf))

    def _backend_env_key(self, backend: str) -> str | None:
        # On the CPU path the Triton interpreter is switched on by the environment, so spares differ.
        return backend if (not self.is_cuda and backend == "triton") else None

    def _all_spares(self) -> list[_Spare]:
        out = [sp for lst in self._spare_candidates.values() for sp in lst]
        return out + list(self._spare_references)

    def prime(self, backend: str) -> None:
        lst = self._spare_candidates.setdefault(self._backend_env_key(backend), [])
        while len(lst) < self.depth:
            lst.append(self._spawn("candidate", backend))
        self._top_up_references()

    def _top_up_references(self) -> None:
        # Every new problem takes a fresh reference worker; keep as many ready as candidates.
        while len(self._spare_references) < self.depth:
            self._spare_references.append(self._spawn("reference", None))

    def take_reference(self, replace: bool = True) -> WorkerProcess:
        """A started, initialised reference worker (trusted code only); with ``replace``, another on its way."""
        spare = self._spare_references.pop(0) if self._spare_references else self._spawn("reference", None)
        worker = spare.take()
        if replace:
            self._top_up_references()
        return worker

    def allow_gpu_init(self) -> None:
        """Nothing is being timed now: spares that have started may create their CUDA contexts."""
        for sp in self._all_spares():
            sp.begin_init()

    def quiesce(self) -> None:
        """About to time: every CUDA context creation under way must be over first."""
        for sp in self._all_spares():
            sp.finish_init()

    def candidate_worker(self, backend: str) -> WorkerProcess:
        lst = self._spare_candidates.setdefault(self._backend_env_key(backend), [])
        spare = lst.pop(0) if lst else self._spawn("candidate", backend)
        worker = spare.take()
        self.prime(backend)
        return worker

    def reference_for(self, job: EvalJob, probe_seed: int) -> tuple[WorkerProcess, dict]:
        key = _ref_key(job)
        if self.reference is not None and self.reference_key == key and self.reference.alive():
            return self.reference, self.reference_info
        self.drop_reference()
        worker = self.take_reference()
        tol = job.settings.tolerance
        reply, _ = _call(worker, protocol.Setup(code=job.problem.code, precision=job.settings.precision,
                                                atol=tol.atol, rtol=tol.rtol, init_seed=INIT_SEED,
                                                probe_seed=probe_seed, ieee_fp32=job.settings.ieee_fp32,
                                                compile_mode=None),
                         protocol.SetupReply, job.settings.stage_timeout_s * 2, Stage.INIT, "reference setup")
        self.reference, self.reference_key = worker, key
        self.reference_info = {"stochastic": bool(reply.stochastic),
                               "nondeterministic": bool(reply.nondeterministic), "env": worker.info}
        return worker, self.reference_info

    def drop_reference(self) -> None:
        if self.reference is not None:
            self.reference.close()
        self.reference, self.reference_key = None, None

    def abort(self) -> None:
        """Stop the job under way now (Ctrl-C): kill its candidate and the reference worker, and every
        spare already started. Called from another thread; whatever the job then reports is discarded."""
        self.aborted = True
        for w in (self.in_flight, self.reference):
            if w is not None:
                w.kill()
        for sp in self._all_spares():
            sp.future.cancel()
            if sp.future.done() and not sp.future.cancelled() and sp.future.exception() is None:
                sp.future.result().kill()

    def close(self) -> None:
        self.drop_reference()
        for sp in self._all_spares():
            if self.aborted:
                sp.future.cancel()
                if sp.future.cancelled():
                    continue
            sp.discard()
        self._spare_candidates.clear()
        self._spare_references.clear()
        self._pool.shutdown(wait=False)
        if not self._released:
            self._released = True
            CoreReservation.release()


#: Weights are not secret (both sides need them and they are fixed by the problem); the seed only has
#: to be the same for Model and ModelNew.
INIT_SEED = 42


# ---------------------------------------------------------------------------- one job
def _stage_of(reply: protocol.ErrorReply, default: Stage) -> Stage:
    where = reply.where
    if reply.type in _COMPILE_ERROR_TYPES:
        return Stage.COMPILE
    mapping = {"load": Stage.LOAD, "compile": Stage.COMPILE, "init": Stage.INIT, "run": Stage.RUN,
               "time": Stage.TIMING, "profile": Stage.RUN, "launches": Stage.RUN}
    return mapping.get(where, default)


def _findings_from(reply: protocol.LoadReply | protocol.PatchReply) -> list[GuardFinding]:
    out = []
    for f in reply.findings or []:
        try:
            out.append(GuardFinding.model_validate(f))
        except Exception:
            out.append(GuardFinding(rule="malformed-report", severity="error", origin="runtime",
                                    message="the candidate process sent a malformed guard report"))
    return out


def _static_findings(source: str, backend: str) -> list[GuardFinding]:
    try:
        from kernelbench.evaluation.guards.static import analyze_source
    except ImportError:
        return []
    try:
        return list(analyze_source(source, backend).findings)
    except Exception as e:  # the guard must never take the evaluator down
        log.warning("static guard failed: %s", e)
        return [GuardFinding(rule="static-guard-error", severity="warning", origin="static",
                             message=f"static guard failed: {e}")]


def confinement_for(mode: str, gpu: bool, allow_network: bool = False) -> Confinement | None:
    """The sandbox candidate workers get under ``mode`` (None: process isolation; may raise SandboxUnavailable)."""
    support = isolation.resolve(mode, gpu, allow_network)
    if support is None or support.bwrap is None:
        return None
    root = compile_cache.base_root()
    root.mkdir(parents=True, exist_ok=True)  # bound read-only into the sandbox: it must exist first
    return Confinement(support.bwrap, allow_network, str(root))


def _publish_after_exit(worker: WorkerProcess, reply: protocol.LoadReply | protocol.ErrorReply, job: EvalJob) -> None:
    """Once the worker is gone, copy what it built into the extension cache (trusted code, hashed)."""
    builds = reply.builds
    if not builds or not isinstance(builds, list):
        return
    scope, namespace = compile_cache.source_scope(job.candidate_source), job.settings.cache_namespace

    def publish(w: WorkerProcess) -> None:
        if w.dirs is not None:
            compile_cache.publish_builds(w.dirs.build, builds, scope, namespace)

    worker.after_exit = publish


def _relayed(cand: WorkerProcess, reply: protocol.ExportReply, where: str) -> protocol.ExportReply:
    """The candidate's tensor descriptors, made openable by the reference (see WorkerProcess.relay_outputs)."""
    try:
        return replace(reply, outputs=cand.relay_outputs(reply.outputs), inputs=cand.relay_outputs(reply.inputs))
    except (ValueError, OSError) as e:
        raise WorkerFailed(protocol.ErrorReply(where=where, type="TransportError", message=str(e), traceback=None,
                                               builds=None)) from None


def _builds_log(reply: protocol.ErrorReply) -> str | None:
    events = reply.builds or []
    parts = []
    for ev in events:
        if ev.get("failed"):
            parts.append(str(ev.get("error", "")))
    return "\n".join(parts) if parts else None


def run_job(session: DeviceSession, job: EvalJob,
            on_stage: Callable[[str, float], None] | None = None) -> KernelResult:
    started = time.monotonic()
    v = _Verdict()
    if on_stage is not None:
        v.stage_times = _StageTimes(on_stage)
    s = job.settings
    try:
        _run_job(session, job, v)
    except StageTimeout as e:
        v.fail(Stage.TIMEOUT, "Timeout", f"{e} (during the {e.stage.value} stage); the worker was killed")
    except WorkerDied as e:
        v.fail(Stage.CRASH, "WorkerDied", str(e), e.tail)
    except _ReferenceBroken as e:
        session.drop_reference()
        if e.before_candidate:
            # Nothing of the candidate has run: ours entirely, evaluated again on resume.
            v.fail(Stage.INFRASTRUCTURE, "ReferenceFailed", str(e), e.traceback)
        else:
            v.fail(Stage.CRASH, "ReferenceFailed", str(e), e.traceback)
        v.flags.append("the reference itself failed; this is not a verdict on the candidate")
    except Exception as e:  # a bug of ours, a lost worker pool: never the candidate's verdict
        log.exception("evaluation of %s failed in the evaluator", job.key)
        v.fail(Stage.INFRASTRUCTURE, type(e).__name__, f"evaluator error: {e}", _format_tb(e))
        if v.error is not None and v.error.stage == Stage.INFRASTRUCTURE:
            v.flags.append(INFRASTRUCTURE_FLAG)
    env = v.environment or _environment_from(session.reference_info.get("env") if session.reference_info else None,
                                             session.device)
    env = env.model_copy(update={"isolation": session.isolation,
                                 "network": session.allow_network if session.confinement is not None else True})
    result = KernelResult(
        level=job.problem.level, problem_id=job.problem.problem_id, problem_name=job.problem.name,
        problem_hash=job.problem.hash, sample_id=job.sample_id, backend=s.backend, precision=s.precision,
        compiled=v.compiled, correct=v.correct and v.error is None, error=v.error, correctness=v.correctness,
        runtime=v.runtime, ref_runtime=v.ref_runtime, timing_note=v.timing_note,
        guard_findings=v.findings, flags=v.flags, compile_log=trim(v.compile_log, 20000), environment=env,
        wall_time_s=time.monotonic() - started, stage_times_s=dict(v.stage_times),
        host_share=v.host_share, own_kernel_share=v.own_kernel_share,
        reduced_size=dict(job.problem.reduced_size) if job.problem.reduced_size else None,
    )
    if result.runtime is not None and env.gpu_name:
        from kernelbench.roofline import check_speed_of_light

        chk = check_speed_of_light(job.problem, env.gpu_name, s.precision, result.runtime_ms)
        result.roofline = chk.info
        if chk.flag:
            result.flags.append(chk.flag)
    speed = result.speedup
    if speed is not None and speed > s.review_speedup:
        result.flags.append(f"speedup {speed:.2f}x is above the review threshold of {s.review_speedup:g}x")
    return result


class _ReferenceBroken(Exception):
    def __init__(self, message: str, traceback: str | None = None, before_candidate: bool = False):
        super().__init__(message)
        self.traceback = traceback
        self.before_candidate = before_candidate


#: The flag every infrastructure failure carries, for readers that look at flags only.
INFRASTRUCTURE_FLAG = "infrastructure failure: not a verdict on the candidate; evaluated again on resume"


def _format_tb(e: BaseException) -> str:
    import traceback as tb

    return "".join(tb.format_exception(type(e), e, e.__traceback__))


def infrastructure_result(job: EvalJob, type_: str, message: str, traceback: str | None = None) -> KernelResult:
    """The record of a job that our side failed to evaluate (never a verdict on the candidate)."""
    p = job.problem
    return KernelResult(level=p.level, problem_id=p.problem_id, problem_name=p.name, problem_hash=p.hash,
                        sample_id=job.sample_id, backend=job.settings.backend, precision=job.settings.precision,
                        error=StageError.make(Stage.INFRASTRUCTURE, type_, message, traceback),
                        flags=[INFRASTRUCTURE_FLAG])


def _environment_from(info: dict | None, device: str) -> EnvironmentInfo:
    info = dict(info or {})
    info.setdefault("device", device)
    return EnvironmentInfo.model_validate(info)


def _ref_call(worker: WorkerProcess, command: protocol.Command, expect: type[R], timeout: float, what: str,
              blobs: Sequence[bytes] = ()) -> tuple[R, list]:
    try:
        return _call(worker, command, expect, timeout, Stage.CRASH, what, blobs)
    except WorkerFailed as e:
        r = e.reply
        raise _ReferenceBroken(f"reference failed during {what}: {r.type}: {r.message}",
                               r.traceback) from None
    except (WorkerDied, StageTimeout) as e:
        raise _ReferenceBroken(f"reference worker failed during {what}: {e}") from None


def _run_job(session: DeviceSession, job: EvalJob, v: _Verdict) -> None:
    s = job.settings
    source = job.candidate_source
    if not session.is_cuda and s.backend == "cuda":
        v.fail(Stage.COMPILE, "NoGPU", "CUDA candidates need an NVIDIA GPU; this evaluation runs on the CPU "
                                       "(use a GPU machine, or --runner modal)")
        return
    try:
        ast.parse(source)
    except SyntaxError as e:
        v.fail(Stage.LOAD, "SyntaxError", f"line {e.lineno}: {e.msg}")
        return
    static = _static_findings(source, s.backend) if s.static_guard else []
    v.findings.extend(static)
    if any(f.severity == "error" for f in static):
        bad = "; ".join(f"line {f.line}: {f.rule}: {f.message}" for f in static if f.severity == "error")
        v.fail(Stage.GUARD, "StaticGuard", f"the static guard refused the candidate: {bad}")
        return

    secret = s.seed_secret or seedlib.new_secret()
    session.allow_gpu_init()
    t0 = time.monotonic()
    try:
        ref, ref_info = session.reference_for(job, seedlib.derive_seed(secret, "probe"))
    except WorkerFailed as e:
        r = e.reply
        raise _ReferenceBroken(f"the reference could not be set up: {r.type}: {r.message}",
                               r.traceback, before_candidate=True) from None
    except (WorkerDied, StageTimeout, RuntimeError) as e:
        raise _ReferenceBroken(f"the reference could not be set up: {e}", before_candidate=True) from None
    v.environment = _environment_from(ref_info.get("env"), session.device)
    v.stage_times["reference_setup"] = time.monotonic() - t0
    if ref_info.get("stochastic"):
        v.flags.append("the reference is random (e.g. dropout): both models were evaluated in eval() mode")
    if ref_info.get("nondeterministic"):
        v.flags.append("the reference is not deterministic even in eval() mode; correctness may be unreliable")

    t0 = time.monotonic()
    cand = session.candidate_worker(s.backend)
    session.in_flight = cand
    v.stage_times["candidate_start"] = time.monotonic() - t0
    try:
        _run_candidate(session, job, v, ref, cand, secret, bool(ref_info.get("stochastic")))
    finally:
        session.in_flight = None
        cand.kill()


def _run_candidate(session: DeviceSession, job: EvalJob, v: _Verdict, ref: WorkerProcess, cand: WorkerProcess,
                   secret: bytes, eval_mode: bool) -> None:
    s = job.settings
    tol = s.tolerance
    # ---- load: import the candidate (building its kernels) and construct ModelNew
    t0 = time.monotonic()
    try:
        reply, _ = _call(cand, protocol.Load(problem_code=job.problem.code, source=job.candidate_source,
                                             backend=s.backend, precision=s.precision, init_seed=INIT_SEED,
                                             eval_mode=eval_mode, cache_namespace=s.cache_namespace,
                                             cache_scope=compile_cache.source_scope(job.candidate_source),
                                             ieee_fp32=s.ieee_fp32),
                         protocol.LoadReply, s.compile_timeout_s, Stage.COMPILE, "candidate import and compilation")
        _publish_after_exit(cand, reply, job)
    except WorkerFailed as e:
        r = e.reply
        _publish_after_exit(cand, r, job)
        stage = _stage_of(r, Stage.LOAD)
        v.compiled = stage == Stage.INIT
        v.compile_log = _builds_log(r) if stage == Stage.COMPILE else None
        v.fail(stage, str(r.type), str(r.message), r.traceback)
        return
    finally:
        v.stage_times["load"] = time.monotonic() - t0
    v.compiled = True
    v.findings.extend(_findings_from(reply))
    if reply.threads_started > 0:
        v.findings.append(GuardFinding(rule="thread-started", severity="warning", origin="runtime",
                                       message=f"importing the candidate started {reply.threads_started} thread(s)"))
    if any(f.severity == "error" for f in v.findings):
        v.fail(Stage.GUARD, "RuntimeGuard", "; ".join(f.message for f in v.findings if f.severity == "error"))
        return

    # ---- correctness on fresh inputs per trial
    t0 = time.monotonic()
    detail = CorrectnessDetail(atol=tol.atol, rtol=tol.rtol)
    v.correctness = detail
    for k in range(s.correctness_trials):
        seed = seedlib.derive_seed(secret, "correct", k)
        fwd = seedlib.derive_seed(secret, "forward", k)
        _ref_call(ref, protocol.Run(seed=seed, fwd_seed=fwd, slot=k, poison=False), protocol.DoneReply,
                  s.stage_timeout_s, f"reference run of trial {k + 1}")
        try:
            creply, cblobs = _call(cand, protocol.Run(seed=seed, fwd_seed=fwd, slot=None, poison=True),
                                   protocol.ExportReply, s.stage_timeout_s, Stage.RUN, f"correctness trial {k + 1}")
            creply = _relayed(cand, creply, "run")
        except WorkerFailed as e:
            r = e.reply
            stage = _stage_of(r, Stage.RUN)
            if stage == Stage.COMPILE:
                v.compiled = False
            v.fail(stage, str(r.type), str(r.message), r.traceback)
            detail.trials_run = k + 1
            return
        detail.trials_run = k + 1
        comp, _ = _ref_call(ref, protocol.Compare(slot=k, tree=creply.tree, outputs=creply.outputs,
                                                  inputs=creply.inputs),
                            protocol.CompareReply, s.stage_timeout_s, f"comparison of trial {k + 1}", cblobs)
        _call(cand, protocol.Release(), protocol.DoneReply, s.stage_timeout_s, Stage.RUN, "release")
        if comp.max_abs is not None:
            detail.max_abs_error = max(detail.max_abs_error or 0.0, float(comp.max_abs))
            detail.max_rel_error = max(detail.max_rel_error or 0.0, float(comp.max_rel or 0.0))
        if creply.threads_started > 0:
            v.findings.append(GuardFinding(
                rule="thread-running", severity="warning", origin="runtime",
                message=f"{creply.threads_started} extra thread(s) alive after forward returned; "
                        "outputs were snapshotted at return"))
        if not comp.passed:
            detail.first_failure = f"trial {k + 1}: {comp.reason}"
            v.fail(Stage.CORRECTNESS, "InputsModified" if comp.inputs_modified else "WrongOutput",
                   detail.first_failure)
            return
        detail.trials_passed = k + 1
    v.stage_times["correctness"] = time.monotonic() - t0
    v.correct = True

    # ---- timing
    if not s.measure_timing:
        v.timing_note = "timing not requested"
    elif not session.is_cuda:
        v.timing_note = "not measured: no GPU (CPU path checks correctness only)"
    else:
        t0 = time.monotonic()
        session.quiesce()
        # Waiting for spare workers to finish creating their CUDA contexts, part of "timing".
        v.stage_times["spare_wait"] = time.monotonic() - t0
        try:
            with pinned(session.cores, session.slot, ref.main_pid, cand.main_pid):
                _time(job, v, ref, cand, secret)
        except WorkerFailed as e:
            r = e.reply
            v.fail(_stage_of(r, Stage.TIMING), str(r.type), str(r.message), r.traceback)
        v.stage_times["timing"] = time.monotonic() - t0
        session.allow_gpu_init()
        if v.error is not None:
            return

    # ---- runtime guards: whose kernels ran, and where. After timing, so that the profiler's
    # state (CUPTI) never differs between the candidate's and the reference's timed calls.
    t0 = time.monotonic()
    own = rt.own_kernel_names(job.candidate_source)
    seed = seedlib.derive_seed(secret, "profile")
    fwd = seedlib.derive_seed(secret, "forward-profile")
    try:
        if session.is_cuda:
            prof, _ = _call(cand, protocol.Profile(seed=seed, fwd_seed=fwd), protocol.ProfileReply,
                            s.stage_timeout_s, Stage.RUN, "profiled run")
            report = rt.classify_launches(prof.kernels or [], own, prof.marker_stream)
            v.findings.extend(rt.launch_findings(report, s.backend))
            v.own_kernel_share = report.own_share
            host_us, busy_us = prof.host_enqueue_us, prof.gpu_busy_us
            if isinstance(host_us, (int, float)) and isinstance(busy_us, (int, float)):
                v.host_share = host_share(float(host_us), float(busy_us))
            v.findings.extend(rt.output_provenance_findings(prof, report))
        elif s.backend == "triton":
            lr, _ = _call(cand, protocol.Launches(seed=seed, fwd_seed=fwd), protocol.LaunchesReply,
                          s.stage_timeout_s, Stage.RUN, "launch count")
            launches = lr.launches or {}
            kernels = [{"name": n, "stream": None, "dur_us": 0.0} for n, c in launches.items() if c]
            report = rt.classify_launches(kernels, own or set(launches), None)
            v.findings.extend(rt.launch_findings(report, s.backend))
            v.findings.extend(rt.output_provenance_findings(lr, report))
    except WorkerFailed as e:
        r = e.reply
        v.fail(_stage_of(r, Stage.RUN), str(r.type), str(r.message), r.traceback)
        return
    v.stage_times["launch_trace"] = time.monotonic() - t0
    if any(f.severity == "error" for f in v.findings):
        v.fail(Stage.GUARD, "RuntimeGuard", "; ".join(f.message for f in v.findings if f.severity == "error"))
        return

    # ---- anything patched while running?
    pr, _ = _call(cand, protocol.CheckPatches(when="while running"), protocol.PatchReply, s.stage_timeout_s,
                  Stage.RUN, "patch check")
    late = _findings_from(pr)
    v.findings.extend(late)
    if any(f.severity == "error" for f in late):
        v.fail(Stage.GUARD, "RuntimeGuard", "; ".join(f.message for f in late if f.severity == "error"))


def _time(job: EvalJob, v: _Verdict, ref: WorkerProcess, cand: WorkerProcess, secret: bytes) -> None:
    s = job.settings
    limit = s.stage_timeout_s + s.timing_budget_s * 2
    wseeds = [seedlib.derive_seed(secret, "warm", i) for i in range(4)]
    wfwd = [seedlib.derive_seed(secret, "warm-forward", i) for i in range(4)]
    warm = {}
    for side, w in (("reference", ref), ("candidate", cand)):
        call = _ref_call if side == "reference" else (
            lambda w, m, e, t, what: _call(w, m, e, t, Stage.TIMING, what))
        reply, _ = call(w, protocol.Time(seeds=wseeds, fwd_seeds=wfwd, warmup=True, fingerprint=False),
                        protocol.TimeReply, limit, f"{side} warm-up")
        warm[side] = reply
    per_call = max(warm[k].wall_s / max(1, warm[k].calls) for k in warm)
    n = block_size(per_call)
    rule = StopRule(s.target_rse, s.min_timing_trials, s.max_timing_trials, s.timing_budget_s, MIN_ROUNDS,
                    max_half_width=IMPRECISE_HALF_WIDTH, extension=s.timing_extension)
    samples: dict[str, list[float]] = {"reference": [], "candidate": []}
    drained: dict[str, list[float]] = {"reference": [], "candidate": []}
    spent = {"reference": 0.0, "candidate": 0.0}
    rounds = 0
    stop_reason = ""
    while True:
        seeds = [seedlib.derive_seed(secret, "time", rounds, i) for i in range(n)]
        fwds = [seedlib.derive_seed(secret, "time-forward", rounds, i) for i in range(n)]
        replies = {}
        for side in block_order(rounds):
            msg = protocol.Time(seeds=seeds, fwd_seeds=fwds, warmup=False, fingerprint=True)
            if side == "reference":
                reply, _ = _ref_call(ref, msg, protocol.TimeReply, limit, "reference timing")
            else:
                reply, _ = _call(cand, msg, protocol.TimeReply, limit, Stage.TIMING, "candidate timing")
            replies[side] = reply
            samples[side].extend(float(x) for x in reply.times_ms)
            drained[side].extend(float(x) for x in reply.drained_ms)
            spent[side] += float(reply.wall_s)
        rfp, rb, cfp = replies["reference"].fingerprints, replies["reference"].bounds, \
            replies["candidate"].fingerprints
        for i in range(min(len(rfp), len(cfp))):
            if not fingerprints_match(cfp[i], rfp[i], rb[i]):
                v.fail(Stage.TIMING, "TimedOutputMismatch",
                       f"an output produced during timing (round {rounds + 1}, call {i + 1}) does not match the "
                       f"reference for the same inputs: the kernel behaves differently when timed")
                return
        if len(rfp) != len(cfp):
            v.fail(Stage.TIMING, "TimedOutputMismatch", "the candidate returned a different number of timed outputs")
            return
        rounds += 1
        stop, stop_reason = should_stop(rule, samples["candidate"], samples["reference"], spent["candidate"],
                                        spent["reference"], rounds, block_calls=n)
        if stop:
            break
    # The very last timed call is also checked element by element.
    exp, eblobs = _call(cand, protocol.ExportLast(), protocol.ExportReply, s.stage_timeout_s, Stage.TIMING,
                        "export of the last timed output")
    exp = _relayed(cand, exp, "time")
    comp, _ = _ref_call(ref, protocol.Compare(slot="last", tree=exp.tree, outputs=exp.outputs, inputs=exp.inputs),
                        protocol.CompareReply, s.stage_timeout_s, "check of the last timed output", eblobs)
    _call(cand, protocol.Release(), protocol.DoneReply, s.stage_timeout_s, Stage.TIMING, "release")
    if v.correctness is not None:
        v.correctness.timed_outputs_checked = len(samples["candidate"])
    if not comp.passed:
        v.fail(Stage.TIMING, "TimedOutputMismatch", f"the last timed output is wrong: {comp.reason}")
        return
    suspicious, excess = side_stream_gap_suspicious(samples["candidate"], drained["candidate"],
                                                    samples["reference"], drained["reference"])
    if suspicious:
        v.findings.append(GuardFinding(
            rule="side-stream", severity="error", origin="runtime",
            message=f"work continued {excess:.3f} ms (median) after the timed stream finished: computation hidden "
                    "on another stream or thread"))
        v.fail(Stage.GUARD, "RuntimeGuard", v.findings[-1].message)
        return
    v.runtime = TimingStats(samples_ms=samples["candidate"], warmup_calls=int(warm["candidate"].calls),
                            block_calls=n)
    v.ref_runtime = TimingStats(samples_ms=samples["reference"], warmup_calls=int(warm["reference"].calls),
                                block_calls=n)
    v.timing_note = f"{len(samples['candidate'])} timed calls per side in {rounds} rounds; stopped: {stop_reason}"


# ---------------------------------------------------------------------------- reference only
#: Baseline modes and how the reference is compiled for each (None: eager PyTorch).
COMPILE_MODES: dict[str, str | None] = {
    "eager": None,
    "compile-default": "default",
    "compile-max-autotune": "max-autotune",
    "compile-cudagraphs": "cudagraphs",
}


@dataclass
class ReferenceTiming:
    """The reference's runtime in one mode, measured with the evaluator's timing protocol."""

    mode: str
    timing: TimingStats
    environment: EnvironmentInfo
    note: str
    setup_s: float
    #: Compile modes: seconds of the first (compiling) call, and Inductor's cache hits and misses in it.
    compile_s: float | None = None
    compile_cache: dict[str, int] | None = None


def reference_setup_message(problem, mode: str, settings: EvalSettings, secret: bytes) -> protocol.Setup:
    """The reference worker's ``setup`` for one baseline mode: builds (and, for compile modes, compiles) Model.

    Shared by the timed measurement and the compile warm-up, which must compile the very same graph.
    """
    tol = settings.tolerance
    return protocol.Setup(code=problem.code, precision=settings.precision, atol=tol.atol, rtol=tol.rtol,
                          init_seed=INIT_SEED, probe_seed=seedlib.derive_seed(secret, "probe"),
                          ieee_fp32=settings.ieee_fp32, compile_mode=COMPILE_MODES[mode])


def measure_reference(session: DeviceSession, problem, mode: str = "eager",
                      settings: EvalSettings | None = None, *, allow_cpu: bool = False,
                      start_next: bool = False) -> ReferenceTiming:
    """Time a problem's reference alone (no candidate): warm-up, fresh inputs per call, L2 flushed,
    all streams drained, adaptive stopping on the median's relative standard error.

    ``allow_cpu`` permits a CPU session (tests, and callers that follow ``EvalSettings.device``);
    ``start_next`` starts the next call's worker now, so a long series of measurements does not
    wait for Python and torch to start each time (it creates its CUDA context only between timings).
    """
    if mode not in COMPILE_MODES:
        raise ValueError(f"unknown baseline mode {mode!r} (choose from {', '.join(COMPILE_MODES)})")
    if not session.is_cuda and not allow_cpu:
        raise RuntimeError("baselines are GPU timings; no GPU is visible")
    s = settings or EvalSettings(backend="torch")
    secret = s.seed_secret or seedlib.new_secret()
    session.allow_gpu_init()
    t0 = time.monotonic()
    worker = session.take_reference(replace=start_next)
    try:
        setup_timeout = s.compile_timeout_s if COMPILE_MODES[mode] else s.stage_timeout_s * 2
        setup, _ = _ref_call(worker, reference_setup_message(problem, mode, s, secret), protocol.SetupReply,
                             setup_timeout, f"{mode} setup")
        setup_s = time.monotonic() - t0
        session.quiesce()
        with pinned(session.cores, session.slot, worker.main_pid, None):
            limit = s.stage_timeout_s + s.timing_budget_s * 2
            wseeds = [seedlib.derive_seed(secret, "warm", i) for i in range(4)]
            warm, _ = _ref_call(worker, protocol.Time(seeds=wseeds, fwd_seeds=wseeds, warmup=True, fingerprint=False),
                                protocol.TimeReply, limit, f"{mode} warm-up")
            n = block_size(warm.wall_s / max(1, warm.calls))
            rule = StopRule(s.target_rse, s.min_timing_trials, s.max_timing_trials, s.timing_budget_s)
            samples: list[float] = []
            spent = 0.0
            rounds = 0
            while True:
                seeds = [seedlib.derive_seed(secret, "time", rounds, i) for i in range(n)]
                reply, _ = _ref_call(worker, protocol.Time(seeds=seeds, fwd_seeds=seeds, warmup=False, fingerprint=False),
                                     protocol.TimeReply, limit, f"{mode} timing")
                samples.extend(float(x) for x in reply.times_ms)
                spent += float(reply.wall_s)
                rounds += 1
                stop, why = should_stop(rule, samples, samples, spent, spent)
                if stop:
                    break
        return ReferenceTiming(mode=mode, timing=TimingStats(samples_ms=samples, warmup_calls=int(warm.calls)),
                               environment=_environment_from(worker.info, session.device),
                               note=f"{len(samples)} timed calls in {rounds} rounds; stopped: {why}", setup_s=setup_s,
                               compile_s=setup.compile_s, compile_cache=setup.compile_cache or None)
    finally:
        worker.close()
        session.allow_gpu_init()


class Evaluator:
    """Keeps device sessions (reference worker, spare workers) alive across calls.

    For long-lived hosts that receive jobs one at a time (a Modal container): the second job for
    the same problem reuses the reference worker, and every candidate finds a spare ready.
    """

    def __init__(self, devices: Sequence[str] | None = None, sandbox: str = "auto", allow_network: bool = False):
        self.devices = list(devices) if devices else visible_devices()
        self.sandbox, self.allow_network = sandbox, allow_network
        self._sessions: dict[str, DeviceSession] = {}
        self._lock = threading.Lock()
        self._arch = gpu_compute_capability_from_smi() if any(d.startswith("cuda") for d in self.devices) else None

    def session(self, device: str | None = None) -> DeviceSession:
        device = device or self.devices[0]
        with self._lock:
            if device not in self._sessions:
                self._sessions[device] = DeviceSession(device, self._arch, sandbox=self.sandbox,
                                                       allow_network=self.allow_network)
            return self._sessions[device]

    def evaluate(self, job: EvalJob) -> KernelResult:
        session = self.session(job.settings.device)
        session.check_settings(job.settings)
        session.prime(job.settings.backend)
        return run_job(session, job)

    def close(self) -> None:
        with self._lock:
            for s in self._sessions.values():
                s.close()
            self._sessions.clear()

    def __enter__(self) -> Evaluator:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


# ---------------------------------------------------------------------------- batches
def visible_devices() -> list[str]:
    try:
        import torch

        n = torch.cuda.device_count()
    except Exception:
        n = 0
    return [f"cuda:{i}" for i in range(n)] if n else ["cpu"]


def _compile_job(job: EvalJob, arch: str | None, confinement: Confinement | None = None,
                 stop: _BatchStop | None = None) -> protocol.LoadReply | protocol.ErrorReply:
    """Import a CUDA candidate once on the CPU so its extension is in the cache before the GPU needs it."""
    w = None
    try:
        if stop is not None and stop.is_set():
            return _compile_error("the batch was interrupted")
        w = start_worker("compile", "cuda:0", job.settings.backend, arch, init=False, confinement=confinement)
        if stop is not None:
            stop.track(w)
        # ieee_fp32 and eval_mode as the compile worker has always had them: off (it builds, it never runs).
        reply, _ = _call(w, protocol.Load(problem_code=job.problem.code, source=job.candidate_source,
                                          backend=job.settings.backend, precision=job.settings.precision,
                                          init_seed=0, eval_mode=False, cache_namespace=job.settings.cache_namespace,
                                          cache_scope=compile_cache.source_scope(job.candidate_source),
                                          ieee_fp32=False),
                         protocol.LoadReply, job.settings.compile_timeout_s, Stage.COMPILE, "compilation")
        _publish_after_exit(w, reply, job)
        return reply
    except WorkerFailed as e:
        _publish_after_exit(w, e.reply, job)
        return e.reply
    except Exception as e:
        return _compile_error(str(e))
    finally:
        if w is not None:
            w.kill()
            if stop is not None:
                stop.untrack(w)


def _compile_error(message: str) -> protocol.ErrorReply:
    """A build ahead that never reached a worker's reply (nothing reads more than ``ok`` of it)."""
    return protocol.ErrorReply(where="compile", type="CompileAheadFailed", message=message, traceback=None, builds=None)


class _BatchStop:
    """A batch's interrupt: set once (Ctrl-C), it stops handing out jobs and kills the workers in flight.

    Sessions and compile workers are tracked so the main thread can kill them while the device threads
    are blocked waiting on a worker; the device threads then discard what their jobs report.
    """

    def __init__(self) -> None:
        self._event = threading.Event()
        self._lock = threading.Lock()
        self._sessions: list[DeviceSession] = []
        self._workers: set[WorkerProcess] = set()

    def is_set(self) -> bool:
        return self._event.is_set()

    def add_session(self, session: DeviceSession) -> None:
        with self._lock:
            self._sessions.append(session)
            late = self._event.is_set()
        if late:
            session.abort()

    def track(self, w: WorkerProcess) -> None:
        with self._lock:
            self._workers.add(w)
            late = self._event.is_set()
        if late:
            w.kill()

    def untrack(self, w: WorkerProcess) -> None:
        with self._lock:
            self._workers.discard(w)

    def trigger(self) -> None:
        with self._lock:
            self._event.set()
            sessions, workers = list(self._sessions), list(self._workers)
        for session in sessions:
            try:
                session.abort()
            except Exception:
                log.exception("could not abort the session on %s", session.device)
        for w in workers:
            w.kill()


class _Scheduler:
    """Hands jobs to device threads, preferring the problem a device's reference already holds."""

    def __init__(self, jobs: Sequence[EvalJob], compiled: dict[int, Future], stop: _BatchStop | None = None):
        self.pending = list(range(len(jobs)))
        self.jobs = jobs
        self.compiled = compiled
        self.stop = stop
        self.cv = threading.Condition()

    def _ready(self, i: int) -> bool:
        f = self.compiled.get(i)
        return f is None or f.done()

    def take(self, session: DeviceSession) -> int | None:
        with self.cv:
            while self.pending and not (self.stop is not None and self.stop.is_set()):
                ready = [i for i in self.pending if self._ready(i)]
                if ready:
                    same = [i for i in ready if _ref_key(self.jobs[i]) == session.reference_key]
                    i = (same or ready)[0]
                    self.pending.remove(i)
                    return i
                self.cv.wait(timeout=0.5)
            return None


def evaluate_batch(jobs: Sequence[EvalJob], devices: Sequence[str] | None = None,
                   on_result: ResultCallback | None = None, progress: bool = True,
                   compile_workers: int | None = None, on_stage: StageCallback | None = None) -> list[KernelResult]:
    """Evaluate many jobs over the local devices; results in job order, ``on_result`` as each finishes.

    ``on_stage`` hears of each stage of each job as it finishes, so a display need not wait for whole jobs.
    """
    jobs = list(jobs)
    if not jobs:
        return []
    pinned = {j.settings.device for j in jobs if j.settings.device}
    if devices is None:
        devices = sorted(pinned) if pinned else visible_devices()
    devices = list(devices)
    use_gpu = any(d.startswith("cuda") for d in devices)
    modes = {(j.settings.sandbox, j.settings.allow_network) for j in jobs}
    if len(modes) > 1:
        raise ValueError(f"the jobs of one batch must share the sandbox settings; got {sorted(modes)}")
    sandbox_mode, allow_network = modes.pop()
    # Once for the batch: warns or (under "require") raises SandboxUnavailable before anything runs.
    confinement = confinement_for(sandbox_mode, use_gpu, allow_network)
    arch = gpu_compute_capability_from_smi() if use_gpu else None

    compiled: dict[int, Future] = {}
    compile_pool = None
    stop = _BatchStop()
    # The first job of each device starts at once (and builds in its worker); every later CUDA job is
    # built ahead on the CPU, wherever it sits in the list, while the GPUs evaluate what is ready.
    build_ahead = [i for i, j in enumerate(jobs) if j.settings.backend == "cuda" and i >= len(devices)]
    if use_gpu and build_ahead:
        n = compile_workers or max(1, min(len(build_ahead), os.cpu_count() or 1))
        compile_pool = ThreadPoolExecutor(max_workers=n, thread_name_prefix="compile")
        for i in build_ahead:
            compiled[i] = compile_pool.submit(_compile_job, jobs[i], arch, confinement, stop)

    results: list[KernelResult | None] = [None] * len(jobs)
    scheduler = _Scheduler(jobs, compiled, stop)
    lock = threading.Lock()
    bar = None
    if progress:
        from tqdm import tqdm

        bar = tqdm(total=len(jobs), desc="evaluating", unit="kernel", file=sys.stderr)

    def device_loop(device: str) -> None:
        try:
            session = DeviceSession(device, arch, sandbox=sandbox_mode, allow_network=allow_network)
        except Exception as e:  # no session, no evaluation: every job this thread would take is ours to redo
            log.exception("could not open a session on %s", device)
            session_error[device] = e
            return
        stop.add_session(session)
        try:
            session.prime(jobs[0].settings.backend)
            while True:
                i = scheduler.take(session)
                if i is None:
                    return
                job = jobs[i]
                try:
                    report = None if on_stage is None else (lambda st, sec, i=i: on_stage(i, st, sec))
                    result = run_job(session, job, on_stage=report)
                except Exception as e:  # a bug of ours must not lose the batch, nor become a verdict
                    log.exception("evaluation of %s failed", job.key)
                    result = infrastructure_result(job, type(e).__name__, f"evaluator error: {e}", _format_tb(e))
                if stop.is_set():
                    # Interrupted: whatever the job reported was caused by the interrupt, not the candidate.
                    return
                with lock:
                    results[i] = result
                    if on_result is not None:
                        try:
                            on_result(i, result)
                        except Exception:
                            log.exception("result callback failed for %s", job.key)
                    if bar is not None:
                        bar.update(1)
                        bar.set_postfix_str(f"{job.key}: {result.verdict()}")
        finally:
            session.close()

    session_error: dict[str, Exception] = {}
    threads = [threading.Thread(target=device_loop, args=(d,), name=f"device-{d}") for d in devices]
    try:
        for t in threads:
            t.start()
        for t in threads:
            while t.is_alive():
                t.join(timeout=0.2)  # a bare join() would not let Ctrl-C in until the thread ended
    except BaseException:
        # Ctrl-C (or any exit of the caller's): stop handing out jobs, kill the workers in flight, and
        # let no result of a job in flight reach on_result. Only real verdicts were recorded.
        stop.trigger()
        if compile_pool is not None:
            compile_pool.shutdown(wait=False, cancel_futures=True)
        deadline = time.monotonic() + INTERRUPT_GRACE_S
        for t in threads:
            t.join(timeout=max(0.0, deadline - time.monotonic()))
        if bar is not None:
            bar.close()
        raise
    if compile_pool is not None:
        compile_pool.shutdown(wait=False, cancel_futures=True)
    if session_error and scheduler.pending:
        # No device could take these jobs: our failure, recorded as such (never a verdict).
        why = "; ".join(f"{d}: {type(e).__name__}: {e}" for d, e in session_error.items())
        for i in list(scheduler.pending):
            result = infrastructure_result(jobs[i], "SessionFailed", f"evaluator error: no device session ({why})")
            results[i] = result
            if on_result is not None:
                try:
                    on_result(i, result)
                except Exception:
                    log.exception("result callback failed for %s", jobs[i].key)
    if bar is not None:
        bar.close()
    return [r for r in results if r is not None]


def evaluate(job: EvalJob, device: str | None = None) -> KernelResult:
    """Evaluate one candidate against one problem."""
    devices = [device] if device else ([job.settings.device] if job.settings.device else None)
    return evaluate_batch([job], devices=devices, progress=False)[0]


__all__ = ["COMPILE_MODES", "EvalJob", "EvalSettings", "Evaluator", "ReferenceTiming", "evaluate", "evaluate_batch",
           "measure_reference", "run_job", "visible_devices"]
