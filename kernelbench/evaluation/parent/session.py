"""One device's session: its reference worker (kept per problem) and the spare workers started ahead.

A spare takes seconds to start (Python, torch, the profiler's imports), so candidate and reference
workers are started before they are needed; their CUDA contexts are created only while nothing is
being timed (:meth:`DeviceSession.allow_gpu_init`, :meth:`DeviceSession.quiesce`). On a GPU the
session also holds the CPU core its timed processes are pinned to.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from kernelbench.backends import get_backend
from kernelbench.evaluation import protocol
from kernelbench.evaluation.cpu_affinity import CoreReservation, gpu_slots, pinning_enabled
from kernelbench.evaluation.parent.template import ReferenceTemplate, TemplateUnavailable, template_wanted
from kernelbench.evaluation.parent.workers import (
    Pending,
    Spare,
    confinement_for,
    observe,
    receive,
    send,
    start_forked_reference,
    start_worker,
    worker_env,
)
from kernelbench.evaluation.sandbox import WorkerProcess
from kernelbench.evaluation.seeds import INIT_SEED
from kernelbench.evaluation.settings import EvalJob, EvalSettings
from kernelbench.evaluation.timing import whole_number_from_env
from kernelbench.results import Stage

log = logging.getLogger(__name__)


#: Spares started ahead per kind on a GPU, and how many of them (the first in line) hold a CUDA context. Session 20
#: (two H200s, official levels 1-3): once a job's load and releases had got fast, jobs waited 0.3-0.6 s on average for
#: a started worker with four of each kind (a start takes 8-11 s there, a job 2-3 s). Six processes per kind start at
#: once where the host has :data:`MANY_CPUS_PER_GPU` CPUs per GPU (the lent machines have 16), four elsewhere (a Modal
#: container has 8 CPUs and 32 GiB for all of them); only four per kind hold a context (GPU memory) either way.
#: ``KB_SPARES`` sets another number.
GPU_SPARES = 6
GPU_SPARES_FEW_CPUS = 4
MANY_CPUS_PER_GPU = 12
GPU_SPARES_WITH_CONTEXT = 4
SPARES_ENV = "KB_SPARES"
#: A spare's Init is two steps: its CUDA context, then its libraries' warm-up (cuBLAS, cuDNN, the evaluator's own
#: kernels), and neither runs while a candidate is timed, nor does the last problem's reference exit then. Session 22
#: (H200, the 250 official problems) measured letting them go on: with whole Inits beside the timings, a Gemm's timed
#: calls fell into two bands 14% apart and timing needed 59 calls per side instead of 24; with only the contexts and
#: exits beside the timings, 600.7 GPU-seconds (653.3 with neither), but 1.3% of level 1-2 timed calls were 5% slower
#: than their median (0.2-0.5% with neither) and identity missed [0.97, 1.03] without a flag twice
#: (scripts/probe_init_interference.py also finds a context's creation in another process slowing single calls of a
#: timed matmul). So a step under way as a timing begins is waited for, or, with ``KB_PAUSE_INITS=1``, stopped where
#: it stands (SIGSTOP) and let go on (SIGCONT) when the timing is over: a stopped process uses neither the GPU nor the
#: driver. That run took 566.3 GPU-seconds with no miss unflagged, but 0.8% of level 1's timed calls were 5% slower
#: (0.45% waiting) and 238 of 250 intervals held 1.0 (242 waiting): opt-in until it is understood. A baseline's
#: timing (an absolute time, no reference beside it) always waits.
PAUSE_INITS_ENV = "KB_PAUSE_INITS"


#: ``KB_REUSE_REFERENCES=0``: every new problem takes a fresh reference worker. By default the last problem's
#: reference, if its code left nothing behind, forgets it and sets up the next (worker/recycle.py says why and what it
#: checks), up to :data:`PROBLEMS_PER_REFERENCE` problems; a fresh one (forked from the template) takes over otherwise.
REUSE_ENV = "KB_REUSE_REFERENCES"
PROBLEMS_PER_REFERENCE = 50
#: Reference spares kept started while references are reused (they are needed only when one cannot be).
REUSE_REFERENCE_SPARES = 2


def reuse_references_wanted(env: Mapping[str, str] | None = None) -> bool:
    """Do references go on to the next problem (REUSE_ENV)? Unless ``KB_REUSE_REFERENCES=0``."""
    raw = ((os.environ if env is None else env).get(REUSE_ENV) or "").strip()
    if raw not in ("", "0", "1"):
        raise ValueError(f"{REUSE_ENV} must be 0 or 1, got {raw!r}")
    return raw != "0"


def spares_default(env: Mapping[str, str] | None = None, cpus_per_gpu: float | None = None) -> int:
    """Spares per kind on a GPU: ``KB_SPARES`` when set (a whole number >= 0), else :data:`GPU_SPARES` where the host
    has at least :data:`MANY_CPUS_PER_GPU` CPUs per visible GPU and :data:`GPU_SPARES_FEW_CPUS` where it has fewer."""
    if cpus_per_gpu is None:
        cpus_per_gpu = len(os.sched_getaffinity(0)) / max(1, len(visible_devices()))
    default = GPU_SPARES if cpus_per_gpu >= MANY_CPUS_PER_GPU else GPU_SPARES_FEW_CPUS
    return whole_number_from_env(SPARES_ENV, default, "spare workers per kind", env)


def pause_inits_wanted(env: Mapping[str, str] | None = None) -> bool:
    """Are spares' steps under way paused at a timing's start (see PAUSE_INITS_ENV)? Only with ``KB_PAUSE_INITS=1``."""
    raw = ((os.environ if env is None else env).get(PAUSE_INITS_ENV) or "").strip()
    if raw not in ("", "0", "1"):
        raise ValueError(f"{PAUSE_INITS_ENV} must be 0 or 1, got {raw!r}")
    return raw == "1"


#: Spares tried in turn when one's start or Init failed, before the job fails on our side.
TAKE_ATTEMPTS = 3
#: Forked reference workers that fail to start or Init in a row before the template is let go (fresh starts then).
FORKED_FAILURES_TO_LOSE = 2
#: A job that waits longer than this for a started worker says so in the log (the stage times show the sum).
SPARE_WAIT_LOG_S = 0.3


def _taken(spare: Spare, role: str, device: str) -> WorkerProcess:
    """``spare.take()``; a long wait is logged with whether the process had started (its Init is quick) or not."""
    started = spare.future.done()
    t0 = time.monotonic()
    worker = spare.take()
    waited = time.monotonic() - t0
    observe(role, "waiting for a started worker", waited)
    if waited > SPARE_WAIT_LOG_S:
        log.info("%s: waited %.2f s for a %s worker (%s)", device, waited, role,
                 "its process had started; its CUDA context had not" if started else "its process was still starting")
    return worker


def visible_devices() -> list[str]:
    try:
        import torch

        n = torch.cuda.device_count()
    except Exception:
        n = 0
    return [f"cuda:{i}" for i in range(n)] if n else ["cpu"]


def reference_key(job: EvalJob) -> tuple:
    """What makes two jobs' references the same: the problem, the precision and the tolerance."""
    s = job.settings
    tol = s.tolerance
    return (job.problem.hash, job.problem.level, job.problem.problem_id, s.precision, tol.atol, tol.rtol)


