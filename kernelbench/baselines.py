"""Baseline time files: one per GPU type, the reference's runtime per problem.

Format (DESIGN.md)::

    {"level1": {"19_ReLU.py": {"mean": ms, "median": ms, "std": ms, "min": ms, "max": ms,
                               "num_trials": n, "hardware": "NVIDIA H100 80GB HBM3", "device": "cuda:0"}},
     "level2": {...},
     "modes": {"compile-default": {"level1": {...}}, ...},
     "environment": {"gpu_name": ..., "driver": ..., "cuda": ..., "torch": ..., "triton": ...,
                     "date": ..., "timing_protocol": ...}}

The top-level ``levelN`` blocks are PyTorch eager, so the file is also a valid KernelBench
baseline file; other modes live under ``modes``. KernelBench's own published files (levels only,
``mean`` only) load too. Measurements that failed are kept under ``failures`` (level, file, mode ->
error text), so a rerun knows what was tried and a reader knows why a time is missing.

Measuring (``kernelbench baselines``) goes through :func:`measure_problem`, which times the
reference with the evaluator's own protocol (``kernelbench.evaluation.parent.measure_reference``),
and :class:`BaselineFile`/:func:`measure_into`, which merge times into a file one at a time with
atomic writes, so a killed run resumes where it stopped.
"""

from __future__ import annotations

import datetime
import json
import logging
import math
import re
import shutil
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict, PrivateAttr, ValidationError

from kernelbench import TIMING_PROTOCOL_VERSION
from kernelbench.errors import BaselineError
from kernelbench.io_utils import atomic_write_json
from kernelbench.problems.identity import (
    ProblemSetIdentity,
    ProblemSetMismatchError,
    problem_ref,
    ref_of,
    set_of_problem,
)
from kernelbench.problems.model import Problem

if TYPE_CHECKING:
    from kernelbench.evaluation.compile_warmup import WarmupReport
    from kernelbench.evaluation.parent import DeviceSession, ReferenceTiming
    from kernelbench.evaluation.settings import EvalSettings
    from kernelbench.runners.modal_runner import ModalRunner

log = logging.getLogger(__name__)

EAGER = "eager"
BASELINE_MODES = ("eager", "compile-default", "compile-max-autotune", "compile-cudagraphs")
_LEVEL_KEY = re.compile(r"^level(\d+)$")


class BaselineEntry(BaseModel):
    """One problem's reference time in one mode, in milliseconds (KernelBench's field names)."""

    model_config = ConfigDict(extra="allow")

    mean: float
    median: float | None = None
    std: float | None = None
    min: float | None = None
    max: float | None = None
    num_trials: int | None = None
    hardware: str | None = None
    device: str | None = None
    #: Relative standard error of the median: how precise the headline number is.
    rse_median: float | None = None
    #: Seconds to start the worker and build (for compile modes: compile) the reference.
    setup_s: float | None = None
    #: Seconds the whole measurement took; summed, the time to produce a file.
    wall_s: float | None = None
    #: Compile modes: seconds of the first, compiling call (part of ``setup_s``), and Inductor's cache
    #: hits and misses during it (whether the compile warm-up's output was found).
    compile_s: float | None = None
    compile_cache: dict[str, int] | None = None
    # The environment the measurement ran in (never serialised: the file has one block for it).
    _environment: dict[str, Any] | None = PrivateAttr(default=None)

    @property
    def environment(self) -> dict[str, Any] | None:
        return self._environment

    @property
    def headline_ms(self) -> float:
        """Median where measured (our files), else the mean (KernelBench's files)."""
        return self.median if self.median is not None else self.mean


class BaselineEnvironment(BaseModel):
    model_config = ConfigDict(extra="allow")

    gpu_name: str | None = None
    driver: str | None = None
    cuda: str | None = None
    torch: str | None = None
    triton: str | None = None
    date: str | None = None
    timing_protocol: str | None = None
    precision: str | None = None


class Baseline:
    """Times for one mode of one baseline file, looked up by problem (file name, then id prefix)."""

    def __init__(self, levels: dict[int, dict[str, BaselineEntry]], mode: str = EAGER,
                 environment: BaselineEnvironment | None = None, path: Path | None = None,
                 problem_set: ProblemSetIdentity | None = None):
        self.levels = levels
        #: The problem set the times were measured on, when the file records it (ours do).
        self.problem_set = problem_set
        self.mode = mode
        self.environment = environment
        self.path = path

    @property
    def gpu_name(self) -> str | None:
        if self.environment and self.environment.gpu_name:
            return self.environment.gpu_name
        for entries in self.levels.values():
            for e in entries.values():
                if e.hardware:
                    return e.hardware
        return None

    def find(self, problem: Problem) -> BaselineEntry | None:
        """The entry named like the problem's file; never one that only shares its id prefix.

        Ids collide across problem sets (built-in ``4_Matmul_transposed_A`` and official
        ``4_Matrix_vector_multiplication_``), so matching by id would time one problem by another's
        reference.
        """
        return self.levels.get(problem.level, {}).get(problem.filename)

    def refs(self, level: int | None = None) -> list[str]:
        """``level<N>/<file>`` names of every problem the baseline has a time for."""
        return [problem_ref(lv, name) for lv, entries in sorted(self.levels.items())
                if level is None or lv == level for name in entries]

    def require(self, problem: Problem) -> BaselineEntry:
        entry = self.find(problem)
        if entry is None:
            where = self.path or "the baseline file"
            raise BaselineError(
                f"baseline {where} has no time for level {problem.level} problem {problem.problem_id} "
                f"({problem.filename}, mode {self.mode})"
            )
        return entry


