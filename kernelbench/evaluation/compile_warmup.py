"""Compiling baseline references in parallel before they are timed one at a time.

A baseline file in the torch.compile modes is mostly compile time: each measurement compiles its
reference in a fresh worker, one after another, because two timings must never share the GPU.
Compiling is CPU work, and torch.compile keeps what it produces on disk (Inductor's FX graph cache,
the Triton kernel cache). So several workers first compile the references at once, and the timed
runs then load compiled code instead of producing it.

Only compiler output may carry over into a timed run. Choices torch.compile makes by timing kernels
on the GPU were made here while several workers shared it, so none of them survives the warm-up:
runtime autotuning picks (``*.best_config`` files) and max-autotune's measured kernel timings
(Inductor's ``cache/`` folder) are deleted afterwards, and max-autotune warm-ups do not write the FX
graph cache, whose entries embed the chosen kernels. The timed run makes those choices again on a
quiet GPU, with the compiled Triton kernels at hand.

A successful warm-up leaves a marker beside the compiled code (``kernelbench-warmed/`` in the same
cache folder), so a resumed run on the same machine does not compile the same references again: on
an H100, re-warming 68 already-warmed references took 311 s of a 10-minute call (session 7) and
made no timed run faster. Deleting the cache folder deletes the markers with it.
"""

from __future__ import annotations

import functools
import hashlib
import json
import logging
import os
import shutil
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass, field
from pathlib import Path

from kernelbench.evaluation.settings import EvalSettings

log = logging.getLogger(__name__)

#: Baseline modes that go through Inductor and so leave compiled code on disk (the cudagraphs backend
#: only traces and captures graphs: nothing to warm).
WARM_MODES = ("compile-default", "compile-max-autotune")


def inductor_cache_dir(env: Mapping[str, str] | None = None) -> Path:
    """Where Inductor keeps its caches for workers started with ``env`` (torch's own default rule)."""
    env = os.environ if env is None else env
    if env.get("TORCHINDUCTOR_CACHE_DIR"):
        return Path(env["TORCHINDUCTOR_CACHE_DIR"]).resolve()
    from torch._inductor.runtime.cache_dir_utils import default_cache_dir

    return Path(default_cache_dir()).resolve()


