"""Is this container's GPU still fit to time the next kernel?

Candidates run in their own processes, so an illegal memory access normally dies with its
worker. But some faults outlive the process (a GPU that fell off the bus, an uncorrectable ECC
error, a context the driver will not hand out again), and a container that kept taking inputs
would then fail, or worse, mis-time, every job after it. After each job the GPU function asks
:func:`retire_decision`; when it says stop, the container finishes the current input and takes no
more, and Modal starts a fresh one.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass

from kernelbench.results import KernelResult, Stage

#: Lower-case fragments of error types/messages that mean the CUDA context (or the device) is
#: poisoned rather than that one kernel computed the wrong thing.
STICKY_MARKERS: tuple[str, ...] = (
    "illegal memory access",
    "illegal address",
    "unspecified launch failure",
    "illegal instruction",
    "misaligned address",
    "device-side assert",
    "uncorrectable ecc",
    "fallen off the bus",
    "cuda error",
    "cudaerror",
    "cuda_error",
    "cuda driver error",
    "nvml",
)
#: CUDA errors that are about this process asking too much, not about the device.
BENIGN_MARKERS: tuple[str, ...] = ("out of memory",)
#: Stages in which the GPU was in use; a failure in them earns a health probe.
GPU_STAGES = frozenset({Stage.INIT, Stage.RUN, Stage.CORRECTNESS, Stage.TIMING, Stage.TIMEOUT, Stage.CRASH,
                        Stage.INFRASTRUCTURE})


@dataclass(frozen=True)
class RetireDecision:
    stop: bool
    reason: str | None = None


def sticky_marker(error_type: str | None, message: str | None) -> str | None:
    """The sticky-error marker found in an error's type or message, or None."""
    text = f"{error_type or ''} {message or ''}".lower()
    if not text.strip():
        return None
    for marker in STICKY_MARKERS:
        if marker in text:
            if any(b in text for b in BENIGN_MARKERS) and marker in ("cuda error", "cudaerror", "cuda_error"):
                continue  # "CUDA error: out of memory" is the candidate's problem, not the GPU's
            return marker
    return None


def retire_decision(result: KernelResult | None, probe: Callable[[], bool] | None = None) -> RetireDecision:
    """Decide whether the container should stop taking inputs after this job.

    Stop when the result's error names a sticky device error; otherwise, when the job failed in
    a stage that used the GPU and ran on CUDA, stop if ``probe`` (a tiny CUDA op in a fresh
    process) fails. ``result`` None means the evaluator itself raised.
    """
    if result is not None and result.error is not None:
        marker = sticky_marker(result.error.type, result.error.message)
        if marker is not None:
            return RetireDecision(True, f"sticky device error ({marker}): {result.error.one_line()}")
    if probe is None:
        return RetireDecision(False)
    if result is not None:
        if result.error is None or result.error.stage not in GPU_STAGES:
            return RetireDecision(False)
        device = result.environment.device if result.environment else None
        if device is not None and not device.startswith("cuda"):
            return RetireDecision(False)
    if not probe():
        return RetireDecision(True, "GPU health probe failed after a failed job")
    return RetireDecision(False)


PROBE_SOURCE = (
    "import torch\n"
    "n = 1 << 20\n"
    "x = torch.arange(n, device='cuda', dtype=torch.int64)\n"
    "y = int((x * 2).sum().item())\n"
    "torch.cuda.synchronize()\n"
    "assert y == n * (n - 1), y\n"
)


def probe_gpu(timeout_s: float = 120.0, python: str | None = None) -> bool:
    """Run a tiny CUDA computation in a fresh process; True when it gives the right answer."""
    try:
        proc = subprocess.run([python or sys.executable, "-c", PROBE_SOURCE], capture_output=True,
                              timeout=timeout_s, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return proc.returncode == 0
