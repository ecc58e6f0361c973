"""What a GPU container does with one input: decode it, call kernelbench, encode the answer.

No evaluation logic lives here: :func:`evaluate_payload` hands the job to
``kernelbench.evaluation.evaluate`` (the entry point the local runner uses) and
:func:`baselines_payload` to ``kernelbench.baselines.measure_problem``. Around those calls it
does the container's housekeeping: keep the compile-cache Volume in sync, retire a container
whose GPU went bad, and note which GPU actually ran the job.

Nothing here imports ``modal`` at module level, so the functions run (and are tested) anywhere.
"""

from __future__ import annotations

import datetime
import logging
import platform
import traceback
from collections.abc import Callable, Iterable
from importlib import metadata
from pathlib import Path
from typing import Any

from kernelbench.evaluation.settings import EvalJob
from kernelbench.hardware import nvidia_smi_query
from kernelbench.results import EnvironmentInfo, KernelResult, Stage, StageError
from kernelbench.runners.modal_runner import describe_exception
from kernelbench.runners.wire import WIRE_VERSION, baseline_request_from_wire, job_from_wire, result_to_wire
from modal_app.health import retire_decision

log = logging.getLogger(__name__)

Evaluate = Callable[[EvalJob], KernelResult]
Probe = Callable[[], bool]


class GpuUnhealthyError(RuntimeError):
    """Raised (so that Modal retries the input elsewhere) when the GPU failed before the job could run."""


# ---------------------------------------------------------------------------------------------
# Container facts


def in_modal_container() -> bool:
    try:
        import modal
    except ImportError:
        return False
    return not modal.is_local()


def stop_fetching_inputs() -> None:
    """Finish the current input, then let this container exit; a no-op outside Modal."""
    if not in_modal_container():
        log.info("not in a Modal container: nothing to retire")
        return
    import modal.experimental

    try:
        modal.experimental.stop_fetching_inputs()
    except Exception as e:  # a single-use, restricted container exits after this input anyway
        log.warning("could not retire this container (%s); it serves no further input if single-use", e)


def container_gpu_name(timeout_s: float = 30.0) -> str | None:
    """The GPU this container got, as the driver names it (Modal may substitute a type)."""
    names = nvidia_smi_query("name", timeout_s)
    return names[0] if names else None


def _driver_version(timeout_s: float = 30.0) -> str | None:
    versions = nvidia_smi_query("driver_version", timeout_s)
    return versions[0] if versions else None


def _dist_version(name: str) -> str | None:
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None


def runtime_environment(gpu_name: str | None = None) -> dict[str, Any]:
    """The ``environment`` block of a baseline file, from the container that measured it."""
    from kernelbench import TIMING_PROTOCOL_VERSION

    cuda = None
    try:
        import torch  # noqa: PLC0415 - only where torch is installed anyway

        cuda = torch.version.cuda
    except ImportError:
        pass
    return {
        "gpu_name": gpu_name or container_gpu_name(),
        "driver": _driver_version(),
        "cuda": cuda,
        "torch": _dist_version("torch"),
        "triton": _dist_version("triton"),
        "python": platform.python_version(),
        "date": datetime.datetime.now(datetime.timezone.utc).date().isoformat(),
        "timing_protocol": TIMING_PROTOCOL_VERSION,
    }


# ---------------------------------------------------------------------------------------------
# Compile cache


class CacheSync:
    """Keep the compile-cache Volume in step with other containers.

    Before a job, reload the Volume (to see builds other containers committed); after it, commit
    if new entries appeared under any cache root. Builds are published by rename into
    ``<root>/<content key>/``, so a commit never captures half a build, and two containers that
    build the same key write identical content.
    """

    def __init__(self, roots: Iterable[str | Path], reload: Callable[[], None] | None = None,
                 commit: Callable[[], None] | None = None):
        self.roots = [Path(r) for r in roots]
        self._reload = reload
        self._commit = commit

    def snapshot(self) -> frozenset[str]:
        names: set[str] = set()
        for root in self.roots:
            try:
                names.update(f"{root}/{entry.name}" for entry in root.iterdir())
            except OSError:
                continue
        return frozenset(names)

    def before(self) -> frozenset[str]:
        if self._reload is not None:
            try:
                self._reload()
            except Exception as e:  # open files, transient API errors: a stale cache is only slower
                log.warning("could not reload the compile cache: %s", describe_exception(e))
        return self.snapshot()

    def after(self, before: frozenset[str]) -> bool:
        """Commit when something new appeared; True when a commit was made."""
        new = self.snapshot() - before
        if not new or self._commit is None:
            return False
        try:
            self._commit()
        except Exception as e:
            log.warning("could not commit %d new cache entries: %s", len(new), describe_exception(e))
            return False
        log.info("committed %d new compile-cache entries", len(new))
        return True


# ---------------------------------------------------------------------------------------------
# The bodies of the GPU functions


def _default_evaluate(job: EvalJob) -> KernelResult:
    from kernelbench.evaluation import evaluate

    return evaluate(job)


def harness_failure(job: EvalJob, exc: BaseException) -> KernelResult:
    """The evaluator itself raised: ours, never the candidate's verdict (issue 23). Recorded as an
    infrastructure failure rather than raised (a retry here would likely raise again); the next
    evaluate-run evaluates the job again."""
    p = job.problem
    return KernelResult(
        level=p.level, problem_id=p.problem_id, problem_name=p.name, problem_hash=p.hash,
        sample_id=job.sample_id, backend=job.settings.backend, precision=job.settings.precision,
        error=StageError.make(Stage.INFRASTRUCTURE, type(exc).__name__, f"evaluator raised: {exc}",
                              "".join(traceback.format_exception(exc))),
    )


