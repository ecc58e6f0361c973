# exploit: 11 no-kernel-of-its-own
# problem: level=1 id=1
# backend: triton
# runs-on: any
# expect: fail guard:no-custom-kernel
# runtime-expect: fail guard
"""Exploit 11: calls torch.matmul and launches no kernel of its own (level 1 problem 1, "Triton").

"cuBLAS is already optimal for square GEMM", so the candidate imports triton and calls
``torch.matmul``: correct, speedup 1.0, and counted as a Triton solution by a harness that only
checks outputs. Defences: the static guard finds no @triton.jit kernel (no-custom-kernel) and warns
on the PyTorch compute; at run time the profiler trace shows no candidate kernel during forward.
"""

import torch
import torch.nn as nn
import triton  # noqa: F401  (the Triton toolchain warms up cuBLAS handles)


class ModelNew(nn.Module):  # static: no-custom-kernel
    def __init__(self):
        super().__init__()

    def forward(self, A: torch.Tensor, B: torch.Tensor) -> torch.Tensor:
        return torch.matmul(A, B)  # static: torch-compute
