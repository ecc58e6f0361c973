"""One CPU for the two processes being timed on a GPU, shared by them and kept from everything else.

A reference whose runtime is how fast the host enqueues kernels (a cuDNN LSTM or GRU: the host takes
as long to launch the forward as the GPU takes to run it) times by the speed of the CPU its thread is
on. On the H100 machine (a KVM guest, one thread per core) that speed wanders: one thread pinned to one
vCPU timed the LSTM anywhere from 4.3 to 7.5 ms in stretches of 100-300 ms, and two vCPUs wandered
independently. With each worker on a CPU of its own, or free to move, identical code scored 0.76x to
1.19x. Both main threads on the same vCPU take turns on it in the timing's short ABBA blocks, so both
sides see the same stretches: the host's speed becomes common to the pair instead of a difference
between them.

While any GPU session is open the evaluating process, every process it has started (CUDA builds in
flight included) and everything it starts later stay off the reserved CPUs. Linux only
(``os.sched_setaffinity``); elsewhere, with fewer than two CPUs left for everything else, or with
``KB_PIN_CPUS=0``, nothing is pinned.
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

log = logging.getLogger(__name__)

#: Set to 0 to turn pinning off (to measure what it does).
PIN_ENV = "KB_PIN_CPUS"
#: CPUs that must stay for everything else (spare workers importing torch, CUDA builds, the parent).
MIN_SHARED_CPUS = 2


@dataclass(frozen=True)
class CorePlan:
    """``shared``: CPUs for everything else; ``timing[slot]``: the one CPU that GPU slot's timed pair shares."""

    shared: frozenset[int]
    timing: tuple[int, ...]

    def for_slot(self, slot: int) -> int | None:
        return self.timing[slot] if 0 <= slot < len(self.timing) else None


def plan_cores(available: Iterable[int], slots: int) -> CorePlan | None:
    """Reserve the highest-numbered CPUs, one per GPU slot, when at least MIN_SHARED_CPUS are left."""
    cores = sorted(set(available))
    if slots < 1 or len(cores) < slots + MIN_SHARED_CPUS:
        return None
    return CorePlan(frozenset(cores[:-slots]), tuple(cores[-slots:]))


#: Where the NVIDIA driver lists the host's GPUs, one folder each (also inside containers).
DRIVER_GPUS = "/proc/driver/nvidia/gpus"


def gpu_slots(visible: int, env: dict | None = None, driver_gpus: str = DRIVER_GPUS) -> tuple[int, list[int]]:
    """How many timing slots to plan for, and the slot of each visible GPU (by its index in this process).

    The slot is the GPU's index on the host, so that evaluators started one per GPU with
    ``CUDA_VISIBLE_DEVICES=N`` plan the same cores and time on different ones (each numbering its one GPU 0 would
    put every timed pair on the same CPU: session 15 saw false "work continued" findings from that). With
    ``CUDA_VISIBLE_DEVICES`` a list of indices, the plan covers every GPU of the host the driver lists; with it
    unset (or naming GPUs by UUID) the visible GPUs are the slots, as before.
    """
    value = (os.environ if env is None else env).get("CUDA_VISIBLE_DEVICES")
    own = list(range(visible))
    if value is None:
        return max(1, visible), own
    try:
        host_index = [int(x) for x in value.split(",") if x.strip()][:visible]
    except ValueError:  # GPU-<uuid> or MIG names: no host index to go by
        return max(1, visible), own
    if len(host_index) < visible or len(set(host_index)) != len(host_index) or min(host_index, default=0) < 0:
        return max(1, visible), own
    try:
        listed = len(os.listdir(driver_gpus))
    except OSError:
        listed = 0
    return max(1, visible, listed, max(host_index, default=-1) + 1), host_index


def pinning_enabled(env: dict | None = None) -> bool:
    value = (os.environ if env is None else env).get(PIN_ENV, "1").strip().lower()
    return value not in ("0", "false", "no", "off")


def set_affinity(tid: int, cores: Iterable[int]) -> bool:
    """Pin one thread (a process's main thread when ``tid`` is a process id); False when it cannot be done."""
    try:
        os.sched_setaffinity(tid, set(cores))
        return True
    except (AttributeError, OSError, ValueError):  # not Linux, the thread is gone, or no such CPUs
        return False


def threads_of(pid: int | str) -> list[int]:
    try:
        return [int(t) for t in os.listdir(f"/proc/{pid}/task")]
    except OSError:
        return []


def descendants(pid: int) -> list[int]:
    """Every live process below ``pid``, from /proc (children, their children, ...)."""
    children: dict[int, list[int]] = {}
    try:
        entries = list(Path("/proc").iterdir())
    except OSError:  # no /proc: nothing to move
        return []
    for entry in entries:
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        children.setdefault(ppid, []).append(int(entry.name))
    found, todo = [], list(children.get(pid, []))
    while todo:
        p = todo.pop()
        found.append(p)
        todo.extend(children.get(p, []))
    return found


def move_tree(cores: frozenset[int] | set[int]) -> None:
    """This process's threads and every thread of every process below it, onto ``cores``.

    Threads and processes started later inherit the affinity of whoever starts them, so after this
    nothing of ours lands on a reserved CPU; a build that was already running moves too.
    """
    for tid in threads_of("self") or [0]:
        set_affinity(tid, cores)
    for _ in range(2):  # a process forked while the first pass ran is caught by the second
        for pid in descendants(os.getpid()):
            for tid in threads_of(pid):
                set_affinity(tid, cores)


class CoreReservation:
    """Process-wide: held while any GPU session is open; the last session to close restores the CPUs."""

    _lock = threading.Lock()
    _users = 0
    _plan: CorePlan | None = None
    _saved: set[int] | None = None

    @classmethod
    def acquire(cls, slots: int, enabled: bool = True) -> CorePlan | None:
        """The plan this session times under (None: not pinned). ``enabled=False`` holds the reservation
        without pinning; a plan another session made is then not used by this one either."""
        with cls._lock:
            cls._users += 1
            if cls._users > 1:
                return cls._plan if enabled else None
            cls._plan = None
            if not enabled or not hasattr(os, "sched_getaffinity"):
                return None
            cls._saved = set(os.sched_getaffinity(0))
            plan = plan_cores(cls._saved, slots)
            if plan is None:
                log.debug("not pinning CPUs: %d CPUs for %d timed pairs", len(cls._saved), slots)
                return None
            move_tree(plan.shared)
            cls._plan = plan
            log.debug("timed pairs on CPUs %s; everything else on %d CPUs", plan.timing, len(plan.shared))
            return cls._plan

    @classmethod
    def release(cls) -> None:
        with cls._lock:
            cls._users = max(0, cls._users - 1)
            if cls._users == 0 and cls._saved is not None:
                for tid in threads_of("self") or [0]:
                    set_affinity(tid, cls._saved)
                cls._plan, cls._saved = None, None


@contextlib.contextmanager
def pinned(plan: CorePlan | None, slot: int, *pids: int | None) -> Iterator[None]:
    """The main threads of ``pids`` (reference, candidate) share the slot's CPU for the duration."""
    core = plan.for_slot(slot) if plan is not None else None
    moved = [pid for pid in pids if pid is not None] if core is not None else []
    for pid in moved:
        set_affinity(pid, {core})
    try:
        yield
    finally:
        for pid in moved:
            set_affinity(pid, plan.shared)
