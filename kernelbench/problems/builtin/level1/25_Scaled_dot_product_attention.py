import torch
import torch.nn as nn
import torch.nn.functional as F

batch_size = 8
num_heads = 16
seq_len = 1024
head_dim = 64


class Model(nn.Module):
    """Non-causal scaled dot-product attention softmax(Q K^T / sqrt(D)) V on (B, H, S, D) inputs."""

    def __init__(self):
        super().__init__()

    def forward(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        return F.scaled_dot_product_attention(q, k, v)


def get_inputs():
    q = torch.randn(batch_size, num_heads, seq_len, head_dim)
    k = torch.randn(batch_size, num_heads, seq_len, head_dim)
    v = torch.randn(batch_size, num_heads, seq_len, head_dim)
    return [q, k, v]


def get_init_inputs():
    return []
