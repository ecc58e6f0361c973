"""Comparing a candidate's outputs with the reference's, on the evaluation device.

Runs only in the trusted reference worker. Checks are exact about structure, type, shape,
dtype and device, tolerance-based about values, and strict about NaN/Inf placement.
Large tensors are processed in chunks so checking never needs a second copy of a
multi-gigabyte output.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import torch

from kernelbench.evaluation.transport import describe_structure, flatten

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
    if not (r.is_floating_point() or r.is_complex()):
        return _compare_exact(cf, rf, n, tuple(r.shape), where)
    acc = torch.float64 if r.dtype in (torch.float64, torch.complex128) else torch.float32
    tally = _Tally()
    for s in range(0, n, CHUNK):
        tally.add(cf[s:s + CHUNK].to(acc), rf[s:s + CHUNK].to(acc), s, atol, rtol, acc)
    return tally.comparison(cf, rf, n, tuple(r.shape), atol, rtol, where)


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
    worst = Comparison(True, None, 0.0, 0.0)

    def walk(ct: Any, rt: Any, path: str) -> Comparison | None:
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
                res = walk(a, b, f"{path}[{k}]")
                if res is not None:
                    return res
            return None
        if t == "scalar":
            a, b = ct.get("v"), rt.get("v")
            if isinstance(b, float) and isinstance(a, (int, float)) and not isinstance(a, bool):
                if math.isclose(a, b, rel_tol=rtol, abs_tol=atol):
                    return None
            elif a == b:
                return None
            return Comparison(False, f"{path}: got {a!r}, expected {b!r}")
        if t == "tensor":
            i = ct.get("i")
            if not isinstance(i, int) or not 0 <= i < len(cand_tensors):
                return Comparison(False, f"{path}: malformed tensor reference")
            if ct.get("cls") != "torch.Tensor":
                return Comparison(False, f"{path} is a {ct.get('cls')}, not a plain torch.Tensor")
            res = compare_tensor(cand_tensors[i], ref_leaves[rt["i"]], atol, rtol, path)
            if not res.ok:
                return res
            worst.max_abs_error = max(worst.max_abs_error or 0.0, res.max_abs_error or 0.0)
            worst.max_rel_error = max(worst.max_rel_error or 0.0, res.max_rel_error or 0.0)
            return None
        return Comparison(False, f"{path}: unsupported output type {rt.get('type')}")

    res = walk(cand_tree, ref_tree, "output")
    return res if res is not None else worst


def tensors_equal(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Bitwise-equal values (NaN equal to NaN), used to check inputs were not modified."""
    if a.shape != b.shape or a.dtype != b.dtype:
        return False
    af, bf = a.reshape(-1), b.reshape(-1)
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
def _weights(start: int, count: int, device: torch.device) -> torch.Tensor:
    """A fixed pseudo-random +-1 pattern over flat positions (Knuth multiplicative hash)."""
    idx = torch.arange(start, start + count, device=device, dtype=torch.int64)
    bits = ((idx * 2654435761) >> 13) & 1
    return (1 - 2 * bits).to(torch.float64)


class Fingerprinter:
    """Two float64 sums per tensor (plain and +-1 weighted) between timed calls.

    Each sum is a necessary condition of elementwise closeness, so honest outputs never fail it,
    while a stale or garbage output fails with overwhelming probability. The work reuses two
    buffers allocated once: allocating temporaries between timed calls would move the next call's
    inputs and outputs to other memory, and memory-bound kernels then time differently from call
    to call. The weight pattern repeats every CHUNK elements.
    """

    def __init__(self, chunk: int = CHUNK):
        self.chunk = chunk
        self._buf: torch.Tensor | None = None
        self._w: torch.Tensor | None = None

    def _buffers(self, device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
        if self._buf is None or self._buf.device != device:
            self._buf = torch.empty(self.chunk, dtype=torch.float64, device=device)
            self._w = _weights(0, self.chunk, device)
        return self._buf, self._w

    def sums(self, tensors: list[torch.Tensor]) -> list[float]:
        out: list[float] = []
        for t in tensors:
            f = t.reshape(-1)
            if f.is_complex():
                f = torch.view_as_real(f).reshape(-1)
            s0 = s1 = 0.0
            if f.numel():
                buf, w = self._buffers(f.device)
                for s in range(0, f.numel(), self.chunk):
                    part = f[s:s + self.chunk]
                    m = part.numel()
                    b = buf[:m]
                    b.copy_(part)
                    s0 += float(b.sum())
                    s1 += float(torch.dot(b, w[:m]))
            out.extend([s0, s1])
        return out

    def bounds(self, ref_tensors: list[torch.Tensor], atol: float, rtol: float) -> list[float]:
        """|sum(w*(c-r))| <= sum(atol + rtol*|r|) whenever every element is within tolerance."""
        out: list[float] = []
        for t in ref_tensors:
            f = t.reshape(-1)
            if not (f.is_floating_point() or f.is_complex()):
                b = 0.5
            else:
                if f.is_complex():
                    f = torch.view_as_real(f).reshape(-1)
                b = 0.0
                if f.numel():
                    buf, _ = self._buffers(f.device)
                    for s in range(0, f.numel(), self.chunk):
                        part = f[s:s + self.chunk]
                        x = buf[:part.numel()]
                        x.copy_(part)
                        x.abs_()
                        mag = float(x.sum())
                        # float64 rounding of float32 sums is far below this slack
                        b += atol * part.numel() + rtol * mag + 1e-9 * mag
            out.extend([b, b])
        return out


def fingerprint(tensors: list[torch.Tensor]) -> list[float]:
    return Fingerprinter().sums(tensors)


def fingerprint_bounds(ref_tensors: list[torch.Tensor], atol: float, rtol: float) -> list[float]:
    return Fingerprinter().bounds(ref_tensors, atol, rtol)


def fingerprints_match(cand: list[float], ref: list[float], bounds: list[float]) -> bool:
    if len(cand) != len(ref) or len(ref) != len(bounds):
        return False
    for c, r, b in zip(cand, ref, bounds):
        if not (math.isfinite(r) and math.isfinite(b)):
            continue  # a non-finite reference is checked elementwise instead
        if not math.isfinite(c) or abs(c - r) > b:
            return False
    return True
