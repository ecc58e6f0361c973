"""Our baseline beside a file KernelBench published (kernelbench.baselines.compare, scripts/compare_baselines.py).

The files here are tiny ones written by the tests in both formats: ours (median, problem set with hashes)
and KernelBench's (levels only, mean, std, min). Problem names are real official names, so the shipped
manifest decides which set a file belongs to.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from kbtesting import load_script

from kernelbench import TIMING_PROTOCOL_VERSION
from kernelbench.baselines import (
    Evidence,
    RatioSummary,
    compare_baselines,
    compare_with_published,
    host_shares_from_rows,
    load_baseline,
    parse_baseline,
    uses_cudnn_conv,
)
from kernelbench.errors import BaselineError
from kernelbench.problems.identity import KERNELBENCH_REVISION, MANIFEST_ENV

REPO = Path(__file__).resolve().parents[1]
H100 = "NVIDIA H100 80GB HBM3"
MM = "1_Square_matrix_multiplication_.py"
BMM = "3_Batched_matrix_multiplication.py"
RELU = "19_ReLU.py"
CONV = "63_conv_standard_2D__square_input__square_kernel.py"
DIAG = "12_Matmul_with_diagonal_matrices_.py"
GEMM2 = "1_Conv2D_ReLU_BiasAdd.py"


@pytest.fixture(autouse=True)
def real_manifest(monkeypatch):
    monkeypatch.delenv(MANIFEST_ENV, raising=False)


def ours_dict(times: dict[tuple[int, str], float], *, means: dict | None = None, gpu: str = H100,
              hashes: dict[str, str] | None = None) -> dict:
    data: dict = {}
    for (level, name), ms in times.items():
        mean = (means or {}).get((level, name), ms)
        data.setdefault(f"level{level}", {})[name] = {"mean": mean, "median": ms, "num_trials": 50, "hardware": gpu,
                                                      "device": "cuda:0", "rse_median": 0.001, "wall_s": 2.0}
    data["environment"] = {"gpu_name": gpu, "timing_protocol": TIMING_PROTOCOL_VERSION, "precision": "fp32"}
    data["problem_set"] = {"name": "kernelbench", "revision": KERNELBENCH_REVISION,
                           "hashes": hashes if hashes is not None else
                           {f"level{lv}/{n}": f"h-{lv}-{n}" for lv, n in times}}
    return data


def theirs_dict(times: dict[tuple[int, str], float], *, std: float = 0.01, gpu: str = H100) -> dict:
    """KernelBench's published layout: levels only, the mean as headline, no environment or problem set."""
    data: dict = {}
    for (level, name), ms in times.items():
        data.setdefault(f"level{level}", {})[name] = {"mean": ms, "std": std * ms, "min": ms * 0.99,
                                                      "max": ms * 1.1, "num_trials": 100, "hardware": gpu,
                                                      "device": "cuda:0"}
    return data


OURS = {(1, MM): 2.0, (1, BMM): 5.2, (1, RELU): 1.0, (1, CONV): 9.0, (2, GEMM2): 3.0}
THEIRS = {(1, MM): 2.0, (1, BMM): 4.0, (1, RELU): 1.25, (1, CONV): 3.0, (2, GEMM2): 3.0}


def test_ratios_are_ours_median_over_their_mean_with_level_statistics():
    ours = parse_baseline(ours_dict(OURS, means={(1, CONV): 9.9}))
    cmp = compare_with_published(ours, parse_baseline(theirs_dict(THEIRS)))
    assert [(r.level, r.filename) for r in cmp.ratios] == [(1, MM), (1, BMM), (1, RELU), (1, CONV), (2, GEMM2)]
    by_name = {r.filename: r for r in cmp.ratios}
    assert by_name[BMM].ratio == pytest.approx(1.3) and by_name[RELU].ratio == pytest.approx(0.8)
    assert by_name[CONV].ratio == pytest.approx(3.0) and by_name[CONV].mean_ratio == pytest.approx(3.3)
    assert by_name[CONV].min_ratio == pytest.approx(9.0 / 2.97)
    assert by_name[RELU].spread == pytest.approx(1.25) and by_name[CONV].their_cv == pytest.approx(0.01)
    level1 = cmp.levels()[1]  # ratios 1.0, 1.3, 0.8, 3.0
    assert level1.n == 4 and level1.median == pytest.approx(1.15)
    assert level1.geomean == pytest.approx((1.0 * 1.3 * 0.8 * 3.0) ** 0.25)
    assert (level1.min, level1.max) == (pytest.approx(0.8), pytest.approx(3.0))
    # Sorted 0.8, 1.0, 1.3, 3.0: the 25th percentile sits 0.75 of the way from 0.8 to 1.0 (numpy's default).
    assert level1.p25 == pytest.approx(0.95) and level1.p75 == pytest.approx(1.725)
    assert level1.p10 == pytest.approx(0.86) and level1.p90 == pytest.approx(2.49)
    assert (level1.within_10pct, level1.ours_over_2x, level1.ours_under_half) == (1, 1, 0)
    assert cmp.levels()[2].n == 1 and cmp.overall.n == 5 and cmp.overall.median == pytest.approx(1.0)
    assert [r.filename for r in cmp.largest(2)] == [CONV, BMM]  # 3.0x, then 1.3x (ahead of 1/0.8)
    assert cmp.hashes_checked is False  # their file records no hashes and none were given
    # No evidence given: only what the two files themselves show (our mean 10% above our median).
    assert {r.filename: r.cues for r in cmp.ratios if r.cues} == {CONV: ("our-skew",)}


