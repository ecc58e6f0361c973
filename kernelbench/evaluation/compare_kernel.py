"""The reference worker's elementwise checks in one pass: a Triton kernel reading both tensors once.

:func:`kernelbench.evaluation.compare.compare_tensor` checks a candidate's output against the reference's within
tolerances (NaN and Inf placed exactly, the largest absolute and relative errors reported), and
:func:`~kernelbench.evaluation.compare.tensors_equal` that an input came back unchanged. Written with torch operators
each is a score of kernels and four host reads per 16M-element chunk: on official level-1 problems of 6 GB tensors one
comparison took 0.17-0.22 s (session 22, H200), seven of them a job (the reference's setup, five correctness trials,
the last timed call), most of level 1's correctness stage. This kernel reads each element of both tensors once and
answers with one read-back: how many elements fail, and the two largest errors.

It decides nothing by itself on a failure: when any element fails (or could), the caller runs the torch path again
for its exact message (the first bad position, the counts), so a verdict and its wording are the torch path's in
every case; only a pass is taken from the kernel. Its arithmetic is the torch path's in float32: the same operations
in the same order, with the compiler's fusing of a multiply and an add into one rounding turned off, and NaN and Inf
told by their bits. Tensors it does not serve (float64, which the torch path compares in float64; other dtypes; a
tolerance of 0, where flushed subnormals could differ; views with gaps) take the torch path.

Why it may run here: only trusted processes use it (the reference worker, which holds no candidate code, turns it on
at its Init); a candidate's outputs reach it as data, never as code.
"""

from __future__ import annotations

import logging
import threading
from typing import Any

import torch

from kernelbench.evaluation.triton_caches import interpreting, triton_cache, trusted_cache_dir

log = logging.getLogger(__name__)

#: Tensors of fewer elements take the torch path (its launches cost little there, and the kernel's first use in a
#: process loads it: tens of milliseconds from Triton's cache).
MIN_ELEMENTS = 1 << 18
BLOCK = 1024
#: Programs per launch at most; each writes three float64 partials into a buffer made once.
MAX_PROGRAMS = 2048
#: Smallest positive normal float32: below it as ``atol`` a flushed subnormal difference could pass where the torch
#: path fails it.
_MIN_NORMAL_F32 = 1.1754943508222875e-38

#: Per served dtype: the bit width it is read as, its bits' magnitude mask and the bits of its infinity.
_FLOAT_BITS = {
    torch.float32: (torch.int32, 0x7FFFFFFF, 0x7F800000),
    torch.float16: (torch.int16, 0x7FFF, 0x7C00),
    torch.bfloat16: (torch.int16, 0x7FFF, 0x7F80),
}
#: Integer dtypes the equality check serves (compared as integers, no NaN).
_INT_DTYPES = (torch.int32, torch.int64, torch.int16, torch.int8, torch.uint8)

try:  # only where Triton imports; the torch path serves everywhere else
    import triton
    import triton.language as tl
except Exception:  # pragma: no cover - Triton is a dependency; a broken install only loses the fast path
    triton = None
    tl = None


