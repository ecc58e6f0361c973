"""Worked solution, level 1 problem 10 (Sigmoid): one vectorised Triton pass.

sigmoid(x) = 1 / (1 + exp(-x)), computed in fp32 whatever the storage type. For very negative x,
exp(-x) overflows to +inf and the quotient is exactly 0, which is the correctly rounded answer;
no branch is needed. One read and one write per element: the kernel is bandwidth-bound.
"""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def sigmoid_kernel(x_ptr, out_ptr, n_elements, BLOCK: tl.constexpr):
    offsets = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n_elements
    x = tl.load(x_ptr + offsets, mask=mask, other=0.0).to(tl.float32)
    y = 1.0 / (1.0 + tl.exp(-x))
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
        sigmoid_kernel[(triton.cdiv(n, block),)](x, out, n, BLOCK=block, num_warps=warps)
        return out
