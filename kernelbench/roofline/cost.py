"""Counting a problem's cost for the roofline: FLOPs of the reference forward and minimum bytes moved,
cached by problem hash (the bounds built from a cost are in :mod:`kernelbench.roofline.bounds`)."""


from __future__ import annotations

import contextlib
import importlib.util
import io
import logging
import os
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from kernelbench.errors import KernelBenchError
from kernelbench.io_utils import atomic_write_json, file_lock
from kernelbench.problems.model import Problem

if TYPE_CHECKING:  # pydantic stays out of the import path: the GPU test machine may lack it
    pass

log = logging.getLogger(__name__)

#: Bumped when the way costs are counted changes, so cached costs from an older model are ignored.
COST_MODEL_VERSION = 1
ELEMENT_SIZE = {"fp32": 4, "fp16": 2, "bf16": 2}
PRECISIONS = tuple(ELEMENT_SIZE)
#: A CPU fallback is refused when the problem's inputs and parameters exceed this many bytes.
CPU_FALLBACK_MAX_BYTES = 2 * 1024**3


class CostUnavailableError(KernelBenchError):
    """The cost of a problem cannot be computed here (missing package, code that fails to run)."""


@dataclass(frozen=True)
class TensorTally:
    """Tensors counted by kind: floating tensors change size with the precision, others do not."""

    float_elements: int = 0
    other_bytes: int = 0
    count: int = 0

    def bytes_at(self, precision: str) -> int:
        return self.float_elements * ELEMENT_SIZE[precision] + self.other_bytes


@dataclass(frozen=True)
class CostRecord:
    """Precision-independent counts for one problem; what the cache stores."""

    problem_hash: str
    inputs: TensorTally
    outputs: TensorTally
    params: TensorTally
    #: FLOPs per counted op, e.g. (("aten.mm", 2*N**3),).
    flops_by_op: tuple[tuple[str, int], ...]
    method: Literal["meta", "cpu"]
    note: str | None = None

    def to_json(self) -> dict:
        d = asdict(self)
        d["flops_by_op"] = [list(p) for p in self.flops_by_op]
        return d

    @classmethod
    def from_json(cls, d: dict) -> CostRecord:
        return cls(problem_hash=d["problem_hash"], inputs=TensorTally(**d["inputs"]),
                   outputs=TensorTally(**d["outputs"]), params=TensorTally(**d["params"]),
                   flops_by_op=tuple((str(op), int(n)) for op, n in d["flops_by_op"]),
                   method=d["method"], note=d.get("note"))


def _is_conv(op: str) -> bool:
    return "conv" in op


@dataclass(frozen=True)
class ProblemCost:
    """FLOPs and minimum bytes of one problem at one precision."""

    problem_key: str
    problem_hash: str
    precision: str
    flops: int
    #: FLOPs of convolutions (PyTorch runs fp32 ones on TF32 tensor cores by default).
    conv_flops: int
    input_bytes: int
    output_bytes: int
    param_bytes: int
    method: Literal["meta", "cpu"] = "meta"
    note: str | None = None

    @property
    def matmul_flops(self) -> int:
        """Matmul and attention FLOPs: everything counted that is not a convolution."""
        return self.flops - self.conv_flops

    @property
    def min_bytes(self) -> int:
        return self.input_bytes + self.output_bytes + self.param_bytes

    @property
    def arithmetic_intensity(self) -> float:
        """FLOPs per byte moved; compare with a GPU's peak / bandwidth ridge point."""
        return self.flops / self.min_bytes if self.min_bytes else 0.0

    @classmethod
    def from_record(cls, record: CostRecord, precision: str, problem_key: str = "") -> ProblemCost:
        if precision not in ELEMENT_SIZE:
            raise ValueError(f"unknown precision {precision!r} (choose from {', '.join(PRECISIONS)})")
        flops = sum(n for _, n in record.flops_by_op)
        conv = sum(n for op, n in record.flops_by_op if _is_conv(op))
        return cls(problem_key=problem_key, problem_hash=record.problem_hash, precision=precision,
                   flops=flops, conv_flops=conv,
                   input_bytes=record.inputs.bytes_at(precision),
                   output_bytes=record.outputs.bytes_at(precision),
                   param_bytes=record.params.bytes_at(precision),
                   method=record.method, note=record.note)


# ---------------------------------------------------------------- counting
def _tensors_in(obj: Any) -> list:
    """Tensors in a (possibly nested) forward output or input list, each object once."""
    import torch

    found: list = []
    seen: set[int] = set()

    def visit(o: Any, depth: int) -> None:
        if depth > 20:
            return
        if isinstance(o, torch.Tensor):
            if id(o) not in seen:
                seen.add(id(o))
                found.append(o)
        elif isinstance(o, dict):
            for v in o.values():
                visit(v, depth + 1)
        elif isinstance(o, (list, tuple)):
            for v in o:
                visit(v, depth + 1)
        elif hasattr(o, "to_tuple"):  # transformers ModelOutput
            visit(o.to_tuple(), depth + 1)

    visit(obj, 0)
    return found


