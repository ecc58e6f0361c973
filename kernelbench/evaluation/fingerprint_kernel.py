"""The timed calls' output fingerprint in one pass: a Triton kernel reading each element once.

:class:`~kernelbench.evaluation.compare.Fingerprinter` computes, per output, a plain and a +-1 weighted
float64 sum, and on the reference side the 1-norm and the sum of squares its bounds need. Written with
torch operators that is a float64 copy of every chunk and four passes over it: about 84 bytes of memory
traffic per float32 element, several milliseconds per timed call on outputs of a gigabyte (the largest
share of a level-2 timed call's time off the forward, docs/benchmarks.md). This kernel reads the output
once (4 bytes per element), hashes each position's two signs in registers and reduces the four sums in
float64; the weights are exactly the torch path's (:func:`compare._weights`, rotated per chunk and per
call), so both paths give the same sums up to float64 summation order, and both sides of a timing always
use the same path.

Why this is safe to run in the candidate's process (docs/threat-model.md): the kernel is compiled and first
launched when the worker creates its CUDA context, before any candidate code exists in the process, from
the worker's private, still empty Triton cache; it is specialised on nothing the candidate controls (no
integer or alignment specialisation; misaligned or other-dtype outputs take the torch path), so no later
call compiles anything; a launch that returns another compiled kernel than the one made at start fails the
call; and every object between our call and the GPU that Python code could replace (the JIT function, its
caches, the compiled kernel and its launcher, Triton's launch hooks, the classes' methods) is part of the
patch detector's snapshot (:func:`watched`).
"""

from __future__ import annotations

import builtins
import contextlib
import itertools
import logging
import os
import re
import shutil
import sys
import types
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from kernelbench.evaluation.triton_caches import interpreting, triton_cache, trusted_cache_dir  # noqa: F401

log = logging.getLogger(__name__)

#: Elements per program per step, and the most programs one launch uses (their partial sums, four float64 each,
#: live in a buffer made once).
BLOCK = 2048
MAX_PROGRAMS = 4096
#: Output dtypes the kernel is compiled for at start; any other takes the torch path.
FUSED_DTYPES = (torch.float32,)

try:  # the kernel is defined only where Triton imports (never needed on the CPU path)
    import triton
    import triton.language as tl
except Exception:  # pragma: no cover - Triton is a dependency; a broken install only loses the fast path
    triton = None
    tl = None


class FusedUnavailable(RuntimeError):
    """The fused kernel cannot run here (no Triton, no CUDA, or turned off): the torch path is used."""


class FusedTampered(RuntimeError):
    """The fused kernel's launch did not run the kernel compiled at start: something replaced or recompiled it."""


