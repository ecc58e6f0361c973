"""Baseline files: our format round trip, KernelBench's published format, compatibility checks, agreement maths."""

from __future__ import annotations

import json
import math

import pytest

from kernelbench import TIMING_PROTOCOL_VERSION
from kernelbench.baselines import (
    Baseline,
    BaselineEntry,
    BaselineFile,
    BaselineMeasureError,
    compare_baselines,
    gpu_family,
    gpu_label,
    load_baseline,
    one_line,
    parse_baseline,
)
from kernelbench.errors import BaselineError
from kernelbench.problems.identity import kernelbench_code_hash
from kernelbench.problems.model import Problem
from kernelbench.results import EnvironmentInfo, KernelResult, TimingStats

H100_ENV = {"device": "cuda:0", "gpu_name": "NVIDIA H100 80GB HBM3", "gpu_arch": "9.0", "driver": "580.65",
            "cuda": "13.0", "torch": "2.11.0+cu130", "triton": "3.6.0", "python": "3.12.3",
            "timing_protocol": TIMING_PROTOCOL_VERSION, "platform": "linux-x86_64"}


def problem(level: int, pid: int, name: str) -> Problem:
    return Problem(level=level, problem_id=pid, name=f"{pid}_{name}", code="# test\n", source="test")


def entry(median: float, env: dict | None = None, n: int = 50) -> BaselineEntry:
    e = BaselineEntry(mean=median * 1.01, median=median, std=median / 100, min=median * 0.98, max=median * 1.2,
                      num_trials=n, hardware=(env or H100_ENV)["gpu_name"], device="cuda:0", rse_median=0.002,
                      setup_s=1.5, wall_s=3.0)
    e._environment = dict(env or H100_ENV)
    return e


# ---------------------------------------------------------------- our format
def test_round_trip_keeps_every_field_orders_problems_and_separates_modes(tmp_path):
    path = tmp_path / "H100.json"
    f = BaselineFile.open(path, "H100")
    p2, p10, q1 = problem(1, 2, "Tanh"), problem(1, 10, "GELU"), problem(2, 1, "Gemm_ReLU")
    # Written out of order on purpose: the file sorts levels numerically and problems by id.
    f.put(q1, "eager", entry(3.0), precision="fp32")
    f.put(p10, "eager", entry(0.25), precision="fp32")
    f.put(p2, "eager", entry(0.5), precision="fp32")
    f.put(p2, "compile-default", entry(0.4), precision="fp32")
    f.put(p10, "compile-cudagraphs", entry(0.2), precision="fp32")

    raw = json.loads(path.read_text())
    assert list(raw) == ["level1", "level2", "modes", "environment", "problem_set"]
    # The problems' set ("test" is neither builtin nor official) and each one's KernelBench hash.
    assert raw["problem_set"]["name"] == "custom" and raw["problem_set"]["revision"] == "test"
    assert raw["problem_set"]["hashes"] == {f"level{p.level}/{p.filename}": kernelbench_code_hash(p.code)
                                            for p in (p2, p10, q1)}
    assert load_baseline(path).problem_set.hashes["level1/2_Tanh.py"] == kernelbench_code_hash("# test\n")
    assert list(raw["level1"]) == ["2_Tanh.py", "10_GELU.py"]
    assert list(raw["modes"]) == ["compile-default", "compile-cudagraphs"]
    assert raw["level1"]["2_Tanh.py"] == {"mean": 0.505, "median": 0.5, "std": 0.005, "min": 0.49, "max": 0.6,
                                          "num_trials": 50, "hardware": "NVIDIA H100 80GB HBM3", "device": "cuda:0",
                                          "rse_median": 0.002, "setup_s": 1.5, "wall_s": 3.0}
    env = raw["environment"]
    assert env["gpu_name"] == "NVIDIA H100 80GB HBM3" and env["driver"] == "580.65" and env["cuda"] == "13.0"
    assert env["torch"] == "2.11.0+cu130" and env["triton"] == "3.6.0" and env["precision"] == "fp32"
    assert env["timing_protocol"] == TIMING_PROTOCOL_VERSION and len(env["date"]) == 10
    assert "device" not in env and "platform" not in env  # only the block's own keys

    eager = load_baseline(path)
    assert eager.require(p2).headline_ms == 0.5 and eager.require(q1).headline_ms == 3.0
    assert eager.require(p2).rse_median == 0.002
    assert eager.gpu_name == "NVIDIA H100 80GB HBM3" and eager.environment.timing_protocol == TIMING_PROTOCOL_VERSION
    compiled = load_baseline(path, mode="compile-default")
    assert compiled.require(p2).headline_ms == 0.4 and compiled.find(p10) is None
    with pytest.raises(BaselineError, match="no 'compile-max-autotune' baseline .*eager, compile-cudagraphs, "
                                            "compile-default"):
        load_baseline(path, mode="compile-max-autotune")

    # The top level is KernelBench's format: its scripts read data["level1"][file]["mean"].
    assert raw["level1"]["10_GELU.py"]["mean"] == pytest.approx(0.2525)


