import torch
import torch.nn as nn
import torch.nn.functional as F

batch_size = 4096
in_features = 4096
out_features = 2048
eps = 1e-6


class Model(nn.Module):
    """nn.Linear, then RMSNorm over the features (random weight), then SiLU."""

    def __init__(self, in_features: int, out_features: int, eps: float):
        super().__init__()
        self.gemm = nn.Linear(in_features, out_features)
        self.norm_weight = nn.Parameter(torch.randn(out_features))
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.gemm(x)
        x = x * torch.rsqrt(torch.mean(x * x, dim=-1, keepdim=True) + self.eps) * self.norm_weight
        return F.silu(x)


def get_inputs():
    x = torch.randn(batch_size, in_features)
    return [x]


def get_init_inputs():
    return [in_features, out_features, eps]