def test_a_problem_whose_code_differs_is_listed_apart_and_left_out_of_the_statistics():
    ours = parse_baseline(ours_dict({**OURS, (1, DIAG): 0.06}))
    theirs = parse_baseline(theirs_dict({**THEIRS, (1, DIAG): 2.68}))
    hashes = {f"level{lv}/{n}": f"h-{lv}-{n}" for lv, n in {**OURS, (1, DIAG): 0}}
    cmp = compare_with_published(ours, theirs, their_hashes={**hashes, f"level1/{DIAG}": "another-version"})
    assert [r.filename for r in cmp.changed] == [DIAG] and cmp.changed[0].cues == ("changed",)
    assert DIAG not in {r.filename for r in cmp.ratios} and cmp.levels()[1].n == 4
    assert cmp.largest(1)[0].filename == DIAG and cmp.largest(1, include_changed=False)[0].filename == CONV
    assert cmp.hashes_checked is True


def test_problems_pair_by_name_never_by_id():
    """Two custom files (no set recorded, names of no known set): ids 4 match, names do not."""
    ours = parse_baseline({"level1": {"4_A.py": {"mean": 1.0, "median": 1.0}, "5_C.py": {"mean": 2.0, "median": 2.0}}})
    theirs = parse_baseline({"level1": {"4_B.py": {"mean": 1.0}, "5_C.py": {"mean": 4.0}}})
    cmp = compare_with_published(ours, theirs)
    assert [r.filename for r in cmp.ratios] == ["5_C.py"] and cmp.ratios[0].ratio == pytest.approx(0.5)
    assert cmp.only_ours == ("level1/4_A.py",) and cmp.only_theirs == ("level1/4_B.py",)


@pytest.mark.parametrize("case, message", [
    ("gpu", r"different GPUs \(H100 and H200\)"),
    ("set", r"different problem sets \(kernelbench and builtin\)"),
    ("foreign", r"baseline theirs names problems that are not in problem set kernelbench: level1/1_Not_official\.py"),
    ("disjoint", r"no problem in common \(1 and 1 problems"),
])
def test_pairings_that_compare_nothing_meaningful_are_refused(case, message):
    ours = parse_baseline(ours_dict(OURS))
    if case == "gpu":
        theirs = theirs_dict(THEIRS, gpu="NVIDIA H200")
    elif case == "set":
        theirs = {"level1": {"8_ReLU.py": {"mean": 1.0}, "9_GELU.py": {"mean": 1.0}}}  # built-in names
    elif case == "foreign":
        theirs = {**theirs_dict(THEIRS), "level1": {**theirs_dict(THEIRS)["level1"], "1_Not_official.py": {"mean": 1.0}}}
    else:
        ours = parse_baseline(ours_dict({(1, MM): 1.0}))
        theirs = theirs_dict({(1, RELU): 1.0})
    with pytest.raises(BaselineError, match=message):
        compare_with_published(ours, parse_baseline(theirs))
    if case == "gpu":
        assert compare_with_published(ours, parse_baseline(theirs), allow_other_gpu=True).overall.n == 5


