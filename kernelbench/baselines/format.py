"""The baseline file: its model, and reading it (ours and the files KernelBench publishes).

Format (docs/baselines.md)::

    {"level1": {"19_ReLU.py": {"mean": ms, "median": ms, "std": ms, "min": ms, "max": ms,
                               "num_trials": n, "hardware": "NVIDIA H100 80GB HBM3", "device": "cuda:0"}},
     "level2": {...},
     "modes": {"compile-default": {"level1": {...}}, ...},
     "failures": {"level1": {"19_ReLU.py": {"<mode>": "error text"}}},
     "environment": {"gpu_name": ..., "driver": ..., "cuda": ..., "torch": ..., "triton": ...,
                     "date": ..., "timing_protocol": ...},
     "problem_set": {"name": ..., "revision": ..., "hashes": {"level1/19_ReLU.py": ...}}}

The top-level ``levelN`` blocks are PyTorch eager, so the file is also a valid KernelBench baseline
file; other modes live under ``modes``. KernelBench's own published files (levels only, ``mean`` only)
load too. Writing is :mod:`kernelbench.baselines.writer`'s job, and only its.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, PrivateAttr, ValidationError

from kernelbench.errors import BaselineError
from kernelbench.io_utils import read_json
from kernelbench.problems.identity import ProblemSetIdentity, ProblemSetMismatchError, problem_ref
from kernelbench.problems.model import Problem

EAGER = "eager"
BASELINE_MODES = ("eager", "compile-default", "compile-max-autotune", "compile-cudagraphs")
LEVEL_KEY = re.compile(r"^level(\d+)$")


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
        m = LEVEL_KEY.match(key)
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
    data = read_json(path, BaselineError, "baseline file ")
    b = parse_baseline(data, mode=mode, where=str(path))
    b.path = path
    return b


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


def one_line(exc: BaseException | str, limit: int = 600) -> str:
    """An error as one line for the file and the summary (tracebacks go to the log)."""
    if isinstance(exc, BaseException):
        text = " ".join(str(exc).split())
        name = type(exc).__name__.lstrip("_")
        text = f"{name}: {text}" if text else name
    else:
        text = " ".join(exc.split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


# ---------------------------------------------------------------------------------------------- order
def level_key(level: int) -> str:
    return f"level{level}"


def file_order(name: str) -> tuple[int, str]:
    """Problem files by id, then name (``2_x.py`` before ``10_x.py``)."""
    head = name.split("_", 1)[0]
    return (int(head) if head.isdigit() else 10**9, name)


def ref_order(ref: str) -> tuple[int, int, str]:
    """``level<N>/<file>`` names by level, then as :func:`file_order`."""
    level, name = ref.split("/", 1)
    return (int(level[5:]), *file_order(name))


def mode_order(mode: str) -> tuple[int, str]:
    return (BASELINE_MODES.index(mode) if mode in BASELINE_MODES else 99, mode)


def sorted_levels(block: dict) -> dict:
    """``levelN`` keys in numeric order, each level's files by id; other keys after them, as they were."""
    out: dict[str, Any] = {}
    levels = sorted((k for k in block if LEVEL_KEY.match(k)), key=lambda k: int(k[5:]))
    for k in levels:
        value = block[k]
        out[k] = dict(sorted(value.items(), key=lambda kv: file_order(kv[0]))) if isinstance(value, dict) else value
    for k, v in block.items():
        if k not in out:
            out[k] = v
    return out