def _tally(tensors) -> TensorTally:
    floats = other = n = 0
    for t in tensors:
        n += 1
        if t.is_floating_point():
            floats += t.numel()
        else:
            other += t.numel() * t.element_size()
    return TensorTally(float_elements=floats, other_bytes=other, count=n)


def _module_tensors(model) -> list:
    """Parameters, buffers and plain tensor attributes (a mask kept as ``self.mask``), each once."""
    import torch

    if not isinstance(model, torch.nn.Module):
        return []
    tensors = [p for _, p in model.named_parameters()] + [b for _, b in model.named_buffers()]
    seen = {id(t) for t in tensors}
    for module in model.modules():
        for value in vars(module).values():
            if isinstance(value, torch.Tensor) and id(value) not in seen:
                seen.add(id(value))
                tensors.append(value)
    return tensors


@contextlib.contextmanager
def _isolated_torch_state() -> Iterator[None]:
    """Restore the CPU random state and default dtype that problem code may change (the caller may be
    the evaluator's trusted parent, whose own state must not depend on having computed a bound)."""
    import torch

    dtype = torch.get_default_dtype()
    try:
        with torch.random.fork_rng(devices=[]):
            yield
    finally:
        torch.set_default_dtype(dtype)


def _run(problem: Problem, device: str) -> tuple[TensorTally, TensorTally, TensorTally, dict[str, int]]:
    """Execute the problem's code and one forward pass on ``device``, counting FLOPs."""
    import torch
    from torch.utils.flop_counter import FlopCounterMode

    namespace: dict[str, Any] = {"__name__": f"kernelbench_roofline_{problem.key}", "__builtins__": __builtins__}
    sink = io.StringIO()  # problem code may print; keep our stdout clean (the CLI can emit JSON)
    with _isolated_torch_state(), contextlib.redirect_stdout(sink), torch.device(device), torch.no_grad():
        exec(compile(problem.code, f"<{problem.key} {problem.name}>", "exec"), namespace)
        for required in ("Model", "get_inputs", "get_init_inputs"):
            if required not in namespace:
                raise CostUnavailableError(f"{problem.key}: the code does not define {required}")
        model = namespace["Model"](*namespace["get_init_inputs"]())
        inputs = list(namespace["get_inputs"]())
        in_tensors = _tensors_in(inputs)
        param_tensors = _module_tensors(model)
        with FlopCounterMode(display=False) as counter:
            output = model(*inputs)
        out_tensors = _tensors_in(output)
    if sink.getvalue():
        log.debug("%s printed while counting its cost: %s", problem.key, sink.getvalue()[:500])
    counts = counter.get_flop_counts().get("Global", {})
    by_op = {str(op): int(n) for op, n in counts.items() if n}
    return _tally(in_tensors), _tally(out_tensors), _tally(param_tensors), by_op


def _declared_bytes(problem: Problem) -> int | None:
    """Bytes of inputs and parameters from a meta run of construction only, to size a CPU fallback."""
    import torch

    namespace: dict[str, Any] = {"__name__": f"kernelbench_roofline_{problem.key}", "__builtins__": __builtins__}
    try:
        with _isolated_torch_state(), contextlib.redirect_stdout(io.StringIO()), torch.device("meta"), \
                torch.no_grad():
            exec(compile(problem.code, problem.key, "exec"), namespace)
            model = namespace["Model"](*namespace["get_init_inputs"]())
            inputs = list(namespace["get_inputs"]())
        return sum(t.numel() * t.element_size() for t in _tensors_in(inputs) + _module_tensors(model))
    except Exception:  # construction itself fails on meta: nothing to size by
        return None


def _importable(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):  # a None entry in sys.modules: deliberately blocked
        return False


def _missing_requirements(problem: Problem) -> list[str]:
    return [r for r in problem.requirements if not _importable(r)]


def _short_error(e: BaseException, limit: int = 160) -> str:
    """First sentence of an exception, for one-line notes (PyTorch's messages run to paragraphs)."""
    text = str(e).strip().splitlines()[0] if str(e).strip() else ""
    cut = text.find(". ")
    if 0 < cut < limit:
        text = text[:cut + 1]
    elif len(text) > limit:
        text = text[:limit - 3] + "..."
    return f"{type(e).__name__}: {text}" if text else type(e).__name__


