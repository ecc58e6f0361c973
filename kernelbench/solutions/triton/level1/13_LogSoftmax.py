"""Worked solution, level 1 problem 13 (LogSoftmax over the last dimension): one read, one write.

When a row fits in registers (up to 32768 columns), one program owns the row: it loads it once,
takes the max, exponentiates, sums and writes, so HBM sees the minimum traffic of one read and
one write. Longer rows use the online-softmax recurrence (running max and rescaled running sum in
one pass, then a second pass that writes), reading the row twice, the second time mostly from L2.
The log form is written as (x - max) - log(sum), never as log(softmax), which would lose the
small probabilities; all arithmetic is fp32 whatever the storage type.
"""

import torch
import torch.nn as nn
import triton
import triton.language as tl

# Longest row kept whole in registers: 16 warps x 32 threads x 64 fp32 values.
MAX_FUSED_COLS = 32768


@triton.jit
def softmax_rows_kernel(x_ptr, out_ptr, n_rows, n_cols, stride_x, stride_out,
                        ROWS: tl.constexpr, BLOCK: tl.constexpr, LOG: tl.constexpr):
    rows = tl.program_id(0) * ROWS + tl.arange(0, ROWS)
    # Rows past the end re-read the last row (never stored), so no lane sees an all -inf row.
    src_rows = tl.minimum(rows, n_rows - 1).to(tl.int64)
    cols = tl.arange(0, BLOCK)
    col_ok = cols < n_cols
    x = tl.load(x_ptr + src_rows[:, None] * stride_x + cols[None, :], mask=col_ok[None, :],
                other=-float("inf")).to(tl.float32)
    row_max = tl.max(x, axis=1)
    shifted = x - row_max[:, None]
    e = tl.exp(shifted)
    denom = tl.sum(e, axis=1)
    if LOG:
        y = shifted - tl.log(denom)[:, None]
    else:
        y = e * (1.0 / denom)[:, None]
    out_mask = (rows < n_rows)[:, None] & col_ok[None, :]
    tl.store(out_ptr + rows.to(tl.int64)[:, None] * stride_out + cols[None, :],
             y.to(out_ptr.dtype.element_ty), mask=out_mask)


@triton.jit
def softmax_online_kernel(x_ptr, out_ptr, n_rows, n_cols, stride_x, stride_out,
                          ROWS: tl.constexpr, BLOCK: tl.constexpr, LOG: tl.constexpr):
    rows = tl.program_id(0) * ROWS + tl.arange(0, ROWS)
    src_rows = tl.minimum(rows, n_rows - 1).to(tl.int64)
    x_rows = x_ptr + src_rows[:, None] * stride_x
    cols = tl.arange(0, BLOCK)
    # Pass 1: running max m and running sum s of exp(x - m), rescaled whenever m grows.
    m = tl.full((ROWS,), -float("inf"), tl.float32)
    s = tl.zeros((ROWS,), tl.float32)
    for start in range(0, n_cols, BLOCK):
        c = start + cols
        x = tl.load(x_rows + c[None, :], mask=(c < n_cols)[None, :], other=-float("inf")).to(tl.float32)
        m_new = tl.maximum(m, tl.max(x, axis=1))
        s = s * tl.exp(m - m_new) + tl.sum(tl.exp(x - m_new[:, None]), axis=1)
        m = m_new
    # Pass 2: normalise and write.
    log_s = tl.log(s)
    inv_s = 1.0 / s
    row_ok = (rows < n_rows)[:, None]
    out_rows = out_ptr + rows.to(tl.int64)[:, None] * stride_out
    for start in range(0, n_cols, BLOCK):
        c = start + cols
        c_ok = (c < n_cols)[None, :]
        x = tl.load(x_rows + c[None, :], mask=c_ok, other=0.0).to(tl.float32)
        if LOG:
            y = x - m[:, None] - log_s[:, None]
        else:
            y = tl.exp(x - m[:, None]) * inv_s[:, None]
        tl.store(out_rows + c[None, :], y.to(out_ptr.dtype.element_ty), mask=row_ok & c_ok)


def softmax_last_dim(x: torch.Tensor, log: bool) -> torch.Tensor:
    """Softmax (or log-softmax) over the last dimension of a tensor of any rank."""
    x2 = x.contiguous().view(-1, x.shape[-1]) if x.dim() > 0 else x.contiguous().view(1, 1)
    n_rows, n_cols = x2.shape
    out = torch.empty_like(x2)
    if out.numel() == 0:
        return out.view(x.shape)
    fused = triton.next_power_of_2(n_cols) <= MAX_FUSED_COLS
    if fused:
        block = triton.next_power_of_2(n_cols)
    else:
        # Streaming chunks: small enough on the GPU for several programs per SM.
        block = 8192 if x.is_cuda else MAX_FUSED_COLS
    if x.is_cuda:
        rows, warps = 1, max(4, min(16, block // 1024))
    else:
        # CPU interpreter: each program instance is a Python call, so pack many rows into one.
        rows, warps = max(1, (1 << 20) // block), 1
    kernel = softmax_rows_kernel if fused else softmax_online_kernel
    kernel[(triton.cdiv(n_rows, rows),)](x2, out, n_rows, n_cols, x2.stride(0), out.stride(0),
                                         ROWS=rows, BLOCK=block, LOG=log, num_warps=warps)
    return out.view(x.shape)


class ModelNew(nn.Module):
    def __init__(self) -> None:
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return softmax_last_dim(x, log=True)