def test_cues_are_attached_from_the_evidence_given():
    ours = parse_baseline(ours_dict(OURS, means={(1, BMM): 5.5}))
    theirs = theirs_dict(THEIRS)
    theirs["level1"][RELU]["std"] = 0.1 * 1.25  # their trials vary by 10%
    repeat = parse_baseline(ours_dict({**OURS, (1, CONV): 9.0 * 1.2}))
    code = {f"level1/{CONV}": "self.conv = nn.Conv2d(3, 8, 3)", f"level1/{MM}": "return torch.matmul(A, B)",
            f"level2/{GEMM2}": "x = F.conv2d(x, w)"}
    # Their CONV (3.0 ms) is below an IEEE fp32 bound of 4.0 ms; their MM (2.0 ms) is above its 1.0 ms.
    cmp = compare_with_published(ours, parse_baseline(theirs), evidence=Evidence(
        code=code, repeat=repeat, host_shares={f"level1/{BMM}": 0.95, f"level1/{MM}": 0.5},
        ieee_bound_ms={f"level1/{CONV}": 4.0, f"level1/{MM}": 1.0}))
    cues = {r.filename: r.cues for r in cmp.ratios}
    assert cues == {MM: (), BMM: ("host-bound", "our-skew"), RELU: ("their-noise",),
                    CONV: ("cudnn-conv", "below-ieee-bound", "run-to-run"), GEMM2: ("cudnn-conv",)}
    counts = cmp.cue_counts()
    assert counts["cudnn-conv"] == {"n": 2, "median_ratio": pytest.approx(2.0),
                                    "median_ratio_without": pytest.approx(1.0)}
    assert "changed" not in counts and "host-bound" in cmp.to_dict()["cues"]


def test_convolution_detection_reads_modules_and_functions():
    assert uses_cudnn_conv("nn.ConvTranspose3d(4, 4, 3)") and uses_cudnn_conv("torch.nn.functional.conv1d (x, w)")
    assert uses_cudnn_conv("F.conv_transpose2d(x, w)") and uses_cudnn_conv("nn.Conv1d(1, 1, 1)")
    assert not uses_cudnn_conv("x = self.convolution_count + 1") and not uses_cudnn_conv("torch.matmul(a, b)")


def test_summary_of_nothing_is_none_and_host_shares_take_the_median_of_repeats():
    assert RatioSummary.of([]) is None
    one = RatioSummary.of([2.0])
    assert one.median == one.p10 == one.p90 == one.geomean == 2.0 and one.ours_over_2x == 0
    rows = [{"level": 3, "name": "35_LSTM", "host_share": 2.0}, {"level": 3, "name": "35_LSTM", "host_share": 3.0},
            {"level": 3, "name": "35_LSTM", "host_share": 2.2}, {"level": 1, "name": "1_MM", "host_share": None},
            {"level": 1, "name": "", "host_share": 0.5}]
    assert host_shares_from_rows(rows) == {"level3/35_LSTM.py": 2.2}


def test_run_to_run_agreement_per_level():
    first = parse_baseline({"level1": {"1_A.py": {"mean": 1, "median": 1.0}, "2_B.py": {"mean": 1, "median": 2.0}},
                            "level3": {"5_LSTM.py": {"mean": 1, "median": 10.0}, "6_X.py": {"mean": 1, "median": 1.0}}})
    second = parse_baseline({"level1": {"1_A.py": {"mean": 1, "median": 1.01}, "2_B.py": {"mean": 1, "median": 2.0}},
                             "level3": {"5_LSTM.py": {"mean": 1, "median": 16.0}}})
    levels = compare_baselines(first, second).by_level()
    assert sorted(levels) == [1, 3]
    assert levels[1].n == 2 and levels[1].median_ratio == pytest.approx(1.005) and levels[1].within(1.02) == 2
    assert levels[3].n == 1 and levels[3].worst.spread == pytest.approx(1.6) and levels[3].within(1.02) == 0
    assert levels[3].only_in_one == ("level3/6_X.py",) and levels[1].only_in_one == ()


def test_kernelbench_files_with_a_failed_problem_load_without_it(tmp_path):
    """KernelBench's generator writes null for a problem it could not time."""
    path = tmp_path / "baseline_time_torch.json"
    path.write_text(json.dumps({"level1": {MM: {"mean": 2.0, "std": 0.1}, RELU: None}}))
    b = load_baseline(path)
    assert b.refs() == [f"level1/{MM}"]


# ---------------------------------------------------------------- the script
PROBLEM = """import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        {init}

    def forward(self, x):
        return {expr}


def get_inputs():
    return [torch.rand(4, 3, 8, 8)]


def get_init_inputs():
    return []
"""


def write_problems(root: Path, exprs: dict[str, tuple[str, str]]) -> Path:
    (root / "level1").mkdir(parents=True)
    for name, (init, expr) in exprs.items():
        (root / "level1" / name).write_text(PROBLEM.format(init=init, expr=expr))
    return root


