"""Worked solution, level 1 problem 8 (ReLU): one coalesced pass written in the CUTLASS Python DSL (CuTe).

ReLU reads every element once and writes it once, so the kernel only has to keep the memory system busy:
each block of 256 threads covers 1024 consecutive elements, four per thread, spaced 256 apart so that
every load and store instruction of a warp touches one contiguous 128-byte line. The tail is masked
per element, so any size works.

``cute.compile`` runs once per dtype: the tensors are marked dynamic (``mark_layout_dynamic``) so that
one compiled function serves every shape, and the element count is a runtime argument. The host
function receives PyTorch's current stream and launches on it (without one, the DSL would launch on
the legacy default stream, not the stream the caller is timing).

Verified on an H100 80GB HBM3 (2026-11-25, nvidia-cutlass-dsl 4.8.1): correct and timed through the full
evaluator, sandboxed, no warning finding (0.59x of PyTorch at 0.61 ms, flagged host-bound: each call's
``from_dlpack`` wrapping costs more host time than the kernel's GPU time; see kernelbench/solutions/README.md).
"""

import cuda.bindings.driver as cuda
import cutlass
import cutlass.cute as cute
import torch
import torch.nn as nn
from cutlass.cute.runtime import from_dlpack

THREADS = 256
PER_THREAD = 4
TILE = THREADS * PER_THREAD


@cute.kernel
def relu_kernel(gX: cute.Tensor, gY: cute.Tensor, n: cutlass.Int32):
    tidx, _, _ = cute.arch.thread_idx()
    bidx, _, _ = cute.arch.block_idx()
    base = bidx * TILE + tidx
    for j in cutlass.range_constexpr(PER_THREAD):
        i = base + j * THREADS
        if i < n:
            v = gX[i]
            # max(v, 0) in the input's own type; a NaN input stays NaN (the comparison is false for it).
            gY[i] = cutlass.max(v, v.dtype(0))


@cute.jit
def relu_host(mX: cute.Tensor, mY: cute.Tensor, n: cutlass.Int32, stream: cuda.CUstream):
    relu_kernel(mX, mY, n).launch(grid=(cute.ceil_div(n, TILE), 1, 1), block=(THREADS, 1, 1), stream=stream)


_COMPILED = {}


def _relu(x: torch.Tensor) -> torch.Tensor:
    x = x.contiguous()
    out = torch.empty_like(x)
    n = x.numel()
    if n == 0:
        return out
    if n >= 2**31 - TILE:
        raise ValueError(f"{n} elements: this kernel indexes with 32-bit integers")
    mX = from_dlpack(x.view(-1)).mark_layout_dynamic()
    mY = from_dlpack(out.view(-1)).mark_layout_dynamic()
    stream = cuda.CUstream(torch.cuda.current_stream().cuda_stream)
    fn = _COMPILED.get(x.dtype)
    if fn is None:
        fn = _COMPILED[x.dtype] = cute.compile(relu_host, mX, mY, n, stream)
    fn(mX, mY, n, stream)
    return out


class ModelNew(nn.Module):
    def __init__(self) -> None:
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return _relu(x)