def test_failures_are_recorded_cleared_by_a_later_time_and_do_not_disturb_loading(tmp_path):
    path = tmp_path / "H100.json"
    f = BaselineFile.open(path, "H100")
    a, b = problem(1, 1, "ReLU"), problem(4, 1, "GPT2")
    f.put(a, "eager", entry(0.1))
    f.put_failure(b, "eager", "needs transformers,\n  which is not installed")
    f.put_failure(a, "compile-max-autotune", "Timeout: compile took too long")
    raw = json.loads(path.read_text())
    assert raw["failures"] == {"level1": {"1_ReLU.py": {"compile-max-autotune": "Timeout: compile took too long"}},
                               "level4": {"1_GPT2.py": {"eager": "needs transformers, which is not installed"}}}
    assert load_baseline(path).require(a).headline_ms == 0.1
    again = BaselineFile.open(path, "H100")
    assert again.failure(b, "eager") == "needs transformers, which is not installed"
    again.put(a, "compile-max-autotune", entry(0.05))
    raw = json.loads(path.read_text())
    assert raw["failures"] == {"level4": {"1_GPT2.py": {"eager": "needs transformers, which is not installed"}}}
    assert raw["modes"]["compile-max-autotune"]["level1"]["1_ReLU.py"]["median"] == 0.05


def test_a_write_replaces_the_file_whole(tmp_path):
    path = tmp_path / "H100.json"
    f = BaselineFile.open(path, "H100")
    f.put(problem(1, 1, "ReLU"), "eager", entry(0.1))
    assert [p.name for p in tmp_path.iterdir()] == ["H100.json"]  # no temporary files left behind
    assert json.loads(path.read_text())["level1"]["1_ReLU.py"]["median"] == 0.1


# ---------------------------------------------------------------- KernelBench's published format
KB_FILE = {
    "level1": {
        "1_Square_matrix_multiplication_.py": {"mean": 2.5, "std": 0.01, "min": 2.47, "max": 2.61,
                                               "num_trials": 100, "hardware": "NVIDIA H100", "device": "cuda:0"},
        "19_ReLU.py": {"mean": 0.0301, "std": 0.0008, "min": 0.029, "max": 0.034, "num_trials": 100,
                       "hardware": "NVIDIA H100", "device": "cuda:0"},
    },
    "level2": {
        "1_Conv2D_ReLU_BiasAdd.py": {"mean": 0.121, "std": 0.002, "min": 0.118, "max": 0.13, "num_trials": 100,
                                     "hardware": "NVIDIA H100", "device": "cuda:0"},
    },
}


def test_kernelbench_files_load_by_file_name_never_id_prefix_using_the_mean(tmp_path):
    path = tmp_path / "baseline_time_torch.json"
    path.write_text(json.dumps(KB_FILE))
    b = load_baseline(path)
    matmul = problem(1, 1, "Square_matrix_multiplication_")
    assert b.require(matmul).headline_ms == 2.5 and b.require(matmul).median is None
    # Never by id alone: a problem that only shares the id prefix (another set's 19) gets no time.
    assert b.find(problem(1, 19, "ReLU_renamed")) is None
    assert b.find(problem(2, 1, "Conv2D_ReLU_BiasAdd")).num_trials == 100
    assert b.find(problem(1, 2, "Missing")) is None
    assert b.gpu_name == "NVIDIA H100" and b.environment is None and b.mode == "eager"
    with pytest.raises(BaselineError, match="has no time for level 1 problem 7"):
        b.require(problem(1, 7, "Nope"))
    with pytest.raises(BaselineError, match="no 'compile-default' baseline .*modes present: eager"):
        load_baseline(path, mode="compile-default")


