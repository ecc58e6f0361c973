import torch
import torch.nn as nn

batch_size = 1024
input_size = 4096
layer_sizes = [4096, 2048, 1024]
output_size = 256


class Model(nn.Module):
    """Multi-layer perceptron: Linear + ReLU hidden layers, then a final Linear without activation."""

    def __init__(self, input_size: int, layer_sizes: list, output_size: int):
        super().__init__()
        layers = []
        current = input_size
        for size in layer_sizes:
            layers.append(nn.Linear(current, size))
            layers.append(nn.ReLU())
            current = size
        layers.append(nn.Linear(current, output_size))
        self.network = nn.Sequential(*layers)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.network(x)


def get_inputs():
    x = torch.randn(batch_size, input_size)
    return [x]


def get_init_inputs():
    return [input_size, layer_sizes, output_size]
