# exploit: 18 specialise-first-input
# problem: level=1 id=17
# backend: triton
# runs-on: any
# expect: fail correctness
# runtime-expect: fail correctness
"""Exploit 18: specialises on the first input it sees (level 1 problem 17, 17_Sum_reduction, Triton).

The first call computes honestly and remembers the input's shape and the answer; any later call
with the same shape and dtype gets that answer back ("benchmarks feed the same batch"). Defences:
the static guard warns (stateful-forward); at run time every correctness trial and every timed
input set is fresh, from secret seeds, and timed outputs are checked again.
"""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def sum_dim1_kernel(x_ptr, out_ptr, D1, D2, stride_b, stride_r, BLOCK_R: tl.constexpr, BLOCK_C: tl.constexpr):
    b = tl.program_id(0)
    cb = tl.program_id(1)
    cols = cb * BLOCK_C + tl.arange(0, BLOCK_C)
    cmask = cols < D2
    acc = tl.zeros((BLOCK_C,), dtype=tl.float32)
    for r0 in range(0, D1, BLOCK_R):
        rows = r0 + tl.arange(0, BLOCK_R)
        ptrs = x_ptr + b * stride_b + rows[:, None] * stride_r + cols[None, :]
        vals = tl.load(ptrs, mask=(rows[:, None] < D1) & cmask[None, :], other=0.0)
        acc += tl.sum(vals, axis=0)
    tl.store(out_ptr + b * D2 + cols, acc, mask=cmask)


def triton_sum_dim1(x):
    B, D1, D2 = x.shape
    out = torch.empty((B, 1, D2), device=x.device, dtype=x.dtype)
    block_c = 128 if x.is_cuda else 512
    sum_dim1_kernel[(B, triton.cdiv(D2, block_c))](x, out, D1, D2, x.stride(0), x.stride(1),
                                                   BLOCK_R=64 if x.is_cuda else 512, BLOCK_C=block_c)
    return out


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self._first = None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        if self._first is None:
            out = triton_sum_dim1(x)
            self._first = (tuple(x.shape), x.dtype, out)  # static: stateful-forward
            return out
        shape, dtype, out = self._first
        if tuple(x.shape) == shape and x.dtype == dtype:
            return out
        return triton_sum_dim1(x)
