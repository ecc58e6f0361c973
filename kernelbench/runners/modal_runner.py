"""Evaluate on Modal cloud GPUs: fan jobs out with ``.map`` and write each result as it returns.

The Modal app itself lives in ``modal_app/``; this module is the client side. It only needs
``modal`` when a run starts (imported lazily), so the CLI's ``--help`` and the evaluator stay
import-light.

Jobs and results cross the wire as versioned JSON-able dicts: :mod:`kernelbench.runners.wire`.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import os
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from types import ModuleType
from typing import Any

from kernelbench.errors import KernelBenchError
from kernelbench.evaluation.settings import EvalJob, EvalSettings
from kernelbench.hardware import modal_gpu_name
from kernelbench.problems.model import Problem
from kernelbench.results import KernelResult, Stage, StageError
from kernelbench.runners.base import ResultCallback
from kernelbench.runners.modal_problems import (
    check_runnable_on_modal,
    hub_models_of,
    modal_blocker,
    not_runnable_result,
)
from kernelbench.runners.wire import (
    WIRE_VERSION,
    WireFormatError,
    baseline_request_to_wire,
    check_version,
    fetch_reply_from_wire,
    fetch_request_to_wire,
    job_to_wire,
    result_from_wire,
)

log = logging.getLogger(__name__)

#: The app name ``modal deploy modal_app/app.py`` registers; the runner looks functions up under it.
APP_NAME = "kernelbench"
#: The error type of a result that stands in for a job Modal could not run (infrastructure failure).
REMOTE_ERROR_TYPE = "RemoteError"

TOKEN_HELP = (
    "no Modal token found (neither ~/.modal.toml nor MODAL_TOKEN_ID and MODAL_TOKEN_SECRET): "
    "run `pip install modal && modal token new` once, then retry"
)


# ---------------------------------------------------------------------------------------------
# Function names


#: The kinds of GPU function: ``evaluate`` (candidate code, no Volume), ``evaluate_hub`` (candidate code
#: for problems that load a hub model: the hub cache Volume mounted read-only) and ``baselines``.
FUNCTION_KINDS: tuple[str, ...] = ("evaluate", "evaluate_hub", "baselines")


def function_name(kind: str, gpu: str) -> str:
    """``evaluate_h100``, ``baselines_a100_80gb``: one Modal function per (kind, GPU type)."""
    if kind not in FUNCTION_KINDS:
        raise ValueError(f"unknown Modal function kind {kind!r}")
    return f"{kind}_{modal_gpu_name(gpu).lower().replace('-', '_')}"


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


#: The trusted function that fills the hub cache Volume (``modal_app/app.py``).
FETCH_FUNCTION = "fetch_hub_models"


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
    one, the runner looks up the deployed app's function and, when it is not deployed, runs the app
    ephemerally if it was given ``app_loader``: a callable that imports the app's module (``modal_app.app``,
    which the ``kernelbench`` command passes; the library never imports the Modal app itself).
    """

    name = "modal"

    def __init__(self, gpu: str = "H100", function: Any = None, app_name: str = APP_NAME,
                 baselines_function: Any = None, devices: Sequence[str] | None = None,
                 max_containers: int | None = None, max_cost_usd: float | None = None,
                 confirm: Callable[[Any], bool] | None = None, dry_run: bool = False,
                 hub_function: Any = None, fetch_function: Any = None,
                 app_loader: Callable[[], ModuleType] | None = None):
        """``confirm(estimate)`` sees the :class:`~kernelbench.runners.modal_cost.CostEstimate` before
        anything is dispatched and returns False to send nothing; ``dry_run`` sends nothing after it.
        ``max_containers`` caps Modal's parallelism; ``max_cost_usd`` dispatches in batches and stops
        before the batch whose estimate would take the spend (measured so far) past the cap.
        ``hub_function`` evaluates kernels of problems that load a hub model (the hub cache mounted
        read-only) and ``fetch_function`` (trusted: network, optional HF token) fills that cache first;
        both default to the app's functions, like ``function``."""
        self.gpu = modal_gpu_name(gpu)
        self.app_name = app_name
        self._function = function
        self._baselines_function = baselines_function
        self._hub_function = hub_function
        self._fetch_function = fetch_function
        self.app_loader = app_loader
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
    def _resolve_all(self, wanted: dict[str, Any]) -> Iterator[dict[str, Any]]:
        """Modal function name -> callable, for every name in ``wanted`` (given objects are used as they are).

        The rest come from the deployed app, or, when it is not deployed, from one ephemeral run of
        ``modal_app/app.py`` for the length of the block (started once, however many are needed).
        """
        found = {name: fn for name, fn in wanted.items() if fn is not None}
        todo = [name for name in wanted if name not in found]
        if not todo:
            yield found
            return
        require_modal_token()
        deployed = {name: _lookup_deployed(self.app_name, name) for name in todo}
        if all(fn is not None for fn in deployed.values()):
            log.info("using deployed Modal functions %s", ", ".join(f"{self.app_name}.{n}" for n in todo))
            yield {**found, **deployed}
            return
        if self.app_loader is None:
            raise KernelBenchError(f"Modal app {self.app_name!r} is not deployed (or is older than this client); "
                                   "deploy it once with `modal deploy modal_app/app.py`")
        log.info("Modal app %r is not deployed (or is older than this client); running it ephemerally for this "
                 "command", self.app_name)
        try:
            app_module = self.app_loader()
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
            yield {**found, **{name: getattr(app_module, name) for name in todo}}

    @contextlib.contextmanager
    def _resolve(self, kind: str, given: Any) -> Iterator[Any]:
        name = function_name(kind, self.gpu)
        with self._resolve_all({name: given}) as fns:
            yield fns[name]

    # -- hub models ---------------------------------------------------------------------------
    def _fetch_hub(self, fetch_fn: Any, models: Sequence[str]) -> dict[str, str | None]:
        """Have the trusted function put ``models`` into the hub cache; model -> None or why it failed."""
        if not models:
            return {}
        log.info("fetching %d hub model(s) into the cache Volume: %s", len(models), ", ".join(models))
        try:
            reply = fetch_fn.remote(fetch_request_to_wire(models))
            status = fetch_reply_from_wire(reply, models)
        except Exception as e:  # the function itself failed (after Modal's retries), or answered garbage
            reason = f"the trusted hub fetch failed: {describe_exception(e)}"
            return {m: reason for m in models}
        for model, error in status.items():
            if error:
                log.warning("hub model %s is not available: %s", model, error)
        return status

    # -- evaluation ---------------------------------------------------------------------------
    def run(self, jobs: Sequence[EvalJob], on_result: ResultCallback | None = None,
            progress: bool = True) -> list[KernelResult]:
        """Evaluate every job remotely; on_result fires in arrival order, the list comes back in job order.

        A job whose container failed (after Modal's own retries) gets a failed result of type
        ``RemoteError`` rather than disappearing. If the map itself breaks off, the results
        delivered so far have been passed to ``on_result`` and a KernelBenchError says how many.

        Kernels of problems that cannot run on Modal get their own ``NotRunnableOnModal`` result
        and are not sent. Kernels of problems that load a hub model go, after the trusted fetch has
        put those models into the hub cache Volume, to ``evaluate_hub_<gpu>``, which mounts it
        read-only; where the fetch failed, the kernel gets an infrastructure result (run again to retry).
        """
        all_jobs = list(jobs)
        if not all_jobs:
            return []
        out: list[KernelResult | None] = [None] * len(all_jobs)

        def deliver(i: int, result: KernelResult) -> None:
            out[i] = result
            if on_result is not None:
                on_result(i, result)

        plain: list[int] = []
        hub: list[int] = []
        blocked: dict[int, str] = {}
        for i, job in enumerate(all_jobs):
            reason = modal_blocker(job.problem)
            if reason is not None:
                blocked[i] = reason
            else:
                (hub if hub_models_of(job.problem) else plain).append(i)
        if blocked:
            log.warning("%d kernel(s) cannot run on Modal and get a not-runnable result", len(blocked))
        if plain or hub:
            self._approve([all_jobs[i] for i in plain + hub])
        for i, reason in blocked.items():
            deliver(i, not_runnable_result(all_jobs[i], reason, self.label))
        if not (plain or hub):
            return [r for r in out if r is not None]

        wanted = {}
        if plain:
            wanted[function_name("evaluate", self.gpu)] = self._function
        if hub:
            wanted[function_name("evaluate_hub", self.gpu)] = self._hub_function
            wanted[FETCH_FUNCTION] = self._fetch_function
        with self._resolve_all(wanted) as fns:
            if hub:
                models = sorted({m for i in hub for m in hub_models_of(all_jobs[i].problem)})
                status = self._fetch_hub(fns[FETCH_FUNCTION], models)
                ready = []
                for i in hub:
                    errors = [f"{m}: {status[m]}" for m in hub_models_of(all_jobs[i].problem) if status.get(m)]
                    if errors:
                        deliver(i, remote_failure(all_jobs[i], "the hub model could not be put into the cache "
                                                  f"({'; '.join(errors)}); run again to retry", self.label))
                    else:
                        ready.append(i)
                hub = ready
            spent: list[KernelResult] = []
            for kind, indices in (("evaluate", plain), ("evaluate_hub", hub)):
                if not indices:
                    continue
                group = [all_jobs[i] for i in indices]
                payloads = [job_to_wire(job, k) for k, job in enumerate(group)]

                def deliver_group(k: int, result: KernelResult, _indices: list[int] = indices) -> None:
                    deliver(_indices[k], result)

                fn = self._limited(fns[function_name(kind, self.gpu)])
                if self.max_cost_usd is None:
                    spent.extend(self._map(fn, group, payloads, deliver_group, progress))
                else:
                    spent.extend(self._map_within_budget(fn, group, payloads, deliver_group, progress, spent))
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
                           on_result: ResultCallback | None, progress: bool,
                           earlier: Sequence[KernelResult] = ()) -> list[KernelResult]:
        """Dispatch in batches; before each, stop if spent (``earlier`` results too) + its estimate would pass the cap."""
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
            spent = spent_usd((r.wall_time_s for r in [*earlier, *results]), price)
            next_cost = estimate_jobs([jobs[i] for i in batch], self.gpu).usd
            if spent + next_cost > cap:
                raise DispatchDeclined(
                    f"--max-cost ${cap:.2f} reached: {len(earlier) + len(results)} of {len(earlier) + len(jobs)} kernels "
                    "evaluated for about "
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
        from kernelbench.progress import progress_bar

        results: list[KernelResult | None] = [None] * len(jobs)
        failures: list[str] = []

        def deliver(index: int, result: KernelResult) -> None:
            results[index] = result
            if on_result is not None:
                on_result(index, result)

        bar = progress_bar(total=len(jobs), desc=f"modal {self.gpu}", unit="job", enabled=progress)
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
        from kernelbench.progress import progress_bar

        problems = list(problems)
        check_runnable_on_modal(problems)
        out_list: list[dict[str, Any] | None] = [None] * len(problems)
        if not problems:
            return out_list
        needs = {i: hub_models_of(p) for i, p in enumerate(problems)}
        wanted = {function_name("baselines", self.gpu): self._baselines_function}
        if any(needs.values()):
            wanted[FETCH_FUNCTION] = self._fetch_function
        with self._resolve_all(wanted) as fns:
            fn = fns[function_name("baselines", self.gpu)]
            send = list(range(len(problems)))
            if any(needs.values()):
                status = self._fetch_hub(fns[FETCH_FUNCTION], sorted({m for ms in needs.values() for m in ms}))
                send = []
                for i, p in enumerate(problems):
                    errors = [f"{m}: {status[m]}" for m in needs[i] if status.get(m)]
                    if not errors:
                        send.append(i)
                        continue
                    out_list[i] = {"wire_version": WIRE_VERSION, "index": i, "level": p.level,
                                   "problem_id": p.problem_id, "filename": p.filename, "entries": {},
                                   "error": f"the hub model could not be put into the cache ({'; '.join(errors)})"}
                    if on_result is not None:
                        on_result(i, out_list[i])
            payloads = [baseline_request_to_wire(problems[i], modes, settings, i) for i in send]
            if not payloads:
                return out_list
            bar = progress_bar(total=len(payloads), desc=f"baselines {self.gpu}", unit="problem", enabled=progress)
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
                        check_version(out, "baseline result")
                        index = int(out["index"])
                    except (WireFormatError, KeyError, TypeError, ValueError) as e:
                        log.warning("ignoring a malformed baseline result: %s", e)
                        continue
                    if index in send and out_list[index] is None:
                        out_list[index] = out
                        if on_result is not None:
                            on_result(index, out)
            finally:
                bar.close()
        return out_list


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
