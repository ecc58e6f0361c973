import torch
import torch.nn as nn

batch_size = 128
channels = 24
height = 56
width = 56
expand_ratio = 6


class Model(nn.Module):
    """MobileNetV2 inverted residual (stride 1): 1x1 expand + BN + ReLU6, 3x3 depthwise + BN + ReLU6, 1x1 project + BN, + input."""

    def __init__(self, channels: int, expand_ratio: int):
        super().__init__()
        hidden = channels * expand_ratio
        self.block = nn.Sequential(
            nn.Conv2d(channels, hidden, 1, bias=False),
            nn.BatchNorm2d(hidden),
            nn.ReLU6(),
            nn.Conv2d(hidden, hidden, 3, padding=1, groups=hidden, bias=False),
            nn.BatchNorm2d(hidden),
            nn.ReLU6(),
            nn.Conv2d(hidden, channels, 1, bias=False),
            nn.BatchNorm2d(channels),
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.block(x)


def get_inputs():
    x = torch.randn(batch_size, channels, height, width)
    return [x]


def get_init_inputs():
    return [channels, expand_ratio]
