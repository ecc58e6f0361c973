"""Worked solution, level 1 problem 9 (GELU, exact erf form): one vectorised Triton pass.

GELU(x) = 0.5 * x * (1 + erf(x / sqrt(2))). Computing ``1 + erf(z)`` for negative z cancels, so
the kernel works with the complementary function: ``1 + erf(z) = erfc(|z|)`` for z < 0 and
``2 - erfc(|z|)`` for z >= 0, with erfc(|z|) from Abramowitz & Stegun 7.1.26 (absolute error below
1.5e-7). The GELU error is then below 0.5 * |x| * 1.5e-7, a thousand times inside the evaluator's
fp32 tolerance, for one exp and one division per element: the kernel stays bandwidth-bound.
(It also avoids the Triton CPU interpreter's element-by-element Python erf.)
"""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _erfc_nonneg(z):
    # erfc(z) for z >= 0: t * (a1 + a2 t + a3 t^2 + a4 t^3 + a5 t^4) * exp(-z^2), t = 1 / (1 + p z).
    t = 1.0 / (1.0 + 0.3275911 * z)
    poly = 1.061405429
    poly = -1.453152027 + t * poly
    poly = 1.421413741 + t * poly
    poly = -0.284496736 + t * poly
    poly = 0.254829592 + t * poly
    return t * poly * tl.exp(-z * z)


@triton.jit
def gelu_kernel(x_ptr, out_ptr, n_elements, BLOCK: tl.constexpr):
    offsets = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n_elements
    x = tl.load(x_ptr + offsets, mask=mask, other=0.0).to(tl.float32)
    e = _erfc_nonneg(tl.abs(x) * 0.7071067811865476)
    half_x = 0.5 * x
    # x >= 0: 0.5 x (2 - erfc(|z|)) = x (1 - erfc/2);  x < 0: 0.5 x erfc(|z|).
    y = tl.where(x >= 0, x * (1.0 - 0.5 * e), half_x * e)
    tl.store(out_ptr + offsets, y.to(out_ptr.dtype.element_ty), mask=mask)


def _block_config(x: torch.Tensor) -> tuple[int, int]:
    """(elements per program, warps): tuned for the GPU, but kept few and large on the CPU interpreter."""
    if x.is_cuda:
        return 4096, 8
    return 1 << 20, 1


class ModelNew(nn.Module):
    def __init__(self) -> None:
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        out = torch.empty_like(x)
        n = x.numel()
        if n == 0:
            return out
        block, warps = _block_config(x)
        gelu_kernel[(triton.cdiv(n, block),)](x, out, n, BLOCK=block, num_warps=warps)
        return out
