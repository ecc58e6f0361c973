import torch
import torch.nn as nn
import torch.nn.functional as F

batch_size = 64
in_channels = 32
out_channels = 64
height = 128
width = 128
kernel_size = 3


class Model(nn.Module):
    """3x3 convolution, then GELU, then global average pooling to one value per (sample, channel)."""

    def __init__(self, in_channels: int, out_channels: int, kernel_size: int):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size, padding=kernel_size // 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.conv(x)
        x = F.gelu(x)
        x = F.adaptive_avg_pool2d(x, 1)
        return torch.flatten(x, 1)


def get_inputs():
    x = torch.randn(batch_size, in_channels, height, width)
    return [x]


def get_init_inputs():
    return [in_channels, out_channels, kernel_size]
