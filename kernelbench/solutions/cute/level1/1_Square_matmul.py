"""Worked solution, level 1 problem 1 (square matmul, fp32): a shared-memory tiled SIMT GEMM in the CuTe DSL.

Each block of 256 threads computes a 128 x 128 tile of C. It marches over K in slices of 8: the block
copies a 128 x 8 slice of A (stored transposed, k-major, so that the inner loop reads it as rows) and
an 8 x 128 slice of B into shared memory, then every thread accumulates an 8 x 8 sub-tile in registers
(rows ty, ty + 16, ... and columns tx, tx + 16, ...: threads of a half-warp read adjacent columns of B
and store adjacent columns of C). Out-of-range rows, columns and K are filled with zeros on the way in
and masked on the way out, so any M, N, K work.

Precision: the problem is fp32 and its tolerance 1e-4, so the products are fp32 fused multiply-adds on
the CUDA cores (TF32 tensor cores would be about 1e-3 off); fp16/bf16 inputs are widened to fp32 in
shared memory and the result is rounded once at the store. On the CUDA cores this is slower than
cuBLAS's SGEMM; it shows the DSL, not a record.

Verified on an H100 80GB HBM3 (2026-11-25, nvidia-cutlass-dsl 4.8.1): correct and timed through the full
evaluator, sandboxed, no warning finding (0.47x of PyTorch's IEEE fp32 GEMM; 126 registers under ncu).
"""

import cuda.bindings.driver as cuda
import cutlass
import cutlass.cute as cute
import torch
import torch.nn as nn
from cutlass.cute.runtime import from_dlpack

BM, BN, BK = 128, 128, 8  # block tile
TY, TX = 16, 16  # thread grid of a block
RM, RN = BM // TY, BN // TX  # each thread's register tile
THREADS = TY * TX
# cutlass.memory is the allocator's home from 4.8 on; older releases have it in cutlass.utils.
SmemAllocator = cutlass.memory.SmemAllocator if hasattr(cutlass, "memory") else cutlass.utils.SmemAllocator


@cute.kernel
def sgemm_kernel(gA: cute.Tensor, gB: cute.Tensor, gC: cute.Tensor,
                 M: cutlass.Int32, N: cutlass.Int32, K: cutlass.Int32):
    tid, _, _ = cute.arch.thread_idx()
    bx, by, _ = cute.arch.block_idx()
    tx = tid % TX
    ty = tid // TX
    row0 = by * BM
    col0 = bx * BN

    smem = SmemAllocator()
    sA = smem.allocate_tensor(cutlass.Float32, cute.make_layout((BK, BM), stride=(BM, 1)), 16)
    sB = smem.allocate_tensor(cutlass.Float32, cute.make_layout((BK, BN), stride=(BN, 1)), 16)
    acc = cute.make_rmem_tensor((RM, RN), cutlass.Float32)
    acc.fill(0.0)

    for k0 in range(0, K, BK):
        # A slice: 128 rows x 8 columns, 4 elements per thread, written k-major.
        for r in cutlass.range_constexpr(BM * BK // THREADS):
            e = tid + r * THREADS
            m = e // BK
            kk = e % BK
            sA[kk, m] = cutlass.Float32(0.0)
            if row0 + m < M:
                if k0 + kk < K:
                    sA[kk, m] = gA[row0 + m, k0 + kk].to(cutlass.Float32)
        # B slice: 8 rows x 128 columns, 4 elements per thread, consecutive threads on consecutive columns.
        for r in cutlass.range_constexpr(BK * BN // THREADS):
            e = tid + r * THREADS
            kk = e // BN
            n = e % BN
            sB[kk, n] = cutlass.Float32(0.0)
            if k0 + kk < K:
                if col0 + n < N:
                    sB[kk, n] = gB[k0 + kk, col0 + n].to(cutlass.Float32)
        cute.arch.sync_threads()
        for kk in cutlass.range_constexpr(BK):
            a = [sA[kk, ty + TY * i] for i in range(RM)]
            b = [sB[kk, tx + TX * j] for j in range(RN)]
            for i in cutlass.range_constexpr(RM):
                for j in cutlass.range_constexpr(RN):
                    acc[i, j] = acc[i, j] + a[i] * b[j]
        cute.arch.sync_threads()

    for i in cutlass.range_constexpr(RM):
        for j in cutlass.range_constexpr(RN):
            r = row0 + ty + TY * i
            c = col0 + tx + TX * j
            if r < M:
                if c < N:
                    gC[r, c] = acc[i, j].to(gC.element_type)


@cute.jit
def sgemm_host(mA: cute.Tensor, mB: cute.Tensor, mC: cute.Tensor, M: cutlass.Int32, N: cutlass.Int32,
               K: cutlass.Int32, stream: cuda.CUstream):
    grid = (cute.ceil_div(N, BN), cute.ceil_div(M, BM), 1)
    sgemm_kernel(mA, mB, mC, M, N, K).launch(grid=grid, block=(THREADS, 1, 1), stream=stream)


_COMPILED = {}


def _matmul(A: torch.Tensor, B: torch.Tensor) -> torch.Tensor:
    A = A.contiguous()
    B = B.contiguous()
    M, K = A.shape
    K2, N = B.shape
    if K != K2:
        raise ValueError(f"inner dimensions differ: {K} and {K2}")
    C = torch.empty((M, N), dtype=A.dtype, device=A.device)
    if M == 0 or N == 0:
        return C
    mA = from_dlpack(A).mark_layout_dynamic()
    mB = from_dlpack(B).mark_layout_dynamic()
    mC = from_dlpack(C).mark_layout_dynamic()
    stream = cuda.CUstream(torch.cuda.current_stream().cuda_stream)
    fn = _COMPILED.get(A.dtype)
    if fn is None:
        fn = _COMPILED[A.dtype] = cute.compile(sgemm_host, mA, mB, mC, M, N, K, stream)
    fn(mA, mB, mC, M, N, K, stream)
    return C


class ModelNew(nn.Module):
    def __init__(self) -> None:
        super().__init__()

    def forward(self, A: torch.Tensor, B: torch.Tensor) -> torch.Tensor:
        return _matmul(A, B)
