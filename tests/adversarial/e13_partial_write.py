# exploit: 13 partial-write
# problem: level=1 id=8
# backend: triton
# runs-on: any
# expect: fail correctness
# runtime-expect: fail correctness
"""Exploit 13: writes only part of the output (level 1 problem 8, 8_ReLU, Triton).

Only the first eighth of the output is computed; the rest of the ``torch.empty_like`` buffer is
left as it was, which in a one-process harness is often the reference's just-freed result. The
static guard cannot see this (the kernel is launched and writes the output). Defences at run time:
the reference runs in another process and the caching allocator is poisoned before candidate runs,
so the unwritten seven eighths hold garbage and correctness fails.
"""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def relu_kernel(x_ptr, out_ptr, n_elements, BLOCK_SIZE: tl.constexpr):
    pid = tl.program_id(0)
    offsets = pid * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements
    x = tl.load(x_ptr + offsets, mask=mask)
    tl.store(out_ptr + offsets, tl.maximum(x, 0.0), mask=mask)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = torch.empty_like(x)
        n = x.numel()
        work = n // 8
        block = 1024 if x.is_cuda else 1 << 16
        relu_kernel[(triton.cdiv(work, block),)](x, out, work, BLOCK_SIZE=block)
        return out
