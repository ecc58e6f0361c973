"""Worked solution, level 1 problem 15 (RMSNorm over the last dimension) in CUDA C++.

One thread block per row. Pass 1 reads the row with 16-byte loads and accumulates the sum of
squares in fp32; a warp-shuffle + shared-memory reduction gives the block total. Pass 2 re-reads
the row (16 KiB, still in L1/L2 from pass 1, so HBM sees one read) and writes
x * rsqrt(mean(x^2) + eps) * weight. The weight is read in the same packed layout.
"""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CPP_DECL = "torch::Tensor rmsnorm_forward(torch::Tensor x, torch::Tensor weight, double eps);"

KERNELS = r"""
#include <cuda_runtime.h>
#include <cuda_fp16.h>
#include <cuda_bf16.h>
#include <cstdint>

__device__ __forceinline__ float to_float(float v) { return v; }
__device__ __forceinline__ float to_float(__half v) { return __half2float(v); }
__device__ __forceinline__ float to_float(__nv_bfloat16 v) { return __bfloat162float(v); }

template <typename T> __device__ __forceinline__ T from_float(float v);
template <> __device__ __forceinline__ float from_float<float>(float v) { return v; }
template <> __device__ __forceinline__ __half from_float<__half>(float v) { return __float2half_rn(v); }
template <> __device__ __forceinline__ __nv_bfloat16 from_float<__nv_bfloat16>(float v) {
    return __float2bfloat16_rn(v);
}

template <typename T, int VEC>
struct alignas(sizeof(T) * VEC) Pack {
    T v[VEC];
};

__device__ __forceinline__ float block_sum(float v, float* shared32) {
    for (int off = 16; off > 0; off >>= 1) v += __shfl_xor_sync(0xffffffffu, v, off);
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, n_warps = (blockDim.x + 31) >> 5;
    if (lane == 0) shared32[warp] = v;
    __syncthreads();
    if (warp == 0) {
        v = lane < n_warps ? shared32[lane] : 0.0f;
        for (int off = 16; off > 0; off >>= 1) v += __shfl_xor_sync(0xffffffffu, v, off);
        if (lane == 0) shared32[0] = v;
    }
    __syncthreads();
    return shared32[0];
}

// x and y rows of n_cols (a multiple of VEC); weight of n_cols, same type T.
template <typename T, int VEC>
__global__ void rmsnorm_kernel(const T* __restrict__ x, const T* __restrict__ w, T* __restrict__ y,
                               int64_t n_cols, float eps) {
    __shared__ float shared32[32];
    const int64_t row = blockIdx.x;
    const Pack<T, VEC>* xr = reinterpret_cast<const Pack<T, VEC>*>(x + row * n_cols);
    const Pack<T, VEC>* wp = reinterpret_cast<const Pack<T, VEC>*>(w);
    Pack<T, VEC>* yr = reinterpret_cast<Pack<T, VEC>*>(y + row * n_cols);
    const int64_t n_packs = n_cols / VEC;

    float sq = 0.0f;
    for (int64_t i = threadIdx.x; i < n_packs; i += blockDim.x) {
        const Pack<T, VEC> p = xr[i];
#pragma unroll
        for (int j = 0; j < VEC; ++j) {
            const float v = to_float(p.v[j]);
            sq += v * v;
        }
    }
    const float inv_rms = rsqrtf(block_sum(sq, shared32) / (float)n_cols + eps);

    for (int64_t i = threadIdx.x; i < n_packs; i += blockDim.x) {
        Pack<T, VEC> p = xr[i];
        const Pack<T, VEC> q = wp[i];
#pragma unroll
        for (int j = 0; j < VEC; ++j) p.v[j] = from_float<T>(to_float(p.v[j]) * inv_rms * to_float(q.v[j]));
        yr[i] = p;
    }
}

template <typename T>
static void rmsnorm_launch(const T* x, const T* w, T* y, int64_t n_rows, int64_t n_cols, float eps,
                           cudaStream_t stream) {
    constexpr int kVec = 16 / sizeof(T);
    const bool vec_ok = n_cols % kVec == 0 && reinterpret_cast<uintptr_t>(x) % 16 == 0 &&
                        reinterpret_cast<uintptr_t>(w) % 16 == 0 && reinterpret_cast<uintptr_t>(y) % 16 == 0;
    const int64_t packs = vec_ok ? n_cols / kVec : n_cols;
    int threads = 512;
    while (threads > 32 && threads / 2 >= packs) threads /= 2;
    if (vec_ok) {
        rmsnorm_kernel<T, kVec><<<(unsigned)n_rows, threads, 0, stream>>>(x, w, y, n_cols, eps);
    } else {
        rmsnorm_kernel<T, 1><<<(unsigned)n_rows, threads, 0, stream>>>(x, w, y, n_cols, eps);
    }
}

void rmsnorm_f32(const float* x, const float* w, float* y, int64_t r, int64_t c, float eps, cudaStream_t s) {
    rmsnorm_launch(x, w, y, r, c, eps, s);
}
void rmsnorm_f16(const __half* x, const __half* w, __half* y, int64_t r, int64_t c, float eps, cudaStream_t s) {
    rmsnorm_launch(x, w, y, r, c, eps, s);
}
void rmsnorm_bf16(const __nv_bfloat16* x, const __nv_bfloat16* w, __nv_bfloat16* y, int64_t r, int64_t c,
                  float eps, cudaStream_t s) {
    rmsnorm_launch(x, w, y, r, c, eps, s);
}
"""

