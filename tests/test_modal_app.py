"""The Modal app, offline: its objects build, its GPU functions carry the right options, the
image recipe holds what evaluation needs, ``modal run ... --help`` lists the entry points'
options, and a GPU function's body run locally gives the local runner's verdict.
"""

from __future__ import annotations

import importlib.util
import re
import subprocess
import sys
from pathlib import Path

import pytest
from kbtesting import candidate_of, problem_source

from kernelbench.hardware import MODAL_GPUS
from kernelbench.runners.modal_runner import ModalRunner, function_name
from kernelbench.runners.wire import job_to_wire, result_from_wire

modal = pytest.importorskip("modal")

REPO = Path(__file__).resolve().parent.parent
HAVE_EVALUATOR = importlib.util.find_spec("kernelbench.evaluation.parent") is not None

ARCH = {"H100": "9.0a", "A100-80GB": "8.0", "L40S": "8.9", "B200": "10.0a"}  # a: wgmma / tcgen05 usable


@pytest.fixture(scope="module")
def app_module():
    import modal_app.app as app_module

    return app_module


def test_app_builds_offline_with_one_function_per_gpu_and_kind(app_module):
    assert isinstance(app_module.app, modal.App)
    assert app_module.app.name == "kernelbench"
    for gpu in MODAL_GPUS:
        for kind in ("evaluate", "baselines"):
            fn = getattr(app_module, function_name(kind, gpu))
            assert isinstance(fn, modal.Function)
    assert tuple(app_module.EVALUATE_FUNCTIONS) == MODAL_GPUS


def test_the_command_hands_the_runner_the_app_the_library_never_imports(app_module):
    """``kernelbench ... --runner modal`` passes a loader for the ephemeral fallback, and what it loads has
    every function the runner asks for by name; without a loader the runner has no way to the app."""
    import argparse

    from kernelbench.cli.common import load_modal_app, runner_options
    from kernelbench.runners import get_runner
    from kernelbench.runners.modal_runner import FETCH_FUNCTION, FUNCTION_KINDS

    args = argparse.Namespace(runner="modal", max_containers=None, max_gpu_cost=None, dry_run=True, yes=False)
    runner = get_runner("modal", gpu="l40s", **runner_options(args))
    assert runner.app_loader is load_modal_app and load_modal_app() is app_module
    assert isinstance(app_module.app, modal.App) and isinstance(getattr(app_module, FETCH_FUNCTION), modal.Function)
    for kind in FUNCTION_KINDS:
        assert isinstance(getattr(app_module, function_name(kind, runner.gpu)), modal.Function)
    assert ModalRunner(gpu="H100", dry_run=True).app_loader is None
    assert runner_options(argparse.Namespace(runner="local")) == {}


@pytest.mark.parametrize("gpu", MODAL_GPUS)
@pytest.mark.parametrize("kind", ["evaluate", "baselines"])
def test_gpu_function_options(app_module, gpu, kind):
    from modal_app import versions

    info = getattr(app_module, function_name(kind, gpu)).info()
    requested = "H100!" if gpu == "H100" else gpu  # H100 pinned: no silent upgrade to H200
    assert info.gpus == [(requested, 1)]
    assert info.timeout == (versions.EVALUATE_TIMEOUT_S if kind == "evaluate" else versions.BASELINES_TIMEOUT_S)
    assert 0 < info.max_retries <= 3
    assert info.block_network is True  # no network for the code under evaluation
    assert info.secrets == []  # no secrets mounted (function env would show up here as a secret)
    if kind == "evaluate":  # candidate code: a Restricted Function, one kernel per container, no Volume
        assert info.restrict_modal_access is True and info.single_use_containers is True
        assert info.volumes == {}
    else:  # the trusted reference only: the shared compile cache, and the hub cache read-only (level 4)
        assert info.restrict_modal_access is False and info.single_use_containers is False
        assert sorted(info.volumes) == ["/cache", "/hub"]
        assert info.volumes["/cache"].name == "kernelbench-compile-cache"
        assert info.volumes["/cache"].read_only is False
        assert info.volumes["/hub"].name == "kernelbench-hub-cache" and info.volumes["/hub"].read_only is True


