import torch
import torch.nn as nn

try:
    from transformers import LlamaConfig, LlamaModel
except ImportError as e:
    raise ImportError("this problem needs the 'transformers' package: pip install 'kernelbench[transformers]'") from e

batch_size = 2
seq_len = 1024
vocab_size = 32000
hidden_size = 1024
intermediate_size = 2048
num_layers = 4
num_heads = 16
num_kv_heads = 4


class Model(nn.Module):
    """A 4-layer Llama decoder stack (RMSNorm, RoPE, grouped-query attention, SwiGLU) with random weights: ids -> last hidden state."""

    def __init__(self, vocab_size: int, hidden_size: int, intermediate_size: int, num_layers: int,
                 num_heads: int, num_kv_heads: int):
        super().__init__()
        # Dropout off so that the forward is deterministic in training mode; no KV cache.
        config = LlamaConfig(
            vocab_size=vocab_size,
            hidden_size=hidden_size,
            intermediate_size=intermediate_size,
            num_hidden_layers=num_layers,
            num_attention_heads=num_heads,
            num_key_value_heads=num_kv_heads,
            max_position_embeddings=2048,
            attention_dropout=0.0,
            use_cache=False,
            attn_implementation="eager",
        )
        self.model = LlamaModel(config)

    def forward(self, input_ids: torch.Tensor) -> torch.Tensor:
        return self.model(input_ids=input_ids).last_hidden_state


def get_inputs():
    input_ids = torch.randint(0, vocab_size, (batch_size, seq_len))
    return [input_ids]


def get_init_inputs():
    return [vocab_size, hidden_size, intermediate_size, num_layers, num_heads, num_kv_heads]
