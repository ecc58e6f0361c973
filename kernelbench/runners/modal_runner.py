"""Evaluate on Modal cloud GPUs: fan jobs out with ``.map`` and write each result as it returns.

The Modal app itself lives in ``modal_app/``; this module is the client side. It only needs
``modal`` when a run starts (imported lazily), so the CLI's ``--help`` and the evaluator stay
import-light.

Jobs and results cross the wire as plain JSON-able dicts (see :func:`job_to_wire`), not pickled
objects: a deployed app may run an older copy of the package, and a dict with a version number
fails loudly where a pickle would fail strangely.
"""

from __future__ import annotations

import contextlib
import dataclasses
import importlib
import logging
import os
import sys
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

from kernelbench.errors import KernelBenchError
from kernelbench.evaluation.settings import EvalJob, EvalSettings
from kernelbench.problems.model import Problem
from kernelbench.results import KernelResult, Stage, StageError
from kernelbench.runners.base import ResultCallback

log = logging.getLogger(__name__)

#: The app name ``modal deploy modal_app/app.py`` registers; the runner looks functions up under it.
APP_NAME = "kernelbench"
#: Bumped when the payload layout changes; the remote side refuses a version it does not know.
WIRE_VERSION = 1
#: GPU types the app has functions for, as Modal spells them.
MODAL_GPUS: tuple[str, ...] = ("H100", "A100-80GB", "L40S", "B200")
#: The error type of a result that stands in for a job Modal could not run (infrastructure failure).
REMOTE_ERROR_TYPE = "RemoteError"

TOKEN_HELP = (
    "no Modal token found (neither ~/.modal.toml nor MODAL_TOKEN_ID and MODAL_TOKEN_SECRET): "
    "run `pip install modal && modal token new` once, then retry"
)


class WireFormatError(KernelBenchError):
    """A payload from the other side of the wire has the wrong shape or version."""


# ---------------------------------------------------------------------------------------------
# GPU names and function names


def canonical_gpu(gpu: str) -> str:
    """Accept ``h100``, ``a100_80gb`` and the like; refuse GPUs the app has no function for."""
    wanted = gpu.strip().lower().replace("_", "-")
    for name in MODAL_GPUS:
        if name.lower() == wanted:
            return name
    raise KernelBenchError(f"unknown Modal GPU {gpu!r} (choose from {', '.join(MODAL_GPUS)})")


def function_name(kind: str, gpu: str) -> str:
    """``evaluate_h100``, ``baselines_a100_80gb``: one Modal function per (kind, GPU type)."""
    if kind not in ("evaluate", "baselines"):
        raise ValueError(f"unknown Modal function kind {kind!r}")
    return f"{kind}_{canonical_gpu(gpu).lower().replace('-', '_')}"


# ---------------------------------------------------------------------------------------------
# Token check


def modal_token_available(environ: dict[str, str] | None = None) -> bool:
    """True when the Modal client would find credentials (a config file or the two variables)."""
    env = os.environ if environ is None else environ
    if env.get("MODAL_TOKEN_ID") and env.get("MODAL_TOKEN_SECRET"):
        return True
    config = Path(env.get("MODAL_CONFIG_PATH") or Path(env.get("HOME") or Path.home()) / ".modal.toml")
    try:
        return "token_id" in config.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return False


def require_modal_token(environ: dict[str, str] | None = None) -> None:
    if not modal_token_available(environ):
        raise KernelBenchError(TOKEN_HELP)


# ---------------------------------------------------------------------------------------------
# Wire format


def problem_to_wire(problem: Problem) -> dict[str, Any]:
    return {"level": problem.level, "problem_id": problem.problem_id, "name": problem.name,
            "code": problem.code, "source": problem.source, "requirements": list(problem.requirements),
            "hash": problem.hash}


