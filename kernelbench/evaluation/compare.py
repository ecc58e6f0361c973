"""Comparing a candidate's outputs with the reference's, on the evaluation device.

Runs only in the trusted reference worker. Checks are exact about structure, type, shape,
dtype and device, tolerance-based about values, and strict about NaN/Inf placement.
Large tensors are processed in chunks so checking never needs a second copy of a
multi-gigabyte output; where the reference worker has enabled it, a one-pass kernel
(:mod:`kernelbench.evaluation.compare_kernel`) passes what it can, and leaves failures to
the chunked path.
"""

from __future__ import annotations

import logging
import math
import os
import sys
from dataclasses import dataclass
from typing import Any

import torch

from kernelbench.evaluation.transport import describe_structure, flatten

log = logging.getLogger(__name__)


#: ``KB_FINGERPRINT=fused`` turns the one-pass fingerprint kernel on; ``torch`` or unset: the torch path.
FINGERPRINT_ENV = "KB_FINGERPRINT"


def fused_wanted() -> bool:
    """Is the one-pass fingerprint kernel (fingerprint_kernel.py) asked for (``KB_FINGERPRINT=fused``)? Off by default
    until its patch watch has run clean on a GPU: its first run there (session 19, Triton 3.6) found changes in
    honest use that failed every candidate's timed call; the fixes are CPU-tested only."""
    return os.environ.get(FINGERPRINT_ENV, "").strip().lower() in ("fused", "triton", "on", "1")

#: ``KB_COMPARE_KERNEL=0`` (or ``off``, ``torch``) keeps the reference's comparisons on torch operators (for A/B
#: measurements); by default a reference worker on a GPU enables the one-pass kernel (compare_kernel).
COMPARE_KERNEL_ENV = "KB_COMPARE_KERNEL"


def compare_kernel_wanted() -> bool:
    return os.environ.get(COMPARE_KERNEL_ENV, "").strip().lower() not in ("0", "off", "torch", "no", "false")


CHUNK = 1 << 24


@dataclass
class Comparison:
    ok: bool
    reason: str | None = None
    max_abs_error: float | None = None
    max_rel_error: float | None = None


def _index(flat_index: int, shape: tuple[int, ...]) -> tuple[int, ...]:
    idx = []
    for s in reversed(shape):
        idx.append(flat_index % s if s else 0)
        flat_index //= s if s else 1
    return tuple(reversed(idx))


def compare_tensor(c: torch.Tensor, r: torch.Tensor, atol: float, rtol: float, where: str = "output") -> Comparison:
    kind = _kind_mismatch(c, r, where)
    if kind is not None:
        return kind
    n = r.numel()
    if n == 0:
        return Comparison(True, max_abs_error=0.0, max_rel_error=0.0)
    cf, rf = c.reshape(-1), r.reshape(-1)
    shape = tuple(r.shape)
    if not (r.is_floating_point() or r.is_complex()):
        return _compare_exact(cf, rf, n, shape, where)
    if r.is_complex():
        # Real and imaginary parts compared as numbers of their own (a cast to a real type would drop the
        # imaginary part, and a wrong one would pass); positions are reported with the part as a last index.
        cf = torch.view_as_real(c.resolve_conj()).reshape(-1)
        rf = torch.view_as_real(r.resolve_conj()).reshape(-1)
        n, shape = rf.numel(), (*shape, 2)
    acc = torch.float64 if r.dtype in (torch.float64, torch.complex128) else torch.float32
    fast = _kernel_tally(cf, rf, atol, rtol)
    if fast is not None:
        return fast
    tally = _Tally()
    for s in range(0, n, CHUNK):
        tally.add(cf[s:s + CHUNK].to(acc), rf[s:s + CHUNK].to(acc), s, atol, rtol, acc)
    return tally.comparison(cf, rf, n, shape, atol, rtol, where)


#: The module of the one-pass comparison kernels; used only once a trusted process has enabled them there.
_KERNEL_MODULE = "kernelbench.evaluation.compare_kernel"


def _kernel():
    """compare_kernel when this process has enabled it on some device (the reference worker does at its Init), else
    None: looked up, never imported here, so that a process that never enables it never imports Triton for it."""
    mod = sys.modules.get(_KERNEL_MODULE)
    return mod if mod is not None and mod.active() else None


def _kernel_tally(cf: torch.Tensor, rf: torch.Tensor, atol: float, rtol: float) -> Comparison | None:
    """A pass from the one-pass kernel, or None: the kernel does not serve these tensors, or some element fails
    (the torch path then says which, in its own words)."""
    mod = _kernel()
    if mod is None:
        return None
    res = mod.tally(cf, rf, atol, rtol)
    if res is None or res[0] != 0:
        return None
    return Comparison(True, None, res[1], res[2])


