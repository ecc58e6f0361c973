"""Worked solution, level 1 problem 12 (Softmax over the last dimension) in CUDA C++.

One thread block per row. Pass 1 reads the row once with 16-byte loads and keeps, per thread, an
online (running max, rescaled running sum) pair; the pairs are merged across the block with warp
shuffles and a 32-entry shared array. Pass 2 re-reads the row (a 128 KiB row is still in L2) and
writes exp(x - max) / sum. HBM sees one read and one write per element; all math is fp32.
Merging pairs guards the empty case (max = -inf) so no NaN can appear from exp(-inf + inf).
"""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CPP_DECL = "torch::Tensor softmax_forward(torch::Tensor x);"

KERNELS = r"""
#include <cuda_runtime.h>
#include <cuda_fp16.h>
#include <cuda_bf16.h>
#include <cstdint>
#include <math_constants.h>

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

// Merge (m2, s2) into (m, s): the sums are of exp(x - m), so the smaller side is rescaled.
__device__ __forceinline__ void merge(float& m, float& s, float m2, float s2) {
    const float nm = fmaxf(m, m2);
    if (nm == -CUDART_INF_F) return;  // both sides empty
    s = s * __expf(m - nm) + s2 * __expf(m2 - nm);
    m = nm;
}

template <typename T, int VEC>
__global__ void softmax_kernel(const T* __restrict__ x, T* __restrict__ y, int64_t n_cols) {
    __shared__ float sh_m[32];
    __shared__ float sh_s[32];
    const int64_t row = blockIdx.x;
    const Pack<T, VEC>* xr = reinterpret_cast<const Pack<T, VEC>*>(x + row * n_cols);
    Pack<T, VEC>* yr = reinterpret_cast<Pack<T, VEC>*>(y + row * n_cols);
    const int64_t n_packs = n_cols / VEC;  // the launcher picks VEC dividing n_cols

    float m = -CUDART_INF_F, s = 0.0f;
    for (int64_t i = threadIdx.x; i < n_packs; i += blockDim.x) {
        const Pack<T, VEC> p = xr[i];
        float v[VEC];
        float pm = -CUDART_INF_F;
#pragma unroll
        for (int j = 0; j < VEC; ++j) {
            v[j] = to_float(p.v[j]);
            pm = fmaxf(pm, v[j]);
        }
        float ps = 0.0f;
#pragma unroll
        for (int j = 0; j < VEC; ++j) ps += __expf(v[j] - pm);
        merge(m, s, pm, ps);
    }
    // Block-wide merge: within each warp, then across the (at most 32) warps.
    for (int off = 16; off > 0; off >>= 1) {
        const float m2 = __shfl_xor_sync(0xffffffffu, m, off);
        const float s2 = __shfl_xor_sync(0xffffffffu, s, off);
        merge(m, s, m2, s2);
    }
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, n_warps = (blockDim.x + 31) >> 5;
    if (lane == 0) {
        sh_m[warp] = m;
        sh_s[warp] = s;
    }
    __syncthreads();
    if (warp == 0) {
        m = lane < n_warps ? sh_m[lane] : -CUDART_INF_F;
        s = lane < n_warps ? sh_s[lane] : 0.0f;
        for (int off = 16; off > 0; off >>= 1) {
            const float m2 = __shfl_xor_sync(0xffffffffu, m, off);
            const float s2 = __shfl_xor_sync(0xffffffffu, s, off);
            merge(m, s, m2, s2);
        }
        if (lane == 0) {
            sh_m[0] = m;
            sh_s[0] = s;
        }
    }
    __syncthreads();
    const float row_max = sh_m[0];
    const float inv_sum = 1.0f / sh_s[0];

    for (int64_t i = threadIdx.x; i < n_packs; i += blockDim.x) {
        Pack<T, VEC> p = xr[i];
#pragma unroll
        for (int j = 0; j < VEC; ++j) p.v[j] = from_float<T>(__expf(to_float(p.v[j]) - row_max) * inv_sum);
        yr[i] = p;
    }
}

template <typename T>
static void softmax_launch(const T* x, T* y, int64_t n_rows, int64_t n_cols, cudaStream_t stream) {
    constexpr int kVec = 16 / sizeof(T);
    const bool vec_ok = n_cols % kVec == 0 && reinterpret_cast<uintptr_t>(x) % 16 == 0 &&
                        reinterpret_cast<uintptr_t>(y) % 16 == 0;
    const int64_t packs = vec_ok ? n_cols / kVec : n_cols;
    int threads = 1024;
    while (threads > 32 && threads / 2 >= packs) threads /= 2;  // no idle warps on short rows
    if (vec_ok) {
        softmax_kernel<T, kVec><<<(unsigned)n_rows, threads, 0, stream>>>(x, y, n_cols);
    } else {
        softmax_kernel<T, 1><<<(unsigned)n_rows, threads, 0, stream>>>(x, y, n_cols);
    }
}

void softmax_f32(const float* x, float* y, int64_t r, int64_t c, cudaStream_t s) { softmax_launch(x, y, r, c, s); }
void softmax_f16(const __half* x, __half* y, int64_t r, int64_t c, cudaStream_t s) { softmax_launch(x, y, r, c, s); }
void softmax_bf16(const __nv_bfloat16* x, __nv_bfloat16* y, int64_t r, int64_t c, cudaStream_t s) {
    softmax_launch(x, y, r, c, s);
}
"""

LAUNCHER = r"""
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGuard.h>

torch::Tensor softmax_forward(torch::Tensor x) {
    TORCH_CHECK(x.is_cuda(), "softmax_forward: x must be a CUDA tensor");
    TORCH_CHECK(x.dim() >= 1, "softmax_forward: x must have at least one dimension");
    const at::cuda::OptionalCUDAGuard guard(x.device());
    x = x.contiguous();
    auto y = torch::empty_like(x);
    const int64_t n_cols = x.size(-1);
    if (x.numel() == 0) return y;
    const int64_t n_rows = x.numel() / n_cols;
    TORCH_CHECK(n_rows <= 0x7fffffff, "softmax_forward: too many rows for one grid: ", n_rows);
    cudaStream_t stream = at::cuda::getCurrentCUDAStream();
    switch (x.scalar_type()) {
        case at::kFloat:
            softmax_f32(x.data_ptr<float>(), y.data_ptr<float>(), n_rows, n_cols, stream);
            break;
        case at::kHalf:
            softmax_f16(reinterpret_cast<const __half*>(x.data_ptr<at::Half>()),
                        reinterpret_cast<__half*>(y.data_ptr<at::Half>()), n_rows, n_cols, stream);
            break;
        case at::kBFloat16:
            softmax_bf16(reinterpret_cast<const __nv_bfloat16*>(x.data_ptr<at::BFloat16>()),
                         reinterpret_cast<__nv_bfloat16*>(y.data_ptr<at::BFloat16>()), n_rows, n_cols, stream);
            break;
        default:
            TORCH_CHECK(false, "softmax_forward: unsupported dtype ", x.scalar_type());
    }
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return y;
}
"""

_ext = load_inline(
    name="kb_worked_l1_p12_softmax",
    cpp_sources=CPP_DECL,
    cuda_sources=KERNELS + LAUNCHER,
    functions=["softmax_forward"],
    extra_cuda_cflags=["-O3"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self) -> None:
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return _ext.softmax_forward(x)
