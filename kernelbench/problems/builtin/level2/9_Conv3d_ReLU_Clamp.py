import torch
import torch.nn as nn

batch_size = 8
in_channels = 16
out_channels = 32
depth = 32
height = 64
width = 64
kernel_size = 3
clamp_max = 0.5


class Model(nn.Module):
    """3x3x3 3D convolution (padding 1), then ReLU, then clamp from above at clamp_max."""

    def __init__(self, in_channels: int, out_channels: int, kernel_size: int, clamp_max: float):
        super().__init__()
        self.conv = nn.Conv3d(in_channels, out_channels, kernel_size, padding=kernel_size // 2)
        self.clamp_max = clamp_max

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.conv(x)
        x = torch.relu(x)
        return torch.clamp(x, max=self.clamp_max)


def get_inputs():
    x = torch.randn(batch_size, in_channels, depth, height, width)
    return [x]


def get_init_inputs():
    return [in_channels, out_channels, kernel_size, clamp_max]
