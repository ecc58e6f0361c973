"""Typed results of an evaluation: what the evaluator returns and what run directories store.

Failures are records (stage, type, message, trimmed traceback as strings), never exception
objects or magic numbers such as ``-1.0``: "not measured" is ``None``.
Timing keeps its raw samples; the statistics are derived from them.
"""

from __future__ import annotations

import math
import statistics
from enum import Enum
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, computed_field

from kernelbench.speedup import (
    HOST_BOUND_PROCESS_SPREAD_SD,
    PROCESS_SPREAD_SD,
    SpeedupInterval,
    speedup_interval,
)

Precision = Literal["fp32", "fp16", "bf16"]
from kernelbench.constants import PRECISIONS  # noqa: E402,F401  (re-exported)

RESULT_SCHEMA_VERSION = 1
MAX_TRACEBACK_CHARS = 4000
MAX_MESSAGE_CHARS = 8000
#: How results written before the ``infrastructure`` stage marked our own failures (see
#: ``KernelResult.infrastructure_failure``).
LEGACY_REMOTE_ERROR_TYPE = "RemoteError"
#: ``host_share`` at or above which a result is flagged ``host-bound``: the host needs at least 80% of
#: the GPU's time to enqueue the forward, so any host hiccup (the issue's level-3 models) moves the time.
HOST_BOUND_SHARE = 0.8
LEGACY_EVALUATOR_ERROR_PREFIX = "evaluator error:"


class Stage(str, Enum):
    """Where an evaluation stopped. ``compile`` covers building kernels at import."""

    LOAD = "load"
    COMPILE = "compile"
    INIT = "init"
    RUN = "run"
    CORRECTNESS = "correctness"
    TIMING = "timing"
    TIMEOUT = "timeout"
    CRASH = "crash"
    GUARD = "guard"
    #: Our failure, not the candidate's: an evaluator exception, a lost worker pool or container, a
    #: reference that could not be set up. Never a verdict; a resumed run evaluates the job again.
    INFRASTRUCTURE = "infrastructure"


def trim(text: str | None, limit: int) -> str | None:
    """Keep the head and tail of long text; the middle of a compiler log is rarely the point."""
    if text is None or len(text) <= limit:
        return text
    head = limit // 2
    return text[:head] + f"\n... [{len(text) - limit} characters cut] ...\n" + text[-(limit - head):]


class StageError(BaseModel):
    model_config = ConfigDict(frozen=True)

    stage: Stage
    type: str = Field(description="Exception class name or failure kind, e.g. 'SyntaxError', 'Timeout'.")
    message: str
    traceback: str | None = None

    @classmethod
    def make(cls, stage: Stage, type_: str, message: str, traceback: str | None = None) -> StageError:
        return cls(stage=stage, type=type_, message=trim(message, MAX_MESSAGE_CHARS) or "",
                   traceback=trim(traceback, MAX_TRACEBACK_CHARS))

    def one_line(self) -> str:
        first = self.message.strip().splitlines()[0] if self.message.strip() else ""
        return f"{self.stage.value}: {self.type}: {first}"


class CorrectnessDetail(BaseModel):
    trials_run: int = 0
    trials_passed: int = 0
    atol: float
    rtol: float
    max_abs_error: float | None = None
    max_rel_error: float | None = None
    #: Why the first failing trial failed, in words (shape, dtype, values, NaN placement...).
    first_failure: str | None = None
    #: Timed outputs re-checked against the reference after timing.
    timed_outputs_checked: int = 0


class TimingStats(BaseModel):
    """Raw per-call times in milliseconds and the statistics derived from them."""

    samples_ms: list[float]
    warmup_calls: int = 0
    #: Calls per timed block when candidate and reference were interleaved in equal blocks (the speedup
    #: interval pairs them round by round); None for results written before it was kept, and for
    #: reference-only timings.
    block_calls: int | None = None

    @computed_field  # type: ignore[prop-decorator]
    @property
    def n(self) -> int:
        return len(self.samples_ms)

    @computed_field  # type: ignore[prop-decorator]
    @property
    def median_ms(self) -> float:
        return statistics.median(self.samples_ms)

    @computed_field  # type: ignore[prop-decorator]
    @property
    def mean_ms(self) -> float:
        return statistics.fmean(self.samples_ms)

    @computed_field  # type: ignore[prop-decorator]
    @property
    def std_ms(self) -> float:
        return statistics.stdev(self.samples_ms) if self.n > 1 else 0.0

    @computed_field  # type: ignore[prop-decorator]
    @property
    def min_ms(self) -> float:
        return min(self.samples_ms)

    @computed_field  # type: ignore[prop-decorator]
    @property
    def max_ms(self) -> float:
        return max(self.samples_ms)

    @computed_field  # type: ignore[prop-decorator]
    @property
    def ci95_ms(self) -> tuple[float, float]:
        """Distribution-free 95% confidence interval of the median (order statistics)."""
        return median_confidence_interval(self.samples_ms)

    @computed_field  # type: ignore[prop-decorator]
    @property
    def rse_median(self) -> float:
        """Relative standard error of the median, the quantity adaptive stopping drives down."""
        return relative_standard_error_of_median(self.samples_ms)