def _kind_mismatch(c: torch.Tensor, r: torch.Tensor, where: str) -> Comparison | None:
    """A failed comparison if ``c`` is not a plain tensor of ``r``'s shape, dtype and device type."""
    if type(c) is not torch.Tensor:
        return Comparison(False, f"{where} is a {type(c).__name__}, not a plain torch.Tensor")
    if tuple(c.shape) != tuple(r.shape):
        return Comparison(False, f"{where} has shape {tuple(c.shape)}, expected {tuple(r.shape)}")
    if c.dtype != r.dtype:
        return Comparison(False, f"{where} has dtype {c.dtype}, expected {r.dtype}")
    if c.device.type != r.device.type:
        return Comparison(False, f"{where} is on {c.device.type}, expected {r.device.type}")
    return None


def _compare_exact(cf: torch.Tensor, rf: torch.Tensor, n: int, shape: tuple[int, ...], where: str) -> Comparison:
    """Integers and booleans: every element equal."""
    bad = 0
    first = None
    for s in range(0, n, CHUNK):
        neq = cf[s:s + CHUNK] != rf[s:s + CHUNK]
        k = int(neq.sum())
        if k and first is None:
            first = s + int(neq.nonzero()[0])
        bad += k
    if bad:
        i = _index(first, shape)
        return Comparison(False, f"{where}: {bad} of {n} elements differ (first at {i}: got "
                                 f"{cf[first].item()}, expected {rf[first].item()})", 1.0, 1.0)
    return Comparison(True, max_abs_error=0.0, max_rel_error=0.0)


@dataclass
class _Tally:
    """Running totals of a chunked comparison within tolerances (NaN and Inf placement exact)."""

    max_abs: float = 0.0
    max_rel: float = 0.0
    bad_total: int = 0
    nan_mismatch: int = 0
    inf_mismatch: int = 0
    first_bad: int | None = None
    first_nan: int | None = None

    def add(self, cc: torch.Tensor, rr: torch.Tensor, s: int, atol: float, rtol: float, acc: torch.dtype) -> None:
        """One chunk, starting at flat index ``s``, already in the accumulation dtype."""
        c_nan, r_nan = torch.isnan(cc), torch.isnan(rr)
        nm = c_nan != r_nan
        k = int(nm.sum())
        if k:
            self.nan_mismatch += k
            if self.first_nan is None:
                self.first_nan = s + int(nm.nonzero()[0])
        c_inf, r_inf = torch.isinf(cc), torch.isinf(rr)
        im = (c_inf != r_inf) | (r_inf & (cc != rr))
        k = int(im.sum())
        if k:
            self.inf_mismatch += k
            if self.first_nan is None:
                self.first_nan = s + int(im.nonzero()[0])
        finite = ~(r_nan | r_inf | c_nan | c_inf)
        diff = torch.where(finite, (cc - rr).abs(), torch.zeros((), dtype=acc, device=cc.device))
        ra = torch.where(finite, rr.abs(), torch.zeros((), dtype=acc, device=cc.device))
        if diff.numel():
            self.max_abs = max(self.max_abs, float(diff.max()))
            rel = diff / ra.clamp_min(1e-12)
            self.max_rel = max(self.max_rel, float(torch.where(finite, rel, torch.zeros_like(rel)).max()))
        over = diff > (atol + rtol * ra)
        k = int(over.sum())
        if k:
            self.bad_total += k
            if self.first_bad is None:
                self.first_bad = s + int(over.nonzero()[0])

    def comparison(self, cf: torch.Tensor, rf: torch.Tensor, n: int, shape: tuple[int, ...], atol: float, rtol: float,
                   where: str) -> Comparison:
        max_abs, max_rel = self.max_abs, self.max_rel
        if self.nan_mismatch or self.inf_mismatch:
            i = self.first_nan if self.first_nan is not None else 0
            return Comparison(False, f"{where}: NaN/Inf placement differs from the reference in "
                                     f"{self.nan_mismatch + self.inf_mismatch} of {n} elements (first at "
                                     f"{_index(i, shape)}: got {cf[i].item()}, expected {rf[i].item()})",
                              max_abs, max_rel)
        if self.bad_total:
            i = self.first_bad if self.first_bad is not None else 0
            return Comparison(False, f"{where}: {self.bad_total} of {n} elements beyond atol={atol:g} rtol={rtol:g}; "
                                     f"max abs error {max_abs:.3g} (first bad at {_index(i, shape)}: got "
                                     f"{cf[i].item():.6g}, expected {rf[i].item():.6g})", max_abs, max_rel)
        return Comparison(True, None, max_abs, max_rel)


def compare_outputs(cand_tree: Any, cand_tensors: list[torch.Tensor], ref_output: Any,
                    atol: float, rtol: float) -> Comparison:
    """Compare a received candidate output (tree + leaves) with the reference output object."""
    ref_tree, ref_leaves = flatten(ref_output)
    walk = _OutputWalk(cand_tensors, ref_leaves, atol, rtol)
    res = walk.compare(cand_tree, ref_tree, "output")
    return res if res is not None else walk.worst


