"""Nsight Compute profiles: reading ncu's CSV, the limiting factor, the report's text and JSON, and the command.

tests/fixtures/ncu/ holds real captures (``real_*.csv``: ncu's raw log of one forward of a worked solution on an
H100, with the kernel line our report printed there in ``real_captures.json``) and two SYNTHETIC files that exercise
what the format allows and the captures do not show (the details page, ``n/a``, several launches, thousands
separators; numbers invented, see the README there). The GPU test at the end profiles a worked solution for real
(marked ``gpu``).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from kernelbench.problems import load_builtin
from kernelbench.profiling import (
    KernelProfile,
    NcuError,
    ProfileReport,
    failure_reason,
    find_ncu,
    limiting_factor,
    parse_ncu_csv,
)
from kernelbench.profiling.ncu import METRICS, ncu_command
from kernelbench.profiling.run import ProfileOptions, ProfileUnavailable, _report, check_profilable

FIXTURES = Path(__file__).parent / "fixtures" / "ncu"
RAW = FIXTURES / "synthetic_raw_page.csv"
DETAILS = FIXTURES / "synthetic_details_page.csv"
#: Real captures from the GPU machine (scripts/gpu_check.sh profile), and what the report printed for each there.
REAL = sorted(FIXTURES.glob("real_*.csv"))
CAPTURES = json.loads((FIXTURES / "real_captures.json").read_text())["captures"]
ROOT = Path(__file__).resolve().parents[1]


# --- parsing ---------------------------------------------------------------------------------------------

def test_raw_page_every_launch_in_order_with_units_normalised():
    launches = parse_ncu_csv(RAW.read_text())
    assert [la.launch_id for la in launches] == [0, 1, 2, 3]
    assert launches[0].kernel.startswith("kernel_cutlass_relu_kernel_") and launches[3].kernel == "sgemm_tile_kernel"
    assert launches[2].kernel.startswith("void at::native::vectorized_elementwise_kernel<4,")  # commas inside quotes
    first = launches[0].values
    assert first["duration_us"] == pytest.approx(1061.216)  # "1,061,216" nsecond
    assert first["grid_size"] == 131072 and first["block_size"] == 256 and first["sm_count"] == 132
    assert first["dram_read_bytes"] == 536870912 and first["memory_pct"] == pytest.approx(91.83)
    assert launches[2].values["dram_pct"] is None  # "n/a"
    assert launches[2].values["dram_read_bytes"] == 0.0
    assert launches[0].stream == 7
    assert set(first) == set(METRICS.values())


def test_details_page_with_section_labels():
    (launch,) = parse_ncu_csv(DETAILS.read_text())
    v = launch.values
    assert launch.kernel == "relu_tile_kernel"
    assert v["duration_us"] == pytest.approx(1072.38)  # usecond, with a thousands separator
    assert v["memory_pct"] == pytest.approx(90.12)  # the % one, not the Tbyte/second one of another section
    assert v["sm_pct"] == pytest.approx(11.04) and v["achieved_occupancy_pct"] == pytest.approx(86.44)
    assert v["grid_size"] == 8192 and v["registers_per_thread"] == 22 and v["sm_count"] == 132


def test_units_and_numbers():
    text = ('"ID","Kernel Name","gpu__time_duration.sum","dram__bytes_read.sum","launch__grid_size"\n'
            '"","","msecond","Mbyte",""\n'
            '"0","k","1.5","2.5","1,024"\n'
            '"1","k","","junk","n/a"\n')
    a, b = parse_ncu_csv(text)
    assert a.values == {"duration_us": 1500.0, "dram_read_bytes": 2.5e6, "grid_size": 1024.0}
    assert b.values == {"duration_us": None, "dram_read_bytes": None, "grid_size": None}


def test_no_table_is_an_error_and_an_empty_table_is_no_launch():
    with pytest.raises(NcuError, match="no CSV table"):
        parse_ncu_csv("==PROF== Connected to process 1\n==PROF== Disconnected from process 1\n")
    header = RAW.read_text().splitlines()[7:9]  # header and units rows only
    assert parse_ncu_csv("\n".join(header) + "\n") == []


def test_every_real_capture_has_its_printed_line():
    assert len(REAL) >= 7 and sorted(p.name for p in REAL) == sorted(CAPTURES)
    assert {c["backend"] for c in CAPTURES.values()} == {"triton", "cuda", "cute", "tilelang"}


@pytest.mark.parametrize("path", REAL, ids=lambda p: p.name)
def test_real_capture_gives_the_line_printed_on_the_gpu(path):
    """Parser, own-kernel recognition (the DSLs' generated names), limiting factor and text, against the H100 run."""
    from kernelbench.evaluation.guards.runtime import own_kernel_names

    capture = CAPTURES[path.name]
    launches = parse_ncu_csv(path.read_text())
    assert len(launches) == 1 and launches[0].values["duration_us"] > 0
    source = (ROOT / capture["solution"]).read_text()
    own = own_kernel_names(source)
    kernels = [KernelProfile(launch_id=la.launch_id, kernel=la.kernel, stream=la.stream,
                             own=any(n and n in la.kernel for n in own),
                             **{k: v for k, v in la.values.items() if k in KernelProfile.model_fields})
               for la in launches]
    report = ProfileReport(level=1, problem_id=1, problem_name="x", backend=capture["backend"], kernels=kernels)
    (line,) = [ln for ln in report.to_text().splitlines() if ln.startswith("- ")]
    assert line == capture["printed_kernel_line"]


def test_failure_reasons():
    perm = ("==PROF== Connected to process 4\n==ERROR== ERR_NVGPUCTRPERM - The user does not have permission to "
            "access NVIDIA GPU Performance Counters on the target device 0.\n")
    reason = failure_reason(perm, 0)
    assert "ERR_NVGPUCTRPERM" in reason and "NVreg_RestrictProfilingToAdminUsers=0" in reason and "\n" not in reason
    assert failure_reason("==ERROR== Failed to find target process\n", 1) == "ncu failed: Failed to find target process"
    assert failure_reason(RAW.read_text(), 0) is None


def test_command_profiles_only_the_marked_forward():
    cmd = ncu_command("/usr/local/cuda/bin/ncu", ["python", "-m", "kernelbench.profiling.target", "s.json"], "/x/ncu.csv")
    assert cmd[:5] == ["/usr/local/cuda/bin/ncu", "--csv", "--page", "raw", "--print-units"]
    assert cmd[cmd.index("--profile-from-start") + 1] == "off"
    assert cmd[cmd.index("--metrics") + 1].split(",") == list(METRICS)
    assert cmd[cmd.index("--log-file") + 1] == "/x/ncu.csv"
    assert cmd[-4:] == ["python", "-m", "kernelbench.profiling.target", "s.json"]


# --- the limiting factor and the report ------------------------------------------------------------------

@pytest.mark.parametrize("fields,expected", [
    ({"memory_pct": 91.8, "sm_pct": 14.3, "duration_us": 1000}, "memory-bound (92% of peak memory throughput)"),
    ({"memory_pct": 40.0, "sm_pct": 78.0, "duration_us": 1000}, "compute-bound (78% of peak SM throughput)"),
    ({"memory_pct": 3.0, "sm_pct": 1.0, "duration_us": 2.9}, "launch-bound (a 2.9 us kernel: too little work per launch)"),
    ({"memory_pct": 30.0, "sm_pct": 20.0, "duration_us": 800, "grid_size": 64, "sm_count": 132},
     "latency-bound: too few blocks (64 for 132 SMs)"),
    ({"memory_pct": 38.4, "sm_pct": 45.0, "duration_us": 11000, "grid_size": 1024, "sm_count": 132,
      "achieved_occupancy_pct": 17.9, "theoretical_occupancy_pct": 18.75, "registers_per_thread": 168},
     "latency-bound: low occupancy (18% of warp slots, 19% possible, 168 registers/thread)"),
    ({"memory_pct": 45.0, "sm_pct": 50.0, "duration_us": 900, "achieved_occupancy_pct": 70.0},
     "latency-bound (neither memory nor compute throughput reaches 60% of peak)"),
    ({}, "unknown (no throughput metrics)"),
])
def test_limiting_factor(fields, expected):
    assert limiting_factor(KernelProfile(launch_id=0, kernel="k", **fields)) == expected


@pytest.fixture(scope="module")
def relu_report() -> ProfileReport:
    problem = load_builtin([1]).get(1, 8)
    source = (ROOT / "kernelbench" / "solutions" / "cute" / "level1" / "8_ReLU.py").read_text()
    from kernelbench.evaluation.guards.runtime import own_kernel_names

    return _report(problem, source, "cute", "fp32", "NVIDIA H100 80GB HBM3", parse_ncu_csv(RAW.read_text()),
                   own_kernel_names(source), ["ncu", "..."], "sandbox")


def test_report_marks_own_kernels_and_adds_the_roofline(relu_report):
    r = relu_report
    assert [k.own for k in r.kernels] == [True, True, False, False]  # sgemm_tile_kernel is not this file's
    assert r.total_us == pytest.approx(1061.216 + 1058.944 + 2.88 + 11422.304)
    assert r.own_us == pytest.approx(1061.216 + 1058.944)
    # 8_ReLU moves 2 x 8192 x 16384 fp32 values: its bound is memory time on the H100
    assert r.sol_bound_by == "memory" and r.sol_bound_ms is not None
    assert r.roofline_fraction == pytest.approx(r.sol_bound_ms * 1000 / r.total_us)
    summary = {s.kernel[:30]: s for s in r.by_kernel()}
    relu = summary["kernel_cutlass_relu_kernel_ten"]
    assert relu.launches == 2 and relu.own and relu.total_us == pytest.approx(2120.16)
    assert relu.memory_pct == pytest.approx((91.83 * 1061.216 + 92.03 * 1058.944) / 2120.16)


def test_report_text_is_compact_and_complete(relu_report):
    text = relu_report.to_text()
    lines = text.splitlines()
    assert lines[0].startswith("Nsight Compute profile of one forward of level 1 problem 8 (8_ReLU) on NVIDIA H100")
    assert lines[1].startswith("forward: 4 kernel launches, 13.55 ms of GPU time; your own kernels 16% of it; "
                               "speed-of-light bound ")
    assert "(memory-bound), so the forward runs at " in lines[1]
    assert lines[2] == ("- sgemm_tile_kernel (PyTorch/library), 1 launch, 11.42 ms (84% of GPU time): memory 38% of "
                        "peak (DRAM 10%), compute (SM) 45%, occupancy 18% achieved of 19% possible, "
                        "168 registers/thread, 1024 blocks x 384 threads -> latency-bound: low occupancy "
                        "(18% of warp slots, 19% possible, 168 registers/thread)")
    assert lines[3].startswith("- kernel_cutlass_relu_kernel_tensorptrf32gmemo1_tensorptrf32gmemo1__0 (yours), "
                               "2 launches, 2.12 ms (16% of GPU time): memory 92% of peak (DRAM 92%)")
    assert lines[3].endswith("-> memory-bound (92% of peak memory throughput)")
    assert lines[4].startswith("- void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>,")
    assert "..." in lines[4] and "-> launch-bound" in lines[4]
    assert len(lines) == 5 and len(text) < 1500


def test_report_json_round_trip(relu_report):
    data = json.loads(relu_report.model_dump_json())
    again = ProfileReport.model_validate(data)
    assert again == relu_report and again.to_text() == relu_report.to_text()
    assert data["kernels"][0]["own"] is True and data["isolation"] == "sandbox"


def test_empty_profile_says_so():
    r = ProfileReport(level=1, problem_id=8, problem_name="8_ReLU", backend="cuda", gpu=None)
    assert "forward launched no GPU kernel" in r.to_text() and r.roofline_fraction is None


# --- what is missing here ----------------------------------------------------------------------------------

def test_find_ncu(tmp_path, monkeypatch):
    with pytest.raises(NcuError, match="ncu not found at /nonexistent/ncu"):
        find_ncu("/nonexistent/ncu")
    fake = tmp_path / "ncu"
    fake.write_text("#!/bin/sh\nexit 0\n")
    fake.chmod(0o755)
    assert find_ncu(str(fake)) == str(fake)
    monkeypatch.setenv("KERNELBENCH_NCU", str(fake))
    assert find_ncu() == str(fake)


@pytest.mark.skipif(bool(shutil.which("nvidia-smi")), reason="this machine has nvidia-smi (a GPU)")
def test_no_gpu_is_one_clear_line():
    with pytest.raises(ProfileUnavailable, match=r"^no NVIDIA GPU on this machine \(nvidia-smi lists none\)"):
        check_profilable("triton", ProfileOptions())


@pytest.mark.skipif(bool(shutil.which("nvidia-smi")), reason="this machine has nvidia-smi (a GPU)")
def test_profile_cli_without_a_gpu_exits_2_with_one_line(capsys):
    from kernelbench.cli.main import main

    kernel = ROOT / "kernelbench" / "solutions" / "triton" / "level1" / "8_ReLU.py"
    rc = main(["profile", "--level", "1", "--problem-id", "8", "--kernel", str(kernel)])
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 2
    assert err[-1] == ("error: profile unavailable: no NVIDIA GPU on this machine (nvidia-smi lists none): Nsight "
                       "Compute profiles kernels on a local GPU")


def test_profile_cli_bad_input(tmp_path, capsys):
    from kernelbench.cli.main import main

    assert main(["profile", "--level", "1", "--problem-id", "8", "--kernel", str(tmp_path / "none.py")]) == 2
    assert "does not exist" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["profile", "--level", "1", "--problem-id", "8", "--kernel", "x.py", "--backend", "hip"])


