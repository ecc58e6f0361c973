import torch
import torch.nn as nn

batch_size = 64
channels = 64
height = 128
width = 128


class Model(nn.Module):
    """nn.BatchNorm2d in training mode (normalises with the batch's statistics), random affine."""

    def __init__(self, channels: int):
        super().__init__()
        self.bn = nn.BatchNorm2d(channels)
        # Random affine parameters, so a solution that ignores them cannot pass.
        with torch.no_grad():
            self.bn.weight.copy_(1.0 + 0.5 * torch.randn(channels))
            self.bn.bias.copy_(0.5 * torch.randn(channels))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.bn(x)


def get_inputs():
    x = torch.randn(batch_size, channels, height, width)
    return [x]


def get_init_inputs():
    return [channels]