def problem_from_wire(data: dict[str, Any]) -> Problem:
    try:
        problem = Problem(level=int(data["level"]), problem_id=int(data["problem_id"]), name=str(data["name"]),
                          code=str(data["code"]), source=str(data.get("source", "")),
                          requirements=tuple(data.get("requirements") or ()))
    except (KeyError, TypeError, ValueError) as e:
        raise WireFormatError(f"malformed problem in payload: {e!r}") from None
    if data.get("hash") and data["hash"] != problem.hash:
        raise WireFormatError(f"problem level {problem.level} id {problem.problem_id} changed in transit (hash mismatch)")
    return problem


def settings_to_wire(settings: EvalSettings) -> dict[str, Any]:
    """The settings minus ``device``: the container picks its own GPU, whatever the client said."""
    data = settings.to_dict()
    data["device"] = None
    if settings.seed_secret is not None:
        data["seed_secret_hex"] = settings.seed_secret.hex()
    return data


def settings_from_wire(data: dict[str, Any]) -> EvalSettings:
    data = dict(data)
    secret_hex = data.pop("seed_secret_hex", None)
    known = {f.name for f in dataclasses.fields(EvalSettings)}
    unknown = sorted(set(data) - known)
    if unknown:
        raise WireFormatError(
            f"settings field(s) {', '.join(unknown)} unknown to this copy of kernelbench "
            "(the deployed Modal app is older than the client: run `modal deploy modal_app/app.py`)"
        )
    if secret_hex is not None:
        data["seed_secret"] = bytes.fromhex(secret_hex)
    try:
        return EvalSettings(**data)
    except (TypeError, ValueError) as e:
        raise WireFormatError(f"bad settings in payload: {e}") from None


def job_to_wire(job: EvalJob, index: int) -> dict[str, Any]:
    """One job as a JSON-able dict; ``index`` comes back with the result, whatever order results arrive in."""
    return {"wire_version": WIRE_VERSION, "index": index, "problem": problem_to_wire(job.problem),
            "candidate_source": job.candidate_source, "sample_id": job.sample_id,
            "settings": settings_to_wire(job.settings)}


def _check_version(data: Any, what: str) -> None:
    if not isinstance(data, dict):
        raise WireFormatError(f"{what} is a {type(data).__name__}, expected a dict")
    if data.get("wire_version") != WIRE_VERSION:
        raise WireFormatError(
            f"{what} has wire version {data.get('wire_version')!r}, this copy of kernelbench speaks "
            f"{WIRE_VERSION} (redeploy with `modal deploy modal_app/app.py`)"
        )


def job_from_wire(data: dict[str, Any]) -> tuple[int, EvalJob]:
    _check_version(data, "job payload")
    try:
        index = int(data["index"])
        job = EvalJob(problem=problem_from_wire(data["problem"]), candidate_source=str(data["candidate_source"]),
                      settings=settings_from_wire(data.get("settings") or {}),
                      sample_id=int(data.get("sample_id", 0)))
    except (KeyError, TypeError, ValueError) as e:
        raise WireFormatError(f"malformed job payload: {e!r}") from None
    return index, job


def result_to_wire(index: int, result: KernelResult) -> dict[str, Any]:
    return {"wire_version": WIRE_VERSION, "index": index, "result": result.model_dump(mode="json")}


def result_from_wire(data: Any) -> tuple[int, KernelResult]:
    _check_version(data, "result payload")
    try:
        return int(data["index"]), KernelResult.from_dict(data["result"])
    except Exception as e:  # KeyError, pydantic ValidationError
        raise WireFormatError(f"malformed result payload: {e}") from None


#: Error type of a result for a kernel whose problem cannot run on Modal (level 4: packages and
#: model downloads the GPU image and its network-less functions do not have).
NOT_RUNNABLE_TYPE = "NotRunnableOnModal"


def modal_blocker(problem: Problem) -> str | None:
    """Why ``problem`` cannot run in the Modal GPU functions, or None if it can."""
    if problem.requirements:
        return (f"level {problem.level} problem {problem.problem_id} ({problem.name}) needs "
                f"{', '.join(problem.requirements)} and downloads its model from the Hugging Face hub; the Modal "
                "image does not install them and GPU functions have no network: evaluate it on a local GPU "
                "(--runner local)")
    return None


