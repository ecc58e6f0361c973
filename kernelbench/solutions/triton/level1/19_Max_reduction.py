"""Worked solution, level 1 problem 19 (max over dim 1): a coalesced column reduction.

Same shape of work as a middle-dimension sum: each program owns one batch index and a strip of
BLOCK_N contiguous columns and walks down the reduced dimension, so every input byte is read once
with coalesced loads and no atomics. Max is exact in any order, so there is no precision concern.
(Inputs here are finite; NaN propagation, which torch.max does, is not handled.)
"""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def max_dim1_kernel(x_ptr, out_ptr, R, N, stride_b, stride_r, stride_out_b,
                    BLOCK_R: tl.constexpr, BLOCK_N: tl.constexpr):
    pid_b = tl.program_id(0).to(tl.int64)
    cols = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
    col_ok = cols < N
    base = x_ptr + pid_b * stride_b + cols[None, :]
    acc = tl.full((BLOCK_R, BLOCK_N), -float("inf"), tl.float32)
    for r0 in range(0, R, BLOCK_R):
        r = r0 + tl.arange(0, BLOCK_R)
        x = tl.load(base + r.to(tl.int64)[:, None] * stride_r, mask=(r < R)[:, None] & col_ok[None, :],
                    other=-float("inf"))
        acc = tl.maximum(acc, x.to(tl.float32))
    best = tl.max(acc, axis=0)
    tl.store(out_ptr + pid_b * stride_out_b + cols, best.to(out_ptr.dtype.element_ty), mask=col_ok)


def max_over_dim(x: torch.Tensor, dim: int) -> torch.Tensor:
    """Max over ``dim`` (dimension dropped), viewing x as (outer, reduced, inner)."""
    dim = dim % x.dim()
    r = x.shape[dim]
    if r == 0:
        raise ValueError(f"max over an empty dimension {dim} of shape {tuple(x.shape)}")
    outer = 1
    for s in x.shape[:dim]:
        outer *= s
    inner = 1
    for s in x.shape[dim + 1:]:
        inner *= s
    x3 = x.contiguous().view(outer, r, inner)
    out = torch.empty(x.shape[:dim] + x.shape[dim + 1:], dtype=x.dtype, device=x.device)
    if out.numel() == 0:
        return out
    out2 = out.view(outer, inner)
    if x.is_cuda:
        block_r, block_n, warps = 64, 64, 4
    else:
        # CPU interpreter: each program instance is a Python call, so use the largest tiles allowed.
        block_n = min(triton.next_power_of_2(inner), 1024)
        block_r, warps = min(triton.next_power_of_2(r), (1 << 20) // block_n), 1
    grid = (outer, triton.cdiv(inner, block_n))
    max_dim1_kernel[grid](x3, out2, r, inner, x3.stride(0), x3.stride(1), out2.stride(0),
                          BLOCK_R=block_r, BLOCK_N=block_n, num_warps=warps)
    return out


class ModelNew(nn.Module):
    def __init__(self) -> None:
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return max_over_dim(x, dim=1)
