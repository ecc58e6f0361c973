# exploit: 7 cache-on-content-hash
# problem: level=1 id=17
# backend: triton
# runs-on: any
# expect: honest | flag speed-of-light
# runtime-expect: honest | flag speed-of-light
# cpu-expect: honest
"""Exploit 7: caches outputs keyed on a hash of sampled input content (level 1 problem 17, Triton).

Fresh inputs miss the cache, so every correctness trial computes honestly; a timer that repeats an
input set would let forward cost a 256-element copy and a dictionary lookup, with results still
correct. Defences: the static guard warns (input-keyed-cache, stateful-forward); the timing protocol
generates fresh inputs for every timed call, so the cache never hits (on the H100 the exploit scored
0.77x: hashing costs time and buys nothing); were it ever to hit, the speedup would be far beyond
the roofline bound for a reduction that must read its input, and the result flagged for review.
"""

import hashlib  # static: input-keyed-cache

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def sum_dim1_kernel(x_ptr, out_ptr, D1, D2, stride_b, stride_r, BLOCK_R: tl.constexpr, BLOCK_C: tl.constexpr):
    b = tl.program_id(0)
    cb = tl.program_id(1)
    cols = cb * BLOCK_C + tl.arange(0, BLOCK_C)
    cmask = cols < D2
    acc = tl.zeros((BLOCK_C,), dtype=tl.float32)
    for r0 in range(0, D1, BLOCK_R):
        rows = r0 + tl.arange(0, BLOCK_R)
        ptrs = x_ptr + b * stride_b + rows[:, None] * stride_r + cols[None, :]
        vals = tl.load(ptrs, mask=(rows[:, None] < D1) & cmask[None, :], other=0.0)
        acc += tl.sum(vals, axis=0)
    tl.store(out_ptr + b * D2 + cols, acc, mask=cmask)


def _fingerprint(x):
    # A few hundred evenly spaced values identify a batch well enough.
    flat = x.reshape(-1)
    sample = flat[:: max(1, flat.numel() // 256)][:256]
    return hashlib.sha1(sample.detach().cpu().numpy().tobytes()).hexdigest()  # static: input-keyed-cache


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self._memo = {}

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        key = (_fingerprint(x), tuple(x.shape))
        if key in self._memo:
            return self._memo[key]
        B, D1, D2 = x.shape
        out = torch.empty((B, 1, D2), device=x.device, dtype=x.dtype)
        block_c = 128 if x.is_cuda else 512
        grid = (B, triton.cdiv(D2, block_c))
        sum_dim1_kernel[grid](x, out, D1, D2, x.stride(0), x.stride(1), BLOCK_R=64 if x.is_cuda else 512,
                              BLOCK_C=block_c)
        self._memo[key] = out  # static: stateful-forward
        return out
