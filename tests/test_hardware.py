"""The GPU table: name lookup, datasheet figures, measured-rate merging, describe()."""

from __future__ import annotations

import json
import time

import pytest

from kernelbench.hardware import (
    MeasuredRatesError,
    UnknownGpuError,
    current_gpu_spec,
    find_gpu_spec,
    get_gpu_spec,
    gpu_table,
    known_gpu_names,
    load_measured_rates,
    measured_rates_path,
)


@pytest.mark.parametrize("name, expected", [
    ("H100", "H100"),
    ("NVIDIA H100 80GB HBM3", "H100"),
    ("h100-sxm", "H100"),
    ("H100 SXM5", "H100"),
    ("A100-80GB", "A100-80GB"),
    ("NVIDIA A100-SXM4-80GB", "A100-80GB"),
    ("a100", "A100-80GB"),
    ("L40S", "L40S"),
    ("NVIDIA L40S", "L40S"),
    ("B200", "B200"),
    ("NVIDIA B200", "B200"),
    ("NVIDIA H200", "H200"),
    ("h200", "H200"),
])
def test_lookup_by_any_reasonable_name(name, expected):
    assert get_gpu_spec(name).name == expected


@pytest.mark.parametrize("name", ["NVIDIA H100 PCIe", "H100 NVL", "RTX 4090", "A100-SXM4-40GB", ""])
def test_unknown_or_other_variant_is_a_clear_error(name):
    assert find_gpu_spec(name) is None
    with pytest.raises(UnknownGpuError) as e:
        get_gpu_spec(name)
    msg = str(e.value)
    assert "\n" not in msg and repr(name) in msg
    for known in ("H100", "H200", "A100-80GB", "L40S", "B200"):
        assert known in msg


def test_table_holds_the_five_gpus_with_dense_datasheet_rates():
    assert known_gpu_names() == ["H100", "H200", "A100-80GB", "L40S", "B200"]
    h100, h200, a100, l40s, b200 = (get_gpu_spec(n) for n in known_gpu_names())
    # Figures quoted with sparsity are halved: H100 TF32 989* and BF16 1979* TFLOPS.
    assert h100.tf32_tensor_flops == pytest.approx(494.5e12)
    assert h100.bf16_tensor_flops == pytest.approx(989.5e12)
    assert h100.fp32_flops == pytest.approx(67e12)
    assert h100.memory_bandwidth_bytes_s == pytest.approx(3.35e12)
    assert h200.memory_bandwidth_bytes_s == pytest.approx(4.8e12)
    assert h200.bf16_tensor_flops == h100.bf16_tensor_flops  # same GH100 compute
    assert a100.bf16_tensor_flops == pytest.approx(312e12) and a100.memory_bandwidth_bytes_s == pytest.approx(2.039e12)
    assert l40s.fp32_flops == pytest.approx(91.6e12) and l40s.memory_bandwidth_bytes_s == pytest.approx(864e9)
    assert b200.bf16_tensor_flops == pytest.approx(2.25e15) and b200.memory_bandwidth_bytes_s == pytest.approx(7.7e12)
    for s in (h100, h200, a100, l40s, b200):
        assert s.fp32_flops < s.tf32_tensor_flops < s.bf16_tensor_flops
        assert s.fp16_tensor_flops == s.bf16_tensor_flops
        assert s.datasheet.startswith("https://")
        assert s.sm_count > 0 and s.l2_mb > 0 and s.memory_gb > 0
        assert s.compute_capability.count(".") == 1
        json.dumps(s.to_dict())  # serialisable for --json


def test_shipped_measured_rates_file_parses():
    assert measured_rates_path().is_file()
    rates = load_measured_rates()
    assert set(rates) <= set(known_gpu_names())
    for spec in gpu_table():
        assert (spec.measured is not None) == (spec.name in rates)


def _write(tmp_path, data) -> str:
    p = tmp_path / "rates.json"
    p.write_text(json.dumps(data))
    return str(p)


