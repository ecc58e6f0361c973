import torch
import torch.nn as nn

batch_size = 4096
in_features = 2048
out_features = 4096
scaling_factor = 2.0


class Model(nn.Module):
    """nn.Linear, then Swish (x * sigmoid(x)), then multiplication by a constant."""

    def __init__(self, in_features: int, out_features: int, scaling_factor: float):
        super().__init__()
        self.gemm = nn.Linear(in_features, out_features)
        self.scaling_factor = scaling_factor

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.gemm(x)
        x = x * torch.sigmoid(x)
        return x * self.scaling_factor


def get_inputs():
    x = torch.randn(batch_size, in_features)
    return [x]


def get_init_inputs():
    return [in_features, out_features, scaling_factor]
