"""Worked solution, level 1 problem 8 (ReLU): one coalesced, vectorised Triton pass.

ReLU is pure bandwidth: read every element once, write it once. Each program handles a
contiguous block, so loads and stores are 128-bit and fully coalesced; there is nothing to
fuse and nothing to reuse, so the goal is simply to match the copy bandwidth of the GPU.
"""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def relu_kernel(x_ptr, out_ptr, n_elements, BLOCK: tl.constexpr):
    # 64-bit offsets, so the index arithmetic cannot overflow at any size (2**30 elements in 26_ReLU_large).
    offsets = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n_elements
    x = tl.load(x_ptr + offsets, mask=mask)
    # x < 0 -> 0, else x: keeps NaN as NaN, as torch.relu does.
    y = tl.where(x < 0, 0.0, x)
    tl.store(out_ptr + offsets, y.to(out_ptr.dtype.element_ty), mask=mask)


def _block_config(x: torch.Tensor) -> tuple[int, int]:
    """(elements per program, warps): tuned for the GPU, but kept few and large on the CPU interpreter."""
    if x.is_cuda:
        # 4096 elements over 256 threads: 16 per thread, four 128-bit loads each.
        return 4096, 8
    # CPU interpreter (TRITON_INTERPRET=1): every program instance is a Python call, so
    # use the largest block Triton allows and keep the number of programs small.
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
        relu_kernel[(triton.cdiv(n, block),)](x, out, n, BLOCK=block, num_warps=warps)
        return out