def test_kernelbench_file_is_held_to_its_gpu_by_scoring(tmp_path):
    from kernelbench.scoring import check_same_gpu

    b = parse_baseline(KB_FILE, where="kb.json")
    on_h200 = KernelResult(level=1, problem_id=19, problem_name="19_ReLU", backend="cuda", compiled=True,
                           correct=True, runtime=TimingStats(samples_ms=[0.02, 0.021]),
                           environment=EnvironmentInfo(device="cuda:0", gpu_name="NVIDIA H200"))
    with pytest.raises(BaselineError, match="measured on H200 but the baseline .* is for H100"):
        check_same_gpu([on_h200], b)
    check_same_gpu([on_h200], b, force=True)


@pytest.mark.parametrize("bad, message", [
    ({"level1": {"1_A.py": {"median": 1.0}}}, "level1/1_A.py: mean Field required"),
    ({"level1": {"1_A.py": {"mean": "fast"}}}, "level1/1_A.py: mean Input should be a valid number"),
    ({"level1": ["1_A.py"]}, "level1 must map problem file names to timings"),
    ({"environment": {}}, "no level1/level2/... blocks"),
])
def test_malformed_files_name_the_bad_part(tmp_path, bad, message):
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(bad))
    with pytest.raises(BaselineError, match=message):
        load_baseline(path)


# ---------------------------------------------------------------- what may be mixed into a file
def test_opening_refuses_other_gpus_protocols_precisions_and_kernelbench_files(tmp_path):
    ours = tmp_path / "H100.json"
    BaselineFile.open(ours, "H100").put(problem(1, 1, "ReLU"), "eager", entry(0.1), precision="fp32")
    assert BaselineFile.open(ours, "NVIDIA H100 80GB HBM3").count() == 1
    with pytest.raises(BaselineError, match=r"holds H100 times; measuring H200 into it would mix GPUs: pass "
                                            r"--restart .* or --force"):
        BaselineFile.open(ours, "H200")
    with pytest.raises(BaselineError, match="holds fp32 times; measuring bf16 into it would mix precisions"):
        BaselineFile.open(ours, "H100", precision="bf16")
    forced = BaselineFile.open(ours, "H200", force=True)
    assert forced.count() == 1 and "mixed anyway" in forced.notes[0]
    assert BaselineFile.open(ours, "H200", restart=True).count() == 0

    old = json.loads(ours.read_text())
    old["environment"]["timing_protocol"] = "kb-timing-0"
    ours.write_text(json.dumps(old))
    with pytest.raises(BaselineError, match=f"timing protocol 'kb-timing-0', not '{TIMING_PROTOCOL_VERSION}'"):
        BaselineFile.open(ours, "H100")

    kb = tmp_path / "kb.json"
    kb.write_text(json.dumps(KB_FILE))
    with pytest.raises(BaselineError, match="no timing protocol \\(not measured by kernelbench\\)"):
        BaselineFile.open(kb, "H100")

    broken = tmp_path / "broken.json"
    broken.write_text('{"level1": ')
    with pytest.raises(BaselineError, match="not valid JSON .* pass --restart"):
        BaselineFile.open(broken, "H100")


def test_a_time_from_another_gpu_is_not_written(tmp_path):
    path = tmp_path / "H100.json"
    f = BaselineFile.open(path, "H100")
    f.put(problem(1, 1, "ReLU"), "eager", entry(0.1))
    h200 = {**H100_ENV, "gpu_name": "NVIDIA H200"}
    with pytest.raises(BaselineError, match="measured on H200, but .*H100.json holds H100 times"):
        f.put(problem(1, 2, "Tanh"), "eager", entry(0.2, h200))
    assert load_baseline(path).find(problem(1, 2, "Tanh")) is None
    # A new, empty file is held to the GPU it was opened for.
    fresh = BaselineFile.open(tmp_path / "H100_together.json", "H100_together")
    with pytest.raises(BaselineError, match="measured on H200, but .*H100_together.json holds H100 times"):
        fresh.put(problem(1, 2, "Tanh"), "eager", entry(0.2, h200))
    fresh.put(problem(1, 2, "Tanh"), "eager", entry(0.2))
    assert BaselineFile(fresh.path, gpu_name="H200", force=True).gpu == "H200"


