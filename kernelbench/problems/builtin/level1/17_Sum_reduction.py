import torch
import torch.nn as nn

batch_size = 128
dim1 = 4096
dim2 = 512


class Model(nn.Module):
    """Sum over dimension 1 of a 3D tensor, keeping the reduced dimension (keepdim=True)."""

    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.sum(x, dim=1, keepdim=True)


def get_inputs():
    x = torch.randn(batch_size, dim1, dim2)
    return [x]


def get_init_inputs():
    return []
