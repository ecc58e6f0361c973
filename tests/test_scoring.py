"""The one scoring module, against hand-computed expectations."""

from __future__ import annotations

import itertools
import json
import math
import os
import random
import subprocess
import sys

import pytest

from kernelbench.baselines import parse_baseline
from kernelbench.errors import BaselineError
from kernelbench.problems import Problem, ProblemSet
from kernelbench.results import EnvironmentInfo, KernelResult, TimingStats
from kernelbench.runs import RunDirectory
from kernelbench.scoring import (
    ProblemOutcome,
    baseline_drift,
    check_same_gpu,
    fast_p,
    geometric_mean,
    outcomes_from_results,
    pass_at_k,
    score_outcomes,
    score_results,
)

CODE = "import torch\nclass Model: pass\ndef get_inputs(): return []\ndef get_init_inputs(): return []\n"


def problems(level_sizes: dict[int, int]) -> ProblemSet:
    return ProblemSet([Problem(lv, i, f"{i}_P", CODE) for lv, n in level_sizes.items() for i in range(1, n + 1)])


def result(level: int, pid: int, correct: bool = True, cand_ms: float | None = 1.0, ref_ms: float | None = 1.0,
           sample: int = 0, gpu: str | None = None) -> KernelResult:
    return KernelResult(
        level=level, problem_id=pid, problem_name=f"{pid}_P", sample_id=sample, backend="cuda", compiled=True,
        correct=correct, runtime=TimingStats(samples_ms=[cand_ms]) if cand_ms else None,
        ref_runtime=TimingStats(samples_ms=[ref_ms]) if ref_ms else None,
        environment=EnvironmentInfo(device="cuda:0", gpu_name=gpu) if gpu else None)


def test_fast_p_counts_strictly_faster_and_ties_do_not_count():
    outs = [ProblemOutcome(1, 1, True, True, 1.0), ProblemOutcome(1, 2, True, True, 1.5),
            ProblemOutcome(1, 3, True, True, 2.0 + 1e-9), ProblemOutcome(1, 4, True, False, 5.0)]
    assert fast_p(outs, 5, 0.0) == 3 / 5  # correctness rate, the incorrect 5x does not count
    assert fast_p(outs, 5, 1.0) == 2 / 5  # exactly 1.0 is not faster than 1.0
    assert fast_p(outs, 5, 1.5) == 1 / 5
    assert fast_p(outs, 5, 2.0) == 1 / 5


def test_geometric_means_hand_computed():
    ps = problems({1: 4})
    rs = [result(1, 1, cand_ms=0.5, ref_ms=1.0), result(1, 2, cand_ms=2.0, ref_ms=1.0),
          result(1, 3, correct=False, cand_ms=0.1, ref_ms=1.0)]  # problem 4 missing
    s = score_results(ps, rs).levels[1]
    assert s.geomean_speedup == pytest.approx(math.sqrt(2.0 * 0.5))
    assert s.fulldeck_geomean == pytest.approx((2.0 * 0.5 * 1.0 * 1.0) ** 0.25)
    assert (s.n_problems, s.n_attempted, s.n_correct) == (4, 3, 2)
    assert s.fast_p[0.0] == 0.5 and s.fast_p[1.0] == 0.25


def test_a_level_with_no_correct_problem():
    s = score_results(problems({1: 3}), [result(1, 1, correct=False), result(1, 2, correct=False)]).levels[1]
    assert s.geomean_speedup is None and s.fulldeck_geomean == 1.0
    assert all(v == 0.0 for v in s.fast_p.values()) and s.correctness_rate == 0.0


def test_baseline_drift_reports_problems_whose_baseline_and_in_session_reference_disagree():
    ps = problems({1: 5})
    times = {"1_P.py": 1.05, "2_P.py": 1.5, "3_P.py": 0.7, "4_P.py": 2.0, "5_P.py": 1.0}
    eager = parse_baseline({"level1": {k: {"mean": v} for k, v in times.items()}})
    rs = [result(1, 1, ref_ms=1.0),  # 5% off: within 10%
          result(1, 2, ref_ms=1.0, sample=0), result(1, 2, ref_ms=1.2, sample=1), result(1, 2, ref_ms=5.0, sample=2),
          result(1, 3, ref_ms=1.0, correct=False),  # the reference was timed even if the candidate failed
          result(1, 4, ref_ms=None)]  # never timed: nothing to compare; problem 5 has no result at all
    drift = baseline_drift(ps, rs, eager)
    assert [(d.problem_id, d.baseline_ms, d.in_session_ms) for d in drift] == [(2, 1.5, 1.2), (3, 0.7, 1.0)]
    assert drift[0].ratio == pytest.approx(1.25) and drift[0].to_dict()["ratio"] == pytest.approx(1.25)
    assert [d.problem_id for d in baseline_drift(ps, rs, eager, tolerance=0.3)] == [3]  # 1.25x is within 30%, 1/0.7 is not
    assert [d.problem_id for d in baseline_drift(ps, rs, eager, tolerance=0.01)] == [1, 2, 3]
    compiled = parse_baseline({"modes": {"compile-default": {"level1": {"2_P.py": {"mean": 9.0}}}}},
                              mode="compile-default")
    assert baseline_drift(ps, rs, compiled) == []  # the in-session reference is eager: not comparable
    with pytest.raises(ValueError, match="negative"):
        baseline_drift(ps, rs, eager, tolerance=-0.1)


