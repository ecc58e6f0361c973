"""The kernelbench Modal app: GPU functions and the ``modal run`` entry points.

Entry points (each lists its options with ``--help``; docs/modal.md explains every option)::

    modal run modal_app/app.py::evaluate_kernel --kernel-file my_kernel.py --level 1 --problem-id 19
    modal run modal_app/app.py::evaluate_run --run-dir runs/my_run
    modal run modal_app/app.py::baselines --gpu H100 --levels 1,2
    modal run modal_app/app.py::eval_submission --submission submissions/my_model.json

``modal deploy modal_app/app.py`` makes the GPU functions available to
``kernelbench ... --runner modal`` without starting the app each time.

One function per (kind, GPU type): ``evaluate_<gpu>``, ``evaluate_hub_<gpu>`` and ``baselines_<gpu>``.
Each runs in an image built for its GPU's architecture, with no network, no secrets, a per-input
timeout (and, for the two that run candidate code, no Modal API access and a fresh container per
kernel; ``evaluate_<gpu>`` mounts no Volume, ``evaluate_hub_<gpu>`` only the hub cache, read-only), and
retries that only ever fire for infrastructure failures: a kernel that fails comes back as a
result, it never raises. One CPU function, ``fetch_hub_models``, is trusted code only: it has the
network (and, if configured, the ``HF_TOKEN`` secret) and writes hub models into the hub cache Volume
before kernels of problems that load them (level 4) are sent.
"""

from __future__ import annotations

import logging
import sys
from pathlib import Path
from typing import Literal

_REPO = Path(__file__).resolve().parent.parent
if (_REPO / "modal_app").is_dir() and str(_REPO) not in sys.path:
    sys.path.insert(0, str(_REPO))  # `modal run modal_app/app.py` from a checkout that is not pip-installed

import modal  # noqa: E402

from kernelbench.backends import backend_names  # noqa: E402
from kernelbench.errors import KernelBenchError  # noqa: E402
from kernelbench.evaluation.settings import TOLERANCE_MODES, EvalSettings  # noqa: E402
from kernelbench.hardware import MODAL_GPUS, modal_gpu_name  # noqa: E402
from kernelbench.problems import source_names  # noqa: E402
from kernelbench.results import PRECISIONS  # noqa: E402
from kernelbench.runners.modal_runner import APP_NAME, ModalRunner  # noqa: E402
from modal_app import versions  # noqa: E402
from modal_app.image import build_image, recipe_for, recipe_for_fetch  # noqa: E402

# Choices shown by `modal run ... --help`, taken from the library so they cannot drift.
GpuName = Literal[MODAL_GPUS]
Source = Literal[source_names()]
Backend = Literal[backend_names()]
BackendOrRun = Literal[("", *backend_names())]
Precision = Literal[PRECISIONS]
ToleranceMode = Literal[TOLERANCE_MODES]

app = modal.App(APP_NAME)
cache_volume = modal.Volume.from_name(versions.CACHE_VOLUME_NAME, create_if_missing=True)
hub_volume = modal.Volume.from_name(versions.HUB_VOLUME_NAME, create_if_missing=True)
IMAGES = {gpu: build_image(recipe_for(gpu)) for gpu in versions.GPUS}
FETCH_IMAGE = build_image(recipe_for_fetch())


def _read_only(volume):
    """The Volume mounted read-only (``with_mount_options`` in current Modal, ``read_only()`` before)."""
    if hasattr(volume, "with_mount_options"):
        return volume.with_mount_options(read_only=True)
    return volume.read_only()


