"""scripts/replay_timing_stop.py: recorded timings replayed under a smaller minimum of timed calls, exactly."""

from __future__ import annotations

import json
import random
import subprocess
import sys

from kbtesting import REPO, load_script

from kernelbench.evaluation import timing
from kernelbench.results import KernelResult, TimingStats

replay = load_script("replay_timing_stop")


def _row(pid: int, calls: list[float], ref: list[float], block: int, note_end: str = "relative standard error") -> dict:
    r = KernelResult(level=1, problem_id=pid, problem_name=f"{pid}_P", backend="torch", compiled=True, correct=True,
                     runtime=TimingStats(samples_ms=calls, block_calls=block),
                     ref_runtime=TimingStats(samples_ms=ref, block_calls=block), wall_time_s=2.0,
                     stage_times_s={"timing": 1.2, "spare_wait": 0.2})
    return {"level": 1, "problem_id": pid, "name": r.problem_name, "speedup": r.speedup,
            "cand_samples": calls, "ref_samples": ref, "host_share": None, "stage_s": r.stage_times_s,
            "timing_note": f"{len(calls)} timed calls per side in {len(calls) // block} rounds; stopped: {note_end}"}


def _precise(n: int, seed: int) -> list[float]:
    rng = random.Random(seed)
    return [8.0 * (1 + 0.0005 * rng.gauss(0, 1)) for _ in range(n)]


def _late(n: int, seed: int) -> list[float]:
    """Calls whose first rounds are too noisy to stop on: the rule may stop only once the calls settle."""
    rng = random.Random(seed)
    return [8.0 * (1 + (0.2 if i < 12 else 0.0005) * abs(rng.gauss(0, 1))) for i in range(n)]


def test_a_precise_row_ends_at_the_minimum_and_a_noisy_one_where_it_did(tmp_path):
    rows = [_row(1, _precise(24, 1), _precise(24, 2), 3),  # precise: 4 rounds of 3 suffice
            _row(2, _late(24, 3), _late(24, 4), 3)]
    path = tmp_path / "run.json"
    path.write_text(json.dumps({"rows": rows}))
    assert replay.replayed_end(rows[0]["ref_samples"], rows[0]["cand_samples"], 3, 12) == 12
    assert replay.replayed_end(rows[0]["ref_samples"], rows[0]["cand_samples"], 3, 20) == 24  # 8 rounds: all of it
    assert replay.replayed_end(rows[1]["ref_samples"], rows[1]["cand_samples"], 3, 12) == 24
    r12 = replay.replay(path, timing.MIN_TIMED_CALLS)
    assert (r12.rows, r12.stopped_earlier) == (2, 1)
    assert (r12.recorded.calls_per_side, r12.replayed.calls_per_side) == (48, 36)
    assert abs(r12.timing_s_saved - 1.0 * 12 / 24) < 1e-9  # the row's timing less its spare wait, per call
    r20 = replay.replay(path, 20)
    assert r20.stopped_earlier == 0 and r20.replayed == r20.recorded


def test_the_command_prints_each_minimum_and_refuses_a_file_that_is_not_a_sweep(tmp_path):
    good = tmp_path / "run.json"
    good.write_text(json.dumps({"rows": [_row(1, _precise(24, 1), _precise(24, 2), 3)]}))
    out = tmp_path / "replay.json"
    p = subprocess.run([sys.executable, str(REPO / "scripts" / "replay_timing_stop.py"), str(good),
                        "--min-trials", "12", "20", "--json", str(out)], capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    assert "min  12: 1 timed, 1 stop earlier; calls per side 24 -> 12" in p.stdout
    assert "min  20: 1 timed, 0 stop earlier; calls per side 24 -> 24" in p.stdout
    assert [r["min_trials"] for r in json.loads(out.read_text())] == [12, 20]
    bad = tmp_path / "bad.json"
    row = _row(1, _precise(24, 1), _precise(24, 2), 3)
    row["timing_note"] = "30 timed calls per side in 10 rounds; stopped: x"  # says more calls than it holds
    bad.write_text(json.dumps({"rows": [row]}))
    p = subprocess.run([sys.executable, str(REPO / "scripts" / "replay_timing_stop.py"), str(bad)],
                       capture_output=True, text=True, timeout=120)
    assert p.returncode != 0 and "its timing note says 30 calls in 10 rounds but it holds 24 and 24" in p.stderr
    p = subprocess.run([sys.executable, str(REPO / "scripts" / "replay_timing_stop.py"), str(tmp_path / "none.json")],
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 2 and "no such file" in p.stderr
