#!/usr/bin/env python3
"""How long the reference's elementwise checks take on this GPU, through torch operators and the one-pass kernel.

    python scripts/bench_compare.py                                   # 1M .. 1.6G float32 elements
    python scripts/bench_compare.py --elements 268435456 --repeats 10 --json compare.json

A job compares the candidate's outputs with the reference's seven times (the reference's own determinism check, five
correctness trials, the last timed call) and checks its inputs came back unchanged as often
(``kernelbench.evaluation.compare``). This script times ``compare_tensor`` on an output within tolerance and
``tensors_equal`` on an unchanged input, each through torch operators (the chunked path) and through
``compare_kernel`` (the kernels a reference worker enables at its warm-up), after checking that both give the same
verdict and largest errors. Host milliseconds per call, launches to the read-back, median of ``--repeats``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

DEFAULT_ELEMENTS = [1 << 20, 1 << 24, 1 << 28, 4096 * 393216]


def _timed(fn, repeats: int, sync) -> float:
    fn()
    sync()
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        sync()
        times.append((time.perf_counter() - t0) * 1000.0)
    return statistics.median(times)


def measure(elements: int, repeats: int) -> dict:
    import torch

    from kernelbench.evaluation import compare, compare_kernel

    dev = torch.device("cuda")
    r = torch.randn(elements, device=dev)
    c = r + torch.randn(elements, device=dev) * 1e-4
    same = r.clone()
    row: dict = {"elements": elements, "gib": elements * 4 / 2**30}

    def on(path: str) -> None:
        compare_kernel.disable()
        if path == "kernel" and not compare_kernel.enable(dev):
            raise SystemExit("the comparison kernels did not start on this GPU")

    for path in ("torch", "kernel"):
        on(path)
        res = compare.compare_tensor(c, r, 1e-2, 1e-2)
        if not res.ok or not compare.tensors_equal(same, r):
            raise SystemExit(f"{path}: an output within tolerance or an unchanged input failed: {res.reason}")
        row[f"{path}_max_abs"] = res.max_abs_error
        row[f"{path}_compare_ms"] = _timed(lambda: compare.compare_tensor(c, r, 1e-2, 1e-2), repeats,
                                           torch.cuda.synchronize)
        row[f"{path}_equal_ms"] = _timed(lambda: compare.tensors_equal(same, r), repeats, torch.cuda.synchronize)
    compare_kernel.disable()
    if row["torch_max_abs"] != row["kernel_max_abs"]:
        raise SystemExit(f"the largest errors differ: {row['torch_max_abs']} against {row['kernel_max_abs']}")
    # What copying both tensors costs on this GPU: the floor of any one pass that reads them.
    row["copy_both_ms"] = _timed(lambda: (same.copy_(r), same.copy_(c)), repeats, torch.cuda.synchronize)
    r = c = same = None
    torch.cuda.empty_cache()
    return row


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--elements", type=int, nargs="+", default=DEFAULT_ELEMENTS, help="float32 elements per tensor")
    ap.add_argument("--repeats", type=int, default=7, help="timed calls per case (the median is reported)")
    ap.add_argument("--json", type=Path, help="write the rows here")
    args = ap.parse_args(argv)
    import torch

    if not torch.cuda.is_available():
        print("bench_compare: needs a CUDA GPU", file=sys.stderr)
        return 2
    rows = []
    print(f"{torch.cuda.get_device_name(0)}; host ms per call, median of {args.repeats}")
    print(f"{'elements':>12} {'GiB':>6} | {'compare torch':>13} {'kernel':>8} {'x':>6} | {'equal torch':>11} "
          f"{'kernel':>8} {'x':>6} | {'2 copies':>8}")
    for n in args.elements:
        row = measure(n, args.repeats)
        rows.append(row)
        print(f"{n:>12} {row['gib']:>6.2f} | {row['torch_compare_ms']:>13.3f} {row['kernel_compare_ms']:>8.3f} "
              f"{row['torch_compare_ms'] / row['kernel_compare_ms']:>6.1f} | {row['torch_equal_ms']:>11.3f} "
              f"{row['kernel_equal_ms']:>8.3f} {row['torch_equal_ms'] / row['kernel_equal_ms']:>6.1f} | "
              f"{row['copy_both_ms']:>8.3f}")
    if args.json:
        args.json.write_text(json.dumps({"gpu": torch.cuda.get_device_name(0), "repeats": args.repeats,
                                         "rows": rows}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
