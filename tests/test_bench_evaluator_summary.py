"""scripts/bench_evaluator.py's issue-23 counts: run end to end on the CPU, and counted from real results."""

from __future__ import annotations

import json
import os
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
    # Where the job's time went, command by command (session 20): every command the parent waited for, in order.
    data = json.loads((tmp_path / "b.json").read_text())
    whats = [what for _, what, _ in data["rows"][0]["calls"]]
    for expected in ("reference setup", "candidate import and compilation", "correctness trial 1",
                     "comparison of trial 1", "waiting for a started worker"):
        assert expected in whats, whats
    assert all(isinstance(s, float) and s >= 0 for _, _, s in data["rows"][0]["calls"])
    assert data["command_means_s"]["candidate: correctness trial N"] > 0
    assert "by worker command" in out.stdout and "reference: reference setup" in out.stdout
    assert data["reference_workers"] == {"forked": 0, "started": 1}  # (no template on the CPU by default)


def test_the_summary_says_how_the_references_came_to_be(tmp_path):
    """With the reference template on, every reference of the run is a fork, and the summary says so (a figure
    compares with another only where these agree)."""
    write_problems(tmp_path, {"1_Relu.py": problem_source(shape="16, 16"), "2_Relu.py": problem_source(shape="8, 8")})
    env = {**os.environ, "KB_REFERENCE_TEMPLATE": "1"}
    out = subprocess.run([sys.executable, str(REPO / "scripts" / "bench_evaluator.py"), "--source", "directory",
                          "--path", str(tmp_path), "--levels", "1", "--correctness-trials", "1",
                          "--out", str(tmp_path / "b.json")], capture_output=True, text=True, timeout=300, env=env)
    assert out.returncode == 0, out.stderr[-3000:]
    data = json.loads((tmp_path / "b.json").read_text())
    assert data["reference_workers"]["forked"] >= 2 and data["reference_workers"]["started"] == 0
    assert "forked from the template, 0 started" in out.stdout


def test_command_totals_merge_trial_numbers_and_sort_largest_first():
    bench = load_script("bench_evaluator")
    rows = [{"calls": [["reference", "comparison of trial 1", 0.5], ["reference", "comparison of trial 2", 0.25],
                       ["candidate", "release", 1.0]]}, {"calls": [["candidate", "release", 0.5]]}, {}]
    assert list(bench.command_totals(rows).items()) == [("candidate: release", 1.5),
                                                         ("reference: comparison of trial N", 0.75)]


def test_resume_keeps_an_earlier_run_s_results_and_evaluates_only_the_rest(tmp_path):
    """A sweep of the 250 official problems is longer than one device call: --resume goes on from the file a run cut
    short wrote, evaluating only what it lacks, and its summary covers both runs."""
    write_problems(tmp_path, {"1_Relu.py": problem_source(shape="16, 16"),
                              "2_Relu.py": problem_source(shape="8, 8")})
    first = {"partial": True, "earlier_s": 0.0, "new_from": 0, "rows": [
        {**_row(1, 1, 1.0, 0.001), "repeat": 0, "wall_s": 5.0, "isolation": "process"},
        {**_row(1, 2, 1.0, 0.001), "repeat": 0, "wall_s": 7.0, "isolation": "process", "infrastructure": True}]}
    (tmp_path / "a.json").write_text(json.dumps(first))
    cmd = [sys.executable, str(REPO / "scripts" / "bench_evaluator.py"), "--source", "directory", "--path",
           str(tmp_path), "--levels", "1", "--correctness-trials", "1", "--resume", str(tmp_path / "a.json"),
           "--out", str(tmp_path / "b.json")]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    assert "1 results kept" in out.stderr and "1 to evaluate" in out.stderr  # the infrastructure failure runs again
    done = json.loads((tmp_path / "b.json").read_text())
    assert sorted(r["problem_id"] for r in done["rows"]) == [1, 2]
    assert done["rows"][0]["wall_s"] == 5.0 and done["total_s"] > 12.0  # the kept row's 5 s, the new one's, start
    assert "level 1: 2/2 correct" in out.stdout
    (tmp_path / "bad.json").write_text("{}")
    bad = subprocess.run(cmd[:-4] + ["--resume", str(tmp_path / "bad.json")], capture_output=True, text=True,
                         timeout=120)
    assert bad.returncode != 0 and "not a file bench_evaluator.py wrote" in bad.stderr
