"""The worker's timing: L2 flush, launch cushion, CUDA events (or wall-clock ones on the CPU), the timed loop.

A mixin of :class:`~kernelbench.evaluation.worker.process.Worker`: it uses the worker's model, inputs,
stream and the event functions :meth:`~kernelbench.evaluation.worker.process.Worker.cmd_init` bound.
"""

from __future__ import annotations

from typing import Any

from kernelbench.evaluation import protocol
from kernelbench.evaluation.worker.bound import active_count as _active_count
from kernelbench.evaluation.worker.bound import getprofile as _getprofile
from kernelbench.evaluation.worker.bound import gettrace as _gettrace
from kernelbench.evaluation.worker.bound import perf_counter as _perf_counter


class HookLeftActive(RuntimeError):
    """Forward returned with an interception hook in place that runs code during the checks after the call."""


#: Worker attributes the timed calls and their checks go through (compared by identity with their values at start).
BOUND_ATTRIBUTES = ("torch", "compare", "fingerprinter", "inputs", "transport", "mode_depths", "hooks_at_start",
                    "gc_callbacks", "gc_callbacks_at_start", "fused_baseline")
#: Data attributes the timed loop reads between calls (the flush, the cushion's spin, the bounds), and the classes they
#: may hold ("tensor", "device": torch's): one of another class (an int subclass's ``__index__`` at the cushion's spin,
#: a tensor subclass's ``__torch_function__`` at the flush, a float subclass's operators in the bounds) would run
#: candidate code between timed calls, where it can read the block's seeds and work ahead, untimed.
TYPED_ATTRIBUTES = {"cushion_cycles": (int, type(None)), "cushion_us": (int, type(None)), "atol": (float,),
                    "rtol": (float,), "l2_flush": ("tensor", type(None)), "device": ("device",)}
#: The key of ``bound_at_start`` that holds the worker's class.
CLASS_KEY = "__class__"
#: Those bound by the worker's first Init (the event functions, the timed stream, the role): an instance attribute
#: the timed loop calls or reads, not a method, so the shadowing check never saw one replaced; ``worker._elapsed =
#: lambda a, b: 0.01`` reported any time for every call (both event gaps alike: no side-stream flag), and ``role``
#: set to "reference" switched the fused launch path's check off (attacker's review, session 19).
BOUND_AT_INIT = ("_sync", "_EventBase", "_record", "_elapsed", "_event_sync", "stream", "role", "is_cuda")


def worker_changes(w: Any) -> list[str]:
    """What candidate code changed on the worker object itself, which the patch snapshot (classes and modules) does
    not see: an instance attribute named like a method shadows it (``worker._check_fused_path = lambda: None``), a
    swapped class or a replaced Fingerprinter or module binding reroutes the checks. A module function, called by
    name from the timed loop, so that shadowing a method cannot switch the check itself off."""
    bound = w.bound_at_start
    cls = type(w)
    out = []
    if id(cls) != bound.get(CLASS_KEY):  # bound as the worker started (no import of the worker's module here)
        out.append("the worker's class")
    if _odd_keys(vars(w)):
        return out + ["worker attributes named by something other than a string"]
    out += [f"worker.{k} (shadows the method)" for k in _shadowing(cls, vars(w))]
    for name in BOUND_ATTRIBUTES + BOUND_AT_INIT:
        if id(getattr(w, name, None)) != bound.get(name):
            out.append(f"worker.{name}")
    if not out:  # (the fingerprinter and the modules below are the ones bound at start)
        torch = w.torch
        attrs = vars(w)
        for name, kinds in TYPED_ATTRIBUTES.items():
            allowed = tuple(torch.Tensor if k == "tensor" else torch.device if k == "device" else k for k in kinds)
            if not _of_class(attrs.get(name), allowed):
                out.append(f"worker.{name} (of another class)")
        out += fingerprinter_changes(w.fingerprinter, w.compare, torch, w.fused_baseline is not None)
    return out


