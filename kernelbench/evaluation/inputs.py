"""Seeded construction of models and inputs, identical in every process that does it.

Both the reference worker and the candidate worker call these functions with the same seed,
device and precision, so they build the same weights and the same inputs without ever sending
tensors to each other. Inputs are generated on the evaluation device (KernelBench's files call
``torch.rand`` on the default device; making that device the GPU is what keeps large problems
fast).
"""

from __future__ import annotations

import os
import random
import sys
import tempfile
import types
from collections.abc import Callable
from typing import Any

import torch

PRECISION_DTYPES = {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}


_SOURCE_DIR: str | None = None


def _source_file(code: str, name: str) -> str:
    """Write source to a real file: Triton's ``@jit`` reads its function's source through ``inspect``,
    which needs one, and tracebacks then show the candidate's lines."""
    global _SOURCE_DIR
    if _SOURCE_DIR is None:
        _SOURCE_DIR = tempfile.mkdtemp(prefix="kb-src-")
    path = os.path.join(_SOURCE_DIR, f"{name}.py")
    with open(path, "w", encoding="utf-8") as f:
        f.write(code)
    return path


def load_module(code: str, name: str, filename: str | None = None) -> types.ModuleType:
    """Execute source in a fresh module registered under ``name`` (dataclasses and pickling need that)."""
    module = types.ModuleType(name)
    module.__file__ = filename if filename and not filename.startswith("<") else _source_file(code, name)
    sys.modules[name] = module
    compiled = compile(code, module.__file__, "exec")
    exec(compiled, module.__dict__)
    return module


def seed_everything(seed: int) -> None:
    seed = int(seed) % (2**63 - 1)
    torch.manual_seed(seed)  # seeds the CPU and every CUDA generator
    random.seed(seed)
    try:
        import numpy as np

        np.random.seed(seed % (2**32))
    except ImportError:
        pass


def cast_floating(obj: Any, dtype: torch.dtype) -> Any:
    if isinstance(obj, torch.Tensor):
        return obj.to(dtype) if obj.is_floating_point() and obj.dtype != dtype else obj
    if isinstance(obj, (list, tuple)):
        return type(obj)(cast_floating(x, dtype) for x in obj)
    return obj


def _to_device(obj: Any, device: torch.device) -> Any:
    if isinstance(obj, torch.Tensor):
        return obj if obj.device == device else obj.to(device)
    if isinstance(obj, (list, tuple)):
        return type(obj)(_to_device(x, device) for x in obj)
    return obj


def make_inputs(get_inputs: Callable[[], Any], seed: int, device: torch.device, precision: str) -> list:
    seed_everything(seed)
    with torch.device(device):
        inputs = get_inputs()
    if not isinstance(inputs, (list, tuple)):
        raise TypeError(f"get_inputs() must return a list, got {type(inputs).__name__}")
    inputs = _to_device(list(inputs), device)
    dtype = PRECISION_DTYPES[precision]
    if dtype != torch.float32:
        inputs = cast_floating(inputs, dtype)
    return inputs


def build_model(model_cls: type, get_init_inputs: Callable[[], Any], seed: int, device: torch.device,
                precision: str) -> torch.nn.Module:
    """Same seed, same construction order, same device: Model and ModelNew get the same weights."""
    seed_everything(seed)
    with torch.device(device):
        init_inputs = get_init_inputs()
    if not isinstance(init_inputs, (list, tuple)):
        raise TypeError(f"get_init_inputs() must return a list, got {type(init_inputs).__name__}")
    init_inputs = _to_device(list(init_inputs), device)
    seed_everything(seed)
    with torch.device(device):
        model = model_cls(*init_inputs)
    if isinstance(model, torch.nn.Module):
        model = model.to(device)
        dtype = PRECISION_DTYPES[precision]
        if dtype != torch.float32:
            model = model.to(dtype)
    return model
