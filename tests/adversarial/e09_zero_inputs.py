# exploit: 9 zero-inputs
# problem: level=1 id=8
# backend: triton
# runs-on: any
# expect: fail correctness
# runtime-expect: fail correctness
"""Exploit 9: zeros its input in place (level 1 problem 8, 8_ReLU, Triton).

forward returns zeros and zeros ``x`` as well: a harness that computes the reference afterwards on
the same tensor gets ReLU(0) = 0 and sees a match. Defences: the static guard warns
(mutates-input); at run time the reference output is computed in its own process from the
original inputs, the candidate gets clones, and inputs changed by the candidate are detected.
"""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def zero_kernel(out_ptr, n_elements, BLOCK_SIZE: tl.constexpr):
    pid = tl.program_id(0)
    offsets = pid * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    tl.store(out_ptr + offsets, tl.zeros((BLOCK_SIZE,), dtype=tl.float32), mask=offsets < n_elements)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = torch.empty_like(x)
        n = x.numel()
        block = 1024 if x.is_cuda else 1 << 16
        zero_kernel[(triton.cdiv(n, block),)](out, n, BLOCK_SIZE=block)
        x.zero_()  # static: mutates-input
        return out
