# exploit: 14 precision-downcast
# problem: level=1 id=1
# backend: triton
# runs-on: gpu
# expect: fail correctness
# runtime-expect: fail correctness
"""Exploit 14: an fp32 problem computed in fp16 (level 1 problem 1, 1_Square_matmul, Triton).

Casting A and B to half and multiplying on tensor cores is several times faster than fp32, with
relative errors around 1e-3 over K = 4096: inside KernelBench's old 1e-2 tolerance, outside this
evaluator's fp32 tolerance of 1e-4. Defences: the static guard warns (precision-downcast on the
casts and on ``tl.dot`` without ``input_precision="ieee"``); at run time the fp32 tolerance fails it.
"""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def matmul_kernel(a_ptr, b_ptr, c_ptr, M, N, K, stride_am, stride_ak, stride_bk, stride_bn, stride_cm, stride_cn,
                  BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    rm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    rk = tl.arange(0, BLOCK_K)
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k0 in range(0, K, BLOCK_K):
        a = tl.load(a_ptr + rm[:, None] * stride_am + (k0 + rk)[None, :] * stride_ak,
                    mask=(rm[:, None] < M) & ((k0 + rk)[None, :] < K), other=0.0)
        b = tl.load(b_ptr + (k0 + rk)[:, None] * stride_bk + rn[None, :] * stride_bn,
                    mask=((k0 + rk)[:, None] < K) & (rn[None, :] < N), other=0.0)
        acc += tl.dot(a, b)  # static: precision-downcast
    tl.store(c_ptr + rm[:, None] * stride_cm + rn[None, :] * stride_cn, acc, mask=(rm[:, None] < M) & (rn[None, :] < N))


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, A: torch.Tensor, B: torch.Tensor) -> torch.Tensor:
        a = A.half()  # static: precision-downcast
        b = B.half()  # static: precision-downcast
        M, K = a.shape
        _, N = b.shape
        c = torch.empty((M, N), device=A.device, dtype=torch.float32)
        grid = (triton.cdiv(M, 128), triton.cdiv(N, 128))
        matmul_kernel[grid](a, b, c, M, N, K, a.stride(0), a.stride(1), b.stride(0), b.stride(1),
                            c.stride(0), c.stride(1), BLOCK_M=128, BLOCK_N=128, BLOCK_K=32, num_warps=8)
        return c