@pytest.mark.parametrize("gpu", MODAL_GPUS)
def test_image_recipe_targets_its_gpu_and_pins_the_tested_stack(gpu):
    from modal_app import versions
    from modal_app.image import recipe_for

    recipe = recipe_for(gpu)
    assert recipe.env["TORCH_CUDA_ARCH_LIST"] == ARCH[gpu]
    assert re.fullmatch(r"nvidia/cuda:13\.0\.\d+-devel-ubuntu\d\d\.\d\d", recipe.base_image)
    assert recipe.python_version == "3.12"
    pins = recipe.pinned()
    assert pins["torch"] == "2.11.0+cu130"
    assert pins["triton"] == "3.6.0"
    assert "nvidia-cutlass-dsl[cu13]" in pins  # the CUTLASS Python DSL, built for the image's CUDA 13
    torch_step = next(step for step in recipe.pip_steps if any(p.startswith("torch==") for p in step[0]))
    assert torch_step[1] == "https://download.pytorch.org/whl/cu130"
    assert recipe.env["KERNELBENCH_CACHE_DIR"].startswith(versions.CACHE_MOUNT + "/")
    assert recipe.env["TRITON_CACHE_DIR"].startswith(versions.CACHE_MOUNT + "/")
    steps = recipe.steps()
    assert steps[0][0] == "from_registry"
    assert steps[-1][0] == "add_local_python_source" and steps[-1][1][0] == ("kernelbench", "modal_app")  # source last
    assert [kind for kind, _ in steps].count("add_local_python_source") == 1


def test_image_recipe_pins_every_runtime_dependency_of_the_package():
    tomllib = pytest.importorskip("tomllib")

    from modal_app.image import recipe_for

    deps = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["dependencies"]
    names = {re.split(r"[<>=!~;\[ ]", d, maxsplit=1)[0].strip().lower() for d in deps}
    pins = recipe_for("H100").pinned()
    missing = sorted(names - set(pins))
    assert not missing, f"pyproject dependencies missing from the Modal image: {missing}"
    assert all(re.fullmatch(r"\d+(\.\d+)*(\+\w+)?", v) for v in pins.values())


def test_images_differ_only_in_their_architecture():
    from modal_app.image import recipe_for

    base = recipe_for("H100")
    for gpu in MODAL_GPUS:
        other = recipe_for(gpu)
        assert other.pip_steps == base.pip_steps and other.base_image == base.base_image
        assert {k: v for k, v in other.env.items() if k != "TORCH_CUDA_ARCH_LIST"} == \
               {k: v for k, v in base.env.items() if k != "TORCH_CUDA_ARCH_LIST"}


def test_build_image_gives_a_lazy_modal_image():
    from modal_app.image import build_image, recipe_for

    image = build_image(recipe_for("L40S"))
    assert isinstance(image, modal.Image)


def test_runner_for_binds_the_app_functions_without_a_token_lookup(app_module, capsys):
    from modal_app.commands import check_job

    r = app_module.runner_for("a100_80gb")
    # `modal run` entry points show the estimate before dispatching (checked without sending anything).
    r.dry_run = True
    with pytest.raises(Exception, match="dry run"):
        r.run([check_job()], progress=False)
    assert "1 kernel(s) on Modal A100-80GB" in capsys.readouterr().err
    r.dry_run = False
    assert isinstance(r, ModalRunner) and r.gpu == "A100-80GB" and r.label == "modal:A100-80GB"
    assert r._function is app_module.evaluate_a100_80gb
    assert r._baselines_function is app_module.baselines_a100_80gb


ENTRY_OPTIONS = {
    "evaluate_kernel": ["--kernel-file", "--level", "--problem-id", "--gpu", "--source", "--path", "--backend",
                        "--precision", "--correctness-trials", "--tolerance-mode", "--timing / --no-timing",
                        "--timing-budget", "--output"],
    "evaluate_run": ["--run-dir", "--gpu", "--level", "--source", "--backend", "--precision",
                     "--timing / --no-timing"],
    "baselines": ["--gpu", "--levels", "--modes", "--source", "--output", "--resume / --no-resume"],
    "eval_submission": ["--submission", "--gpu", "--runs-dir", "--results-dir", "--entry", "--source"],
    "check": ["--gpu", "--backend", "--verbose"],
}