def median_confidence_interval(samples: list[float], z: float = 1.96) -> tuple[float, float]:
    xs = sorted(samples)
    n = len(xs)
    if n < 3:
        return (xs[0], xs[-1])
    half = z * math.sqrt(n) / 2.0
    lo = max(0, int(math.floor(n / 2.0 - half)))
    hi = min(n - 1, int(math.ceil(n / 2.0 + half)))
    return (xs[lo], xs[hi])


def relative_standard_error_of_median(samples: list[float]) -> float:
    """SE(median) / median, estimated from the order-statistic confidence interval.

    The interval width over 2*1.96 estimates the standard error without assuming normal
    times (GPU timings are skewed); for fewer than 3 samples it is infinite.
    """
    if len(samples) < 3:
        return math.inf
    lo, hi = median_confidence_interval(samples)
    med = statistics.median(samples)
    if med <= 0:
        return math.inf
    return (hi - lo) / (2 * 1.96) / med


class GuardFinding(BaseModel):
    model_config = ConfigDict(frozen=True)

    rule: str = Field(description="Stable identifier, e.g. 'side-stream', 'torch-patched'.")
    severity: Literal["info", "warning", "error"]
    message: str
    line: int | None = None
    origin: Literal["static", "runtime"] = "static"


class EnvironmentInfo(BaseModel):
    device: str = Field(description="'cuda:0' or 'cpu'.")
    gpu_name: str | None = None
    gpu_arch: str | None = Field(default=None, description="Compute capability, e.g. '9.0'.")
    gpu_count: int | None = None
    driver: str | None = None
    cuda: str | None = None
    torch: str | None = None
    triton: str | None = None
    python: str | None = None
    platform: str | None = None
    timing_protocol: str | None = None
    isolation: Literal["sandbox", "process"] | None = Field(
        default=None, description="What confined the candidate: 'sandbox' (own PID, mount and network namespaces, "
                                  "unprivileged user) or 'process' (a fresh process with a scrubbed environment only).")
    network: bool | None = Field(default=None, description="Whether the candidate could reach a network.")
    launch_cushion_us: int | None = Field(
        default=None, description="GPU only: microseconds of device spin queued before each timed call "
                                  "(EvalSettings.launch_cushion_us; 0: none).")
    cpu_pinned: bool | None = Field(
        default=None, description="GPU only: whether the timed pair's main threads shared one reserved CPU "
                                  "(EvalSettings.pin_cpus, and enough CPUs to reserve one per GPU).")


class RooflineInfo(BaseModel):
    """Speed-of-light estimate attached to a result (filled once the roofline module knows the problem)."""

    gpu: str
    precision: str
    flops: float
    min_bytes: float
    bound_ms: float
    bound_by: Literal["compute", "memory"]
    fraction_of_sol: float | None = Field(default=None, description="bound_ms / candidate median.")
    rates_source: str | None = Field(default=None, description="Whether measured or datasheet peak rates were used.")