def _function_options(gpu: str, timeout_s: int, untrusted: bool, hub: bool = False) -> dict:
    """Options of one GPU function. ``untrusted``: it runs candidate code (``evaluate_<gpu>``).

    Such a container is a Restricted Function (no Modal API: no Queue, Dict, Secret or other Function;
    docs/modal.md), serves one input and is thrown away (nothing one kernel leaves behind meets the next),
    and mounts no writable Volume: its builds stay on its own disk, so no kernel can plant a build for
    another. ``hub``: it also mounts the hub cache read-only (problems that load a hub model, level 4).
    Baselines run only the trusted reference: the shared compile cache, and the hub cache read-only.
    """
    options = dict(
        image=IMAGES[gpu],
        gpu=versions.GPUS[gpu].modal_gpu,
        timeout=timeout_s,
        startup_timeout=versions.STARTUP_TIMEOUT_S,
        retries=modal.Retries(max_retries=versions.MAX_RETRIES, backoff_coefficient=2.0,
                              initial_delay=versions.RETRY_INITIAL_DELAY_S),
        block_network=True,
        cpu=versions.CPU_CORES,
        memory=versions.MEMORY_MIB,
        scaledown_window=versions.SCALEDOWN_WINDOW_S,
    )
    if untrusted:
        options.update(restrict_modal_access=True, single_use_containers=True)
        if hub:
            options.update(volumes={versions.HUB_MOUNT: _read_only(hub_volume)}, memory=versions.HUB_MEMORY_MIB)
    else:
        options.update(volumes={versions.CACHE_MOUNT: cache_volume, versions.HUB_MOUNT: _read_only(hub_volume)})
    return options


def _hf_secrets() -> list:
    """The HF token for the trusted fetch only: a Modal Secret named by ``$KB_MODAL_HF_SECRET``, if set."""
    import os

    name = os.environ.get(versions.HF_SECRET_ENV, "").strip()
    return [modal.Secret.from_name(name, required_keys=["HF_TOKEN"])] if name else []


def _cache_sync():
    import os

    from modal_app.worker import CacheSync

    roots = [os.environ.get("KERNELBENCH_CACHE_DIR", f"{versions.CACHE_MOUNT}/kernelbench"),
             os.environ.get("TRITON_CACHE_DIR", f"{versions.CACHE_MOUNT}/triton")]
    return CacheSync(roots, reload=cache_volume.reload, commit=cache_volume.commit)


def _evaluate(payload: dict, gpu: str, hub: bool = False) -> dict:
    import os

    from kernelbench.problems.hub import hub_cache_dir
    from modal_app import health, worker

    if worker.in_modal_container():
        logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
        # No writable Volume here (see _function_options): builds and Triton's cache on the container's own disk.
        os.environ["KERNELBENCH_CACHE_DIR"] = versions.LOCAL_CACHE_DIR + "/kernelbench"
        os.environ["TRITON_CACHE_DIR"] = versions.LOCAL_CACHE_DIR + "/triton"
        return worker.evaluate_payload(payload, gpu=gpu, probe=health.probe_gpu,
                                       hub_cache=versions.HUB_CACHE_DIR if hub else None)
    # .local(): the CPU path, nothing to probe or sync; the hub cache is this machine's ($HF_HUB_CACHE).
    return worker.evaluate_payload(payload, gpu=gpu, hub_cache=hub_cache_dir() if hub else None)


def _fetch(payload: dict) -> dict:
    import os

    from kernelbench.problems.hub import hub_cache_dir
    from modal_app import worker

    if worker.in_modal_container():
        logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
        return worker.fetch_hub_payload(payload, cache_dir=versions.HUB_CACHE_DIR,
                                        token=os.environ.get("HF_TOKEN") or None, commit=hub_volume.commit)
    return worker.fetch_hub_payload(payload, cache_dir=hub_cache_dir())  # .local(): this machine's hub cache


def _baselines(payload: dict) -> dict:
    from modal_app import worker

    if worker.in_modal_container():
        logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
        return worker.baselines_payload(payload, cache=_cache_sync())
    return worker.baselines_payload(payload)


# ---- GPU functions: one per GPU type and kind; names are what ModalRunner looks up ----------

@app.function(**_function_options("H100", versions.EVALUATE_TIMEOUT_S, untrusted=True))
def evaluate_h100(payload: dict) -> dict:
    return _evaluate(payload, "H100")


