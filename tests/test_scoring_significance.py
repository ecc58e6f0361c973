"""Significance-aware fast_p and the geomean interval beside KernelBench's fast_p (issue 23, part 3)."""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys

import pytest

from kernelbench.problems import Problem, ProblemSet
from kernelbench.results import KernelResult, Stage, StageError, TimingStats
from kernelbench.runs import RunDirectory
from kernelbench.scoring import fast_p, fast_p_significant, outcomes_from_results, score_results

CODE = "import torch\nclass Model: pass\ndef get_inputs(): return []\ndef get_init_inputs(): return []\n"
BLOCK = 10


def problems(n: int) -> ProblemSet:
    return ProblemSet([Problem(1, i, f"{i}_P", CODE) for i in range(1, n + 1)])


def timed(pid: int, true_speedup: float, noise: float, rng: random.Random, rounds: int = 8) -> KernelResult:
    """A result with interleaved blocks: per-round shared clock level, per-call noise of ``noise``."""
    ref, cand = [], []
    for _ in range(rounds):
        for out, base in ((ref, 1.0), (cand, 1.0 / true_speedup)):
            level = 1.0 + noise * rng.gauss(0, 1)
            out += [base * level * rng.lognormvariate(0, 0.002) for _ in range(BLOCK)]
    return KernelResult(level=1, problem_id=pid, problem_name=f"{pid}_P", backend="cuda", compiled=True, correct=True,
                        runtime=TimingStats(samples_ms=cand, block_calls=BLOCK),
                        ref_runtime=TimingStats(samples_ms=ref, block_calls=BLOCK))


def test_identity_candidates_count_in_fast_1_about_half_the_time_but_not_significantly():
    """The issue's complaint: KernelBench's fast_1 counts an identity candidate as faster about half the time."""
    rng = random.Random(7)
    ps = problems(200)
    rs = [timed(i, 1.0, 0.02, rng) for i in range(1, 201)]
    report = score_results(ps, rs)
    s = report.levels[1]
    assert 0.35 < s.fast_p[1.0] < 0.65  # unchanged KernelBench figure: noise counts
    assert s.fast_p_significant[1.0] <= 0.05  # no identity counted faster by noise (about 2.5% expected)
    assert s.fast_p_significant[0.0] == s.fast_p[0.0] == 1.0
    lo, hi = s.geomean_ci95
    assert lo <= 1.0 <= hi and lo <= s.geomean_speedup <= hi


def test_real_gains_are_counted_and_fast_p_itself_is_unchanged():
    rng = random.Random(9)
    ps = problems(4)
    rs = [timed(1, 2.0, 0.01, rng), timed(2, 1.02, 0.05, rng), timed(3, 0.7, 0.01, rng)]
    outcomes, _ = outcomes_from_results(ps, rs)
    assert fast_p(outcomes, 4, 1.0) == 2 / 4  # 2.0x and a noisy 1.02x
    assert fast_p_significant(outcomes, 4, 1.0) == 1 / 4  # only the 2.0x is clearly faster
    assert fast_p_significant(outcomes, 4, 1.5) == 1 / 4 and fast_p_significant(outcomes, 4, 2.5) == 0.0


def test_a_speedup_without_interval_never_counts_as_significant():
    ps = problems(1)
    old = KernelResult(level=1, problem_id=1, problem_name="1_P", backend="cuda", compiled=True, correct=True,
                       runtime=TimingStats(samples_ms=[1.0]), ref_runtime=TimingStats(samples_ms=[3.0]))
    s = score_results(ps, [old]).levels[1]
    assert s.fast_p[1.0] == 1.0 and s.fast_p_significant == {} and s.geomean_ci95 is None
    # Mixed with a result that has one, the old one counts as not shown to be faster.
    ps2 = problems(2)
    new = timed(2, 2.0, 0.01, random.Random(2))
    s2 = score_results(ps2, [old, new]).levels[1]
    assert s2.fast_p[1.0] == 1.0 and s2.fast_p_significant[1.0] == 0.5


def test_infrastructure_failures_are_left_out_and_counted_apart():
    ps = problems(2)
    rng = random.Random(1)
    lost = KernelResult(level=1, problem_id=2, problem_name="2_P", backend="cuda",
                        error=StageError.make(Stage.INFRASTRUCTURE, "RuntimeError", "evaluator error: x"))
    s = score_results(ps, [timed(1, 2.0, 0.01, rng), lost]).levels[1]
    assert s.n_attempted == 1 and s.n_infrastructure == 1 and s.n_problems == 2
    assert s.fast_p[1.0] == 0.5
    d = s.to_dict()
    assert d["n_infrastructure"] == 1 and d["fast_p_significant"]["fast_1"] == 0.5 and len(d["geomean_ci95"]) == 2


def test_against_a_baseline_the_interval_moves_with_the_speedup():
    from kernelbench.baselines import parse_baseline

    ps = problems(1)
    r = timed(1, 1.0, 0.01, random.Random(4))
    base = parse_baseline({"level1": {"1_P.py": {"mean": 2.0 * r.runtime_ms}}, "environment": {"gpu_name": "H100"}})
    outcomes, _ = outcomes_from_results(ps, [r], base)
    iv = outcomes[0].interval
    assert outcomes[0].speedup == pytest.approx(2.0) and iv.lo < 2.0 < iv.hi
    assert iv.hi / iv.lo == pytest.approx(r.speedup_ci95.hi / r.speedup_ci95.lo)


def test_analyze_prints_both_fast_p_columns_the_geomean_interval_and_flags(tmp_path):
    root = tmp_path / "probs" / "level1"
    root.mkdir(parents=True)
    rng = random.Random(3)
    rd = RunDirectory(tmp_path / "run")
    for i, (sp, noise, host) in enumerate([(2.0, 0.01, 2.5), (1.0, 0.2, None)], start=1):
        (root / f"{i}_P.py").write_text(CODE)
        rd.write_kernel(1, i, 0, "# kernel\n")
        rd.save_result(timed(i, sp, noise, rng).model_copy(update={"host_share": host}))
    out = subprocess.run([sys.executable, "-m", "kernelbench.cli.main", "analyze", "--run-dir", str(rd.path),
                          "--source", "directory", "--path", str(tmp_path / "probs"), "--json",
                          str(tmp_path / "s.json")], capture_output=True, text=True, timeout=120, env={**os.environ})
    assert out.returncode == 0, out.stderr
    assert "fast_p significant" in out.stdout and "imprecise" in out.stdout
    assert "host-bound (host share 2.50)" in out.stdout
    data = json.loads((tmp_path / "s.json").read_text())
    assert [(f["problem_id"], f["flags"]) for f in data["timing_flags"]] == [(1, ["host-bound"]), (2, ["imprecise"])]
    assert data["timing_flags"][0]["host_share"] == 2.5
    scores = data["levels"]["1"]
    assert scores["fast_p"]["fast_1"] >= scores["fast_p_significant"]["fast_1"] == 0.5
    assert scores["geomean_ci95"][0] < scores["geomean_speedup"] < scores["geomean_ci95"][1]
