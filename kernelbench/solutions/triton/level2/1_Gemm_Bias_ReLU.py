"""Worked solution, level 2 problem 1 (Gemm + bias + ReLU): one Triton GEMM with a fused epilogue.

The reference runs three kernels (GEMM, bias add, ReLU) and writes the (batch, out_features)
intermediate to HBM twice. Here one tiled GEMM kernel computes x @ W^T and, while each output tile
is still in registers, adds the bias and applies ReLU: the output is written once.

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
def linear_bias_relu_kernel(x_ptr, w_ptr, bias_ptr, out_ptr, M, N, K,
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
    y = tl.where(z < 0, 0.0, z)
    out_ptrs = out_ptr + offs_m.to(tl.int64)[:, None] * stride_om + offs_n[None, :] * stride_on
    tl.store(out_ptrs, y.to(out_ptr.dtype.element_ty), mask=(offs_m < M)[:, None] & n_ok[None, :])


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


class ModelNew(nn.Module):
    def __init__(self, in_features: int, out_features: int) -> None:
        super().__init__()
        # Created exactly as the reference creates them, so the same seed gives the same weights.
        self.gemm = nn.Linear(in_features, out_features, bias=False)
        self.bias = nn.Parameter(torch.randn(out_features))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        w = self.gemm.weight
        M, K = x.shape
        N = w.shape[0]
        out = torch.empty((M, N), dtype=x.dtype, device=x.device)
        if out.numel() == 0:
            return out
        cfg = _gemm_config(x, M, N, K)
        grid = (triton.cdiv(M, cfg["BLOCK_M"]) * triton.cdiv(N, cfg["BLOCK_N"]),)
        linear_bias_relu_kernel[grid](x, w, self.bias, out, M, N, K, x.stride(0), x.stride(1),
                                      w.stride(0), w.stride(1), out.stride(0), out.stride(1), **cfg)
        return out