@app.function(**_function_options("A100-80GB", versions.EVALUATE_TIMEOUT_S, untrusted=True))
def evaluate_a100_80gb(payload: dict) -> dict:
    return _evaluate(payload, "A100-80GB")


@app.function(**_function_options("L40S", versions.EVALUATE_TIMEOUT_S, untrusted=True))
def evaluate_l40s(payload: dict) -> dict:
    return _evaluate(payload, "L40S")


@app.function(**_function_options("B200", versions.EVALUATE_TIMEOUT_S, untrusted=True))
def evaluate_b200(payload: dict) -> dict:
    return _evaluate(payload, "B200")


@app.function(**_function_options("H100", versions.EVALUATE_TIMEOUT_S, untrusted=True, hub=True))
def evaluate_hub_h100(payload: dict) -> dict:
    return _evaluate(payload, "H100", hub=True)


@app.function(**_function_options("A100-80GB", versions.EVALUATE_TIMEOUT_S, untrusted=True, hub=True))
def evaluate_hub_a100_80gb(payload: dict) -> dict:
    return _evaluate(payload, "A100-80GB", hub=True)


@app.function(**_function_options("L40S", versions.EVALUATE_TIMEOUT_S, untrusted=True, hub=True))
def evaluate_hub_l40s(payload: dict) -> dict:
    return _evaluate(payload, "L40S", hub=True)


@app.function(**_function_options("B200", versions.EVALUATE_TIMEOUT_S, untrusted=True, hub=True))
def evaluate_hub_b200(payload: dict) -> dict:
    return _evaluate(payload, "B200", hub=True)


@app.function(**_function_options("H100", versions.BASELINES_TIMEOUT_S, untrusted=False))
def baselines_h100(payload: dict) -> dict:
    return _baselines(payload)


@app.function(**_function_options("A100-80GB", versions.BASELINES_TIMEOUT_S, untrusted=False))
def baselines_a100_80gb(payload: dict) -> dict:
    return _baselines(payload)


@app.function(**_function_options("L40S", versions.BASELINES_TIMEOUT_S, untrusted=False))
def baselines_l40s(payload: dict) -> dict:
    return _baselines(payload)


@app.function(**_function_options("B200", versions.BASELINES_TIMEOUT_S, untrusted=False))
def baselines_b200(payload: dict) -> dict:
    return _baselines(payload)


@app.function(image=FETCH_IMAGE, timeout=versions.FETCH_TIMEOUT_S, startup_timeout=versions.STARTUP_TIMEOUT_S,
              retries=modal.Retries(max_retries=versions.MAX_RETRIES, backoff_coefficient=2.0,
                                    initial_delay=versions.RETRY_INITIAL_DELAY_S),
              cpu=versions.FETCH_CPU_CORES, memory=versions.FETCH_MEMORY_MIB,
              volumes={versions.HUB_MOUNT: hub_volume}, secrets=_hf_secrets())
def fetch_hub_models(payload: dict) -> dict:
    """Trusted: download hub models into the hub cache Volume. Runs no problem or candidate code."""
    return _fetch(payload)


EVALUATE_FUNCTIONS = {"H100": evaluate_h100, "A100-80GB": evaluate_a100_80gb, "L40S": evaluate_l40s,
                      "B200": evaluate_b200}
EVALUATE_HUB_FUNCTIONS = {"H100": evaluate_hub_h100, "A100-80GB": evaluate_hub_a100_80gb, "L40S": evaluate_hub_l40s,
                          "B200": evaluate_hub_b200}
BASELINE_FUNCTIONS = {"H100": baselines_h100, "A100-80GB": baselines_a100_80gb, "L40S": baselines_l40s,
                      "B200": baselines_b200}
if not (tuple(EVALUATE_FUNCTIONS) == tuple(EVALUATE_HUB_FUNCTIONS) == MODAL_GPUS == tuple(BASELINE_FUNCTIONS)
        == tuple(versions.GPUS)):
    raise RuntimeError("modal_app: the GPU functions do not match kernelbench.hardware.MODAL_GPUS")


