"""Measured rates: the measurement on a real device, the merge into the file the bounds read, the script."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from kernelbench.hardware import MeasuredRatesError, get_gpu_spec
from kernelbench.rate_measurement import MATMUL_KINDS, measure_gpu_rates, merge_measured_rates

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def cpu_rates():
    return measure_gpu_rates("cpu", copy_bytes=1 << 20, matmul_n=64, calls=3)


def test_cpu_measurement_gives_every_rate(cpu_rates):
    kinds = [s.kind for s in cpu_rates.samples]
    assert kinds == ["memory", *MATMUL_KINDS]
    for s in cpu_rates.samples:
        assert s.value > 0 and s.median_ms > 0
    copy = cpu_rates.samples[0]
    # bytes read plus bytes written over the median time
    assert copy.value == pytest.approx(2 * copy.size / (copy.median_ms / 1e3))
    mm = cpu_rates.samples[1]
    assert mm.value == pytest.approx(2 * 64 ** 3 / (mm.median_ms / 1e3))


def test_merge_keeps_other_gpus_and_bounds_use_the_figures(tmp_path, cpu_rates):
    path = tmp_path / "rates.json"
    merge_measured_rates("H200", {"source": "earlier run", "memory_bandwidth_bytes_s": 4.1e12}, path)
    merge_measured_rates("NVIDIA H100 80GB HBM3", cpu_rates.to_entry("test"), path)
    data = json.loads(path.read_text())
    assert set(data["gpus"]) == {"H200", "NVIDIA H100 80GB HBM3"}
    h100 = get_gpu_spec("H100", measured_path=path)
    assert h100.bandwidth().source == "measured"
    assert h100.bandwidth().value == pytest.approx(cpu_rates.value("memory"))
    assert h100.peak("bf16").value == pytest.approx(cpu_rates.value("bf16"))
    assert get_gpu_spec("H200", measured_path=path).bandwidth().value == 4.1e12


def test_a_bad_entry_leaves_the_file_as_it_was(tmp_path):
    path = tmp_path / "rates.json"
    merge_measured_rates("H100", {"source": "x", "fp32_flops": 5e13}, path)
    before = path.read_text()
    with pytest.raises(MeasuredRatesError, match=f"{path}: unknown GPU 'Z999'"):
        merge_measured_rates("Z999", {"source": "x", "fp32_flops": 1.0}, path)
    with pytest.raises(MeasuredRatesError, match="must be a positive number"):
        merge_measured_rates("H100", {"source": "x", "fp32_flops": 0}, path)
    assert path.read_text() == before
    assert [p.name for p in tmp_path.iterdir()] == ["rates.json"]


def _script(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(ROOT / "scripts" / "measure_rates.py"), *args], capture_output=True,
                          text=True, cwd=ROOT, timeout=300)


def test_script_refuses_cpu_numbers_for_the_shipped_file():
    done = _script("--device", "cpu", "--copy-mb", "1", "--matmul-n", "32", "--calls", "2")
    assert done.returncode == 2 and "never the shipped file" in done.stderr


def test_script_writes_a_smoke_test_file(tmp_path):
    out = tmp_path / "r.json"
    done = _script("--device", "cpu", "--gpu-name", "L40S", "--out", str(out), "--copy-mb", "1",
                   "--matmul-n", "32", "--calls", "2")
    assert done.returncode == 0, done.stderr
    assert "matmul bf16" in done.stdout and "wrote the L40S entry" in done.stdout
    assert get_gpu_spec("L40S", measured_path=out).bandwidth().source == "measured"


@pytest.mark.gpu
def test_gpu_rates_are_below_the_datasheet():
    import torch

    rates = measure_gpu_rates("cuda:0", copy_bytes=1 << 30, matmul_n=8192, calls=10)
    spec = get_gpu_spec(torch.cuda.get_device_name(0))
    assert 0.5 * spec.memory_bandwidth_bytes_s < rates.value("memory") < 1.05 * spec.memory_bandwidth_bytes_s
    for kind in MATMUL_KINDS:
        peak = spec.peak(kind, prefer_measured=False).value
        assert 0.3 * peak < rates.value(kind) < 1.05 * peak, kind