# --- the real thing ---------------------------------------------------------------------------------------------

@pytest.mark.gpu
@pytest.mark.parametrize("backend", ["triton", "cuda", "cute", "tilelang"])
def test_profile_a_worked_solution_on_the_gpu(backend, tmp_path):
    """A real profile of 8_ReLU's worked solution: its own kernel is found, memory-bound, and the raw CSV parses."""
    from kernelbench.backends import get_backend
    from kernelbench.profiling import profile_candidate

    spec = get_backend(backend)
    if spec.missing_packages():
        pytest.skip(spec.missing_message())
    try:
        check_profilable(backend, ProfileOptions())
    except ProfileUnavailable as e:
        pytest.skip(str(e))
    problem = load_builtin([1]).get(1, 8)
    source = (ROOT / "kernelbench" / "solutions" / backend / "level1" / "8_ReLU.py").read_text()
    report = profile_candidate(problem, source, backend, "fp32", ProfileOptions(sandbox="off"))
    print(report.to_text())
    own = [k for k in report.kernels if k.own]
    assert own, report.to_text()
    assert all(k.duration_us and k.duration_us > 0 for k in own)
    assert own[0].memory_pct is not None and own[0].memory_pct > 30, report.to_text()
    assert report.roofline_fraction is not None and 0 < report.roofline_fraction <= 1.5


