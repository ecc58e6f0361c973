"""Worked solution, level 1 problem 18 (mean over the last dimension): a row reduction.

Rows are contiguous, so each program reduces whole rows with wide coalesced loads, in chunks of
BLOCK columns, keeping a BLOCK-wide fp32 accumulator that is reduced once at the end (each lane
adds only n / BLOCK values in sequence). Every input byte is read exactly once; no atomics.
"""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def mean_rows_kernel(x_ptr, out_ptr, n_rows, n_cols, stride_x,
                     ROWS: tl.constexpr, BLOCK: tl.constexpr):
    rows = tl.program_id(0) * ROWS + tl.arange(0, ROWS)
    src_rows = tl.minimum(rows, n_rows - 1).to(tl.int64)
    x_rows = x_ptr + src_rows[:, None] * stride_x
    acc = tl.zeros((ROWS, BLOCK), tl.float32)
    for start in range(0, n_cols, BLOCK):
        c = start + tl.arange(0, BLOCK)
        acc += tl.load(x_rows + c[None, :], mask=(c < n_cols)[None, :], other=0.0).to(tl.float32)
    mean = tl.sum(acc, axis=1) / n_cols
    tl.store(out_ptr + rows, mean.to(out_ptr.dtype.element_ty), mask=rows < n_rows)


class ModelNew(nn.Module):
    def __init__(self) -> None:
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        n_cols = x.shape[-1]
        x2 = x.contiguous().view(-1, n_cols)
        n_rows = x2.shape[0]
        out = torch.empty(x.shape[:-1], dtype=x.dtype, device=x.device)
        if out.numel() == 0:
            return out
        if n_cols == 0:
            return out.fill_(float("nan"))
        if x.is_cuda:
            rows, block, warps = 1, min(triton.next_power_of_2(n_cols), 4096), 4
        else:
            # CPU interpreter: each program instance is a Python call, so pack many rows into one.
            block = min(triton.next_power_of_2(n_cols), 1 << 20)
            rows, warps = max(1, (1 << 20) // block), 1
        mean_rows_kernel[(triton.cdiv(n_rows, rows),)](x2, out, n_rows, n_cols, x2.stride(0),
                                                       ROWS=rows, BLOCK=block, num_warps=warps)
        return out
