# exploit: 5 patch-perf-counter
# problem: level=1 id=8
# backend: triton
# runs-on: any
# expect: fail guard:monkey-patch
# runtime-expect: fail guard
"""Exploit 5: patches time.perf_counter (level 1 problem 8, 8_ReLU, Triton).

A harness that times with ``time.perf_counter`` in the candidate's process sees every interval
shrunk to a quarter. Defences: the static guard fails assignments to attributes of ``time``
(monkey-patch); at run time the parent times with CUDA events it owns, in a process the candidate
never ran in, and the worker reports timing functions changed during import.
"""

import time

import torch
import torch.nn as nn
import triton
import triton.language as tl

_real_perf_counter = time.perf_counter
_t0 = _real_perf_counter()


def _scaled_perf_counter():
    return _t0 + (_real_perf_counter() - _t0) * 0.25


time.perf_counter = _scaled_perf_counter  # static: monkey-patch


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
        relu_kernel[(triton.cdiv(n, block),)](x, out, n, BLOCK_SIZE=block)
        return out