def fingerprinter_changes(fp: Any, compare: Any, torch: Any, fused_started: bool) -> list[str]:
    """What candidate code changed in the worker's fingerprinter, whose identity :func:`worker_changes` compares but
    whose attributes the timed loop reads after each call's end event: an instance attribute shadowing ``measure``,
    an engine set as ``fused`` where the fused path never started (its ``accepts`` and ``sums`` would run inside the
    fingerprint), a buffer or a number replaced by an object of another class (a tensor subclass's
    ``__torch_function__``, an int's ``__floordiv__``: candidate code run there, untimed). Every attribute's class is
    one the fingerprinter itself puts there; none changes in honest use."""
    if type(fp) is not compare.Fingerprinter:
        return ["the fingerprinter's class"]
    attrs = vars(fp)
    if _odd_keys(attrs):
        return ["fingerprinter attributes named by something other than a string"]
    out = [f"fingerprinter.{k} (shadows the method)" for k in _shadowing(type(fp), attrs)]
    allowed = (int, type(None), torch.Tensor, compare._Segmented)
    for k, v in attrs.items():
        if k == "fused":
            if v is not None and not fused_started:
                out.append("fingerprinter.fused (set where the fused path never started)")
        elif not _of_class(v, allowed):
            out.append(f"fingerprinter.{k}")
    seg = attrs.get("_f32")
    if type(seg) is compare._Segmented:
        sattrs = vars(seg)
        if _odd_keys(sattrs):
            return out + ["fingerprinter._f32 attributes named by something other than a string"]
        out += [f"fingerprinter._f32.{k} (shadows the method)" for k in _shadowing(compare._Segmented, sattrs)]
        out += [f"fingerprinter._f32.{k}" for k, v in sattrs.items()
                if not _of_class(v, (int, torch.Tensor, torch.device))]
    return out


def _of_class(v: Any, classes: tuple) -> bool:
    """Is ``v``'s class one of ``classes``, by identity? (``type(v) in classes`` compares with ``==``, which a class
    whose metaclass defines ``__eq__`` answers with its own code.)"""
    kind = type(v)
    return any(kind is c for c in classes)


def _odd_keys(attrs: dict) -> bool:
    """Does an attribute dict hold a key that is not exactly a string? A str subclass's ``__hash__``, ``__eq__`` or
    ``__format__`` would run in every lookup and message of the checks."""
    return any(type(k) is not str for k in attrs)


_ABSENT = object()


def _shadowing(cls: type, attrs: dict) -> list[str]:
    """The instance attributes in ``attrs`` named like a method of ``cls``: the first class of its MRO that defines
    the name holds a callable (what ``inspect.getattr_static`` finds, at a twentieth of its cost: 12 us a check).

    Read from the class at every check, never remembered: a cache of the names, filled at the first timed call
    (after candidate code has run), was a dict that candidate code could fill first with an empty set, and then
    shadow ``_elapsed`` unseen (the patch snapshot compares functions, not a module's dicts)."""
    spaces = [vars(klass) for klass in cls.__mro__]
    out = []
    for k in attrs:
        for namespace in spaces:
            v = namespace.get(k, _ABSENT)
            if v is not _ABSENT:
                if callable(v):
                    out.append(k)
                break
    return sorted(out)


class WallEvent:
    """CPU stand-in for a CUDA event (CPU work is synchronous, so the wall clock is the runtime)."""

    __slots__ = ("t",)

    def __init__(self, enable_timing: bool = True):
        self.t = 0.0

    def record(self, stream: Any = None) -> None:
        self.t = _perf_counter()

    def elapsed_time(self, end: WallEvent) -> float:
        return (end.t - self.t) * 1000.0

    def synchronize(self) -> None:
        pass


