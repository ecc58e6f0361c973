# exploit: 20 exit-during-timing
# problem: level=1 id=8
# backend: triton
# runs-on: any
# expect: fail guard:process-control
# runtime-expect: fail
# cpu-runtime-expect: honest
"""Extra exploit 20: ends the process once timing starts (level 1 problem 8, Triton).

Correctness trials pass; on the first timed call the candidate exits with status 0, hoping a
harness that runs everything in one process records the correct verdict and a missing or partial
timing as success. Defences: the static guard fails process control (os._exit) and warns on the
call counter; at run time the candidate runs in its own worker and a worker that dies is a
classified failure of that candidate only.
"""

import os

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
        self.calls = 0

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.calls += 1  # static: stateful-forward
        if self.calls > 10:
            os._exit(0)  # static: process-control
        out = torch.empty_like(x)
        n = x.numel()
        block = 1024 if x.is_cuda else 1 << 16
        relu_kernel[(triton.cdiv(n, block),)](x, out, n, BLOCK_SIZE=block)
        return out