if triton is not None:
    @triton.jit
    def _hash32(x):
        # The xor-shift-multiply hash of compare._hash32 on uint32 lanes (multiplication wraps modulo 2**32).
        x = x ^ (x >> 16)
        x = x * 0x7FEB352D
        x = x ^ (x >> 15)
        x = x * 0x846CA68B
        return x ^ (x >> 16)

    @triton.jit(do_not_specialize=["n", "period", "rot_a", "rot_c", "programs"])
    def _fingerprint_partials(x_ptr, part_ptr, n, period, rot_a, rot_c, programs, BLOCK: tl.constexpr,
                              CHUNK_BITS: tl.constexpr):
        """Per program: the plain, weighted, absolute and squared sums of its share of the ``n`` elements.

        Position p lies in chunk k = p >> CHUNK_BITS at i = p - (k << CHUNK_BITS); its weight is the first pattern's
        sign at (i + offset(k) + rot_a) % period times the second pattern's at (i + rot_c) % period, offset(0) = 0,
        offset(k) = hash(k) % chunk, the second pattern's positions starting at 2**31: compare.Fingerprinter's.
        A step of BLOCK elements never straddles two chunks (BLOCK divides the chunk), so the chunk's offset and
        the rotations' reductions are scalars, and each element costs two hashes and two compare-and-subtracts."""
        pid = tl.program_id(0)
        lanes = tl.arange(0, BLOCK)
        s0 = tl.zeros([BLOCK], dtype=tl.float64)
        s1 = tl.zeros([BLOCK], dtype=tl.float64)
        s2 = tl.zeros([BLOCK], dtype=tl.float64)
        s3 = tl.zeros([BLOCK], dtype=tl.float64)
        step = programs.to(tl.int64) * BLOCK
        start = pid.to(tl.int64) * BLOCK
        n64 = n.to(tl.int64)
        per = period.to(tl.int64)
        while start < n64:
            p = start + lanes
            mask = p < n64
            x = tl.load(x_ptr + p, mask=mask, other=0.0).to(tl.float64)
            k = start >> CHUNK_BITS
            i0 = start - (k << CHUNK_BITS)
            hk = _hash32((k & 0xFFFFFFFF).to(tl.uint32)).to(tl.int64)
            off = tl.where(k == 0, 0, hk & ((1 << CHUNK_BITS) - 1))
            b1 = i0 + off + rot_a  # below three periods: two reductions
            b1 = tl.where(b1 >= per, b1 - per, b1)
            b1 = tl.where(b1 >= per, b1 - per, b1)
            b2 = i0 + rot_c
            b2 = tl.where(b2 >= per, b2 - per, b2)
            r1 = b1.to(tl.int32) + lanes  # below two periods (a period shorter than a step is the whole output)
            r1 = tl.where(r1 >= period, r1 - period, r1)
            r2 = b2.to(tl.int32) + lanes
            r2 = tl.where(r2 >= period, r2 - period, r2)
            h = _hash32(r1.to(tl.uint32)) ^ _hash32(r2.to(tl.uint32) + 0x80000000)
            w = (1 - 2 * (h >> 31).to(tl.int32)).to(tl.float64)
            s0 += x
            s1 += x * w
            s2 += tl.abs(x)
            s3 += x * x
            start += step
        base = part_ptr + pid.to(tl.int64) * 4
        tl.store(base, tl.sum(s0, axis=0))
        tl.store(base + 1, tl.sum(s1, axis=0))
        tl.store(base + 2, tl.sum(s2, axis=0))
        tl.store(base + 3, tl.sum(s3, axis=0))


#: Triton names a cache entry's folder by a hash of what it holds.
_ENTRY = re.compile(r"[A-Za-z0-9_-]{16,128}")


def seed_cache(dest: Path, owner: tuple[int, int] | None = None) -> int:
    """Copy the trusted cache's entries into a new candidate worker's private Triton cache, before the worker starts.

    Without them every candidate worker compiles the kernel (and Triton's launcher, with a C compiler) afresh when
    it creates its CUDA context: seconds of CPU per worker. Only trusted processes write the source folder, so what
    the worker finds there is what a reference worker built; the worker may overwrite its own copy, which no other
    worker sees. Returns the entries copied (0 while no reference worker has compiled yet)."""
    src = trusted_cache_dir()
    try:
        entries = [e for e in src.iterdir() if e.is_dir() and _ENTRY.fullmatch(e.name)]
    except OSError:
        return 0
    copied = 0
    for entry in entries:
        target = dest / entry.name
        try:
            # Links stay links (never followed by this process, which may be root): a planted one copies nothing.
            shutil.copytree(entry, target, symlinks=True, ignore=shutil.ignore_patterns("tmp*", "*.tmp*"))
        except (OSError, shutil.Error):
            shutil.rmtree(target, ignore_errors=True)
            continue
        copied += 1
    if owner is not None and copied:
        for root, dirs, files in os.walk(dest):
            for name in [root] + [os.path.join(root, n) for n in dirs + files]:
                with contextlib.suppress(OSError):
                    os.chown(name, *owner)
        for parent in (dest, dest.parent):
            with contextlib.suppress(OSError):
                os.chown(parent, *owner)
    return copied


