"""Worked solution, level 2 problem 5 (Gemm + LayerNorm + GELU): a GEMM with a bias epilogue, then
one fused LayerNorm + GELU row kernel.

LayerNorm needs whole rows, which span many GEMM tiles, so the work is two kernels: a tiled GEMM
that adds the bias on its fp32 accumulator and writes z once, then a row kernel that reads each
row of z once and applies mean, variance (two-pass form, as torch), normalisation, the affine
transform and the exact-erf GELU in registers. GELU uses erfc(|x| / sqrt(2)) from Abramowitz &
Stegun 7.1.26 (absolute error below 1.5e-7), which avoids the cancellation of 1 + erf(z) for
negative z.

Precision: fp32 inputs go through ``tl.dot(..., input_precision="ieee")`` (TF32 would miss the
evaluator's 1e-4 fp32 tolerance) with fp32 accumulation, summed per chunk of K slices before
joining the tile accumulator (a two-level sum, several times more accurate than one running sum).
IEEE fp32 runs on the CUDA cores, so the GEMM itself is slower than cuBLAS; the fusion saves
the round trips of the intermediate through HBM.
"""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def linear_bias_kernel(x_ptr, w_ptr, bias_ptr, out_ptr, M, N, K,
                       stride_xm, stride_xk, stride_wn, stride_wk, stride_om, stride_on,
                       BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
                       GROUP_M: tl.constexpr, CHUNK_K_TILES: tl.constexpr):
    # Grouped launch order: GROUP_M consecutive tile-rows sweep the tile-columns together (L2 reuse).
    pid = tl.program_id(0)
    num_pid_m = tl.cdiv(M, BLOCK_M)
    num_pid_n = tl.cdiv(N, BLOCK_N)
    pids_per_group = GROUP_M * num_pid_n
    first_m = (pid // pids_per_group) * GROUP_M
    group_rows = tl.minimum(num_pid_m - first_m, GROUP_M)
    pid_m = first_m + (pid % pids_per_group) % group_rows
    pid_n = (pid % pids_per_group) // group_rows

    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    offs_k = tl.arange(0, BLOCK_K)
    # Out-of-range rows/columns read wrapped, valid data and are masked only at the store.
    rows_x = (offs_m % M).to(tl.int64)
    rows_w = (offs_n % N).to(tl.int64)
    # The B operand is W^T: element (k, n) of the tile is W[n, k]; no transposed copy is made.
    x_ptrs = x_ptr + rows_x[:, None] * stride_xm + offs_k[None, :] * stride_xk
    w_ptrs = w_ptr + offs_k[:, None] * stride_wk + rows_w[None, :] * stride_wn

    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k0 in range(0, K, BLOCK_K * CHUNK_K_TILES):
        part = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
        n_tiles = tl.minimum(CHUNK_K_TILES, tl.cdiv(K - k0, BLOCK_K))
        for t in range(0, n_tiles):
            k_left = K - k0 - t * BLOCK_K
            a = tl.load(x_ptrs, mask=offs_k[None, :] < k_left, other=0.0)
            b = tl.load(w_ptrs, mask=offs_k[:, None] < k_left, other=0.0)
            # "ieee": fp32 operands multiplied in full fp32 (fp16/bf16 operands use tensor cores anyway).
            part = tl.dot(a, b, part, input_precision="ieee")
            x_ptrs += BLOCK_K * stride_xk
            w_ptrs += BLOCK_K * stride_wk
        acc += part

    # Epilogue, on the fp32 accumulator while it is still in registers.
    n_ok = offs_n < N
    bias = tl.load(bias_ptr + offs_n, mask=n_ok, other=0.0).to(tl.float32)
    z = acc + bias[None, :]
    y = z
    out_ptrs = out_ptr + offs_m.to(tl.int64)[:, None] * stride_om + offs_n[None, :] * stride_on
    tl.store(out_ptrs, y.to(out_ptr.dtype.element_ty), mask=(offs_m < M)[:, None] & n_ok[None, :])


@triton.jit
def _erfc_nonneg(z):
    # erfc(z) for z >= 0: t * (a1 + a2 t + a3 t^2 + a4 t^3 + a5 t^4) * exp(-z^2), t = 1 / (1 + p z).
    t = 1.0 / (1.0 + 0.3275911 * z)
    poly = 1.061405429
    poly = -1.453152027 + t * poly
    poly = 1.421413741 + t * poly
    poly = -0.284496736 + t * poly
    poly = 0.254829592 + t * poly
    return t * poly * tl.exp(-z * z)


@triton.jit
def layernorm_gelu_kernel(z_ptr, w_ptr, b_ptr, out_ptr, n_rows, n_cols, stride_z, stride_out, eps,
                          ROWS: tl.constexpr, BLOCK: tl.constexpr):
    rows = tl.program_id(0) * ROWS + tl.arange(0, ROWS)
    src_rows = tl.minimum(rows, n_rows - 1).to(tl.int64)
    cols = tl.arange(0, BLOCK)
    col_ok = cols < n_cols
    z = tl.load(z_ptr + src_rows[:, None] * stride_z + cols[None, :], mask=col_ok[None, :],
                other=0.0).to(tl.float32)
    mean = tl.sum(z, axis=1) / n_cols
    centered = tl.where(col_ok[None, :], z - mean[:, None], 0.0)
    var = tl.sum(centered * centered, axis=1) / n_cols
    rstd = 1.0 / tl.sqrt(var + eps)
    w = tl.load(w_ptr + cols, mask=col_ok, other=0.0).to(tl.float32)
    b = tl.load(b_ptr + cols, mask=col_ok, other=0.0).to(tl.float32)
    v = centered * rstd[:, None] * w[None, :] + b[None, :]
    e = _erfc_nonneg(tl.abs(v) * 0.7071067811865476)
    half_v = 0.5 * v
    y = tl.where(v >= 0, v * (1.0 - 0.5 * e), half_v * e)
    out_mask = (rows < n_rows)[:, None] & col_ok[None, :]
    tl.store(out_ptr + rows.to(tl.int64)[:, None] * stride_out + cols[None, :],
             y.to(out_ptr.dtype.element_ty), mask=out_mask)


def _gemm_config(x: torch.Tensor, M: int, N: int, K: int) -> dict:
    if x.is_cuda:
        # 128x128x32 tiles, 8 warps, 3 stages: a sound H100 choice for the FMA (ieee fp32) path.
        return dict(BLOCK_M=128, BLOCK_N=128, BLOCK_K=32, GROUP_M=8, CHUNK_K_TILES=8,
                    num_warps=8, num_stages=3)
    # CPU interpreter: every program instance and loop step is Python; few, huge tiles (Triton
    # caps a block at 2**20 elements) turn the work into a handful of BLAS calls.
    bm = min(1024, triton.next_power_of_2(M))
    bn = min(1024, triton.next_power_of_2(N))
    bk = min(triton.next_power_of_2(K), (1 << 20) // max(bm, bn))
    return dict(BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk, GROUP_M=1, CHUNK_K_TILES=1, num_warps=1, num_stages=1)


def _row_config(t: torch.Tensor, n_cols: int) -> tuple[int, int, int]:
    """(rows per program, block, warps) for the row-wise epilogue kernel."""
    block = triton.next_power_of_2(n_cols)
    if block > 65536:
        raise ValueError(f"the row epilogue keeps a row in registers: at most 65536 features, got {n_cols}")
    if t.is_cuda:
        return 1, block, max(4, min(16, block // 512))
    return max(1, (1 << 20) // block), block, 1


class ModelNew(nn.Module):
    def __init__(self, in_features: int, out_features: int) -> None:
        super().__init__()
        # Created exactly as the reference creates them, so the same seed gives the same weights.
        self.gemm = nn.Linear(in_features, out_features)
        self.norm = nn.LayerNorm(out_features)
        with torch.no_grad():
            self.norm.weight.copy_(1.0 + 0.5 * torch.randn(out_features))
            self.norm.bias.copy_(0.5 * torch.randn(out_features))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        w, b = self.gemm.weight, self.gemm.bias
        M, K = x.shape
        N = w.shape[0]
        out = torch.empty((M, N), dtype=x.dtype, device=x.device)
        if out.numel() == 0:
            return out
        z = torch.empty((M, N), dtype=torch.float32, device=x.device)
        cfg = _gemm_config(x, M, N, K)
        grid = (triton.cdiv(M, cfg["BLOCK_M"]) * triton.cdiv(N, cfg["BLOCK_N"]),)
        linear_bias_kernel[grid](x, w, b, z, M, N, K, x.stride(0), x.stride(1),
                                 w.stride(0), w.stride(1), z.stride(0), z.stride(1), **cfg)
        rows, block, warps = _row_config(x, N)
        layernorm_gelu_kernel[(triton.cdiv(M, rows),)](z, self.norm.weight, self.norm.bias, out, M, N,
                                                       z.stride(0), out.stride(0), float(self.norm.eps),
                                                       ROWS=rows, BLOCK=block, num_warps=warps)
        return out
