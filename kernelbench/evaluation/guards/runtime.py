"""Runtime guards: facts gathered while a candidate runs, judged by trusted code.

* Patch detection: before the candidate is imported the worker snapshots the identity (and
  code object) of everything timing and checking rely on: torch's CUDA events, streams and
  synchronisation, Tensor methods, ``time``'s clocks, ``nn.Module.__call__``, every
  function of the evaluator's own modules, and the dispatcher's table for the aten operators
  the checks run through. Any difference afterwards is a failing finding.
* Launch classification: the kernels a candidate launched during one profiled ``forward`` are
  split into its own (names from its ``__global__`` functions, Triton kernels, CuTe DSL kernels and
  TileLang kernels) and PyTorch's; a candidate of a kernel backend that launches none of its own fails.
"""

from __future__ import annotations

import ast
import inspect
import re
import sys
import types
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from kernelbench.backends import all_backends, get_backend
from kernelbench.results import GuardFinding

if TYPE_CHECKING:
    from kernelbench.evaluation.protocol import LaunchesReply, ProfileReply

_TORCH_ATTRS = {
    "torch": ["manual_seed", "no_grad", "empty", "zeros", "ones", "rand", "randn", "randint", "allclose", "isclose",
              "equal", "isnan", "isinf", "where", "arange", "from_numpy", "cat", "stack", "dot", "view_as_real"],
    "torch.linalg": ["vector_norm"],
    "torch.cuda": ["synchronize", "Event", "Stream", "current_stream", "set_stream", "stream", "device",
                   "set_device", "manual_seed", "manual_seed_all", "mem_get_info", "empty_cache"],
    "torch.cuda.Event": ["record", "elapsed_time", "synchronize", "query", "wait", "__init__", "__new__"],
    "torch.cuda.Stream": ["synchronize", "query", "wait_stream", "wait_event", "record_event", "__new__"],
    "torch.Tensor": ["clone", "copy_", "data_ptr", "to", "cpu", "numpy", "contiguous", "reshape", "view",
                     "float", "double", "sum", "abs", "__eq__", "__ne__", "__sub__", "item", "untyped_storage",
                     "storage_offset", "stride", "size", "numel", "element_size", "__torch_function__",
                     "tolist", "resolve_conj", "dtype", "mul_", "__getitem__", "is_complex", "is_floating_point",
                     "device", "__add__"],
    "torch._C": ["_len_torch_function_stack", "_len_torch_dispatch_stack"],
    "torch.nn.Module": ["__call__", "_call_impl", "to", "eval", "train"],
    "torch.profiler": ["profile"],
    # The launch trace's profiler (worker/trace.py: kineto_profile), read when the trace starts, after candidate code.
    "torch.autograd.profiler": ["profile"],
    "torch.autograd.profiler.profile": ["__init__", "__enter__", "__exit__", "export_chrome_trace"],
    "time": ["perf_counter", "perf_counter_ns", "time", "time_ns", "monotonic", "monotonic_ns", "sleep",
             "process_time"],
    "threading": ["Thread", "active_count", "enumerate"],
    "os": ["_exit", "kill", "getpid"],
    "sys": ["settrace", "setprofile", "gettrace", "getprofile"],
}
#: aten operators the fingerprint, the output checks and the inputs' generation run through in the candidate's
#: process. A kernel registered for one of them (``torch.library``) changes no attribute, only the dispatcher's
#: table, so each operator's table is part of the snapshot.
_ATEN_OPS = (
    "aten::dot", "aten::copy_", "aten::sum", "aten::sum.dim_IntList", "aten::mul_.Tensor", "aten::linalg_vector_norm",
    "aten::stack", "aten::cat", "aten::slice.Tensor", "aten::add.Tensor", "aten::_local_scalar_dense",
    "aten::_to_copy", "aten::view_as_real", "aten::resolve_conj", "aten::reshape", "aten::view", "aten::sub.Tensor",
    "aten::abs", "aten::le.Tensor", "aten::isnan", "aten::isfinite", "aten::eq.Tensor", "aten::where.self",
    "aten::max", "aten::empty.memory_format", "aten::empty_strided", "aten::clone", "aten::randn", "aten::normal_",
    "aten::uniform_",
)
_OUR_MODULES = (
    "kernelbench.evaluation.worker", "kernelbench.evaluation.worker.bound", "kernelbench.evaluation.worker.process",
    "kernelbench.evaluation.worker.timing", "kernelbench.evaluation.worker.export", "kernelbench.evaluation.worker.trace",
    "kernelbench.evaluation.protocol", "kernelbench.evaluation.compare", "kernelbench.evaluation.inputs",
    "kernelbench.evaluation.transport", "kernelbench.evaluation.channel", "kernelbench.evaluation.timing",
    "kernelbench.evaluation.compile_cache", "kernelbench.evaluation.guards.runtime",
    "kernelbench.evaluation.fingerprint_kernel",
)