class FusedSums:
    """The compiled kernel and its partial-sums buffer for one CUDA device; made by :meth:`start` only."""

    def __init__(self, device: torch.device, compiled: Any, partials: torch.Tensor, chunk: int):
        self.device = device
        self.chunk = chunk
        self.compiled = compiled
        self.partials = partials
        self.launches = 0

    @classmethod
    def start(cls, device: torch.device, chunk: int) -> FusedSums:
        """Compile and launch the kernel once on this device, for chunks of ``chunk`` elements (a power of two of at
        least BLOCK). Call before any candidate code has run."""
        if triton is None:
            raise FusedUnavailable("Triton is not importable")
        interpreted = device.type == "cpu" and interpreting()
        if device.type != "cuda" and not interpreted:
            raise FusedUnavailable("the fused fingerprint runs on CUDA devices only")
        if device.type == "cuda" and device.index is None:  # outputs name their device's index
            device = torch.device("cuda", torch.cuda.current_device())
        if chunk < BLOCK or chunk & (chunk - 1) or chunk > 1 << 30:
            raise FusedUnavailable(f"chunks of {chunk} elements: the kernel needs a power of two from {BLOCK} to 2**30")
        partials = torch.zeros(MAX_PROGRAMS * 4, dtype=torch.float64, device=device)
        probe = torch.zeros(BLOCK, dtype=torch.float32, device=device)
        # Under the interpreter (tests on the CPU) nothing is compiled, so there is no kernel to compare launches with.
        compiled = _launch(device, probe, partials, probe.numel(), chunk, 0, 0, 1)
        if device.type == "cuda":
            torch.cuda.synchronize(device)
            if compiled is None:
                raise FusedUnavailable("the fused fingerprint kernel did not compile")
        engine = cls(device, compiled, partials, chunk)
        _ENGINES.append(engine)
        return engine

    def accepts(self, f: torch.Tensor) -> bool:
        """Flat outputs the compiled kernel serves as compiled: its device, a compiled dtype, 16-byte aligned."""
        # Below 2**31 elements: a larger count is a 64-bit argument, another signature, a compile after candidate code.
        return f.device == self.device and f.dtype in FUSED_DTYPES and f.data_ptr() % 16 == 0 \
            and 0 < f.numel() < 2**31 - 1

    def sums(self, f: torch.Tensor, rot_a: int, rot_c: int) -> torch.Tensor:
        """(plain, weighted, 1-norm, sum of squares) of the flat, contiguous ``f`` as a float64 device tensor of 4,
        with compare.Fingerprinter's weights for the rotations ``rot_a``, ``rot_c`` (below the period,
        ``min(chunk, n)``)."""
        n = f.numel()
        programs = max(1, min(MAX_PROGRAMS, -(-n // BLOCK)))
        ran = _launch(self.device, f, self.partials, n, self.chunk, rot_a, rot_c, programs)
        if ran is not self.compiled:
            raise FusedTampered("the fingerprint kernel launched was not the one compiled when the worker started")
        self.launches += 1
        return self.partials[:programs * 4].view(programs, 4).sum(dim=0)


def _launch(device: torch.device, f: torch.Tensor, partials: torch.Tensor, n: int, chunk: int, rot_a: int, rot_c: int,
            programs: int) -> Any:
    """One launch over ``f``'s ``n`` elements; what Triton returns (the compiled kernel; None in the interpreter)."""
    args = (f, partials, n, min(chunk, n), rot_a, rot_c, programs)
    meta = {"BLOCK": BLOCK, "CHUNK_BITS": chunk.bit_length() - 1}
    if device.type != "cuda":
        _fingerprint_partials[(programs,)](*args, **meta)
        return None
    with torch.cuda.device(device):
        return _fingerprint_partials[(programs,)](*args, **meta)


#: Every engine started in this process (one per device), for :func:`watched`.
_ENGINES: list[FusedSums] = []

_IMMUTABLE = (int, float, str, bytes, bool, type(None))


#: Objects a baseline's ids were taken of (:func:`watched` with ``pin``), kept alive for the process's life: an
#: object replaced and freed could leave its id to its replacement (CPython reuses freed addresses), and an equal id
#: would hide the change.
_PINNED: list[Any] = []
_pinning: list[Any] | None = None
#: While :meth:`Baseline.take` runs: each entry's path, value and a reader that computes the value again from where
#: the walk found it, without walking (what a timed call checks, :meth:`Baseline.changed`).
_recording: list[tuple[str, tuple, Callable[[], tuple]]] | None = None

#: The watch's bounds: entries in all, and the items looked into per container (its size is kept, so an item added
#: past the bound still shows). Unbounded, one long list among Triton 3.6's objects made the walk at a worker's Init
#: take minutes on an H200 (session 19).
WATCH_LIMIT = 5000
ITEMS_PER_CONTAINER = 64
_MISSING = ("missing",)


def _id(obj: Any) -> int:
    if _pinning is not None and obj is not None:
        _pinning.append(obj)
    return id(obj)


def _put(out: dict[str, tuple], path: str, value: tuple, reader: Callable[[], tuple]) -> None:
    out[path] = value
    if _recording is not None:
        _recording.append((path, value, reader))


def _value(obj: Any) -> tuple:
    """An entry for an immutable value. A long string or bytes (a compiled kernel's PTX, its cubin: hundreds of KB) is
    its length and hash, which Python keeps with the object: its repr, built whole at every timed call's check and cut
    to 200 characters, was slow and blind to a change past them."""
    kind = type(obj)
    if kind not in _IMMUTABLE:  # a subclass of str, int...: its repr, len or hash could be candidate code
        return ("id", _id(obj), _id(kind))
    if kind in (str, bytes) and kind.__len__(obj) > 200:
        return ("value", kind.__name__, kind.__len__(obj), kind.__hash__(obj))
    return ("value", repr(obj)[:200])


def _held(obj: Any) -> tuple:
    """An entry for what a container or an object's attribute holds (``_id`` pins it while a baseline is taken).

    Its class is part of it: ``obj.__class__`` can be assigned (a subclass whose ``run`` wraps the original, a module
    subclass whose ``__getattribute__`` runs at ``knobs.runtime``) while the object, its ``__dict__`` and the old
    class's methods stay as they were."""
    if isinstance(obj, _IMMUTABLE):
        return _value(obj)
    size = len(obj) if isinstance(obj, (dict, list, tuple)) else None  # an entry added under a truncated key shows
    return ("id", _id(obj), _id(getattr(obj, "__code__", None)), size, _id(type(obj)), _defaults(obj))


def _defaults(fn: Any) -> tuple | None:
    """A function's default arguments, by identity: assignable (``fn.__defaults__ = (hook,)``) with the function,
    its code and its class's namespace unchanged (attacker's review, session 19). Closure cells are left out: an
    honest closure may rebind its cells from call to call."""
    if not isinstance(fn, types.FunctionType):
        return None
    return (_id(fn.__defaults__), _id(fn.__kwdefaults__))


def _function(v: Any) -> tuple:
    """An entry for a class attribute that is a function, or wraps one (a property's getter, a static method's)."""
    fn = v.fget if isinstance(v, property) else getattr(v, "__func__", v)
    return ("id", _id(fn), _id(getattr(fn, "__code__", None)), _defaults(fn))


def _item(container: Any, key: Any, entry: Callable[[Any], tuple]) -> Callable[[], tuple]:
    """A reader of ``container[key]`` (a dict, a list, a class's or an object's ``__dict__``) as ``entry`` sees it."""
    def read() -> tuple:
        try:
            return entry(container[key])
        except (KeyError, IndexError, TypeError):
            return _MISSING
    return read


def _dict_entry(attrs: Any) -> tuple:
    """Which dict an object keeps its attributes in, and how many: assigning ``obj.__dict__`` would leave the readers
    of the old one reading values nothing uses any more, and an attribute added to a Triton object (``run`` on the
    JIT function) shadows its class's method unseen by the readers of the attributes found at the baseline."""
    return ("dict", id(attrs), len(attrs) if isinstance(attrs, dict) else None)


def _put_own_dict(out: dict[str, tuple], path: str, obj: Any, attrs: dict) -> None:
    _put(out, f"{path}.__dict__ id and size", _dict_entry(attrs), lambda: _dict_entry(getattr(obj, "__dict__", None)))


def _class_names(namespace: Any) -> tuple:
    """The names a class defines, less those Python adds to a class in honest use (``copy``/``pickle`` cache
    ``__slotnames__``, reading ``__annotations__`` creates it): a method added in place of a removed non-method
    keeps the namespace's size."""
    return ("names", frozenset(namespace).difference(_LAZY_CLASS_NAMES))


_LAZY_CLASS_NAMES = frozenset({"__slotnames__", "__annotations__"})


def _is_module_namespace(d: Any) -> bool:
    mod = sys.modules.get(d.get("__name__")) if isinstance(d, dict) and isinstance(d.get("__name__"), str) else None
    return mod is not None and getattr(mod, "__dict__", None) is d


def _walk(obj: Any, path: str, out: dict[str, tuple], depth: int, seen: set[int], reader: Callable[[], tuple]) -> None:
    """Identity of ``obj`` and of what it holds, down containers and Triton's own objects (bounded)."""
    _put(out, path, _held(obj), reader)
    if isinstance(obj, _IMMUTABLE) or depth <= 0 or id(obj) in seen or len(out) > WATCH_LIMIT:
        return
    seen.add(id(obj))
    if isinstance(obj, types.FunctionType):  # the binder Triton generates: what its globals name (specialize_impl)
        _globals_of(obj, path, out)
        return
    if isinstance(obj, dict):
        if _is_module_namespace(obj):
            # A module's namespace (Triton 3.6's JITFunction keeps its module's as ``__globals__``) holds our own
            # changing state and everything else imported there; what a launch reads of it is watched by name
            # (:func:`_globals_of`). Walked, it held the list of pinned objects, which grows with every baseline.
            return
        items = [(f"{path}[{k!r:.80}]", v, _item(obj, k, _held)) for k, v in itertools.islice(obj.items(),
                                                                                              ITEMS_PER_CONTAINER)]
    elif isinstance(obj, (list, tuple)):
        items = [(f"{path}[{i}]", v, _item(obj, i, _held)) for i, v in enumerate(obj[:ITEMS_PER_CONTAINER])]
    elif (type(obj).__module__ or "").startswith("triton") and not isinstance(obj, (type, types.ModuleType)):
        attrs = getattr(obj, "__dict__", None)
        if not isinstance(attrs, dict):
            return
        _put_own_dict(out, path, obj, attrs)
        items = [(f"{path}.{k}", v, _item(attrs, k, _held)) for k, v in itertools.islice(attrs.items(),
                                                                                       ITEMS_PER_CONTAINER)]
    else:
        return
    for sub, v, read in items:
        if len(out) > WATCH_LIMIT:
            return
        _walk(v, sub, out, depth - 1, seen, read)


#: Modules whose functions' globals the watch follows (theirs are on the launch path; torch.cuda's device switch).
_FOLLOWED = ("triton", "kernelbench", "torch.cuda")


def _class_methods(cls: type, path: str, out: dict[str, tuple]) -> None:
    for klass in cls.__mro__:
        if klass is object:
            continue
        namespace = vars(klass)  # a live view: a method added later shows in its size
        _put(out, f"{path}<{klass.__qualname__}> names", _class_names(namespace),
             lambda namespace=namespace: _class_names(namespace))
        for k, v in list(namespace.items()):
            if isinstance(v, (types.FunctionType, staticmethod, classmethod, property)):
                _put(out, f"{path}<{klass.__qualname__}>.{k}", _function(v), _item(namespace, k, _function))
                if (klass.__module__ or "").startswith(_FOLLOWED):
                    fn = v.fget if isinstance(v, property) else getattr(v, "__func__", v)
                    _globals_of(fn, f"{path}<{klass.__qualname__}>.{k}", out)


def _code_names(code: types.CodeType) -> set[str]:
    """The global and attribute names ``code`` and the functions defined inside it read."""
    names = set(code.co_names)
    for c in code.co_consts:
        if isinstance(c, types.CodeType):
            names |= _code_names(c)
    return names


def _global(glb: dict, name: str) -> Any:
    """What ``name`` means to code whose globals are ``glb``: its global, else its builtin. Builtins come from the
    module's dict: an attribute lookup finds ``builtins.__init__`` (from ``super().__init__`` in JITFunction's
    constructor), a bound method made anew at each lookup, whose id never matched a pinned baseline's."""
    if name in glb:
        return glb[name]
    return vars(builtins).get(name, _MISSING)


def _name_entry(obj: Any) -> tuple:
    if obj is _MISSING:
        return _MISSING
    if isinstance(obj, _IMMUTABLE):
        return _value(obj)
    return ("id", _id(obj), _id(getattr(obj, "__code__", None)), _id(type(obj)),  # (a swapped class: _held)
            _defaults(obj))


def _globals_of(fn: Any, path: str, out: dict[str, tuple], depth: int = 2) -> None:
    """The module globals and builtins ``fn`` reads, and those objects' attributes it names: what a launch runs
    through without being an attribute of any watched object (``jit.run`` reads its module's ``knobs`` and
    ``driver``, calls ``compute_cache_key`` and ``len``). Replacing ``triton.runtime.jit.knobs`` with a look-alike
    whose ``runtime.launch_enter_hook`` is candidate code changed nothing the rest of this watch sees."""
    code = getattr(fn, "__code__", None)
    glb = getattr(fn, "__globals__", None)
    if not isinstance(code, types.CodeType) or not isinstance(glb, dict):
        return
    names = _code_names(code)
    for name in sorted(names):
        obj = _global(glb, name)
        if obj is _MISSING:
            continue
        _put(out, f"{path} global {name}", _name_entry(obj),
             lambda glb=glb, name=name: _name_entry(_global(glb, name)))
        if isinstance(obj, _IMMUTABLE):
            continue
        if isinstance(obj, types.ModuleType):
            _module_attrs(obj, names, f"{path} global {name}", out, 2)
        elif depth > 1 and isinstance(obj, types.FunctionType) and (obj.__module__ or "").startswith("kernelbench"):
            _globals_of(obj, path, out, depth - 1)  # our helpers on the path (_launch): their names count as fn's


def _module_attrs(mod: types.ModuleType, names: set[str], path: str, out: dict[str, tuple], depth: int) -> None:
    """The attributes of ``mod`` named in ``names``, and of its submodules so named (``torch.cuda.device``)."""
    namespace = vars(mod)
    for attr in sorted(names & set(namespace)):
        value = namespace[attr]
        _put(out, f"{path}.{attr}", _name_entry(value), _item(namespace, attr, _name_entry))
        if depth > 1 and isinstance(value, types.ModuleType) and value is not mod:
            _module_attrs(value, names, f"{path}.{attr}", out, depth - 1)
        elif isinstance(value, type) and (value.__module__ or "").startswith(_FOLLOWED):
            # A class the launch path uses (``with torch.cuda.device(...)`` in _launch): its methods run there, and
            # ``torch.cuda.device.__enter__ = hook`` keeps the class's id (attacker's review, session 19).
            _class_methods(value, f"{path}.{attr}", out)


def watched(pin: bool = False) -> dict[str, tuple]:
    """What the patch detector compares for the fused fingerprint (empty until an engine has started); with ``pin``
    (a baseline, taken before candidate code runs) every object whose id it holds stays alive (``_PINNED``)."""
    global _pinning
    if pin:
        _pinning = []
        try:
            return watched()
        finally:
            _PINNED.extend(_pinning)
            _pinning = None
    out: dict[str, tuple] = {}
    if not _ENGINES or triton is None:
        return out
    here = globals()
    _walk(here["_fingerprint_partials"], "fingerprint kernel", out, 5, set(),
          _item(here, "_fingerprint_partials", _held))
    _class_methods(type(_fingerprint_partials), "fingerprint kernel", out)
    for i, engine in enumerate(_ENGINES):
        attrs = engine.__dict__
        _walk(engine.compiled, f"fingerprint compiled[{i}]", out, 3, set(), _item(attrs, "compiled", _held))
        _class_methods(type(engine.compiled), f"fingerprint compiled[{i}]", out)
        run = getattr(engine.compiled, "run", None)
        if run is not None and not isinstance(run, types.BuiltinFunctionType):
            _class_methods(type(run), f"fingerprint launcher[{i}]", out)
        # The engine's own attributes: one named ``sums`` or ``accepts`` shadows the class's method unseen by the
        # class's watch, and ``__class__`` can be swapped for a subclass's.
        _instance(engine, f"fingerprint engine[{i}]", out, _ENGINE_STATE)
    for i, owner in enumerate(_OWNERS):
        _instance(owner, f"fingerprinter[{i}]", out, _OWNER_STATE)
    knobs = getattr(triton, "knobs", None)
    runtime_knobs = getattr(knobs, "runtime", None)
    if runtime_knobs is not None:
        for name in dir(runtime_knobs):
            if name.endswith("_hook"):
                try:
                    value = getattr(runtime_knobs, name)
                except Exception:
                    continue
                _walk(value, f"triton.knobs.runtime.{name}", out, 3, set(),  # a hook chain's calls too
                      lambda name=name: _held(getattr(runtime_knobs, name, None)))
                if (type(value).__module__ or "").startswith("triton"):
                    # Triton's launcher calls the hook object itself at every launch (a HookChain, never None,
                    # in Triton 3.9): its class's ``__call__`` runs inside the fingerprint.
                    _class_methods(type(value), f"triton.knobs.runtime.{name}", out)
    for group in ("runtime", "compilation"):  # a launch reads these through their classes' descriptors
        obj = getattr(knobs, group, None)
        if obj is not None:
            # (not its own attributes: setting a hook and putting the old one back leaves a key; the hooks' values
            # are watched above)
            _put(out, f"triton.knobs.{group}", _group_entry(obj),
                 lambda group=group: _group_entry(getattr(knobs, group, None)))
            for klass in type(obj).__mro__[:-1]:
                namespace = vars(klass)
                _put(out, f"triton.knobs.{group}<{klass.__qualname__}> names", _class_names(namespace),
                     lambda namespace=namespace: _class_names(namespace))
                for k, v in list(namespace.items()):
                    _put(out, f"triton.knobs.{group}<{klass.__qualname__}>.{k}", ("id", _id(v)),
                         _item(namespace, k, lambda v: ("id", id(v))))
    # ``triton.runtime.driver`` is the DriverConfig itself (the package's attribute hides the module of that name).
    # Each launch asks its active driver for the device and the stream through that object's own attributes
    # (``get_current_stream``): Python a candidate could replace, run inside the fingerprint.
    import triton.runtime as triton_runtime

    drv = getattr(triton_runtime, "driver", None)
    if drv is not None and not isinstance(drv, types.ModuleType):
        _put(out, "triton driver", ("id", _id(drv)), lambda: ("id", id(getattr(triton_runtime, "driver", None))))
        _instance(drv, "triton driver", out, None)
        active = vars(drv).get("_active")
        if active is not None:
            _instance(active, "triton driver.active", out, None)
            _walk(active, "triton driver.active", out, 3, set(), _item(vars(drv), "_active", _held))
    return out


def _group_entry(obj: Any) -> tuple:
    return ("id", _id(obj), _id(type(obj)))


#: Attributes that change in honest use (counters, buffers sized to the largest output): their keys are watched,
#: not their values.
_ENGINE_STATE = frozenset({"launches"})
_OWNER_STATE = frozenset({"_buf", "_w", "_w2", "_f32"})


def _instance(obj: Any, path: str, out: dict[str, tuple], changing: frozenset[str] | None) -> None:
    """``obj``'s class (and its methods) and every attribute of its own: an added one may shadow a method."""
    _put(out, f"{path}.__class__", ("id", _id(type(obj))), lambda: ("id", _id(type(obj))))
    _class_methods(type(obj), path, out)
    attrs = getattr(obj, "__dict__", None)
    if not isinstance(attrs, dict):
        return
    _put_own_dict(out, path, obj, attrs)
    _put(out, f"{path}.__dict__", ("keys", tuple(sorted(map(str, attrs)))),
         lambda: ("keys", tuple(sorted(map(str, attrs)))))
    for k, v in list(attrs.items()):
        if changing is not None and k in changing:
            continue
        _put(out, f"{path}.__dict__[{k!r:.80}]", _name_entry(v), _item(attrs, k, _name_entry))


def changed(baseline: dict[str, tuple]) -> list[str]:
    """The entries of :func:`watched` that differ from ``baseline`` (taken before any candidate code ran)."""
    now = watched()
    return sorted(k for k in set(now) | set(baseline) if now.get(k) != baseline.get(k))


class Baseline:
    """The watch as it was before any candidate code ran, and a fast way to ask whether it still is.

    The patch detector compares after the timed calls; a hook that forward installs in the launch path and that
    removes itself once it has run (inside the fingerprint, after the call's end event) is gone by then. So each
    timed call asks :meth:`changed` before its fingerprint, while such a hook is still waiting to run. Walking the
    watch again for that cost 32 ms per call on an H200 (3153 entries, session 19); instead each entry keeps a
    reader of the very slot the walk found it in, and a call reads them all again (the full comparison runs only
    when one differs, to say what)."""

    def __init__(self, entries: dict[str, tuple], probes: list[tuple[str, tuple, Callable[[], tuple]]]):
        self.entries = entries
        self.probes = probes

    @classmethod
    def take(cls) -> Baseline:
        global _recording
        _recording = []
        try:
            entries = watched(pin=True)
            probes = list(_recording)
        finally:
            _recording = None
        return cls(entries, probes)

    def changed(self) -> list[str]:
        """The entries that differ from the baseline (empty: none)."""
        for path, value, read in self.probes:
            try:
                now = read()
            except Exception:
                now = _MISSING
            if now != value:
                return changed(self.entries) or [path]
        return []


def watch_owner(owner: Any) -> None:
    """Watch ``owner`` (the Fingerprinter whose ``fused`` is an engine) too: its ``fused`` and its methods."""
    _OWNERS.append(owner)


#: The Fingerprinters using an engine (compare.Fingerprinter.enable_fused), for :func:`watched`.
_OWNERS: list[Any] = []
