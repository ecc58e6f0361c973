# exploit: sandbox s04 (victim)
# problem: level=1 id=8
# backend: torch
# runs-on: any
# expect: pass
# runtime-expect: pass
"""An honest candidate with a small C++ extension: the cache entry s04_cache_plant.py tries to forge."""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

_ext = load_inline(name="kb_victim_ext", cpp_sources="int magic() { return 42; }", functions=["magic"],
                   verbose=False)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return torch.relu(x) * (_ext.magic() / 42)