@dataclass(frozen=True)
class ReferenceSetup:
    """A reference's setup under way (:meth:`DeviceSession.begin_reference`)."""

    key: tuple
    pending: Pending


@dataclass(frozen=True)
class ReferenceInfo:
    """What the reference's setup found out, and the environment its worker reported."""

    stochastic: bool
    nondeterministic: bool
    env: dict


class DeviceSession:
    """One device: its reference worker and the spare workers started ahead of need."""

    def __init__(self, device: str, arch: str | None = None, spares: int | None = None,
                 reference_env: Mapping[str, str] | None = None, sandbox: str = "auto", allow_network: bool = False,
                 pin_cpus: bool | None = None, initialised: int | None = None, pause_inits: bool | None = None,
                 reuse_references: bool | None = None):
        self.device = device
        self.sandbox_mode, self.allow_network = sandbox, allow_network
        # Raises SandboxUnavailable under "require" before any worker starts.
        self.confinement = confinement_for(sandbox, device.startswith("cuda"), allow_network)
        self.reference_env = dict(reference_env or {})  # extra environment for every reference worker
        self.is_cuda = device.startswith("cuda")
        self.arch = arch
        # A spare takes 6-11 s to start on the lent GPU machines (Python, torch and its CUDA libraries, the
        # profiler's first run) and a job about 4 s, each consuming one candidate worker and, on a new problem,
        # a reference worker: four of each kind keep a started one waiting. Both kinds start at once: with one
        # thread per spare and one more, a sweep of new problems no longer queues one kind's starts behind the
        # other's (session 19: 25-30% of level 1-2 jobs waited for a candidate worker, with five threads for both).
        self.depth = spares if spares is not None else (spares_default() if self.is_cuda else 1)
        #: Of each kind's spares, how many (the first in line) create their CUDA context ahead of need: a context holds
        #: GPU memory (about half a GiB, more with the libraries Init warms), the processes behind them only host memory.
        self.init_depth = min(self.depth, initialised if initialised is not None else GPU_SPARES_WITH_CONTEXT)
        self._pool = ThreadPoolExecutor(max_workers=2 * self.depth + 1, thread_name_prefix=f"spawn-{device}")
        self._spare_candidates: dict[str | None, list[Spare]] = {}
        self._spare_references: list[Spare] = []
        self.reference: WorkerProcess | None = None
        self.reference_key: tuple | None = None
        self.reference_info: ReferenceInfo | None = None
        # While timing, the reference and candidate main threads share one reserved CPU (one per GPU),
        # so a host-bound forward sees the same host speed on both sides; everything else keeps off it.
        # The slot is the GPU's index on the host (cpu_affinity.gpu_slots), so that one evaluator per GPU
        # started with CUDA_VISIBLE_DEVICES=N does not time on the same CPU as another.
        index = int(device.split(":", 1)[1]) if self.is_cuda and ":" in device else 0
        slots, host_index = gpu_slots(len(visible_devices())) if self.is_cuda else (1, [0])
        self.slot = host_index[index] if index < len(host_index) else index
        #: ``EvalSettings.pin_cpus`` of the session's jobs (None: ``KB_PIN_CPUS``, on unless 0).
        self.pin_cpus = pinning_enabled() if pin_cpus is None else bool(pin_cpus)
        self.cores = CoreReservation.acquire(slots, self.pin_cpus) if self.is_cuda else None
        self._released = not self.is_cuda
        #: The candidate worker of the job under way, so that :meth:`abort` can stop it from another thread.
        self.in_flight: WorkerProcess | None = None
        self.aborted = False
        # Whether spares may create CUDA contexts now (nothing timed), and the lock that makes "may, so begin" one step
        # for the threads that start spares: once quiesce() holds it, no Init begins until allow_gpu_init().
        self._gate = threading.RLock()
        self._gpu_quiet = True
        #: Set by abort() and close(): no spare begins an Init from then on.
        self._stopping = False
        #: Whether a spare's step under way is paused at a timing's start (``KB_PAUSE_INITS``), and those paused now.
        self.pause_inits = pause_inits_wanted() if pause_inits is None else bool(pause_inits)
        self._paused: list[Spare] = []
        #: Whether the last problem's reference may set up the next (REUSE_ENV), and the one waiting to (its problem
        #: done, not yet recycled: recycling runs when the next problem's setup begins).
        self.reuse_references = reuse_references_wanted() if reuse_references is None else bool(reuse_references)
        self.reference_depth = min(self.depth, REUSE_REFERENCE_SPARES) if self.reuse_references else self.depth
        self._recyclable: WorkerProcess | None = None
        #: Last problems' references exiting in the background (their CUDA contexts' teardown); over before a timing.
        self._closing: list[threading.Thread] = []
        #: Reference workers are forked from one template process (``KB_REFERENCE_TEMPLATE``; on a GPU by default),
        #: made by the first reference spare's thread; None once it could not start or was lost (fresh starts then).
        self._use_template = template_wanted(self.is_cuda)
        self._template: ReferenceTemplate | None = None
        self._template_lock = threading.Lock()
        self._forked_failures = 0  # forked references that failed in a row (see _forked_reference_failed)

    @property
    def isolation(self) -> str:
        """What stands between candidate code and this machine: ``sandbox`` or ``process``."""
        return "sandbox" if self.confinement is not None else "process"

    def check_settings(self, settings: EvalSettings) -> None:
        if (settings.sandbox, settings.allow_network) != (self.sandbox_mode, self.allow_network):
            raise ValueError("all jobs on one device session must share the sandbox settings "
                             f"(session: sandbox={self.sandbox_mode}, allow_network={self.allow_network}; job: "
                             f"sandbox={settings.sandbox}, allow_network={settings.allow_network})")

    def _spawn(self, role: str, backend: str | None) -> Spare:
        if role == "reference":
            spare = Spare(self._pool.submit(self._start_reference), self._context_ready)
        else:
            conf = self.confinement if role == "candidate" else None
            spare = Spare(self._pool.submit(start_worker, role, self.device, backend, self.arch, False, None, conf),
                          self._context_ready)
        spare.future.add_done_callback(lambda _: self._started(spare))
        return spare

    def _start_reference(self) -> WorkerProcess:
        """A reference worker (no Init yet): forked from the session's template when there is one, else started."""
        template = self._reference_template()
        if template is not None:
            try:
                return start_forked_reference(template, self.device)
            except TemplateUnavailable as e:
                self._lose_template(template, str(e))
        return start_worker("reference", self.device, None, self.arch, False, self.reference_env, None)

    def _reference_template(self) -> ReferenceTemplate | None:
        """The session's template, started by the first caller (the others wait for it: a fresh start of their own
        would take as long); None when not wanted or it could not start."""
        if not self._use_template:
            return None
        with self._template_lock:
            if self._template is None and self._use_template and not self.aborted:
                try:
                    self._template = ReferenceTemplate(self.device, worker_env("reference", self.device, None,
                                                                                 self.arch, self.reference_env))
                    observe("reference", "the reference template's start", self._template.start_s)
                except Exception as e:  # (TemplateUnavailable, or the start itself: no process, no folder)
                    log.warning("%s: reference workers are started, not forked: %s", self.device, e)
                    self._use_template = False
            return self._template

    def _lose_template(self, template: ReferenceTemplate, why: str) -> None:
        with self._template_lock:
            if self._template is template:
                log.warning("%s: reference workers are started, not forked, from now on: %s", self.device, why)
                self._template, self._use_template = None, False
        template.close()

    def _forked_reference_failed(self, error: Exception) -> None:
        """A reference worker that could not start or Init while references are forked: its Init runs before any
        problem code, so the template is the suspect (a fork that cannot use CUDA fails every time). The template is
        let go after two failures in a row, and with it the spare references forked from it; the next take starts one
        afresh."""
        template = self._template
        if template is None:
            return
        self._forked_failures += 1
        if self._forked_failures < FORKED_FAILURES_TO_LOSE:  # one may be the GPU's (out of memory beside a job)
            return
        self._lose_template(template, f"a forked reference worker failed ({error})")
        forked, self._spare_references = self._spare_references, []
        for sp in forked:
            sp.discard()

    def _started(self, spare: Spare) -> None:
        """A spare's process has started: if it is first in line and nothing is timed, it creates its CUDA context now
        (then warms its libraries: :meth:`_context_ready`); else at the next :meth:`allow_gpu_init`. Waiting for the
        next job to begin had left half of a level's new problems waiting 0.1-1.5 s for their reference's context
        (session 20, H200)."""
        with self._gate:
            if self._may_init() and any(sp is spare for sp in self._due()):
                spare.begin_init()

    def _context_ready(self, spare: Spare) -> None:
        """(The spare's reader thread) its context is ready, or a piece of its warm-up done: the next piece begins now
        if nothing is timed."""
        with self._gate:
            if self._may_init() and any(sp is spare for sp in self._due()):
                spare.begin_warm()

    def _due(self) -> list[Spare]:
        """The spares first in line of each kind: those that create their CUDA contexts ahead of need."""
        lists = [*self._spare_candidates.values(), self._spare_references]
        return [sp for lst in lists for sp in lst[:self.init_depth]]

    def _may_init(self) -> bool:
        """May a spare begin its Init or warm-up now (under the gate)? When nothing is timed, unless stopping."""
        return not self._stopping and self._gpu_quiet

    def _begin_due(self) -> None:
        with self._gate:
            if self._may_init():
                for sp in self._due():
                    sp.begin_init()
                    sp.begin_warm()

    def _backend_env_key(self, backend: str) -> tuple[tuple[str, str], ...] | None:
        # A backend's worker environment (the Triton interpreter on the CPU) is set when the worker
        # starts, so spares are kept apart by the environment they were started with (None: none of its own).
        return tuple(sorted(get_backend(backend).worker_env(on_gpu=self.is_cuda).items())) or None

    def _all_spares(self) -> list[Spare]:
        # (list() of the dict's values in one step: abort() calls this from another thread)
        out = [sp for lst in list(self._spare_candidates.values()) for sp in list(lst)]
        return out + list(self._spare_references)

    def _forget(self, spare: Spare) -> None:
        for lst in [*self._spare_candidates.values(), self._spare_references]:
            lst[:] = [sp for sp in lst if sp is not spare]

    def _take(self, pop: Callable[[], Spare], role: str) -> WorkerProcess:
        """A started spare's worker, the next one's (or a fresh start's) when its start or Init failed: a worker lost
        to us (its Init out of memory beside another job, say) is never handed to a candidate or a problem."""
        for attempt in range(TAKE_ATTEMPTS):
            spare = pop()
            try:
                worker = _taken(spare, role, self.device)
                if role == "reference":
                    self._forked_failures = 0
                return worker
            except Exception as e:
                spare.discard()  # (what is left of it: its files, its channel)
                if role == "reference":
                    self._forked_reference_failed(e)
                if attempt == TAKE_ATTEMPTS - 1 or self.aborted:  # (an abort killed it: no new start after Ctrl-C)
                    raise
                log.warning("%s: a spare %s worker could not be used (%s); taking another", self.device, role, e)
        raise AssertionError("unreachable")

    def prime(self, backend: str) -> None:
        lst = self._spare_candidates.setdefault(self._backend_env_key(backend), [])
        while len(lst) < self.depth:
            lst.append(self._spawn("candidate", backend))
        self._top_up_references()

    def _top_up_references(self) -> None:
        # Every new problem takes a fresh reference worker; keep as many ready as candidates.
        while len(self._spare_references) < self.reference_depth:
            self._spare_references.append(self._spawn("reference", None))

    def take_reference(self, replace: bool = True) -> WorkerProcess:
        """A started, initialised reference worker (trusted code only); with ``replace``, another on its way."""
        worker = self._take(lambda: self._spare_references.pop(0) if self._spare_references
                            else self._spawn("reference", None), "reference")
        if replace:
            self._top_up_references()
        self._begin_due()  # the spare next in line, if it has started
        return worker

    def allow_gpu_init(self) -> None:
        """Nothing is being timed now: spares paused at the timing's start go on, and spares that have started may
        create their CUDA contexts."""
        with self._gate:
            self._gpu_quiet = True
        self._resume_paused()
        self._begin_due()

    def _resume_paused(self) -> None:
        paused, self._paused = self._paused, []
        for sp in paused:
            sp.resume()

    def quiesce(self, strict: bool = False) -> None:
        """About to time: no spare's Init (its CUDA context) or warm-up runs during the timing, and none begins until
        :meth:`allow_gpu_init`; the last problem's reference has exited. A step under way is waited for or, with
        ``KB_PAUSE_INITS=1`` unless ``strict`` (a baseline's absolute time), paused where it stands (PAUSE_INITS_ENV)."""
        with self._gate:
            self._gpu_quiet = False
        pause = self.pause_inits and not strict
        for sp in self._all_spares():
            if pause and sp.stepping and sp.pause():  # stopped where it stands; allow_gpu_init() lets it go on
                self._paused.append(sp)
                continue
            try:
                sp.finish_init()
            except Exception:
                pass  # (kept in sp.error)
            if sp.error is not None:  # out of line, its worker killed: the timing goes on (not the job's failure)
                log.warning("%s: a spare worker's Init failed (%s); it is dropped", self.device, sp.error)
                self._forget(sp)
                sp.discard()
        self._closed_references()

    def _closed_references(self) -> None:
        closing, self._closing = self._closing, []
        for t in closing:
            t.join()

    def candidate_worker(self, backend: str) -> WorkerProcess:
        lst = self._spare_candidates.setdefault(self._backend_env_key(backend), [])
        worker = self._take(lambda: lst.pop(0) if lst else self._spawn("candidate", backend), "candidate")
        self.prime(backend)
        self._begin_due()
        return worker

    def has_reference(self, job: EvalJob) -> bool:
        """Is the reference this job needs already set up (a job of the same problem came before)?"""
        return self.reference is not None and self.reference_key == reference_key(job) and self.reference.alive()

    def begin_reference(self, job: EvalJob, probe_seed: int) -> ReferenceSetup:
        """Send a fresh reference worker the job's :class:`~kernelbench.evaluation.protocol.Setup`, unanswered
        yet, so that other untimed work can go on meanwhile; :meth:`finish_reference` completes it."""
        self.drop_reference(reuse=True)
        worker = self._recycled(job.settings.stage_timeout_s) or self.take_reference()
        self.reference = worker  # not yet usable (no key), but stopped by abort() and drop_reference()
        tol = job.settings.tolerance
        pending = send(worker, protocol.Setup(code=job.problem.code, precision=job.settings.precision,
                                              atol=tol.atol, rtol=tol.rtol, init_seed=INIT_SEED,
                                              probe_seed=probe_seed, ieee_fp32=job.settings.ieee_fp32,
                                              compile_mode=None),
                       protocol.SetupReply, job.settings.stage_timeout_s * 2, Stage.INIT, "reference setup")
        return ReferenceSetup(reference_key(job), pending)

    def finish_reference(self, setup: ReferenceSetup) -> tuple[WorkerProcess, ReferenceInfo]:
        """The reply to :meth:`begin_reference`; the reference then serves the jobs of its problem."""
        reply, _ = receive(setup.pending)
        worker = setup.pending.worker
        worker.problems_served += 1
        self.reference, self.reference_key = worker, setup.key
        self.reference_info = ReferenceInfo(stochastic=bool(reply.stochastic),
                                            nondeterministic=bool(reply.nondeterministic), env=worker.info)
        return worker, self.reference_info

    def reference_for(self, job: EvalJob, probe_seed: int) -> tuple[WorkerProcess, ReferenceInfo]:
        """The job's reference, set up now unless the last job's serves (nothing else runs meanwhile)."""
        if self.has_reference(job):
            return self.reference, self.reference_info
        return self.finish_reference(self.begin_reference(job, probe_seed))

    def _recycled(self, timeout_s: float) -> WorkerProcess | None:
        """The last problem's reference, ready for the next problem's Setup; None when there is none or it cannot
        be (its problem left something behind, or it did not answer: it exits, and a spare serves)."""
        worker = self._recyclable  # (kept there while it answers: abort() kills it)
        if worker is None:
            return None
        try:  # (its time is recorded under the command's name, as every command's is)
            reply, _ = receive(send(worker, protocol.Recycle(), protocol.RecycleReply, timeout_s, Stage.INIT,
                                    "recycling the last problem's reference"))
        except BaseException as e:  # (a dead or hung worker: its own failure, never the next job's)
            self._recyclable = None
            worker.kill()
            if not isinstance(e, Exception):  # Ctrl-C
                raise
            log.warning("%s: the last problem's reference could not be reused (%s); a fresh one serves", self.device, e)
            return None
        self._recyclable = None
        if self.aborted:
            worker.kill()
            raise RuntimeError("the evaluation was aborted")
        if not reply.clean:
            log.info("%s: the last problem's reference is not reused: %s", self.device, reply.detail)
            self._close_in_background(worker)
            return None
        return worker

    def _close_in_background(self, worker: WorkerProcess) -> None:
        # It exits (its CUDA context torn down, 0.2-0.5 s on the H200) while the next problem's reference sets up
        # and its candidate loads; the next timing waits for it (quiesce).
        self._closing = [t for t in self._closing if t.is_alive()]
        closing = threading.Thread(target=worker.close, name=f"close-{self.device}", daemon=True)
        closing.start()
        self._closing.append(closing)

    def drop_reference(self, reuse: bool = False) -> None:
        """Let the current reference go: with ``reuse`` (a new problem's setup, REUSE_ENV), kept to set that problem
        up when it served its last one to the end; else it exits (killed when its setup was never read)."""
        if self._recyclable is not None:  # (never recycled: a later drop came first)
            self._close_in_background(self._recyclable)
            self._recyclable = None
        if self.reference is not None:
            t0 = time.monotonic()
            if self.reference_key is None:  # its setup was never read: busy or broken, it cannot exit politely
                self.reference.kill()
            elif reuse and self.reuse_references and self.reference.alive() \
                    and self.reference.problems_served < PROBLEMS_PER_REFERENCE:
                self._recyclable = self.reference
            else:
                self._close_in_background(self.reference)
            observe("reference", "closing the last problem's reference", time.monotonic() - t0)
        self.reference, self.reference_key = None, None

    def abort(self) -> None:
        """Stop the job under way now (Ctrl-C): kill its candidate and the reference worker, and every
        spare already started. Called from another thread; whatever the job then reports is discarded."""
        self.aborted = True
        self._stopping = True  # no spare begins an Init from here on (no lock taken: abort never waits)
        self._resume_paused()
        for w in (self.in_flight, self.reference, self._recyclable):
            if w is not None:
                w.kill()
        for sp in self._all_spares():
            sp.future.cancel()
            if sp.future.done() and not sp.future.cancelled() and sp.future.exception() is None:
                sp.future.result().kill()

    def close(self) -> None:
        with self._gate:
            self._stopping = True  # no spare begins an Init from here on
        self._resume_paused()  # (a stopped worker could not exit politely)
        self.drop_reference()
        self._closed_references()
        for sp in self._all_spares():
            if self.aborted:
                sp.future.cancel()
                if sp.future.cancelled():
                    continue
            sp.discard()
        self._spare_candidates.clear()
        self._spare_references.clear()
        self._pool.shutdown(wait=False)
        with self._template_lock:
            template, self._template, self._use_template = self._template, None, False
        if template is not None:
            template.close()
        if not self._released:
            self._released = True
            CoreReservation.release()
