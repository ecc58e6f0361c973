# exploit: 22 predict-seeded-inputs
# problem: level=1 id=8
# backend: triton
# runs-on: any
# expect: fail correctness
# runtime-expect: fail correctness
# cpu-expect: honest
"""Extra exploit 22: precomputes the answer in __init__ for guessed seeds (level 1 problem 8, Triton).

KernelBench-style harnesses seed the RNG with a fixed value before ``get_inputs()``; the candidate
regenerates the inputs it expects in ``__init__``, computes the answer with PyTorch there (outside
any timed region) and returns it whenever the shape matches. Defences: the static guard warns on
the seeding (rng-seed); at run time inputs come from seeds derived from a per-run secret, so the
guess is wrong and correctness fails.
"""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def relu_kernel(x_ptr, out_ptr, n_elements, BLOCK_SIZE: tl.constexpr):
    pid = tl.program_id(0)
    offsets = pid * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements
    x = tl.load(x_ptr + offsets, mask=mask)
    tl.store(out_ptr + offsets, tl.maximum(x, 0.0), mask=mask)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        state = torch.get_rng_state()
        torch.manual_seed(42)  # static: rng-seed
        guess = torch.randn(8192, 16384)
        torch.set_rng_state(state)  # static: rng-seed
        self.register_buffer("expected", torch.relu(guess), persistent=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.shape == self.expected.shape:
            return self.expected.clone()
        out = torch.empty_like(x)
        n = x.numel()
        block = 1024 if x.is_cuda else 1 << 16
        relu_kernel[(triton.cdiv(n, block),)](x, out, n, BLOCK_SIZE=block)
        return out
