import torch
import torch.nn as nn

batch_size = 32
channels = 64
height = 256
width = 256
kernel_size = 3
stride = 2
padding = 1


class Model(nn.Module):
    """2D max pooling, kernel 3, stride 2, padding 1 (overlapping windows, halves the spatial size)."""

    def __init__(self, kernel_size: int, stride: int, padding: int):
        super().__init__()
        self.pool = nn.MaxPool2d(kernel_size, stride=stride, padding=padding)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.pool(x)


def get_inputs():
    x = torch.randn(batch_size, channels, height, width)
    return [x]


def get_init_inputs():
    return [kernel_size, stride, padding]
