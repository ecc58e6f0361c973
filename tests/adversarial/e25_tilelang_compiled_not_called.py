# exploit: 25 tilelang-compiled-not-called
# problem: level=1 id=8
# backend: tilelang
# runs-on: gpu
# expect: fail guard:kernel-not-launched
# runtime-expect: fail guard
"""Exploit 25: a TileLang kernel compiled in ``__init__`` and never called; PyTorch does the work (level 1 problem 8).

The file defines a ``@T.prim_func`` and compiles it with ``tilelang.compile`` (KernelBench's own TileLang
check, "is there an ``@T.prim_func``?", accepts it), but forward computes ``torch.clamp_min(x, 0)``.
Defences: the static guard finds no call of the compiled kernel in forward's reach (kernel-not-launched)
and warns on the PyTorch compute; at run time the profiler trace shows only PyTorch's kernel.
"""

import tilelang
import tilelang.language as T
import torch
import torch.nn as nn

ROWS, COLS = 8192, 16384


def build(rows: int, cols: int):
    @T.prim_func
    def relu_tile(X: T.Tensor((rows, cols), "float32"), Y: T.Tensor((rows, cols), "float32")):  # static: kernel-not-launched
        with T.Kernel(T.ceildiv(cols, 1024), T.ceildiv(rows, 16), threads=256) as (bx, by):
            for i, j in T.Parallel(16, 1024):
                Y[by * 16 + i, bx * 1024 + j] = T.max(X[by * 16 + i, bx * 1024 + j], 0.0)

    return tilelang.compile(relu_tile, out_idx=[1])


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.kernel = build(ROWS, COLS)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.clamp_min(x, 0.0)  # static: torch-compute
