"""Candidate sources used by the GPU evaluator tests (kept as strings: they are data)."""

CUDA_RELU = r'''
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cpp = "torch::Tensor relu_forward(torch::Tensor x);"
cuda = r"""
#include <torch/extension.h>
#include <c10/cuda/CUDAStream.h>
__global__ void relu_kernel_smoke(const float* __restrict__ x, float* __restrict__ y, long n) {
    long i = (long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) { float v = x[i]; y[i] = v > 0.f ? v : 0.f; }
}
torch::Tensor relu_forward(torch::Tensor x) {
    auto xc = x.contiguous();
    auto y = torch::empty_like(xc);
    long n = xc.numel();
    int threads = 256;
    long blocks = (n + threads - 1) / threads;
    relu_kernel_smoke<<<blocks, threads, 0, at::cuda::getCurrentCUDAStream()>>>(xc.data_ptr<float>(), y.data_ptr<float>(), n);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return y;
}
"""
ext = load_inline(name="relu_smoke_ext", cpp_sources=cpp, cuda_sources=cuda, functions=["relu_forward"],
                  extra_cuda_cflags=["-O3"], verbose=False)

class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
    def forward(self, x):
        return ext.relu_forward(x)
'''

CUDA_ILLEGAL_ACCESS = CUDA_RELU.replace("if (i < n) { float v = x[i]; y[i] = v > 0.f ? v : 0.f; }",
                                        "float v = x[i + (1L << 40)]; y[i] = v;").replace(
    "relu_smoke_ext", "illegal_smoke_ext")

CUDA_HANG = CUDA_RELU.replace("if (i < n) { float v = x[i]; y[i] = v > 0.f ? v : 0.f; }",
                              "const volatile float* vx = x; while (vx[0] == vx[0]) { } if (i < n) y[i] = x[i];").replace(
    "relu_smoke_ext", "hang_smoke_ext")

CUDA_COMPILE_ERROR = CUDA_RELU.replace("float v = x[i];", "float v = x[i] this_is_not_cuda;").replace(
    "relu_smoke_ext", "broken_smoke_ext")

TRITON_RELU = r'''
import torch
import torch.nn as nn
import triton
import triton.language as tl

@triton.jit
def relu_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    x = tl.load(x_ptr + offs, mask=m)
    tl.store(y_ptr + offs, tl.maximum(x, 0.0), mask=m)

class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
    def forward(self, x):
        y = torch.empty_like(x)
        n = x.numel()
        BLOCK = 4096 if x.is_cuda else 65536
        relu_kernel[(triton.cdiv(n, BLOCK),)](x, y, n, BLOCK=BLOCK)
        return y
'''

TORCH_OOM = r'''
import torch
import torch.nn as nn
class ModelNew(nn.Module):
    def forward(self, x):
        big = torch.empty(1 << 50, dtype=torch.uint8, device=x.device)
        return torch.relu(x) + big[0]
'''
