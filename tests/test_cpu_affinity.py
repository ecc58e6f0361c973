"""The CPU shared by a timed pair: the plan's arithmetic, pinning real processes, moving a process tree."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

from kernelbench.evaluation.cpu_affinity import (
    PIN_ENV,
    CorePlan,
    CoreReservation,
    descendants,
    move_tree,
    pinned,
    pinning_enabled,
    plan_cores,
)

linux_only = pytest.mark.skipif(not hasattr(os, "sched_setaffinity"), reason="needs os.sched_setaffinity (Linux)")


def test_plan_reserves_one_top_cpu_per_gpu_slot():
    plan = plan_cores(range(16), slots=1)
    assert plan == CorePlan(shared=frozenset(range(15)), timing=(15,))
    eight = plan_cores(range(128), slots=8)
    assert eight is not None and eight.timing == tuple(range(120, 128))
    assert eight.shared == frozenset(range(120))
    assert eight.for_slot(7) == 127 and eight.for_slot(8) is None and eight.for_slot(-1) is None


def test_plan_leaves_two_cpus_for_everything_else_or_pins_nothing():
    three = plan_cores([5, 3, 9], slots=1)
    assert three == CorePlan(shared=frozenset({3, 5}), timing=(9,))
    assert plan_cores([0, 1], slots=1) is None  # CI's two cores: pinning would starve the workers
    assert plan_cores(range(9), slots=8) is None
    assert plan_cores(range(16), slots=0) is None


def test_pinning_switch():
    assert pinning_enabled({})
    assert pinning_enabled({PIN_ENV: "1"})
    for off in ("0", "false", "OFF", " no "):
        assert not pinning_enabled({PIN_ENV: off})


def _sleeper() -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])


@linux_only
def test_pinned_puts_both_processes_on_the_slot_cpu_and_back():
    cores = sorted(os.sched_getaffinity(0))
    if len(cores) < 2:
        pytest.skip("needs two cores")
    plan = CorePlan(shared=frozenset(cores[:-1]), timing=(cores[-1],))
    procs = [_sleeper() for _ in range(2)]
    try:
        with pinned(plan, 0, procs[0].pid, procs[1].pid):
            assert os.sched_getaffinity(procs[0].pid) == {cores[-1]} == os.sched_getaffinity(procs[1].pid)
        assert os.sched_getaffinity(procs[0].pid) == set(cores[:-1]) == os.sched_getaffinity(procs[1].pid)
        with pinned(plan, 0, procs[0].pid, None):  # reference-only timing
            assert os.sched_getaffinity(procs[0].pid) == {cores[-1]}
        for p in procs:
            os.sched_setaffinity(p.pid, set(cores))
        with pinned(None, 0, procs[0].pid, procs[1].pid):  # no plan: nothing moves
            assert os.sched_getaffinity(procs[0].pid) == set(cores)
        with pinned(plan, 3, procs[0].pid, None):  # no such slot: nothing moves
            assert os.sched_getaffinity(procs[0].pid) == set(cores)
    finally:
        for p in procs:
            p.kill()
            p.wait()


@linux_only
def test_move_tree_moves_processes_already_running_below_us():
    """A CUDA build started before the reservation must not stay on the reserved CPU."""
    before = os.sched_getaffinity(0)
    if len(before) < 2:
        pytest.skip("needs two cores")
    # A child that starts a grandchild: both must move.
    code = ("import subprocess, sys, time; subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)']); "
            "time.sleep(60)")
    child = subprocess.Popen([sys.executable, "-c", code])
    try:
        for _ in range(100):
            if len(descendants(os.getpid())) >= 2:
                break
            time.sleep(0.05)
        tree = descendants(os.getpid())
        assert child.pid in tree and len(tree) >= 2
        one = {min(before)}
        move_tree(one)
        assert os.sched_getaffinity(0) == one
        for pid in tree:
            assert os.sched_getaffinity(pid) == one
    finally:
        move_tree(before)
        child.kill()
        child.wait()
        for pid in descendants(os.getpid()):
            os.kill(pid, 9)
    assert os.sched_getaffinity(0) == before


@linux_only
def test_reservation_keeps_this_process_off_the_reserved_cpus_until_the_last_release(monkeypatch):
    before = os.sched_getaffinity(0)
    monkeypatch.setenv(PIN_ENV, "1")
    first = CoreReservation.acquire(1)
    try:
        second = CoreReservation.acquire(1)
        assert second is first
        expected = plan_cores(before, 1)
        assert first == expected
        if expected is not None:
            assert os.sched_getaffinity(0) == set(expected.shared)
            # A child started now inherits the shared CPUs, not the reserved one.
            out = subprocess.run([sys.executable, "-c", "import os; print(sorted(os.sched_getaffinity(0)))"],
                                 capture_output=True, text=True, check=True).stdout
            assert out.strip() == str(sorted(expected.shared))
        CoreReservation.release()
        assert os.sched_getaffinity(0) == (set(expected.shared) if expected else before)
    finally:
        CoreReservation.release()
    assert os.sched_getaffinity(0) == before
    monkeypatch.setenv(PIN_ENV, "0")
    assert CoreReservation.acquire(1) is None
    CoreReservation.release()
    assert os.sched_getaffinity(0) == before


def test_evaluators_given_one_gpu_each_time_on_different_cpus(tmp_path):
    """One evaluator per GPU (CUDA_VISIBLE_DEVICES=N) plans the same cores and takes the one of its GPU's host
    index; numbering each one's only GPU 0 put every timed pair on one CPU (session 15's false guard findings)."""
    from kernelbench.evaluation.cpu_affinity import gpu_slots

    driver = tmp_path / "gpus"
    driver.mkdir()
    for bus in ("0000:18:00.0", "0000:2a:00.0"):
        (driver / bus).mkdir()
    first = gpu_slots(1, {"CUDA_VISIBLE_DEVICES": "0"}, str(driver))
    second = gpu_slots(1, {"CUDA_VISIBLE_DEVICES": "1"}, str(driver))
    assert first == (2, [0]) and second == (2, [1])
    plans = [plan_cores(range(32), slots) for slots, _ in (first, second)]
    assert plans[0] == plans[1], "both keep their other work off both timing CPUs"
    assert plans[0].for_slot(first[1][0]) != plans[1].for_slot(second[1][0])
    # Unset, UUIDs, repeated or too few indices: the visible GPUs are the slots, as before.
    assert gpu_slots(2, {}, str(driver)) == (2, [0, 1])
    assert gpu_slots(1, {"CUDA_VISIBLE_DEVICES": "GPU-8ad9eec4"}, str(driver)) == (1, [0])
    assert gpu_slots(2, {"CUDA_VISIBLE_DEVICES": "1,1"}, str(driver)) == (2, [0, 1])
    assert gpu_slots(2, {"CUDA_VISIBLE_DEVICES": "3"}, str(driver)) == (2, [0, 1])
    # Indices beyond what the driver lists (or no driver folder) still get a slot of their own.
    assert gpu_slots(2, {"CUDA_VISIBLE_DEVICES": "5,2"}, str(tmp_path / "none")) == (6, [5, 2])
    assert gpu_slots(0, {}, str(driver)) == (1, [])
