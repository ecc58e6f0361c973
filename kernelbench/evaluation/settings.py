"""What to evaluate and how: a frozen job description, separate from the measurement."""

from __future__ import annotations

import os
from dataclasses import asdict, dataclass, field, replace

from kernelbench.backends import DEFAULT_BACKEND, get_backend
from kernelbench.constants import PRECISIONS
from kernelbench.constants import TOLERANCE_MODES as _MODES
from kernelbench.evaluation.cpu_affinity import pinning_enabled
from kernelbench.evaluation.isolation import SANDBOX_MODES
from kernelbench.evaluation.timing import EXTENSION_FACTOR, MIN_TIMED_CALLS, launch_cushion_us
from kernelbench.problems.model import Problem


@dataclass(frozen=True)
class Tolerance:
    atol: float
    rtol: float


#: Per precision. fp32 is strict by default; ``kernelbench-v0.1`` reproduces KernelBench's 1e-2.
TOLERANCES = {
    "default": {"fp32": Tolerance(1e-4, 1e-4), "fp16": Tolerance(1e-2, 1e-2), "bf16": Tolerance(1e-2, 1e-2)},
    "kernelbench-v0.1": {"fp32": Tolerance(1e-2, 1e-2), "fp16": Tolerance(1e-2, 1e-2), "bf16": Tolerance(1e-2, 1e-2)},
}
TOLERANCE_MODES = tuple(TOLERANCES)
assert TOLERANCE_MODES == _MODES, "kernelbench.constants.TOLERANCE_MODES is out of date"


def tolerance_for(precision: str, mode: str = "default") -> Tolerance:
    try:
        return TOLERANCES[mode][precision]
    except KeyError:
        raise ValueError(f"no tolerance for precision {precision!r} in mode {mode!r}") from None


#: Environment variable that turns the overlap of untimed work off (``0``) for before/after measurements.
OVERLAP_ENV = "KB_OVERLAP"


def overlap_enabled(env: dict | None = None) -> bool:
    value = (os.environ if env is None else env).get(OVERLAP_ENV, "1").strip().lower()
    return value not in ("0", "false", "no", "off")