class KernelResult(BaseModel):
    """The verdict on one candidate for one problem, JSON-serialisable without loss."""

    schema_version: int = RESULT_SCHEMA_VERSION
    level: int
    problem_id: int
    problem_name: str
    problem_hash: str | None = None
    sample_id: int = 0
    backend: str
    precision: str = "fp32"

    compiled: bool = False
    correct: bool = False
    error: StageError | None = None
    correctness: CorrectnessDetail | None = None

    runtime: TimingStats | None = Field(default=None, description="Candidate timing, when measured.")
    ref_runtime: TimingStats | None = Field(default=None, description="Reference timed in the same session.")
    timing_note: str | None = Field(default=None, description="Why timing was not measured, if it was not.")

    guard_findings: list[GuardFinding] = Field(default_factory=list)
    flags: list[str] = Field(default_factory=list, description="Reasons to review this result by hand.")
    roofline: RooflineInfo | None = None
    compile_log: str | None = None

    environment: EnvironmentInfo | None = None
    wall_time_s: float | None = None
    #: Seconds spent per stage (import/compile, correctness, timing...), for benchmarks and debugging.
    stage_times_s: dict[str, float] = Field(default_factory=dict)
    #: The GPU that actually ran the job when a remote runner chose it (Modal may substitute).
    runner: str | None = None
    #: The problem's size globals when it ran at its reduced CPU size (``CPU_SIZE``), else None. Such a
    #: result checks correctness only: it is refused by analyze, baselines and the leaderboard.
    reduced_size: dict[str, int] | None = None
    #: Host time to enqueue one forward over the GPU time of its kernels, from the launch trace: at about
    #: 1 or more the GPU waits for the host and the timing follows the CPU (``host-bound``). None when
    #: not measured (CPU path, older results).
    host_share: float | None = None
    #: Share of the forward's GPU kernel time spent in the candidate's own kernels (the rest: PyTorch,
    #: cuBLAS, cuDNN and other libraries). None when not measured.
    own_kernel_share: float | None = None

    @computed_field  # type: ignore[prop-decorator]
    @property
    def runtime_ms(self) -> float | None:
        return self.runtime.median_ms if self.runtime else None

    @computed_field  # type: ignore[prop-decorator]
    @property
    def ref_runtime_ms(self) -> float | None:
        return self.ref_runtime.median_ms if self.ref_runtime else None

    @computed_field  # type: ignore[prop-decorator]
    @property
    def speedup(self) -> float | None:
        """Reference median over candidate median, both from the same session; None if either is missing."""
        if not self.correct or self.runtime is None or self.ref_runtime is None:
            return None
        if self.runtime.median_ms <= 0:
            return None
        return self.ref_runtime.median_ms / self.runtime.median_ms

    @computed_field  # type: ignore[prop-decorator]
    @property
    def speedup_ci95(self) -> SpeedupInterval | None:
        """The speedup with its 95% interval from the paired timing rounds (see kernelbench.speedup)."""
        if self.speedup is None or self.runtime is None or self.ref_runtime is None:
            return None
        if self.runtime.block_calls is None or self.runtime.block_calls != self.ref_runtime.block_calls:
            return None
        spread = HOST_BOUND_PROCESS_SPREAD_SD if self._host_bound else PROCESS_SPREAD_SD
        return speedup_interval(self.ref_runtime.samples_ms, self.runtime.samples_ms, self.runtime.block_calls,
                                process_spread_sd=spread)

    @property
    def _host_bound(self) -> bool:
        return self.host_share is not None and self.host_share >= HOST_BOUND_SHARE

    @computed_field  # type: ignore[prop-decorator]
    @property
    def timing_flags(self) -> list[str]:
        """``imprecise`` (interval wider than the threshold), ``host-bound`` (the host sets the pace)."""
        out = []
        iv = self.speedup_ci95
        if iv is not None and iv.imprecise:
            out.append("imprecise")
        if self._host_bound:
            out.append("host-bound")
        return out

    @property
    def key(self) -> str:
        return f"level_{self.level}_problem_{self.problem_id}_sample_{self.sample_id}"

    @property
    def infrastructure_failure(self) -> bool:
        """True when this result stands for our failure, not a verdict on the candidate.

        Also recognises results written before the ``infrastructure`` stage existed: the Modal runner's
        ``RemoteError`` and the batch evaluator's ``crash: ... evaluator error:`` records.
        """
        e = self.error
        if e is None:
            return False
        if e.stage == Stage.INFRASTRUCTURE:
            return True
        return e.stage == Stage.CRASH and (e.type == LEGACY_REMOTE_ERROR_TYPE
                                           or e.message.startswith(LEGACY_EVALUATOR_ERROR_PREFIX))

    @property
    def failing_findings(self) -> list[GuardFinding]:
        return [f for f in self.guard_findings if f.severity == "error"]

    def verdict(self) -> str:
        """One word for tables: correct / incorrect / compile-failed / error stage."""
        if self.correct:
            return "correct (reduced size)" if self.reduced_size else "correct"
        if self.infrastructure_failure:
            return "infrastructure-failure"
        if self.error is not None:
            return {Stage.COMPILE: "compile-failed", Stage.LOAD: "load-failed"}.get(self.error.stage, self.error.stage.value)
        return "incorrect"

    def to_json(self, indent: int | None = 2) -> str:
        return self.model_dump_json(indent=indent)

    @classmethod
    def from_json(cls, text: str) -> KernelResult:
        return cls.model_validate_json(text)

    @classmethod
    def from_dict(cls, data: dict) -> KernelResult:
        """Our own dumps include computed fields (speedup, medians); validation ignores them."""
        return cls.model_validate(data)


def reduced_size_results(results: list[KernelResult] | tuple[KernelResult, ...]) -> list[KernelResult]:
    """The results that ran at a problem's reduced CPU size: correctness checks only, never scores.

    Scoring, baselines and the leaderboard compare times against the full-size problem, so a result at
    another size would compare two different problems; callers refuse a set that contains any.
    """
    return [r for r in results if r.reduced_size]


def reduced_size_message(results: list[KernelResult], what: str) -> str:
    """A clear refusal naming the reduced-size results (for analyze, baselines, the leaderboard)."""
    names = ", ".join(f"level {r.level} problem {r.problem_id}" for r in results[:5])
    more = f" and {len(results) - 5} more" if len(results) > 5 else ""
    return (f"{what}: {len(results)} result(s) ran at a reduced CPU size ({names}{more}); such results check "
            f"correctness only and cannot be scored. Evaluate at full size (without --reduced-size) on a GPU.")


def infrastructure_failures(results: list[KernelResult] | tuple[KernelResult, ...]) -> list[KernelResult]:
    """Results that stand for our failures (never verdicts): summaries report them apart, scores leave
    them out, and a resumed run evaluates their jobs again."""
    return [r for r in results if r.infrastructure_failure]
