import torch
import torch.nn as nn

batch_size = 8192
hidden = 2048


class Model(nn.Module):
    """LayerNorm(x + Linear(x)): a square nn.Linear, a residual add of the input, then LayerNorm (random affine)."""

    def __init__(self, hidden: int):
        super().__init__()
        self.gemm = nn.Linear(hidden, hidden)
        self.norm = nn.LayerNorm(hidden)
        with torch.no_grad():
            self.norm.weight.copy_(1.0 + 0.5 * torch.randn(hidden))
            self.norm.bias.copy_(0.5 * torch.randn(hidden))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.gemm(x)
        return self.norm(y + x)


def get_inputs():
    x = torch.randn(batch_size, hidden)
    return [x]


def get_init_inputs():
    return [hidden]