def hub_not_ready(job: EvalJob, hub_cache: str | Path) -> KernelResult | None:
    """An infrastructure result when the hub cache lacks a model the job's problem loads, else None.

    The trusted fetch runs before any such job is sent; a model missing here means it failed or the
    Volume was emptied since. Said plainly, rather than as the candidate's import error.
    """
    from kernelbench.problems.hub import hub_needs, missing_models

    missing = missing_models(hub_needs(job.problem.code).models, hub_cache)
    if not missing:
        return None
    return harness_failure(job, RuntimeError(
        f"hub model(s) {', '.join(missing)} not in the hub cache at {hub_cache}: the trusted fetch "
        "(fetch_hub_models) did not put them there; run again to fetch and retry"))


def evaluate_payload(payload: dict[str, Any], *, gpu: str, evaluate_fn: Evaluate | None = None,
                     probe: Probe | None = None, stop: Callable[[], None] | None = None,
                     cache: CacheSync | None = None, hub_cache: str | Path | None = None) -> dict[str, Any]:
    """Evaluate one wire job and return the wire result.

    ``probe`` checks the GPU in a fresh process; pass None where there is no GPU to check (the
    CPU path). ``stop`` retires the container. Raising is reserved for infrastructure faults
    (the GPU was already broken), which Modal retries on another container; a kernel that
    fails, crashes or hangs returns a result and is never retried. ``hub_cache``: the read-only
    hub cache, checked for the problem's models before anything runs.
    """
    index, job = job_from_wire(payload)
    if hub_cache is not None:
        not_ready = hub_not_ready(job, hub_cache)
        if not_ready is not None:
            return result_to_wire(index, not_ready)
    stop = stop or stop_fetching_inputs
    snapshot = cache.before() if cache is not None else frozenset()
    try:
        result = (evaluate_fn or _default_evaluate)(job)
    except Exception as exc:
        if probe is not None and not probe():
            stop()
            raise GpuUnhealthyError(
                f"GPU failed its health probe while evaluating {job.key} on {gpu}: {describe_exception(exc)}"
            ) from exc
        log.exception("the evaluator raised on %s", job.key)
        result = harness_failure(job, exc)

    decision = retire_decision(result, probe)
    if decision.stop:
        log.warning("retiring this container after %s: %s", job.key, decision.reason)
        stop()

    if probe is not None:  # a probe means a GPU container: make sure the result names the GPU that ran it
        if result.environment is None:
            result.environment = EnvironmentInfo(device="cuda:0", gpu_name=container_gpu_name())
        elif result.environment.gpu_name is None:
            result.environment.gpu_name = container_gpu_name()
    if cache is not None:
        cache.after(snapshot)
    return result_to_wire(index, result)


def fetch_hub_payload(payload: dict[str, Any], *, cache_dir: str | Path, token: str | None = None,
                      endpoint: str | None = None, commit: Callable[[], None] | None = None) -> dict[str, Any]:
    """The trusted fetch: put the requested hub models into ``cache_dir`` and say, per model, how it went.

    Runs no problem or candidate code, only the hub client. ``commit`` publishes the Volume once
    something new was downloaded, so that containers started afterwards see it.
    """
    from kernelbench.problems.hub import fetch_models
    from kernelbench.runners.wire import fetch_request_from_wire

    models = fetch_request_from_wire(payload)
    Path(cache_dir).mkdir(parents=True, exist_ok=True)
    fetched = fetch_models(models, cache_dir, token=token, endpoint=endpoint)
    if commit is not None and any(f.ok and not f.cached for f in fetched):
        commit()
    return {"wire_version": WIRE_VERSION, "models": [f.to_dict() for f in fetched]}


MeasureFn = Callable[..., dict]


def _default_measure() -> MeasureFn:
    try:
        from kernelbench.baselines import measure_problem
    except ImportError:
        raise RuntimeError(
            "kernelbench.baselines.measure_problem is not available in this copy of kernelbench"
        ) from None
    return measure_problem


def baselines_payload(payload: dict[str, Any], *, measure_fn: MeasureFn | None = None,
                      environment: Callable[[str | None], dict[str, Any]] | None = None,
                      cache: CacheSync | None = None) -> dict[str, Any]:
    """Measure one problem's reference in each requested mode; errors come back as data.

    The reference is trusted code, so a failure here (out of memory, a mode torch cannot
    compile) is deterministic: it is returned under ``error`` rather than raised, so Modal
    does not retry it.
    """
    index, problem, modes, settings = baseline_request_from_wire(payload)
    out: dict[str, Any] = {"wire_version": WIRE_VERSION, "index": index, "level": problem.level,
                           "problem_id": problem.problem_id, "filename": problem.filename,
                           "entries": {}, "error": None}
    snapshot = cache.before() if cache is not None else frozenset()
    try:
        entries = (measure_fn or _default_measure())(problem, modes, settings)
        out["entries"] = {mode: entry.model_dump(mode="json") for mode, entry in entries.items()}
    except Exception as exc:
        log.exception("measuring %s failed", problem.key)
        out["error"] = describe_exception(exc)
        # Some modes may have worked (BaselineMeasureError keeps them): do not lose those.
        partial = getattr(exc, "entries", None) or {}
        out["entries"] = {mode: entry.model_dump(mode="json") for mode, entry in partial.items()}
        if getattr(exc, "failures", None):
            out["failures"] = dict(exc.failures)
    hardware = next((e.get("hardware") for e in out["entries"].values() if e.get("hardware")), None)
    out["environment"] = (environment or runtime_environment)(hardware)
    if cache is not None:
        cache.after(snapshot)
    return out