def default_jobs() -> int:
    """Half the CPU cores, at most 8: each warm-up worker also runs Inductor's compile threads."""
    return max(1, min(8, (os.cpu_count() or 2) // 2))


@dataclass(frozen=True)
class WarmupOutcome:
    """One reference compiled (or not) ahead of its timed run."""

    problem_key: str
    mode: str
    ok: bool
    seconds: float
    error: str | None = None
    #: Not compiled now: an earlier warm-up left this reference's code in the same cache folder.
    reused: bool = False


@dataclass
class WarmupReport:
    """What the warm-up compiled, how long it took, and how many GPU-timed choices it threw away."""

    outcomes: list[WarmupOutcome] = field(default_factory=list)
    wall_s: float = 0.0
    jobs: int = 0
    cache_dir: Path | None = None
    decisions_removed: int = 0

    @property
    def compiled(self) -> int:
        """References warmed: compiled now, or already warm from an earlier warm-up."""
        return sum(o.ok for o in self.outcomes)

    @property
    def reused(self) -> int:
        return sum(o.reused for o in self.outcomes)

    @property
    def failed(self) -> list[WarmupOutcome]:
        return [o for o in self.outcomes if not o.ok]

    @property
    def compile_seconds(self) -> float:
        """Compile time summed over workers: what the timed runs would have spent one after another."""
        return sum(o.seconds for o in self.outcomes)

    def summary(self) -> str:
        """One line for a CLI to print."""
        reused = f", {self.reused} already warm from an earlier run" if self.reused else ""
        return (f"compile warm-up: {self.compiled}/{len(self.outcomes)} references compiled in {self.wall_s:.1f} s "
                f"by {self.jobs} workers ({self.compile_seconds:.1f} s of compiling, {self.decisions_removed} "
                f"GPU-timed choices dropped{reused})")


def warmup_environment(mode: str, jobs: int, cache_dir: Path) -> dict[str, str]:
    """Environment for one warm-up worker of ``mode`` when ``jobs`` of them run at once."""
    env = {"TORCHINDUCTOR_CACHE_DIR": str(cache_dir),
           "TORCHINDUCTOR_COMPILE_THREADS": str(max(1, (os.cpu_count() or 1) // max(1, jobs)))}
    if mode == "compile-max-autotune":
        env["TORCHINDUCTOR_FX_GRAPH_CACHE"] = "0"  # its entries would carry kernel choices timed under load
    return env


#: Folder inside Inductor's cache folder holding one marker per reference warmed there.
WARMED_DIR = "kernelbench-warmed"


@functools.cache
def _torch_version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("torch")
    except PackageNotFoundError:
        return "?"


def warm_key(problem, mode: str, settings: EvalSettings, arch: str | None) -> str:
    """What makes a warmed reference the same one: its code, the mode, the math settings, torch and the GPU."""
    material = {"code": hashlib.sha256(problem.code.encode("utf-8")).hexdigest(), "mode": mode,
                "precision": settings.precision, "ieee_fp32": settings.ieee_fp32, "torch": _torch_version(),
                "arch": arch}
    return hashlib.sha256(json.dumps(material, sort_keys=True).encode()).hexdigest()[:32]


def is_warm(cache_dir: Path, key: str) -> bool:
    return (cache_dir / WARMED_DIR / key).is_file()


def mark_warm(cache_dir: Path, key: str, problem_key: str, mode: str, seconds: float) -> None:
    """Record a warmed reference (written whole through a rename, so a crash leaves no half marker)."""
    folder = cache_dir / WARMED_DIR
    try:
        folder.mkdir(parents=True, exist_ok=True)
        tmp = folder / f".{key}.{os.getpid()}.tmp"
        tmp.write_text(json.dumps({"problem": problem_key, "mode": mode, "compile_s": round(seconds, 3),
                                   "at": time.time()}))
        os.replace(tmp, folder / key)
    except OSError as e:  # only costs a second compile next time
        log.warning("could not record the warm-up of %s %s in %s: %s", problem_key, mode, folder, e)


def forget_timed_choices(cache_dir: Path) -> int:
    """Delete the GPU-timed choices in an Inductor cache folder; returns how many files went."""
    removed = 0
    if not cache_dir.is_dir():
        return 0
    for path in cache_dir.rglob("*.best_config"):
        try:
            path.unlink()
            removed += 1
        except OSError as e:
            log.warning("could not delete %s: %s", path, e)
    timings = cache_dir / "cache"
    if timings.is_dir():
        removed += sum(1 for p in timings.rglob("*") if p.is_file())
        shutil.rmtree(timings, ignore_errors=True)
    return removed


def warm_up(pairs: Sequence[tuple[object, str]], settings: EvalSettings, device: str, jobs: int | None = None,
            *, deadline_s: float | None = None, progress: bool = True) -> WarmupReport:
    """Compile each (problem, mode) reference in ``jobs`` parallel workers on ``device``; never raises for one.

    A warm-up that fails (compile error, out of memory, timeout) is only logged: the timed run compiles
    that reference itself and records whatever goes wrong there. ``deadline_s`` stops starting new
    compiles after that many seconds, so that a time-boxed run keeps time for the timing itself.
    References an earlier warm-up already compiled into the same cache folder are not compiled again.
    """
    from kernelbench.evaluation import seeds as seedlib
    from kernelbench.evaluation.environment import gpu_compute_capability_from_smi
    from kernelbench.evaluation.parent.reference_timing import set_up_reference
    from kernelbench.evaluation.parent.workers import start_worker

    jobs = default_jobs() if jobs is None else jobs
    todo = [(p, m) for p, m in pairs if m in WARM_MODES]
    cache_dir = inductor_cache_dir()
    report = WarmupReport(jobs=jobs, cache_dir=cache_dir)
    if not todo or jobs < 1:
        return report
    arch = gpu_compute_capability_from_smi() if device.startswith("cuda") else None
    keys = {(p.key, m): warm_key(p, m, settings, arch) for p, m in todo}
    warm = {pm for pm in keys if is_warm(cache_dir, keys[pm])}
    report.outcomes = [WarmupOutcome(k, m, True, 0.0, reused=True) for k, m in keys if (k, m) in warm]
    todo = [(p, m) for p, m in todo if (p.key, m) not in warm]
    if not todo:
        log.info("%s", report.summary())
        return report
    secret = settings.seed_secret or seedlib.new_secret()
    started = time.monotonic()

    def compile_one(problem, mode: str) -> WarmupOutcome:
        t0 = time.monotonic()
        if deadline_s is not None and t0 - started >= deadline_s:
            return WarmupOutcome(problem.key, mode, False, 0.0, f"not started: warm-up deadline of {deadline_s:g} s")
        worker = None
        try:
            worker = start_worker("reference", device, "torch", arch, init=True,
                                  env_extra=warmup_environment(mode, jobs, cache_dir))
            set_up_reference(worker, problem, mode, settings, secret, settings.compile_timeout_s, f"{mode} warm-up")
            seconds = time.monotonic() - t0
            mark_warm(cache_dir, keys[(problem.key, mode)], problem.key, mode, seconds)
            return WarmupOutcome(problem.key, mode, True, seconds)
        except Exception as e:  # recorded; the timed run will compile (and fail) on its own
            first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
            log.info("compile warm-up of %s %s failed: %s", problem.key, mode, first)
            return WarmupOutcome(problem.key, mode, False, time.monotonic() - t0, first[:300])
        finally:
            if worker is not None:
                worker.close()

    _compile_all(todo, compile_one, report, started, progress)
    log.info("%s", report.summary())
    return report


def _compile_all(todo: Sequence[tuple[object, str]], compile_one: Callable[[object, str], WarmupOutcome],
                 report: WarmupReport, started: float, progress: bool) -> None:
    """Run ``compile_one`` over ``todo`` in ``report.jobs`` threads; then drop the GPU-timed choices."""
    from kernelbench.progress import progress_bar

    jobs, cache_dir = report.jobs, report.cache_dir
    bar = progress_bar(total=len(todo), desc=f"compile warm-up ({jobs} at once)", unit="ref", enabled=progress)
    try:
        with ThreadPoolExecutor(max_workers=jobs, thread_name_prefix="kb-warmup") as pool:
            futures = [pool.submit(compile_one, p, m) for p, m in todo]
            for fut in as_completed(futures):
                outcome = fut.result()
                report.outcomes.append(outcome)
                bar.set_postfix_str(f"{outcome.problem_key} {outcome.mode}")
                bar.update(1)
    finally:
        bar.close()
        report.decisions_removed = forget_timed_choices(cache_dir)
        report.wall_s = time.monotonic() - started
