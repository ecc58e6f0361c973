"""Does a memory-bound kernel's time depend on where its buffers land in GPU memory?

    python scripts/probe_placement.py                      # GELU on 8192 x 16384 fp32 (level 1 problem 9)
    python scripts/probe_placement.py --placements 16 --calls 30 --out probe.json

Identity candidates of short memory-bound problems (GELU, Tanh) timed up to 9% away from their own
reference on an H100, with samples clustered at two values. This script tests the explanation that
the speed follows the physical placement of the input and output buffers: in one process it
allocates the same tensors at several placements (a padding block of varying size shifts them), times
the same kernel at each with the evaluator's recipe (L2 flushed, CUDA events), and prints the median
per placement. One median for all placements refutes it; two clusters support it.

Session 3 refuted it within one process (12 placements, medians within 0.2%). The evaluator times the
candidate and the reference in two different processes, and the identity samples show one side in
the slow band for a whole session; ``--processes N`` tests that next: it runs the one-placement probe
in N fresh processes, one after another, and prints each process's median. Medians in two bands mean
the band is a property of the process (its memory mapping, page sizes, context); ``--alloc-conf``
repeats it with a ``PYTORCH_CUDA_ALLOC_CONF`` (e.g. ``expandable_segments:True``, which maps memory in
fixed 2 MiB granules) to see whether that removes the bands.

    python scripts/probe_placement.py --processes 8 --alloc-conf expandable_segments:True --out probe.json
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="probe_placement.py", description=__doc__.strip().splitlines()[0])
    p.add_argument("--rows", type=int, default=8192)
    p.add_argument("--cols", type=int, default=16384)
    p.add_argument("--op", choices=("gelu", "tanh", "relu"), default="gelu")
    p.add_argument("--placements", type=int, default=12, help="placements to try (default 12)")
    p.add_argument("--calls", type=int, default=25, help="timed calls per placement (default 25)")
    p.add_argument("--processes", type=int, default=0,
                   help="run one placement in each of N fresh processes instead (default 0: one process)")
    p.add_argument("--alloc-conf", default=None,
                   help="with --processes: also run them with this PYTORCH_CUDA_ALLOC_CONF, for comparison")
    p.add_argument("--out", default=None, help="write the medians as JSON here")
    args = p.parse_args(argv)
    if args.processes > 0:
        return across_processes(args)

    import torch

    if not torch.cuda.is_available():
        print("probe_placement.py: error: needs a CUDA GPU", file=sys.stderr)
        return 2
    op = {"gelu": torch.nn.functional.gelu, "tanh": torch.tanh, "relu": torch.relu}[args.op]
    flush = torch.empty(256 * 2**20, dtype=torch.uint8, device="cuda")
    gen = torch.Generator(device="cuda").manual_seed(0)
    rows = []
    for k in range(args.placements):
        pad = torch.empty((k * 37 + 1) * 2**20, dtype=torch.uint8, device="cuda")  # shifts what follows
        x = torch.randn(args.rows, args.cols, device="cuda", generator=gen)
        times = []
        y = op(x)  # the output's block, reused by every call below (as in the evaluator's timing loop)
        for i in range(args.calls + 3):
            flush.zero_()
            e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            e0.record()
            y = None
            y = op(x)
            e1.record()
            torch.cuda.synchronize()
            if i >= 3:
                times.append(e0.elapsed_time(e1))
        med = statistics.median(times)
        rows.append({"placement": k, "pad_mib": k * 37 + 1, "x_ptr": x.data_ptr(), "y_ptr": y.data_ptr(),
                     "median_ms": med, "min_ms": min(times), "max_ms": max(times)})
        print(f"placement {k:2d}: pad {k * 37 + 1:5d} MiB  x {x.data_ptr():#x}  y {y.data_ptr():#x}  "
              f"median {med:.4f} ms  min {min(times):.4f}  max {max(times):.4f}")
        del pad, x, y
        torch.cuda.empty_cache()
    meds = [r["median_ms"] for r in rows]
    print(f"\n{args.op} {args.rows}x{args.cols} on {torch.cuda.get_device_name()}: medians over {len(meds)} "
          f"placements from {min(meds):.4f} to {max(meds):.4f} ms (max/min {max(meds) / min(meds):.3f})")
    if args.out:
        with open(args.out, "w") as f:
            json.dump({"gpu": torch.cuda.get_device_name(), "op": args.op, "shape": [args.rows, args.cols],
                       "placements": rows}, f, indent=1)
    return 0


def across_processes(args: argparse.Namespace) -> int:
    """One placement per fresh process: does the band follow the process?"""
    import os
    import subprocess
    import tempfile

    variants = [("default", os.environ.get("PYTORCH_CUDA_ALLOC_CONF"))]
    if args.alloc_conf:
        variants.append((args.alloc_conf, args.alloc_conf))
    report = {"op": args.op, "shape": [args.rows, args.cols], "variants": {}}
    for label, conf in variants:
        env = dict(os.environ)
        env.pop("PYTORCH_CUDA_ALLOC_CONF", None)
        if conf:
            env["PYTORCH_CUDA_ALLOC_CONF"] = conf
        meds = []
        for k in range(args.processes):
            with tempfile.NamedTemporaryFile(suffix=".json") as tmp:
                cmd = [sys.executable, __file__, "--rows", str(args.rows), "--cols", str(args.cols), "--op", args.op,
                       "--placements", "1", "--calls", str(args.calls), "--out", tmp.name]
                done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300)
                if done.returncode != 0:
                    print(done.stdout + done.stderr, file=sys.stderr)
                    return done.returncode
                with open(tmp.name) as f:
                    row = json.load(f)["placements"][0]
            meds.append(row["median_ms"])
            print(f"[{label}] process {k}: median {row['median_ms']:.4f} ms  min {row['min_ms']:.4f}  "
                  f"max {row['max_ms']:.4f}")
        report["variants"][label] = meds
        print(f"[{label}] {args.op} medians over {len(meds)} processes from {min(meds):.4f} to {max(meds):.4f} ms "
              f"(max/min {max(meds) / min(meds):.3f})\n")
    if args.out:
        with open(args.out, "w") as f:
            json.dump(report, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
