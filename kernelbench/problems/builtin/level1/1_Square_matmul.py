import torch
import torch.nn as nn

N = 4096
# Reduced size for correctness checks on the CPU (docs/builtin-suite.md); not scored.
CPU_SIZE = {"N": 128}


class Model(nn.Module):
    """C = A @ B for two square N x N matrices."""

    def __init__(self):
        super().__init__()

    def forward(self, A: torch.Tensor, B: torch.Tensor) -> torch.Tensor:
        return torch.matmul(A, B)


def get_inputs():
    # Scaled by 1/sqrt(K) so outputs are O(1): with raw randn operands, outputs near zero differ by
    # more than 1e-4 between two correct fp32 summation orders, and honest kernels would fail.
    A = torch.randn(N, N) * N ** -0.5
    B = torch.randn(N, N)
    return [A, B]


def get_init_inputs():
    return []
