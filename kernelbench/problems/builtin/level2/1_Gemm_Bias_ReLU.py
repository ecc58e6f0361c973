import torch
import torch.nn as nn

batch_size = 2048
in_features = 4096
out_features = 4096


class Model(nn.Module):
    """relu(x @ W^T + bias): a bias-free nn.Linear, then a separate bias Parameter, then ReLU."""

    def __init__(self, in_features: int, out_features: int):
        super().__init__()
        self.gemm = nn.Linear(in_features, out_features, bias=False)
        self.bias = nn.Parameter(torch.randn(out_features))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.gemm(x)
        x = x + self.bias
        return torch.relu(x)


def get_inputs():
    x = torch.randn(batch_size, in_features)
    return [x]


def get_init_inputs():
    return [in_features, out_features]
