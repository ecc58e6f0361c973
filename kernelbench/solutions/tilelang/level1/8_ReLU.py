"""Worked solution, level 1 problem 8 (ReLU): one pass written in TileLang.

The input is viewed as rows x columns; each block of 256 threads owns a 16 x 1024 tile and
``T.Parallel`` spreads the tile's elements over the threads, which TileLang turns into vectorised,
coalesced loads and stores along the rows. Elements outside the tensor are skipped, so any shape
works. ``x < 0 ? 0 : x`` keeps a NaN input as NaN, as ``torch.relu`` does.

The kernel is specialised to the shape and dtype (TileLang compiles static shapes best) and compiled
once per (rows, columns, dtype) with ``tilelang.compile``; the output is allocated by the kernel
(``out_idx``) on the input's device, and TileLang launches on PyTorch's current stream.

Verified on an H100 80GB HBM3 (2026-11-25, tilelang 0.1.15): correct and timed through the full evaluator,
sandboxed, no warning finding (0.98x of PyTorch).
"""

import tilelang
import tilelang.language as T
import torch
import torch.nn as nn

BLOCK_ROWS, BLOCK_COLS, THREADS = 16, 1024, 256
_DTYPES = {torch.float32: "float32", torch.float16: "float16", torch.bfloat16: "bfloat16"}


def build_relu(rows: int, cols: int, dtype: str):
    @T.prim_func
    def relu_tile(X: T.Tensor((rows, cols), dtype), Y: T.Tensor((rows, cols), dtype)):
        with T.Kernel(T.ceildiv(cols, BLOCK_COLS), T.ceildiv(rows, BLOCK_ROWS), threads=THREADS) as (bx, by):
            for i, j in T.Parallel(BLOCK_ROWS, BLOCK_COLS):
                r = by * BLOCK_ROWS + i
                c = bx * BLOCK_COLS + j
                if r < rows and c < cols:
                    Y[r, c] = T.if_then_else(X[r, c] < T.cast(0, dtype), T.cast(0, dtype), X[r, c])

    return tilelang.compile(relu_tile, out_idx=[1])


_KERNELS = {}


def _relu(x: torch.Tensor) -> torch.Tensor:
    if x.numel() == 0:
        return x.clone()  # nothing to compute (a grid of zero blocks cannot be launched)
    x2 = x.contiguous().view(-1, x.shape[-1]) if x.dim() > 1 else x.contiguous().view(1, -1)
    key = (x2.shape[0], x2.shape[1], x.dtype)
    kernel = _KERNELS.get(key)
    if kernel is None:
        kernel = _KERNELS[key] = build_relu(x2.shape[0], x2.shape[1], _DTYPES[x.dtype])
    return kernel(x2).view(x.shape)


class ModelNew(nn.Module):
    def __init__(self) -> None:
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return _relu(x)
