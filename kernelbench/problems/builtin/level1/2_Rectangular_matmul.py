import torch
import torch.nn as nn

M = 4096
K = 6144
N = 2048


class Model(nn.Module):
    """C = A @ B with A of shape (M, K) and B of shape (K, N), M, K and N all different."""

    def __init__(self):
        super().__init__()

    def forward(self, A: torch.Tensor, B: torch.Tensor) -> torch.Tensor:
        return torch.matmul(A, B)


def get_inputs():
    # Scaled by 1/sqrt(K) so outputs are O(1): with raw randn operands, outputs near zero differ by
    # more than 1e-4 between two correct fp32 summation orders, and honest kernels would fail.
    A = torch.randn(M, K) * K ** -0.5
    B = torch.randn(K, N)
    return [A, B]


def get_init_inputs():
    return []
