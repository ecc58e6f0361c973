# exploit: none (honest control)
# problem: level=1 id=8
# backend: tilelang
# runs-on: gpu
# expect: pass
# runtime-expect: pass
"""Honest control: a plain TileLang ReLU for level 1 problem 8 (8_ReLU), in the ``@tilelang.jit`` style.

It must pass every guard with no error or warning finding and be correct. If the guards flag this
file, they have a false positive. The worked solution uses ``tilelang.compile`` instead.
"""

import tilelang
import tilelang.language as T
import torch
import torch.nn as nn


@tilelang.jit(out_idx=[1])
def relu(rows: int, cols: int, block_rows: int = 16, block_cols: int = 1024):
    @T.prim_func
    def relu_tile(X: T.Tensor((rows, cols), "float32"), Y: T.Tensor((rows, cols), "float32")):
        with T.Kernel(T.ceildiv(cols, block_cols), T.ceildiv(rows, block_rows), threads=256) as (bx, by):
            for i, j in T.Parallel(block_rows, block_cols):
                r = by * block_rows + i
                c = bx * block_cols + j
                if r < rows and c < cols:
                    Y[r, c] = T.if_then_else(X[r, c] < 0.0, 0.0, X[r, c])

    return relu_tile


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x2 = x.contiguous().view(-1, x.shape[-1])
        return relu(x2.shape[0], x2.shape[1])(x2).view(x.shape)