def _resolve(path: str):
    parts = path.split(".")
    obj = sys.modules.get(parts[0])
    for p in parts[1:]:
        if obj is None:
            return None
        obj = getattr(obj, p, None)
    return obj


def _fingerprint(obj) -> tuple:
    if isinstance(obj, (classmethod, staticmethod)):
        obj = obj.__func__
    code = getattr(obj, "__code__", None)
    func = getattr(obj, "__func__", None)
    if func is not None:
        code = getattr(func, "__code__", code)
    return (id(obj), id(code) if code is not None else None,
            id(getattr(code, "co_code", None)) if code is not None else None)


def _torch_disable_dynamo_target(obj):
    """What torch's own ``_disable_dynamo`` wrapper around ``obj`` calls, or None if ``obj`` is not one.

    Importing ``torch._dynamo`` (``from_pretrained`` does, so every level-4 problem) makes torch replace
    ``torch.manual_seed`` with such a wrapper. Read from the wrapper's closure, not ``__wrapped__`` (which
    anyone can set): a wrapper built around another function still counts as a replacement.
    """
    if not isinstance(obj, types.FunctionType) or obj.__code__.co_name != "inner" or not obj.__closure__:
        return None
    compile_mod = sys.modules.get("torch._compile")
    disable = getattr(compile_mod, "_disable_dynamo", None)
    if disable is None or obj.__code__.co_filename != disable.__code__.co_filename:
        return None
    if obj.__code__ not in disable.__code__.co_consts:  # the code object of _disable_dynamo's own ``inner``
        return None
    cells = dict(zip(obj.__code__.co_freevars, obj.__closure__))
    try:
        return cells["fn"].cell_contents if "fn" in cells else None
    except ValueError:  # an empty cell
        return None


@dataclass
class PatchSnapshot:
    entries: dict[str, tuple] = field(default_factory=dict)

    @classmethod
    def take(cls) -> PatchSnapshot:
        snap = cls()
        for owner, names in _TORCH_ATTRS.items():
            base = _resolve(owner)
            if base is None:
                continue
            snap.entries[owner] = (id(base),)
            for n in names:
                try:
                    value = inspect.getattr_static(base, n)
                except AttributeError:
                    value = None
                value = _torch_disable_dynamo_target(value) or value  # torch's own wrapping is no patch
                snap.entries[f"{owner}.{n}"] = _fingerprint(value)
        torch = sys.modules.get("torch")
        dump = getattr(getattr(torch, "_C", None), "_dispatch_dump", None)
        if dump is not None:
            for op in _ATEN_OPS:
                try:
                    snap.entries[f"dispatcher {op}"] = (dump(op),)
                except Exception:  # an operator this torch does not have
                    snap.entries[f"dispatcher {op}"] = (None,)
        fused = sys.modules.get("kernelbench.evaluation.fingerprint_kernel")
        if fused is not None:  # the one-pass fingerprint's kernel, launcher and Triton's hooks, once started
            snap.entries.update(fused.watched())
        for mod_name in _OUR_MODULES:
            mod = sys.modules.get(mod_name)
            if mod is None:
                continue
            snap.entries[f"sys.modules[{mod_name}]"] = (id(mod),)
            for n, obj in list(vars(mod).items()):
                if isinstance(obj, types.FunctionType) and obj.__module__ == mod_name:
                    snap.entries[f"{mod_name}.{n}"] = _fingerprint(obj)
                elif isinstance(obj, type) and obj.__module__ == mod_name:
                    for an, av in list(vars(obj).items()):
                        if isinstance(av, (types.FunctionType, staticmethod, classmethod, property)):
                            snap.entries[f"{mod_name}.{n}.{an}"] = _fingerprint(
                                av.fget if isinstance(av, property) else av)
        return snap

    def changes(self, later: PatchSnapshot) -> list[str]:
        changed = []
        for k, v in self.entries.items():
            if later.entries.get(k) != v:
                changed.append(k)
        return changed


