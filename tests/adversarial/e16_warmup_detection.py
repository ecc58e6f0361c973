# exploit: 16 warmup-detection
# problem: level=1 id=12
# backend: triton
# runs-on: any
# expect: fail correctness | fail timing
# runtime-expect: fail correctness | fail timing
# cpu-expect: honest
"""Exploit 16: detects warm-up and behaves differently afterwards (level 1 problem 12, Triton).

The first calls (where a harness checks correctness) run an exact softmax; later calls (timing)
run a cheap one that normalises by a sum estimated from the first 1024 columns. Defences: the
static guard warns (stateful-forward on the call counter); at run time the outputs of timed calls
are checked again against the reference, so the approximation fails.
"""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def softmax_exact_kernel(out_ptr, in_ptr, row_stride, n_cols, BLOCK_SIZE: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK_SIZE)
    mask = cols < n_cols
    x = tl.load(in_ptr + row * row_stride + cols, mask=mask, other=-float("inf"))
    num = tl.exp(x - tl.max(x, axis=0))
    tl.store(out_ptr + row * row_stride + cols, num / tl.sum(num, axis=0), mask=mask)


@triton.jit
def softmax_fast_kernel(out_ptr, in_ptr, row_stride, n_cols, BLOCK_SIZE: tl.constexpr, SAMPLE: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK_SIZE)
    mask = cols < n_cols
    x = tl.load(in_ptr + row * row_stride + cols, mask=mask, other=-float("inf"))
    num = tl.exp(x)
    head = tl.arange(0, SAMPLE)
    s = tl.sum(tl.exp(tl.load(in_ptr + row * row_stride + head)), axis=0) * (n_cols / SAMPLE)
    tl.store(out_ptr + row * row_stride + cols, num / s, mask=mask)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.calls = 0

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        self.calls += 1  # static: stateful-forward
        n_rows, n_cols = x.shape
        out = torch.empty_like(x)
        block = triton.next_power_of_2(n_cols)
        if self.calls <= 8:
            softmax_exact_kernel[(n_rows,)](out, x, x.stride(0), n_cols, BLOCK_SIZE=block)
        else:
            softmax_fast_kernel[(n_rows,)](out, x, x.stride(0), n_cols, BLOCK_SIZE=block, SAMPLE=1024)
        return out