def check_runnable_on_modal(problems: Iterable[Problem]) -> None:
    """Refuse, before anything is sent, problems that need packages or network the image lacks."""
    for p in problems:
        reason = modal_blocker(p)
        if reason:
            raise KernelBenchError(reason)


def not_runnable_result(job: EvalJob, message: str, runner: str) -> KernelResult:
    """The per-kernel result for a job this runner cannot run: failed at load, nothing was sent."""
    p = job.problem
    return KernelResult(
        level=p.level, problem_id=p.problem_id, problem_name=p.name, problem_hash=p.hash,
        sample_id=job.sample_id, backend=job.settings.backend, precision=job.settings.precision,
        error=StageError.make(Stage.LOAD, NOT_RUNNABLE_TYPE, message), runner=runner,
    )


# ---------------------------------------------------------------------------------------------
# Results for jobs that never ran


def remote_failure(job: EvalJob, message: str, runner: str) -> KernelResult:
    """A failed result standing in for a job whose container crashed or whose output was lost."""
    p = job.problem
    return KernelResult(
        level=p.level, problem_id=p.problem_id, problem_name=p.name, problem_hash=p.hash,
        sample_id=job.sample_id, backend=job.settings.backend, precision=job.settings.precision,
        error=StageError.make(Stage.INFRASTRUCTURE, REMOTE_ERROR_TYPE, message), runner=runner,
    )


def is_remote_failure(result: KernelResult) -> bool:
    """Results that stand for infrastructure failures (Modal's or the evaluator's); a resumed run evaluates
    these jobs again. Kept for callers of the Modal runner; see ``KernelResult.infrastructure_failure``."""
    return result.infrastructure_failure


def describe_exception(exc: BaseException) -> str:
    text = str(exc).strip()
    first = text.splitlines()[0] if text else ""
    return f"{type(exc).__name__}: {first}" if first else type(exc).__name__


# ---------------------------------------------------------------------------------------------
# The runner


