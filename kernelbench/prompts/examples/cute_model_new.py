import cuda.bindings.driver as cuda
import cutlass
import cutlass.cute as cute
import torch
import torch.nn as nn
from cutlass.cute.runtime import from_dlpack

THREADS = 256


@cute.kernel
def add_relu_kernel(gA: cute.Tensor, gB: cute.Tensor, gOut: cute.Tensor, n: cutlass.Int32):
    tidx, _, _ = cute.arch.thread_idx()
    bidx, _, _ = cute.arch.block_idx()
    i = bidx * THREADS + tidx
    if i < n:
        s = gA[i] + gB[i]
        gOut[i] = cutlass.max(s, s.dtype(0))


@cute.jit
def add_relu(mA: cute.Tensor, mB: cute.Tensor, mOut: cute.Tensor, n: cutlass.Int32, stream: cuda.CUstream):
    grid = (cute.ceil_div(n, THREADS), 1, 1)
    add_relu_kernel(mA, mB, mOut, n).launch(grid=grid, block=(THREADS, 1, 1), stream=stream)


class ModelNew(nn.Module):
    """Same interface as Model; the add and the ReLU run as one fused CuTe kernel."""

    def __init__(self):
        super().__init__()
        self.compiled = {}

    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        a = a.contiguous()
        b = b.contiguous()
        out = torch.empty_like(a)
        n = out.numel()
        tensors = [from_dlpack(t.view(-1)).mark_layout_dynamic() for t in (a, b, out)]
        stream = cuda.CUstream(torch.cuda.current_stream().cuda_stream)
        fn = self.compiled.get(a.dtype)
        if fn is None:
            fn = cute.compile(add_relu, *tensors, n, stream)
            self.compiled[a.dtype] = fn
        fn(*tensors, n, stream)
        return out
