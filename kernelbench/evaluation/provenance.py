"""Which memory the candidate's own kernels touched, and how busy the GPU was: pure helpers for the worker.

The decoy of issue 23 launches its own Triton kernel on a scratch buffer and returns PyTorch's result:
the launch guard sees a legal launch. Recording the storage of every tensor handed to the candidate's own
launches during one forward, then asking whether each output's storage is among them, tells an output
that one of its kernels wrote (or at least was given) from one that only a library produced. It is a
warning, not a failure: a kernel can be handed an output it never writes, and an honest solution may
finish with a PyTorch op; the finding says which outputs to look at.

``busy_time_us`` and ``host_share`` give the host-bound measure: host time to enqueue a forward over
the GPU time its kernels keep the device busy.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Iterator
from typing import Any

Range = tuple[int, int]


def storage_range(t: Any) -> Range | None:
    """[start, end) of the memory a tensor's storage spans; None for non-tensors and empty storage."""
    try:
        st = t.untyped_storage()
        start, n = int(st.data_ptr()), int(st.nbytes())
    except Exception:  # not a tensor, or a tensor subclass without storage
        return None
    return (start, start + n) if n > 0 and start else None


def tensor_ranges(values: Iterable[Any]) -> list[Range]:
    """Storage ranges of the tensors among ``values`` and inside lists, tuples and dicts one level down."""
    out: list[Range] = []
    for v in values:
        items = list(v.values()) if isinstance(v, dict) else (list(v) if isinstance(v, (list, tuple)) else [v])
        for x in items:
            r = storage_range(x)
            if r is not None:
                out.append(r)
    return out


def overlaps(r: Range, ranges: Iterable[Range]) -> bool:
    return any(r[0] < b and a < r[1] for a, b in ranges)


def unowned_outputs(output_ranges: list[Range | None], launch_ranges: list[Range]) -> list[int]:
    """Indices of output tensors whose storage no own launch was given (produced by someone else)."""
    return [i for i, r in enumerate(output_ranges) if r is not None and not overlaps(r, launch_ranges)]


def busy_time_us(intervals: Iterable[tuple[float, float]]) -> float:
    """Length of the union of ``(start_us, duration_us)`` intervals: time the GPU was running kernels."""
    spans = sorted((s, s + max(0.0, d)) for s, d in intervals)
    total, cur_s, cur_e = 0.0, None, None
    for s, e in spans:
        if cur_e is None or s > cur_e:
            if cur_e is not None:
                total += cur_e - cur_s
            cur_s, cur_e = s, e
        else:
            cur_e = max(cur_e, e)
    if cur_e is not None:
        total += cur_e - cur_s
    return total


def host_share(host_enqueue_us: float, gpu_busy_us: float) -> float | None:
    """Host enqueue time over GPU busy time; None when the GPU ran nothing measurable."""
    if gpu_busy_us <= 0 or host_enqueue_us < 0:
        return None
    return host_enqueue_us / gpu_busy_us


class LaunchRecorder:
    """Records the tensors handed to Triton launches while :meth:`recording` is active.

    Installed once per candidate worker before the candidate is imported (so the patch is ours, not
    the candidate's, and the patch guard's snapshot includes it). Hooks ``JITFunction.run`` (compiled
    launches, autotuned or not) and the interpreter's grid executor (``TRITON_INTERPRET=1``).
    """

    def __init__(self) -> None:
        self.ranges: list[Range] | None = None
        self.installed = False

    def install(self) -> None:
        if self.installed:
            return
        recorder = self
        try:
            from triton.runtime.jit import JITFunction
        except Exception:
            return
        original_run = JITFunction.run

        def run(fn_self, *args, **kwargs):
            if recorder.ranges is not None:
                recorder.ranges.extend(tensor_ranges(list(args) + list(kwargs.values())))
            return original_run(fn_self, *args, **kwargs)

        JITFunction.run = run
        try:
            from triton.runtime import interpreter

            original_call = interpreter.GridExecutor.__call__

            def call(executor, *args, **kwargs):
                if recorder.ranges is not None:
                    recorder.ranges.extend(tensor_ranges(list(args) + list(kwargs.values())))
                return original_call(executor, *args, **kwargs)

            interpreter.GridExecutor.__call__ = call
        except Exception:
            pass
        self.installed = True

    @contextlib.contextmanager
    def recording(self) -> Iterator[list[Range]]:
        self.ranges = []
        try:
            yield self.ranges
        finally:
            self.ranges = None