def test_measured_rates_are_merged_and_preferred(tmp_path):
    path = _write(tmp_path, {"gpus": {"NVIDIA H100 80GB HBM3": {
        "memory_bandwidth_bytes_s": 3.0e12, "bf16_flops": 7.5e14, "fp32_flops": 5.1e13,
        "source": "bench 2026-11", "device_name": "NVIDIA H100 80GB HBM3"}}})
    h100 = get_gpu_spec("h100", measured_path=path)
    assert h100.measured is not None and h100.measured.source == "bench 2026-11"
    assert h100.bandwidth().value == 3.0e12 and h100.bandwidth().source == "measured"
    assert h100.bandwidth(prefer_measured=False).value == 3.35e12
    assert h100.peak("bf16").value == 7.5e14 and h100.peak("bf16").source == "measured"
    # fp16 and tf32 were not measured: the datasheet fills in and says so.
    assert h100.peak("fp16").source == "datasheet" and h100.peak("fp16").value == pytest.approx(989.5e12)
    assert h100.peak("tf32").source == "datasheet"
    assert get_gpu_spec("L40S", measured_path=path).measured is None
    assert "Measured:" in h100.describe() and "750.0" in h100.describe()
    with pytest.raises(ValueError, match="unknown rate kind"):
        h100.peak("fp8")


@pytest.mark.parametrize("data, match", [
    ({"gpus": {"RTX 9090": {"fp32_flops": 1e13}}}, "unknown GPU 'RTX 9090'"),
    ({"gpus": {"H100": {"fp32_flops": -5}}}, "positive number"),
    ({"gpus": {"H100": {"fp32_flops": "fast"}}}, "positive number"),
    ({"gpus": {"H100": {"source": "nothing measured"}}}, "has no rates"),
    ({"rates": {}}, "gpus"),
])
def test_bad_measured_rates_file_is_a_clear_error(tmp_path, data, match):
    with pytest.raises(MeasuredRatesError, match=match):
        load_measured_rates(_write(tmp_path, data))


def test_measured_rates_file_not_json(tmp_path):
    p = tmp_path / "rates.json"
    p.write_text("{nope")
    with pytest.raises(MeasuredRatesError, match="not valid JSON"):
        load_measured_rates(p)
    with pytest.raises(MeasuredRatesError, match="does not exist"):
        load_measured_rates(tmp_path / "missing.json")


def test_describe_has_what_a_prompt_needs():
    text = get_gpu_spec("H100").describe()
    lines = text.splitlines()
    assert 2 <= len(lines) <= 5
    for needle in ("H100", "Hopper", "9.0", "sm_90", "132 SMs", "80 GB", "3.35 TB/s", "50 MB L2",
                   "FP32 67", "TF32 494.5", "BF16 989.5"):
        assert needle in text, needle
    assert "B200" in get_gpu_spec("B200").describe() and "sm_100" in get_gpu_spec("B200").describe()


def test_current_gpu_spec_without_gpu():
    torch = pytest.importorskip("torch")
    if torch.cuda.is_available():
        pytest.skip("this machine has a GPU; see the gpu-marked test")
    assert current_gpu_spec() is None


@pytest.mark.gpu
def test_current_gpu_spec_matches_the_device():
    import torch

    if not torch.cuda.is_available():
        pytest.skip("no CUDA device")
    spec = current_gpu_spec()
    name = torch.cuda.get_device_name()
    if spec is None:
        pytest.skip(f"{name} is not in the hardware table")
    props = torch.cuda.get_device_properties(0)
    major, minor = torch.cuda.get_device_capability()
    assert spec.compute_capability == f"{major}.{minor}"
    assert spec.sm_count == props.multi_processor_count
    assert abs(props.total_memory / 1e9 - spec.memory_gb) / spec.memory_gb < 0.15
    # The table's L2 is used to size the evaluator's L2 flush; it must not understate the device's.
    l2_bytes = getattr(props, "L2_cache_size", None)
    if l2_bytes:
        assert spec.l2_mb * 2**20 >= l2_bytes * 0.95
    print(f"\n{name}: {spec.describe()}")


