"""Worked solution, level 1 problem 11 (Tanh): one vectorised Triton pass.

Triton has no portable tanh, so it is built from exp: with t = exp(-2|x|) in (0, 1],
tanh(|x|) = (1 - t) / (1 + t), and the sign is restored afterwards. Using |x| means exp never
overflows, and the absolute error stays at fp32 rounding level for every input (for tiny |x| the
relative error grows, but the result is then tiny and far inside the absolute tolerance).
"""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def tanh_kernel(x_ptr, out_ptr, n_elements, BLOCK: tl.constexpr):
    offsets = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n_elements
    x = tl.load(x_ptr + offsets, mask=mask, other=0.0).to(tl.float32)
    t = tl.exp(-2.0 * tl.abs(x))
    y = (1.0 - t) / (1.0 + t)
    y = tl.where(x < 0, -y, y)
    tl.store(out_ptr + offsets, y.to(out_ptr.dtype.element_ty), mask=mask)


def _block_config(x: torch.Tensor) -> tuple[int, int]:
    """(elements per program, warps): tuned for the GPU, but kept few and large on the CPU interpreter."""
    if x.is_cuda:
        return 4096, 8
    return 1 << 20, 1


class ModelNew(nn.Module):
    def __init__(self) -> None:
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        out = torch.empty_like(x)
        n = x.numel()
        if n == 0:
            return out
        block, warps = _block_config(x)
        tanh_kernel[(triton.cdiv(n, block),)](x, out, n, BLOCK=block, num_warps=warps)
        return out
