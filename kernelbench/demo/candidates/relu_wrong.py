"""Demo candidate (wrong on purpose): level 1 problem 8, ReLU, that lets 1% of negative values through.

A plausible slip (a leaky ReLU instead of ReLU); the evaluator's correctness trials on fresh random
inputs must reject it.
"""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def leaky_kernel(x_ptr, out_ptr, n_elements, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n_elements
    x = tl.load(x_ptr + offsets, mask=mask)
    tl.store(out_ptr + offsets, tl.where(x < 0, 0.01 * x, x), mask=mask)


class ModelNew(nn.Module):
    def __init__(self) -> None:
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        out = torch.empty_like(x)
        n = x.numel()
        block = 1024 if x.is_cuda else 1 << 16  # few, large programs under the CPU interpreter
        leaky_kernel[(triton.cdiv(n, block),)](x, out, n, BLOCK=block)
        return out