def patch_findings(before: PatchSnapshot, after: PatchSnapshot, when: str) -> list[GuardFinding]:
    changed = before.changes(after)
    if not changed:
        return []
    shown = ", ".join(changed[:6]) + (f" and {len(changed) - 6} more" if len(changed) > 6 else "")
    return [GuardFinding(rule="runtime-patch", severity="error", origin="runtime",
                         message=f"the candidate replaced what timing and checking rely on ({when}): {shown}")]


# ------------------------------------------------------------------ own kernels
_LAUNCH_BOUNDS_RE = re.compile(r"__launch_bounds__\s*\([^)]*\)")
_GLOBAL_RE = re.compile(r"__global__\s+[^;{}()]*?\b(\w+)\s*\(")


def cuda_kernel_names(source: str, tree: ast.Module | None) -> set[str]:
    """CUDA ``__global__`` functions in the source's text (its strings hold the C++), parsed or not."""
    names = set(_GLOBAL_RE.findall(_LAUNCH_BOUNDS_RE.sub(" ", source)))
    names.discard("if")
    return names


def triton_kernel_names(source: str, tree: ast.Module | None) -> set[str]:
    """Functions decorated with a ``jit``, ``autotune`` or ``heuristics`` decorator (Triton's kernels).

    CuTe's ``@cute.jit`` and ``@tilelang.jit`` are left out: they mark host code and kernel builders,
    whose names never appear in a kernel trace (their kernels' names come from the readers below).
    """
    names: set[str] = set()
    if tree is None:
        return names
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef):
            for dec in node.decorator_list:
                target = dec.func if isinstance(dec, ast.Call) else dec
                text = ast.unparse(target)
                if text.endswith(("cute.jit", "tilelang.jit")):
                    continue
                if text.endswith("jit") or text.endswith("autotune") or text.endswith("heuristics"):
                    names.add(node.name)
    return names


def _dsl_functions(tree: ast.Module | None, wanted) -> list[ast.FunctionDef | ast.AsyncFunctionDef]:
    from kernelbench.evaluation.guards.dsl import decorator_paths
    from kernelbench.evaluation.guards.names import Resolver

    if tree is None:
        return []
    resolver = Resolver(tree)
    return [fn for fn in ast.walk(tree) if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef))
            and any(wanted(p) for p in decorator_paths(fn, resolver))]


def cute_kernel_names(source: str, tree: ast.Module | None) -> set[str]:
    """``@cute.kernel`` functions. The CUTLASS DSL names the kernel it generates
    ``kernel_cutlass_<function>_<argument types>_<n>`` (read in the PTX that ``cute.compile`` writes with
    nvidia-cutlass-dsl 4.8.1, ``CUTE_DSL_KEEP=ptx``), so the function's name is in the trace's kernel name.
    Not yet checked against a profiler trace on a GPU."""
    from kernelbench.evaluation.guards.dsl import CUTE_KERNEL

    return {fn.name for fn in _dsl_functions(tree, lambda p: p in CUTE_KERNEL)}


def tilelang_kernel_names(source: str, tree: ast.Module | None) -> set[str]:
    """``<name>_kernel`` for each ``@T.prim_func`` ``<name>`` (and each ``@tilelang.jit`` function that is itself a
    kernel): TileLang emits a prim_func's CUDA kernel as ``extern "C" __global__ void <name>_kernel(...)`` (read
    in the source ``tilelang.compile`` generates, tilelang 0.1.15). Not yet checked against a GPU trace."""
    from kernelbench.evaluation.guards.dsl import DslIndex
    from kernelbench.evaluation.guards.names import Resolver

    if tree is None:
        return set()
    dsl = DslIndex(tree, Resolver(tree))
    kernels = set(dsl.prim_funcs) | {name for name, fn in dsl.tilelang_jit.items() if id(fn) in dsl.device_nodes}
    return {f"{name}_kernel" for name in kernels}


def own_kernel_names(source: str) -> set[str]:
    """Kernel names a candidate defines, by every backend's reader (whatever backend it claims): a launch
    whose name contains one of them is the candidate's own."""
    try:
        tree: ast.Module | None = ast.parse(source)
    except SyntaxError:
        tree = None
    names: set[str] = set()
    for spec in all_backends():
        reader = spec.kernel_name_reader()
        if reader is not None:
            names |= reader(source, tree)
    return names


_HOUSEKEEPING = re.compile(r"(memcpy|memset|fill|spin_kernel|copy|Memcpy|Memset)", re.IGNORECASE)