def test_results_are_matched_by_key_never_by_position():
    ps = problems({1: 3})
    base = parse_baseline({"level1": {"3_P.py": {"mean": 9.0}, "1_P.py": {"mean": 3.0}, "2_P.py": {"mean": 6.0}}})
    rs = [result(1, 3, cand_ms=3.0), result(1, 1, cand_ms=3.0), result(1, 2, cand_ms=3.0)]
    random.Random(0).shuffle(rs)
    outcomes, _ = outcomes_from_results(ps, rs, base)
    assert {o.problem_id: o.speedup for o in outcomes} == {1: 1.0, 2: 2.0, 3: 3.0}
    assert score_results(ps, rs, base).levels[1].geomean_speedup == pytest.approx(6.0 ** (1 / 3))


def test_a_baseline_missing_a_problem_is_an_error_naming_it():
    base = parse_baseline({"level1": {"1_P.py": {"mean": 1.0}}}, where="baselines/X.json")
    with pytest.raises(BaselineError, match="level 1 problem 2 \\(2_P.py\\)"):
        score_results(problems({1: 2}), [result(1, 1)], base)


def test_kernelbench_baseline_format_and_median_preference():
    kb = parse_baseline({"level1": {"1_P.py": {"mean": 2.0, "std": 0.1, "num_trials": 100, "hardware": "NVIDIA H100"}}})
    ours = parse_baseline({"level1": {"1_P.py": {"mean": 2.0, "median": 1.8}}, "environment": {"gpu_name": "H100"},
                           "modes": {"compile-default": {"level1": {"1_P.py": {"mean": 1.0}}}}})
    p = problems({1: 1}).get(1, 1)
    assert kb.require(p).headline_ms == 2.0 and kb.gpu_name == "NVIDIA H100"
    assert ours.require(p).headline_ms == 1.8
    assert parse_baseline({"level1": {}, "modes": {"compile-default": {"level1": {"1_P.py": {"mean": 1.0}}}}},
                          mode="compile-default").require(p).mean == 1.0
    with pytest.raises(BaselineError, match="no 'compile-max-autotune' baseline"):
        parse_baseline({"level1": {"1_P.py": {"mean": 1.0}}}, mode="compile-max-autotune")


def test_refuses_another_gpus_baseline_unless_forced():
    base = parse_baseline({"level1": {"1_P.py": {"mean": 1.0}}, "environment": {"gpu_name": "NVIDIA H100 80GB HBM3"}})
    rs = [result(1, 1, gpu="NVIDIA A100-SXM4-80GB")]
    with pytest.raises(BaselineError, match="measured on A100.*for H100"):
        check_same_gpu(rs, base)
    check_same_gpu(rs, base, force=True)
    check_same_gpu([result(1, 1, gpu="NVIDIA H100 80GB HBM3")], base)


def test_results_in_another_precision_than_the_baseline_are_refused_unless_forced():
    base = parse_baseline({"level1": {"1_P.py": {"mean": 1.0}},
                           "environment": {"gpu_name": "NVIDIA H100 80GB HBM3", "precision": "fp32"}})
    half = result(1, 1, gpu="NVIDIA H100 80GB HBM3").model_copy(update={"precision": "bf16"})
    with pytest.raises(BaselineError, match=r"timed in bf16 but the baseline .*holds fp32 times; measure one with "
                                            r"`kernelbench baselines --precision bf16`"):
        check_same_gpu([half], base)
    check_same_gpu([half], base, force=True)
    check_same_gpu([result(1, 1, gpu="NVIDIA H100 80GB HBM3")], base)  # fp32 against fp32
    untimed = result(1, 1, correct=False, cand_ms=None).model_copy(update={"precision": "bf16"})
    check_same_gpu([untimed], base)  # nothing timed, nothing compared
    unknown = parse_baseline({"level1": {"1_P.py": {"mean": 1.0}}})  # a KernelBench file says no precision
    check_same_gpu([half], unknown)


def test_pass_at_k_matches_brute_force_enumeration():
    for n, c, k in [(5, 2, 1), (5, 2, 3), (6, 0, 2), (6, 6, 4), (7, 3, 7), (10, 4, 5)]:
        samples = [1] * c + [0] * (n - c)
        subsets = list(itertools.combinations(samples, k))
        brute = sum(1 for s in subsets if any(s)) / len(subsets)
        assert pass_at_k(n, c, k) == pytest.approx(brute), (n, c, k)
    with pytest.raises(ValueError):
        pass_at_k(3, 1, 4)


