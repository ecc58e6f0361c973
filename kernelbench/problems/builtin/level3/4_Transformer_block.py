import torch
import torch.nn as nn
import torch.nn.functional as F

batch_size = 4
seq_len = 1024
d_model = 768
num_heads = 12
mlp_ratio = 4


class Model(nn.Module):
    """Pre-norm transformer block: x + causal self-attention(LN(x)), then + GELU MLP(LN(x))."""

    def __init__(self, d_model: int, num_heads: int, mlp_ratio: int):
        super().__init__()
        self.num_heads = num_heads
        self.ln1 = nn.LayerNorm(d_model)
        self.qkv = nn.Linear(d_model, 3 * d_model)
        self.proj = nn.Linear(d_model, d_model)
        self.ln2 = nn.LayerNorm(d_model)
        self.fc1 = nn.Linear(d_model, mlp_ratio * d_model)
        self.fc2 = nn.Linear(mlp_ratio * d_model, d_model)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, s, d = x.shape
        h = self.ln1(x)
        q, k, v = self.qkv(h).split(d, dim=-1)
        q = q.view(b, s, self.num_heads, d // self.num_heads).transpose(1, 2)
        k = k.view(b, s, self.num_heads, d // self.num_heads).transpose(1, 2)
        v = v.view(b, s, self.num_heads, d // self.num_heads).transpose(1, 2)
        a = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        a = a.transpose(1, 2).reshape(b, s, d)
        x = x + self.proj(a)
        x = x + self.fc2(F.gelu(self.fc1(self.ln2(x))))
        return x


def get_inputs():
    x = torch.randn(batch_size, seq_len, d_model)
    return [x]


def get_init_inputs():
    return [d_model, num_heads, mlp_ratio]
