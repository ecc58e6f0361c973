"""Worked solution, level 1 problem 14 (LayerNorm over the last dimension): one read, one write.

A row of 4096 values fits in the registers of one program, so mean, variance, normalisation and
the affine transform all happen on data loaded once: the minimum HBM traffic (one read of x, one
write of the output, plus the small weight and bias, which stay in L2). The variance is the
two-pass form mean((x - mean)^2), computed in fp32, as torch computes it: the one-pass
E[x^2] - E[x]^2 shortcut loses precision when |mean| is large.
"""

import torch
import torch.nn as nn
import triton
import triton.language as tl

MAX_COLS = 65536


@triton.jit
def layernorm_kernel(x_ptr, w_ptr, b_ptr, out_ptr, n_rows, n_cols, stride_x, stride_out, eps,
                     ROWS: tl.constexpr, BLOCK: tl.constexpr):
    rows = tl.program_id(0) * ROWS + tl.arange(0, ROWS)
    src_rows = tl.minimum(rows, n_rows - 1).to(tl.int64)
    cols = tl.arange(0, BLOCK)
    col_ok = cols < n_cols
    x = tl.load(x_ptr + src_rows[:, None] * stride_x + cols[None, :], mask=col_ok[None, :],
                other=0.0).to(tl.float32)
    mean = tl.sum(x, axis=1) / n_cols
    centered = tl.where(col_ok[None, :], x - mean[:, None], 0.0)
    var = tl.sum(centered * centered, axis=1) / n_cols
    rstd = 1.0 / tl.sqrt(var + eps)
    w = tl.load(w_ptr + cols, mask=col_ok, other=0.0).to(tl.float32)
    b = tl.load(b_ptr + cols, mask=col_ok, other=0.0).to(tl.float32)
    y = centered * rstd[:, None] * w[None, :] + b[None, :]
    out_mask = (rows < n_rows)[:, None] & col_ok[None, :]
    tl.store(out_ptr + rows.to(tl.int64)[:, None] * stride_out + cols[None, :],
             y.to(out_ptr.dtype.element_ty), mask=out_mask)


class ModelNew(nn.Module):
    def __init__(self, hidden: int, eps: float) -> None:
        super().__init__()
        # Created exactly as the reference creates it, so the same seed gives the same parameters.
        self.norm = nn.LayerNorm(hidden, eps=eps)
        with torch.no_grad():
            self.norm.weight.copy_(1.0 + 0.5 * torch.randn(hidden))
            self.norm.bias.copy_(0.5 * torch.randn(hidden))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        n_cols = x.shape[-1]
        block = triton.next_power_of_2(n_cols)
        if block > MAX_COLS:
            raise ValueError(f"this LayerNorm kernel keeps a row in registers: at most {MAX_COLS} columns, got {n_cols}")
        x2 = x.contiguous().view(-1, n_cols)
        out = torch.empty_like(x2)
        n_rows = x2.shape[0]
        if out.numel() == 0:
            return out.view(x.shape)
        if x.is_cuda:
            rows, warps = 1, max(4, min(16, block // 512))
        else:
            # CPU interpreter: each program instance is a Python call, so pack many rows into one.
            rows, warps = max(1, (1 << 20) // block), 1
        layernorm_kernel[(triton.cdiv(n_rows, rows),)](
            x2, self.norm.weight, self.norm.bias, out, n_rows, n_cols, x2.stride(0), out.stride(0),
            self.norm.eps, ROWS=rows, BLOCK=block, num_warps=warps)
        return out.view(x.shape)
