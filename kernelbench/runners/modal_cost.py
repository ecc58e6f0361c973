"""What a Modal dispatch will cost, before it is sent, and a budget that stops it.

Modal bills GPU time per second, and the runner fans every job out to its own container, so a
large submission is a large bill. Before anything is dispatched the runner computes a
:class:`CostEstimate` (kernels, GPU type, GPU-hours, dollars at the dated list price in
``kernelbench.hardware.MODAL_GPU_TABLE``) and hands it to a confirmation callback; with a cost cap it dispatches
in batches and stops before the batch that would cross the cap.

The per-job time is a deliberately generous model (container start, compile, correctness trials,
both sides' timing), not a measurement: it is meant to be an upper-end guess, and says so.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from kernelbench.backends import get_backend
from kernelbench.errors import DispatchDeclined, KernelBenchError  # noqa: F401 - re-exported for callers
from kernelbench.evaluation.settings import EvalJob, EvalSettings

#: Container start (a cached image on a warm host), reference build and the worker processes.
STARTUP_S = 60.0
#: Seconds per correctness trial (fresh inputs, reference and candidate, comparison).
TRIAL_S = 2.0
#: Warm-up and clock settling before the timed blocks.
WARMUP_S = 20.0


@dataclass(frozen=True)
class CostEstimate:
    """The estimate shown before a dispatch: what runs where, and roughly what it costs."""

    n_jobs: int
    gpu: str
    seconds_per_job: float
    usd_per_hour: float
    prices_date: str

    @property
    def gpu_hours(self) -> float:
        return self.n_jobs * self.seconds_per_job / 3600.0

    @property
    def usd(self) -> float:
        return self.gpu_hours * self.usd_per_hour

    def describe(self) -> str:
        return (f"{self.n_jobs} kernel(s) on Modal {self.gpu}: about {self.gpu_hours:.2f} GPU-hours, "
                f"about ${self.usd:.2f} at ${self.usd_per_hour:.2f} per GPU-hour (Modal list price of "
                f"{self.prices_date}; an upper-end estimate, CPU and memory billed on top)")


def seconds_per_job(settings: EvalSettings) -> float:
    """Estimated billed GPU-seconds for one evaluation with these settings."""
    # Building the candidate: the backend's own estimate (nvcc for load_inline, Triton's JIT, nothing for torch).
    s = STARTUP_S + get_backend(settings.backend).build_estimate_s + TRIAL_S * settings.correctness_trials
    if settings.measure_timing:
        # Both sides, each over every input set, plus warm-up.
        s += WARMUP_S + 2.0 * settings.timing_budget_s * max(1, settings.timing_input_sets)
    return s


def price_per_hour(gpu: str) -> tuple[float, str]:
    """(USD per GPU-hour, date of that price) for a Modal GPU name, from the GPU table."""
    from kernelbench.hardware import MODAL_GPU_TABLE, MODAL_PRICES_DATE

    spec = MODAL_GPU_TABLE.get(gpu)
    if spec is None:
        raise KernelBenchError(f"no Modal price for GPU {gpu!r} (known: {', '.join(MODAL_GPU_TABLE)})")
    return spec.usd_per_hour, MODAL_PRICES_DATE


def estimate_jobs(jobs: Sequence[EvalJob], gpu: str) -> CostEstimate:
    """The estimate for evaluating ``jobs`` on ``gpu`` (one container per job)."""
    price, date = price_per_hour(gpu)
    total = sum(seconds_per_job(job.settings) for job in jobs)
    per_job = total / len(jobs) if jobs else 0.0
    return CostEstimate(n_jobs=len(jobs), gpu=gpu, seconds_per_job=per_job, usd_per_hour=price, prices_date=date)


def spent_usd(wall_times_s: Iterable[float | None], usd_per_hour: float) -> float:
    """Dollars spent on finished jobs: each job's measured wall time plus the container start."""
    return sum(STARTUP_S + (w or 0.0) for w in wall_times_s) * usd_per_hour / 3600.0


def batches(n: int, size: int) -> list[range]:
    """Index ranges of at most ``size`` jobs, in order."""
    if size < 1:
        raise ValueError("batch size must be at least 1")
    return [range(i, min(i + size, n)) for i in range(0, n, size)]
