"""CPU cores for the two processes being timed, kept apart from everything else the evaluator runs.

A reference whose runtime is set by how fast the host launches kernels (a cuDNN LSTM launches two per
time step) timed 4.0 ms and 5.5 ms in alternating stretches of a second on an H100, on both sides, while
spare workers were importing torch and CUDA builds ran on the same cores. While a candidate and its
reference are timed, each main thread gets cores of its own; the evaluating process, and every worker it
starts, stays on the rest. Linux only (``os.sched_setaffinity``); elsewhere, or with too few cores, or
with ``KB_PIN_CPUS=0``, nothing is pinned.
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

log = logging.getLogger(__name__)

#: Set to 0 to turn pinning off (to measure what it does).
PIN_ENV = "KB_PIN_CPUS"


@dataclass(frozen=True)
class CorePlan:
    """``shared``: cores for everything else; ``timing[slot]``: (reference cores, candidate cores)."""

    shared: frozenset[int]
    timing: tuple[tuple[frozenset[int], frozenset[int]], ...]

    def for_slot(self, slot: int) -> tuple[frozenset[int], frozenset[int]] | None:
        return self.timing[slot] if 0 <= slot < len(self.timing) else None


def plan_cores(available: Iterable[int], slots: int) -> CorePlan | None:
    """Reserve the highest-numbered cores for ``slots`` timed pairs (one pair per GPU).

    Two cores per timed process when at least twice that many are left over for everything else, one
    when at least two are left, else no plan: pinning two processes onto a machine's only cores would
    starve the workers that start and build in the background.
    """
    cores = sorted(set(available))
    if slots < 1:
        return None
    per = 2 if len(cores) >= 8 * slots else 1 if len(cores) >= 2 * slots + 2 else 0
    if per == 0:
        return None
    n_reserved = 2 * per * slots
    shared, reserved = cores[:-n_reserved], cores[-n_reserved:]
    timing = tuple((frozenset(reserved[2 * per * i:2 * per * i + per]),
                    frozenset(reserved[2 * per * i + per:2 * per * (i + 1)])) for i in range(slots))
    return CorePlan(frozenset(shared), timing)


def pinning_enabled(env: dict | None = None) -> bool:
    value = (os.environ if env is None else env).get(PIN_ENV, "1").strip().lower()
    return value not in ("0", "false", "no", "off")


def set_affinity(pid: int, cores: Iterable[int]) -> bool:
    """Pin one thread (a process's main thread when ``pid`` is a process id); False when it cannot be done."""
    try:
        os.sched_setaffinity(pid, set(cores))
        return True
    except (AttributeError, OSError, ValueError):  # not Linux, the process is gone, or no such cores
        return False


def _own_threads() -> list[int]:
    try:
        return [int(t) for t in os.listdir("/proc/self/task")]
    except OSError:
        return [0]


class CoreReservation:
    """Process-wide: while any GPU session is open, this process's threads (and so every child they
    start) stay on the plan's shared cores; the last session to close restores what they had."""

    _lock = threading.Lock()
    _users = 0
    _plan: CorePlan | None = None
    _saved: set[int] | None = None

    @classmethod
    def acquire(cls, slots: int) -> CorePlan | None:
        with cls._lock:
            cls._users += 1
            if cls._users > 1:
                return cls._plan
            cls._plan = None
            if not pinning_enabled() or not hasattr(os, "sched_getaffinity"):
                return None
            cls._saved = set(os.sched_getaffinity(0))
            plan = plan_cores(cls._saved, slots)
            if plan is None:
                log.debug("not pinning CPUs: %d cores for %d timed pairs", len(cls._saved), slots)
                return None
            if all(set_affinity(tid, plan.shared) for tid in _own_threads()):
                cls._plan = plan
                log.debug("timed workers pinned to %s; everything else on %d cores", plan.timing, len(plan.shared))
            return cls._plan

    @classmethod
    def release(cls) -> None:
        with cls._lock:
            cls._users = max(0, cls._users - 1)
            if cls._users == 0 and cls._saved is not None:
                for tid in _own_threads():
                    set_affinity(tid, cls._saved)
                cls._plan, cls._saved = None, None


@contextlib.contextmanager
def pinned(plan: CorePlan | None, slot: int, reference_pid: int | None, candidate_pid: int | None) -> Iterator[None]:
    """Give the timed pair their reserved cores for the duration, then put them back with the rest."""
    cores = plan.for_slot(slot) if plan is not None else None
    if cores is None:
        yield
        return
    pids = [(pid, c) for pid, c in zip((reference_pid, candidate_pid), cores) if pid is not None]
    for pid, c in pids:
        set_affinity(pid, c)
    try:
        yield
    finally:
        for pid, _ in pids:
            set_affinity(pid, plan.shared)
