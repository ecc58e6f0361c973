"""Which kernels a candidate's forward launched: the profiler on the GPU, the Triton interpreter on the CPU.

:class:`TraceCommands` is a mixin of :class:`~kernelbench.evaluation.worker.process.Worker`; it runs
after timing, so the profiler's state never differs between the two sides' timed calls.
"""

from __future__ import annotations

import json
import os
import tempfile

from kernelbench.evaluation import protocol
from kernelbench.evaluation.worker.bound import perf_counter as _perf_counter


def kineto_profile(torch, cuda: bool):
    """The profiler the launch trace runs under: torch's kineto profiler, asked for GPU activity only (``cuda``) or
    host activity only.

    Not ``torch.profiler.profile``, which is this same profiler behind a wrapper whose start asks
    ``hasattr(torch, "_inductor")``: that imports torch._inductor and torch._dynamo (about 900 modules), which cost
    every worker 4-5 s of its start on the lent GPU machines (session 22: a candidate worker took 8.8 s to start, of
    which importing torch took 4). The trace and its chrome export are the same."""
    from torch.autograd import profiler

    if cuda:
        return profiler.profile(use_cpu=False, use_device="cuda", use_kineto=True)
    return profiler.profile(use_cpu=True, use_kineto=True)


class TraceCommands:
    """The ``profile`` and ``launches`` commands (a mixin of Worker)."""

    def cmd_profile(self, cmd: protocol.Profile, blobs: list) -> tuple[protocol.Reply, list]:
        """One forward under the profiler: which kernels ran, on which streams, for how long."""
        torch = self.torch
        import statistics

        from kernelbench.evaluation import provenance

        # After the exports (correctness, timing): nothing of theirs is read again. Without timing the arena would
        # otherwise be held through these forwards.
        self.exported = self.last = None
        self.arena.release()
        # Host enqueue time: the forward's wall time on the host without waiting for the GPU (median of 3,
        # unprofiled: the profiler slows launches down).
        # One set of inputs for all four forwards: the multi-GB problems must not hold two.
        x = self._make_inputs(int(cmd.seed))
        host_us = []
        for _ in range(3):
            self._sync()
            # Seeding is ours, not the forward's: it costs 0.1-0.2 ms of host time (every generator), which
            # made one big matmul look 0.3 host-bound and a 0.4 ms forward cross the host-bound line.
            self.inputs.seed_everything(int(cmd.fwd_seed))
            t0 = _perf_counter()
            with self._no_grad():
                out = self.model(*x)
            host_us.append((_perf_counter() - t0) * 1e6)
            self._sync()
            del out
        self._sync()
        with kineto_profile(torch, cuda=True) as prof, self.launch_recorder.recording() as launched:
            torch.cuda._sleep(1000)  # marker kernel ("spin_kernel") on the stream being timed
            out = self._forward(x, int(cmd.fwd_seed))
            self._sync()
        _, leaves = self.transport.flatten(out)
        unowned = provenance.unowned_outputs([provenance.storage_range(t) for t in leaves], list(launched))
        del out
        with tempfile.NamedTemporaryFile(suffix=".json", delete=False) as f:
            path = f.name
        try:
            prof.export_chrome_trace(path)
            with open(path) as f:
                trace = json.load(f)
        finally:
            os.unlink(path)
        kernels, marker, spans = [], None, []
        for ev in trace.get("traceEvents", []):
            if ev.get("cat") != "kernel":
                continue
            stream = (ev.get("args") or {}).get("stream")
            name = str(ev.get("name", ""))
            if "spin_kernel" in name and marker is None:
                marker = stream
            if "spin_kernel" not in name:
                spans.append((float(ev.get("ts", 0.0) or 0.0), float(ev.get("dur", 0.0) or 0.0)))
            kernels.append({"name": name[:300], "stream": stream, "dur_us": ev.get("dur", 0.0)})
        return protocol.ProfileReply(kernels=kernels[:2000], marker_stream=marker,
                                     host_enqueue_us=statistics.median(host_us),
                                     gpu_busy_us=provenance.busy_time_us(spans), unowned_outputs=unowned,
                                     n_outputs=len(leaves), recorded=self.launch_recorder.installed), []

    def cmd_launches(self, cmd: protocol.Launches, blobs: list) -> tuple[protocol.Reply, list]:
        """CPU path: Triton launches counted in the interpreter during one forward."""
        from kernelbench.evaluation import provenance

        x = self._make_inputs(int(cmd.seed))
        self.interp_launches.clear()
        with self.launch_recorder.recording() as launched:
            out = self._forward(x, int(cmd.fwd_seed))
        _, leaves = self.transport.flatten(out)
        unowned = provenance.unowned_outputs([provenance.storage_range(t) for t in leaves], list(launched))
        return protocol.LaunchesReply(launches=dict(self.interp_launches), unowned_outputs=unowned,
                                      n_outputs=len(leaves), recorded=self.launch_recorder.installed), []

    def _count_interpreter_launches(self) -> None:
        try:
            from triton.runtime import interpreter
        except Exception:
            return
        original = interpreter.GridExecutor.__call__
        counts = self.interp_launches

        def counted(executor, *args, **kwargs):
            fn = getattr(executor, "fn", None)
            name = getattr(fn, "__name__", None) or getattr(getattr(fn, "fn", None), "__name__", "triton_kernel")
            result = original(executor, *args, **kwargs)
            counts[name] = counts.get(name, 0) + 1  # only launches that ran to the end count
            return result

        interpreter.GridExecutor.__call__ = counted


