import torch
import torch.nn as nn

BATCH = 64
M = 512
K = 1024
N = 1024


class Model(nn.Module):
    """Batched matrix product torch.bmm(A, B): (BATCH, M, K) x (BATCH, K, N) -> (BATCH, M, N)."""

    def __init__(self):
        super().__init__()

    def forward(self, A: torch.Tensor, B: torch.Tensor) -> torch.Tensor:
        return torch.bmm(A, B)


def get_inputs():
    # Scaled by 1/sqrt(K) so outputs are O(1): with raw randn operands, outputs near zero differ by
    # more than 1e-4 between two correct fp32 summation orders, and honest kernels would fail.
    A = torch.randn(BATCH, M, K) * K ** -0.5
    B = torch.randn(BATCH, K, N)
    return [A, B]


def get_init_inputs():
    return []
