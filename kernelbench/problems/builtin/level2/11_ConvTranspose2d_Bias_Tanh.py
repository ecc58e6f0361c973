import torch
import torch.nn as nn

batch_size = 64
in_channels = 64
out_channels = 32
height = 64
width = 64
kernel_size = 4
stride = 2
padding = 1


class Model(nn.Module):
    """Transposed 2D convolution (doubles the spatial size), then minus a per-channel bias, then tanh."""

    def __init__(self, in_channels: int, out_channels: int, kernel_size: int, stride: int, padding: int):
        super().__init__()
        self.conv_t = nn.ConvTranspose2d(in_channels, out_channels, kernel_size, stride=stride, padding=padding)
        self.bias = nn.Parameter(0.1 * torch.randn(out_channels, 1, 1))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.conv_t(x)
        x = x - self.bias
        return torch.tanh(x)


def get_inputs():
    x = torch.randn(batch_size, in_channels, height, width)
    return [x]


def get_init_inputs():
    return [in_channels, out_channels, kernel_size, stride, padding]
