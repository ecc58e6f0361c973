import tilelang
import tilelang.language as T
import torch
import torch.nn as nn

DTYPES = {torch.float32: "float32", torch.float16: "float16", torch.bfloat16: "bfloat16"}


@tilelang.jit(out_idx=[-1])
def add_relu(rows: int, cols: int, dtype: str, block_rows: int = 16, block_cols: int = 1024):
    @T.prim_func
    def add_relu_tile(A: T.Tensor((rows, cols), dtype), B: T.Tensor((rows, cols), dtype),
                      Out: T.Tensor((rows, cols), dtype)):
        with T.Kernel(T.ceildiv(cols, block_cols), T.ceildiv(rows, block_rows), threads=256) as (bx, by):
            for i, j in T.Parallel(block_rows, block_cols):
                r = by * block_rows + i
                c = bx * block_cols + j
                if r < rows and c < cols:
                    Out[r, c] = T.max(A[r, c] + B[r, c], T.cast(0, dtype))

    return add_relu_tile


class ModelNew(nn.Module):
    """Same interface as Model; the add and the ReLU run as one fused TileLang kernel."""

    def __init__(self):
        super().__init__()

    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        a = a.contiguous()
        b = b.contiguous()
        kernel = add_relu(a.shape[0], a.shape[1], DTYPES[a.dtype])
        return kernel(a, b)
