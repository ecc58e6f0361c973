import torch
import torch.nn as nn

batch_size = 32768
hidden = 4096
eps = 1e-5


class Model(nn.Module):
    """nn.LayerNorm over the last dimension, with a randomly initialised elementwise affine."""

    def __init__(self, hidden: int, eps: float):
        super().__init__()
        self.norm = nn.LayerNorm(hidden, eps=eps)
        # Random affine parameters, so a solution that ignores them cannot pass.
        with torch.no_grad():
            self.norm.weight.copy_(1.0 + 0.5 * torch.randn(hidden))
            self.norm.bias.copy_(0.5 * torch.randn(hidden))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.norm(x)


def get_inputs():
    x = torch.randn(batch_size, hidden)
    return [x]


def get_init_inputs():
    return [hidden, eps]
