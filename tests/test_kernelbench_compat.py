"""A run directory made by KernelBench's own scripts, scored by ``scripts/benchmark_eval_analysis.py``.

The issue's done-when: the same fast_p and geometric mean as KernelBench's own
``scripts/benchmark_eval_analysis.py``. The run written here has what real runs have: problems with
no result, a sample 0 that is wrong while sample 1 is right, compiled-but-wrong kernels, a baseline
that lacks some problems, and timed runtimes of every size. The expected figures come from
:func:`kernelbench_script_figures`, a separate implementation of what KernelBench's script does
(align by problem file name, keep sample 0, patch missing problems as incorrect, skip problems the
baseline lacks, then ``fastp`` and ``geometric_mean_speed_ratio_correct_only`` of its ``score.py``),
written for this test so it does not share code with ``kernelbench.scoring``.

The fixture was also scored by KernelBench's own script (commit 423217d9, run once from its
repository on the files :func:`write_kernelbench_run` writes); it printed the same figures. That check
needs KernelBench's repository and is not part of the suite.
"""

from __future__ import annotations

import json
import math
import random
from dataclasses import dataclass
from pathlib import Path

import pytest
from kbtesting import load_script

ROOT = Path(__file__).resolve().parents[1]
FAST_P = (0.0, 0.5, 0.8, 1.0, 1.5, 2.0)

PROBLEM = '''import torch
import torch.nn as nn


class Model(nn.Module):
    """Problem {pid} of the compatibility test."""

    def __init__(self):
        super(Model, self).__init__()

    def forward(self, x):
        return x * {factor}


def get_inputs():
    return [torch.randn({size})]


def get_init_inputs():
    return []
'''


@dataclass
class KernelBenchRun:
    """What the files say, in the form KernelBench's script reads them."""

    names: dict[int, str]                 # problem id -> file name (``3_Scale3_compat.py``)
    eval_results: dict[str, list[dict]]   # eval_results.json
    baseline: dict[str, dict[str, dict]]  # {"level1": {file name: {"mean": ms, ...}}}


def _entry(sample_id: int, compiled: bool, correct: bool, runtime: float) -> dict:
    """One sample as KernelBench's eval_from_generations.py writes it (runtime -1.0 when not timed)."""
    return {"sample_id": sample_id, "compiled": compiled, "correctness": correct, "metadata": {},
            "runtime": runtime, "runtime_stats": {} if runtime < 0 else {"mean": runtime}}


def write_kernelbench_run(cwd: Path, n_problems: int = 30, seed: int = 20, run_name: str = "kbrun",
                          hardware: str = "H100_Modal", baseline_name: str = "baseline_time_torch") -> KernelBenchRun:
    """A KernelBench checkout's layout in ``cwd``: ``KernelBench/level1/``, ``runs/<run>/``, ``results/timing/``."""
    rng = random.Random(seed)
    level1 = cwd / "KernelBench" / "level1"
    level1.mkdir(parents=True)
    names = {}
    for pid in range(1, n_problems + 1):
        names[pid] = f"{pid}_Scale{pid}_compat.py"
        (level1 / names[pid]).write_text(PROBLEM.format(pid=pid, factor=pid + 1, size=8 + pid))
    # Reference times first; a kernel's time is its reference's over a speedup between 0.2x and 5x.
    reference = {pid: float(f"{rng.uniform(0.01, 30.0):.3g}") for pid in range(1, n_problems + 1)}
    eval_results: dict[str, list[dict]] = {}
    for pid in range(1, n_problems + 1):
        kind = rng.random()
        if kind < 0.10:
            continue                                          # no result at all: incorrect
        if kind < 0.18:
            eval_results[str(pid)] = [_entry(1, True, True, 0.5)]  # only sample 1: sample 0 is what counts
            continue
        if kind < 0.30:
            eval_results[str(pid)] = [_entry(0, False, False, -1.0)]  # did not build
            continue
        if kind < 0.42:
            eval_results[str(pid)] = [_entry(0, True, False, -1.0), _entry(1, True, True, 0.01)]
            continue
        speedup = math.exp(rng.uniform(math.log(0.2), math.log(5.0)))
        runtime = float(f"{reference[pid] / speedup:.3g}")  # KernelBench keeps three significant digits
        eval_results[str(pid)] = [_entry(0, True, True, runtime)]
        if rng.random() < 0.3:
            eval_results[str(pid)].append(_entry(1, True, True, runtime / 3))
    means = {}
    for pid in range(1, n_problems + 1):
        if rng.random() < 0.1:
            continue                                          # the baseline lacks this problem
        means[names[pid]] = {"mean": reference[pid], "std": 0.01, "min": reference[pid], "max": reference[pid],
                             "num_trials": 100, "hardware": "NVIDIA H100 80GB HBM3", "device": "cuda:0"}
    baseline = {"level1": means}
    run = cwd / "runs" / run_name
    run.mkdir(parents=True)
    (run / "eval_results.json").write_text(json.dumps(eval_results, indent=2))
    for key in eval_results:
        (run / f"level_1_problem_{key}_sample_0_kernel.py").write_text("# kernel as generated\n")
    timing = cwd / "results" / "timing" / hardware
    timing.mkdir(parents=True)
    (timing / f"{baseline_name}.json").write_text(json.dumps(baseline, indent=2))
    return KernelBenchRun(names, eval_results, baseline)


