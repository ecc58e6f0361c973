import torch
import torch.nn as nn

try:
    from transformers import GPT2Config, GPT2LMHeadModel
except ImportError as e:
    raise ImportError("this problem needs the 'transformers' package: pip install 'kernelbench[transformers]'") from e

batch_size = 2
seq_len = 512
vocab_size = 50257
n_positions = 1024
n_embd = 768
n_layer = 4
n_head = 12


class Model(nn.Module):
    """A 4-layer GPT-2 causal language model with random weights: token ids -> next-token logits."""

    def __init__(self, vocab_size: int, n_positions: int, n_embd: int, n_layer: int, n_head: int):
        super().__init__()
        # Dropout off so that the forward is deterministic in training mode; no KV cache.
        config = GPT2Config(
            vocab_size=vocab_size,
            n_positions=n_positions,
            n_embd=n_embd,
            n_layer=n_layer,
            n_head=n_head,
            resid_pdrop=0.0,
            embd_pdrop=0.0,
            attn_pdrop=0.0,
            use_cache=False,
            attn_implementation="eager",
        )
        self.model = GPT2LMHeadModel(config)

    def forward(self, input_ids: torch.Tensor) -> torch.Tensor:
        return self.model(input_ids=input_ids).logits


def get_inputs():
    input_ids = torch.randint(0, vocab_size, (batch_size, seq_len))
    return [input_ids]


def get_init_inputs():
    return [vocab_size, n_positions, n_embd, n_layer, n_head]
