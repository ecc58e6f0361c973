"""A reference worker that serves another problem instead of exiting (parent/session.py, ``KB_REUSE_REFERENCES``).

Every fresh worker's Init (a CUDA context, then cuBLAS and cuDNN) costs about 0.35 s of the driver's time, serialised
across processes (scripts/probe_init_pieces.py: six at once took 0.97 s each), and none may run while a candidate is
timed; on a sweep of new problems each job needed two, its candidate's and its reference's. A reference runs trusted
code only, so instead of exiting when its problem is done it may forget the problem and take the next one's Setup:
:meth:`RecycleCommands.cmd_recycle` drops everything the problem made (module, model, inputs, outputs, buffers sized to
its outputs, the launch cushion's calibration) and gives the cached memory back, so the next problem finds the worker
as a fresh one would be after its Init. It refuses, and the parent lets the worker exit, when the problem's code left
something behind that a fresh worker would not have: a thread, an environment variable, a torch global setting changed
(TF32, cuDNN's benchmark mode, the default dtype, ...), a patched torch function, a hook or mode the timed calls' own
check refuses, another current stream, or a problem run under torch.compile (baselines). The random-number generators
go back to where the warm-up left them, where a fresh worker's (and the candidate's) problem code starts.
"""

from __future__ import annotations

import gc
import os
import sys
from collections.abc import Callable
from typing import Any

from kernelbench.evaluation import protocol
from kernelbench.evaluation.worker.bound import active_count as _active_count

#: The module name problem code is loaded under (inputs.load_module).
PROBLEM_MODULE = "kb_problem"


def _settings_readers(torch: Any) -> dict[str, Callable[[], Any]]:
    cuda, cudnn = torch.backends.cuda, torch.backends.cudnn
    readers: dict[str, Callable[[], Any]] = {
        "default dtype": torch.get_default_dtype,
        "grad mode": torch.is_grad_enabled,
        "inference mode": torch.is_inference_mode_enabled,
        "deterministic algorithms": torch.are_deterministic_algorithms_enabled,
        "float32 matmul precision": torch.get_float32_matmul_precision,
        "threads": torch.get_num_threads,
        "anomaly mode": torch.is_anomaly_enabled,
        "cudnn.enabled": lambda: cudnn.enabled,
        "cudnn.benchmark": lambda: cudnn.benchmark,
        "cudnn.deterministic": lambda: cudnn.deterministic,
        "cudnn.allow_tf32": lambda: cudnn.allow_tf32,
        "cuda.matmul.allow_tf32": lambda: cuda.matmul.allow_tf32,
        "cuda.matmul.allow_fp16_reduced_precision_reduction":
            lambda: cuda.matmul.allow_fp16_reduced_precision_reduction,
        "cuda.matmul.allow_bf16_reduced_precision_reduction":
            lambda: cuda.matmul.allow_bf16_reduced_precision_reduction,
        "cuda.flash_sdp": cuda.flash_sdp_enabled,
        "cuda.mem_efficient_sdp": cuda.mem_efficient_sdp_enabled,
        "cuda.math_sdp": cuda.math_sdp_enabled,
    }
    optional = {  # (not in every torch build)
        "default device": lambda: torch.get_default_device(),
        "cuda.cudnn_sdp": lambda: cuda.cudnn_sdp_enabled(),
        "cuda.matmul.allow_fp16_accumulation": lambda: cuda.matmul.allow_fp16_accumulation,
        "cuda.matmul.fp32_precision": lambda: cuda.matmul.fp32_precision,
        "cudnn.fp32_precision": lambda: cudnn.fp32_precision,
        "fp32_precision": lambda: torch.backends.fp32_precision,
    }
    readers.update(optional)
    return readers


def global_settings(torch: Any) -> dict[str, Any]:
    """torch's process-wide settings that problem code could change and that a later problem's timing or numerics
    would feel (a reader that raises gives its exception's name)."""
    out = {}
    for name, read in _settings_readers(torch).items():
        try:
            out[name] = repr(read())
        except Exception as e:  # (a build without the setting)
            out[name] = type(e).__name__
    return out