@dataclass
class LaunchReport:
    own_kernels: list[str]
    other_kernels: list[str]
    own_time_us: float
    other_time_us: float
    streams: list[int]
    marker_stream: int | None
    #: Streams the candidate's own kernels ran on (library kernels may use internal streams).
    own_streams: list[int] = field(default_factory=list)

    @property
    def own_share(self) -> float | None:
        total = self.own_time_us + self.other_time_us
        return self.own_time_us / total if total > 0 else None


def classify_launches(kernels: Iterable[dict], own_names: set[str], marker_stream: int | None) -> LaunchReport:
    own, other = [], []
    own_t = other_t = 0.0
    streams: set[int] = set()
    own_streams: set[int] = set()
    for k in kernels:
        name = str(k.get("name", ""))
        dur = float(k.get("dur_us", 0.0) or 0.0)
        if name.startswith("spin_kernel") or "spin_kernel" in name:
            continue
        stream = k.get("stream")
        if isinstance(stream, int):
            streams.add(stream)
        if any(n and n in name for n in own_names):
            own.append(name)
            own_t += dur
            if isinstance(stream, int):
                own_streams.add(stream)
        elif not _HOUSEKEEPING.search(name) or "elementwise" in name:
            other.append(name)
            other_t += dur
    return LaunchReport(sorted(set(own)), sorted(set(other)), own_t, other_t, sorted(streams), marker_stream,
                        sorted(own_streams))


def launch_findings(report: LaunchReport, backend: str) -> list[GuardFinding]:
    findings: list[GuardFinding] = []
    if get_backend(backend).custom_kernels and not report.own_kernels:
        findings.append(GuardFinding(
            rule="no-own-kernel", severity="error", origin="runtime",
            message=f"forward launched no {backend} kernel of the candidate's own"
                    + (f"; it ran PyTorch's: {', '.join(report.other_kernels[:4])}" if report.other_kernels else "")))
    elif report.own_kernels:
        share = report.own_share
        msg = f"own kernels {', '.join(report.own_kernels[:4])}"
        if share is not None:
            msg += f" take {share:.0%} of device time"
        if report.other_kernels:
            msg += f"; PyTorch kernels still running: {', '.join(report.other_kernels[:4])}"
        findings.append(GuardFinding(rule="launch-report", severity="info", origin="runtime", message=msg))
    if report.marker_stream is not None:
        own_elsewhere = [s for s in report.own_streams if s != report.marker_stream]
        others = [s for s in report.streams if s != report.marker_stream and s not in own_elsewhere]
        if own_elsewhere:
            findings.append(GuardFinding(
                rule="side-stream", severity="error", origin="runtime",
                message=f"the candidate's own kernels ran on stream(s) {own_elsewhere}, not on the stream being "
                        f"timed ({report.marker_stream})"))
        elif others:
            # cuDNN and cuBLAS run some algorithms on internal streams joined back by events (PyTorch's own
            # BatchNorm + convolution does, in IEEE fp32): the timed end already waits for them, and work
            # that is not joined back fails the drained-timing check. Worth a look, not a failure.
            findings.append(GuardFinding(
                rule="side-stream", severity="warning", origin="runtime",
                message=f"library kernels ran on stream(s) {others} besides the stream being timed "
                        f"({report.marker_stream}); the drained-timing check found no work left running"))
    return findings


def output_provenance_findings(reply: ProfileReply | LaunchesReply, report: LaunchReport) -> list[GuardFinding]:
    """A warning when outputs were not handed to any of the candidate's own kernels (the decoy of issue 23).

    ``reply`` is the worker's profile (GPU) or launch-count (CPU) reply: ``unowned_outputs`` are output
    indices whose storage no own Triton launch was given, ``recorded`` says launches were recorded at all
    (Triton candidates only). Candidates that launched no own kernel already fail ``no-own-kernel``.
    """
    unowned = reply.unowned_outputs or []
    if not reply.recorded or not unowned or not report.own_kernels:
        return []
    n = int(reply.n_outputs or len(unowned))
    which = ", ".join(str(i) for i in unowned[:8])
    share = report.own_share
    spent = f"; its own kernels took {share:.0%} of the forward's GPU time" if share is not None else ""
    return [GuardFinding(
        rule="library-output", severity="warning", origin="runtime",
        message=f"{len(unowned)} of {n} output(s) (index {which}) were never handed to one of the candidate's own "
                f"kernels: PyTorch or a library produced them{spent}. Its own kernels may be a decoy.")]