def test_pass_at_k_per_level_over_the_full_problem_set():
    ps = problems({1: 2})
    rs = [result(1, 1, correct=s < 2, sample=s) for s in range(4)] + [result(1, 2, correct=False, sample=s)
                                                                       for s in range(4)]
    s = score_results(ps, rs, ks=(1, 2, 5)).levels[1]
    assert s.pass_at_k[1] == pytest.approx((0.5 + 0.0) / 2)
    assert s.pass_at_k[2] == pytest.approx((5 / 6 + 0.0) / 2)  # 1 - C(2,2)/C(4,2) for problem 1
    assert 5 not in s.pass_at_k  # only 4 samples per problem


def test_multi_level_totals_weight_levels_by_problem_count():
    ps = problems({1: 4, 2: 1})
    rs = [result(1, 1, cand_ms=0.5), result(2, 1, correct=False)]
    report = score_results(ps, rs)
    assert report.levels[1].fast_p[1.0] == 0.25 and report.levels[2].fast_p[1.0] == 0.0
    assert report.overall.fast_p[1.0] == pytest.approx((0.25 * 4 + 0.0 * 1) / 5)
    assert report.overall.n_problems == 5
    assert report.overall.fulldeck_geomean == pytest.approx(2.0 ** (1 / 5))


def test_sample_policy_best_picks_the_fastest_correct_sample():
    ps = problems({1: 1})
    rs = [result(1, 1, correct=False, sample=0), result(1, 1, cand_ms=0.5, sample=1), result(1, 1, cand_ms=0.25, sample=2)]
    assert score_results(ps, rs).levels[1].n_correct == 0  # KernelBench: sample 0
    assert score_results(ps, rs, sample_policy="best").levels[1].geomean_speedup == pytest.approx(4.0)


def test_score_outcomes_rejects_two_outcomes_for_one_problem():
    with pytest.raises(ValueError, match="more than one outcome"):
        score_outcomes("x", 2, [ProblemOutcome(1, 1, True, True, 1.0)] * 2)
    assert geometric_mean([]) is None


def test_analyze_cli_on_a_fixture_run(tmp_path):
    root = tmp_path / "probs" / "level1"
    root.mkdir(parents=True)
    for i in (1, 2):
        (root / f"{i}_P.py").write_text(CODE)
    rd = RunDirectory(tmp_path / "run")
    for r in (result(1, 1, cand_ms=0.5, gpu="NVIDIA H100 80GB HBM3"), result(1, 2, correct=False)):
        rd.write_kernel(1, r.problem_id, 0, "# kernel\n")
        rd.save_result(r)
    (tmp_path / "H100.json").write_text(json.dumps({"level1": {"1_P.py": {"mean": 2.0}, "2_P.py": {"mean": 1.0}},
                                                    "environment": {"gpu_name": "H100"}}))
    base = [sys.executable, "-m", "kernelbench.cli.main", "analyze", "--run-dir", str(tmp_path / "run"),
            "--source", "directory", "--path", str(tmp_path / "probs")]
    env = {**os.environ}
    out = subprocess.run(base + ["--baseline", str(tmp_path / "H100.json"), "--json", str(tmp_path / "s.json")],
                         capture_output=True, text=True, timeout=120, env=env)
    assert out.returncode == 0, out.stderr
    scores = json.loads((tmp_path / "s.json").read_text())
    assert scores["levels"]["1"]["fast_p"]["fast_1"] == 0.5 and scores["levels"]["1"]["geomean_speedup"] == 4.0
    (tmp_path / "A100.json").write_text(json.dumps({"level1": {"1_P.py": {"mean": 2.0}, "2_P.py": {"mean": 1.0}},
                                                    "environment": {"gpu_name": "A100"}}))
    refused = subprocess.run(base + ["--baseline", str(tmp_path / "A100.json")], capture_output=True, text=True,
                             timeout=120, env=env)
    assert refused.returncode == 2 and "--force" in refused.stderr
    (tmp_path / "partial.json").write_text(json.dumps({"level1": {"2_P.py": {"mean": 1.0}}}))
    partial = subprocess.run(base + ["--baseline", str(tmp_path / "partial.json"), "--json", str(tmp_path / "p.json")],
                             capture_output=True, text=True, timeout=120, env=env)
    # A problem the baseline lacks stays in the denominator, untimed: its correct kernel is never "faster".
    assert partial.returncode == 0, partial.stderr
    assert "has no time for 1 problem(s) of level 1 (1_P.py)" in partial.stderr
    scores = json.loads((tmp_path / "p.json").read_text())
    assert scores["baseline_missing"] == ["level1/1_P.py"]
    assert scores["levels"]["1"]["fast_p"]["fast_0"] == 0.5 and scores["levels"]["1"]["fast_p"]["fast_0.5"] == 0.0
