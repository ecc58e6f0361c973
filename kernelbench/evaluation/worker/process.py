"""The worker process: its state, the commands every role shares, the command loop and the entry point.

See the package's docstring for the roles. Timing, exporting outputs and launch tracing are mixins in
:mod:`.timing`, :mod:`.export` and :mod:`.trace`.
"""

from __future__ import annotations

import argparse
import gc
import logging
import os
import sys
import traceback
from typing import Any

from kernelbench.evaluation import protocol
from kernelbench.evaluation.worker.bound import active_count as _active_count
from kernelbench.evaluation.worker.bound import perf_counter as _perf_counter
from kernelbench.evaluation.worker.export import ExportArena, ExportCommands, rebuild
from kernelbench.evaluation.worker.memory import as_evaluator_oom, evaluator_allocations
from kernelbench.evaluation.worker.recycle import RecycleCommands
from kernelbench.evaluation.worker.timing import (
    BOUND_AT_INIT,
    BOUND_ATTRIBUTES,
    CLASS_KEY,
    TimingCommands,
    WallEvent,
    worker_changes,
)
from kernelbench.evaluation.worker.trace import TraceCommands

#: torch.compile modes whose calls replay CUDA graphs (max-autotune turns Inductor's CUDA graphs on):
#: a call's outputs live in memory the next call overwrites.
GRAPH_REPLAY_MODES = ("cudagraphs", "max-autotune", "reduce-overhead")


def _error_reply(e: BaseException, where: str, builds: list | None = None) -> protocol.ErrorReply:
    try:
        message = str(e)
    except Exception:
        message = "<unprintable exception>"
    try:
        tb = "".join(traceback.format_exception(type(e), e, e.__traceback__))
    except Exception:
        tb = None
    return protocol.ErrorReply(where=where, type=type(e).__name__, message=message, traceback=tb, builds=builds)


#: Set to "1" in a reference worker's environment to import :data:`COMPILER_MODULES` at start.
PRELOAD_COMPILER_ENV = "KB_WORKER_PRELOAD_COMPILER"
#: What torch.compile imports on first use (Dynamo when called, Inductor at the first compiled call).
COMPILER_MODULES = ("torch._dynamo", "torch._inductor.compile_fx")


#: A comparison reads what the candidate describes only up to this many times the reference's own bytes (plus
#: CLAIM_SLACK): a wrong dtype still gets its precise message, a claim of gigabytes more is refused unread.
CLAIM_FACTOR = 4
CLAIM_SLACK = 64 << 20


def _claim_limit(ref_bytes: int) -> int:
    return CLAIM_FACTOR * ref_bytes + CLAIM_SLACK