class TimingCommands:
    """The ``time`` command and what it needs (a mixin of Worker)."""

    def _flush(self) -> None:
        torch = self.torch
        if not self.is_cuda:
            return
        if self.l2_flush is None:
            props = torch.cuda.get_device_properties(self.device)
            l2 = int(getattr(props, "L2_cache_size", 0) or 0) or 64 * 1024 * 1024
            self.l2_flush = torch.empty(max(2 * l2, 128 * 1024 * 1024), dtype=torch.uint8, device=self.device)
        self.l2_flush.zero_()

    def _cushion(self) -> None:
        """Queue the launch cushion (``cushion_us`` of spin) so the start event finds the GPU busy."""
        if not self.is_cuda:
            return
        if self.cushion_cycles is None:
            self.cushion_cycles = self._calibrate_cushion()
        if self.cushion_cycles:
            with self.torch.cuda.stream(self.stream):
                self.torch.cuda._sleep(self.cushion_cycles)

    def _calibrate_cushion(self) -> int:
        """Spin cycles for the cushion, from a timed spin. Done at the first timed call, not at init: a
        spare initialises while another worker is being timed, and its spins would land in that timing."""
        from kernelbench.evaluation.timing import cushion_cycles

        torch = self.torch
        us = int(self.cushion_us or 0)
        cycles, ms = 200_000, 0.0
        if us > 0:
            with torch.cuda.stream(self.stream):
                for _ in range(2):  # the first spin also pays for loading the kernel
                    a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                    a.record(self.stream)
                    torch.cuda._sleep(cycles)
                    b.record(self.stream)
                    b.synchronize()
                    ms = a.elapsed_time(b)
        return cushion_cycles(us, cycles, ms)

    def cmd_time(self, cmd: protocol.Time, blobs: list) -> tuple[protocol.Reply, list]:
        """Time calls on fresh inputs per call, flushing L2 before each, all streams drained after.

        Each call's start event is queued behind the launch cushion, so it measures the forward, not
        how late the host was to launch it."""
        seeds = [int(s) for s in cmd.seeds]
        fwd_seeds = [int(s) for s in cmd.fwd_seeds]
        warmup = bool(cmd.warmup)
        want_fp = bool(cmd.fingerprint)
        if cmd.cushion_us != self.cushion_us:  # calibrated again for another cushion (first call: for the first)
            self.cushion_us, self.cushion_cycles = int(cmd.cushion_us), None
        if warmup:
            # Nothing exported before the timing stage is read again: the candidate's export arena (its outputs and
            # inputs together, made again for the last timed call's export) and the reference's slots, left by a
            # trial whose comparison never came, are given back before the timed calls (two processes, one GPU).
            self.exported = None
            self.last = None
            self.arena.release()
            self.slots.clear()
            self._collect_cycles()
            self._release_cached_memory()
        times, drained, fps, bounds, calls, wall = self._timed_calls(seeds, fwd_seeds, warmup, want_fp)
        return protocol.TimeReply(times_ms=times, drained_ms=drained, wall_s=wall, calls=calls, fingerprints=fps,
                                  bounds=bounds, threads_started=_active_count() - self.threads_before), []

    def _check_no_hooks(self) -> None:
        """Nothing may intercept the work between timed calls. A torch function or dispatch mode, or a trace or
        profile hook, left in place by forward would run candidate code inside the fingerprint and the output
        checks, after the call's end event: untimed work, or outputs changed after they were timed."""
        if any(depth() for depth in self.mode_depths):
            raise HookLeftActive("forward returned with a torch function or dispatch mode still active: it would run "
                                 "inside the checks after the timed call")
        if (_gettrace(), _getprofile()) != self.hooks_at_start:
            raise HookLeftActive("forward set a trace or profile hook (sys.settrace / sys.setprofile): it would run "
                                 "inside the checks after the timed call")
        own = worker_changes(self)
        if own:
            raise HookLeftActive(f"forward changed the worker itself ({', '.join(own[:5])}): the checks after the timed "
                                 "call would run through candidate code")
        if tuple(map(id, self.gc_callbacks)) != self.gc_callbacks_at_start:
            raise HookLeftActive("forward changed the garbage collector's callbacks (gc.callbacks): one would run "
                                 "inside the checks after the timed call")

    def _check_fused_path(self) -> None:
        """The fused fingerprint's launch path is as it was before any candidate code ran (fingerprint_kernel.Baseline):
        a hook forward left there would run inside the fingerprint, then could remove itself before the patch check.
        Both sides do the work (the same between timed calls); only the candidate's is untrusted."""
        if self.fused_baseline is None:  # (a candidate that sets fingerprinter.fused to None is a change too)
            return
        from kernelbench.evaluation import fingerprint_kernel

        diff = fingerprint_kernel.Baseline.changed(self.fused_baseline)  # (through the class, as the checks)
        if diff and self.role == "candidate":
            raise fingerprint_kernel.FusedTampered("forward changed the fused fingerprint's launch path before the "
                                                   f"fingerprint ran: {', '.join(diff[:5])}")

    def _fingerprinted(self, out) -> list:
        """The output's plain tensors, the ones a timed call's fingerprint covers (no reference to ``out`` kept)."""
        torch = self.torch
        _, leaves = self.transport.flatten(out)
        return [t for t in leaves if type(t) is torch.Tensor]

    def _timed_calls(self, seeds: list[int], fwd_seeds: list[int], warmup: bool,
                     want_fp: bool) -> tuple[list, list, list, list, int, float]:
        """One call per seed (warm-up: until settled); per call its event and drained times, and with
        ``want_fp`` its outputs' fingerprints and bounds. The last call's inputs and outputs are kept."""
        # Both roles compute the bounds (only the reference's are used): the work between two timed
        # calls must be the same on both sides, or the GPU arrives at each timed call in a different
        # state (on the H100 short memory-bound problems timed up to 9% apart with identical code).
        want_bounds = want_fp
        from kernelbench.evaluation.timing import warmup_settled

        EventBase = self._EventBase
        times, drained, fps, bounds = [], [], [], []
        t_start = _perf_counter()
        i = 0
        x = out = None
        if self.last is not None:
            self.last = None
        while True:
            k = i % len(seeds)
            x = out = None  # free the previous call's tensors before allocating the next
            x = self._make_inputs(seeds[k])
            self._flush()
            self.inputs.seed_everything(fwd_seeds[k])
            e0 = EventBase(enable_timing=True)
            e1 = EventBase(enable_timing=True)
            e2 = EventBase(enable_timing=True)
            with self._no_grad():
                self._cushion()
                self._record(e0, self.stream)
                out = self.model(*x)
                self._record(e1, self.stream)
                self._sync()
                self._record(e2, self.stream)
                self._event_sync(e2)
            if want_fp:  # timing against a reference: both sides' outputs are checked after each call
                TimingCommands._check_no_hooks(self)  # through the class: an instance attribute cannot skip it
                TimingCommands._check_fused_path(self)
            times.append(self._elapsed(e0, e1))
            drained.append(self._elapsed(e0, e2))
            i += 1
            if warmup:
                if warmup_settled(times, _perf_counter() - t_start):
                    if want_fp:  # the timed blocks will fingerprint: make its buffers now, not in the first block
                        self.fingerprinter.prepare(self._fingerprinted(out))
                    break
                continue
            if want_fp:
                plain = self._fingerprinted(out)
                # The call's input seed picks its weights: both sides are given the same seeds, call by call.
                sums, bnds = self.fingerprinter.measure(plain, (self.atol, self.rtol) if want_bounds else None,
                                                        key=seeds[k])
                fps.append(sums)
                if want_bounds:
                    bounds.append(bnds)
                # Nothing may keep this call's output alive into the next timed call: its replacement
                # would need a new block, allocated inside the timed region.
                del plain
            if i >= len(seeds):
                break
        wall = _perf_counter() - t_start
        self.last = (x, out)
        return times, drained, fps, bounds, i, wall

