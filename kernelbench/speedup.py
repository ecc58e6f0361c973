"""A speedup's 95% confidence interval, from the interleaved timing rounds; pure functions, no CUDA.

Method: **paired rounds, Student t on log ratios, centred on the headline.** The evaluator times the
reference and the candidate in alternating blocks (ABBA), one block of each per round, with the same
number of calls per block. Each round gives one paired ratio, the reference block's median over the
candidate block's median: both blocks ran next to each other under the same GPU clock and host state, so
slow drift (clock levels, a busy host) cancels inside the pair. The spread of these log ratios between
rounds is the honest noise unit: calls inside one block are correlated (they share a clock state), so an
interval built from single calls, or a bootstrap of the ratio of medians that resamples calls, comes out
too narrow exactly on the noisy problems this exists for. With few rounds (4 to 20 is usual) a bootstrap
over rounds is coarse and undercovers; Student's t with rounds - 1 degrees of freedom states that
uncertainty. The interval is centred on the mean paired log ratio; the headline speedup stays KernelBench's
ratio of the pooled medians, and where the two disagree (a clock that jumps between levels makes the pooled
median jump too) the interval is widened to include the headline, so the two never contradict each other
and the disagreement shows as width (and an ``imprecise`` flag).

**Plus the spread between processes.** The rounds measure the noise *inside* one evaluation. Two processes
running identical code also differ by a small, steady amount that no number of rounds averages away (where
the allocator placed the buffers, which cuDNN algorithm a process picked, which vCPU served the host):
measured with identity candidates over the official levels 1-3 on an H200 (docs/benchmarks.md, session 11),
the rounds-only interval held 1.0 for 82-88% of problems and called 19 of 240 identical kernels faster. So
the interval adds, in quadrature on the log scale, a standard deviation for that spread: 0.3% for a
device-bound forward, 1.5% for a host-bound one (its time follows the CPU). These are the smallest values
that brought that sweep to at least 95% coverage and no identical kernel faster; they are calibration
constants, to be checked against each new sweep. The ``imprecise`` flag and the evaluator's decision to
keep timing look at the rounds-only width, since more rounds cannot shrink the spread between processes.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence

from pydantic import BaseModel, ConfigDict

#: An interval whose relative half-width (``sqrt(hi / lo) - 1``) is above this is flagged ``imprecise``,
#: and the evaluator keeps timing past its budget (up to its cap) while it is. 2% keeps every identity
#: candidate whose headline is outside [0.97, 1.03] flagged whenever its interval holds 1.0.
IMPRECISE_HALF_WIDTH = 0.02
INTERVAL_METHOD = "paired-rounds-t+process-spread"
#: Standard deviation (log scale) of the speedup of identical code between two processes, added in
#: quadrature to the rounds' standard error; the host-bound value applies when the forward's time follows
#: the CPU (``KernelResult.host_share`` at or above ``HOST_BOUND_SHARE``). See the module docstring.
PROCESS_SPREAD_SD = 0.003
HOST_BOUND_PROCESS_SPREAD_SD = 0.015
_Z975 = 1.959964

# Two-sided 95% quantiles of Student's t for 1..30 degrees of freedom.
_T975 = (12.7062, 4.3027, 3.1824, 2.7764, 2.5706, 2.4469, 2.3646, 2.3060, 2.2622, 2.2281, 2.2010, 2.1788,
         2.1604, 2.1448, 2.1314, 2.1199, 2.1098, 2.1009, 2.0930, 2.0860, 2.0796, 2.0739, 2.0687, 2.0639,
         2.0595, 2.0555, 2.0518, 2.0484, 2.0452, 2.0423)


def t_quantile_975(df: int) -> float:
    """Student's t 97.5% quantile: a table to 30 degrees of freedom, Cornish-Fisher beyond (error < 1e-4)."""
    if df < 1:
        raise ValueError("degrees of freedom must be at least 1")
    if df <= len(_T975):
        return _T975[df - 1]
    z = _Z975
    return (z + (z**3 + z) / (4 * df) + (5 * z**5 + 16 * z**3 + 3 * z) / (96 * df**2)
            + (3 * z**7 + 19 * z**5 + 17 * z**3 - 15 * z) / (384 * df**3))