def count_cost(problem: Problem, allow_cpu_fallback: bool = True,
               cpu_fallback_max_bytes: int = CPU_FALLBACK_MAX_BYTES) -> CostRecord:
    """Count a problem's FLOPs and tensor sizes (no cache). Raises CostUnavailableError with the reason."""
    missing = _missing_requirements(problem)
    if missing:
        hint = " (pip install 'kernelbench[transformers]')" if "transformers" in missing else ""
        raise CostUnavailableError(
            f"{problem.key} ({problem.name}) needs {', '.join(missing)}, which is not installed{hint}")
    try:
        ins, outs, params, by_op = _run(problem, "meta")
        return CostRecord(problem.hash, ins, outs, params, tuple(sorted(by_op.items())), "meta")
    except ImportError as e:
        raise CostUnavailableError(f"{problem.key} ({problem.name}): {e}") from None
    except CostUnavailableError:
        raise
    except Exception as e:
        meta_error = _short_error(e)
    if not allow_cpu_fallback:
        raise CostUnavailableError(f"{problem.key} ({problem.name}) does not run on the meta device ({meta_error})")
    size = _declared_bytes(problem)
    if size is not None and size > cpu_fallback_max_bytes:
        raise CostUnavailableError(
            f"{problem.key} ({problem.name}) does not run on the meta device ({meta_error}) and a CPU run "
            f"would allocate {size / 1e9:.1f} GB of inputs and parameters (limit {cpu_fallback_max_bytes / 1e9:.1f} GB)")
    log.info("%s does not run on the meta device (%s); counting on a real CPU run", problem.key, meta_error)
    try:
        ins, outs, params, by_op = _run(problem, "cpu")
    except Exception as e:
        raise CostUnavailableError(
            f"{problem.key} ({problem.name}) runs neither on the meta device ({meta_error}) nor on the CPU "
            f"({_short_error(e)})") from None
    return CostRecord(problem.hash, ins, outs, params, tuple(sorted(by_op.items())), "cpu",
                      note=f"counted on a real CPU run: the meta device failed ({meta_error})")


# ---------------------------------------------------------------- cache
def default_cache_path() -> Path:
    """``$KERNELBENCH_CACHE_DIR/roofline_costs.json``, else under ``$XDG_CACHE_HOME`` or ``~/.cache``."""
    root = os.environ.get("KERNELBENCH_CACHE_DIR")
    if root:
        return Path(root).expanduser() / "roofline_costs.json"
    xdg = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(xdg).expanduser() / "kernelbench" / "roofline_costs.json"


class CostCache:
    """Costs by problem hash: an in-process dict over an optional JSON file shared between runs."""

    def __init__(self, path: str | Path | None = None):
        self.path = Path(path) if path is not None else None
        self._memory: dict[str, CostRecord] = {}
        #: The file's (mtime, size) when last read: a miss reads it again if another process wrote it since.
        self._file_seen: tuple[int, int] | None = None

    def _load_file(self) -> dict:
        if self.path is None or not self.path.exists():
            return {}
        try:
            import json

            data = json.loads(self.path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as e:
            log.warning("ignoring unreadable roofline cache %s: %s", self.path, e)
            return {}
        if not isinstance(data, dict) or data.get("version") != COST_MODEL_VERSION:
            return {}
        costs = data.get("costs")
        return costs if isinstance(costs, dict) else {}

    def get(self, problem_hash: str) -> CostRecord | None:
        if problem_hash in self._memory:
            return self._memory[problem_hash]
        self._read_file_if_changed()
        return self._memory.get(problem_hash)

    def _read_file_if_changed(self) -> None:
        """Costs another process wrote (one counting ahead of a batch, kernelbench.roofline.ahead) since the
        last read; cheap when the file has not changed."""
        if self.path is None:
            return
        try:
            st = self.path.stat()
        except OSError:
            return
        seen = (st.st_mtime_ns, st.st_size)
        if seen == self._file_seen:
            return
        self._file_seen = seen
        for h, d in self._load_file().items():
            try:
                self._memory.setdefault(h, CostRecord.from_json(d))
            except (KeyError, TypeError, ValueError):
                log.debug("skipping malformed roofline cache entry %s", h)

    def put(self, record: CostRecord) -> None:
        self._memory[record.problem_hash] = record
        if self.path is None:
            return
        try:
            with file_lock(self.path.with_suffix(".lock")):
                costs = self._load_file()
                costs[record.problem_hash] = record.to_json()
                atomic_write_json(self.path, {"version": COST_MODEL_VERSION, "costs": costs}, indent=None)
        except OSError as e:  # a read-only home must not stop the bound from being computed
            log.warning("cannot write roofline cache %s: %s", self.path, e)


_default_cache: CostCache | None = None


def default_cache() -> CostCache:
    global _default_cache
    if _default_cache is None or _default_cache.path != default_cache_path():
        _default_cache = CostCache(default_cache_path())
    return _default_cache


def problem_cost(problem: Problem, precision: str = "fp32", cache: CostCache | None = None,
                 use_cache: bool = True) -> ProblemCost:
    """The problem's cost at ``precision``, from the cache when its hash was counted before."""
    if precision not in ELEMENT_SIZE:
        raise ValueError(f"unknown precision {precision!r} (choose from {', '.join(PRECISIONS)})")
    cache = cache if cache is not None else (default_cache() if use_cache else CostCache(None))
    record = cache.get(problem.hash) if use_cache else None
    if record is None:
        record = count_cost(problem)
        cache.put(record)
    return ProblemCost.from_record(record, precision, problem.key)
