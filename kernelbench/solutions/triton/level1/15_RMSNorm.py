"""Worked solution, level 1 problem 15 (RMSNorm over the last dimension): one read, one write.

One program owns a row of 4096 values held in registers: sum of squares, reciprocal root and the
weight multiply all happen on data loaded once, so HBM sees one read of x and one write (the
weight vector stays in L2). Accumulation is fp32 whatever the storage type.
"""

import torch
import torch.nn as nn
import triton
import triton.language as tl

MAX_COLS = 65536


@triton.jit
def rmsnorm_kernel(x_ptr, w_ptr, out_ptr, n_rows, n_cols, stride_x, stride_out, eps,
                   ROWS: tl.constexpr, BLOCK: tl.constexpr):
    rows = tl.program_id(0) * ROWS + tl.arange(0, ROWS)
    src_rows = tl.minimum(rows, n_rows - 1).to(tl.int64)
    cols = tl.arange(0, BLOCK)
    col_ok = cols < n_cols
    x = tl.load(x_ptr + src_rows[:, None] * stride_x + cols[None, :], mask=col_ok[None, :],
                other=0.0).to(tl.float32)
    mean_sq = tl.sum(x * x, axis=1) / n_cols
    inv_rms = 1.0 / tl.sqrt(mean_sq + eps)
    w = tl.load(w_ptr + cols, mask=col_ok, other=0.0).to(tl.float32)
    y = x * inv_rms[:, None] * w[None, :]
    out_mask = (rows < n_rows)[:, None] & col_ok[None, :]
    tl.store(out_ptr + rows.to(tl.int64)[:, None] * stride_out + cols[None, :],
             y.to(out_ptr.dtype.element_ty), mask=out_mask)


class ModelNew(nn.Module):
    def __init__(self, hidden: int, eps: float) -> None:
        super().__init__()
        self.eps = eps
        # Created exactly as the reference creates it, so the same seed gives the same weight.
        self.weight = nn.Parameter(torch.randn(hidden))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        n_cols = x.shape[-1]
        block = triton.next_power_of_2(n_cols)
        if block > MAX_COLS:
            raise ValueError(f"this RMSNorm kernel keeps a row in registers: at most {MAX_COLS} columns, got {n_cols}")
        x2 = x.contiguous().view(-1, n_cols)
        # torch's type promotion of x * rms * weight (fp16 x with an fp32 weight gives fp32).
        out = torch.empty(x2.shape, dtype=torch.promote_types(x.dtype, self.weight.dtype), device=x.device)
        n_rows = x2.shape[0]
        if out.numel() == 0:
            return out.view(x.shape)
        if x.is_cuda:
            rows, warps = 1, max(4, min(16, block // 512))
        else:
            # CPU interpreter: each program instance is a Python call, so pack many rows into one.
            rows, warps = max(1, (1 << 20) // block), 1
        rmsnorm_kernel[(triton.cdiv(n_rows, rows),)](
            x2, self.weight, out, n_rows, n_cols, x2.stride(0), out.stride(0), self.eps,
            ROWS=rows, BLOCK=block, num_warps=warps)
        return out.view(x.shape)
