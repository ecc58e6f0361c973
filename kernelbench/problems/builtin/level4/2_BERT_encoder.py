import torch
import torch.nn as nn

try:
    from transformers import BertConfig, BertModel
except ImportError as e:
    raise ImportError("this problem needs the 'transformers' package: pip install 'kernelbench[transformers]'") from e

batch_size = 4
seq_len = 512
vocab_size = 30522
hidden_size = 768
num_layers = 4
num_heads = 12
intermediate_size = 3072


class Model(nn.Module):
    """A 4-layer BERT encoder with random weights: token ids -> last hidden state (no pooler)."""

    def __init__(self, vocab_size: int, hidden_size: int, num_layers: int, num_heads: int, intermediate_size: int):
        super().__init__()
        # Dropout off so that the forward is deterministic in training mode.
        config = BertConfig(
            vocab_size=vocab_size,
            hidden_size=hidden_size,
            num_hidden_layers=num_layers,
            num_attention_heads=num_heads,
            intermediate_size=intermediate_size,
            max_position_embeddings=512,
            hidden_dropout_prob=0.0,
            attention_probs_dropout_prob=0.0,
            attn_implementation="eager",
        )
        self.model = BertModel(config, add_pooling_layer=False)

    def forward(self, input_ids: torch.Tensor) -> torch.Tensor:
        return self.model(input_ids=input_ids).last_hidden_state


def get_inputs():
    input_ids = torch.randint(0, vocab_size, (batch_size, seq_len))
    return [input_ids]


def get_init_inputs():
    return [vocab_size, hidden_size, num_layers, num_heads, intermediate_size]
