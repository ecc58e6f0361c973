"""Worked solution, level 1 problem 17 (sum over dim 1, keepdim) in CUDA C++: a column reduction.

x is (B, R, N) and the reduced dimension R is the middle one, so memory is contiguous along the
kept N. A block of 32 x 16 threads owns 32 adjacent columns of one batch: each warp reads 32
consecutive values of a row (one 128-byte transaction), the 16 warps take every 16th row, and
each thread keeps its own fp32 running sum of R / 16 values. The 16 partial sums per column are
then added through shared memory. Every input byte is read once, there are no atomics (the
result is deterministic), and no thread adds more than R / 16 values in sequence, which keeps
the rounding error well inside the 1e-4 tolerance.
"""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CPP_DECL = "torch::Tensor sum_dim_forward(torch::Tensor x, int64_t dim);"

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

constexpr int kCols = 32;  // columns per block (one warp wide)
constexpr int kRowLanes = 16;  // warps per block, each taking every 16th row

// x viewed as (outer, R, inner); y as (outer, inner). grid = (ceil(inner / 32), outer).
template <typename T>
__global__ void sum_middle_kernel(const T* __restrict__ x, T* __restrict__ y, int64_t R, int64_t inner) {
    __shared__ float partial[kRowLanes][kCols + 1];
    const int64_t outer_idx = blockIdx.y;
    const int64_t col = (int64_t)blockIdx.x * kCols + threadIdx.x;
    float acc = 0.0f;
    if (col < inner) {
        const T* p = x + outer_idx * R * inner + col;
#pragma unroll 4
        for (int64_t r = threadIdx.y; r < R; r += kRowLanes) acc += to_float(p[r * inner]);
    }
    partial[threadIdx.y][threadIdx.x] = acc;
    __syncthreads();
    if (threadIdx.y == 0 && col < inner) {
        float total = 0.0f;
#pragma unroll
        for (int i = 0; i < kRowLanes; ++i) total += partial[i][threadIdx.x];
        y[outer_idx * inner + col] = from_float<T>(total);
    }
}

template <typename T>
static void sum_middle_launch(const T* x, T* y, int64_t outer, int64_t R, int64_t inner, cudaStream_t stream) {
    const dim3 block(kCols, kRowLanes);
    const dim3 grid((unsigned)((inner + kCols - 1) / kCols), (unsigned)outer);
    sum_middle_kernel<T><<<grid, block, 0, stream>>>(x, y, R, inner);
}

void sum_middle_f32(const float* x, float* y, int64_t o, int64_t r, int64_t i, cudaStream_t s) {
    sum_middle_launch(x, y, o, r, i, s);
}
void sum_middle_f16(const __half* x, __half* y, int64_t o, int64_t r, int64_t i, cudaStream_t s) {
    sum_middle_launch(x, y, o, r, i, s);
}
void sum_middle_bf16(const __nv_bfloat16* x, __nv_bfloat16* y, int64_t o, int64_t r, int64_t i, cudaStream_t s) {
    sum_middle_launch(x, y, o, r, i, s);
}
"""

LAUNCHER = r"""
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGuard.h>

torch::Tensor sum_dim_forward(torch::Tensor x, int64_t dim) {
    TORCH_CHECK(x.is_cuda(), "sum_dim_forward: x must be a CUDA tensor");
    TORCH_CHECK(x.dim() >= 1, "sum_dim_forward: x must have at least one dimension");
    const at::cuda::OptionalCUDAGuard guard(x.device());
    dim = dim < 0 ? dim + x.dim() : dim;
    TORCH_CHECK(dim >= 0 && dim < x.dim(), "sum_dim_forward: bad dim ", dim, " for ", x.dim(), "-d input");
    x = x.contiguous();
    int64_t outer = 1, inner = 1;
    for (int64_t d = 0; d < dim; ++d) outer *= x.size(d);
    for (int64_t d = dim + 1; d < x.dim(); ++d) inner *= x.size(d);
    const int64_t R = x.size(dim);
    auto out_shape = x.sizes().vec();
    out_shape[dim] = 1;
    auto y = torch::empty(out_shape, x.options());
    if (y.numel() == 0) return y;
    TORCH_CHECK(outer <= 65535, "sum_dim_forward: at most 65535 leading rows, got ", outer);
    cudaStream_t stream = at::cuda::getCurrentCUDAStream();
    switch (x.scalar_type()) {
        case at::kFloat:
            sum_middle_f32(x.data_ptr<float>(), y.data_ptr<float>(), outer, R, inner, stream);
            break;
        case at::kHalf:
            sum_middle_f16(reinterpret_cast<const __half*>(x.data_ptr<at::Half>()),
                           reinterpret_cast<__half*>(y.data_ptr<at::Half>()), outer, R, inner, stream);
            break;
        case at::kBFloat16:
            sum_middle_bf16(reinterpret_cast<const __nv_bfloat16*>(x.data_ptr<at::BFloat16>()),
                            reinterpret_cast<__nv_bfloat16*>(y.data_ptr<at::BFloat16>()), outer, R, inner, stream);
            break;
        default:
            TORCH_CHECK(false, "sum_dim_forward: unsupported dtype ", x.scalar_type());
    }
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return y;
}
"""

_ext = load_inline(
    name="kb_worked_l1_p17_sum",
    cpp_sources=CPP_DECL,
    cuda_sources=KERNELS + LAUNCHER,
    functions=["sum_dim_forward"],
    extra_cuda_cflags=["-O3"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self) -> None:
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return _ext.sum_dim_forward(x, 1)