LAUNCHER = r"""
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGuard.h>

torch::Tensor rmsnorm_forward(torch::Tensor x, torch::Tensor weight, double eps) {
    TORCH_CHECK(x.is_cuda() && weight.is_cuda(), "rmsnorm_forward: x and weight must be CUDA tensors");
    TORCH_CHECK(x.dim() >= 1 && weight.dim() == 1 && weight.size(0) == x.size(-1),
                "rmsnorm_forward: weight must be 1-D with x.size(-1) elements");
    TORCH_CHECK(x.scalar_type() == weight.scalar_type(), "rmsnorm_forward: x is ", x.scalar_type(),
                " but weight is ", weight.scalar_type());
    const at::cuda::OptionalCUDAGuard guard(x.device());
    x = x.contiguous();
    weight = weight.contiguous();
    auto y = torch::empty_like(x);
    if (x.numel() == 0) return y;
    const int64_t n_cols = x.size(-1);
    const int64_t n_rows = x.numel() / n_cols;
    TORCH_CHECK(n_rows <= 0x7fffffff, "rmsnorm_forward: too many rows for one grid: ", n_rows);
    const float e = static_cast<float>(eps);
    cudaStream_t stream = at::cuda::getCurrentCUDAStream();
    switch (x.scalar_type()) {
        case at::kFloat:
            rmsnorm_f32(x.data_ptr<float>(), weight.data_ptr<float>(), y.data_ptr<float>(), n_rows, n_cols, e, stream);
            break;
        case at::kHalf:
            rmsnorm_f16(reinterpret_cast<const __half*>(x.data_ptr<at::Half>()),
                        reinterpret_cast<const __half*>(weight.data_ptr<at::Half>()),
                        reinterpret_cast<__half*>(y.data_ptr<at::Half>()), n_rows, n_cols, e, stream);
            break;
        case at::kBFloat16:
            rmsnorm_bf16(reinterpret_cast<const __nv_bfloat16*>(x.data_ptr<at::BFloat16>()),
                         reinterpret_cast<const __nv_bfloat16*>(weight.data_ptr<at::BFloat16>()),
                         reinterpret_cast<__nv_bfloat16*>(y.data_ptr<at::BFloat16>()), n_rows, n_cols, e, stream);
            break;
        default:
            TORCH_CHECK(false, "rmsnorm_forward: unsupported dtype ", x.scalar_type());
    }
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return y;
}
"""

_ext = load_inline(
    name="kb_worked_l1_p15_rmsnorm",
    cpp_sources=CPP_DECL,
    cuda_sources=KERNELS + LAUNCHER,
    functions=["rmsnorm_forward"],
    extra_cuda_cflags=["-O3"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self, hidden: int, eps: float) -> None:
        super().__init__()
        self.eps = eps
        # Created exactly as the reference creates it, so the same seed gives the same weight.
        self.weight = nn.Parameter(torch.randn(hidden))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return _ext.rmsnorm_forward(x, self.weight, float(self.eps))
