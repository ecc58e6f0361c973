"""Timing a problem's reference alone, in eager mode or under torch.compile: what baselines measure.

The same warm-up and timing loop as candidate timing (:mod:`.rounds`), with one side and no
candidate: fresh inputs per call, L2 flushed, all streams drained, adaptive stopping on the
median's relative standard error.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from kernelbench.evaluation import protocol
from kernelbench.evaluation import seeds as seedlib
from kernelbench.evaluation.cpu_affinity import pinned
from kernelbench.evaluation.parent.rounds import WARMUP_SEEDS, TimedSide, run_rounds, seed_lists, warm_up
from kernelbench.evaluation.parent.session import DeviceSession
from kernelbench.evaluation.parent.verdict import environment_from
from kernelbench.evaluation.parent.workers import reference_call
from kernelbench.evaluation.sandbox import WorkerProcess
from kernelbench.evaluation.seeds import INIT_SEED
from kernelbench.evaluation.settings import EvalSettings
from kernelbench.evaluation.timing import StopRule, should_stop
from kernelbench.results import EnvironmentInfo, TimingStats

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


def set_up_reference(worker: WorkerProcess, problem, mode: str, settings: EvalSettings, secret: bytes,
                     timeout_s: float, what: str) -> protocol.SetupReply:
    """Build (for compile modes: compile) ``problem``'s reference in ``worker`` as ``mode`` times it.

    The compile warm-up calls this too, so that what it compiles is the graph the timed run compiles.
    Raises :class:`~kernelbench.evaluation.parent.workers.ReferenceBroken` if the worker fails.
    """
    reply, _ = reference_call(worker, reference_setup_message(problem, mode, settings, secret), protocol.SetupReply,
                              timeout_s, what)
    return reply


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
        setup = set_up_reference(worker, problem, mode, s, secret, setup_timeout, f"{mode} setup")
        setup_s = time.monotonic() - t0
        session.quiesce(strict=True)  # an absolute time: no Init or exit beside it
        with pinned(session.cores, session.slot, worker.main_pid, None):
            side, rounds, why = _time_alone(worker, mode, s, secret)
        return ReferenceTiming(mode=mode, timing=TimingStats(samples_ms=side.samples_ms,
                                                             warmup_calls=int(side.warm.calls)),
                               environment=environment_from(worker.info, session.device),
                               note=f"{len(side.samples_ms)} timed calls in {rounds} rounds; stopped: {why}",
                               setup_s=setup_s, compile_s=setup.compile_s, compile_cache=setup.compile_cache or None)
    finally:
        worker.close()
        session.allow_gpu_init()


def _time_alone(worker: WorkerProcess, mode: str, s: EvalSettings, secret: bytes) -> tuple[TimedSide, int, str]:
    """The reference as the only side: forward seeds equal to input seeds, no fingerprints, no ABBA order."""
    limit = s.stage_timeout_s + s.timing_budget_s * 2
    side = TimedSide("reference", mode, lambda m, t, what: reference_call(worker, m, protocol.TimeReply, t, what)[0])
    n = warm_up([side], *seed_lists(secret, "warm", None, WARMUP_SEEDS), limit, s.launch_cushion_us)
    rule = StopRule(s.target_rse, s.min_timing_trials, s.max_timing_trials, s.timing_budget_s)
    rounds, why = run_rounds(
        {side.name: side}, lambda k: (side.name,), lambda k: seed_lists(secret, "time", None, n, k), False, limit,
        accept=lambda k, replies: True,
        stop=lambda k: should_stop(rule, side.samples_ms, side.samples_ms, side.spent_s, side.spent_s),
        cushion_us=s.launch_cushion_us)
    return side, rounds, why