@dataclass(frozen=True)
class EvalSettings:
    #: A registered backend (:mod:`kernelbench.backends`).
    backend: str = DEFAULT_BACKEND
    precision: str = "fp32"
    correctness_trials: int = 5
    tolerance_mode: str = "default"
    #: Overrides of the precision's tolerance, when set.
    atol: float | None = None
    rtol: float | None = None
    measure_timing: bool = True
    #: Wall-clock seconds of timed calls per side (candidate, reference) before stopping.
    timing_budget_s: float = 1.0
    #: Stop timing once the relative standard error of both medians is under this.
    target_rse: float = 0.005
    #: Timed calls per side before precision may stop the timing (``timing.MIN_TIMED_CALLS``: four rounds of the
    #: smallest block); the budget may stop it sooner.
    min_timing_trials: int = MIN_TIMED_CALLS
    max_timing_trials: int = 2000
    #: While the speedup's 95% interval (rounds alone) is wider than +/-2%, timing may go on past the budget
    #: (and the trial limit) up to this many times it, then stops and the result is flagged imprecise
    #: (1: never, the default; see ``timing.EXTENSION_FACTOR`` for the measurement behind it).
    timing_extension: float = EXTENSION_FACTOR
    #: Distinct input sets rotated through the timed calls (outputs re-checked for each).
    timing_input_sets: int = 3
    #: Microseconds of device spin queued before each timed call's start event, so the GPU is busy when the
    #: host launches the forward (``timing.LAUNCH_CUSHION_US``; 0: none). Its default can be overridden with
    #: ``KB_LAUNCH_CUSHION_US`` for measuring its effect; every result records the value it was timed with.
    launch_cushion_us: int = field(default_factory=launch_cushion_us)
    #: On a GPU, the reference's and the candidate's main threads share one reserved CPU while timed
    #: (``evaluation.cpu_affinity``). Default from ``KB_PIN_CPUS`` (on unless 0); recorded in every result.
    pin_cpus: bool = field(default_factory=pinning_enabled)
    #: Do untimed work of two workers at once: a new problem's reference setup beside the candidate's load,
    #: and each correctness trial's reference and candidate runs. Nothing is timed meanwhile, and verdicts
    #: are the same either way (a failure under overlap is redone alone). Default from ``KB_OVERLAP`` (on
    #: unless 0), so that benchmarks can measure without it.
    overlap: bool = field(default_factory=overlap_enabled)
    #: "cuda:0", "cpu", or None to pick the first visible GPU, else the CPU.
    device: str | None = None
    #: Hard limit per stage (import/compile, init, one correctness trial, timing) in seconds.
    compile_timeout_s: float = 600.0
    stage_timeout_s: float = 120.0
    #: Flag speedups above this for review.
    review_speedup: float = 10.0
    #: Run the static guard first and refuse sources it fails (off only to test runtime defences).
    static_guard: bool = True
    #: A separate CUDA build cache per namespace (the leaderboard uses one per submission): candidate
    #: code runs in the process that builds, so it could plant a build that another candidate loads.
    cache_namespace: str | None = None
    #: The OS sandbox around candidate code: "auto" (use it where it can be made, else process isolation
    #: with a warning), "require" (refuse to evaluate without it), "off" (process isolation only).
    sandbox: str = "auto"
    #: Give sandboxed candidates the network (off: their own network namespace, no route anywhere).
    allow_network: bool = False
    #: Secret for the per-trial seeds; None draws one from the OS per evaluation.
    seed_secret: bytes | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        get_backend(self.backend)  # UnknownBackendError (a ValueError) names the registered ones
        if self.precision not in PRECISIONS:
            raise ValueError(f"unknown precision {self.precision!r} (choose from {', '.join(PRECISIONS)})")
        if self.tolerance_mode not in TOLERANCES:
            raise ValueError(f"unknown tolerance mode {self.tolerance_mode!r} (choose from {', '.join(TOLERANCES)})")
        if self.sandbox not in SANDBOX_MODES:
            raise ValueError(f"unknown sandbox mode {self.sandbox!r} (choose from {', '.join(SANDBOX_MODES)})")
        if self.correctness_trials < 1:
            raise ValueError("correctness_trials must be at least 1")
        if not self.timing_budget_s > 0:  # also refuses NaN
            raise ValueError(f"timing_budget_s must be a positive number of seconds, got {self.timing_budget_s!r}")
        if not self.stage_timeout_s > 0:
            raise ValueError(f"stage_timeout_s must be a positive number of seconds, got {self.stage_timeout_s!r}")
        if self.timing_extension < 1.0:
            raise ValueError("timing_extension must be at least 1 (1: no extension past the budget)")
        if not self.compile_timeout_s > 0:
            raise ValueError(f"compile_timeout_s must be a positive number of seconds, got {self.compile_timeout_s!r}")
        if not 1 <= self.min_timing_trials <= self.max_timing_trials:
            raise ValueError(f"timing trials: need 1 <= min_timing_trials <= max_timing_trials, got "
                             f"{self.min_timing_trials} and {self.max_timing_trials}")
        if not self.target_rse > 0:
            raise ValueError(f"target_rse must be positive, got {self.target_rse!r}")
        if self.timing_input_sets < 1:
            raise ValueError(f"timing_input_sets must be at least 1, got {self.timing_input_sets}")
        if not self.review_speedup > 0:
            raise ValueError(f"review_speedup must be positive, got {self.review_speedup!r}")
        if isinstance(self.launch_cushion_us, bool) or not isinstance(self.launch_cushion_us, int) \
                or self.launch_cushion_us < 0:
            raise ValueError(f"launch_cushion_us must be a whole number of microseconds >= 0, "
                             f"got {self.launch_cushion_us!r}")

    @property
    def tolerance(self) -> Tolerance:
        base = tolerance_for(self.precision, self.tolerance_mode)
        return Tolerance(self.atol if self.atol is not None else base.atol,
                         self.rtol if self.rtol is not None else base.rtol)

    @property
    def ieee_fp32(self) -> bool:
        """Strict fp32 means IEEE fp32 math: cuDNN's default TF32 convolutions err by about 5e-4
        relative, so a correct fp32 candidate would fail a reference computed that way at 1e-4.
        KernelBench's 1e-2 mode keeps PyTorch's defaults, as KernelBench does."""
        return self.precision == "fp32" and self.tolerance_mode == "default"

    def with_(self, **changes) -> EvalSettings:
        return replace(self, **changes)

    def to_dict(self) -> dict:
        d = asdict(self)
        d.pop("seed_secret", None)  # never serialised: it would let a candidate predict inputs
        return d


@dataclass(frozen=True)
class EvalJob:
    """One candidate for one problem. Plain data: it crosses process and machine boundaries."""

    problem: Problem
    candidate_source: str
    settings: EvalSettings = field(default_factory=EvalSettings)
    sample_id: int = 0

    @property
    def key(self) -> str:
        return f"level_{self.problem.level}_problem_{self.problem.problem_id}_sample_{self.sample_id}"