class SpeedupInterval(BaseModel):
    """A speedup with its 95% confidence interval and how it was computed."""

    model_config = ConfigDict(frozen=True)

    #: The headline: reference median over candidate median (KernelBench's speedup).
    speedup: float
    lo: float
    hi: float
    rounds: int
    #: The paired estimate, exp(mean paired log ratio), and the standard error of that mean log ratio.
    paired: float
    log_se: float
    method: str = INTERVAL_METHOD
    #: The between-process standard deviation (log scale) included in ``lo``/``hi`` (0: rounds only).
    process_spread_sd: float = 0.0

    @property
    def half_width(self) -> float:
        """Relative half-width: the interval is speedup / (1 + h) .. speedup * (1 + h)."""
        return math.sqrt(self.hi / self.lo) - 1.0 if self.lo > 0 else math.inf

    @property
    def rounds_half_width(self) -> float:
        """The half-width from the rounds alone (what more timing could shrink), headline included."""
        half = t_quantile_975(self.rounds - 1) * self.log_se
        lo = min(self.paired * math.exp(-half), self.speedup)
        hi = max(self.paired * math.exp(half), self.speedup)
        return math.sqrt(hi / lo) - 1.0 if lo > 0 else math.inf

    @property
    def total_log_se(self) -> float:
        """The rounds' standard error and the between-process spread, combined."""
        return math.hypot(self.log_se, self.process_spread_sd)

    @property
    def imprecise(self) -> bool:
        return self.rounds_half_width > IMPRECISE_HALF_WIDTH

    def significantly_faster(self, p: float) -> bool:
        """Faster than ``p`` beyond noise: the whole interval lies above ``p``."""
        return self.lo > p

    def contains(self, value: float) -> bool:
        return self.lo <= value <= self.hi


def paired_log_ratios(ref_ms: Sequence[float], cand_ms: Sequence[float], block_calls: int) -> list[float]:
    """log(reference block median / candidate block median), one per complete round."""
    if block_calls < 1:
        raise ValueError("block_calls must be at least 1")
    rounds = min(len(ref_ms), len(cand_ms)) // block_calls
    out = []
    for r in range(rounds):
        a, b = r * block_calls, (r + 1) * block_calls
        mr, mc = statistics.median(ref_ms[a:b]), statistics.median(cand_ms[a:b])
        if mr > 0 and mc > 0:
            out.append(math.log(mr / mc))
    return out


def speedup_interval(ref_ms: Sequence[float], cand_ms: Sequence[float], block_calls: int | None,
                     process_spread_sd: float = PROCESS_SPREAD_SD) -> SpeedupInterval | None:
    """The headline speedup (ratio of pooled medians) with its 95% interval; None below two rounds.

    ``process_spread_sd`` is the between-process term (0 for the rounds alone; see the module docstring).
    """
    if process_spread_sd < 0:
        raise ValueError("process_spread_sd must not be negative")
    if not block_calls or not ref_ms or not cand_ms:
        return None
    logs = paired_log_ratios(ref_ms, cand_ms, block_calls)
    if len(logs) < 2:
        return None
    mr, mc = statistics.median(ref_ms), statistics.median(cand_ms)
    if mr <= 0 or mc <= 0:
        return None
    headline = mr / mc
    centre = statistics.fmean(logs)
    se = statistics.stdev(logs) / math.sqrt(len(logs))
    half = math.hypot(t_quantile_975(len(logs) - 1) * se, _Z975 * process_spread_sd)
    lo, hi = math.exp(centre - half), math.exp(centre + half)
    return SpeedupInterval(speedup=headline, lo=min(lo, headline), hi=max(hi, headline), rounds=len(logs),
                           paired=math.exp(centre), log_se=se, process_spread_sd=process_spread_sd)


def interval_half_width(ref_ms: Sequence[float], cand_ms: Sequence[float], block_calls: int) -> float:
    """The relative half-width timing drives down, from the rounds alone (infinite until two rounds exist)."""
    iv = speedup_interval(ref_ms, cand_ms, block_calls, process_spread_sd=0.0)
    return iv.half_width if iv is not None else math.inf


def geomean_interval(intervals: Sequence[SpeedupInterval]) -> tuple[float, float, float] | None:
    """Geometric mean of the headline speedups with a 95% interval: ``(geomean, lo, hi)``.

    The interval is centred on the mean paired log ratio; the problems are independent measurements,
    so the variance of the mean is the sum of the per-problem variances (rounds and between-process
    spread) over n squared. The problem set
    is fixed, not a sample, so no between-problem spread is added: the interval says how well *these*
    problems were measured. As for one problem, it is widened to include the headline geomean.
    """
    n = len(intervals)
    if n == 0:
        return None
    headline = math.exp(sum(math.log(iv.speedup) for iv in intervals) / n)
    centre = sum(math.log(iv.paired) for iv in intervals) / n
    se = math.sqrt(sum(iv.total_log_se ** 2 for iv in intervals)) / n
    lo, hi = math.exp(centre - _Z975 * se), math.exp(centre + _Z975 * se)
    return headline, min(lo, headline), max(hi, headline)