class ModalRunner:
    """Runs jobs on one Modal GPU type; same interface as the local runner.

    ``function`` is any object with Modal's ``.map(inputs, order_outputs=..., return_exceptions=...)``
    contract: a hydrated Modal function (inside ``modal run``), or an in-process stand-in. Without
    one, the runner looks up the deployed app's function and falls back to running the app
    ephemerally.
    """

    name = "modal"

    def __init__(self, gpu: str = "H100", function: Any = None, app_name: str = APP_NAME,
                 baselines_function: Any = None, devices: Sequence[str] | None = None,
                 max_containers: int | None = None, max_cost_usd: float | None = None,
                 confirm: Callable[[Any], bool] | None = None, dry_run: bool = False):
        """``confirm(estimate)`` sees the :class:`~kernelbench.runners.modal_cost.CostEstimate` before
        anything is dispatched and returns False to send nothing; ``dry_run`` sends nothing after it.
        ``max_containers`` caps Modal's parallelism; ``max_cost_usd`` dispatches in batches and stops
        before the batch whose estimate would take the spend (measured so far) past the cap."""
        self.gpu = canonical_gpu(gpu)
        self.app_name = app_name
        self._function = function
        self._baselines_function = baselines_function
        if max_containers is not None and max_containers < 1:
            raise KernelBenchError("--max-containers must be at least 1")
        if max_cost_usd is not None and max_cost_usd <= 0:
            raise KernelBenchError("--max-cost must be a positive number of dollars")
        self.max_containers = max_containers
        self.max_cost_usd = max_cost_usd
        self.confirm = confirm
        self.dry_run = dry_run
        #: The estimate of the last dispatch (or dry run), for callers that report it.
        self.last_estimate: Any = None
        if devices:
            log.warning("--device/devices is ignored with the Modal runner: each container has one GPU")
        if function is None and not dry_run:  # fail at once, before any work; a dry run needs no token
            require_modal_token()

    @property
    def label(self) -> str:
        return f"modal:{self.gpu}"

    # -- function resolution ------------------------------------------------------------------
    @contextlib.contextmanager
    def _resolve(self, kind: str, given: Any) -> Iterator[Any]:
        if given is not None:
            yield given
            return
        require_modal_token()
        fn_name = function_name(kind, self.gpu)
        deployed = _lookup_deployed(self.app_name, fn_name)
        if deployed is not None:
            log.info("using deployed Modal function %s.%s", self.app_name, fn_name)
            yield deployed
            return
        log.info("Modal app %r is not deployed; running it ephemerally for this command", self.app_name)
        try:
            app_module = importlib.import_module("modal_app.app")
        except ImportError as e:
            raise KernelBenchError(
                f"Modal app {self.app_name!r} is not deployed and modal_app/ is not importable here ({e}); "
                "run from a checkout of the repository, or deploy once with `modal deploy modal_app/app.py`"
            ) from None
        with contextlib.ExitStack() as stack:
            try:
                stack.enter_context(app_module.app.run())
            except Exception as e:  # auth, quota, image build: one line, not a traceback
                raise KernelBenchError(f"cannot start the Modal app {self.app_name!r}: {describe_exception(e)}") from None
            yield getattr(app_module, fn_name)

    # -- evaluation ---------------------------------------------------------------------------
    def run(self, jobs: Sequence[EvalJob], on_result: ResultCallback | None = None,
            progress: bool = True) -> list[KernelResult]:
        """Evaluate every job remotely; on_result fires in arrival order, the list comes back in job order.

        A job whose container failed (after Modal's own retries) gets a failed result of type
        ``RemoteError`` rather than disappearing. If the map itself breaks off, the results
        delivered so far have been passed to ``on_result`` and a KernelBenchError says how many.
        """
        all_jobs = list(jobs)
        if not all_jobs:
            return []
        # Kernels whose problem cannot run here get their own failed result; the rest are evaluated.
        out: list[KernelResult | None] = [None] * len(all_jobs)
        runnable: list[int] = []
        for i, job in enumerate(all_jobs):
            reason = modal_blocker(job.problem)
            if reason is None:
                runnable.append(i)
        if len(runnable) < len(all_jobs):
            log.warning("%d kernel(s) cannot run on Modal and get a not-runnable result",
                        len(all_jobs) - len(runnable))
        jobs = [all_jobs[i] for i in runnable]
        if jobs:
            self._approve(jobs)

        def deliver(k: int, result: KernelResult) -> None:
            out[runnable[k]] = result
            if on_result is not None:
                on_result(runnable[k], result)

        for i, job in enumerate(all_jobs):
            if i not in set(runnable):
                out[i] = not_runnable_result(job, modal_blocker(job.problem) or "", self.label)
                if on_result is not None:
                    on_result(i, out[i])
        if jobs:
            payloads = [job_to_wire(job, k) for k, job in enumerate(jobs)]
            with self._resolve("evaluate", self._function) as fn:
                fn = self._limited(fn)
                if self.max_cost_usd is None:
                    self._map(fn, jobs, payloads, deliver, progress)
                else:
                    self._map_within_budget(fn, jobs, payloads, deliver, progress)
        return [r for r in out if r is not None]

    # -- cost control -------------------------------------------------------------------------
    def _approve(self, jobs: list[EvalJob]) -> None:
        from kernelbench.runners.modal_cost import DispatchDeclined, estimate_jobs

        est = estimate_jobs(jobs, self.gpu)
        self.last_estimate = est
        log.info("Modal dispatch: %s", est.describe())
        if self.confirm is not None and not self.confirm(est):
            raise DispatchDeclined("nothing dispatched: the estimate was not confirmed")
        if self.dry_run:
            raise DispatchDeclined(f"dry run, nothing dispatched: {est.describe()}", dry_run=True)
        if self.max_cost_usd is not None and est.usd / max(1, est.n_jobs) > self.max_cost_usd:
            raise DispatchDeclined(f"nothing dispatched: one kernel is estimated at "
                                   f"${est.usd / est.n_jobs:.2f}, above --max-cost ${self.max_cost_usd:.2f}")

    def _limited(self, fn: Any) -> Any:
        if self.max_containers is not None and hasattr(fn, "with_options"):
            return fn.with_options(max_containers=self.max_containers)
        return fn

    def _map_within_budget(self, fn: Any, jobs: list[EvalJob], payloads: list[dict],
                           on_result: ResultCallback | None, progress: bool) -> list[KernelResult]:
        """Dispatch in batches; before each, stop if spent + its estimate would pass the cap."""
        from kernelbench.runners.modal_cost import (
            DispatchDeclined,
            batches,
            estimate_jobs,
            spent_usd,
        )

        cap = float(self.max_cost_usd)  # type: ignore[arg-type]
        price = self.last_estimate.usd_per_hour
        results: list[KernelResult] = []
        for batch in batches(len(jobs), self.max_containers or 8):
            spent = spent_usd((r.wall_time_s for r in results), price)
            next_cost = estimate_jobs([jobs[i] for i in batch], self.gpu).usd
            if spent + next_cost > cap:
                raise DispatchDeclined(
                    f"--max-cost ${cap:.2f} reached: {len(results)} of {len(jobs)} kernels evaluated for about "
                    f"${spent:.2f}, the next {len(batch)} are estimated at ${next_cost:.2f}; results so far are "
                    "kept, run again (with a higher cap) to resume")
            sub_jobs = [jobs[i] for i in batch]
            sub_payloads = [dict(payloads[i], index=k) for k, i in enumerate(batch)]

            def deliver(k: int, result: KernelResult, _batch: range = batch) -> None:
                if on_result is not None:
                    on_result(_batch[k], result)

            results.extend(self._map(fn, sub_jobs, sub_payloads, deliver, progress))
        return results

    def _map(self, fn: Any, jobs: list[EvalJob], payloads: list[dict], on_result: ResultCallback | None,
             progress: bool) -> list[KernelResult]:
        from tqdm import tqdm

        results: list[KernelResult | None] = [None] * len(jobs)
        failures: list[str] = []

        def deliver(index: int, result: KernelResult) -> None:
            results[index] = result
            if on_result is not None:
                on_result(index, result)

        bar = tqdm(total=len(jobs), desc=f"modal {self.gpu}", unit="job", file=sys.stderr, disable=not progress)
        try:
            outputs = _guarded_iter(lambda: fn.map(payloads, order_outputs=False, return_exceptions=True))
            for out in outputs:
                bar.update(1)
                if isinstance(out, _MapBroke):
                    done = sum(r is not None for r in results)
                    raise KernelBenchError(
                        f"Modal stopped after {done} of {len(jobs)} results ({describe_exception(out.error)}); "
                        "results so far are kept, run the command again to resume"
                    )
                if isinstance(out, BaseException):
                    log.warning("a Modal input failed: %s", describe_exception(out))
                    failures.append(describe_exception(out))
                    continue
                try:
                    index, result = result_from_wire(out)
                except WireFormatError as e:
                    failures.append(str(e))
                    continue
                if not 0 <= index < len(jobs) or results[index] is not None:
                    failures.append(f"result with unexpected index {index}")
                    continue
                if result.key != jobs[index].key:
                    failures.append(f"result {result.key} came back for job {jobs[index].key}")
                    continue
                result.runner = self.label
                deliver(index, result)
        finally:
            bar.close()

        missing = [i for i, r in enumerate(results) if r is None]
        if missing:
            reason = "; ".join(dict.fromkeys(failures)) or "no result came back"
            for i in missing:
                deliver(i, remote_failure(jobs[i], f"Modal could not run this job: {reason}", self.label))
        return [r for r in results if r is not None]

    # -- baselines ----------------------------------------------------------------------------
    def measure_baselines(self, problems: Iterable[Problem], modes: Sequence[str], settings: EvalSettings,
                          on_result: Any = None, progress: bool = True) -> list[dict[str, Any] | None]:
        """Measure each problem's reference on this GPU type; one wire dict per problem (None if it failed).

        Each returned dict has ``entries`` (mode -> BaselineEntry fields) and ``environment``;
        ``on_result(index, data)`` fires as each arrives so callers can write incrementally.
        """
        from tqdm import tqdm

        problems = list(problems)
        check_runnable_on_modal(problems)
        payloads = [baseline_request_to_wire(p, modes, settings, i) for i, p in enumerate(problems)]
        out_list: list[dict[str, Any] | None] = [None] * len(problems)
        if not problems:
            return out_list
        with self._resolve("baselines", self._baselines_function) as fn:
            bar = tqdm(total=len(problems), desc=f"baselines {self.gpu}", unit="problem", file=sys.stderr,
                       disable=not progress)
            try:
                for out in _guarded_iter(lambda: fn.map(payloads, order_outputs=False, return_exceptions=True)):
                    bar.update(1)
                    if isinstance(out, _MapBroke):
                        done = sum(o is not None for o in out_list)
                        raise KernelBenchError(
                            f"Modal stopped after {done} of {len(problems)} baselines "
                            f"({describe_exception(out.error)}); measured ones are kept, run again to resume"
                        )
                    if isinstance(out, BaseException):
                        log.warning("a Modal baseline input failed: %s", describe_exception(out))
                        continue
                    try:
                        _check_version(out, "baseline result")
                        index = int(out["index"])
                    except (WireFormatError, KeyError, TypeError, ValueError) as e:
                        log.warning("ignoring a malformed baseline result: %s", e)
                        continue
                    if 0 <= index < len(problems):
                        out_list[index] = out
                        if on_result is not None:
                            on_result(index, out)
            finally:
                bar.close()
        return out_list


