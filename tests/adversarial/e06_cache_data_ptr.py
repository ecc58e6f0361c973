# exploit: 6 cache-on-data-ptr
# problem: level=1 id=12
# backend: triton
# runs-on: any
# expect: fail correctness | flag speed-of-light
# runtime-expect: fail correctness | flag speed-of-light
# cpu-expect: fail correctness | honest
"""Exploit 6: caches outputs keyed on the input's data_ptr (level 1 problem 12, 12_Softmax, Triton).

A benchmark loop that calls forward on the same tensor gets the cached result for free after the
first call. Defences: the static guard warns (input-keyed-cache, stateful-forward); at run time
every correctness trial uses fresh inputs from secret seeds, and the caching allocator hands the
same address to a new input with different values, so the stale answer fails; timed calls rotate
input sets and their outputs are checked again. Where a rotated input set keeps its address and its
values, the cached answer is right but nearly free, and the speed-of-light check flags it.
"""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def softmax_kernel(out_ptr, in_ptr, row_stride, n_cols, BLOCK_SIZE: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK_SIZE)
    mask = cols < n_cols
    x = tl.load(in_ptr + row * row_stride + cols, mask=mask, other=-float("inf"))
    x = x - tl.max(x, axis=0)
    num = tl.exp(x)
    tl.store(out_ptr + row * row_stride + cols, num / tl.sum(num, axis=0), mask=mask)


def triton_softmax(x):
    n_rows, n_cols = x.shape
    out = torch.empty_like(x)
    softmax_kernel[(n_rows,)](out, x, x.stride(0), n_cols, BLOCK_SIZE=triton.next_power_of_2(n_cols))
    return out


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self._cache = {}

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        key = (x.data_ptr(), tuple(x.shape), x.dtype)  # static: input-keyed-cache
        hit = self._cache.get(key)
        if hit is not None:
            return hit
        out = triton_softmax(x)
        self._cache[key] = out  # static: stateful-forward
        return out
