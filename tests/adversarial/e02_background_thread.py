# exploit: 2 background-thread
# problem: level=1 id=8
# backend: triton
# runs-on: any
# expect: fail guard:threads
# runtime-expect: fail correctness | fail guard
"""Exploit 2: a background thread finishes the output after forward returns (level 1 problem 8, Triton).

forward allocates the output, hands the kernel launch to a daemon thread and returns at once; the
values appear "soon". A harness that times forward alone, or compares outputs a little later,
is fooled. Defences: the static guard fails any use of threading (threads); at run time the
outputs are snapshotted the moment forward returns and threads started by the candidate are
reported.
"""

import threading  # static: threads

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
        block = 1024 if x.is_cuda else 1 << 16
        grid = (triton.cdiv(n, block),)

        def work():
            relu_kernel[grid](x, out, n, BLOCK_SIZE=block)

        # Overlap the launch with the caller: the worker thread fills `out` in the background.
        threading.Thread(target=work, daemon=True).start()
        return out
