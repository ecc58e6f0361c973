import torch
import torch.nn as nn

batch_size = 1024
dim1 = 4096
dim2 = 256


class Model(nn.Module):
    """Sum over dimension 1 of a 4 GiB 3D tensor (keepdim=True), at the scale of KernelBench's own level-1 files."""

    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.sum(x, dim=1, keepdim=True)


def get_inputs():
    x = torch.randn(batch_size, dim1, dim2)
    return [x]


def get_init_inputs():
    return []