class Worker(ExportCommands, TimingCommands, TraceCommands, RecycleCommands):
    """One worker process's state and commands: ``cmd_<name>`` answers the protocol command ``<name>``."""

    def __init__(self, role: str, device: str, warm_profiler: bool = True):
        """``warm_profiler=False``: leave out the profiler's first run (a reference template, which imports what the
        run imports itself: the run asks the CUDA driver how many devices there are, and no fork of a process that has
        asked the driver anything can use CUDA)."""
        import torch

        self.torch = torch
        self.role = role
        self.device = torch.device(device)
        self.is_cuda = self.device.type == "cuda"
        self.problem = None
        self.model = None
        self.precision = "fp32"
        self.atol = self.rtol = 0.0
        self.slots: dict[str, tuple[list, Any]] = {}
        self.exported: Any = None
        self.last: tuple[list, Any] | None = None
        self.arena = ExportArena(self.torch, self.device)
        #: The export being read is the last one (``ExportLast``): its Release lets go of the arena too.
        self.release_arena = False
        self.snapshot = None
        #: Set by a reference's Setup before the problem's code runs (RecycleCommands).
        self.before_problem: Any = None
        #: The random-number generators' state at a reference's first Setup (RecycleCommands restores it).
        self.fresh_random_state: dict | None = None
        self.threads_before = _active_count()
        self.interp_launches: dict[str, int] = {}
        from kernelbench.evaluation.provenance import LaunchRecorder

        self.launch_recorder = LaunchRecorder()
        self.l2_flush = None
        self.cushion_cycles: int | None = None  # spin before each timed call, calibrated on first use
        self.cushion_us: int | None = None  # the cushion those cycles were calibrated for
        self.initialized = False
        self.warmed = False  # the libraries' warm-up done (Init with warm, or Warm)
        self.warm_next = 0  # the warm-up's next piece (_warm_pieces)
        #: Set by :func:`serve`: the worker process freezes its objects after its first Init (``_freeze_collected``);
        #: a Worker made in another process (tests) never does.
        self.freezes = False
        if role in ("candidate", "reference"):
            # Imported now so nothing the candidate does later can be confused with our own imports.
            import torch.profiler  # noqa: F401

            if self.is_cuda and warm_profiler:  # only CUDA evaluations profile (the CPU path counts interpreter launches)
                self._warm_profiler()
        if role in ("candidate", "compile"):
            # What a candidate's Load imports (the extension cache's wrapper of load_inline pulls in setuptools, the
            # runtime guards): 0.1-0.2 s of every load, now paid while the spare starts, off the job's path.
            import torch.utils.cpp_extension  # noqa: F401

            from kernelbench.evaluation import compile_cache  # noqa: F401
            from kernelbench.evaluation.guards import runtime  # noqa: F401
        self.preloaded: list[str] = []
        if role == "reference" and os.environ.get(PRELOAD_COMPILER_ENV) == "1":
            # A baseline worker started ahead imports torch.compile's machinery while it waits, instead
            # of inside its timed measurement's setup (a few seconds each on the lent machines).
            import importlib

            for name in COMPILER_MODULES:
                try:
                    importlib.import_module(name)
                except Exception:  # torch.compile will raise it again where the measurement records it
                    break
                self.preloaded.append(name)
        from kernelbench.evaluation import compare, inputs, transport  # noqa: F401  (bound before candidates)

        if self.is_cuda and role == "reference" and compare.compare_kernel_wanted():
            # The one-pass comparison kernels (trusted processes only): Triton's import now, at the start (in a
            # reference template, before its forks), their first launch in the warm-up.
            from kernelbench.evaluation import compare_kernel  # noqa: F401
        if self.is_cuda and role in ("candidate", "reference") and compare.fused_wanted():
            # Triton's import (a second or so of CPU) happens now, while the process starts, not in Init, which a
            # job or the next timing may be waiting for; Init only compiles and launches the fingerprint kernel.
            from kernelbench.evaluation import fingerprint_kernel  # noqa: F401

        self.compare = compare
        self.fingerprinter = compare.Fingerprinter()
        self.fused_baseline: Any = None  # a fingerprint_kernel.Baseline once the fused path has started
        # The trace and profile hooks in place before any candidate code (a coverage tool's, say): a timed call
        # must end with these and no others (TimingCommands._check_no_hooks).
        from kernelbench.evaluation.worker.bound import getprofile, gettrace

        self.hooks_at_start = (gettrace(), getprofile())
        # The collector's callbacks too: one forward appends runs at any collection inside the fingerprint (every
        # allocation may start one) and can remove itself there. The list object itself is bound now: the collector
        # keeps its own reference, so a replaced ``gc.callbacks`` would hide an appended callback from a lookup.
        import gc

        self.gc_callbacks = gc.callbacks
        self.gc_callbacks_at_start = tuple(map(id, gc.callbacks))
        # The mode-stack counters, bound now as bound.py binds the clocks: a candidate that replaces them later (and
        # puts them back before the next patch check) does not change what the timed calls ask.
        self.mode_depths = (self.torch._C._len_torch_function_stack, self.torch._C._len_torch_dispatch_stack)
        self.inputs = inputs
        self.transport = transport
        self.host_copy = os.environ.get(transport.HOST_COPY_ENV) == "1"
        #: What the timed calls and checks reach through this object, by identity (see timing.worker_changes).
        self.bound_at_start = {name: id(getattr(self, name)) for name in BOUND_ATTRIBUTES}
        self.bound_at_start[CLASS_KEY] = id(type(self))

    def cmd_init(self, cmd: protocol.Init, blobs: list) -> tuple[protocol.Reply, list]:
        """Create the CUDA context. Separate from process start so the parent can keep spare workers
        importing torch at any time but touching the GPU only when nothing is being timed."""
        torch = self.torch
        t0 = _perf_counter()
        first = not self.initialized
        if self.is_cuda and self.role != "compile" and not self.initialized:
            torch.cuda.set_device(self.device)
            torch.cuda.init()
            torch.empty(1, device=self.device).add_(1)
            torch.cuda.synchronize()
            self._sync = torch._C._cuda_synchronize
            self._EventBase = torch._C._CudaEventBase
            self._record = torch._C._CudaEventBase.record
            self._elapsed = torch._C._CudaEventBase.elapsed_time
            self._event_sync = torch._C._CudaEventBase.synchronize
            self.stream = torch.cuda.current_stream(self.device)
            if self.role in ("candidate", "reference"):
                # Compiled and launched now, before any candidate code exists in this process (fingerprint_kernel):
                # a reference worker (trusted) compiles into the shared trusted cache that seeds candidates' caches.
                from kernelbench.evaluation import fingerprint_kernel

                trusted = None
                if self.role == "reference":
                    trusted = fingerprint_kernel.trusted_cache_dir()
                    try:
                        trusted.mkdir(parents=True, exist_ok=True)
                    except OSError:
                        trusted = None
                with fingerprint_kernel.triton_cache(trusted):
                    if self.fingerprinter.enable_fused(self.device):
                        # What each timed call's fingerprint checks its launch path against (TimingCommands).
                        self.fused_baseline = fingerprint_kernel.Baseline.take()
                        self.bound_at_start["fused_baseline"] = id(self.fused_baseline)
        elif not self.is_cuda and not self.initialized:
            # CPU timing (baselines on a CPU-only host, tests): wall-clock events, nothing to drain.
            self._sync = lambda: None
            self._EventBase = WallEvent
            self._record = WallEvent.record
            self._elapsed = WallEvent.elapsed_time
            self._event_sync = WallEvent.synchronize
            self.stream = None
        for name in BOUND_AT_INIT:  # once, before any candidate code: a later Init never takes the candidate's
            self.bound_at_start.setdefault(name, id(getattr(self, name, None)))
        if first and bool(cmd.warm):
            self._warm_once()
        self.initialized = True
        env = self.environment()
        if first and self.freezes and self.problem is None and self.model is None:
            _freeze_collected()  # the CUDA context's and the warm-up's objects (before any Setup or Load)
        return protocol.InitReply(env=env, preloaded=self.preloaded, init_s=_perf_counter() - t0), []

    def cmd_warm(self, cmd: protocol.Warm, blobs: list) -> tuple[protocol.Reply, list]:
        """The libraries' warm-up an ``Init(warm=False)`` left out, ``cmd.pieces`` pieces of it at a time (0: all that
        are left): a spare's steps after its context, each short, so that a timing about to begin waits for one piece
        under way at most, never the whole warm-up (parent/session.py)."""
        if not self.initialized:
            raise RuntimeError("Warm before Init")
        t0 = _perf_counter()
        if self.problem is None and self.model is None:  # before any problem or candidate code only
            self._warm_once(int(cmd.pieces))
            if self.freezes and self.warmed:
                _freeze_collected()
        else:
            self.warmed = True
        return protocol.WarmReply(warm_s=_perf_counter() - t0, left=self._warm_left()), []

    def _warm_once(self, pieces: int = 0) -> None:
        """The next ``pieces`` pieces of the warm-up (0: every piece left)."""
        if self.role not in ("candidate", "reference"):
            self.warmed = True
            return
        todo = self._warm_pieces()
        stop = len(todo) if pieces <= 0 else min(len(todo), self.warm_next + pieces)
        while self.warm_next < stop:
            piece = todo[self.warm_next]
            self.warm_next += 1
            try:
                piece()
                self._sync()
            except Exception as e:  # a speed-up only: a job's own first use loads what this could not
                logging.getLogger(__name__).warning("warming the libraries failed (%s): %s: %s", piece.__name__,
                                                    type(e).__name__, e)
        if self.warm_next >= len(todo):
            if self.is_cuda:
                self.torch.cuda.empty_cache()
            self.warmed = True

    def _warm_left(self) -> int:
        if self.warmed or self.role not in ("candidate", "reference"):
            return 0
        return max(0, len(self._warm_pieces()) - self.warm_next)

    # ------------------------------------------------------------------ helpers
    def _warm_profiler(self) -> None:
        """Run the launch trace's profiler once on the CPU when the process starts, before any CUDA context exists:
        whatever its first run sets up happens before the patch snapshot and off a job's path. CUPTI itself starts
        only at the launch trace, after timing, so neither process has it running while the two are timed. (Through
        ``torch.profiler.profile`` this first run imported torch._dynamo, 4-5 s of a start on the GPU machines:
        ``trace.kineto_profile`` says why it is not used.)"""
        from kernelbench.evaluation.worker.trace import kineto_profile

        with kineto_profile(self.torch, cuda=False):
            self.torch.ones(8).add_(1)

    def _warm_pieces(self) -> list:
        """Load, before any job, what every job's first GPU work would otherwise load on its path: the random-number,
        elementwise and reduction kernels that make inputs and compare outputs, the cuBLAS and cuDNN handles, the timed
        calls' own work, and (a reference, which compares) the one-pass comparison kernels.

        On the H200 (session 20) a fresh worker spent 0.45 s in a reference's setup or a candidate's load whatever the
        problem (a ReLU without weights too), and its first correctness trial took 0.1-0.2 s longer than the next
        four. Run while nothing is timed, before any candidate code exists in the process; both roles do the same
        (but the comparison kernels), so neither side of a timing arrives with more loaded than the other. In pieces
        of 0.1-0.2 s each (a spare's Warm sends one at a time)."""
        pieces = [self._warm_random, self._warm_blas, self._warm_dnn, self._warm_checks]
        if self.role == "reference" and self.is_cuda and self.compare.compare_kernel_wanted():
            pieces.append(self._warm_compare_kernel)
        return pieces

    def _warm_random(self) -> None:
        torch = self.torch
        torch.randn(64, 64, device=self.device)
        torch.rand(64, device=self.device)
        torch.randint(0, 8, (64,), device=self.device)

    def _warm_blas(self) -> None:
        a = self.torch.randn(64, 64, device=self.device)
        a @ a

    def _warm_dnn(self) -> None:
        a = self.torch.randn(64, 64, device=self.device)
        self.torch.nn.functional.conv2d(a.view(1, 1, 64, 64), a[:3, :3].reshape(1, 1, 3, 3))

    def _warm_checks(self) -> None:
        torch = self.torch
        with torch.no_grad():
            a = torch.randn(64, 64, device=self.device)
            b = a @ a
            tree, leaves = self.transport.flatten(b.clone())
            self.compare.compare_outputs(tree, leaves, b, 1e-4, 1e-4)
            self.compare.tensors_equal(a, a.clone())
            # The timed calls' own work: the fingerprint of an output with its bounds (its kernels' first launch
            # took 0.07 s, session 22, H200: the first timed block of each side was 45 ms longer than the next ones
            # on every problem) and the launch cushion's spin (7 ms at its first launch). A fingerprinter of its own:
            # the worker's makes its buffers for the problem's outputs at the end of the warm-up. Both of its paths:
            # large float32 outputs in groups (with a short one at the end), others through the float64 buffer.
            flat = b.reshape(-1)
            self.compare.Fingerprinter(segmented_from=0).measure([flat, flat[:100]], (1e-4, 1e-4), key=1)
            self.compare.Fingerprinter().measure([flat], (1e-4, 1e-4), key=1)
            if self.is_cuda:
                torch.cuda._sleep(1000)

    def _warm_compare_kernel(self) -> None:
        # The reference compares (never a candidate's process): its checks of gigabyte outputs in one pass.
        from kernelbench.evaluation import compare_kernel

        compare_kernel.enable(self.device)

    def _collect_cycles(self) -> None:
        """Free outputs caught in reference cycles (candidate or problem code can make them), which
        would otherwise stay allocated until the cyclic collector happens to run. A full collection
        cost 0.15-0.2 s once the profiler's modules were loaded; a worker process freezes those
        (``_freeze_collected``), and collects only when memory is held beyond the export arena."""
        if not self.is_cuda:
            return  # host memory: Python's own collector runs often enough there
        held = self.torch.cuda.memory_allocated(self.device)
        arena = self.arena.buf.numel() if self.arena.buf is not None else 0
        flush = self.l2_flush.numel() if self.l2_flush is not None else 0
        if held > arena + flush + 64 * 1024 * 1024:
            gc.collect()

    def _release_cached_memory(self) -> None:
        """Give cached blocks back to the driver: two processes share one GPU."""
        if self.is_cuda:
            self._sync()
            self.torch.cuda.empty_cache()

    def environment(self) -> dict:
        from kernelbench.evaluation.environment import collect

        return collect(self.device)

    def _no_grad(self):
        return self.torch.no_grad()

    def _set_fp32_math(self, ieee: bool) -> None:
        """Before the model is built: with ``ieee`` no library call may round fp32 operands to TF32."""
        self.torch.backends.cudnn.allow_tf32 = not ieee
        self.torch.backends.cuda.matmul.allow_tf32 = False  # PyTorch's default too, stated so it holds

    def _make_inputs(self, seed: int) -> list:
        with evaluator_allocations(self.torch, "making the inputs"):
            return self.inputs.make_inputs(self.problem.get_inputs, seed, self.device, self.precision)

    def _forward(self, inputs: list, fwd_seed: int):
        self.inputs.seed_everything(fwd_seed)
        with self._no_grad():
            return self.model(*inputs)

    def _poison(self, inputs: list) -> None:
        """Fill memory the caching allocator will hand out next with 0xFF (NaN for floats)."""
        torch = self.torch
        in_bytes = sum(t.numel() * t.element_size() for t in inputs if isinstance(t, torch.Tensor))
        with evaluator_allocations(torch, "poisoning the allocator before a trial"):
            free, _ = torch.cuda.mem_get_info(self.device)
            size = int(min(free * 0.25, max(in_bytes, 256 * 1024 * 1024)))
            if size > 0:
                big = torch.empty(size, dtype=torch.uint8, device=self.device)
                big.fill_(0xFF)
                del big
            small = [torch.empty(512 * 1024, dtype=torch.uint8, device=self.device).fill_(0xFF) for _ in range(16)]
            del small

    # ------------------------------------------------------------------ commands
    def cmd_setup(self, cmd: protocol.Setup, blobs: list) -> tuple[protocol.Reply, list]:
        """Reference: build Model and find out whether its forward is random."""
        self.transport.release_host_copy_mapping()  # the last problem's candidate is gone
        self.slots.clear()  # the last problem's tensors
        self.last = None
        self.precision = cmd.precision
        self.atol, self.rtol = float(cmd.atol), float(cmd.rtol)
        self._set_fp32_math(bool(cmd.ieee_fp32))
        self._note_before_problem(cmd)  # what a Recycle compares with, once the problem is done
        self.problem = self.inputs.load_module(cmd.code, "kb_problem", "<problem>")
        self.model = self.inputs.build_model(self.problem.Model, self.problem.get_init_inputs,
                                             int(cmd.init_seed), self.device, self.precision)
        mode = cmd.compile_mode
        if mode:
            # Baselines: the same reference under torch.compile (compiled lazily, at the first call).
            if mode == "cudagraphs":
                self.model = self.torch.compile(self.model, backend="cudagraphs")
            else:
                self.model = self.torch.compile(self.model, mode=mode)
        stochastic = nondeterministic = False
        first_call_s = None
        if cmd.probe_seed is not None and isinstance(self.model, self.torch.nn.Module):
            state = {k: v.clone() for k, v in self.model.state_dict().items()}
            x = self._make_inputs(int(cmd.probe_seed))
            # CUDA-graph replays write their outputs into memory the next replay reuses: keep copies.
            keep = self._cloned if mode in GRAPH_REPLAY_MODES else (lambda out: out)
            t0 = _perf_counter()
            a = keep(self._forward(x, 1))
            self._sync()
            first_call_s = _perf_counter() - t0  # for compile modes: compiling, from scratch or from cache
            b = self._forward(x, 2)
            tree, leaves = self.transport.flatten(b)
            if not self.compare.compare_outputs(tree, leaves, a, self.atol, self.rtol).ok:
                stochastic = True
                self.model.eval()
                a = keep(self._forward(x, 3))
                b = self._forward(x, 4)
                tree, leaves = self.transport.flatten(b)
                nondeterministic = not self.compare.compare_outputs(tree, leaves, a, self.atol, self.rtol).ok
            self.model.load_state_dict(state)
            del a, b, x, state
            self._release_cached_memory()
        compiled = bool(mode and first_call_s is not None)
        return protocol.SetupReply(stochastic=stochastic, nondeterministic=nondeterministic,
                                   compile_s=first_call_s if compiled else None,
                                   compile_cache=self._compile_cache_counters() if compiled else None), []

    def _cloned(self, out):
        tree, leaves = self.transport.flatten(out)
        return rebuild(tree, [t.clone() if isinstance(t, self.torch.Tensor) else t for t in leaves])

    def _compile_cache_counters(self) -> dict:
        """Inductor's cache hits and misses in this process (was a compiled reference built or loaded?)."""
        try:
            from torch._dynamo.utils import counters
        except Exception:
            return {}
        return {k: int(v) for k, v in counters["inductor"].items() if "cache" in k}

    def cmd_load(self, cmd: protocol.Load, blobs: list) -> tuple[protocol.Reply, list]:
        """Candidate or compile worker: import the candidate (building its kernels) and build ModelNew."""
        from kernelbench.evaluation import compile_cache
        from kernelbench.evaluation.guards import runtime as rt

        self.precision = cmd.precision
        self._set_fp32_math(bool(cmd.ieee_fp32))
        if self.role == "candidate" and cmd.record_launches:
            self.launch_recorder.install()  # ours: before the candidate, and before the patch snapshot
            if self.fused_baseline is not None:
                # The recorder wraps JITFunction.run, which the fused fingerprint's watch follows: against the baseline
                # Init took, every Triton candidate's timed call failed FusedTampered (session 20, H200). Taken again
                # now, after our own wrapping and before the problem's code (a server's client may send it) or the
                # candidate's.
                from kernelbench.evaluation import fingerprint_kernel

                self.fused_baseline = fingerprint_kernel.Baseline.take()
                self.bound_at_start["fused_baseline"] = id(self.fused_baseline)
        self.problem = self.inputs.load_module(cmd.problem_code, "kb_problem", "<problem>")
        if self.role in ("candidate", "compile"):
            compile_cache.set_namespace(cmd.cache_namespace)
            compile_cache.set_scope(cmd.cache_scope)
            compile_cache.install()
        if not self.is_cuda and cmd.record_launches:
            self._count_interpreter_launches()
        self.snapshot = rt.PatchSnapshot.take()
        self.threads_before = _active_count()
        t0 = _perf_counter()
        stage = "load"
        try:
            cand = self.inputs.load_module(cmd.source, "kb_candidate", "<candidate>")
        except BaseException as e:
            failed_build = any(ev.get("failed") for ev in compile_cache.BUILD_EVENTS)
            return _error_reply(e, "compile" if failed_build else "load", compile_cache.BUILD_EVENTS), []
        import_s = _perf_counter() - t0
        builds = list(compile_cache.BUILD_EVENTS)
        if self.role == "compile":
            return protocol.LoadReply(import_s=import_s, builds=builds, threads_started=0, findings=[]), []
        model_cls = getattr(cand, "ModelNew", None)
        if not isinstance(model_cls, type):
            what = "is not a class" if model_cls is not None else "is not defined"
            return protocol.ErrorReply(where=stage, type="MissingModelNew", message=f"the candidate's ModelNew {what}",
                                       traceback=None, builds=builds), []
        try:
            self.model = self.inputs.build_model(model_cls, self.problem.get_init_inputs, int(cmd.init_seed),
                                                 self.device, self.precision)
            if cmd.eval_mode and isinstance(self.model, self.torch.nn.Module):
                self.model.eval()
        except BaseException as e:
            return _error_reply(e, "init", builds), []
        findings = rt.patch_findings(self.snapshot, rt.PatchSnapshot.take(), "at import")
        threads = _active_count() - self.threads_before
        return protocol.LoadReply(import_s=import_s, builds=builds, threads_started=threads,
                                  findings=[f.model_dump() for f in findings]), []

    def cmd_run(self, cmd: protocol.Run, blobs: list) -> tuple[protocol.Reply, list]:
        """One correctness trial on fresh inputs from ``seed``."""
        x = self._make_inputs(int(cmd.seed))
        if self.role == "candidate":
            if self.is_cuda and cmd.poison:
                self._poison(x)
            out = self._forward(x, int(cmd.fwd_seed))
            # Snapshot what exists when forward returns, in stream order: work finished later by a
            # thread or another stream does not count.
            tree, leaves = self.transport.flatten(out)
            with evaluator_allocations(self.torch, "copying the candidate's outputs for the reference"):
                snap = self._snapshot(leaves, x)
                if self.is_cuda:
                    self._sync()
                threads = _active_count() - self.threads_before
                payload, out_blobs = self._export(rebuild(tree, snap), x, staged=True)
            return protocol.ExportReply(**payload, threads_started=threads), out_blobs
        self.slots.pop(str(cmd.slot), None)  # a former trial's, whose comparison never came: freed before the new
        out = self._forward(x, int(cmd.fwd_seed))
        if self.is_cuda:
            self._sync()
        self.slots[str(cmd.slot)] = (x, out)
        return protocol.DoneReply(), []

    def cmd_compare(self, cmd: protocol.Compare, blobs: list) -> tuple[protocol.Reply, list]:
        """Reference: compare a candidate's exported outputs with the slot's reference outputs."""
        key = str(cmd.slot)
        x, ref_out = self.slots[key] if key != "last" else self.last
        try:
            too_big, extent, shared_size = self._check_claims(cmd, x, ref_out)
            if too_big is not None:
                return protocol.CompareReply(passed=False, reason=too_big, max_abs=None, max_rel=None,
                                             inputs_modified=False), []
            outs, ins = self._received(cmd, blobs, extent, shared_size)
        except Exception as e:
            # A description the candidate got wrong fails its comparison; memory the reference could not get for
            # its copies is ours (an infrastructure failure), never a wrong output or a modified input.
            ours = as_evaluator_oom(self.torch, e, "copying the candidate's outputs into the reference")
            if ours is not None:
                if ours is e:
                    raise
                raise ours from e
            return protocol.CompareReply(passed=False, reason=f"could not read the candidate's outputs: {e}",
                                         max_abs=None, max_rel=None, inputs_modified=False), []
        finally:
            if key == "last":  # the candidate's last comparison: its file's pages need not stay page-locked
                self.transport.release_host_copy_mapping()
        comp = self.compare.compare_outputs(cmd.tree, outs.tensors, ref_out, self.atol, self.rtol)
        modified = self._inputs_modified(ins.tensors, x)
        if self.is_cuda:
            self._sync()
        del outs, ins, x, ref_out
        if key != "last":
            self.slots.pop(key, None)
        else:
            # The candidate's last comparison: the last timed call is not read again, and what this comparison
            # allocated (its copies of the candidate's outputs and inputs) goes back to the driver, for the
            # candidate's launch trace; the reference held 30 GiB here on the H100 (official level 1, 6 GiB tensors).
            self.last = None
            self._release_cached_memory()
        return protocol.CompareReply(passed=comp.ok and modified is None, reason=comp.reason or modified,
                                     max_abs=comp.max_abs_error, max_rel=comp.max_rel_error,
                                     inputs_modified=modified is not None), []

    def _inputs_modified(self, received: list, x: list) -> str | None:
        """Why the candidate's inputs after its call differ from the reference's (None: they are the same)."""
        ref_inputs = [t for t in x if isinstance(t, self.torch.Tensor)]
        if len(received) != len(ref_inputs):
            return "the candidate reported a different number of inputs"
        for k in range(len(ref_inputs)):
            if not self.compare.tensors_equal(received[k], ref_inputs[k]):
                return f"input {k} was modified in place by the candidate"
        return None

    def _check_claims(self, cmd: protocol.Compare, x: list, ref_out: Any) -> tuple[str | None, int, int]:
        """Why the candidate's descriptions cannot pass, decided before anything is read (None if they may), how
        far its host copies reach, and the size of the shared buffer they name (0: none). Claims of far more bytes of outputs (or inputs) than the reference's own
        would only let the candidate make the reference allocate, read and page-lock memory at will; within
        ``CLAIM_FACTOR`` (a wrong dtype, fp16 for fp64 at worst) they are read, so that the comparison can say
        what is wrong."""
        torch = self.torch
        _, ref_leaves = self.transport.flatten(ref_out)

        def nbytes(ts: list) -> int:
            return sum(t.numel() * t.element_size() for t in ts if isinstance(t, torch.Tensor))

        out_claim, in_claim = self.transport.claimed_bytes(cmd.outputs), self.transport.claimed_bytes(cmd.inputs)
        out_ref, in_ref = nbytes(ref_leaves), nbytes(list(x))
        if out_claim > _claim_limit(out_ref):
            return (f"the candidate's outputs claim {out_claim} bytes, far more than the reference's {out_ref} "
                    "(outputs must have the reference's shapes and dtypes)"), 0, 0
        if in_claim > _claim_limit(in_ref):
            return f"the candidate's inputs claim {in_claim} bytes, far more than the reference's {in_ref}", 0, 0
        descs = [*cmd.outputs, *cmd.inputs]
        # Each host copy starts on an aligned offset; a shared buffer is rounded up within the slack.
        limit = _claim_limit(out_ref) + _claim_limit(in_ref) + self.transport.HOST_COPY_ALIGN * len(descs)
        extent, shared_size = self.transport.host_copy_extent(descs), self.transport.shared_size(descs)
        if extent > limit:
            return "the candidate's host copies lie beyond what its outputs and inputs can fill", 0, 0
        if shared_size > limit:
            # Mapping costs the reference only addresses, but a buffer no comparison can need is refused unmapped.
            return "the candidate's shared buffer is far larger than its outputs and inputs", 0, 0
        return None, extent, shared_size

    def cmd_release(self, cmd: protocol.Release, blobs: list) -> tuple[protocol.Reply, list]:
        self.exported = None
        if self.release_arena:  # the last timed output's export: no export follows it
            self.release_arena = False
            self.arena.release()
        self._collect_cycles()
        if self.is_cuda:
            self._sync()
            # Blocks shared over CUDA IPC stay alive until collected, even after the reader let go.
            self.torch.cuda.ipc_collect()
        return protocol.DoneReply(), []

    def cmd_export_last(self, cmd: protocol.ExportLast, blobs: list) -> tuple[protocol.Reply, list]:
        """The last timed call's outputs and inputs for the reference's check. Nothing reads them again: they are
        the export's until its ``Release``, which then frees them and the arena too."""
        x, out = self.last
        self.last = None
        with evaluator_allocations(self.torch, "copying the last timed output for the reference"):
            payload, b = self._export(out, x)
        self.release_arena = True
        return protocol.ExportReply(**payload, threads_started=None), b

    def cmd_check_patches(self, cmd: protocol.CheckPatches, blobs: list) -> tuple[protocol.Reply, list]:
        from kernelbench.evaluation.guards import runtime as rt

        if self.snapshot is None:
            return protocol.PatchReply(findings=[], threads_started=None), []
        findings = rt.patch_findings(self.snapshot, rt.PatchSnapshot.take(), cmd.when)
        own = worker_changes(self)
        if own:
            from kernelbench.results import GuardFinding

            findings.append(GuardFinding(rule="runtime-patch", severity="error", origin="runtime",
                                         message=f"the candidate changed the worker itself ({cmd.when}): "
                                                 f"{', '.join(own[:6])}"))
        return protocol.PatchReply(findings=[f.model_dump() for f in findings],
                                   threads_started=_active_count() - self.threads_before), []


