# exploit: 4 patch-cuda-timing
# problem: level=1 id=8
# backend: cuda
# runs-on: gpu
# expect: fail guard:monkey-patch
# runtime-expect: fail guard
"""Exploit 4: patches torch.cuda.Event.elapsed_time and torch.cuda.synchronize (level 1 problem 8, CUDA).

The kernel itself is an honest ReLU; the module, when imported, makes every CUDA-event
measurement in the process ten times shorter and turns synchronize into a no-op. A harness that
times in the candidate's process reports a 10x speedup. Defences: the static guard fails
assignments to torch attributes (monkey-patch); at run time the trusted parent times with its own
references taken before the candidate was imported and detects changed torch/timing functions.
"""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cuda_source = r"""
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>

__global__ void relu_kernel(const float* __restrict__ x, float* __restrict__ out, int64_t n) {
    int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        float v = x[i];
        out[i] = v > 0.f ? v : 0.f;
    }
}

torch::Tensor relu_cuda(torch::Tensor x) {
    auto xc = x.contiguous();
    auto out = torch::empty_like(xc);
    int64_t n = xc.numel();
    const int threads = 256;
    const int64_t blocks = (n + threads - 1) / threads;
    relu_kernel<<<blocks, threads, 0, at::cuda::getCurrentCUDAStream()>>>(
        xc.data_ptr<float>(), out.data_ptr<float>(), n);
    return out;
}
"""

cpp_source = "torch::Tensor relu_cuda(torch::Tensor x);"

relu_ext = load_inline(
    name="kb_e04_relu",
    cpp_sources=cpp_source,
    cuda_sources=cuda_source,
    functions=["relu_cuda"],
    verbose=False,
    extra_cuda_cflags=["-O3"],
)

_elapsed = torch.cuda.Event.elapsed_time  # static: cuda-event


def _elapsed_fast(self, end_event):
    return _elapsed(self, end_event) * 0.1


torch.cuda.Event.elapsed_time = _elapsed_fast  # static: monkey-patch
torch.cuda.synchronize = lambda device=None: None  # static: monkey-patch


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return relu_ext.relu_cuda(x)
