#!/usr/bin/env python3
"""How fast each way of computing a timed call's output fingerprint is on this GPU (issue 25).

    python scripts/bench_fingerprint.py                       # 32M, 8M, 1M and 10k float32 elements
    python scripts/bench_fingerprint.py --elements 33554432 --repeats 50 --json fp.json

Every timed call's outputs are fingerprinted on both sides (``kernelbench.evaluation.compare.Fingerprinter``):
a plain float64 sum, a sum weighted by signs that change from call to call, and the 1-norm and sum of squares
the tolerance bounds need, read back once. The per-call weights are the product of two sign patterns, each
rotated per call; this script times the ways of applying them on one output:

* ``fixed``: session 16's fingerprinter (one pattern, the same every call), for the cost of per-call weights;
* ``shipped``: ``Fingerprinter.measure`` through torch operators as the workers run it (session 24: a float32
  output of ``compare.SEGMENTED_MIN_ELEMENTS`` or more summed in float32 groups of ``compare.SEGMENT`` elements, the
  groups' sums in float64, the weighted one from the output times the two rotated float32 sign patterns; smaller
  outputs through the float64 buffer);
* ``float64``: ``Fingerprinter.measure`` through the float64 buffer, the path of every other dtype and of float32
  outputs before session 24 (``KB_FINGERPRINT=float64``: the float32 output cast into the buffer by a plain copy,
  summed there, then multiplied in place by the first pattern);
* ``fused``: ``Fingerprinter.measure`` with the one-pass Triton kernel the workers start on a GPU
  (``kernelbench.evaluation.fingerprint_kernel``: the output read once, the weights hashed in registers), the
  path float32 outputs take; its sums and bounds are checked against the torch path's first;
* ``mixed-dtype``: the first version of per-call weights (commit 8edcf6f): the plain sum read from the float32
  output as float64, the output times the float64 pattern written straight into the buffer;
* ``pattern``: the call's product pattern made first in a buffer of its own, then copy, sum and one dot product.

Each variant's sums are checked against the shipped one's before anything is timed. Host milliseconds per
measure (launches and the one read-back), median of ``--repeats``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def _variants(torch, compare):
    """name -> (make state for an output of n elements, measure(output, state, key) -> [s0, s1, mag, squares])."""
    chunk = compare.CHUNK

    def base_state(n, device, patterns):
        need = min(chunk, n)
        st = {"buf": torch.empty(need, dtype=torch.float64, device=device),
              "w": compare._weights(0, need, device)}
        if patterns == 2:
            st["w2"] = compare._weights(compare._SECOND_PATTERN, need, device)
            st["p"] = torch.empty(need, dtype=torch.float64, device=device)
        return st

    offsets = compare.Fingerprinter()  # for its per-chunk offsets

    def chunks(t, st, key):
        """Per chunk of the output: the chunk, its float64 buffer, the chunk's offset, the call's two rotations
        and the patterns' period (what every variant shares)."""
        f = t.reshape(-1)
        period = min(chunk, f.numel())
        a, c = compare.call_rotations(key, period)
        for k, s in enumerate(range(0, f.numel(), chunk)):
            part = f[s:s + chunk]
            yield part, st["buf"][:part.numel()], offsets._offset(k), a, c, period

    def fixed(t, st, key):
        parts = []
        for part, b, o, _, _, period in chunks(t, st, key):
            b.copy_(part)
            parts += [b.sum(), compare._rotated_dot(b, st["w"], o, period), torch.linalg.vector_norm(b, 1),
                      torch.dot(b, b)]
        return torch.stack(parts).tolist()

    def shipped(t, st, key):
        sums, bounds = st["fp"].measure([t], (1e-2, 1e-2), key=key)
        return sums + bounds

    def mixed_dtype(t, st, key):
        parts = []
        for part, b, o, a, c, period in chunks(t, st, key):
            parts.append(part.sum(dtype=torch.float64))
            for lo, hi, at in compare._rotated(b.numel(), (o + a) % period, period):
                torch.mul(part[lo:hi], st["w"][at:at + hi - lo], out=b[lo:hi])
            parts += [compare._rotated_dot(b, st["w2"], c, period), torch.linalg.vector_norm(b, 1), torch.dot(b, b)]
        return torch.stack(parts).tolist()

    def pattern(t, st, key):
        parts = []
        for part, b, o, a, c, period in chunks(t, st, key):
            q = st["p"][:b.numel()]
            # q = first pattern rotated, then times the second rotated (both same-dtype elementwise kernels)
            for lo, hi, at in compare._rotated(b.numel(), (o + a) % period, period):
                q[lo:hi].copy_(st["w"][at:at + hi - lo])
            for lo, hi, at in compare._rotated(b.numel(), c, period):
                q[lo:hi].mul_(st["w2"][at:at + hi - lo])
            b.copy_(part)
            parts += [b.sum(), torch.dot(b, q), torch.linalg.vector_norm(b, 1), torch.dot(b, b)]
        return torch.stack(parts).tolist()

    def shipped_state(n, device, segment=None):
        st = {"fp": compare.Fingerprinter(segment=segment)}
        st["fp"].prepare([torch.empty(n, device=device)])
        return st

    def fused_state(n, device):
        st = {"fp": compare.Fingerprinter()}
        if not st["fp"].enable_fused(device, force=True):
            raise RuntimeError("the one-pass kernel did not start here")
        return st

    return {
        "fixed": (lambda n, d: base_state(n, d, 1), fixed),
        "shipped": (shipped_state, shipped),
        "float64": (lambda n, d: shipped_state(n, d, 0), shipped),
        "fused": (fused_state, shipped),
        "mixed-dtype": (lambda n, d: base_state(n, d, 2), mixed_dtype),
        "pattern": (lambda n, d: base_state(n, d, 2), pattern),
    }


