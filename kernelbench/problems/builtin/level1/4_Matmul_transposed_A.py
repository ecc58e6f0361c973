import torch
import torch.nn as nn

M = 2048
K = 3072
N = 4096


class Model(nn.Module):
    """C = A.T @ B where A is stored as (K, M) and B as (K, N): the transpose is part of the problem."""

    def __init__(self):
        super().__init__()

    def forward(self, A: torch.Tensor, B: torch.Tensor) -> torch.Tensor:
        return torch.matmul(A.T, B)


def get_inputs():
    # Scaled by 1/sqrt(K) so outputs are O(1): with raw randn operands, outputs near zero differ by
    # more than 1e-4 between two correct fp32 summation orders, and honest kernels would fail.
    A = torch.randn(K, M) * K ** -0.5
    B = torch.randn(K, N)
    return [A, B]


def get_init_inputs():
    return []
