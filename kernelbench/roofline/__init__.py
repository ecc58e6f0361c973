"""Speed of light: a roofline lower bound on a problem's runtime on a given GPU and precision.

``time >= max(FLOPs / peak FLOP/s, minimum bytes / memory bandwidth)``.

* FLOPs are counted by ``torch.utils.flop_counter.FlopCounterMode`` on the *reference* forward. It
  counts matmuls, convolutions and attention, not element-wise work, so an element-wise or reduction
  problem shows 0 FLOPs and its bound is the memory term, which dominates such problems anyway.
* Minimum bytes: every input tensor read once, every output written once, every parameter and buffer
  read once, at the precision's element size (fp32 4 bytes, fp16/bf16 2; integer tensors keep theirs).
  Intermediates are not counted: a fully fused kernel need not write them.

The problem's code is trusted (it is the reference), so it runs in this process: first with the
default device set to ``meta`` (shapes only, no memory, no compute), and only if that fails on a real
CPU run, which the result says. Costs are cached by problem hash, in memory and in a JSON file.

The bound uses the FLOPs of the reference's algorithm. A candidate with a cheaper algorithm (exploiting
a diagonal or triangular input, Winograd convolution) can legitimately beat it, so beating it is a
reason to look, not a verdict.
"""

from kernelbench.hardware import find_gpu_spec  # noqa: F401  (re-exported: callers took it from here)
from kernelbench.roofline.bounds import (
    FP32_MATH,
    ProblemRoofline,
    RooflineBound,
    SpeedOfLightCheck,
    bound,
    check_speed_of_light,
    fraction_of_sol,
    problem_roofline,
    roofline_bound,
    roofline_for,
)
from kernelbench.roofline.cost import (
    COST_MODEL_VERSION,
    CPU_FALLBACK_MAX_BYTES,
    ELEMENT_SIZE,
    PRECISIONS,
    CostCache,
    CostRecord,
    CostUnavailableError,
    ProblemCost,
    TensorTally,
    count_cost,
    default_cache,
    default_cache_path,
    problem_cost,
)

__all__ = [
    "COST_MODEL_VERSION", "FP32_MATH", "CPU_FALLBACK_MAX_BYTES", "ELEMENT_SIZE", "PRECISIONS", "CostCache", "CostRecord",
    "CostUnavailableError", "ProblemCost", "ProblemRoofline", "RooflineBound", "SpeedOfLightCheck", "TensorTally",
    "bound", "check_speed_of_light", "count_cost", "default_cache", "default_cache_path", "find_gpu_spec",
    "fraction_of_sol", "problem_cost", "problem_roofline", "roofline_bound", "roofline_for",
]
