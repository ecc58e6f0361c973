"""Measuring one problem's reference on this machine, with the evaluator's own timing protocol.

:func:`measure_problem` times the reference in each mode through
``kernelbench.evaluation.parent.measure_reference`` (the code that times the reference during an
evaluation), so a baseline and an evaluation's in-run reference are the same measurement.
:class:`LocalMeasurer` keeps one device session across problems, with workers started ahead.
"""

from __future__ import annotations

import importlib.util
import logging
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from kernelbench.baselines.format import BaselineEntry, check_modes, one_line
from kernelbench.errors import BaselineError
from kernelbench.problems.model import Problem

if TYPE_CHECKING:
    from kernelbench.evaluation.parent import DeviceSession, ReferenceTiming
    from kernelbench.evaluation.settings import EvalSettings

log = logging.getLogger(__name__)

#: Reference workers started ahead. Starting one (Python, torch, CUDA) takes 8-11 s on the lent H100,
#: and an eager measurement about 1 s: with two kept waiting, 245 of the 285 s that eager took for 50
#: problems (session 6) was waiting for the next worker. Each one waiting holds a CUDA context
#: (about 0.5 GB of GPU memory); ``spares`` lowers it on a small GPU.
REFERENCE_SPARES = 6

MeasureFn = Callable[[Problem, Sequence[str], "EvalSettings"], dict[str, BaselineEntry]]


class BaselineMeasureError(Exception):
    """Some modes of a problem could not be measured; ``entries`` keeps the modes that were."""

    def __init__(self, problem_key: str, entries: dict[str, BaselineEntry], failures: dict[str, str]):
        self.problem_key = problem_key
        self.entries = entries
        self.failures = failures
        detail = "; ".join(f"{mode}: {err}" for mode, err in failures.items())
        super().__init__(f"{problem_key}: {detail}")


#: Timed calls at least per baseline (the budget may stop it sooner). A baseline times one side, without rounds to
#: pair; it keeps the 20 every published baseline file was measured with, while candidate timings stop after
#: ``timing.MIN_TIMED_CALLS`` when precise.
BASELINE_MIN_TRIALS = 20


def baseline_settings(timing_budget_s: float = 1.0, min_trials: int | None = None, max_trials: int | None = None,
                      compile_timeout_s: float | None = None, stage_timeout_s: float | None = None,
                      precision: str = "fp32", device: str | None = None) -> EvalSettings:
    """Evaluator settings for timing references alone (``None`` keeps the evaluator's default)."""
    from kernelbench.evaluation.settings import EvalSettings

    if timing_budget_s <= 0:
        raise BaselineError(f"timing budget must be positive, got {timing_budget_s:g} s")
    changes: dict[str, Any] = {"backend": "torch", "precision": precision, "timing_budget_s": timing_budget_s,
                               "device": device}
    optional = {"min_timing_trials": BASELINE_MIN_TRIALS if min_trials is None else min_trials,
                "max_timing_trials": max_trials,
                "compile_timeout_s": compile_timeout_s, "stage_timeout_s": stage_timeout_s}
    changes.update({k: v for k, v in optional.items() if v is not None})
    try:
        s = EvalSettings(**changes)
    except ValueError as e:
        raise BaselineError(str(e)) from None
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


def missing_packages(problem: Problem) -> list[str]:
    """The packages the problem imports that are not installed here."""
    return [r for r in problem.requirements if importlib.util.find_spec(r) is None]


def _device_session(device: str, spares: int, reference_env: dict[str, str] | None = None) -> DeviceSession:
    """A session on ``device``; the GPU's architecture is read from the driver (no CUDA context here)."""
    from kernelbench.evaluation.environment import gpu_compute_capability_from_smi
    from kernelbench.evaluation.parent import DeviceSession

    arch = gpu_compute_capability_from_smi() if device.startswith("cuda") else None
    # Each measurement a fresh reference worker (a baseline's absolute time, its compile modes' caches).
    return DeviceSession(device, arch, spares=spares, reference_env=reference_env, reuse_references=False)


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
    from kernelbench.evaluation.parent import visible_devices
    from kernelbench.evaluation.settings import EvalSettings

    modes = check_modes(modes)
    s = settings or EvalSettings(backend="torch")
    missing = missing_packages(problem)
    if missing:
        err = (f"needs {', '.join(missing)}, which is not installed here "
               f"(pip install {' '.join(missing)})")
        raise BaselineMeasureError(problem.key, {}, {m: err for m in modes})
    own = session is None
    if session is None:
        # One worker started ahead when another mode follows; none to throw away after the last.
        session = _device_session(device or s.device or visible_devices()[0], spares=1 if len(modes) > 1 else 0)
    try:
        entries, failures = _measure_modes(session, problem, modes, s, start_next)
    finally:
        if own:
            session.close()
    if failures:
        raise BaselineMeasureError(problem.key, entries, failures)
    return entries


def _measure_modes(session: DeviceSession, problem: Problem, modes: list[str], settings: EvalSettings,
                   start_next: bool) -> tuple[dict[str, BaselineEntry], dict[str, str]]:
    """Each mode in turn on ``session``: the entries measured, and an error per mode that failed."""
    from kernelbench.evaluation.parent import measure_reference

    entries: dict[str, BaselineEntry] = {}
    failures: dict[str, str] = {}
    for i, mode in enumerate(modes):
        t0 = time.monotonic()
        try:
            timing = measure_reference(session, problem, mode, settings, allow_cpu=True,
                                       start_next=start_next or i < len(modes) - 1)
        except Exception as e:  # the reference failed in this mode: record it, try the next mode
            failures[mode] = one_line(e)
            log.warning("%s %s: %s", problem.key, mode, failures[mode])
            log.debug("%s %s failed; worker traceback:\n%s", problem.key, mode, getattr(e, "traceback", None),
                      exc_info=True)
            continue
        entries[mode] = entry_from_timing(timing, time.monotonic() - t0)
    return entries, failures


class LocalMeasurer:
    """:func:`measure_problem` on one local device, keeping one session (and a worker started ahead)."""

    def __init__(self, device: str, spares: int | None = None, preload_compiler: bool = False):
        """``spares``: workers started ahead (``None``: :data:`REFERENCE_SPARES`); ``preload_compiler``:
        they import torch.compile's machinery while they wait (for compile modes)."""
        from kernelbench.evaluation.worker import PRELOAD_COMPILER_ENV

        spares = REFERENCE_SPARES if spares is None else spares
        if spares < 0:
            raise BaselineError(f"workers started ahead must be 0 or more, got {spares}")
        self.device = device
        self.spares = spares
        self.session = _device_session(device, spares,
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