def baseline_request_to_wire(problem: Problem, modes: Sequence[str], settings: EvalSettings,
                             index: int) -> dict[str, Any]:
    return {"wire_version": WIRE_VERSION, "index": index, "problem": problem_to_wire(problem),
            "modes": list(modes), "settings": settings_to_wire(settings)}


def baseline_request_from_wire(data: dict[str, Any]) -> tuple[int, Problem, list[str], EvalSettings]:
    _check_version(data, "baseline payload")
    try:
        return (int(data["index"]), problem_from_wire(data["problem"]), [str(m) for m in data["modes"]],
                settings_from_wire(data.get("settings") or {}))
    except (KeyError, TypeError, ValueError) as e:
        raise WireFormatError(f"malformed baseline payload: {e!r}") from None


@dataclasses.dataclass(frozen=True)
class _MapBroke:
    """Marks the point where iterating a map raised: the error is Modal's, not one input's."""

    error: Exception


def _guarded_iter(start: Callable[[], Iterable[Any]]) -> Iterator[Any]:
    """Yield the outputs of ``start()``; if starting or iterating raises, yield one ``_MapBroke`` and stop.

    Errors raised by the consumer (writing a result, say) are not caught here: they happen
    outside ``next()``, so a full disk is not misreported as a Modal failure.
    """
    try:
        it = iter(start())
    except Exception as e:
        yield _MapBroke(e)
        return
    while True:
        try:
            out = next(it)
        except StopIteration:
            return
        except Exception as e:
            yield _MapBroke(e)
            return
        yield out


def _lookup_deployed(app_name: str, fn_name: str) -> Any:
    """The deployed function, or None when the app (or that function) is not deployed."""
    import modal
    from modal.exception import NotFoundError

    try:
        fn = modal.Function.from_name(app_name, fn_name)
        fn.hydrate()
    except NotFoundError:
        return None
    except Exception as e:  # auth and connection errors: one clear line, not a gRPC traceback
        raise KernelBenchError(f"cannot reach Modal to look up {app_name}.{fn_name}: {describe_exception(e)}") from None
    return fn