class RecycleCommands:
    """The ``recycle`` command (a mixin of Worker, reference role)."""

    def _note_before_problem(self, cmd: protocol.Setup) -> None:
        """In Setup, once our own settings are applied and before the problem's code runs: what recycling compares."""
        from kernelbench.evaluation.guards import runtime as rt

        self._keep_fresh_random_state()
        self.before_problem = (global_settings(self.torch), rt.PatchSnapshot.take(), _active_count(),
                               bool(cmd.compile_mode), dict(os.environ))

    def _left_behind(self) -> str | None:
        """What the last problem's code left in this process that a fresh worker would not have (None: nothing)."""
        before = self.before_problem
        if before is None:
            return "no problem has been set up in this worker"
        settings, snapshot, threads, compiled, environ = before
        if compiled:
            return "its problem ran under torch.compile"
        if _active_count() > threads:
            return f"the problem's code left {_active_count() - threads} thread(s) running"
        left = self._hooks_left()
        if left:
            return f"the problem's code left {left} in place"
        if dict(os.environ) != environ:
            names = sorted(set(os.environ.items()) ^ set(environ.items()))
            return f"the problem's code changed environment variables: {', '.join(sorted({k for k, _ in names}))}"
        now = global_settings(self.torch)
        changed = sorted(k for k in settings if now.get(k) != settings[k])
        if changed:
            return f"the problem's code changed torch's global settings: {', '.join(changed)}"
        from kernelbench.evaluation.guards import runtime as rt

        patched = snapshot.changes(rt.PatchSnapshot.take())
        if patched:
            return f"the problem's code replaced: {', '.join(patched[:5])}"
        return None

    def _hooks_left(self) -> str | None:
        """What the timed calls' own check (timing._check_no_hooks) would refuse, and the current stream."""
        from kernelbench.evaluation.worker.bound import getprofile, gettrace
        from kernelbench.evaluation.worker.timing import worker_changes

        if any(depth() for depth in self.mode_depths):
            return "a torch function or dispatch mode"
        if (gettrace(), getprofile()) != self.hooks_at_start:
            return "a trace or profile hook"
        if tuple(map(id, self.gc_callbacks)) != self.gc_callbacks_at_start:
            return "a garbage collector callback"
        changed = worker_changes(self)
        if changed:
            return f"changes to the worker ({', '.join(changed[:5])})"
        if self.is_cuda and self.torch.cuda.current_stream(self.device) != self.stream:
            return "another current CUDA stream"
        return None

    def _keep_fresh_random_state(self) -> None:
        """At the first Setup, before any problem code: the random-number generators as the warm-up left them, which
        a fresh worker's problem code starts from (module-level draws run before any seeding, in both workers)."""
        if self.fresh_random_state is not None:
            return
        import random

        torch = self.torch
        state = {"torch": torch.get_rng_state(), "random": random.getstate()}
        if self.is_cuda:
            state["cuda"] = torch.cuda.get_rng_state(self.device)
        try:
            import numpy as np

            state["numpy"] = np.random.get_state()
        except ImportError:
            pass
        self.fresh_random_state = state

    def _restore_fresh_random_state(self) -> None:
        import random

        state = self.fresh_random_state
        self.torch.set_rng_state(state["torch"])
        random.setstate(state["random"])
        if "cuda" in state:
            self.torch.cuda.set_rng_state(state["cuda"], self.device)
        if "numpy" in state:
            import numpy as np

            np.random.set_state(state["numpy"])

    def cmd_recycle(self, cmd: protocol.Recycle, blobs: list) -> tuple[protocol.Reply, list]:
        """Forget the last problem, if its code left nothing behind; the reply says whether this worker takes another
        Setup or should exit."""
        if self.role != "reference":
            raise RuntimeError("only a reference worker serves another problem")
        why = self._left_behind()
        if why is not None:
            return protocol.RecycleReply(clean=False, detail=why), []
        self._forget_problem()
        return protocol.RecycleReply(clean=True, detail=""), []

    def _forget_problem(self) -> None:
        """Everything the problem made, gone: what a fresh worker has after its Init is what is left."""
        self.transport.release_host_copy_mapping()
        self.slots.clear()
        self.last = None
        self.exported = None
        self.arena.release()
        self.problem = None
        self.model = None
        sys.modules.pop(PROBLEM_MODULE, None)
        # Made for the problem's outputs at its first timed call: a fresh worker makes them after its model and inputs.
        self.l2_flush = None
        self.cushion_cycles = None
        self.cushion_us = None
        self.fingerprinter.forget()
        self.before_problem = None
        gc.collect()
        self._release_cached_memory()
        self._restore_fresh_random_state()
