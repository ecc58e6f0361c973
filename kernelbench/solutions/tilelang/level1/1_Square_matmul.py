"""Worked solution, level 1 problem 1 (square matmul, fp32): a tiled GEMM in TileLang, exact fp32 on the CUDA cores.

Each block computes a 128 x 128 tile of C. ``T.Pipelined`` streams 128 x 16 slices of A and 16 x 128
slices of B into shared memory two stages deep (on Hopper TileLang issues them as TMA copies from a
producer warp group), and the accumulator lives in registers (``T.alloc_fragment``). The inner
product is written out as ``T.Parallel`` multiply-adds over the tile rather than ``T.gemm``: for fp32
operands ``T.gemm`` may use TF32 tensor cores, which miss the problem's 1e-4 tolerance by an order of
magnitude; the explicit loop keeps every product in fp32 (fp16/bf16 inputs are widened to fp32 first).

The kernel factory is a ``@tilelang.jit`` function: calling it with a shape and dtype returns the
compiled kernel (compiled on first use, cached by TileLang afterwards), which allocates C itself
(``out_idx=[-1]``) and launches on PyTorch's current stream.

Verified on an H100 80GB HBM3 (2026-11-25, tilelang 0.1.15): correct and timed through the full evaluator,
sandboxed, no warning finding (0.69x of PyTorch's IEEE fp32 GEMM).
"""

import tilelang
import tilelang.language as T
import torch
import torch.nn as nn

_DTYPES = {torch.float32: "float32", torch.float16: "float16", torch.bfloat16: "bfloat16"}


@tilelang.jit(out_idx=[-1])
def sgemm(M: int, N: int, K: int, dtype: str, block_M: int = 128, block_N: int = 128, block_K: int = 16,
          threads: int = 256, stages: int = 2):
    @T.prim_func
    def sgemm_tile(A: T.Tensor((M, K), dtype), B: T.Tensor((K, N), dtype), C: T.Tensor((M, N), dtype)):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=threads) as (bx, by):
            A_s = T.alloc_shared((block_M, block_K), dtype)
            B_s = T.alloc_shared((block_K, block_N), dtype)
            acc = T.alloc_fragment((block_M, block_N), "float32")
            T.clear(acc)
            for ko in T.Pipelined(T.ceildiv(K, block_K), num_stages=stages):
                T.copy(A[by * block_M, ko * block_K], A_s)
                T.copy(B[ko * block_K, bx * block_N], B_s)
                for k in T.serial(block_K):
                    for i, j in T.Parallel(block_M, block_N):
                        acc[i, j] += T.Cast("float32", A_s[i, k]) * T.Cast("float32", B_s[k, j])
            T.copy(acc, C[by * block_M, bx * block_N])

    return sgemm_tile


class ModelNew(nn.Module):
    def __init__(self) -> None:
        super().__init__()

    def forward(self, A: torch.Tensor, B: torch.Tensor) -> torch.Tensor:
        A = A.contiguous()
        B = B.contiguous()
        M, K = A.shape
        N = B.shape[1]
        kernel = sgemm(M, N, K, _DTYPES[A.dtype])
        return kernel(A, B)
