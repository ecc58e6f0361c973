"""scripts/bench_evaluator.py's issue-23 counts: run end to end on the CPU, and counted from real results."""

from __future__ import annotations

import random
import subprocess
import sys

from kbtesting import REPO, load_script, problem_source, write_problems

from kernelbench.results import KernelResult, TimingStats

bench = load_script("bench_evaluator")


def _row(level: int, pid: int, shift: float, noise: float, host_share: float | None = None) -> dict:
    """A row as main() writes it, from a KernelResult of interleaved blocks (identity, shifted by ``shift``)."""
    rng = random.Random(pid)
    ref, cand = [], []
    for _ in range(8):
        for out, base in ((ref, 1.0), (cand, shift)):
            level_ = 1.0 + noise * rng.gauss(0, 1)
            out += [base * level_ for _ in range(5)]
    r = KernelResult(level=level, problem_id=pid, problem_name=f"{pid}_P", backend="torch", compiled=True,
                     correct=True, runtime=TimingStats(samples_ms=cand, block_calls=5),
                     ref_runtime=TimingStats(samples_ms=ref, block_calls=5), host_share=host_share,
                     wall_time_s=2.0, stage_times_s={"timing": 1.5})
    return {"level": r.level, "problem_id": r.problem_id, "name": r.problem_name, "correct": r.correct,
            "speedup": r.speedup, "ci95": [r.speedup_ci95.lo, r.speedup_ci95.hi], "timing_flags": r.timing_flags,
            "host_share": r.host_share, "infrastructure": False, "eval_s": r.wall_time_s, "stage_s": r.stage_times_s}


def test_identity_summary_counts():
    rows = [_row(1, 1, 1.0, 0.001), _row(1, 2, 1.0 / 1.05, 0.001),  # 2: a precise 1.05x: outside, unflagged
            _row(3, 1, 1.0 / 1.08, 0.2, host_share=3.0)]  # noisy and host-bound: flagged
    s = bench.identity_summary(rows)
    assert s[1]["interval_holds_1"] == 1 and s[1]["significantly_faster_p1"] == 1
    assert s[1]["outside_3pct"] == 1 and s[1]["outside_3pct_unflagged"][0].startswith("L1 #2 2_P 1.05")
    assert s[3]["outside_3pct_unflagged"] == [] and s[3]["host_bound"] == ["L3 #1 1_P (host share 3.00)"]
    assert s[0]["evaluated"] == 3 and s[0]["gpu_seconds"] == 6.0 and s[0]["timing_seconds"] == 4.5


def test_the_script_runs_on_the_cpu_and_prints_the_summary(tmp_path):
    write_problems(tmp_path, {"1_Relu.py": problem_source(shape="16, 16")})
    out = subprocess.run([sys.executable, str(REPO / "scripts" / "bench_evaluator.py"), "--source", "directory",
                          "--path", str(tmp_path), "--levels", "1", "--correctness-trials", "1",
                          "--out", str(tmp_path / "b.json")], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    assert "=== issue 23: intervals, flags, GPU time ===" in out.stdout
    assert "level 1: 1/1 correct (0 infrastructure failures)" in out.stdout
