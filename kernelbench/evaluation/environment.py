"""The hardware and software a result was measured on."""

from __future__ import annotations

import platform
import sys

from kernelbench import TIMING_PROTOCOL_VERSION
from kernelbench.hardware import nvidia_smi_query


def _smi_query(field: str) -> str | None:
    """One field of ``nvidia-smi --query-gpu`` for the first GPU, without touching CUDA here."""
    values = nvidia_smi_query(field, timeout_s=10)
    return values[0] if values else None


def driver_version() -> str | None:
    try:
        import pynvml  # nvidia-ml-py, present on most GPU machines

        pynvml.nvmlInit()
        v = pynvml.nvmlSystemGetDriverVersion()
        return v.decode() if isinstance(v, bytes) else str(v)
    except Exception:
        return _smi_query("driver_version")


def gpu_compute_capability_from_smi() -> str | None:
    """Without touching CUDA in this process (the parent must not own a CUDA context)."""
    return _smi_query("compute_cap")


def collect(device) -> dict:
    import torch

    info: dict = {
        "device": str(device), "torch": torch.__version__, "cuda": torch.version.cuda,
        "python": platform.python_version(), "platform": f"{sys.platform}-{platform.machine()}",
        "timing_protocol": TIMING_PROTOCOL_VERSION,
    }
    try:
        import triton

        info["triton"] = triton.__version__
    except Exception:
        info["triton"] = None
    if getattr(device, "type", str(device)) == "cuda" and torch.cuda.is_available():
        props = torch.cuda.get_device_properties(device)
        info.update({
            "gpu_name": props.name, "gpu_arch": f"{props.major}.{props.minor}",
            "gpu_count": torch.cuda.device_count(), "driver": driver_version(),
            "sm_count": props.multi_processor_count,
            "l2_bytes": int(getattr(props, "L2_cache_size", 0) or 0),
            "memory_bytes": int(props.total_memory),
        })
    return info