def test_the_profiled_process_reports_its_failure_in_a_file_not_on_stdout(tmp_path):
    """The real target process (what ncu would run), here without a GPU: it fails at CUDA setup, says so in
    status.json beside its spec (the candidate shares stdout), and exits 3."""
    import subprocess
    import sys

    problem = load_builtin([1]).get(1, 8)
    (tmp_path / "problem.py").write_text(problem.code)
    (tmp_path / "candidate.py").write_text((ROOT / "kernelbench" / "solutions" / "triton" / "level1" / "8_ReLU.py")
                                           .read_text())
    spec = tmp_path / "spec.json"
    spec.write_text(json.dumps({"problem": str(tmp_path / "problem.py"), "candidate": str(tmp_path / "candidate.py"),
                                "device": "cuda:0", "precision": "fp32", "init_seed": 1, "input_seed": 2,
                                "warmup": 1, "cache_scope": "0" * 32}))
    env = {**__import__("os").environ, "PYTHONPATH": str(ROOT), "CUDA_VISIBLE_DEVICES": ""}
    out = subprocess.run([sys.executable, "-m", "kernelbench.profiling.target", str(spec)], capture_output=True,
                         text=True, timeout=120, env=env)
    status = json.loads((tmp_path / "status.json").read_text())
    assert out.returncode == 3 and out.stdout == ""
    assert status["ok"] is False and status["type"] and status["traceback"]


def test_profile_refuses_a_kernel_file_it_cannot_read_in_one_line(tmp_path, capsys):
    from kernelbench.cli.main import main

    binary = tmp_path / "k.py"
    binary.write_bytes(b"\xff\xfe not text")
    for kernel, why in [(tmp_path / "nope.py", "does not exist"), (binary, "is not UTF-8 text")]:
        assert main(["profile", "--level", "1", "--problem-id", "8", "--kernel", str(kernel)]) == 2
        err = capsys.readouterr().err
        assert why in err and str(kernel) in err and "Traceback" not in err
