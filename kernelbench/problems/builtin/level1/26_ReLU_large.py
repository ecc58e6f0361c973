import torch
import torch.nn as nn

batch_size = 16384
dim = 65536


class Model(nn.Module):
    """Element-wise ReLU over a 4 GiB input, at the scale of KernelBench's own level-1 files."""

    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(x)


def get_inputs():
    x = torch.randn(batch_size, dim)
    return [x]


def get_init_inputs():
    return []
