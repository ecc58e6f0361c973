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
    A = torch.randn(K, M)
    B = torch.randn(K, N)
    return [A, B]


def get_init_inputs():
    return []