if triton is not None:
    @triton.jit(do_not_specialize=["n", "atol", "rtol", "programs"])
    def _tally(c_ptr, r_ptr, part_ptr, n, atol, rtol, programs, ABS: tl.constexpr, INF: tl.constexpr,
               BITS: tl.constexpr, BLOCK: tl.constexpr):
        """Per program: elements that fail (NaN or Inf placed otherwise than in the reference, or further than
        ``atol + rtol * |r|``), and the largest absolute and relative errors over the finite elements, as
        compare._Tally computes them in float32."""
        pid = tl.program_id(0)
        lanes = tl.arange(0, BLOCK)
        bad = tl.zeros([BLOCK], dtype=tl.int32)
        mabs = tl.zeros([BLOCK], dtype=tl.float32)
        mrel = tl.zeros([BLOCK], dtype=tl.float32)
        start = pid.to(tl.int64) * BLOCK
        step = programs.to(tl.int64) * BLOCK
        n64 = n.to(tl.int64)
        while start < n64:
            p = start + lanes
            mask = p < n64
            cv = tl.load(c_ptr + p, mask=mask, other=0.0)
            rv = tl.load(r_ptr + p, mask=mask, other=0.0)
            cb = cv.to(BITS, bitcast=True) & ABS
            rb = rv.to(BITS, bitcast=True) & ABS
            c_nan, r_nan = cb > INF, rb > INF
            c_inf, r_inf = cb == INF, rb == INF
            c = cv.to(tl.float32)
            r = rv.to(tl.float32)
            mism = (c_nan != r_nan) | (c_inf != r_inf) | (r_inf & (c != r))
            finite = ~(c_nan | r_nan | c_inf | r_inf)
            d = tl.where(finite, tl.abs(c - r), 0.0)
            ra = tl.where(finite, tl.abs(r), 0.0)
            over = d > atol + rtol * ra
            rel = d / tl.maximum(ra, 1e-12)
            bad += tl.where(mask & (mism | over), 1, 0)
            mabs = tl.maximum(mabs, tl.where(mask, d, 0.0))
            mrel = tl.maximum(mrel, tl.where(mask & finite, rel, 0.0))
            start += step
        base = part_ptr + pid.to(tl.int64) * 3
        tl.store(base, tl.sum(bad, axis=0).to(tl.float64))
        tl.store(base + 1, tl.max(mabs, axis=0).to(tl.float64))
        tl.store(base + 2, tl.max(mrel, axis=0).to(tl.float64))

    @triton.jit(do_not_specialize=["n", "programs"])
    def _differ(c_ptr, r_ptr, part_ptr, n, programs, ABS: tl.constexpr, INF: tl.constexpr, BITS: tl.constexpr,
                IS_FLOAT: tl.constexpr, BLOCK: tl.constexpr):
        """Per program: elements that are not equal, NaN equal to NaN (compare.tensors_equal), told by their bits:
        equal bits, both NaN, or both zero (+0 == -0)."""
        pid = tl.program_id(0)
        lanes = tl.arange(0, BLOCK)
        bad = tl.zeros([BLOCK], dtype=tl.int32)
        start = pid.to(tl.int64) * BLOCK
        step = programs.to(tl.int64) * BLOCK
        n64 = n.to(tl.int64)
        while start < n64:
            p = start + lanes
            mask = p < n64
            cv = tl.load(c_ptr + p, mask=mask, other=0)
            rv = tl.load(r_ptr + p, mask=mask, other=0)
            if IS_FLOAT:
                cb = cv.to(BITS, bitcast=True)
                rb = rv.to(BITS, bitcast=True)
                same = (cb == rb) | (((cb & ABS) > INF) & ((rb & ABS) > INF)) | (((cb | rb) & ABS) == 0)
            else:
                same = cv == rv
            bad += tl.where(mask & ~same, 1, 0)
            start += step
        tl.store(part_ptr + pid.to(tl.int64), tl.sum(bad, axis=0).to(tl.float64))


_enabled_on: set[str] = set()
_partials: dict[str, torch.Tensor] = {}
#: One comparison at a time per process: the partials buffer is shared until its read-back.
_lock = threading.Lock()


def enable(device: torch.device) -> bool:
    """Serve comparisons on ``device`` in this (trusted) process from now on, the kernels compiled and launched once
    now (from Triton's cache after the first worker). False, and the torch path, where they cannot run."""
    if triton is None:
        return False
    interpreted = device.type == "cpu" and interpreting()
    if device.type != "cuda" and not interpreted:
        return False
    if device.type == "cuda" and device.index is None:
        device = torch.device("cuda", torch.cuda.current_device())
    key = str(device)
    try:
        _partials[key] = torch.zeros(MAX_PROGRAMS * 3, dtype=torch.float64, device=device)
        _enabled_on.add(key)
        a = torch.ones(BLOCK + 1, dtype=torch.float32, device=device)
        if tally(a, a.clone(), 1e-4, 1e-4, force=True) is None or differs(a, a.clone(), force=True) is None:
            raise RuntimeError("the comparison kernels did not run")
    except Exception as e:  # no compiler, a driver problem: the torch path gives the same verdicts, slower
        log.warning("comparison kernel unavailable, using torch operators: %s: %s", type(e).__name__, e)
        _enabled_on.discard(key)
        _partials.pop(key, None)
        return False
    return True