def test_software_changes_between_measurements_are_noted(tmp_path):
    f = BaselineFile.open(tmp_path / "H100.json", "H100")
    f.put(problem(1, 1, "ReLU"), "eager", entry(0.1))
    f.put(problem(1, 2, "Tanh"), "eager", entry(0.1, {**H100_ENV, "torch": "2.12.0+cu130"}))
    assert f.notes == [f"{f.path}: software changed between measurements (torch 2.11.0+cu130 -> 2.12.0+cu130)"]
    assert f.environment["torch"] == "2.12.0+cu130"


# ---------------------------------------------------------------- helpers
def test_gpu_labels_and_one_line_errors():
    assert gpu_label("NVIDIA H100 80GB HBM3") == "H100"
    assert gpu_label("NVIDIA H200") == "H200"
    assert gpu_label("Some Odd/GPU") == "Some_Odd_GPU"
    assert gpu_family("H100_together") == "H100" and gpu_family("L40S_matx3") == "L40S"
    assert gpu_family("A100-80GB") == "A100" and gpu_family(None) is None
    assert one_line(ValueError("a\n  b")) == "ValueError: a b"
    assert one_line(KeyError()) == "KeyError"
    assert len(one_line("x" * 1000)) == 600
    err = BaselineMeasureError("level_1_problem_3", {"eager": entry(0.1)}, {"compile-default": "boom",
                                                                           "compile-cudagraphs": "bang"})
    assert str(err) == "level_1_problem_3: compile-default: boom; compile-cudagraphs: bang"
    assert list(err.entries) == ["eager"]


def test_agreement_of_two_files_is_exact():
    def baseline(times: dict[str, float]) -> Baseline:
        return parse_baseline({"level1": {k: {"mean": 9.0, "median": v} for k, v in times.items()}})

    first = baseline({"1_A.py": 1.0, "2_B.py": 2.0, "3_C.py": 4.0, "4_D.py": 1.0})
    second = baseline({"1_A.py": 1.1, "2_B.py": 2.0, "3_C.py": 3.0, "5_E.py": 1.0})
    agree = compare_baselines(first, second)
    assert agree.n == 3 and agree.only_in_one == ("level1/4_D.py", "level1/5_E.py")
    assert [r.ratio for r in agree.ratios] == pytest.approx([1.1, 1.0, 0.75])
    assert agree.median_ratio == pytest.approx(1.0)
    assert agree.median_spread == pytest.approx(1.1)
    assert agree.worst.filename == "3_C.py" and agree.worst.spread == pytest.approx(4 / 3)
    d = agree.to_dict()
    assert d["worst"]["problem"] == "3_C.py" and d["n"] == 3 and math.isclose(d["median_spread"], 1.1)
    empty = compare_baselines(first, baseline({"9_Z.py": 1.0}))
    assert empty.n == 0 and empty.median_ratio is None and empty.worst is None


def test_agreement_refuses_two_files_timed_with_different_protocols():
    def baseline(protocol: str) -> Baseline:
        return parse_baseline({"level1": {"1_A.py": {"mean": 1.0, "median": 1.0}},
                               "environment": {"gpu_name": "H100", "timing_protocol": protocol}})

    assert compare_baselines(baseline("kb-timing-3"), baseline("kb-timing-3")).n == 1
    with pytest.raises(BaselineError, match="different protocols .'kb-timing-2' and 'kb-timing-3'"):
        compare_baselines(baseline("kb-timing-2"), baseline("kb-timing-3"))


def test_scoring_refuses_a_baseline_timed_with_another_protocol_unless_forced():
    from kernelbench.baselines import BaselineEnvironment
    from kernelbench.scoring import check_same_gpu

    def baseline(protocol: str) -> Baseline:
        env = BaselineEnvironment(gpu_name="NVIDIA H100 80GB HBM3", timing_protocol=protocol)
        return Baseline({}, mode="eager", environment=env)

    result = KernelResult(level=1, problem_id=1, problem_name="1_A", backend="cuda", compiled=True, correct=True,
                          runtime=TimingStats(samples_ms=[0.5, 0.51]),
                          environment=EnvironmentInfo(device="cuda:0", gpu_name="NVIDIA H100 80GB HBM3",
                                                      timing_protocol=TIMING_PROTOCOL_VERSION))
    check_same_gpu([result], baseline(TIMING_PROTOCOL_VERSION))
    with pytest.raises(BaselineError, match=f"timed with protocol '{TIMING_PROTOCOL_VERSION}' but the baseline .* "
                                            "with 'kb-timing-0'"):
        check_same_gpu([result], baseline("kb-timing-0"))
    check_same_gpu([result], baseline("kb-timing-0"), force=True)
