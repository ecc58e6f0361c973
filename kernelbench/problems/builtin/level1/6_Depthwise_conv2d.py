import torch
import torch.nn as nn

batch_size = 16
channels = 128
height = 192
width = 192
kernel_size = 3


class Model(nn.Module):
    """Depthwise 2D convolution (groups = channels), 3x3 kernel, stride 1, padding 1, with bias."""

    def __init__(self, channels: int, kernel_size: int):
        super().__init__()
        self.conv = nn.Conv2d(channels, channels, kernel_size, stride=1, padding=kernel_size // 2, groups=channels)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.conv(x)


def get_inputs():
    x = torch.randn(batch_size, channels, height, width)
    return [x]


def get_init_inputs():
    return [channels, kernel_size]
