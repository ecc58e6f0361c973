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
``mean`` only) load too.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from pydantic import BaseModel, ConfigDict, ValidationError

from kernelbench.errors import BaselineError
from kernelbench.problems.model import Problem

EAGER = "eager"
BASELINE_MODES = ("eager", "compile-default", "compile-max-autotune", "compile-cudagraphs")
_LEVEL_KEY = re.compile(r"^level(\d+)$")


class BaselineEntry(BaseModel):
    model_config = ConfigDict(extra="allow")

    mean: float
    median: float | None = None
    std: float | None = None
    min: float | None = None
    max: float | None = None
    num_trials: int | None = None
    hardware: str | None = None
    device: str | None = None

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


class Baseline:
    """Times for one mode of one baseline file, looked up by problem (file name, then id prefix)."""

    def __init__(self, levels: dict[int, dict[str, BaselineEntry]], mode: str = EAGER,
                 environment: BaselineEnvironment | None = None, path: Path | None = None):
        self.levels = levels
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
        entries = self.levels.get(problem.level, {})
        if problem.filename in entries:
            return entries[problem.filename]
        prefix = f"{problem.problem_id}_"
        matches = [e for name, e in entries.items() if name.startswith(prefix)]
        return matches[0] if len(matches) == 1 else None

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
    return Baseline(levels, mode=mode, environment=env)


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
    """``baselines/<gpu-name>.json``, the file ``kernelbench analyze --gpu`` uses."""
    return Path(root) / f"{gpu_name}.json"
