import torch
import torch.nn as nn

batch_size = 64
in_channels = 64
out_channels = 128
height = 64
width = 64
kernel_size = 3


class Model(nn.Module):
    """3x3 convolution, then BatchNorm2d in training mode (batch statistics, random affine), then ReLU."""

    def __init__(self, in_channels: int, out_channels: int, kernel_size: int):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size, padding=kernel_size // 2)
        self.bn = nn.BatchNorm2d(out_channels)
        with torch.no_grad():
            self.bn.weight.copy_(1.0 + 0.5 * torch.randn(out_channels))
            self.bn.bias.copy_(0.5 * torch.randn(out_channels))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.conv(x)
        x = self.bn(x)
        return torch.relu(x)


def get_inputs():
    x = torch.randn(batch_size, in_channels, height, width)
    return [x]


def get_init_inputs():
    return [in_channels, out_channels, kernel_size]
