import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cuda_source = r"""
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>

template <typename scalar_t>
__global__ void add_relu_kernel(const scalar_t* __restrict__ a, const scalar_t* __restrict__ b,
                                scalar_t* __restrict__ out, int64_t n) {
    // Grid-stride loop: any grid size covers any n.
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n;
         i += (int64_t)gridDim.x * blockDim.x) {
        float v = static_cast<float>(a[i]) + static_cast<float>(b[i]);
        out[i] = static_cast<scalar_t>(v > 0.0f ? v : 0.0f);
    }
}

torch::Tensor add_relu(torch::Tensor a, torch::Tensor b) {
    TORCH_CHECK(a.is_cuda() && b.is_cuda(), "add_relu: inputs must be CUDA tensors");
    TORCH_CHECK(a.sizes() == b.sizes() && a.scalar_type() == b.scalar_type(), "add_relu: mismatched inputs");
    auto a_c = a.contiguous();
    auto b_c = b.contiguous();
    auto out = torch::empty_like(a_c);
    const int64_t n = a_c.numel();
    if (n == 0) return out;
    const int threads = 256;
    const int blocks = (int)std::min<int64_t>((n + threads - 1) / threads, 65535);
    auto stream = at::cuda::getCurrentCUDAStream();
    AT_DISPATCH_FLOATING_TYPES_AND2(at::ScalarType::Half, at::ScalarType::BFloat16, a_c.scalar_type(), "add_relu", [&] {
        add_relu_kernel<scalar_t><<<blocks, threads, 0, stream>>>(
            a_c.data_ptr<scalar_t>(), b_c.data_ptr<scalar_t>(), out.data_ptr<scalar_t>(), n);
    });
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return out;
}
"""

cpp_source = "torch::Tensor add_relu(torch::Tensor a, torch::Tensor b);"

add_relu_ext = load_inline(
    name="add_relu_ext",
    cpp_sources=cpp_source,
    cuda_sources=cuda_source,
    functions=["add_relu"],
    verbose=False,
)


class ModelNew(nn.Module):
    """Same interface as Model; the add and the ReLU run as one fused CUDA kernel."""

    def __init__(self):
        super().__init__()

    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return add_relu_ext.add_relu(a, b)
