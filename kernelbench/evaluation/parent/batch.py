"""Running jobs: a batch over the local devices, or one job at a time on a long-lived host.

A batch gives each device a thread and a session; a scheduler hands it jobs, preferring the problem
its reference worker already holds. CUDA candidates past the first of each device are built ahead
on all CPU cores (compile workers fill the extension cache) while the GPUs evaluate what is ready.
Ctrl-C stops handing out jobs, kills the workers in flight and lets no result of a job in flight
through: only real verdicts are reported.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor

from kernelbench.backends import get_backend
from kernelbench.evaluation import compile_cache, protocol
from kernelbench.evaluation.environment import gpu_compute_capability_from_smi
from kernelbench.evaluation.parent.costs_ahead import start_costs_ahead
from kernelbench.evaluation.parent.job import run_job
from kernelbench.evaluation.parent.session import DeviceSession, reference_key, visible_devices
from kernelbench.evaluation.parent.verdict import format_tb, infrastructure_result
from kernelbench.evaluation.parent.workers import (
    WorkerFailed,
    call,
    confinement_for,
    publish_after_exit,
    start_worker,
)
from kernelbench.evaluation.sandbox import Confinement, WorkerProcess
from kernelbench.evaluation.settings import EvalJob
from kernelbench.results import KernelResult, Stage

log = logging.getLogger(__name__)

#: Seconds an interrupted batch waits for its device threads to notice before re-raising the interrupt.
INTERRUPT_GRACE_S = 10.0
ResultCallback = Callable[[int, KernelResult], None]
#: ``(job index, stage name, seconds)`` as each stage of a job finishes, for progress displays.
StageCallback = Callable[[int, str, float], None]


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


def evaluate(job: EvalJob, device: str | None = None) -> KernelResult:
    """Evaluate one candidate against one problem."""
    devices = [device] if device else ([job.settings.device] if job.settings.device else None)
    return evaluate_batch([job], devices=devices, progress=False)[0]


def evaluate_batch(jobs: Sequence[EvalJob], devices: Sequence[str] | None = None,
                   on_result: ResultCallback | None = None, progress: bool = True,
                   compile_workers: int | None = None, on_stage: StageCallback | None = None) -> list[KernelResult]:
    """Evaluate many jobs over the local devices; results in job order, ``on_result`` as each finishes.

    ``on_stage`` hears of each stage of each job as it finishes, so a display need not wait for whole jobs.
    """
    jobs = list(jobs)
    if not jobs:
        return []
    batch = _Batch(jobs, devices, compile_workers, on_result, on_stage, progress)
    batch.run()
    return [r for r in batch.results if r is not None]


# ---------------------------------------------------------------------------- building ahead
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
        reply, _ = call(w, protocol.Load(problem_code=job.problem.code, source=job.candidate_source,
                                         backend=job.settings.backend,
                                         record_launches=get_backend(job.settings.backend).records_launches,
                                         precision=job.settings.precision,
                                         init_seed=0, eval_mode=False, cache_namespace=job.settings.cache_namespace,
                                         cache_scope=compile_cache.source_scope(job.candidate_source),
                                         ieee_fp32=False),
                        protocol.LoadReply, job.settings.compile_timeout_s, Stage.COMPILE, "compilation")
        publish_after_exit(w, reply, job)
        return reply
    except WorkerFailed as e:
        publish_after_exit(w, e.reply, job)
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


# ---------------------------------------------------------------------------- a batch
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
                    same = [i for i in ready if reference_key(self.jobs[i]) == session.reference_key]
                    i = (same or ready)[0]
                    self.pending.remove(i)
                    return i
                self.cv.wait(timeout=0.5)
            return None


class _Batch:
    """One call of :func:`evaluate_batch`: its devices, builds ahead, scheduler, results and interrupt."""

    def __init__(self, jobs: list[EvalJob], devices: Sequence[str] | None, compile_workers: int | None,
                 on_result: ResultCallback | None, on_stage: StageCallback | None, progress: bool):
        self.jobs, self.on_result, self.on_stage = jobs, on_result, on_stage
        named = {j.settings.device for j in jobs if j.settings.device}
        if devices is None:
            devices = sorted(named) if named else visible_devices()
        self.devices = list(devices)
        use_gpu = any(d.startswith("cuda") for d in self.devices)
        modes = {(j.settings.sandbox, j.settings.allow_network) for j in jobs}
        if len(modes) > 1:
            raise ValueError(f"the jobs of one batch must share the sandbox settings; got {sorted(modes)}")
        self.sandbox_mode, self.allow_network = modes.pop()
        pins = {j.settings.pin_cpus for j in jobs}
        if len(pins) > 1:
            raise ValueError("the jobs of one batch must share pin_cpus (one CPU reservation per GPU session)")
        self.pin_cpus = pins.pop() if pins else None
        # Once for the batch: warns or (under "require") raises SandboxUnavailable before anything runs.
        confinement = confinement_for(self.sandbox_mode, use_gpu, self.allow_network)
        self.arch = gpu_compute_capability_from_smi() if use_gpu else None
        self.stop = _BatchStop()
        self.compile_pool: ThreadPoolExecutor | None = None
        compiled = self._build_ahead(use_gpu, confinement, compile_workers)
        # The speed-of-light check after each timed result needs its problem's cost: counted ahead, in
        # the order the jobs are listed, so that the GPU does not wait for it (only timed results have it).
        timed = use_gpu and any(j.settings.measure_timing for j in jobs)
        self.costs_ahead = start_costs_ahead(j.problem for j in jobs) if timed else None
        self.results: list[KernelResult | None] = [None] * len(jobs)
        self.scheduler = _Scheduler(jobs, compiled, self.stop)
        self.lock = threading.Lock()
        self.bar = None
        if progress:
            from kernelbench.progress import progress_bar

            self.bar = progress_bar(total=len(jobs), desc="evaluating", unit="kernel")
        self.session_error: dict[str, Exception] = {}

    def _build_ahead(self, use_gpu: bool, confinement: Confinement | None,
                     compile_workers: int | None) -> dict[int, Future]:
        # The first job of each device starts at once (and builds in its worker); every later job whose
        # backend builds ahead (CUDA extensions) is built on the CPU, wherever it sits in the list, while
        # the GPUs evaluate what is ready.
        compiled: dict[int, Future] = {}
        build_ahead = [i for i, j in enumerate(self.jobs)
                       if get_backend(j.settings.backend).builds_ahead and i >= len(self.devices)]
        if use_gpu and build_ahead:
            n = compile_workers or max(1, min(len(build_ahead), os.cpu_count() or 1))
            self.compile_pool = ThreadPoolExecutor(max_workers=n, thread_name_prefix="compile")
            for i in build_ahead:
                compiled[i] = self.compile_pool.submit(_compile_job, self.jobs[i], self.arch, confinement, self.stop)
        return compiled

    def run(self) -> None:
        threads = [threading.Thread(target=self._device_loop, args=(d,), name=f"device-{d}") for d in self.devices]
        try:
            for t in threads:
                t.start()
            for t in threads:
                while t.is_alive():
                    t.join(timeout=0.2)  # a bare join() would not let Ctrl-C in until the thread ended
        except BaseException:
            # Ctrl-C (or any exit of the caller's): stop handing out jobs, kill the workers in flight, and
            # let no result of a job in flight reach on_result. Only real verdicts were recorded.
            self.stop.trigger()
            self._close_helpers()
            deadline = time.monotonic() + INTERRUPT_GRACE_S
            for t in threads:
                t.join(timeout=max(0.0, deadline - time.monotonic()))
            if self.bar is not None:
                self.bar.close()
            raise
        self._close_helpers()
        self._record_jobs_no_device_took()
        if self.bar is not None:
            self.bar.close()

    def _close_helpers(self) -> None:
        if self.compile_pool is not None:
            self.compile_pool.shutdown(wait=False, cancel_futures=True)
        if self.costs_ahead is not None:
            self.costs_ahead.close()

    def _device_loop(self, device: str) -> None:
        try:
            session = DeviceSession(device, self.arch, sandbox=self.sandbox_mode, allow_network=self.allow_network,
                                    pin_cpus=self.pin_cpus)
        except Exception as e:  # no session, no evaluation: every job this thread would take is ours to redo
            log.exception("could not open a session on %s", device)
            self.session_error[device] = e
            return
        self.stop.add_session(session)
        try:
            session.prime(self.jobs[0].settings.backend)
            while True:
                i = self.scheduler.take(session)
                if i is None:
                    return
                result = self._evaluate(session, i)
                if self.stop.is_set():
                    # Interrupted: whatever the job reported was caused by the interrupt, not the candidate.
                    return
                self._record(i, result)
        finally:
            session.close()

    def _evaluate(self, session: DeviceSession, i: int) -> KernelResult:
        job = self.jobs[i]
        on_stage = self.on_stage
        try:
            report = None if on_stage is None else (lambda st, sec, i=i: on_stage(i, st, sec))
            return run_job(session, job, on_stage=report)
        except Exception as e:  # a bug of ours must not lose the batch, nor become a verdict
            log.exception("evaluation of %s failed", job.key)
            return infrastructure_result(job, type(e).__name__, f"evaluator error: {e}", format_tb(e))

    def _record(self, i: int, result: KernelResult) -> None:
        job = self.jobs[i]
        with self.lock:
            self.results[i] = result
            if self.on_result is not None:
                try:
                    self.on_result(i, result)
                except Exception:
                    log.exception("result callback failed for %s", job.key)
            if self.bar is not None:
                self.bar.update(1)
                self.bar.set_postfix_str(f"{job.key}: {result.verdict()}")

    def _record_jobs_no_device_took(self) -> None:
        if self.session_error and self.scheduler.pending:
            # No device could take these jobs: our failure, recorded as such (never a verdict).
            why = "; ".join(f"{d}: {type(e).__name__}: {e}" for d, e in self.session_error.items())
            for i in list(self.scheduler.pending):
                result = infrastructure_result(self.jobs[i], "SessionFailed", f"evaluator error: no device session ({why})")
                self.results[i] = result
                if self.on_result is not None:
                    try:
                        self.on_result(i, result)
                    except Exception:
                        log.exception("result callback failed for %s", self.jobs[i].key)
