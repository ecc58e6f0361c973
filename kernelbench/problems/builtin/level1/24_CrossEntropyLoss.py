import torch
import torch.nn as nn
import torch.nn.functional as F

batch_size = 16384
num_classes = 8192


class Model(nn.Module):
    """Mean cross-entropy loss of logits against int64 class targets (a scalar)."""

    def __init__(self):
        super().__init__()

    def forward(self, logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        return F.cross_entropy(logits, targets)


def get_inputs():
    logits = torch.randn(batch_size, num_classes)
    targets = torch.randint(0, num_classes, (batch_size,))
    return [logits, targets]


def get_init_inputs():
    return []
