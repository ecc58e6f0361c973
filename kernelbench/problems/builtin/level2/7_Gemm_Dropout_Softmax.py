import torch
import torch.nn as nn

batch_size = 4096
in_features = 4096
out_features = 1024
dropout_p = 0.1


class Model(nn.Module):
    """nn.Linear, then dropout (p=0.1, active: training mode), then softmax over the features."""

    # Random by construction: the dropout mask comes from the RNG, so two forwards differ.

    def __init__(self, in_features: int, out_features: int, dropout_p: float):
        super().__init__()
        self.gemm = nn.Linear(in_features, out_features)
        self.dropout = nn.Dropout(dropout_p)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.gemm(x)
        x = self.dropout(x)
        return torch.softmax(x, dim=1)


def get_inputs():
    x = torch.randn(batch_size, in_features)
    return [x]


def get_init_inputs():
    return [in_features, out_features, dropout_p]