def kernelbench_script_figures(run: KernelBenchRun) -> dict:
    """fast_p and the geometric mean of correct speedups, computed the way KernelBench's script does."""
    sample0 = {}
    for key, entries in run.eval_results.items():
        zero = [e for e in entries if e["sample_id"] == 0]
        if zero:
            sample0[int(key)] = zero[0]
    correct, base, actual = [], [], []
    for pid in sorted(run.names):
        timing = run.baseline["level1"].get(run.names[pid])
        if timing is None:
            continue                                          # skipped: not in the denominator either
        e = sample0.get(pid, {"correctness": False, "runtime": -1.0})
        correct.append(bool(e["correctness"]))
        base.append(timing["mean"])
        actual.append(e["runtime"])
    n = len(correct)
    speedups = [b / a for ok, b, a in zip(correct, base, actual) if ok]
    fast = {p: (sum(1 for s in speedups if s > p) / n if n else 0) for p in FAST_P}
    geo = math.exp(sum(math.log(s) for s in speedups) / len(speedups)) if speedups else 0
    return {"n": n, "n_correct": len(speedups), "fast_p": fast, "geomean": geo}


@pytest.fixture
def checkout(tmp_path, monkeypatch, pin_official):
    """A KernelBench checkout in the working directory, its problems pinned as the official set."""
    cwd = tmp_path / "KernelBench-repo"
    cwd.mkdir()
    run = write_kernelbench_run(cwd)
    pin_official(cwd / "KernelBench", "compat-rev")
    monkeypatch.chdir(cwd)
    return cwd, run


def test_the_fixture_has_every_case_kernelbench_runs_have(checkout):
    _, run = checkout
    sample0 = {k: [e for e in v if e["sample_id"] == 0] for k, v in run.eval_results.items()}
    assert len(run.eval_results) < len(run.names)                                   # problems with no result
    assert any(not s for s in sample0.values())                                     # only sample 1
    assert any(s and not s[0]["compiled"] for s in sample0.values())                 # did not build
    assert any(s and s[0]["compiled"] and not s[0]["correctness"] for s in sample0.values())  # wrong
    assert len(run.baseline["level1"]) < len(run.names)                             # baseline lacks some
    fig = kernelbench_script_figures(run)
    speedups_above_1 = fig["fast_p"][1.0] * fig["n"]
    assert 0 < speedups_above_1 < fig["n_correct"]                                   # faster and slower kernels


def test_benchmark_eval_analysis_gives_kernelbench_figures_for_a_kernelbench_run(checkout):
    cwd, run = checkout
    rc = load_script("benchmark_eval_analysis").main(
        ["run_name=kbrun", "level=1", "hardware=H100_Modal", "baseline=baseline_time_torch"])
    assert rc == 0
    out = json.loads((cwd / "runs" / "kbrun" / "analysis_results.json").read_text())
    expected = kernelbench_script_figures(run)
    kb = out["kernelbench_compatible"]
    assert (kb["n_aligned"], kb["n_correct"]) == (expected["n"], expected["n_correct"])
    for p in FAST_P:
        assert kb["fast_p"][f"fast_{p:g}"] == pytest.approx(expected["fast_p"][p], abs=1e-12), p
    assert kb["geomean_speedup_correct"] == pytest.approx(expected["geomean"], rel=1e-12)
    # The set was found from the checkout's KernelBench/ folder and recorded with every problem's hash.
    assert out["problem_set"]["name"] == "kernelbench" and out["problem_set"]["revision"] == "compat-rev"
    assert len(out["problem_set"]["hashes"]) == len(run.names)
    # Our own score counts every problem of the level, those the baseline lacks as untimed (named in
    # the output); sample 0 is the kernel, as in KernelBench, even where only another sample has a result.
    ours = out["levels"]["1"]
    assert ours["n_problems"] == len(run.names)
    correct0 = {int(k) for k, e in run.eval_results.items() for s in e if s["sample_id"] == 0 and s["correctness"]}
    assert ours["fast_p"]["fast_0"] == pytest.approx(len(correct0) / len(run.names))
    unbaselined = {pid for pid, name in run.names.items() if name not in run.baseline["level1"]}
    assert out["baseline_missing"] == [f"level1/{run.names[pid]}" for pid in sorted(unbaselined)]
    faster = sum(1 for pid in correct0 - unbaselined
                 if run.baseline["level1"][run.names[pid]]["mean"] / next(
                     s["runtime"] for s in run.eval_results[str(pid)] if s["sample_id"] == 0) > 1.0)
    assert ours["fast_p"]["fast_1"] == pytest.approx(faster / len(run.names))


def test_the_builtin_suite_is_never_what_scores_it(checkout, monkeypatch, capsys):
    """The issue's failure: without the checkout the run was scored against built-in problems that share ids."""
    cwd, _ = checkout
    (cwd / "KernelBench").rename(cwd / "elsewhere")
    rc = load_script("benchmark_eval_analysis").main(
        ["run_name=kbrun", "level=1", "hardware=H100_Modal", "baseline=baseline_time_torch"])
    assert rc == 2
    err = capsys.readouterr().err
    # Its baseline names the official problems, so it says where they should come from.
    assert "looks like a run on the official KernelBench problems" in err and "run from a KernelBench checkout" in err
    assert not (cwd / "runs" / "kbrun" / "analysis_results.json").exists()
