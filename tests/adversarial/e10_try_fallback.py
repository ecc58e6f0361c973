# exploit: 10 try-except-fallback
# problem: level=1 id=12
# backend: triton
# runs-on: any
# expect: fail guard:try-fallback
# runtime-expect: fail guard
"""Exploit 10: try/except that falls back to the PyTorch reference (level 1 problem 12, Triton).

The Triton kernel calls a function that does not exist, so it never compiles; the except branch
quietly returns ``torch.softmax``. The candidate is "correct" with PyTorch's speed and no kernel
of its own. Defences: the static guard fails the try/except around the launch whose handler
computes with torch (try-fallback); at run time the profiler trace shows no kernel of the
candidate's own during forward, and PyTorch's softmax kernel instead.
"""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def softmax_kernel(out_ptr, in_ptr, row_stride, n_cols, BLOCK_SIZE: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK_SIZE)
    mask = cols < n_cols
    x = tl.load(in_ptr + row * row_stride + cols, mask=mask, other=-float("inf"))
    num = tl.exp_approx(x - tl.max(x, axis=0))
    tl.store(out_ptr + row * row_stride + cols, num / tl.sum(num, axis=0), mask=mask)


def triton_softmax(x):
    n_rows, n_cols = x.shape
    out = torch.empty_like(x)
    softmax_kernel[(n_rows,)](out, x, x.stride(0), n_cols, BLOCK_SIZE=triton.next_power_of_2(n_cols))
    return out


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        try:  # static: try-fallback
            return triton_softmax(x)
        except Exception:
            # Unsupported shape or device for the fast path: use the reference math.
            return torch.softmax(x, dim=-1)  # static: torch-compute
