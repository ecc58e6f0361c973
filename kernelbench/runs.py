"""Run directories, laid out as KernelBench lays them out.

``runs/<run_name>/level_<L>_problem_<P>_sample_<S>_kernel.py`` holds each candidate; the prompt,
raw response and usage sit beside it; ``eval_results.json`` maps problem id to a list of
per-sample results. One run directory holds one level, as in KernelBench.

Each entry of ``eval_results.json`` has KernelBench's own fields at the top (``sample_id``,
``compiled``, ``correctness``, ``runtime`` in ms with ``-1.0`` for "not measured", ``runtime_stats``,
``metadata``) so its analysis scripts read our files, and our full result under ``result``.
Files KernelBench wrote (no ``result``) are read too.

``run.json`` beside them records how the run was made (:class:`RunInfo`); KernelBench's own runs
have none.
"""

from __future__ import annotations

import json
import logging
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationError

from kernelbench.backends import DEFAULT_BACKEND
from kernelbench.errors import RunDirectoryError
from kernelbench.io_utils import atomic_write_json, atomic_write_text, file_lock, read_json
from kernelbench.problems.identity import RecordedProblemSet
from kernelbench.results import KernelResult, Stage, StageError, TimingStats

log = logging.getLogger(__name__)

EVAL_RESULTS = "eval_results.json"
RUN_INFO = "run.json"
_KERNEL_RE = re.compile(r"^level_(\d+)_problem_(\d+)_sample_(\d+)_kernel\.py$")


def sample_stem(level: int, problem_id: int, sample_id: int) -> str:
    return f"level_{level}_problem_{problem_id}_sample_{sample_id}"


@dataclass(frozen=True)
class KernelFile:
    level: int
    problem_id: int
    sample_id: int
    path: Path

    def read(self) -> str:
        return self.path.read_text(encoding="utf-8")


