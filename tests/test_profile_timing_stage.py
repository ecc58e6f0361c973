"""scripts/profile_timing_stage.py runs the worker's own timing code in-process and accounts for a call's time."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from kbtesting import SCRIPTS, repo_env


def test_the_timing_stage_profile_runs_on_the_cpu_and_accounts_for_each_call(tmp_path):
    out = tmp_path / "t.json"
    proc = subprocess.run([sys.executable, str(SCRIPTS / "profile_timing_stage.py"), "--device", "cpu", "--level", "1",
                           "--problem-id", "8", "--reduced-size", "--rounds", "3", "--fingerprinter", "both",
                           "--json", str(out)],
                          capture_output=True, text=True, timeout=300, env=repo_env({"OMP_NUM_THREADS": "1"}))
    assert proc.returncode == 0, proc.stderr
    previous, row = json.loads(out.read_text())["rows"]
    assert (previous["fingerprinter"], row["fingerprinter"]) == ("previous", "current")
    assert previous["host_ms_per_call"]["fingerprint"] > 0
    assert row["problem"] == "level_1_problem_8" and row["calls"] == 9
    host = row["host_ms_per_call"]
    assert set(host) == {"inputs", "flush", "seed", "cushion", "forward", "sync", "fingerprint"}
    assert host["inputs"] > 0 and host["forward"] > 0 and host["fingerprint"] > 0
    # The pieces are parts of the call: together never more than its wall time.
    assert sum(host.values()) <= row["wall_per_call_ms"] * 1.05
    assert row["first_block"]["wall_s"] > 0 and row["warmup"]["calls"] >= 5 and row["flush_gpu_ms"] is None
    assert "[previous fingerprinter] mean over 1 problem(s), host ms per timed call after the first block" in proc.stdout
    assert "[current fingerprinter] mean over 1" in proc.stdout


def test_it_refuses_a_single_round(tmp_path):
    proc = subprocess.run([sys.executable, str(SCRIPTS / "profile_timing_stage.py"), "--device", "cpu", "--rounds", "1"],
                          capture_output=True, text=True, timeout=120, env=repo_env())
    assert proc.returncode == 2 and "--rounds must be at least 2" in proc.stderr


def test_without_a_gpu_the_default_device_is_a_one_line_error():
    import torch

    if torch.cuda.is_available():
        pytest.skip("this machine has a GPU")
    proc = subprocess.run([sys.executable, str(SCRIPTS / "profile_timing_stage.py"), "--level", "1", "--problem-id", "8"],
                          capture_output=True, text=True, timeout=120, env=repo_env())
    assert proc.returncode == 2 and "no GPU here" in proc.stderr and "Traceback" not in proc.stderr