@pytest.mark.parametrize("entry", sorted(ENTRY_OPTIONS))
def test_modal_run_help_lists_the_entry_points_options(entry):
    proc = subprocess.run([sys.executable, "-m", "modal", "run", f"modal_app/app.py::{entry}", "--help"],
                          cwd=REPO, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    for option in ENTRY_OPTIONS[entry]:
        assert option in proc.stdout, f"{option} missing from {entry} --help"
    assert "[H100|A100-80GB|L40S|B200]" in proc.stdout
    assert "_" not in " ".join(re.findall(r"--[\w-]+", proc.stdout))  # kebab-case options only


CANDIDATES = {
    "correct": candidate_of(problem_source()),
    "wrong": candidate_of(problem_source()).replace("torch.relu(x)", "x.abs()"),
    "broken": "import torch\nclass ModelNew(torch.nn.Module:\n    pass\n",
}


@pytest.mark.slow
@pytest.mark.skipif(not HAVE_EVALUATOR, reason="kernelbench.evaluation.parent (the evaluator) is not written yet")
@pytest.mark.parametrize("kind", ["wrong"])
def test_gpu_function_body_gives_the_local_runners_verdict(app_module, relu_problem, kind):
    from kernelbench.evaluation.settings import EvalJob, EvalSettings
    from kernelbench.runners import get_runner

    job = EvalJob(problem=relu_problem, candidate_source=CANDIDATES[kind],
                  settings=EvalSettings(backend="torch", correctness_trials=2, measure_timing=False))

    (local,) = get_runner("local").run([job], progress=False)
    index, remote = result_from_wire(app_module.evaluate_h100.local(job_to_wire(job, 0)))

    assert index == 0
    assert remote.key == local.key and remote.problem_hash == local.problem_hash
    assert (remote.compiled, remote.correct) == (local.compiled, local.correct)
    assert (remote.error is None) == (local.error is None)
    if local.error is not None:
        assert (remote.error.stage, remote.error.type) == (local.error.stage, local.error.type)
    if local.correctness is not None:
        assert remote.correctness.trials_run == local.correctness.trials_run
        assert remote.correctness.trials_passed == local.correctness.trials_passed
    assert remote.environment.device == local.environment.device
    assert remote.guard_findings == local.guard_findings
    assert (kind == "correct") == remote.correct


@pytest.mark.parametrize("gpu", MODAL_GPUS)
def test_modal_gpu_table_agrees_with_the_hardware_table(gpu):
    """The build target is the chip's compute capability; the price is set; baselines share the local file."""
    from kernelbench.baselines import baseline_path_for_gpu
    from kernelbench.hardware import get_gpu_spec
    from modal_app import versions

    spec = versions.GPUS[gpu]
    hw = get_gpu_spec(gpu)
    assert spec.cuda_arch.rstrip("a") == hw.compute_capability
    # Hopper and Blackwell have arch-specific instructions (wgmma, tcgen05) only under sm_90a / sm_100a.
    assert spec.cuda_arch.endswith("a") == (hw.compute_capability in ("9.0", "10.0"))
    assert spec.usd_per_hour > 0
    # The Modal run writes the file a local run on the same chip writes and analyze/aggregate read.
    assert baseline_path_for_gpu(gpu) == baseline_path_for_gpu(hw.full_name) == baseline_path_for_gpu(spec.baseline_stem)


def test_a100_80gb_on_modal_and_locally_use_one_baseline_file(tmp_path):
    from kernelbench.baselines import baseline_path_for_gpu

    local = baseline_path_for_gpu("NVIDIA A100-SXM4-80GB", tmp_path)
    assert baseline_path_for_gpu("A100-80GB", tmp_path) == local == tmp_path / "A100.json"
    assert baseline_path_for_gpu("A100", tmp_path) == local


def _check_result_in_process(app_module, device: str):
    import dataclasses

    from modal_app.commands import check_job

    job = check_job("triton")
    if device == "cpu":
        job = dataclasses.replace(job, problem=job.problem.at_reduced_size(),
                                  settings=dataclasses.replace(job.settings, measure_timing=False, correctness_trials=2))
    _, result = result_from_wire(app_module.evaluate_h100.local(job_to_wire(job, 0)))
    return result


@pytest.mark.slow
def test_modal_check_reports_item_by_item_what_a_run_proves(app_module, monkeypatch):
    """On the CPU the worked solution compiles and is correct, but nothing is timed on a GPU: the check says so."""
    from kernelbench.runners.modal_runner import remote_failure
    from modal_app.commands import check_job, check_report, check_text

    monkeypatch.setenv("TRITON_INTERPRET", "1")
    result = _check_result_in_process(app_module, "cpu")
    items = {i.what: i for i in check_report(result, "L40S")}
    assert items["image built, GPU function scheduled, result returned"].ok
    assert items["worked solution compiled"].ok and items["worked solution passed its correctness trials"].ok
    assert not items["ran on a L40S GPU"].ok and not items["candidate and reference timed"].ok
    assert "some of it does not work" in check_text(list(items.values()))

    lost = remote_failure(check_job(), "container exited with code 137", "modal:L40S")
    (only,) = check_report(lost, "L40S")
    assert not only.ok and "137" in only.detail


@pytest.mark.gpu
def test_modal_check_passes_on_a_gpu(app_module):
    from modal_app.commands import check_report, check_text

    result = _check_result_in_process(app_module, "cuda")
    items = check_report(result, "H100")
    assert all(i.ok for i in items), check_text(items)
