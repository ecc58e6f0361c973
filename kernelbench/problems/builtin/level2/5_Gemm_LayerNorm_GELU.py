import torch
import torch.nn as nn
import torch.nn.functional as F

batch_size = 4096
in_features = 2048
out_features = 4096


class Model(nn.Module):
    """nn.Linear, then LayerNorm over the features (random affine), then GELU."""

    def __init__(self, in_features: int, out_features: int):
        super().__init__()
        self.gemm = nn.Linear(in_features, out_features)
        self.norm = nn.LayerNorm(out_features)
        with torch.no_grad():
            self.norm.weight.copy_(1.0 + 0.5 * torch.randn(out_features))
            self.norm.bias.copy_(0.5 * torch.randn(out_features))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.gemm(x)
        x = self.norm(x)
        return F.gelu(x)


def get_inputs():
    x = torch.randn(batch_size, in_features)
    return [x]


def get_init_inputs():
    return [in_features, out_features]