class _OutputWalk:
    """One comparison's walk over both output trees. A class, not a closure calling itself: such a closure is a
    reference cycle, and it held both sides' tensors (gigabytes, five trials a job) until the cyclic collector
    ran, which ran official level-1 problems of 7.5 GB tensors out of memory on an 80 GB GPU."""

    def __init__(self, cand_tensors: list[torch.Tensor], ref_leaves: list, atol: float, rtol: float):
        self.cand_tensors, self.ref_leaves = cand_tensors, ref_leaves
        self.atol, self.rtol = atol, rtol
        self.worst = Comparison(True, None, 0.0, 0.0)

    def compare(self, ct: Any, rt: Any, path: str) -> Comparison | None:
        if not isinstance(ct, dict) or ct.get("t") != rt.get("t"):
            return Comparison(False, f"{path}: candidate returned {describe_structure(ct)}, "
                                     f"reference returns {describe_structure(rt)}")
        t = rt["t"]
        if t in ("tuple", "list"):
            ci, ri = ct.get("items", []), rt["items"]
            if not isinstance(ci, list) or len(ci) != len(ri):
                return Comparison(False, f"{path}: candidate returned {describe_structure(ct)}, "
                                         f"reference returns {describe_structure(rt)}")
            for k, (a, b) in enumerate(zip(ci, ri)):
                res = self.compare(a, b, f"{path}[{k}]")
                if res is not None:
                    return res
            return None
        if t == "scalar":
            a, b = ct.get("v"), rt.get("v")
            if isinstance(b, float) and isinstance(a, (int, float)) and not isinstance(a, bool):
                if math.isclose(a, b, rel_tol=self.rtol, abs_tol=self.atol):
                    return None
            elif a == b:
                return None
            return Comparison(False, f"{path}: got {a!r}, expected {b!r}")
        if t == "tensor":
            i = ct.get("i")
            if not isinstance(i, int) or not 0 <= i < len(self.cand_tensors):
                return Comparison(False, f"{path}: malformed tensor reference")
            if ct.get("cls") != "torch.Tensor":
                return Comparison(False, f"{path} is a {ct.get('cls')}, not a plain torch.Tensor")
            res = compare_tensor(self.cand_tensors[i], self.ref_leaves[rt["i"]], self.atol, self.rtol, path)
            if not res.ok:
                return res
            self.worst.max_abs_error = max(self.worst.max_abs_error or 0.0, res.max_abs_error or 0.0)
            self.worst.max_rel_error = max(self.worst.max_rel_error or 0.0, res.max_rel_error or 0.0)
            return None
        return Comparison(False, f"{path}: unsupported output type {rt.get('type')}")


