import torch
import torch.nn as nn

batch_size = 32768
hidden = 4096
eps = 1e-6


class Model(nn.Module):
    """RMSNorm over the last dimension: x * rsqrt(mean(x^2, -1) + eps) * weight."""

    def __init__(self, hidden: int, eps: float):
        super().__init__()
        self.eps = eps
        # Random rather than ones, so a solution must actually apply the weight.
        self.weight = nn.Parameter(torch.randn(hidden))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        rms = torch.rsqrt(torch.mean(x * x, dim=-1, keepdim=True) + self.eps)
        return x * rms * self.weight


def get_inputs():
    x = torch.randn(batch_size, hidden)
    return [x]


def get_init_inputs():
    return [hidden, eps]