def runner_for(gpu: str) -> ModalRunner:
    """A runner bound to this (running) app's functions for ``gpu``."""
    name = modal_gpu_name(gpu)
    return ModalRunner(gpu=name, function=EVALUATE_FUNCTIONS[name], baselines_function=BASELINE_FUNCTIONS[name],
                       hub_function=EVALUATE_HUB_FUNCTIONS[name], fetch_function=fetch_hub_models,
                       confirm=_print_estimate)


def _print_estimate(estimate) -> bool:
    """Every entry point shows what it is about to spend before it dispatches (`modal run` has no prompt)."""
    print(f"Modal: {estimate.describe()}", file=sys.stderr, flush=True)
    return True


# ---- entry points ---------------------------------------------------------------------------

def _fail(e: Exception) -> None:
    print(f"error: {e}", file=sys.stderr)
    raise SystemExit(2)


def _setup_logging(verbose: bool) -> None:
    logging.basicConfig(level=logging.INFO if verbose else logging.WARNING, stream=sys.stderr,
                        format="%(levelname)s %(name)s: %(message)s")


@app.local_entrypoint()
def evaluate_kernel(
    kernel_file: str,
    level: int,
    problem_id: int,
    gpu: GpuName = "H100",
    source: Source = "builtin",
    path: str = "",
    backend: Backend = EvalSettings.backend,
    precision: Precision = EvalSettings.precision,
    correctness_trials: int = EvalSettings.correctness_trials,
    tolerance_mode: ToleranceMode = EvalSettings.tolerance_mode,
    timing: bool = EvalSettings.measure_timing,
    timing_budget: float = EvalSettings.timing_budget_s,
    sample_id: int = 0,
    output: str = "",
    verbose: bool = False,
):
    """Evaluate one kernel file against one problem on a Modal GPU."""
    from modal_app import commands

    _setup_logging(verbose)
    try:
        problem = commands.load_problem_set(source, path, [level]).get(level, problem_id)
        settings = commands.make_settings(backend, precision, correctness_trials, tolerance_mode, timing,
                                          timing_budget)
        result = commands.evaluate_kernel_file(kernel_file, problem, settings, runner_for(gpu),
                                               sample_id=sample_id, output=output or None)
    except KernelBenchError as e:
        _fail(e)
    print(commands.results_table([result]))
    if result.error is not None and result.error.traceback and verbose:
        print(result.error.traceback, file=sys.stderr)
    if output:
        print(f"result written to {output}")


@app.local_entrypoint()
def check(gpu: GpuName = "L40S", backend: Backend = "triton", hub: bool = False, verbose: bool = False):
    """One cheap end-to-end run: build the image, evaluate and time one worked solution, say what works.

    ``--hub`` adds a level-4 style kernel on gpt2: the trusted fetch downloads it into the hub cache
    Volume and the kernel is evaluated with the Volume read-only and no network.
    """
    from modal_app import commands

    _setup_logging(verbose)
    jobs = [commands.check_job(backend)] + ([commands.check_hub_job()] if hub else [])
    try:
        runner = runner_for(gpu)
        result, *hub_result = runner.run(jobs, progress=False)
    except KernelBenchError as e:
        _fail(e)
    items = commands.check_report(result, gpu) + (commands.check_hub_report(hub_result[0]) if hub else [])
    print(commands.check_text(items))
    if not all(i.ok for i in items):
        raise SystemExit(1)