class RunInfo(BaseModel):
    """What ``run.json`` records about how a run was made; every field is optional.

    Two writers fill it: ``generate`` (and ``run``/``single``, which call it) records the model and
    prompt options; the leaderboard's evaluation records the submission, GPU and runner. Both record
    the problem set. Files written by earlier versions read as they are: before ``prompt_gpu``
    existed ``generate`` wrote the prompt's GPU as ``gpu``, and a file may lack ``problem_set``.
    Keys this version does not know are kept and written back unchanged, so an older evaluator
    updating a newer run loses nothing.
    """

    model_config = ConfigDict(extra="allow", frozen=True)

    level: int | None = None
    #: The problem set the run's kernels belong to, with the hashes of the problems it holds.
    problem_set: RecordedProblemSet | None = None
    # Written by generate.
    model: str | None = None
    api_base: str | None = None
    backend: str | None = None
    precision: str | None = None
    #: The GPU the prompt described.
    prompt_gpu: str | None = None
    tolerance_mode: str | None = None
    #: The problem source as ``load_problems`` takes it (``builtin``, ``directory``, ...), and its path.
    source: str | None = None
    source_path: str | None = None
    problem_ids: list[int] | None = None
    #: Samples asked for per problem (a failed generation still counts: it gets a placeholder result).
    samples: int | None = None
    turns: int | None = None
    #: What refinement turns send back: "verdict", or "profile" (the verdict and an Nsight Compute profile).
    feedback: str | None = None
    temperature: float | None = None
    max_tokens: int | None = None
    reasoning_effort: str | None = None
    created_at: str | None = None
    kernelbench_version: str | None = None
    # Written by the leaderboard's evaluation.
    submission: str | None = None
    display_name: str | None = None
    #: The GPU label the run was evaluated on (leaderboard); the prompt's GPU in files older than ``prompt_gpu``.
    gpu: str | None = None
    runner: str | None = None

    @classmethod
    def load(cls, path: str | Path) -> RunInfo:
        """Read ``path``; a missing file is an empty record (KernelBench's runs have none).

        Raises RunDirectoryError, naming the file and the field, for a file that is not a JSON object
        or holds a field of the wrong type.
        """
        path = Path(path)
        try:
            raw = json.loads(path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return cls()
        except OSError as e:
            raise RunDirectoryError(f"{path}: cannot read it ({e.strerror or e})") from None
        except (json.JSONDecodeError, UnicodeDecodeError) as e:
            raise RunDirectoryError(f"{path} is not valid JSON: {e}") from None
        if not isinstance(raw, dict):
            raise RunDirectoryError(f"{path}: expected a JSON object, got {type(raw).__name__}")
        return cls._validated(raw, str(path))

    def recorded(self) -> dict[str, Any]:
        """The fields set, as run.json holds them; one never recorded is left out, as earlier versions did."""
        return self.model_dump(mode="json", exclude_none=True)

    def save(self, path: str | Path) -> None:
        atomic_write_json(path, self.recorded())

    def updated(self, *, where: str = "run.json", **fields: Any) -> RunInfo:
        """A copy with ``fields`` set (``None`` leaves a field as it is), validated like a loaded file.

        ``where`` names the file in the error raised for a value of the wrong type.
        """
        data = self.recorded()
        data.update({k: v for k, v in fields.items() if v is not None})
        return self._validated(data, where)

    @classmethod
    def _validated(cls, data: dict, where: str) -> RunInfo:
        try:
            return cls.model_validate(data)
        except ValidationError as e:
            first = e.errors()[0]
            name = ".".join(str(x) for x in first["loc"]) or "(top level)"
            message = str(first["msg"]).removeprefix("Value error, ")
            got = repr(first.get("input"))
            got = got if len(got) <= 60 else got[:57] + "..."
            more = f" (and {e.error_count() - 1} more)" if e.error_count() > 1 else ""
            raise RunDirectoryError(f"{where}: field {name!r}: {message} (got {got}){more}") from None


def result_to_entry(result: KernelResult) -> dict:
    """KernelBench-shaped entry with our full result nested."""
    meta: dict = {"backend": result.backend, "precision": result.precision}
    if result.error is not None:
        meta["error_stage"] = result.error.stage.value
        meta["error"] = result.error.one_line()
    if result.runtime is not None:
        rt = result.runtime
        stats = {"mean": rt.mean_ms, "median": rt.median_ms, "std": rt.std_ms, "min": rt.min_ms,
                 "max": rt.max_ms, "num_trials": rt.n}
    else:
        stats = {}
    return {
        "sample_id": result.sample_id,
        "compiled": result.compiled,
        "correctness": result.correct,
        "runtime": result.runtime_ms if result.runtime_ms is not None else -1.0,
        "ref_runtime": result.ref_runtime_ms if result.ref_runtime_ms is not None else -1.0,
        "runtime_stats": stats,
        "metadata": meta,
        "result": json.loads(result.model_dump_json()),
    }


def entry_to_result(entry: dict, level: int, problem_id: int, problem_name: str | None = None) -> KernelResult:
    """Read one entry, ours or KernelBench's."""
    if isinstance(entry.get("result"), dict):
        return KernelResult.from_dict(entry["result"])
    # KernelBench's own entry: only the mean runtime is known.
    compiled = bool(entry.get("compiled", False))
    correct = bool(entry.get("correctness", False))
    runtime = entry.get("runtime")
    timing = TimingStats(samples_ms=[float(runtime)]) if isinstance(runtime, (int, float)) and runtime > 0 else None
    ref = entry.get("ref_runtime")
    ref_timing = TimingStats(samples_ms=[float(ref)]) if isinstance(ref, (int, float)) and ref > 0 else None
    meta = entry.get("metadata") or {}
    error = None
    if not correct:
        reason = next((str(meta[k]) for k in ("compilation_error", "runtime_error", "correctness_issue", "error")
                       if k in meta), None)
        if reason or not compiled:
            stage = Stage.COMPILE if not compiled else Stage.CORRECTNESS
            error = StageError.make(stage, "KernelBenchResult", reason or "not compiled")
    return KernelResult(
        level=level, problem_id=problem_id, problem_name=problem_name or f"{problem_id}",
        sample_id=int(entry.get("sample_id", 0)), backend=str(meta.get("backend", DEFAULT_BACKEND)),
        compiled=compiled, correct=correct, runtime=timing, ref_runtime=ref_timing, error=error,
        timing_note="imported from a KernelBench eval_results.json: only the mean runtime is known",
    )


def read_eval_results(path: str | Path, level: int) -> dict[tuple[int, int], KernelResult]:
    """Parse an eval_results.json (ours or KernelBench's) into {(problem_id, sample_id): result}."""
    path = Path(path)
    raw = read_json(path, RunDirectoryError)
    if not isinstance(raw, dict):
        raise RunDirectoryError(f"{path}: expected an object keyed by problem id")
    out: dict[tuple[int, int], KernelResult] = {}
    for key, value in raw.items():
        try:
            pid = int(key)
        except ValueError:
            raise RunDirectoryError(f"{path}: key {key!r} is not a problem id") from None
        entries = value if isinstance(value, list) else [value]
        for entry in entries:
            if not isinstance(entry, dict):
                raise RunDirectoryError(f"{path}: problem {key} has a malformed entry")
            try:
                r = entry_to_result(entry, level, pid)
            except Exception as e:  # pydantic ValidationError and friends
                raise RunDirectoryError(f"{path}: problem {key}: cannot read result ({e})") from None
            out[(pid, r.sample_id)] = r
    return out


class RunDirectory:
    """One run: candidates, their prompts and responses, and their results."""

    def __init__(self, path: str | Path, level: int | None = None):
        self.path = Path(path)
        recorded = self.info().level
        if recorded is None:
            recorded = self._infer_level()
        if level is not None and recorded is not None and int(recorded) != level:
            raise RunDirectoryError(f"run {self.path} holds level {recorded}, not level {level}")
        self.level: int | None = level if level is not None else (int(recorded) if recorded is not None else None)

    # ---- run metadata ----
    @property
    def info_path(self) -> Path:
        return self.path / RUN_INFO

    def info(self) -> RunInfo:
        """The run's ``run.json`` (empty when there is none)."""
        return RunInfo.load(self.info_path)

    def write_info(self, **fields: Any) -> RunInfo:
        """Set ``fields`` (RunInfo's; ``None`` leaves one as it is) in run.json, under the run's lock."""
        with file_lock(self.path / ".lock"):
            info = self.info().updated(where=str(self.info_path), **fields)
            if info.level is None and self.level is not None:
                info = info.updated(where=str(self.info_path), level=self.level)
            info.save(self.info_path)
            return info

    def _infer_level(self) -> int | None:
        if not self.path.is_dir():
            return None
        levels = {k.level for k in self.kernels()}
        if not levels and (self.path / EVAL_RESULTS).exists():
            try:
                raw = json.loads((self.path / EVAL_RESULTS).read_text(encoding="utf-8"))
            except (OSError, json.JSONDecodeError):
                raw = {}
            for entries in (raw.values() if isinstance(raw, dict) else []):
                for e in entries if isinstance(entries, list) else [entries]:
                    lv = e.get("result", {}).get("level") if isinstance(e, dict) and isinstance(e.get("result"), dict) else None
                    if isinstance(lv, int):
                        levels.add(lv)
        if len(levels) > 1:
            raise RunDirectoryError(
                f"run {self.path} mixes kernels of levels {sorted(levels)}; a run directory holds one level"
            )
        return levels.pop() if levels else None

    def _require_level(self, level: int) -> None:
        if self.level is None:
            self.level = level
        elif self.level != level:
            raise RunDirectoryError(f"run {self.path} holds level {self.level}; cannot add level {level}")

    # ---- per-sample files ----
    def file_for(self, level: int, problem_id: int, sample_id: int, suffix: str) -> Path:
        return self.path / f"{sample_stem(level, problem_id, sample_id)}_{suffix}"

    def kernel_path(self, level: int, problem_id: int, sample_id: int = 0) -> Path:
        return self.file_for(level, problem_id, sample_id, "kernel.py")

    def write_kernel(self, level: int, problem_id: int, sample_id: int, source: str) -> Path:
        self._require_level(level)
        p = self.kernel_path(level, problem_id, sample_id)
        atomic_write_text(p, source)
        return p

    def write_text(self, level: int, problem_id: int, sample_id: int, suffix: str, text: str) -> Path:
        """Prompts (``prompt.txt``), raw responses (``response.txt``) and similar artefacts."""
        self._require_level(level)
        p = self.file_for(level, problem_id, sample_id, suffix)
        atomic_write_text(p, text)
        return p

    def write_json(self, level: int, problem_id: int, sample_id: int, suffix: str, data) -> Path:
        self._require_level(level)
        p = self.file_for(level, problem_id, sample_id, suffix)
        atomic_write_json(p, data)
        return p

    def kernels(self) -> list[KernelFile]:
        if not self.path.is_dir():
            return []
        out = []
        for f in sorted(self.path.iterdir()):
            m = _KERNEL_RE.match(f.name)
            if m:
                out.append(KernelFile(int(m.group(1)), int(m.group(2)), int(m.group(3)), f))
        return sorted(out, key=lambda k: (k.level, k.problem_id, k.sample_id))

    # ---- results ----
    @property
    def results_path(self) -> Path:
        return self.path / EVAL_RESULTS

    def _read_raw(self) -> dict:
        if not self.results_path.exists():
            return {}
        try:
            raw = json.loads(self.results_path.read_text(encoding="utf-8"))
        except json.JSONDecodeError as e:
            raise RunDirectoryError(f"{self.results_path} is not valid JSON: {e}") from None
        if not isinstance(raw, dict):
            raise RunDirectoryError(f"{self.results_path}: expected an object keyed by problem id")
        return raw

    def load_results(self) -> dict[tuple[int, int], KernelResult]:
        if not self.results_path.exists():
            return {}
        level = self.level if self.level is not None else 0
        return read_eval_results(self.results_path, level)

    def has_result(self, problem_id: int, sample_id: int = 0) -> bool:
        return (problem_id, sample_id) in self.load_results()

    def save_result(self, result: KernelResult) -> None:
        """Add or replace one sample's result; safe against concurrent writers and kills."""
        self._require_level(result.level)
        with file_lock(self.path / ".lock"):
            raw = self._read_raw()
            entries = [e for e in raw.get(str(result.problem_id), [])
                       if isinstance(e, dict) and e.get("sample_id") != result.sample_id]
            entries.append(result_to_entry(result))
            entries.sort(key=lambda e: e.get("sample_id", 0))
            raw[str(result.problem_id)] = entries
            ordered = {k: raw[k] for k in sorted(raw, key=lambda k: int(k) if k.isdigit() else 10**9)}
            atomic_write_json(self.results_path, ordered)
