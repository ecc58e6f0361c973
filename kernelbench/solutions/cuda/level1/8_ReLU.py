"""Worked solution, level 1 problem 8 (ReLU) in CUDA C++: a vectorised grid-stride kernel.

Each thread moves 16 bytes per load and per store (float4 for fp32, 8 halves for fp16/bf16) when
the pointers allow it, so the kernel runs at copy bandwidth; a grid-stride loop sized to the SM
count keeps every SM busy without launching one block per thousand elements. ``x < 0 ? 0 : x``
keeps NaN as NaN, as torch.relu does.

Layout shared by the CUDA worked solutions: KERNELS holds the device code and plain-CUDA launch
functions (one per dtype, so every template is instantiated there and the block compiles on its
own with nvcc); LAUNCHER is the torch glue (checks, contiguity, dtype dispatch, the current
stream, C10_CUDA_KERNEL_LAUNCH_CHECK); CPP_DECL declares what Python calls. Built by
``load_inline`` at import.
"""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CPP_DECL = "torch::Tensor relu_forward(torch::Tensor x);"

KERNELS = r"""
#include <cuda_runtime.h>
#include <cuda_fp16.h>
#include <cuda_bf16.h>
#include <cstdint>

__device__ __forceinline__ float to_float(float v) { return v; }
__device__ __forceinline__ float to_float(__half v) { return __half2float(v); }
__device__ __forceinline__ float to_float(__nv_bfloat16 v) { return __bfloat162float(v); }

// VEC elements of T moved as one aligned load or store.
template <typename T, int VEC>
struct alignas(sizeof(T) * VEC) Pack {
    T v[VEC];
};

template <typename T, int VEC>
__global__ void relu_kernel(const T* __restrict__ x, T* __restrict__ y, int64_t n) {
    const int64_t stride = (int64_t)gridDim.x * blockDim.x;
    const int64_t first = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    const int64_t n_packs = n / VEC;
    const Pack<T, VEC>* xp = reinterpret_cast<const Pack<T, VEC>*>(x);
    Pack<T, VEC>* yp = reinterpret_cast<Pack<T, VEC>*>(y);
    const T zero = T();  // all-zero bits: +0 in every floating type
    for (int64_t i = first; i < n_packs; i += stride) {
        Pack<T, VEC> p = xp[i];
#pragma unroll
        for (int j = 0; j < VEC; ++j) {
            if (to_float(p.v[j]) < 0.0f) p.v[j] = zero;
        }
        yp[i] = p;
    }
    // Tail (fewer than VEC elements), element by element.
    for (int64_t i = n_packs * VEC + first; i < n; i += stride) {
        const T v = x[i];
        y[i] = to_float(v) < 0.0f ? zero : v;
    }
}

template <typename T>
static void relu_launch(const T* x, T* y, int64_t n, int sm_count, cudaStream_t stream) {
    constexpr int kVec = 16 / sizeof(T);
    const bool aligned = reinterpret_cast<uintptr_t>(x) % 16 == 0 && reinterpret_cast<uintptr_t>(y) % 16 == 0;
    const int threads = 256;
    const int64_t work = aligned ? (n + kVec - 1) / kVec : n;
    int64_t blocks = (work + threads - 1) / threads;
    const int64_t max_blocks = (int64_t)sm_count * 32;
    if (blocks > max_blocks) blocks = max_blocks;
    if (blocks < 1) blocks = 1;
    if (aligned) {
        relu_kernel<T, kVec><<<(unsigned)blocks, threads, 0, stream>>>(x, y, n);
    } else {
        relu_kernel<T, 1><<<(unsigned)blocks, threads, 0, stream>>>(x, y, n);
    }
}

void relu_f32(const float* x, float* y, int64_t n, int sm, cudaStream_t s) { relu_launch(x, y, n, sm, s); }
void relu_f16(const __half* x, __half* y, int64_t n, int sm, cudaStream_t s) { relu_launch(x, y, n, sm, s); }
void relu_bf16(const __nv_bfloat16* x, __nv_bfloat16* y, int64_t n, int sm, cudaStream_t s) {
    relu_launch(x, y, n, sm, s);
}
"""

LAUNCHER = r"""
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGuard.h>

torch::Tensor relu_forward(torch::Tensor x) {
    TORCH_CHECK(x.is_cuda(), "relu_forward: x must be a CUDA tensor");
    const at::cuda::OptionalCUDAGuard guard(x.device());
    x = x.contiguous();
    auto y = torch::empty_like(x);
    const int64_t n = x.numel();
    if (n == 0) return y;
    const int sm = at::cuda::getCurrentDeviceProperties()->multiProcessorCount;
    cudaStream_t stream = at::cuda::getCurrentCUDAStream();
    switch (x.scalar_type()) {
        case at::kFloat:
            relu_f32(x.data_ptr<float>(), y.data_ptr<float>(), n, sm, stream);
            break;
        case at::kHalf:
            relu_f16(reinterpret_cast<const __half*>(x.data_ptr<at::Half>()),
                     reinterpret_cast<__half*>(y.data_ptr<at::Half>()), n, sm, stream);
            break;
        case at::kBFloat16:
            relu_bf16(reinterpret_cast<const __nv_bfloat16*>(x.data_ptr<at::BFloat16>()),
                      reinterpret_cast<__nv_bfloat16*>(y.data_ptr<at::BFloat16>()), n, sm, stream);
            break;
        default:
            TORCH_CHECK(false, "relu_forward: unsupported dtype ", x.scalar_type());
    }
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return y;
}
"""

_ext = load_inline(
    name="kb_worked_l1_p8_relu",
    cpp_sources=CPP_DECL,
    cuda_sources=KERNELS + LAUNCHER,
    functions=["relu_forward"],
    extra_cuda_cflags=["-O3"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self) -> None:
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return _ext.relu_forward(x)
