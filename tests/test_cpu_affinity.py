"""Cores for the timed pair: the plan's arithmetic, and pinning a real process and putting it back."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from kernelbench.evaluation.cpu_affinity import (
    PIN_ENV,
    CorePlan,
    CoreReservation,
    pinned,
    pinning_enabled,
    plan_cores,
)

linux_only = pytest.mark.skipif(not hasattr(os, "sched_setaffinity"), reason="needs os.sched_setaffinity (Linux)")


def test_plan_reserves_the_top_cores_two_per_process_on_a_big_machine():
    plan = plan_cores(range(16), slots=1)
    assert plan is not None
    assert plan.timing == ((frozenset({12, 13}), frozenset({14, 15})),)
    assert plan.shared == frozenset(range(12))


def test_plan_per_gpu_slots_never_overlap_and_leave_the_rest_shared():
    plan = plan_cores(range(128), slots=8)
    assert plan is not None and len(plan.timing) == 8
    reserved = [c for ref, cand in plan.timing for c in (*ref, *cand)]
    assert len(reserved) == len(set(reserved)) == 32 and all(len(ref) == 2 for ref, _ in plan.timing)
    assert plan.shared.isdisjoint(reserved) and len(plan.shared) == 96
    assert plan.for_slot(7) == plan.timing[7] and plan.for_slot(8) is None


def test_plan_one_core_each_or_none_on_small_machines():
    one_each = plan_cores([0, 1, 2, 3, 4, 5], slots=1)
    assert one_each is not None and one_each.timing == ((frozenset({4}), frozenset({5})),)
    assert one_each.shared == frozenset({0, 1, 2, 3})
    assert plan_cores([0, 1], slots=1) is None  # CI's two cores: pinning would starve the workers
    assert plan_cores([0, 1, 2], slots=1) is None
    assert plan_cores(range(16), slots=0) is None


def test_pinning_switch():
    assert pinning_enabled({})
    assert pinning_enabled({PIN_ENV: "1"})
    for off in ("0", "false", "OFF", " no "):
        assert not pinning_enabled({PIN_ENV: off})


@linux_only
def test_pinned_moves_a_real_process_to_its_cores_and_back():
    cores = sorted(os.sched_getaffinity(0))
    if len(cores) < 2:
        pytest.skip("needs two cores")
    plan = CorePlan(shared=frozenset(cores), timing=((frozenset({cores[0]}), frozenset({cores[1]})),))
    procs = [subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"]) for _ in range(2)]
    try:
        with pinned(plan, 0, procs[0].pid, procs[1].pid):
            assert os.sched_getaffinity(procs[0].pid) == {cores[0]}
            assert os.sched_getaffinity(procs[1].pid) == {cores[1]}
        assert os.sched_getaffinity(procs[0].pid) == set(cores) == os.sched_getaffinity(procs[1].pid)
        with pinned(None, 0, procs[0].pid, procs[1].pid):  # no plan: nothing moves
            assert os.sched_getaffinity(procs[0].pid) == set(cores)
        with pinned(plan, 3, procs[0].pid, None):  # no such slot: nothing moves
            assert os.sched_getaffinity(procs[0].pid) == set(cores)
    finally:
        for p in procs:
            p.kill()
            p.wait()


@linux_only
def test_reservation_keeps_this_process_off_the_reserved_cores_until_the_last_release(monkeypatch):
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
            # A child started now inherits the shared cores, not the reserved ones.
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
