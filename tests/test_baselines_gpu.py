"""Baselines measured for real on a GPU: measure_problem, the writer, kernelbench baselines and the bench script.

All marked ``gpu``: CI (no GPU) skips them; run them on a GPU machine with ``pytest -m gpu``.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from kbtesting import repo_env, run_cli

from kernelbench import TIMING_PROTOCOL_VERSION
from kernelbench.baselines import (
    BaselineFile,
    LocalMeasurer,
    baseline_settings,
    compare_baselines,
    load_baseline,
    local_gpu_names,
    measure_into,
    measure_problem,
)
from kernelbench.hardware import canonical_gpu
from kernelbench.problems import load_builtin

pytestmark = pytest.mark.gpu
REPO = Path(__file__).resolve().parents[1]
# Two memory-bound element-wise problems and a matmul: small, quick to compile.
PICK = [8, 10, 1]


@pytest.fixture(scope="module")
def problems():
    return load_builtin([1]).select(levels=[1], ids=PICK)


def _gpu() -> str:
    names = local_gpu_names()
    assert names, "nvidia-smi lists no GPU"
    return names[0]


def test_measure_problem_times_eager_and_compiled_references_on_the_gpu(problems):
    from kernelbench.roofline import check_speed_of_light

    relu = problems.get(1, 8)
    settings = baseline_settings(timing_budget_s=0.3, compile_timeout_s=300)
    modes = ["eager", "compile-default", "compile-cudagraphs"]
    entries = measure_problem(relu, modes, settings)
    assert list(entries) == modes
    for mode, e in entries.items():
        # torch's device name; nvidia-smi's may be spelled differently, the GPU type may not.
        assert e.device == "cuda:0" and canonical_gpu(e.hardware) == canonical_gpu(_gpu()), mode
        assert 0 < e.min <= e.median <= e.max and e.num_trials >= 20, mode
        assert e.rse_median is not None and e.rse_median < 0.05, mode
        assert e.environment["gpu_name"] == e.hardware
        assert e.environment["timing_protocol"] == TIMING_PROTOCOL_VERSION
        assert e.environment["driver"] and e.environment["cuda"]
    eager = entries["eager"].median
    # An 8192x16384 fp32 ReLU moves 1 GiB: hundreds of microseconds on any data-centre GPU, and it
    # cannot beat the memory-bandwidth bound.
    assert 0.05 < eager < 20
    check = check_speed_of_light(relu, _gpu(), "fp32", eager)
    if check.info is not None:
        assert check.flag is None and check.info.bound_by == "memory" and check.info.fraction_of_sol > 0.05
    # torch.compile of one ReLU is the same memory-bound kernel: within 2x of eager.
    assert 0.5 < entries["compile-default"].median / eager < 2
    # A replayed CUDA graph of it too (its outputs are copied before the probe's second call reuses them),
    # but the replay also copies fresh inputs into its static buffers inside the timed call: for an
    # element-wise op that doubles the bytes moved, so about 2x eager (2.19x on an H100).
    assert 0.5 < entries["compile-cudagraphs"].median / eager < 2.6


def test_writer_on_the_gpu_resumes_and_two_runs_agree(tmp_path, problems):
    out, again = tmp_path / "a.json", tmp_path / "b.json"
    label = canonical_gpu(_gpu())
    settings = baseline_settings(timing_budget_s=0.3)
    with LocalMeasurer("cuda:0") as measure:
        first = measure_into(BaselineFile.open(out, label), problems, ["eager", "compile-cudagraphs"], settings,
                             measure, progress=False)
        second = measure_into(BaselineFile.open(again, label), problems, ["eager"], settings, measure,
                              progress=False)
        resumed = measure_into(BaselineFile.open(out, label), problems, ["eager", "compile-cudagraphs"], settings,
                               measure, progress=False)
    assert first.complete and first.count("measured") == 6, first.failures
    assert second.complete and resumed.count("measured") == 0 and resumed.count("reused") == 6
    agree = compare_baselines(load_baseline(out), load_baseline(again))
    assert agree.n == 3
    # Independent runs of the same references: within 25% problem by problem (typically within a few %).
    assert agree.worst.spread < 1.25, agree.to_dict()
    env = json.loads(out.read_text())["environment"]
    assert canonical_gpu(env["gpu_name"]) == label and env["timing_protocol"] == TIMING_PROTOCOL_VERSION and env["torch"]


def test_a_worker_importing_the_compiler_ahead_creates_no_cuda_context_until_told_to():
    # Spares start while another measurement is timed: importing Dynamo and Inductor must not touch the GPU.
    import time

    import torch

    from kernelbench.evaluation.parent.workers import finish_init, send_init, start_worker
    from kernelbench.evaluation.worker import COMPILER_MODULES, PRELOAD_COMPILER_ENV

    torch.cuda.init()
    free_before, _ = torch.cuda.mem_get_info(0)
    w = start_worker("reference", "cuda:0", "torch", None, init=False, env_extra={PRELOAD_COMPILER_ENV: "1"})
    try:
        time.sleep(1.0)
        free_started, _ = torch.cuda.mem_get_info(0)
        finish_init(w, send_init(w))
        free_init, _ = torch.cuda.mem_get_info(0)
        assert w.preloaded == list(COMPILER_MODULES)
    finally:
        w.close()
    mib = 1 << 20
    assert abs(free_before - free_started) < 64 * mib, (free_before - free_started) / mib
    assert free_started - free_init > 100 * mib, (free_started - free_init) / mib  # a context is visible this way


def _cli(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return run_cli(*args, cwd=cwd)


def test_kernelbench_baselines_writes_the_gpus_file_and_refuses_a_wrong_name(tmp_path):
    label = canonical_gpu(_gpu())
    proc = _cli("baselines", "--levels", "1", "--problem-id", "8,10", "--modes", "eager", "compile-cudagraphs",
                "--timing-budget", "0.2", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    path = tmp_path / "baselines" / f"{label}.json"
    data = json.loads(path.read_text())
    assert sorted(data["level1"]) == ["10_Sigmoid.py", "8_ReLU.py"]
    assert sorted(data["modes"]["compile-cudagraphs"]["level1"]) == ["10_Sigmoid.py", "8_ReLU.py"]
    assert canonical_gpu(data["environment"]["gpu_name"]) == label
    assert "complete; 4 measured" in proc.stdout

    again = _cli("baselines", "--levels", "1", "--problem-id", "8,10", "--modes", "eager", "compile-cudagraphs",
                 cwd=tmp_path)
    assert again.returncode == 0 and "0 measured, 4 already there" in again.stdout

    other = "B200" if label != "B200" else "H100"
    wrong = _cli("baselines", "--levels", "1", "--problem-id", "8", "--modes", "eager", "--gpu-name", other,
                 cwd=tmp_path)
    assert wrong.returncode == 2 and "would hold another GPU's times" in wrong.stderr
    assert not (tmp_path / "baselines" / f"{other}.json").exists()


def test_bench_script_reports_time_agreement_and_speed_of_light(tmp_path):
    out, report = tmp_path / "gpu.json", tmp_path / "bench.json"
    env = repo_env()
    proc = subprocess.run([sys.executable, str(REPO / "scripts" / "bench_baselines.py"), "--levels", "1",
                           "--problem-id", "8,10", "--modes", "eager", "--timing-budget", "0.2", "--out", str(out),
                           "--json", str(report)], capture_output=True, text=True, env=env, timeout=600,
                          cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    data = json.loads(report.read_text())
    s = data["summary"]
    assert s["complete"] and s["per_mode"]["eager"]["times"] == 2 and s["measurement_seconds_in_file"] > 0
    assert s["agreement"]["n"] == 2 and 0.8 < s["agreement"]["median_ratio"] < 1.25
    assert {p["name"] for p in data["problems"]} == {"8_ReLU", "10_Sigmoid"}
    if s["fraction_of_sol"]["n"]:
        assert 0 < s["fraction_of_sol"]["median"] <= 1.5
