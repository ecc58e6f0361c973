import torch
import torch.nn as nn
import torch.nn.functional as F

batch_size = 8192
num_classes = 10


class Model(nn.Module):
    """LeNet-5 on 1x32x32 images: two conv + ReLU + max-pool stages, then three fully connected layers."""

    def __init__(self, num_classes: int):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 6, kernel_size=5)
        self.conv2 = nn.Conv2d(6, 16, kernel_size=5)
        self.fc1 = nn.Linear(16 * 5 * 5, 120)
        self.fc2 = nn.Linear(120, 84)
        self.fc3 = nn.Linear(84, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = F.max_pool2d(F.relu(self.conv1(x)), kernel_size=2, stride=2)
        x = F.max_pool2d(F.relu(self.conv2(x)), kernel_size=2, stride=2)
        x = torch.flatten(x, 1)
        x = F.relu(self.fc1(x))
        x = F.relu(self.fc2(x))
        return self.fc3(x)


def get_inputs():
    x = torch.randn(batch_size, 1, 32, 32)
    return [x]


def get_init_inputs():
    return [num_classes]
