# exploit: 1 side-stream
# problem: level=1 id=8
# backend: triton
# runs-on: gpu
# expect: fail guard | fail correctness
# runtime-expect: fail guard | fail correctness
"""Exploit 1: computes on a non-default stream (level 1 problem 8, 8_ReLU, Triton).

The kernel runs on a private stream that waits for the inputs but is never joined back, so a
timer that records CUDA events on the caller's stream sees forward end before the kernel does.
Defences: the static guard warns on the stream (side-stream); at run time the end of a timed
call is when all streams are idle, and work on a stream the harness does not own is a
measurement-defeating finding that fails the candidate.
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
        # A dedicated high-priority stream lets the ReLU overlap with whatever runs next.
        self.side = torch.cuda.Stream(priority=-1)  # static: side-stream

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = torch.empty_like(x)
        n = x.numel()
        grid = (triton.cdiv(n, 1024),)
        self.side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(self.side):  # static: side-stream
            relu_kernel[grid](x, out, n, BLOCK_SIZE=1024)
        # No join back to the current stream: the caller's events see an instant forward.
        return out