def _parse_levels(block: dict, where: str) -> dict[int, dict[str, BaselineEntry]]:
    levels: dict[int, dict[str, BaselineEntry]] = {}
    for key, entries in block.items():
        m = _LEVEL_KEY.match(key)
        if not m:
            continue
        if not isinstance(entries, dict):
            raise BaselineError(f"{where}: {key} must map problem file names to timings")
        parsed = {}
        for name, entry in entries.items():
            if entry is None:  # KernelBench's scripts write null for a problem they failed to time
                continue
            try:
                parsed[name] = BaselineEntry.model_validate(entry)
            except ValidationError as e:
                first = e.errors()[0]
                raise BaselineError(
                    f"{where}: {key}/{name}: {'.'.join(map(str, first['loc']))} {first['msg']}"
                ) from None
        levels[int(m.group(1))] = parsed
    return levels


def parse_baseline(data: dict, mode: str = EAGER, where: str = "baseline") -> Baseline:
    if not isinstance(data, dict):
        raise BaselineError(f"{where}: expected a JSON object with level1, level2, ... keys")
    env = None
    if isinstance(data.get("environment"), dict):
        env = BaselineEnvironment.model_validate(data["environment"])
    if mode == EAGER:
        block = data
    else:
        modes = data.get("modes") or {}
        if mode not in modes:
            have = ", ".join([EAGER, *sorted(modes)])
            raise BaselineError(f"{where} has no {mode!r} baseline (modes present: {have})")
        block = modes[mode]
    levels = _parse_levels(block, where)
    if not levels:
        raise BaselineError(f"{where}: no level1/level2/... blocks for mode {mode!r}")
    pset = None
    if isinstance(data.get("problem_set"), dict):
        try:
            pset = ProblemSetIdentity.from_dict(data["problem_set"], where=f"{where}: problem_set")
        except ProblemSetMismatchError as e:
            raise BaselineError(str(e)) from None
    return Baseline(levels, mode=mode, environment=env, problem_set=pset)


def load_baseline(path: str | Path, mode: str = EAGER) -> Baseline:
    path = Path(path)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise BaselineError(f"baseline file {path} does not exist") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise BaselineError(f"baseline file {path} is not valid JSON: {e}") from None
    b = parse_baseline(data, mode=mode, where=str(path))
    b.path = path
    return b


def baseline_path_for_gpu(gpu_name: str, root: str | Path = "baselines") -> Path:
    """``baselines/<family>.json``, the file ``kernelbench analyze --gpu`` uses.

    Any spelling of a GPU gives its family's file, so a local A100 run (``NVIDIA A100-SXM4-80GB``),
    a Modal ``--gpu A100-80GB`` run and ``analyze --gpu A100`` all read and write ``A100.json``.
    """
    return Path(root) / f"{gpu_label(gpu_name)}.json"


def baselines_dir_for(set_name: str, root: str | Path = "baselines") -> Path:
    """Where a problem set's ``<GPU>.json`` files live: ``baselines/kernelbench/`` for the official set,
    ``baselines/`` for the built-in suite (and any other). One folder per set, so the board of one set
    never picks up the times of another's problems that share a file name's id."""
    from kernelbench.problems.identity import KERNELBENCH

    return Path(root) / KERNELBENCH if set_name == KERNELBENCH else Path(root)


def find_baseline_for_gpu(gpu_name: str, set_name: str, folder: str | Path = "baselines") -> Path:
    """The baseline file to score ``set_name``'s problems on this GPU, given a baselines ``folder``.

    ``folder`` may be the baselines root (``baselines``: the official set's file is then
    ``baselines/kernelbench/<GPU>.json``, the built-in suite's ``baselines/<GPU>.json``) or a set's own
    folder (``baselines/kernelbench``, or a folder of your own): the set's folder under it is used where it
    holds the file, else the folder itself. Whichever file is picked, consumers still check its recorded
    problem set and names against the problems they score, so a wrong pick is an error, never a score.
    """
    own = baseline_path_for_gpu(gpu_name, baselines_dir_for(set_name, folder))
    flat = baseline_path_for_gpu(gpu_name, folder)
    return own if own.is_file() or not flat.is_file() else flat


def check_modes(modes: Iterable[str]) -> list[str]:
    """The modes, in order and without repeats; an unknown one is a one-line error."""
    out: list[str] = []
    for m in modes:
        if m not in BASELINE_MODES:
            raise BaselineError(f"unknown baseline mode {m!r} (choose from {', '.join(BASELINE_MODES)})")
        if m not in out:
            out.append(m)
    if not out:
        raise BaselineError(f"no baseline modes given (choose from {', '.join(BASELINE_MODES)})")
    return out


def gpu_family(name: str | None) -> str | None:
    """``NVIDIA H100 80GB HBM3``, ``h100`` and KernelBench-style ``H100_together`` -> ``H100``."""
    from kernelbench.scoring import canonical_gpu  # scoring imports this module

    return canonical_gpu(name.replace("_", " ")) if name else None


_canonical = gpu_family


