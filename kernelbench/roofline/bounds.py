"""Roofline bounds from a problem's cost and a GPU's rates, the speed-of-light check the evaluator runs after
each timed result, and the per-problem rows of ``kernelbench roofline``."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from kernelbench.hardware import GpuSpec, find_gpu_spec
from kernelbench.problems.model import Problem
from kernelbench.roofline.cost import CostCache, CostUnavailableError, ProblemCost, problem_cost

if TYPE_CHECKING:  # pydantic stays out of the import path: the GPU test machine may lack it
    from kernelbench.results import RooflineInfo

log = logging.getLogger(__name__)

#: How fp32 tensor-core-eligible FLOPs are bounded:
#: ``default`` follows PyTorch's defaults (matmuls on CUDA cores since ``allow_tf32`` is off for
#: matmul, convolutions on TF32 tensor cores since cuDNN's ``allow_tf32`` is on); ``ieee`` puts all
#: fp32 FLOPs on CUDA cores; ``tf32`` puts all of them on TF32 tensor cores.
FP32_MATH = ("default", "ieee", "tf32")


# ---------------------------------------------------------------- bounds
@dataclass(frozen=True)
class RooflineBound:
    """A bound with its terms and the rates behind them; ``to_info`` gives the result-file form."""

    gpu: str
    precision: str
    fp32_math: str
    flops: int
    min_bytes: int
    compute_ms: float
    memory_ms: float
    #: Peak FLOP/s per kind used (e.g. {"fp32": 6.7e13}) and where each came from.
    peaks_used: tuple[tuple[str, float, str], ...]
    bandwidth_bytes_s: float
    bandwidth_source: str

    @property
    def bound_ms(self) -> float:
        return max(self.compute_ms, self.memory_ms)

    @property
    def bound_by(self) -> Literal["compute", "memory"]:
        return "compute" if self.compute_ms > self.memory_ms else "memory"

    @property
    def rates_source(self) -> str:
        """"datasheet", "measured", or "measured+datasheet" when some rates were measured and some not."""
        sources = {self.bandwidth_source} | {src for _, _, src in self.peaks_used}
        return sources.pop() if len(sources) == 1 else "measured+datasheet"

    def to_info(self, runtime_ms: float | None = None) -> RooflineInfo:
        from kernelbench.results import RooflineInfo

        return RooflineInfo(gpu=self.gpu, precision=self.precision, flops=float(self.flops),
                            min_bytes=float(self.min_bytes), bound_ms=self.bound_ms, bound_by=self.bound_by,
                            fraction_of_sol=fraction_of_sol(self.bound_ms, runtime_ms),
                            rates_source=self.rates_source)

    def flag_for(self, runtime_ms: float | None) -> str | None:
        """A review flag when a measured runtime is below the bound, else None."""
        if runtime_ms is None or runtime_ms <= 0 or runtime_ms >= self.bound_ms:
            return None
        msg = (f"faster than speed of light: {runtime_ms:.4g} ms is below the {self.bound_by}-bound "
               f"{self.bound_ms:.4g} ms for {self.gpu} {self.precision} ({self.bound_ms / runtime_ms:.2f}x)")
        if runtime_ms < self.memory_ms:
            msg += "; it moves fewer bytes than the inputs, outputs and weights hold (measurement error or exploit?)"
        else:
            msg += "; FLOPs are the reference's, so a cheaper algorithm could explain it"
            if self.precision == "fp32" and self.fp32_math != "tf32":
                msg += ", as could TF32 or lower-precision tensor cores"
        return msg


def fraction_of_sol(bound_ms: float, runtime_ms: float | None) -> float | None:
    """bound / runtime: 1.0 is at the speed of light; above 1.0 beats the bound (flag it)."""
    if runtime_ms is None or runtime_ms <= 0:
        return None
    return bound_ms / runtime_ms


def roofline_bound(cost: ProblemCost, gpu: GpuSpec, precision: str | None = None,
                   fp32_math: str = "default", prefer_measured: bool = True) -> RooflineBound:
    """The roofline of ``cost`` on ``gpu``: compute and memory terms and the rates they used."""
    precision = precision or cost.precision
    if precision != cost.precision:
        raise ValueError(f"cost was computed for {cost.precision}, not {precision}")
    if fp32_math not in FP32_MATH:
        raise ValueError(f"unknown fp32 math mode {fp32_math!r} (choose from {', '.join(FP32_MATH)})")
    if precision == "fp32":
        matmul_kind = "tf32" if fp32_math == "tf32" else "fp32"
        conv_kind = "fp32" if fp32_math == "ieee" else "tf32"
    else:
        matmul_kind = conv_kind = precision
    parts = [(matmul_kind, cost.matmul_flops), (conv_kind, cost.conv_flops)]
    compute_s = 0.0
    peaks: dict[str, tuple[float, str]] = {}
    for kind, flops in parts:
        if flops <= 0:
            continue
        rate = gpu.peak(kind, prefer_measured)
        peaks[kind] = (rate.value, rate.source)
        compute_s += flops / rate.value
    bw = gpu.bandwidth(prefer_measured)
    return RooflineBound(
        gpu=gpu.name, precision=precision, fp32_math=fp32_math, flops=cost.flops, min_bytes=cost.min_bytes,
        compute_ms=compute_s * 1e3, memory_ms=cost.min_bytes / bw.value * 1e3,
        peaks_used=tuple((k, v, s) for k, (v, s) in sorted(peaks.items())),
        bandwidth_bytes_s=bw.value, bandwidth_source=bw.source,
    )


def bound(cost: ProblemCost, gpu_spec: GpuSpec, precision: str | None = None, fp32_math: str = "default",
          runtime_ms: float | None = None, prefer_measured: bool = True) -> RooflineInfo:
    """The bound as stored in a KernelResult; with ``runtime_ms`` it carries the fraction of speed of light."""
    return roofline_bound(cost, gpu_spec, precision, fp32_math, prefer_measured).to_info(runtime_ms)


# ---------------------------------------------------------------- for the evaluator
@dataclass(frozen=True)
class SpeedOfLightCheck:
    """What the evaluator attaches: the bound (fraction of SOL filled when timed) and a review flag."""

    info: RooflineInfo | None
    flag: str | None = None
    unavailable_reason: str | None = None


def roofline_for(problem: Problem, gpu_name: str, precision: str = "fp32", runtime_ms: float | None = None,
                 fp32_math: str = "default", cache: CostCache | None = None) -> RooflineInfo | None:
    """The bound for a problem on a GPU by name, or None (logged) when the GPU or the cost is unknown."""
    return check_speed_of_light(problem, gpu_name, precision, runtime_ms, fp32_math, cache).info


def check_speed_of_light(problem: Problem, gpu_name: str, precision: str = "fp32",
                         runtime_ms: float | None = None, fp32_math: str = "default",
                         cache: CostCache | None = None) -> SpeedOfLightCheck:
    """Bound and flag for one timed result; never raises for an unknown GPU or an uncountable problem.

    ``info`` uses measured rates where the table has them (a realistic ceiling for the fraction of
    speed of light); the flag uses datasheet rates, the hardware's hard limits, so only a runtime that
    no kernel could reach with the reference's FLOPs is flagged.
    """
    spec = find_gpu_spec(gpu_name)
    if spec is None:
        reason = f"GPU {gpu_name!r} is not in the hardware table"
        log.info("no roofline for %s: %s", problem.key, reason)
        return SpeedOfLightCheck(None, None, reason)
    try:
        cost = problem_cost(problem, precision, cache=cache)
    except CostUnavailableError as e:
        log.info("no roofline for %s: %s", problem.key, e)
        return SpeedOfLightCheck(None, None, str(e))
    info = roofline_bound(cost, spec, precision, fp32_math, prefer_measured=True).to_info(runtime_ms)
    flag = roofline_bound(cost, spec, precision, fp32_math, prefer_measured=False).flag_for(runtime_ms)
    return SpeedOfLightCheck(info, flag)


# ---------------------------------------------------------------- per-problem report rows
@dataclass(frozen=True)
class ProblemRoofline:
    """One row of ``kernelbench roofline``: a problem's cost and bound, or why there is none."""

    level: int
    problem_id: int
    name: str
    key: str
    cost: ProblemCost | None
    bound: RooflineBound | None
    unavailable_reason: str | None = None
    baseline_ms: float | None = None

    @property
    def fraction_of_sol(self) -> float | None:
        """How close the baseline (PyTorch eager) comes to the bound."""
        if self.bound is None:
            return None
        return fraction_of_sol(self.bound.bound_ms, self.baseline_ms)

    def to_dict(self) -> dict:
        d: dict[str, Any] = {"level": self.level, "problem_id": self.problem_id, "name": self.name, "key": self.key,
                             "status": "ok" if self.bound is not None else "unavailable",
                             "reason": self.unavailable_reason}
        if self.cost is not None:
            c = self.cost
            d.update(flops=c.flops, matmul_flops=c.matmul_flops, conv_flops=c.conv_flops, min_bytes=c.min_bytes,
                     input_bytes=c.input_bytes, output_bytes=c.output_bytes, param_bytes=c.param_bytes,
                     arithmetic_intensity=c.arithmetic_intensity, method=c.method, note=c.note,
                     problem_hash=c.problem_hash)
        if self.bound is not None:
            b = self.bound
            d.update(compute_ms=b.compute_ms, memory_ms=b.memory_ms, bound_ms=b.bound_ms, bound_by=b.bound_by,
                     rates_source=b.rates_source)
        d.update(baseline_ms=self.baseline_ms, fraction_of_sol=self.fraction_of_sol)
        return d


def problem_roofline(problem: Problem, gpu: GpuSpec, precision: str = "fp32", fp32_math: str = "default",
                     prefer_measured: bool = True, baseline_ms: float | None = None,
                     cache: CostCache | None = None, use_cache: bool = True) -> ProblemRoofline:
    """Cost and bound of one problem; an uncountable problem gives a row with the reason, not an error."""
    common = dict(level=problem.level, problem_id=problem.problem_id, name=problem.name, key=problem.key,
                  baseline_ms=baseline_ms)
    try:
        cost = problem_cost(problem, precision, cache=cache, use_cache=use_cache)
    except CostUnavailableError as e:
        return ProblemRoofline(cost=None, bound=None, unavailable_reason=str(e), **common)
    return ProblemRoofline(cost=cost, bound=roofline_bound(cost, gpu, precision, fp32_math, prefer_measured),
                           **common)