@app.local_entrypoint()
def evaluate_run(
    run_dir: str,
    gpu: GpuName = "H100",
    level: int = 0,
    source: Source = "builtin",
    path: str = "",
    backend: BackendOrRun = "",
    precision: Precision = EvalSettings.precision,
    correctness_trials: int = EvalSettings.correctness_trials,
    tolerance_mode: ToleranceMode = EvalSettings.tolerance_mode,
    timing: bool = EvalSettings.measure_timing,
    timing_budget: float = EvalSettings.timing_budget_s,
    verbose: bool = False,
):
    """Evaluate every kernel in a run directory that has no result yet (resumable)."""
    from modal_app import commands

    _setup_logging(verbose)
    try:
        settings = commands.make_settings(backend or commands.run_backend(run_dir), precision, correctness_trials,
                                          tolerance_mode, timing, timing_budget)
        problems = commands.load_problem_set(source, path, [commands.run_level(run_dir, level or None)])
        done = commands.evaluate_run_dir(run_dir, problems, settings, runner_for(gpu), level=level or None)
    except KernelBenchError as e:
        _fail(e)
    print(commands.results_table(done.results))
    print(f"{done.run_dir}: {commands.results_summary(done.results)}; evaluated {done.n_evaluated} now, "
          f"{done.n_reused} from before")


@app.local_entrypoint()
def baselines(
    gpu: GpuName = "H100",
    levels: str = "1,2,3",
    modes: str = "eager",
    source: Source = "builtin",
    path: str = "",
    precision: Precision = EvalSettings.precision,
    timing_budget: float = EvalSettings.timing_budget_s,
    output: str = "",
    resume: bool = True,
    verbose: bool = False,
):
    """Measure the PyTorch reference of every problem in the given levels on a Modal GPU."""
    from kernelbench.baselines import baseline_path_for_gpu, baselines_dir_for
    from kernelbench.problems.identity import identify
    from modal_app import commands

    _setup_logging(verbose)
    try:
        problems = commands.load_problem_set(source, path, commands.parse_levels(levels))
        mode_list = [m.strip() for m in modes.split(",") if m.strip()]
        settings = commands.make_settings("torch", precision, timing_budget=timing_budget)
        # baselines/kernelbench/<GPU>.json for the official set, baselines/<GPU>.json for the built-in suite
        out = output or str(baseline_path_for_gpu(gpu, baselines_dir_for(identify(problems).name)))
        run = commands.measure_baselines(problems, mode_list, settings, runner_for(gpu), out, resume=resume)
    except KernelBenchError as e:
        _fail(e)
    print(f"{run.path}: measured {run.n_measured} problem(s), kept {run.n_reused}, "
          f"{len(run.failures)} failed; GPU: {', '.join(sorted(run.gpu_names)) or '-'}")
    for line in run.failures:
        print(f"  failed: {line}", file=sys.stderr)
    if run.failures:
        raise SystemExit(1)


@app.local_entrypoint()
def eval_submission(
    submission: str,
    gpu: GpuName = "H100",
    runs_dir: str = "runs",
    results_dir: str = "data/evaluations",
    entry: str = "",
    source: Source = "kernelbench",
    path: str = "",
    precision: Precision = EvalSettings.precision,
    correctness_trials: int = EvalSettings.correctness_trials,
    tolerance_mode: ToleranceMode = EvalSettings.tolerance_mode,
    timing: bool = EvalSettings.measure_timing,
    timing_budget: float = EvalSettings.timing_budget_s,
    verbose: bool = False,
):
    """Evaluate a leaderboard submission JSON on a Modal GPU and write its results bundle (the board's problems:
    the official levels 1-3 by default, ``--source builtin`` for the demo board)."""
    from kernelbench.problems import load_board_problems
    from modal_app import commands

    _setup_logging(verbose)
    try:
        problems = load_board_problems(source, path or None)
        settings = commands.make_settings("cuda", precision, correctness_trials, tolerance_mode, timing,
                                          timing_budget)
        ev = commands.evaluate_submission_file(submission, problems, settings, runner_for(gpu), runs_dir=runs_dir,
                                               results_dir=results_dir or None, entry=entry or None)
    except KernelBenchError as e:
        _fail(e)
    print(commands.results_table(ev.results))
    print(f"{ev.entry} on {ev.gpu}: {commands.results_summary(ev.results)}; evaluated {ev.n_evaluated} now, "
          f"{ev.n_reused} from before")
    if ev.bundle_path:
        print(f"results bundle: {ev.bundle_path}")
    else:
        print("no results bundle yet: some kernels have no result (run the same command again)")
