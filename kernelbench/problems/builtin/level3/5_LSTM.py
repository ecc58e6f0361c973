import torch
import torch.nn as nn

batch_size = 64
seq_len = 128
input_size = 256
hidden_size = 512
num_layers = 2
output_size = 128


class Model(nn.Module):
    """Two-layer LSTM (zero initial state) over a batch-first sequence; a Linear head on the last step's output."""

    def __init__(self, input_size: int, hidden_size: int, num_layers: int, output_size: int):
        super().__init__()
        self.lstm = nn.LSTM(input_size, hidden_size, num_layers=num_layers, batch_first=True)
        self.head = nn.Linear(hidden_size, output_size)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out, _ = self.lstm(x)
        return self.head(out[:, -1, :])


def get_inputs():
    x = torch.randn(batch_size, seq_len, input_size)
    return [x]


def get_init_inputs():
    return [input_size, hidden_size, num_layers, output_size]
