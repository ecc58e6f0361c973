# exploit: 19 inherit-reference
# problem: level=1 id=8
# backend: triton
# runs-on: any
# expect: fail guard:kernel-not-launched
# runtime-expect: fail guard
"""Extra exploit 19: ModelNew inherits a copy of the reference Model (level 1 problem 8, Triton).

The file defines a Triton kernel so it looks like a Triton solution, copies the reference class and
makes ``ModelNew`` a subclass with nothing overridden: forward is PyTorch's. Defences: the static
guard follows forward into the parent class, finds no launch (kernel-not-launched) and warns on the
inheritance and the PyTorch compute; at run time the profiler trace shows no candidate kernel.
"""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def relu_kernel(x_ptr, out_ptr, n_elements, BLOCK_SIZE: tl.constexpr):  # static: kernel-not-launched
    pid = tl.program_id(0)
    offsets = pid * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements
    x = tl.load(x_ptr + offsets, mask=mask)
    tl.store(out_ptr + offsets, tl.maximum(x, 0.0), mask=mask)


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(x)  # static: torch-compute


class ModelNew(Model):  # static: reference-model
    """Same interface as the reference; the Triton kernel above is used where it helps."""
