"""Measure the rates a GPU actually reaches, for ``kernelbench/data/measured_rates.json``.

Datasheet peaks are ceilings no kernel reaches, so a speed-of-light bound built on them flatters
nothing and tells a reader little about how close a kernel came to what the machine can do. These
measurements use the best library kernels there are for the two limits a bound divides by: a
device-to-device copy (bytes read plus bytes written per second) and large dense square matmuls
(cuBLAS) in fp32 on CUDA cores (TF32 off), TF32, fp16 and bf16. The median of repeated timed calls
is kept, each call timed with CUDA events; on the CPU (smoke tests) the wall clock is used.
"""

from __future__ import annotations

import datetime
import json
import logging
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from kernelbench.hardware import measured_rates_path, parse_measured_rates
from kernelbench.io_utils import atomic_write_json

log = logging.getLogger(__name__)

#: Matmul precisions measured, as ``measured_rates.json`` names them.
MATMUL_KINDS = ("fp32", "tf32", "fp16", "bf16")


@dataclass(frozen=True)
class RateSample:
    """One measured rate and how it was obtained."""

    kind: str  # "memory" or one of MATMUL_KINDS
    value: float  # bytes/s for memory, FLOP/s for a matmul
    size: int  # bytes copied, or the matmul's N
    median_ms: float
    calls: int


@dataclass
class MeasuredGpuRates:
    """Everything one run measured on one device, ready to merge into the measured-rates file."""

    device_name: str
    samples: list[RateSample] = field(default_factory=list)
    torch: str | None = None
    cuda: str | None = None
    date: str = field(default_factory=lambda: datetime.datetime.now(datetime.timezone.utc).date().isoformat())

    def value(self, kind: str) -> float | None:
        for s in self.samples:
            if s.kind == kind:
                return s.value
        return None

    def to_entry(self, source: str) -> dict:
        """The file's entry for this GPU (the format ``kernelbench.hardware.load_measured_rates`` reads)."""
        entry: dict = {"source": source, "device_name": self.device_name, "date": self.date,
                       "torch": self.torch, "cuda": self.cuda}
        if self.value("memory"):
            entry["memory_bandwidth_bytes_s"] = self.value("memory")
        for kind in MATMUL_KINDS:
            if self.value(kind):
                entry[f"{kind}_flops"] = self.value(kind)
        return {k: v for k, v in entry.items() if v is not None}


def _median_ms(fn: Callable[[], object], device, calls: int, warmup: int = 3) -> float:
    import torch

    for _ in range(warmup):
        fn()
    times: list[float] = []
    if device.type == "cuda":
        torch.cuda.synchronize(device)
        for _ in range(calls):
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            fn()
            end.record()
            end.synchronize()
            times.append(start.elapsed_time(end))
    else:
        for _ in range(calls):
            t0 = time.perf_counter()
            fn()
            times.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(times)


def measure_copy_bandwidth(device, nbytes: int, calls: int = 20) -> RateSample:
    """Bytes read plus bytes written per second by ``Tensor.copy_`` between two device buffers."""
    import torch

    n = max(1, nbytes // 4)
    src = torch.rand(n, device=device)
    dst = torch.empty_like(src)
    ms = _median_ms(lambda: dst.copy_(src), device, calls)
    moved = 2 * n * 4
    return RateSample("memory", moved / (ms / 1e3), n * 4, ms, calls)


def measure_matmul_rate(device, kind: str, n: int, calls: int = 10) -> RateSample:
    """Dense FLOP/s of an ``n``x``n`` matmul in one precision (``fp32`` means IEEE, TF32 off)."""
    import torch

    if kind not in MATMUL_KINDS:
        raise ValueError(f"unknown matmul kind {kind!r} (choose from {', '.join(MATMUL_KINDS)})")
    dtype = {"fp32": torch.float32, "tf32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}[kind]
    a = torch.rand(n, n, device=device, dtype=dtype)
    b = torch.rand(n, n, device=device, dtype=dtype)
    saved = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = kind == "tf32"
    try:
        ms = _median_ms(lambda: torch.mm(a, b), device, calls)
    finally:
        torch.backends.cuda.matmul.allow_tf32 = saved
    return RateSample(kind, 2.0 * n ** 3 / (ms / 1e3), n, ms, calls)


def measure_gpu_rates(device: str = "cuda", copy_bytes: int = 1 << 30, matmul_n: int = 8192,
                      kinds: tuple[str, ...] = MATMUL_KINDS, calls: int = 20,
                      on_sample: Callable[[RateSample], None] | None = None) -> MeasuredGpuRates:
    """Copy bandwidth and matmul rates on one device; ``on_sample`` sees each as it is measured."""
    import torch

    dev = torch.device(device)
    name = torch.cuda.get_device_name(dev) if dev.type == "cuda" else "cpu"
    out = MeasuredGpuRates(device_name=name, torch=torch.__version__, cuda=torch.version.cuda)
    for kind in ("memory", *kinds):
        if kind == "memory":
            sample = measure_copy_bandwidth(dev, copy_bytes, calls)
        else:
            sample = measure_matmul_rate(dev, kind, matmul_n, max(3, calls // 2))
        log.info("%s: %.4g (%.3f ms)", sample.kind, sample.value, sample.median_ms)
        out.samples.append(sample)
        if on_sample is not None:
            on_sample(sample)
        if dev.type == "cuda":
            torch.cuda.empty_cache()
    return out


def merge_measured_rates(gpu_name: str, entry: dict, path: str | Path | None = None) -> Path:
    """Put one GPU's entry into the measured-rates file, keeping the others.

    The new content is checked by the same parser the bounds use before anything is written: a bad
    entry (unknown GPU name, a zero rate) raises and leaves the file as it was.
    """
    path = Path(path) if path is not None else measured_rates_path()
    data = json.loads(path.read_text(encoding="utf-8")) if path.exists() else {"schema_version": 1, "gpus": {}}
    data.setdefault("gpus", {})[gpu_name] = entry
    parse_measured_rates(data, path)
    atomic_write_json(path, data)
    return path


__all__ = ["MATMUL_KINDS", "MeasuredGpuRates", "RateSample", "measure_copy_bandwidth", "measure_gpu_rates",
           "measure_matmul_rate", "merge_measured_rates"]