def active() -> bool:
    """Has this process enabled the kernels on some device?"""
    return bool(_enabled_on)


def disable() -> None:
    """Back to the torch path everywhere (tests)."""
    _enabled_on.clear()
    _partials.clear()


def _served(c: torch.Tensor, r: torch.Tensor, force: bool) -> bool:
    # (a negative or conjugate view reads its memory with a sign flipped: the kernel reads the memory as it is)
    return (str(r.device) in _enabled_on and c.device == r.device and c.dtype == r.dtype
            and (force or r.numel() >= MIN_ELEMENTS) and 0 < r.numel() < 2**31 - 1
            and c.is_contiguous() and r.is_contiguous() and not (c.is_neg() or r.is_neg() or c.is_conj()
                                                                 or r.is_conj()))


def _programs(n: int) -> int:
    return max(1, min(MAX_PROGRAMS, -(-n // BLOCK)))


def _launch(kernel: Any, programs: int, device: torch.device, *args: Any, **meta: Any) -> None:
    # Compiled (at a dtype's first use) into a trusted cache the reference workers share, never a candidate's.
    with triton_cache(_trusted_cache()):
        if device.type == "cuda":
            with torch.cuda.device(device):
                kernel[(programs,)](*args, **meta, enable_fp_fusion=False)
        else:
            kernel[(programs,)](*args, **meta)


_cache_dir: list = []


def _trusted_cache() -> Any:
    """The trusted Triton cache folder (made once; None where it cannot be: Triton's own default then)."""
    if not _cache_dir:
        path = trusted_cache_dir("triton-compare")
        try:
            path.mkdir(parents=True, exist_ok=True)
        except OSError:
            path = None
        _cache_dir.append(path)
    return _cache_dir[0]


def tally(c: torch.Tensor, r: torch.Tensor, atol: float, rtol: float,
          force: bool = False) -> tuple[int, float, float] | None:
    """(failing elements, max abs error, max rel error) of flat ``c`` against ``r`` (one read-back), or None where
    the kernel does not serve them (the torch path then does). ``force``: below :data:`MIN_ELEMENTS` too."""
    if r.dtype not in _FLOAT_BITS or not atol >= _MIN_NORMAL_F32 or not rtol >= 0 or not _served(c, r, force):
        return None
    bits, abs_mask, inf = _FLOAT_BITS[r.dtype]
    n = r.numel()
    programs = _programs(n)
    parts = _partials[str(r.device)]
    with _lock:
        _launch(_tally, programs, r.device, c, r, parts, n, float(atol), float(rtol), programs,
                ABS=abs_mask, INF=inf, BITS=_tl_int(bits), BLOCK=BLOCK)
        p = parts[:programs * 3].view(programs, 3)
        bad, mabs, mrel = torch.stack([p[:, 0].sum(), p[:, 1].max(), p[:, 2].max()]).tolist()
    return int(bad), float(mabs), float(mrel)


def differs(c: torch.Tensor, r: torch.Tensor, force: bool = False) -> int | None:
    """Elements of flat ``c`` not equal to ``r``'s (NaN equal to NaN; one read-back), or None where the kernel does
    not serve them."""
    if not (r.dtype in _FLOAT_BITS or r.dtype in _INT_DTYPES) or not _served(c, r, force):
        return None
    n = r.numel()
    programs = _programs(n)
    parts = _partials[str(r.device)]
    if r.dtype in _FLOAT_BITS:
        bits, abs_mask, inf = _FLOAT_BITS[r.dtype]
        meta = {"ABS": abs_mask, "INF": inf, "BITS": _tl_int(bits), "IS_FLOAT": True}
    else:
        meta = {"ABS": 0, "INF": 0, "BITS": tl.int32, "IS_FLOAT": False}
    with _lock:
        _launch(_differ, programs, r.device, c, r, parts, n, programs, **meta, BLOCK=BLOCK)
        return int(parts[:programs].sum().item())


def _tl_int(dtype: torch.dtype) -> Any:
    return tl.int32 if dtype == torch.int32 else tl.int16