# ---------------------------------------------------------------------------------------------- names
@pytest.mark.parametrize("name, family", [
    ("NVIDIA H100 80GB HBM3", "H100"),
    ("h100", "H100"),
    ("NVIDIA A100-SXM4-80GB", "A100"),
    ("A100-80GB", "A100"),
    ("NVIDIA GeForce RTX 4090", "RTX4090"),
    ("NVIDIA L40S", "L40S"),
    ("  Some Accelerator  ", "Some Accelerator"),
])
def test_canonical_gpu_names_the_type_two_timings_must_share(name, family):
    from kernelbench.hardware import canonical_gpu, gpu_family

    assert canonical_gpu(name) == family == gpu_family(name)


def test_gpu_family_also_reads_kernelbench_folder_names_and_labels_are_file_stems():
    from kernelbench.hardware import canonical_gpu, gpu_family, gpu_label

    assert canonical_gpu(None) is None and gpu_family(None) is None and gpu_family("") is None
    assert gpu_family("H100_together") == "H100" and canonical_gpu("H100_together") == "H100_together"
    assert gpu_label("NVIDIA A100-SXM4-80GB") == gpu_label("A100-80GB") == "A100"
    assert gpu_label("My GPU/v2") == "My_GPU_v2" and gpu_label("///") == "gpu"


def test_every_modal_gpu_is_in_the_datasheet_table_and_names_resolve():
    from kernelbench.errors import KernelBenchError
    from kernelbench.hardware import MODAL_GPU_TABLE, MODAL_GPUS, modal_gpu_name

    assert MODAL_GPUS == tuple(MODAL_GPU_TABLE) == ("H100", "A100-80GB", "L40S", "B200")
    for name, spec in MODAL_GPU_TABLE.items():
        hw = get_gpu_spec(name)
        assert spec.name == name and spec.cuda_arch.rstrip("a") == hw.compute_capability
        assert spec.usd_per_hour > 0 and spec.baseline_stem == name.split("-")[0]
        assert modal_gpu_name(spec.slug) == name
    with pytest.raises(KernelBenchError, match="unknown Modal GPU 'H200'"):
        modal_gpu_name("H200")  # in the datasheet table, not rented on Modal


# ---------------------------------------------------------------------------------------------- nvidia-smi
def _fake_smi(folder, body: str):
    """A stand-in ``nvidia-smi`` executable (no GPU here): a shell script that answers like the real one."""
    exe = folder / "nvidia-smi"
    exe.write_text("#!/bin/sh\n" + body)
    exe.chmod(0o755)


def test_one_reader_of_nvidia_smi_for_the_library_the_cli_and_the_modal_worker(tmp_path, monkeypatch):
    from kernelbench.cli.run_cmd import local_gpu_name
    from kernelbench.hardware import local_gpu_names, nvidia_smi_query
    from modal_app.worker import _driver_version, container_gpu_name

    _fake_smi(tmp_path, 'case "$1" in\n'
                        '  --query-gpu=name) printf "NVIDIA H100 80GB HBM3\\n\\n  NVIDIA H200  \\n" ;;\n'
                        '  --query-gpu=driver_version) echo 580.65.06 ;;\n'
                        '  *) echo "unknown query $1" >&2; exit 2 ;;\n'
                        'esac\n')
    monkeypatch.setenv("PATH", str(tmp_path))
    assert local_gpu_names() == ["NVIDIA H100 80GB HBM3", "NVIDIA H200"]
    assert local_gpu_name() == container_gpu_name() == "NVIDIA H100 80GB HBM3"
    assert nvidia_smi_query("driver_version") == ["580.65.06"] and _driver_version() == "580.65.06"
    assert nvidia_smi_query("no_such_field") == []  # nvidia-smi failed: nothing, not its error text


def test_no_nvidia_smi_or_a_hanging_one_gives_no_gpus(tmp_path, monkeypatch):
    from kernelbench.cli.run_cmd import local_gpu_name
    from kernelbench.hardware import local_gpu_names

    monkeypatch.setenv("PATH", str(tmp_path))
    assert local_gpu_names() == [] and local_gpu_name() is None
    _fake_smi(tmp_path, "while :; do :; done\n")  # hangs (a wedged driver); builtins only, PATH is empty
    started = time.monotonic()
    assert local_gpu_names(timeout_s=0.3) == []
    assert time.monotonic() - started < 3
