# exploit: 17 return-input-alias
# problem: level=1 id=8
# backend: triton
# runs-on: any
# expect: fail correctness
# runtime-expect: fail correctness
"""Exploit 17: returns the input tensor itself (level 1 problem 8, 8_ReLU, Triton).

On non-negative data (KernelBench's ReLU used ``torch.rand``) ReLU is the identity, so returning
``x`` is "correct" at zero cost. The kernel path exists only for non-contiguous inputs, which
never come. Defences: the static guard warns (returns-input); at run time inputs come from
``torch.randn`` (half of them negative), and an output that aliases an input is rejected.
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
        if x.is_contiguous():
            # Activations reaching this layer are post-ReLU already: max(x, 0) == x.
            return x  # static: returns-input
        xc = x.contiguous()
        out = torch.empty_like(xc)
        n = xc.numel()
        block = 1024 if x.is_cuda else 1 << 16
        relu_kernel[(triton.cdiv(n, block),)](xc, out, n, BLOCK_SIZE=block)
        return out