def one_line(exc: BaseException | str, limit: int = 600) -> str:
    """An error as one line for the file and the summary (tracebacks go to the log)."""
    if isinstance(exc, BaseException):
        text = " ".join(str(exc).split())
        name = type(exc).__name__.lstrip("_")
        text = f"{name}: {text}" if text else name
    else:
        text = " ".join(exc.split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


# ---------------------------------------------------------------------------- measuring one problem
class BaselineMeasureError(Exception):
    """Some modes of a problem could not be measured; ``entries`` keeps the modes that were."""

    def __init__(self, problem_key: str, entries: dict[str, BaselineEntry], failures: dict[str, str]):
        self.problem_key = problem_key
        self.entries = entries
        self.failures = failures
        detail = "; ".join(f"{mode}: {err}" for mode, err in failures.items())
        super().__init__(f"{problem_key}: {detail}")


def baseline_settings(timing_budget_s: float = 1.0, min_trials: int | None = None, max_trials: int | None = None,
                      compile_timeout_s: float | None = None, stage_timeout_s: float | None = None,
                      precision: str = "fp32", device: str | None = None) -> EvalSettings:
    """Evaluator settings for timing references alone (``None`` keeps the evaluator's default)."""
    from kernelbench.evaluation.settings import EvalSettings

    if timing_budget_s <= 0:
        raise BaselineError(f"timing budget must be positive, got {timing_budget_s:g} s")
    changes: dict[str, Any] = {"backend": "torch", "precision": precision, "timing_budget_s": timing_budget_s,
                               "device": device}
    if min_trials is not None:
        changes["min_timing_trials"] = min_trials
    if max_trials is not None:
        changes["max_timing_trials"] = max_trials
    if compile_timeout_s is not None:
        changes["compile_timeout_s"] = compile_timeout_s
    if stage_timeout_s is not None:
        changes["stage_timeout_s"] = stage_timeout_s
    try:
        s = EvalSettings(**changes)
    except ValueError as e:
        raise BaselineError(str(e)) from None
    if s.min_timing_trials < 1 or s.max_timing_trials < s.min_timing_trials:
        raise BaselineError(f"need 1 <= min trials <= max trials, got {s.min_timing_trials} and {s.max_timing_trials}")
    return s


def entry_from_timing(timing: ReferenceTiming, wall_s: float | None = None) -> BaselineEntry:
    """A file entry from one reference measurement; the environment rides along unserialised."""
    t = timing.timing
    env = timing.environment
    entry = BaselineEntry(
        mean=t.mean_ms, median=t.median_ms, std=t.std_ms, min=t.min_ms, max=t.max_ms, num_trials=t.n,
        hardware=env.gpu_name, device=env.device,
        rse_median=t.rse_median, setup_s=timing.setup_s, wall_s=wall_s, compile_s=timing.compile_s,
        compile_cache=timing.compile_cache,
    )
    entry._environment = env.model_dump(mode="json")
    return entry


def _missing_packages(problem: Problem) -> list[str]:
    import importlib.util

    return [r for r in problem.requirements if importlib.util.find_spec(r) is None]


def measure_problem(problem: Problem, modes: Sequence[str], settings: EvalSettings | None = None, *,
                    device: str | None = None, session: DeviceSession | None = None,
                    start_next: bool = False) -> dict[str, BaselineEntry]:
    """Time one problem's reference in each mode with the evaluator's timing protocol.

    Runs on ``device``, else ``settings.device``, else the first visible GPU, else the CPU (as
    the evaluator does; callers that must have a GPU check before). Every mode is tried; if any
    failed, :class:`BaselineMeasureError` carries the ones that worked and an error per failed
    mode. Pass a ``session`` to reuse workers across calls (``start_next`` then starts the next
    call's worker while this one runs).
    """
    if problem.reduced_size:
        raise BaselineError(f"problem {problem.name} is at its reduced CPU size; a baseline times the "
                            f"full-size problem only")
    from kernelbench.evaluation.environment import gpu_compute_capability_from_smi
    from kernelbench.evaluation.parent import DeviceSession, measure_reference, visible_devices
    from kernelbench.evaluation.settings import EvalSettings

    modes = check_modes(modes)
    s = settings or EvalSettings(backend="torch")
    missing = _missing_packages(problem)
    if missing:
        err = (f"needs {', '.join(missing)}, which is not installed here "
               f"(pip install {' '.join(missing)})")
        raise BaselineMeasureError(problem.key, {}, {m: err for m in modes})
    own = session is None
    if session is None:
        dev = device or s.device or visible_devices()[0]
        # One worker started ahead when another mode follows; none to throw away after the last.
        session = DeviceSession(dev, gpu_compute_capability_from_smi() if dev.startswith("cuda") else None,
                                spares=1 if len(modes) > 1 else 0)
    entries: dict[str, BaselineEntry] = {}
    failures: dict[str, str] = {}
    try:
        for i, mode in enumerate(modes):
            t0 = time.monotonic()
            try:
                timing = measure_reference(session, problem, mode, s, allow_cpu=True,
                                           start_next=start_next or i < len(modes) - 1)
            except Exception as e:  # the reference failed in this mode: record it, try the next mode
                failures[mode] = one_line(e)
                log.warning("%s %s: %s", problem.key, mode, failures[mode])
                log.debug("%s %s failed; worker traceback:\n%s", problem.key, mode, getattr(e, "traceback", None),
                          exc_info=True)
                continue
            entries[mode] = entry_from_timing(timing, time.monotonic() - t0)
    finally:
        if own:
            session.close()
    if failures:
        raise BaselineMeasureError(problem.key, entries, failures)
    return entries


#: Reference workers started ahead. Starting one (Python, torch, CUDA) takes 8-11 s on the lent H100,
#: and an eager measurement about 1 s: with two kept waiting, 245 of the 285 s that eager took for 50
#: problems (session 6) was waiting for the next worker. Each one waiting holds a CUDA context
#: (about 0.5 GB of GPU memory); ``spares`` lowers it on a small GPU.
REFERENCE_SPARES = 6

MeasureFn = Callable[[Problem, Sequence[str], "EvalSettings"], dict[str, BaselineEntry]]


class LocalMeasurer:
    """:func:`measure_problem` on one local device, keeping one session (and a worker started ahead)."""

    def __init__(self, device: str, spares: int | None = None, preload_compiler: bool = False):
        """``spares``: workers started ahead (``None``: :data:`REFERENCE_SPARES`); ``preload_compiler``:
        they import torch.compile's machinery while they wait (for compile modes)."""
        from kernelbench.evaluation.environment import gpu_compute_capability_from_smi
        from kernelbench.evaluation.parent import DeviceSession
        from kernelbench.evaluation.worker import PRELOAD_COMPILER_ENV

        spares = REFERENCE_SPARES if spares is None else spares
        if spares < 0:
            raise BaselineError(f"workers started ahead must be 0 or more, got {spares}")
        self.device = device
        self.spares = spares
        self.session = DeviceSession(device, gpu_compute_capability_from_smi() if device.startswith("cuda") else None,
                                     spares=spares,
                                     reference_env={PRELOAD_COMPILER_ENV: "1"} if preload_compiler else None)
        self._left: int | None = None

    def expect(self, calls: int) -> None:
        """How many calls will follow, so no worker is started ahead for nothing after the last."""
        self._left = calls

    def __call__(self, problem: Problem, modes: Sequence[str], settings: EvalSettings) -> dict[str, BaselineEntry]:
        if self._left is not None:
            self._left -= 1
        more = self._left is None or self._left > 0
        return measure_problem(problem, modes, settings, session=self.session, start_next=more)

    def close(self) -> None:
        self.session.close()

    def __enter__(self) -> LocalMeasurer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


# ---------------------------------------------------------------------------- local GPU
def local_gpu_names() -> list[str]:
    """Local GPU names from nvidia-smi, in index order (the parent must not create a CUDA context)."""
    exe = shutil.which("nvidia-smi")
    if exe is None:
        return []
    try:
        out = subprocess.run([exe, "--query-gpu=name", "--format=csv,noheader"], capture_output=True, text=True,
                             timeout=30, check=False)
    except (OSError, subprocess.SubprocessError):
        return []
    if out.returncode != 0:
        return []
    return [line.strip() for line in out.stdout.splitlines() if line.strip()]


def gpu_label(name: str) -> str:
    """The file name stem for a GPU: its family (``NVIDIA H100 80GB HBM3`` -> ``H100``)."""
    label = _canonical(name) or name
    return re.sub(r"[^A-Za-z0-9._-]+", "_", label).strip("_") or "gpu"


# ---------------------------------------------------------------------------- the file being written
def _today() -> str:
    return datetime.datetime.now(datetime.timezone.utc).date().isoformat()


def _level_key(level: int) -> str:
    return f"level{level}"


def _file_order(name: str) -> tuple[int, str]:
    head = name.split("_", 1)[0]
    return (int(head) if head.isdigit() else 10**9, name)


def _sorted_levels(block: dict) -> dict:
    out: dict[str, Any] = {}
    levels = sorted((k for k in block if _LEVEL_KEY.match(k)), key=lambda k: int(k[5:]))
    for k in levels:
        value = block[k]
        out[k] = dict(sorted(value.items(), key=lambda kv: _file_order(kv[0]))) if isinstance(value, dict) else value
    for k, v in block.items():
        if k not in out:
            out[k] = v
    return out


_ENV_KEYS = ("gpu_name", "gpu_arch", "driver", "cuda", "torch", "triton", "python", "date", "timing_protocol",
             "precision")
_SOFTWARE_KEYS = ("driver", "cuda", "torch", "triton")


class BaselineFile:
    """A baseline file being measured into: entries and failures merged in, written after each one.

    Every write replaces the whole file atomically, so a killed run leaves the last complete
    state. A file is only extended by measurements from the same GPU type, timing protocol and
    precision; anything else is refused unless forced (or the file is restarted).
    """

    def __init__(self, path: str | Path, data: dict | None = None, *, gpu_name: str | None = None,
                 force: bool = False):
        self.path = Path(path)
        self.data: dict[str, Any] = data if data is not None else {}
        #: The GPU type the file is for, until its first time says so itself.
        self.gpu = gpu_family(gpu_name)
        self.force = force
        self.notes: list[str] = []

    # -- opening ------------------------------------------------------------------------------
    @classmethod
    def open(cls, path: str | Path, gpu_name: str | None = None, *, precision: str = "fp32",
             restart: bool = False, force: bool = False) -> BaselineFile:
        """Open ``path`` to extend it, checking it holds times comparable with what will be measured.

        ``gpu_name`` is the GPU about to be measured (any spelling: ``H100``, the driver's name);
        ``restart`` ignores what is there (it is replaced at the first write); ``force`` mixes anyway.
        """
        path = Path(path)
        if restart or not path.exists():
            return cls(path, {}, gpu_name=gpu_name, force=force)
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
            raise BaselineError(f"cannot resume from {path}: not valid JSON ({e}); move it away or pass --restart") \
                from None
        if not isinstance(data, dict):
            raise BaselineError(f"cannot resume from {path}: not a baseline file; move it away or pass --restart")
        f = cls(path, data, gpu_name=gpu_name, force=force)
        problems = f._compatibility_problems(gpu_name, precision)
        if problems and not force:
            raise BaselineError(f"{path} {problems[0]}: pass --restart to start the file over, or --force to mix")
        for p in problems:
            f.notes.append(f"{path} {p} (mixed anyway: --force)")
            log.warning("%s %s (mixing anyway: forced)", path, p)
        return f

    def _compatibility_problems(self, gpu_name: str | None, precision: str) -> list[str]:
        out = []
        env = self.environment
        has_entries = self.count() > 0
        file_gpu = _canonical(env.get("gpu_name")) or _canonical(self._hardware_in_entries())
        if gpu_name and file_gpu and file_gpu != _canonical(gpu_name):
            out.append(f"holds {file_gpu} times; measuring {_canonical(gpu_name)} into it would mix GPUs")
        protocol = env.get("timing_protocol")
        if has_entries and protocol != TIMING_PROTOCOL_VERSION:
            what = f"timing protocol {protocol!r}" if protocol else "no timing protocol (not measured by kernelbench)"
            out.append(f"was measured with {what}, not {TIMING_PROTOCOL_VERSION!r}: the times would not be comparable")
        file_precision = env.get("precision")
        if has_entries and file_precision and file_precision != precision:
            out.append(f"holds {file_precision} times; measuring {precision} into it would mix precisions")
        return out

    def _hardware_in_entries(self) -> str | None:
        for block in self._level_blocks():
            for entries in block.values():
                for e in entries.values():
                    if isinstance(e, dict) and e.get("hardware"):
                        return e["hardware"]
        return None

    # -- reading ------------------------------------------------------------------------------
    @property
    def environment(self) -> dict[str, Any]:
        env = self.data.get("environment")
        return env if isinstance(env, dict) else {}

    def _mode_block(self, mode: str, create: bool = False) -> dict:
        if mode == EAGER:
            return self.data
        modes = self.data.setdefault("modes", {}) if create else (self.data.get("modes") or {})
        return modes.setdefault(mode, {}) if create else (modes.get(mode) or {})

    def _level_blocks(self) -> list[dict[str, dict]]:
        out = []
        for mode in [EAGER, *(self.data.get("modes") or {})]:
            block = self._mode_block(mode)
            out.append({k: v for k, v in block.items() if _LEVEL_KEY.match(k) and isinstance(v, dict)})
        return out

    def entry(self, level: int, filename: str, mode: str = EAGER) -> BaselineEntry | None:
        raw = (self._mode_block(mode).get(_level_key(level)) or {}).get(filename)
        if raw is None:
            return None
        try:
            return BaselineEntry.model_validate(raw)
        except ValidationError:
            return None

    def has(self, problem: Problem, mode: str = EAGER) -> bool:
        return self.entry(problem.level, problem.filename, mode) is not None

    def failure(self, problem: Problem, mode: str = EAGER) -> str | None:
        per_file = ((self.data.get("failures") or {}).get(_level_key(problem.level)) or {}).get(problem.filename) or {}
        return per_file.get(mode)

    def count(self, mode: str | None = None) -> int:
        modes = [mode] if mode else [EAGER, *(self.data.get("modes") or {})]
        n = 0
        for m in modes:
            block = self._mode_block(m)
            n += sum(len(v) for k, v in block.items() if _LEVEL_KEY.match(k) and isinstance(v, dict))
        return n

    # -- writing ------------------------------------------------------------------------------
    def check_environment(self, env: dict[str, Any]) -> None:
        """Refuse a measurement from another GPU type or timing protocol than the file's."""
        if self.force:
            return
        file_gpu = (_canonical(self.environment.get("gpu_name")) or _canonical(self._hardware_in_entries())
                    or self.gpu)
        new_gpu = _canonical(env.get("gpu_name")) or ("cpu" if env.get("device") == "cpu" else None)
        if file_gpu and new_gpu and file_gpu != new_gpu:
            raise BaselineError(f"measured on {new_gpu}, but {self.path} holds {file_gpu} times; not written "
                                "(measure into another file, or force)")
        protocol = env.get("timing_protocol")
        if protocol and self.count() and self.environment.get("timing_protocol") not in (None, protocol):
            raise BaselineError(f"measured with timing protocol {protocol!r}, but {self.path} holds "
                                f"{self.environment.get('timing_protocol')!r} times; not written")

    def _merge_environment(self, env: dict[str, Any], precision: str | None) -> None:
        old = self.environment
        new = {k: env.get(k) for k in _ENV_KEYS if env.get(k) is not None}
        if not new.get("gpu_name") and env.get("device") == "cpu":
            new["gpu_name"] = "cpu"
        new.setdefault("timing_protocol", TIMING_PROTOCOL_VERSION)
        new["date"] = _today()
        if precision:
            new["precision"] = precision
        changed = [f"{k} {old[k]} -> {new[k]}" for k in _SOFTWARE_KEYS
                   if old.get(k) and new.get(k) and old[k] != new[k]]
        if changed:
            note = f"{self.path}: software changed between measurements ({', '.join(changed)})"
            if note not in self.notes:
                self.notes.append(note)
                log.warning("%s", note)
        merged = {**old, **new}
        self.data["environment"] = {k: merged[k] for k in [*_ENV_KEYS, *sorted(set(merged) - set(_ENV_KEYS))]
                                    if k in merged}

    def put(self, problem: Problem, mode: str, entry: BaselineEntry, environment: dict[str, Any] | None = None,
            precision: str | None = None, save: bool = True) -> None:
        """Record a time (clearing an earlier failure for it) and write the file."""
        env = environment if environment is not None else (entry.environment or {})
        if env:
            self.check_environment(env)
        self._record_problem(problem)
        block = self._mode_block(mode, create=True).setdefault(_level_key(problem.level), {})
        block[problem.filename] = entry.model_dump(mode="json", exclude_none=True)
        self._clear_failure(problem, mode)
        if env:
            self._merge_environment(env, precision)
        if save:
            self.save()

    def _record_problem(self, problem: Problem) -> None:
        """Note the problem's set and hash; refuse to put two problem sets' times in one file."""
        name, revision = set_of_problem(problem)
        block = self.data.setdefault("problem_set", {"name": name, "revision": revision, "hashes": {}})
        if (block.get("name"), block.get("revision")) != (name, revision) and not self.force:
            raise BaselineError(
                f"{self.path} holds times for problem set {block.get('name')}@{block.get('revision')}; "
                f"{problem.filename} is from {name}@{revision}: use another file (or --restart)")
        block.setdefault("hashes", {})[ref_of(problem)] = problem.hash

    def put_failure(self, problem: Problem, mode: str, error: str, save: bool = True) -> None:
        failures = self.data.setdefault("failures", {})
        failures.setdefault(_level_key(problem.level), {}).setdefault(problem.filename, {})[mode] = one_line(error)
        if save:
            self.save()

    def _clear_failure(self, problem: Problem, mode: str) -> None:
        failures = self.data.get("failures") or {}
        level = failures.get(_level_key(problem.level)) or {}
        per_file = level.get(problem.filename) or {}
        if mode in per_file:
            del per_file[mode]
            if not per_file:
                del level[problem.filename]
            if not level:
                del failures[_level_key(problem.level)]
            if not failures:
                del self.data["failures"]

    def to_dict(self) -> dict[str, Any]:
        """Levels in numeric order, problems by id, then modes, failures and the environment."""
        top = {k: v for k, v in self.data.items() if k not in ("modes", "failures", "environment", "problem_set")}
        out = _sorted_levels(top)
        if self.data.get("modes"):
            out["modes"] = {m: _sorted_levels(self.data["modes"][m])
                            for m in sorted(self.data["modes"], key=lambda m: (BASELINE_MODES.index(m)
                                                                                if m in BASELINE_MODES else 99, m))}
        if self.data.get("failures"):
            out["failures"] = _sorted_levels(self.data["failures"])
        if "environment" in self.data:
            out["environment"] = self.data["environment"]
        if "problem_set" in self.data:
            ps = self.data["problem_set"]
            out["problem_set"] = {**ps, "hashes": dict(sorted((ps.get("hashes") or {}).items()))}
        return out

    def save(self) -> None:
        atomic_write_json(self.path, self.to_dict())


# ---------------------------------------------------------------------------- a measuring run
Status = Literal["measured", "reused", "failed", "skipped", "pending"]


@dataclass(frozen=True)
class BaselineOutcome:
    """What happened to one (problem, mode) in a run."""

    level: int
    problem_id: int
    filename: str
    mode: str
    status: Status
    median_ms: float | None = None
    wall_s: float | None = None
    error: str | None = None


@dataclass
class BaselineRunReport:
    """The result of one ``measure_into`` call: per (problem, mode) outcomes, and why it stopped."""

    path: Path
    outcomes: list[BaselineOutcome] = field(default_factory=list)
    wall_s: float = 0.0
    stopped: str | None = None
    notes: list[str] = field(default_factory=list)

    def count(self, status: Status, mode: str | None = None) -> int:
        return sum(1 for o in self.outcomes if o.status == status and (mode is None or o.mode == mode))

    @property
    def failures(self) -> list[BaselineOutcome]:
        return [o for o in self.outcomes if o.status == "failed"]

    @property
    def complete(self) -> bool:
        """Every requested (problem, mode) has a time in the file."""
        return all(o.status in ("measured", "reused") for o in self.outcomes)

    def summary_rows(self) -> list[list[Any]]:
        """Per level and mode: measured now, already there, failed, not tried; for the CLI's table."""
        keys = sorted({(o.level, o.mode) for o in self.outcomes},
                      key=lambda k: (k[0], BASELINE_MODES.index(k[1]) if k[1] in BASELINE_MODES else 99))
        rows = []
        for level, mode in keys:
            group = [o for o in self.outcomes if o.level == level and o.mode == mode]
            walls = [o.wall_s for o in group if o.status == "measured" and o.wall_s is not None]
            rows.append([level, mode, sum(o.status == "measured" for o in group),
                         sum(o.status == "reused" for o in group), sum(o.status == "failed" for o in group),
                         sum(o.status in ("skipped", "pending") for o in group), f"{sum(walls):.1f}"])
        return rows


def plan(file: BaselineFile, problems: Iterable[Problem], modes: Sequence[str],
         retry_failed: bool = True) -> tuple[list[tuple[Problem, str]], list[BaselineOutcome]]:
    """What to measure (mode by mode, so a run cut short has whole modes done) and what is already settled."""
    todo: list[tuple[Problem, str]] = []
    settled: list[BaselineOutcome] = []
    problems = list(problems)
    for mode in check_modes(modes):
        for p in problems:
            entry = file.entry(p.level, p.filename, mode)
            if entry is not None:
                settled.append(BaselineOutcome(p.level, p.problem_id, p.filename, mode, "reused", entry.headline_ms))
            elif not retry_failed and file.failure(p, mode):
                settled.append(BaselineOutcome(p.level, p.problem_id, p.filename, mode, "skipped",
                                               error=f"failed before: {file.failure(p, mode)}"))
            else:
                todo.append((p, mode))
    return todo, settled


def warm_compile_caches(file: BaselineFile, problems: Iterable[Problem], modes: Sequence[str],
                        settings: EvalSettings, device: str, jobs: int | None = None, *, retry_failed: bool = True,
                        deadline_s: float | None = None, progress: bool = True) -> WarmupReport:
    """Compile, in parallel, the references that :func:`measure_into` is about to time in torch.compile modes.

    Only for GPU runs (on the CPU there is no GPU to keep quiet and nothing worth the processes).
    See :mod:`kernelbench.evaluation.compile_warmup` for what carries over to the timed runs.
    """
    from kernelbench.evaluation.compile_warmup import WarmupReport, warm_up

    if not device.startswith("cuda"):
        return WarmupReport()
    todo, _ = plan(file, problems, modes, retry_failed)
    return warm_up([(p, m) for p, m in todo if not _missing_packages(p)], settings, device, jobs,
                   deadline_s=deadline_s, progress=progress)


def measure_into(file: BaselineFile, problems: Iterable[Problem], modes: Sequence[str], settings: EvalSettings,
                 measure: MeasureFn, *, retry_failed: bool = True, deadline_s: float | None = None,
                 progress: bool = True) -> BaselineRunReport:
    """Measure every (problem, mode) the file lacks and write each result as it comes.

    ``measure`` is :func:`measure_problem` or anything with its signature (a
    :class:`LocalMeasurer`; a stand-in in tests); if it has an ``expect(n)`` method, it is told
    how many calls follow. A failed measurement is recorded in the file and
    the run goes on. ``deadline_s`` stops starting new measurements after that many seconds; what
    is left is reported as pending and a rerun picks it up.
    """
    from tqdm import tqdm

    started = time.monotonic()
    todo, settled = plan(file, problems, modes, retry_failed)
    report = BaselineRunReport(path=file.path, outcomes=list(settled), notes=file.notes)
    expect = getattr(measure, "expect", None)
    if callable(expect):
        expect(len(todo))
    bar = tqdm(total=len(todo), desc=f"baselines -> {file.path.name}", unit="time", file=sys.stderr,
               disable=not progress or not todo)
    try:
        for i, (problem, mode) in enumerate(todo):
            if deadline_s is not None and time.monotonic() - started >= deadline_s:
                report.stopped = f"deadline of {deadline_s:g} s reached with {len(todo) - i} measurement(s) left"
                report.outcomes += [BaselineOutcome(p.level, p.problem_id, p.filename, m, "pending")
                                    for p, m in todo[i:]]
                break
            bar.set_postfix_str(f"{problem.key} {mode}")
            report.outcomes.append(_measure_one(file, problem, mode, settings, measure))
            bar.update(1)
    finally:
        bar.close()
        report.wall_s = time.monotonic() - started
    return report


def _measure_one(file: BaselineFile, problem: Problem, mode: str, settings: EvalSettings,
                 measure: MeasureFn) -> BaselineOutcome:
    t0 = time.monotonic()
    base = dict(level=problem.level, problem_id=problem.problem_id, filename=problem.filename, mode=mode)
    try:
        entries = measure(problem, [mode], settings)
        error = None if mode in entries else "the measurement returned no time for this mode"
    except BaselineMeasureError as e:
        entries = e.entries
        error = None if mode in entries else (e.failures.get(mode) or str(e))
    except BaselineError:
        raise
    except Exception as e:  # a bug or a broken worker start: recorded, the run goes on
        log.debug("measuring %s %s raised", problem.key, mode, exc_info=True)
        entries, error = {}, one_line(e)
    wall = time.monotonic() - t0
    if error is None:
        entry = entries[mode]
        if entry.wall_s is None:
            entry.wall_s = wall
        try:
            file.put(problem, mode, entry, precision=settings.precision)
        except BaselineError as e:  # measured on another GPU type than the file's: not written
            file.put_failure(problem, mode, str(e))
            return BaselineOutcome(**base, status="failed", wall_s=wall, error=str(e))
        return BaselineOutcome(**base, status="measured", median_ms=entry.headline_ms, wall_s=entry.wall_s)
    file.put_failure(problem, mode, error)
    return BaselineOutcome(**base, status="failed", wall_s=wall, error=one_line(error))


def measure_into_via_modal(file: BaselineFile, problems: Iterable[Problem], modes: Sequence[str],
                           settings: EvalSettings, runner: ModalRunner, *, retry_failed: bool = True,
                           progress: bool = True) -> BaselineRunReport:
    """As :func:`measure_into`, with the measurements fanned out to Modal containers of one GPU type.

    Each container measures one problem in the modes it lacks; results are merged as they arrive.
    """
    from kernelbench.errors import KernelBenchError
    from kernelbench.runners.modal_runner import check_runnable_on_modal

    started = time.monotonic()
    todo, settled = plan(file, problems, modes, retry_failed)
    report = BaselineRunReport(path=file.path, outcomes=list(settled), notes=file.notes)
    by_problem: dict[tuple[int, int], tuple[Problem, list[str]]] = {}
    for p, m in todo:
        try:
            check_runnable_on_modal([p])  # level 4 needs packages the image lacks: recorded, not fatal
        except KernelBenchError as e:
            file.put_failure(p, m, str(e))
            report.outcomes.append(BaselineOutcome(p.level, p.problem_id, p.filename, m, "failed", error=one_line(str(e))))
            continue
        by_problem.setdefault((p.level, p.problem_id), (p, []))[1].append(m)
    groups: dict[tuple[str, ...], list[Problem]] = {}
    for p, ms in by_problem.values():
        groups.setdefault(tuple(ms), []).append(p)

    for group_modes, group in groups.items():
        answered: set[int] = set()

        def on_result(index: int, out: dict[str, Any], group=group, group_modes=group_modes,
                      answered=answered) -> None:
            answered.add(index)
            report.outcomes.extend(_merge_remote(file, group[index], group_modes, out, settings.precision))

        runner.measure_baselines(group, list(group_modes), settings, on_result=on_result, progress=progress)
        for i, p in enumerate(group):
            if i not in answered:
                for m in group_modes:
                    err = "Modal could not run this problem"
                    file.put_failure(p, m, err)
                    report.outcomes.append(BaselineOutcome(p.level, p.problem_id, p.filename, m, "failed", error=err))
    report.wall_s = time.monotonic() - started
    return report


def _merge_remote(file: BaselineFile, problem: Problem, modes: Sequence[str], out: dict[str, Any],
                  precision: str) -> list[BaselineOutcome]:
    outcomes = []
    env = out.get("environment") or {}
    for mode in modes:
        base = dict(level=problem.level, problem_id=problem.problem_id, filename=problem.filename, mode=mode)
        raw = (out.get("entries") or {}).get(mode)
        error = (out.get("failures") or {}).get(mode) or out.get("error") or "no time came back for this mode"
        if raw is not None:
            try:
                entry = BaselineEntry.model_validate(raw)
                file.put(problem, mode, entry, environment=env, precision=precision)
                outcomes.append(BaselineOutcome(**base, status="measured", median_ms=entry.headline_ms,
                                                wall_s=entry.wall_s))
                continue
            except ValidationError as e:
                error = f"malformed time from Modal: {e.errors()[0]['msg']}"
            except BaselineError as e:
                error = str(e)
        file.put_failure(problem, mode, error)
        outcomes.append(BaselineOutcome(**base, status="failed", error=one_line(error)))
    return outcomes


# ---------------------------------------------------------------------------- comparing two files
@dataclass(frozen=True)
class ProblemRatio:
    level: int
    filename: str
    first_ms: float
    second_ms: float

    @property
    def ratio(self) -> float:
        """second / first."""
        return self.second_ms / self.first_ms

    @property
    def spread(self) -> float:
        """max / min of the two: 1.0 is perfect agreement, whichever run was faster."""
        return max(self.ratio, 1.0 / self.ratio)


@dataclass(frozen=True)
class BaselineAgreement:
    """How far two independent measurements of the same problems agree."""

    ratios: tuple[ProblemRatio, ...]
    only_in_one: tuple[str, ...] = ()

    @property
    def n(self) -> int:
        return len(self.ratios)

    @property
    def median_ratio(self) -> float | None:
        return statistics.median(r.ratio for r in self.ratios) if self.ratios else None

    @property
    def median_spread(self) -> float | None:
        return statistics.median(r.spread for r in self.ratios) if self.ratios else None

    @property
    def worst(self) -> ProblemRatio | None:
        return max(self.ratios, key=lambda r: r.spread) if self.ratios else None

    def within(self, limit: float) -> int:
        """Problems whose two runs differ by at most a factor of ``limit`` (1.02: within 2%)."""
        return sum(r.spread <= limit for r in self.ratios)

    def by_level(self) -> dict[int, BaselineAgreement]:
        """The same comparison, one per level (problems named in one file only stay with their level)."""
        out: dict[int, BaselineAgreement] = {}
        for level in sorted({r.level for r in self.ratios} | {int(x.split("/", 1)[0][5:]) for x in self.only_in_one}):
            out[level] = BaselineAgreement(tuple(r for r in self.ratios if r.level == level),
                                           tuple(x for x in self.only_in_one if x.startswith(f"level{level}/")))
        return out

    def to_dict(self) -> dict[str, Any]:
        worst = self.worst
        return {"n": self.n, "median_ratio": self.median_ratio, "median_spread": self.median_spread,
                "worst": None if worst is None else {"level": worst.level, "problem": worst.filename,
                                                     "first_ms": worst.first_ms, "second_ms": worst.second_ms,
                                                     "ratio": worst.ratio, "spread": worst.spread},
                "only_in_one": list(self.only_in_one)}


def compare_baselines(first: Baseline, second: Baseline) -> BaselineAgreement:
    """Per-problem ratios of the headline times of two baselines (same mode), matched by level and file.

    Two files timed under different protocols are refused: their ratio would measure the protocol change,
    not how well two runs agree."""
    pa, pb = (b.environment.timing_protocol if b.environment else None for b in (first, second))
    if pa and pb and pa != pb:
        raise BaselineError(f"the two baselines were timed with different protocols ({pa!r} and {pb!r}); "
                            "measure both again to compare them")
    ratios = []
    only = []
    for level in sorted(set(first.levels) | set(second.levels)):
        a, b = first.levels.get(level, {}), second.levels.get(level, {})
        for name in sorted(set(a) | set(b), key=_file_order):
            if name in a and name in b:
                x, y = a[name].headline_ms, b[name].headline_ms
                if x > 0 and y > 0 and math.isfinite(x) and math.isfinite(y):
                    ratios.append(ProblemRatio(level, name, x, y))
                    continue
            only.append(f"level{level}/{name}")
    return BaselineAgreement(tuple(ratios), tuple(only))