def _sums(values: list[float], chunks: int) -> tuple[float, float]:
    """Plain and weighted sums from a variant's per-chunk [s0, s1, mag, squares] values."""
    return sum(values[4 * i] for i in range(chunks)), sum(values[4 * i + 1] for i in range(chunks))


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    p.add_argument("--elements", type=int, nargs="+", default=[1 << 25, 1 << 23, 1 << 20, 10_000])
    p.add_argument("--repeats", type=int, default=30)
    p.add_argument("--device", default="cuda")
    p.add_argument("--json", default=None, help="write the table as JSON to this path")
    args = p.parse_args(argv)

    import torch

    from kernelbench.evaluation import compare

    if args.device.startswith("cuda") and not torch.cuda.is_available():
        print("no CUDA GPU here; --device cpu for a smoke test", file=sys.stderr)
        return 2
    device = torch.device(args.device)
    sync = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)
    variants = _variants(torch, compare)
    rows = []
    for n in args.elements:
        torch.manual_seed(0)
        t = torch.randn(n, device=device)
        chunks = -(-n // compare.CHUNK)
        states = {}
        for name, (make, _) in list(variants.items()):
            try:
                states[name] = make(n, device)
            except RuntimeError as e:  # the fused kernel on the CPU without the interpreter
                print(f"{name}: {e}; left out", file=sys.stderr)
                del variants[name]
        shipped = states["float64"]["fp"].measure([t], key=77)[0]
        torch_path = states["float64"]["fp"].measure([t], (1e-2, 1e-2), key=77)
        if "fused" in states:
            fused = states["fused"]["fp"].measure([t], (1e-2, 1e-2), key=77)
            for a, b in zip(fused[0] + fused[1], torch_path[0] + torch_path[1]):
                if abs(a - b) > 1e-9 * (1 + abs(b)):
                    print(f"fused does not give the float64 path's sums and bounds at {n} elements: {fused} vs "
                          f"{torch_path}", file=sys.stderr)
                    return 1
        # (the float32 path at every size, the threshold below which the shipped one takes the float64 path aside)
        segmented = compare.Fingerprinter(segmented_from=0).measure([t], (1e-2, 1e-2), key=77)
        err = (compare.SEGMENT - 1) * 2.0 ** -24 * float(t.abs().double().sum())
        if any(abs(a - b) > err + 1e-9 for a, b in zip(segmented[0], torch_path[0])):
            print(f"the float32 path's sums are further from the float64 path's than its rounding allows at {n} "
                  f"elements: {segmented[0]} vs {torch_path[0]}", file=sys.stderr)
            return 1
        for name in ("mixed-dtype", "pattern"):
            s0, s1 = _sums(variants[name][1](t, states[name], 77), chunks)
            if abs(s0 - shipped[0]) > 1e-6 * (1 + abs(shipped[0])) or abs(s1 - shipped[1]) > 1e-6 * (1 + abs(shipped[1])):
                print(f"{name} does not give the shipped sums at {n} elements: {(s0, s1)} vs {shipped[:2]}",
                      file=sys.stderr)
                return 1
        row = {"elements": n}
        for name, (_, fn) in variants.items():
            times = []
            for r in range(args.repeats + 3):
                sync()
                t0 = time.perf_counter()
                fn(t, states[name], r)
                ms = (time.perf_counter() - t0) * 1e3
                if r >= 3:
                    times.append(ms)
            row[name] = statistics.median(times)
        rows.append(row)
        print(f"{n:>10} elements: " + "  ".join(f"{k} {v:.3f} ms" for k, v in row.items() if k != "elements"),
              flush=True)
    watch = watch_cost(torch, compare, device, args.repeats)
    if watch:
        print(f"the fused path's watch: {watch['entries']} entries; {watch['changed_ms']:.3f} ms per check before a "
              f"timed call's fingerprint (Baseline.changed), {watch['walk_ms']:.3f} ms walked whole; changes in "
              f"honest use: {watch['changed_changes_in_honest_use'] or 'none'}", flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps({"device": str(device), "gpu": torch.cuda.get_device_name(device)
                                               if device.type == "cuda" else "cpu", "rows": rows,
                                               "watch": watch}, indent=1))
    return 0


def watch_cost(torch, compare, device, repeats: int) -> dict | None:
    """Entries in the fused path's tamper watch and host ms per comparison with its baseline: the full walk (the
    patch checks after the timed calls) and the baseline's readers (each timed call, on each side)."""
    from kernelbench.evaluation import fingerprint_kernel

    fp = compare.Fingerprinter()
    if not fp.enable_fused(device, force=True):
        return None
    baseline = fingerprint_kernel.Baseline.take()
    out = {"entries": len(baseline.entries), "readers": len(baseline.probes)}
    for name, check in (("walk_ms", lambda: fingerprint_kernel.changed(baseline.entries)),
                        ("changed_ms", baseline.changed)):
        times = []
        for _ in range(max(repeats, 5)):
            t0 = time.perf_counter()
            diff = check()
            times.append((time.perf_counter() - t0) * 1e3)
        out[name] = statistics.median(times)
        out[f"{name[:-3]}_changes_in_honest_use"] = diff[:20]
    return out


if __name__ == "__main__":
    sys.exit(main())