def _freeze_collected() -> None:
    """Move every object that exists now (torch, the profiler's modules, ours: all trusted) out of the cyclic
    collector's reach: the full collections that free a candidate's output cycles between trials then cost
    microseconds instead of 0.15-0.2 s (every Release of a model with large weights ran one). Called by the worker
    process only (never in a process that goes on running other code), and only before any problem or candidate code
    has run in it, so nothing either makes is ever frozen."""
    gc.collect()
    gc.freeze()


def serve(role: str, device: str, fd: int) -> None:
    from kernelbench.evaluation.channel import Channel

    serve_channel(Channel.from_fd(fd), role, device)


def serve_channel(channel, role: str, device: str) -> None:
    """Make the worker, say Ready on ``channel``, then answer commands until Exit or the channel closes (a started
    process's :func:`serve`, and a reference template's fork: ``template.py``)."""
    from kernelbench.evaluation.channel import ChannelClosed, ProtocolError

    try:
        worker = Worker(role, device)
        worker.freezes = True
        _freeze_collected()
        channel.send(protocol.encode_reply(protocol.Ready(pid=os.getpid())))
    except BaseException as e:
        channel.send(protocol.encode_reply(_error_reply(e, "start")))
        return
    while True:
        try:
            header, blobs = channel.recv()
        except ChannelClosed:
            return
        try:
            cmd = protocol.decode_command(header)
        except ProtocolError as e:
            channel.send(protocol.encode_reply(protocol.ErrorReply(where="protocol", type="ProtocolError",
                                                                   message=str(e), traceback=None, builds=None)))
            continue
        if isinstance(cmd, protocol.Exit):
            return
        handler = getattr(worker, f"cmd_{cmd.NAME}", None)
        if handler is None:
            channel.send(protocol.encode_reply(protocol.ErrorReply(where="protocol", type="UnknownCommand",
                                                                   message=cmd.NAME, traceback=None, builds=None)))
            continue
        try:
            reply, out_blobs = handler(cmd, blobs)
        except BaseException as e:  # SystemExit and KeyboardInterrupt from candidate code included
            reply, out_blobs = _error_reply(e, cmd.NAME), []
        cuda_mem = None
        if worker.is_cuda and worker.torch.cuda.is_initialized():
            # Bytes this process holds after the command (allocator counters, no CUDA call): the parent
            # logs them, so a problem that runs out of memory shows which process kept what.
            try:
                cuda_mem = [worker.torch.cuda.memory_allocated(worker.device),
                            worker.torch.cuda.memory_reserved(worker.device)]
            except Exception:
                pass
        try:
            channel.send(protocol.encode_reply(reply, cuda_mem), out_blobs)
        except ChannelClosed:
            return


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(prog="kernelbench-worker")
    p.add_argument("--fd", type=int, required=True)
    p.add_argument("--role", choices=["reference", "candidate", "compile"], required=True)
    p.add_argument("--device", required=True)
    args = p.parse_args(argv)
    try:
        serve(args.role, args.device, args.fd)
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        # Skip interpreter shutdown: candidate atexit handlers and threads must not outlive the verdict.
        os._exit(0)