def test_script_prints_and_writes_the_comparison_without_their_raw_times(tmp_path, capsys):
    from kernelbench.problems import load_directory
    from kernelbench.problems.identity import ref_of

    exprs = {MM: ("pass", "x @ x"), RELU: ("pass", "torch.relu(x)"),
             CONV: ("self.conv = nn.Conv2d(3, 3, 3)", "self.conv(x)")}
    ours_folder = write_problems(tmp_path / "ours", exprs)
    theirs_folder = write_problems(tmp_path / "theirs", {**exprs, RELU: ("pass", "torch.relu(x) * 1")})
    hashes = {ref_of(p): p.hash for p in load_directory(ours_folder)}
    times = {(1, MM): 2.0, (1, RELU): 1.0, (1, CONV): 6.0}
    (tmp_path / "ours.json").write_text(json.dumps(ours_dict(times, hashes=hashes)))
    (tmp_path / "repeat.json").write_text(json.dumps(ours_dict({**times, (1, MM): 2.1}, hashes=hashes)))
    (tmp_path / "theirs.json").write_text(json.dumps(theirs_dict({(1, MM): 2.0, (1, RELU): 0.5, (1, CONV): 1.234567})))
    (tmp_path / "sweep.json").write_text(json.dumps({"rows": [{"level": 1, "name": MM[:-3], "host_share": 0.9}]}))
    out = tmp_path / "cmp.json"
    m = load_script("compare_baselines")
    rc = m.main([str(tmp_path / "ours.json"), "--repeat", str(tmp_path / "repeat.json"),
                 "--published", str(tmp_path / "theirs.json"), "--published-problems", str(theirs_folder),
                 "--problems", str(ours_folder), "--roofline", "--host-shares", str(tmp_path / "sweep.json"),
                 "--json", str(out)])
    printed = capsys.readouterr().out
    assert rc == 0
    assert "2 problems, hashes checked" in printed and f"level1/{RELU} (2.000)" in printed
    assert "1_Square_matrix_multiplication_.py (2 vs 2.1 ms)" in printed  # the worst run-to-run, 1.05x
    data = json.loads(out.read_text())
    pub = data["published"]
    assert [(r["problem"], round(r["ratio"], 6), r["cues"]) for r in pub["largest"]] == [
        (CONV, round(6.0 / 1.234567, 6), ["cudnn-conv"]), (RELU, 2.0, ["changed"]), (MM, 1.0, ["host-bound"])]
    assert pub["levels"]["1"]["n"] == 2 and pub["changed"][0]["problem"] == RELU
    assert data["run_to_run"]["levels"]["1"]["within_2pct"] == 2 and data["run_to_run"]["host_bound_in_sweep"] == [
        f"level1/{MM}"]
    assert data["measurement_seconds"][str(tmp_path / "ours.json")]["eager"]["1"] == {
        "times": 3, "seconds": 6.0, "with_wall_s": 3}
    assert "1.234567" not in out.read_text()  # their times stay in their file


def test_script_errors_are_one_line_and_write_nothing(tmp_path, capsys):
    (tmp_path / "ours.json").write_text(json.dumps(ours_dict(OURS)))
    (tmp_path / "theirs.json").write_text(json.dumps(theirs_dict(THEIRS)))
    out = tmp_path / "cmp.json"
    m = load_script("compare_baselines")
    rc = m.main([str(tmp_path / "ours.json"), "--mode", "compile-default", "--published",
                 str(tmp_path / "theirs.json"), "--json", str(out)])
    err = capsys.readouterr().err
    assert rc == 2 and not out.exists()
    assert err.strip() == (f"compare_baselines.py: error: {tmp_path / 'ours.json'} has no 'compile-default' "
                           "baseline (modes present: eager)")
    rc = m.main([str(tmp_path / "ours.json"), "--roofline", "--json", str(out)])
    assert rc == 2 and not out.exists()
    assert capsys.readouterr().err.strip() == ("compare_baselines.py: error: --roofline needs --problems (the code "
                                               "whose FLOPs and bytes are counted)")
    other = tmp_path / "other"
    write_problems(other, {MM: ("pass", "x + 1")})
    rc = m.main([str(tmp_path / "ours.json"), "--problems", str(other), "--json", str(out)])
    assert rc == 2 and not out.exists()
    assert f"--problems {other} holds other versions of level1/{MM}" in capsys.readouterr().err


def test_script_help_runs():
    import subprocess

    proc = subprocess.run([sys.executable, str(REPO / "scripts" / "compare_baselines.py"), "--help"],
                          capture_output=True, text=True, timeout=60, env={"PYTHONPATH": str(REPO), "PATH": ""})
    assert proc.returncode == 0 and "--published-problems" in proc.stdout
