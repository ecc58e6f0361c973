import torch
import torch.nn as nn

batch_size = 32
in_channels = 32
out_channels = 64
height = 128
width = 128
kernel_size = 3


class Model(nn.Module):
    """3x3 convolution, then + a per-channel bias, then * a per-channel scale, then ReLU."""

    def __init__(self, in_channels: int, out_channels: int, kernel_size: int):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size, padding=kernel_size // 2)
        self.add_bias = nn.Parameter(0.1 * torch.randn(out_channels, 1, 1))
        self.scale = nn.Parameter(torch.randn(out_channels, 1, 1))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.conv(x)
        x = x + self.add_bias
        x = x * self.scale
        return torch.relu(x)


def get_inputs():
    x = torch.randn(batch_size, in_channels, height, width)
    return [x]


def get_init_inputs():
    return [in_channels, out_channels, kernel_size]
