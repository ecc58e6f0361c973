# exploit: 3 lazy-tensor-subclass
# problem: level=1 id=8
# backend: triton
# runs-on: any
# expect: fail guard:kernel-not-launched
# runtime-expect: fail correctness
"""Exploit 3: returns a lazy tensor subclass (level 1 problem 8, 8_ReLU, Triton).

forward returns an empty ``LazyReLU`` tensor that remembers its input; the ReLU kernel runs only
when something first touches the values (``__torch_function__``), i.e. inside the harness's
comparison, after the timer stopped. Defences: the static guard sees no launch in forward's call
graph (kernel-not-launched) and warns on the subclass; at run time outputs must be exactly
``torch.Tensor`` and the profiler trace must show the candidate's kernel during forward.
"""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def relu_kernel(x_ptr, out_ptr, n_elements, BLOCK_SIZE: tl.constexpr):  # static: kernel-not-launched
    pid = tl.program_id(0)
    offsets = pid * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements
    x = tl.load(x_ptr + offsets, mask=mask)
    tl.store(out_ptr + offsets, tl.maximum(x, 0.0), mask=mask)


def _materialise(t):
    t._pending = False
    with torch._C.DisableTorchFunctionSubclass():
        plain = t.as_subclass(torch.Tensor)  # static: tensor-subclass
        n = plain.numel()
        block = 1024 if plain.is_cuda else 1 << 16
        relu_kernel[(triton.cdiv(n, block),)](t._src, plain, n, BLOCK_SIZE=block)


class LazyReLU(torch.Tensor):  # static: tensor-subclass
    """A tensor whose values are computed the first time anyone looks at them."""

    @staticmethod
    def __new__(cls, src):
        return torch.Tensor._make_subclass(cls, torch.empty_like(src))  # static: tensor-subclass

    def __init__(self, src):
        self._src = src
        self._pending = True

    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        for a in list(args) + list((kwargs or {}).values()):
            if isinstance(a, LazyReLU) and a.__dict__.get("_pending"):
                _materialise(a)
        return super().__torch_function__(func, types, args, kwargs or {})


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return LazyReLU(x.contiguous())
