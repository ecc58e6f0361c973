#!/usr/bin/env python3
"""Which torch formulation of the float32 fingerprint path is fastest on this GPU (issue 25, session 24).

    python scripts/probe_fingerprint_ops.py --elements 1610612736 268435456 --json probe.json

Each variant computes, chunk by chunk as ``compare.Fingerprinter`` does, a float32 output's plain, weighted (the two
rotated sign patterns), absolute and squared sums, each group of ``S`` elements summed in float32 and the groups'
sums in float64; its plain and weighted sums are checked against the float64 path's within the groups' rounding
before it is timed. Host milliseconds per output (all launches and one read-back), median of ``--repeats``; and each
building block alone, over the whole output, for where the time goes.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--elements", type=int, nargs="+", default=[1 << 28])
    p.add_argument("--repeats", type=int, default=7)
    p.add_argument("--device", default="cuda")
    p.add_argument("--json", default=None)
    args = p.parse_args(argv)

    import torch

    from kernelbench.evaluation import compare

    dev = torch.device(args.device)
    sync = torch.cuda.synchronize if dev.type == "cuda" else (lambda: None)
    chunk = compare.CHUNK
    w1f = compare._weights(0, chunk, dev).float()
    w2f = compare._weights(compare._SECOND_PATTERN, chunk, dev).float()
    w1b, w2b = w1f.to(torch.int8), w2f.to(torch.int8)
    tmp = torch.empty(chunk, device=dev)
    signs_b = torch.empty(chunk, dtype=torch.int8, device=dev)
    signs_f = torch.empty(chunk, device=dev)
    offsets = compare.Fingerprinter(chunk=chunk, segment=0)

    def pieces(f, key):
        n = f.numel()
        period = min(chunk, n)
        a, c = compare.call_rotations(key, period)
        for k, s in enumerate(range(0, n, chunk)):
            part = f[s:s + chunk]
            yield part, (offsets._offset(k) + a) % period, c, period

    def rot(dst, src, r, period, op, first=None):
        """``op(dst piece, src piece[, first piece])`` over ``src`` rotated by ``r`` (``first``: read alongside)."""
        for lo, hi, at in compare._rotated(dst.numel(), r, period):
            if first is None:
                op(dst[lo:hi], src[at:at + hi - lo])
            else:
                op(dst[lo:hi], src[at:at + hi - lo], first[lo:hi])

    def groups(x, s, dim0):
        m = x.numel() - x.numel() % s
        return (x[:m].view(s, m // s), 0) if dim0 else (x[:m].view(m // s, s), 1)

    def make(s, dim0, weights, mag="norm"):
        part64 = torch.empty(4, chunk // s + 1, dtype=torch.float64, device=dev)

        def run(f, key):
            outs = []
            for part, ra, rc, period in pieces(f, key):
                m = part.numel()
                t = tmp[:m]
                if weights == "f32-twice":
                    rot(t, w1f, ra, period, lambda d, src, x: torch.mul(x, src, out=d), first=part)
                    rot(t, w2f, rc, period, lambda d, src: d.mul_(src))
                elif weights == "i8-signs":
                    sb = signs_b[:m]
                    rot(sb, w1b, ra, period, lambda d, src: d.copy_(src))
                    rot(sb, w2b, rc, period, lambda d, src: d.mul_(src))
                    torch.mul(part, sb, out=t)
                elif weights == "f32-signs":
                    sf = signs_f[:m]
                    rot(sf, w1f, ra, period, lambda d, src: d.copy_(src))
                    rot(sf, w2f, rc, period, lambda d, src: d.mul_(src))
                    torch.mul(part, sf, out=t)
                xg, d = groups(part, s, dim0)
                tg, _ = groups(t, s, dim0)
                g = xg.shape[1 - d]
                q = part64[:, :g]
                main = xg.numel()
                # the elements past the last whole group (before t is reused below)
                xt, tt = part[main:].double(), t[main:].double()
                tail = torch.stack([xt.sum(), tt.sum(), xt.abs().sum(), (xt * xt).sum()])
                q[0].copy_(xg.sum(d))
                q[1].copy_(tg.sum(d))
                if mag == "norm":
                    q[2].copy_(torch.linalg.vector_norm(xg, 1, dim=d))
                    q[3].copy_(torch.linalg.vector_norm(xg, 2, dim=d))
                    q[3].square_()
                else:  # through the float32 buffer: |x|, then x*x, each summed by groups
                    torch.abs(part, out=t)
                    q[2].copy_(tg.sum(d))
                    torch.mul(part, part, out=t)
                    q[3].copy_(tg.sum(d))
                outs.append(q.sum(1) + tail)
            return torch.stack(outs).sum(0).tolist()
        return run

    ref_fp = compare.Fingerprinter(segment=0)
    shipped_fp = compare.Fingerprinter()

    variants = {"float64": lambda f, key: ref_fp.measure([f], (1e-4, 1e-4), key=key)[0][:2],
                "shipped": lambda f, key: shipped_fp.measure([f], (1e-4, 1e-4), key=key)[0][:2]}
    for s in (16, 32, 64):
        for dim0 in (True, False):
            for weights in ("f32-twice", "i8-signs", "f32-signs"):
                for mag in ("norm", "tmp"):
                    if (not dim0 and (weights != "i8-signs" or mag != "norm")) or (s == 16 and mag == "norm"):
                        continue
                    variants[f"S{s}-{'dim0' if dim0 else 'dim1'}-{weights}-{mag}"] = make(s, dim0, weights, mag)

    rows = []
    for n in args.elements:
        torch.manual_seed(0)
        x = torch.randn(n, device=dev)
        mag = float(x.abs().double().sum())
        want = ref_fp.measure([x], key=5)[0]
        row = {"elements": n}
        for name, fn in variants.items():
            got = fn(x, 5)
            s = int(name[1:3]) if name.startswith("S") else compare.SEGMENT
            err = (s - 1) * 2.0 ** -24 * mag + 1e-9
            if abs(got[0] - want[0]) > err or abs(got[1] - want[1]) > err:
                print(f"{name}: sums {got[:2]} against {want[:2]} (allowed {err}): wrong, left out", file=sys.stderr)
                continue
            times = []
            for r in range(args.repeats + 2):
                sync()
                t0 = time.perf_counter()
                fn(x, r)
                sync()
                if r >= 2:
                    times.append((time.perf_counter() - t0) * 1e3)
            row[name] = round(statistics.median(times), 3)
        ops = _blocks(torch, x, chunk, args.repeats, sync)
        row["blocks"] = ops
        rows.append(row)
        print(f"{n} elements:", flush=True)
        for k, v in row.items():
            if k not in ("elements", "blocks"):
                print(f"  {k:<28} {v:9.3f} ms", flush=True)
        for k, v in ops.items():
            print(f"  block {k:<26} {v:9.3f} ms", flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps({"rows": rows}, indent=1))
    return 0


def _blocks(torch, x, chunk: int, repeats: int, sync) -> dict:
    """Each building block alone over the whole output: host ms, median of ``repeats``."""
    n = x.numel()
    y = torch.empty_like(x)
    xb = torch.ones(n, dtype=torch.int8, device=x.device)
    x64 = torch.empty(min(n, chunk), dtype=torch.float64, device=x.device)
    g = x[:n - n % 32]
    blocks = {
        "sum all": lambda: x.sum(),
        "sum dim0 [32,R]": lambda: g.view(32, -1).sum(0),
        "sum dim1 [R,32]": lambda: g.view(-1, 32).sum(1),
        "norm1 dim0 [32,R]": lambda: torch.linalg.vector_norm(g.view(32, -1), 1, dim=0),
        "norm2 dim0 [32,R]": lambda: torch.linalg.vector_norm(g.view(32, -1), 2, dim=0),
        "norm1 dim1 [R,32]": lambda: torch.linalg.vector_norm(g.view(-1, 32), 1, dim=1),
        "mul f32*f32": lambda: torch.mul(x, x, out=y),
        "abs f32": lambda: torch.abs(x, out=y),
        "mul f32*i8": lambda: torch.mul(x, xb, out=y),
        "copy f32->f64 per chunk": lambda: [x64.copy_(x[s:s + chunk]) for s in range(0, n - chunk + 1, chunk)],
    }
    ops = {}
    for name, fn in blocks.items():
        times = []
        for r in range(repeats + 2):
            sync()
            t0 = time.perf_counter()
            fn()
            sync()
            if r >= 2:
                times.append((time.perf_counter() - t0) * 1e3)
        ops[name] = round(statistics.median(times), 3)
    return ops


if __name__ == "__main__":
    sys.exit(main())