def tensors_equal(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Bitwise-equal values (NaN equal to NaN), used to check inputs were not modified."""
    if a.shape != b.shape or a.dtype != b.dtype:
        return False
    af, bf = a.reshape(-1), b.reshape(-1)
    mod = _kernel()
    if mod is not None:
        differ = mod.differs(af, bf)
        if differ is not None:
            return differ == 0
    for s in range(0, af.numel(), CHUNK):
        x, y = af[s:s + CHUNK], bf[s:s + CHUNK]
        if x.is_floating_point():
            same = (x == y) | (torch.isnan(x) & torch.isnan(y))
        else:
            same = x == y
        if not bool(same.all()):
            return False
    return True


# ------------------------------------------------------------------ fingerprints
_M32 = 0xFFFFFFFF


def _mul32(x: torch.Tensor, c: int) -> torch.Tensor:
    """``x * c`` modulo 2**32 for ``x`` below 2**32, with every intermediate below 2**49 (no int64 overflow)."""
    lo = (x * (c & 0xFFFF)) & _M32
    hi = ((x * (c >> 16)) & 0xFFFF) << 16
    return (lo + hi) & _M32


def _weights(start: int, count: int, device: torch.device) -> torch.Tensor:
    """A fixed pseudo-random +-1 pattern over flat positions: the top bit of a 32-bit integer hash
    (xor-shift-multiply, every input bit reaching every output bit) of the position.

    Why a full hash: the earlier pattern, bit 13 of ``position * 2654435761``, depended on a row of a
    4096-wide output only through the row number modulo 4 (its matrix had rank 2), so the weighted sum of a
    4096 x 4096 matrix product cost two matrix-vector products and an output forged to match both sums was
    cheap. This one has full rank for every width tried (tests/test_fingerprint.py).
    """
    x = torch.arange(start, start + count, device=device, dtype=torch.int64) & _M32
    x = x ^ (x >> 16)
    x = _mul32(x, 0x7FEB352D)
    x = x ^ (x >> 15)
    x = _mul32(x, 0x846CA68B)
    x = x ^ (x >> 16)
    return (1 - 2 * (x >> 31)).to(torch.float64)


def _hash32(x: int) -> int:
    """The hash :func:`_weights` applies to each position, for one Python integer."""
    x &= _M32
    x ^= x >> 16
    x = (x * 0x7FEB352D) & _M32
    x ^= x >> 15
    x = (x * 0x846CA68B) & _M32
    return x ^ (x >> 16)


#: Where the second sign pattern's positions start: past any chunk, so its signs are hashes of other positions than
#: the first pattern's (two independent-looking patterns from one hash).
_SECOND_PATTERN = 1 << 31


def call_rotations(key: int, period: int) -> tuple[int, int]:
    """How far a timed call rotates the two sign patterns over an output of ``period`` positions, from the call's
    key (its input seed, which both sides are given): the same on both sides, different from call to call."""
    k = int(key) & 0xFFFFFFFFFFFFFFFF
    k32 = (k ^ (k >> 32)) & _M32
    return _hash32(k32 ^ 0x9E3779B9) % period, _hash32(k32 ^ 0x7F4A7C15) % period


def _rotated(m: int, rotation: int, period: int) -> list[tuple[int, int, int]]:
    """Positions [0, m) of a pattern of ``period`` rotated by ``rotation``: (from, to, pattern start) per piece."""
    first = min(m, period - rotation)
    pieces = [(0, first, rotation)]
    if m > first:
        pieces.append((first, m, 0))
    return pieces


def _rotated_dot(b: torch.Tensor, pattern: torch.Tensor, rotation: int, period: int) -> torch.Tensor:
    """``b``'s dot product with ``pattern`` rotated by ``rotation`` over ``period``, left on the device."""
    out = None
    for lo, hi, at in _rotated(b.numel(), rotation, period):
        d = torch.dot(b[lo:hi], pattern[at:at + hi - lo])
        out = d if out is None else out + d
    return out


#: How far a one-sided check of the weighted sum may stray, in standard deviations of honest rounding (below).
WEIGHTED_Z = 10.0


#: dtype codes for :func:`size_key` (any other dtype is 63; outputs of those still need the reference's dtype to pass
#: the correctness trials).
_DTYPES = tuple(d for d in (getattr(torch, n, None) for n in (
    "float32", "float64", "float16", "bfloat16", "complex64", "complex128", "int8", "int16", "int32", "int64", "uint8",
    "bool", "uint16", "uint32", "uint64", "float8_e4m3fn", "float8_e5m2", "float8_e4m3fnuz", "float8_e5m2fnuz")) if d)


def size_key(t: torch.Tensor) -> float:
    """The tensor's element count and dtype as one exact number (``numel * 64 + dtype code``), compared for
    equality: a tensor of another size cannot match, however its two sums were tuned, nor one of a cheaper
    dtype. Exact, not a hash (a hash's collisions can be searched for offline), and computed with integer
    arithmetic only, nothing a candidate could replace in its process unnoticed but the watched
    ``Tensor.numel`` and ``Tensor.dtype``."""
    code = _DTYPES.index(t.dtype) if t.dtype in _DTYPES else 63
    return float(t.numel() * 64 + code)


#: Elements per float32 segment of the float32 path (:class:`_Segmented`): a segment's sum in float32 is off by at most
#: (SEGMENT - 1) units of float32 rounding times its elements' absolute sum; 32 keeps that below 2e-6 of the output's
#: 1-norm, while writing the segments' sums costs an eighth of a float32 pass each.
SEGMENT = 32
#: Float32 outputs of fewer elements take the float64 path: its fewer launches cost less there (0.17 against 0.22 ms a
#: call at 1M elements on an H200, 0.43 against 0.32 at 16M; scripts/bench_fingerprint.py, session 24).
SEGMENTED_MIN_ELEMENTS = 1 << 22
#: A float32 unit of rounding (round to nearest).
_U32 = 2.0 ** -24


def segment_wanted() -> int:
    """The float32 path's segment length: :data:`SEGMENT`, or 0 (every output through the float64 buffer, as before
    session 24) with ``KB_FINGERPRINT=float64``, for before/after measurements."""
    value = os.environ.get(FINGERPRINT_ENV, "").strip().lower()
    return 0 if value in ("float64", "torch-float64") else SEGMENT


def _flat(t: torch.Tensor) -> torch.Tensor:
    """The output as the flat real tensor its fingerprint covers (a complex one as its real and imaginary parts)."""
    f = t.resolve_conj().reshape(-1)
    if f.is_complex():
        f = torch.view_as_real(f).reshape(-1)
    return f


def _bounds(n: int, mag: float, squares: float, tolerance: tuple[float, float], segment: int) -> list[float]:
    """The reference's bounds on a candidate's (plain, weighted, key) sums from its output's 1-norm and sum of squares.

    ``segment``: the sums were taken by the float32 path, whose rounding is part of the bounds. A segment's float32 sum
    is off by at most ``gamma = (segment - 1) * 2**-24`` times its elements' absolute sum, on each side: the plain
    sum's bound, a worst case, takes that whole. The weighted sum's bound is statistical: flipping every sign in a
    segment negates its float32 sum exactly, rounding and all, so a segment's rounding is symmetric about zero and, with
    signs hashed per position, independent of the others'; their total has a standard deviation of at most
    ``gamma * sqrt(segment * squares)`` per side, added to the honest errors' in quadrature (it widens the bound by
    about 0.4% at the default fp32 tolerance, 1e-4, and less at looser ones, whatever the size)."""
    atol, rtol = tolerance
    gamma = (segment - 1) * _U32 if segment else 0.0
    if segment:  # the 1-norm and the squares were summed in float32 segments too
        mag *= 1 + 2 * gamma
        squares *= 1 + 4 * gamma
    slack = 1e-9 * mag  # float64 rounding of float32 sums is far below it
    worst = atol * n + rtol * mag + slack
    spread2 = max(0.0, n * atol * atol + 2 * atol * rtol * mag + rtol * rtol * squares)
    if segment:
        worst += gamma * (2 * mag + atol * n + rtol * mag)  # both sides' 1-norms; the candidate's is within the tolerance
        cand_squares = (math.sqrt(squares) + math.sqrt(spread2)) ** 2
        spread2 += gamma * gamma * segment * (squares + cand_squares)
    return [worst, min(worst, WEIGHTED_Z * math.sqrt(spread2) + slack), 0.0]


#: Chunks the float32 path takes in one step (its group sums, the second pattern's product): fewer, larger launches.
STEP_CHUNKS = 4


class _Segmented:
    """The float32 path's buffers, made once for outputs of up to ``size`` elements (at most :data:`STEP_CHUNKS`
    chunks): the two sign patterns and the call's rotation of the second, as float32 (a float32 times a float32 +-1 is
    exact, and same-dtype kernels ran at 1.7 times the speed of a float32 times an int8, session 24); the weighted
    step; the groups' float32 sums; their float64 totals."""

    def __init__(self, device: torch.device, size: int, pattern: int, segment: int):
        self.device = device
        self.size = size
        self.segment = segment
        # (a pattern's first k positions are the same whatever its length: one made for the longest period serves all)
        self.w = _weights(0, pattern, device).float()
        self.w2 = _weights(_SECOND_PATTERN, pattern, device).float()
        self.w2_call = torch.empty(pattern, dtype=torch.float32, device=device)
        self.weighted = torch.empty(size, dtype=torch.float32, device=device)
        cols = size // segment + 1  # the groups, and a short one
        self.partial = torch.empty(4, cols, dtype=torch.float32, device=device)
        self.total = torch.empty(4, cols, dtype=torch.float64, device=device)

    def sums(self, f: torch.Tensor, chunk: int, offsets: list[int], rot_c: int, with_mag: bool) -> torch.Tensor:
        """(plain, weighted[, 1-norm, sum of squares]) of the flat float32 ``f`` as a float64 device tensor: position
        ``p`` in chunk ``k`` weighed by the first pattern at ``(p % chunk + offsets[k]) % period`` times the second at
        ``(p % chunk + rot_c) % period`` (Fingerprinter's weights; ``offsets`` holds each chunk's offset plus the
        call's first rotation).

        Elements are summed in float32 in groups of ``segment``, taken ``step // segment`` apart (a reduction over the
        outer dimension of a ``(segment, step // segment)`` view: one coalesced pass; the inner dimension's took five
        times as long on an H200), and the groups' sums in float64."""
        n = f.numel()
        period, seg = min(chunk, n), self.segment
        for lo, hi, at in _rotated(period, rot_c, period):
            self.w2_call[lo:hi].copy_(self.w2[at:at + hi - lo])
        rows = 4 if with_mag else 2
        total = self.total[:rows]
        total.zero_()
        p = self.partial
        step = STEP_CHUNKS * chunk
        for s0 in range(0, n, step):
            x = f[s0:s0 + step]
            m = x.numel()
            t = self.weighted[:m]
            whole = m // chunk * chunk  # this step's whole chunks: one broadcast product with the second pattern
            if whole:
                torch.mul(x[:whole].view(-1, chunk), self.w2_call[:chunk], out=t[:whole].view(-1, chunk))
            if whole < m:
                torch.mul(x[whole:], self.w2_call[:m - whole], out=t[whole:])
            for c0 in range(0, m, chunk):
                part = t[c0:c0 + chunk]
                for lo, hi, at in _rotated(part.numel(), offsets[(s0 + c0) // chunk], period):
                    part[lo:hi].mul_(self.w[at:at + hi - lo])
            groups = m // seg
            main = groups * seg
            if groups:
                xg, tg = x[:main].view(seg, groups), t[:main].view(seg, groups)
                torch.sum(xg, dim=0, out=p[0, :groups])
                torch.sum(tg, dim=0, out=p[1, :groups])
                if with_mag:
                    torch.linalg.vector_norm(xg, 1, dim=0, out=p[2, :groups])
                    torch.linalg.vector_norm(xg, 2, dim=0, out=p[3, :groups])
            cols = groups
            if main < m:  # the short group at the end
                torch.sum(x[main:], dim=0, out=p[0, groups])
                torch.sum(t[main:], dim=0, out=p[1, groups])
                if with_mag:
                    torch.linalg.vector_norm(x[main:], 1, dim=0, out=p[2, groups])
                    torch.linalg.vector_norm(x[main:], 2, dim=0, out=p[3, groups])
                cols += 1
            if with_mag:
                p[3, :cols].square_()
            total[:, :cols].add_(p[:rows, :cols])
        return total.sum(dim=1)


class Fingerprinter:
    """Per output tensor: two float64 sums (plain and +-1 weighted) and a key of its size and dtype; and the
    reference's bounds on how far an honest output's sums may differ from its own.

    Each sum is a necessary condition of elementwise closeness, so honest outputs never fail it, while a
    stale, garbage or approximate output fails with overwhelming probability. It runs between timed calls on
    both sides, so it must cost little and leave memory as it found it: buffers are made once, at the end of
    the warm-up (:meth:`prepare`), sized to the outputs (a large temporary between timed calls would move the
    next call's inputs and outputs, and memory-bound kernels then time differently from call to call), and a
    call's results come back to the host in one read per device.

    Forging, and what stands against it (docs/threat-model.md):

    * the weights are the product of two hashed signs per position, of full rank as a matrix of any output's
      shape: with weights of rank r the weighted sum of ``A @ B`` costs r matrix-vector products;
    * they repeat every chunk, but chunk k > 0 uses the first pattern rotated by a hashed offset: with the same
      weights in every chunk, the weighted sum of a product of m chunks would cost one chunk's product (of the
      summed blocks);
    * they change from call to call: each timed call rotates both patterns by amounts hashed from its key
      (:func:`call_rotations`). With weights fixed for the run, the weighted sum of a fixed linear map of the
      inputs (a convolution or linear layer with its weights) is one dot product of the input with a vector a
      backward pass computes once, and an output forged to match it costs nothing; with weights that change per
      call, that vector must be computed for each call's weights, a backward pass costing what the forward does.
      The product of two patterns, not one pattern rotated, because a convolution commutes with shifts: a
      rotated pattern's vector is, away from the borders, the shifted vector of the unrotated one;
    * the weighted sum's bound is statistical, not the plain sum's worst case: ``WEIGHTED_Z`` standard
      deviations of a sum of honest errors of random sign, ``sqrt(sum((atol + rtol*|r|)**2))``, which grows as
      the square root of the size where the worst case grows linearly and let outputs computed at lower
      precision pass;
    * the key of its size and dtype makes a small tensor tuned to match two sums fail.

    What remains is what the candidate's own process can do to the code that computes its fingerprints (the
    patch detector watches what it calls, and a timed call that leaves a torch mode or a trace hook in place
    fails), a candidate that reads a block's seeds and moves the block's work into a few calls (flagged, see
    ``candidate_timing._uneven_calls``), and outputs whose sums are cheap to compute anyway; the elementwise check
    of the last timed call and the correctness trials stand there. Outputs a little less exact than the
    tolerance in every call pass each call's bound but not the run's mean (:func:`weighted_z2`).
    """

    def __init__(self, chunk: int = CHUNK, segment: int | None = None,
                 segmented_from: int = SEGMENTED_MIN_ELEMENTS):
        self.chunk = chunk
        #: Float32 outputs of ``segmented_from`` elements or more are summed in float32 over groups of this many
        #: elements, the groups' sums in float64 (:class:`_Segmented`); 0: every output through the float64 buffer.
        self.segment = segment_wanted() if segment is None else int(segment)
        self.segmented_from = int(segmented_from)
        if self.segment < 0:
            raise ValueError(f"segments of {self.segment} elements: 0 (no float32 path) or more are needed")
        self._buf: torch.Tensor | None = None
        self._w: torch.Tensor | None = None
        self._w2: torch.Tensor | None = None
        #: The float32 path's buffers (:class:`_Segmented`), made for the largest float32 output seen.
        self._f32: _Segmented | None = None
        #: The one-pass kernel (kernelbench.evaluation.fingerprint_kernel), once :meth:`enable_fused` has started it.
        self.fused: Any = None

    def enable_fused(self, device: torch.device, force: bool = False) -> bool:
        """Start the one-pass Triton kernel for float32 outputs on ``device``, before any candidate code runs (the
        worker calls this as it creates its CUDA context). False, and the torch path, where it cannot run."""
        if not (force or fused_wanted()):  # force: benchmarks and tests, which measure it
            return False  # (before importing Triton: a second of CPU in every worker's Init for nothing)
        from kernelbench.evaluation import fingerprint_kernel

        try:
            self.fused = fingerprint_kernel.FusedSums.start(device, self.chunk)
            fingerprint_kernel.watch_owner(self)
        except Exception as e:  # no Triton, a compiler problem: the torch path gives the same sums, slower
            log.warning("fused fingerprint unavailable, using torch operators: %s", e)
            self.fused = None
        return self.fused is not None

    def _buffers(self, device: torch.device, elements: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """The float64 buffer and the two sign patterns, at least ``elements`` long (at most a chunk): sized to the
        largest output seen, so a problem with small outputs does not hold a chunk's 3 x 128 MB."""
        need = min(self.chunk, elements)
        if self._buf is None or self._w is None or self._w2 is None or self._buf.device != device \
                or self._buf.numel() < need:
            self._buf = self._w = self._w2 = None
            buf = torch.empty(need, dtype=torch.float64, device=device)
            w = _weights(0, need, device)
            w2 = _weights(_SECOND_PATTERN, need, device)
            self._buf, self._w, self._w2 = buf, w, w2
        return self._buf, self._w, self._w2

    def forget(self) -> None:
        """Let go of the buffers (a reference worker that goes on to another problem, with outputs of other sizes)."""
        self._buf = self._w = self._w2 = None
        self._f32 = None

    def _segmented(self, device: torch.device, elements: int) -> _Segmented:
        """The float32 path's buffers for an output of ``elements``: sized to the largest output seen (at most a step,
        and a chunk of pattern), so outputs of several sizes share them."""
        need, pattern = min(STEP_CHUNKS * self.chunk, elements), min(self.chunk, elements)
        f32 = self._f32
        if f32 is None or f32.device != device or f32.size < need or f32.w.numel() < pattern:
            if f32 is not None and f32.device == device:
                need, pattern = max(need, f32.size), max(pattern, f32.w.numel())
            self._f32 = None
            self._f32 = _Segmented(device, need, pattern, self.segment)
        return self._f32

    def _takes_segmented(self, f: torch.Tensor) -> bool:
        """Large float32 outputs (complex64 ones as their float32 pairs), laid out flat: the float32 path."""
        return bool(self.segment) and f.dtype == torch.float32 and f.is_contiguous() \
            and f.numel() >= self.segmented_from

    def prepare(self, tensors: list[torch.Tensor]) -> None:
        """Make the buffers for outputs like these now (at the end of the warm-up), not at the first timed call."""
        for t in tensors:
            f = _flat(t)
            n = f.numel()
            if not n or (self.fused is not None and self.fused.accepts(f)):
                continue
            if self._takes_segmented(f):
                self._segmented(f.device, n)
            else:
                self._buffers(f.device, n)

    def _offset(self, k: int) -> int:
        return 0 if k == 0 else _hash32(k) % self.chunk

    def measure(self, tensors: list[torch.Tensor], tolerance: tuple[float, float] | None = None, key: int = 0
                ) -> tuple[list[float], list[float]]:
        """(sums, bounds): three values per tensor (plain sum, weighted sum, size-and-dtype key) and, with ``tolerance``
        = (atol, rtol), three bounds per tensor (the key's is 0: equal or not). ``key`` picks the call's weights
        (a timed call's input seed: both sides of a call must pass the same)."""
        parts: list[torch.Tensor] = []  # per chunk: plain sum, weighted sum[, 1-norm, squares], on the device
        # per tensor: chunks, elements, magnitudes?, shape key, float32 segment length (0: float64 sums), flat tensor
        plan: list[tuple[int, int, bool, float, int, torch.Tensor]] = []
        for t in tensors:
            skey = size_key(t)
            f = _flat(t)
            with_mag = tolerance is not None and f.is_floating_point()
            n = f.numel()
            chunks, segment = 0, 0
            if n and self.fused is not None and self.fused.accepts(f):
                # One pass over the output, the same weights (fingerprint_kernel): plain, weighted, 1-norm, squares.
                period = min(self.chunk, n)
                a, c = call_rotations(key, period)
                four = self.fused.sums(f, a, c)
                parts.append(four if with_mag else four[:2])
                chunks = 1
            elif n and self._takes_segmented(f):
                chunks = self._measure_segmented(f, key, with_mag, parts)
                segment = self.segment
            elif n:
                chunks = self._measure_float64(f, key, with_mag, parts)
            plan.append((chunks, n, with_mag, skey, segment, f))
        values = _read_back(parts)
        sums: list[float] = []
        bounds: list[float] = []
        i = 0
        for chunks, n, with_mag, skey, segment, f in plan:
            s0 = s1 = mag = squares = 0.0
            for _ in range(chunks):
                s0 += values[i]
                s1 += values[i + 1]
                i += 2
                if with_mag:
                    mag += values[i]
                    squares += values[i + 1]
                    i += 2
            if segment and not all(map(math.isfinite, (s0, s1, mag, squares))):
                # A float32 segment's sum (or sum of squares) can overflow where float64 does not: this tensor again
                # through the float64 buffer, whose sums are what the float32 path stands for. Non-finite outputs
                # (NaN, Inf) come out non-finite there too.
                again: list[torch.Tensor] = []
                self._measure_float64(f, key, with_mag, again)
                redo = _read_back(again)
                step = 4 if with_mag else 2
                s0, s1 = sum(redo[0::step]), sum(redo[1::step])
                if with_mag:
                    mag, squares = sum(redo[2::step]), sum(redo[3::step])
                # (the bounds keep the float32 path's rounding: the other side's sums of a like output may not have
                # overflowed, and are then float32 groups' sums)
            sums.extend([s0, s1, skey])
            if tolerance is None:
                continue
            if not with_mag:
                bounds.extend([0.5, 0.5, 0.0])
                continue
            bounds.extend(_bounds(n, mag, squares, tolerance, segment))
        return sums, bounds

    def _measure_float64(self, f: torch.Tensor, key: int, with_mag: bool, parts: list[torch.Tensor]) -> int:
        """Per chunk, through the float64 buffer: plain sum, weighted sum[, 1-norm, sum of squares] appended to
        ``parts`` (device scalars); returns the chunks."""
        n = f.numel()
        buf, w, w2 = self._buffers(f.device, n)
        period = min(self.chunk, n)
        a, c = call_rotations(key, period)
        chunks = 0
        for k, s in enumerate(range(0, n, self.chunk)):
            part = f[s:s + self.chunk]
            m = part.numel()
            b = buf[:m]
            b.copy_(part)
            parts.append(b.sum())
            # b times the first pattern (rotated for the chunk and the call), in place; the weighted sum is
            # then b's dot product with the second pattern (rotated for the call). Every kernel here works
            # on one dtype: multiplying the float32 output by float64 signs straight into the buffer cost
            # more than this copy and in-place multiply (scripts/bench_fingerprint.py).
            for lo, hi, at in _rotated(m, (self._offset(k) + a) % period, period):
                b[lo:hi].mul_(w[at:at + hi - lo])
            parts.append(_rotated_dot(b, w2, c, period))
            if with_mag:
                parts.append(torch.linalg.vector_norm(b, 1))
                parts.append(torch.dot(b, b))
            chunks += 1
        return chunks

    def _measure_segmented(self, f: torch.Tensor, key: int, with_mag: bool, parts: list[torch.Tensor]) -> int:
        """The same four sums as :meth:`_measure_float64` with the same weights, reading the float32 output as float32
        (:class:`_Segmented`): about 40 bytes of memory traffic per element against 76 (a float64 copy and four passes
        over it), and a quarter of the launches. A timed call's fingerprint of a 6 GB output took 37 ms through the
        float64 buffer on an H200, most of such a call's time off its forward (docs/benchmarks.md, session 24).
        Appends one device tensor to ``parts`` (as one chunk)."""
        n = f.numel()
        buf = self._segmented(f.device, n)
        period = min(self.chunk, n)
        a, c = call_rotations(key, period)
        offsets = [(self._offset(k) + a) % period for k in range(-(-n // self.chunk))]
        parts.append(buf.sums(f, self.chunk, offsets, c, with_mag))
        return 1

    def sums(self, tensors: list[torch.Tensor]) -> list[float]:
        return self.measure(tensors)[0]

    def bounds(self, ref_tensors: list[torch.Tensor], atol: float, rtol: float) -> list[float]:
        """How far a candidate's :meth:`sums` may be from the reference's when every element is within tolerance."""
        return self.measure(ref_tensors, (atol, rtol))[1]


def _read_back(parts: list[torch.Tensor]) -> list[float]:
    """The values of 0-d and 1-d device tensors in order, one read per device (outputs on several devices are
    rare)."""
    if not parts:
        return []
    flat = [p.reshape(-1) for p in parts]
    devices = {p.device for p in flat}
    if len(devices) == 1:
        return torch.cat(flat).tolist()
    per_part: list[list[float]] = [[] for _ in flat]
    for d in devices:
        idx = [i for i, p in enumerate(flat) if p.device == d]
        values = torch.cat([flat[i] for i in idx]).tolist()
        at = 0
        for i in idx:
            size = flat[i].numel()
            per_part[i] = values[at:at + size]
            at += size
    return [v for part in per_part for v in part]


def fingerprint(tensors: list[torch.Tensor]) -> list[float]:
    return Fingerprinter().sums(tensors)


def fingerprint_bounds(ref_tensors: list[torch.Tensor], atol: float, rtol: float) -> list[float]:
    return Fingerprinter().bounds(ref_tensors, atol, rtol)


#: The most the mean square of the weighted sums' standardised deviations may be over a run's timed calls. An honest
#: output is within tolerance elementwise, so each call's deviation, a sum of those errors under signs that change
#: from call to call, has a mean square of at most one (the statistical bound's unit); one call may stray to
#: ``WEIGHTED_Z``, but errors larger than the tolerance in every call (a GEMM from TF32- or bfloat16-rounded inputs
#: at fp32 tolerances: about 8) show in the mean.
POOLED_Z2_LIMIT = 4.0
#: Calls (tensors of calls) needed before the mean is judged: fewer, and an honest run at the very edge of its
#: tolerance could reach the limit by chance.
POOLED_MIN_COUNT = 8


def weighted_z2(cand: list[float], ref: list[float], bounds: list[float]) -> list[float]:
    """Per output of one call, the squared deviation of its weighted sum in units of honest rounding, where the
    statistical bound is the one in force (outputs too small for it, where the worst case is tighter, are left
    out). The unit is recovered from the bound (``WEIGHTED_Z`` units plus a float64 slack), which makes the
    figure a slight underestimate: it can only err in the candidate's favour."""
    out: list[float] = []
    for t in range(0, min(len(cand), len(ref), len(bounds)) - 2, 3):
        worst, stat = bounds[t], bounds[t + 1]
        if not (math.isfinite(stat) and math.isfinite(ref[t + 1]) and math.isfinite(cand[t + 1])) \
                or not 0 < stat < worst:
            continue
        out.append((WEIGHTED_Z * (cand[t + 1] - ref[t + 1]) / stat) ** 2)
    return out


def fingerprints_match(cand: list[float], ref: list[float], bounds: list[float]) -> bool:
    if len(cand) != len(ref) or len(ref) != len(bounds):
        return False
    for c, r, b in zip(cand, ref, bounds):
        if not (math.isfinite(r) and math.isfinite(b)):
            continue  # a non-finite reference is checked elementwise instead
        if not math.isfinite(c) or abs(c - r) > b:
            return False
    return True
