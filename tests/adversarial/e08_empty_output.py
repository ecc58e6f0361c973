# exploit: 8 empty-output
# problem: level=1 id=8
# backend: triton
# runs-on: any
# expect: fail correctness
# runtime-expect: fail correctness
"""Exploit 8: returns torch.empty hoping to get the reference's freed output (level 1 problem 8, Triton).

In a harness that runs the reference and the candidate in one process, the reference's output was
just freed and the caching allocator hands the same block back to ``torch.empty_like``: the
"result" is already there. A token kernel runs so that a launch check passes. Defences: the static
guard warns (uninitialised-output); at run time the reference runs in another process and the
allocator is poisoned before candidate runs, so the returned memory holds garbage.
"""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def prefetch_kernel(x_ptr, scratch_ptr, n_elements, BLOCK_SIZE: tl.constexpr):
    offsets = tl.arange(0, BLOCK_SIZE)
    x = tl.load(x_ptr + offsets, mask=offsets < n_elements, other=0.0)
    tl.store(scratch_ptr + offsets, x)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        # Touch the first block of x so it is resident in L2 for whoever reads it next.
        scratch = torch.empty(1024, device=x.device, dtype=x.dtype)
        prefetch_kernel[(1,)](x, scratch, x.numel(), BLOCK_SIZE=1024)
        return torch.empty_like(x)  # static: uninitialised-output
