"""Worked solution, level 1 problem 28 (Sum_reduction_large, 4 GiB, dim 1, keepdim): a coalesced column reduction.

The reduced dimension is the middle one, so consecutive memory runs along the *kept* last
dimension. Each program owns one batch index and a strip of BLOCK_N columns and walks down the
reduced dimension BLOCK_R rows at a time: every load is a set of contiguous, coalesced row
segments, every input byte is read exactly once, and there are no atomics (the result is
deterministic). Partial sums stay in a BLOCK_N x BLOCK_R fp32 accumulator that is tree-reduced
once at the end, so each lane adds only R / BLOCK_R values in sequence: far more accurate than one
sequential fp32 sum over all R, which drifts by ~1e-4 where a sum of 4096 values is near zero.
"""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def sum_dim1_kernel(x_ptr, out_ptr, R, N, stride_b, stride_r, stride_out_b,
                    BLOCK_R: tl.constexpr, BLOCK_N: tl.constexpr):
    pid_b = tl.program_id(0).to(tl.int64)
    cols = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
    col_ok = cols < N
    # Tiles are (columns, rows): memory is contiguous along the columns (dimension 0 of the tile),
    # and the final reduction runs along dimension 1 as a tree (on the GPU, and pairwise in the CPU
    # interpreter's numpy, which would otherwise add a column's partial sums one by one).
    base = x_ptr + pid_b * stride_b + cols[:, None]
    acc = tl.zeros((BLOCK_N, BLOCK_R), tl.float32)
    for r0 in range(0, R, BLOCK_R):
        r = r0 + tl.arange(0, BLOCK_R)
        x = tl.load(base + r.to(tl.int64)[None, :] * stride_r, mask=col_ok[:, None] & (r < R)[None, :], other=0.0)
        acc += x.to(tl.float32)
    total = tl.sum(acc, axis=1)
    tl.store(out_ptr + pid_b * stride_out_b + cols, total.to(out_ptr.dtype.element_ty), mask=col_ok)


def sum_over_dim(x: torch.Tensor, dim: int) -> torch.Tensor:
    """Sum over ``dim`` with keepdim=True, viewing x as (outer, reduced, inner)."""
    dim = dim % x.dim()
    outer = 1
    for s in x.shape[:dim]:
        outer *= s
    inner = 1
    for s in x.shape[dim + 1:]:
        inner *= s
    r = x.shape[dim]
    x3 = x.contiguous().view(outer, r, inner)
    out_shape = list(x.shape)
    out_shape[dim] = 1
    out = torch.empty(out_shape, dtype=x.dtype, device=x.device)
    if out.numel() == 0:
        return out
    if r == 0:
        return out.zero_()
    out2 = out.view(outer, inner)
    if x.is_cuda:
        block_r, block_n, warps = 64, 64, 4
    else:
        # CPU interpreter: each program instance is a Python call, so use the largest tiles allowed.
        block_n = min(triton.next_power_of_2(inner), 1024)
        block_r, warps = min(triton.next_power_of_2(r), (1 << 20) // block_n), 1
    grid = (outer, triton.cdiv(inner, block_n))
    sum_dim1_kernel[grid](x3, out2, r, inner, x3.stride(0), x3.stride(1), out2.stride(0),
                          BLOCK_R=block_r, BLOCK_N=block_n, num_warps=warps)
    return out


class ModelNew(nn.Module):
    def __init__(self) -> None:
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return sum_over_dim(x, dim=1)
