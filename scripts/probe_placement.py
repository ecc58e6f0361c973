"""Does a memory-bound kernel's time depend on where its buffers land in GPU memory, or on the process?

    python scripts/probe_placement.py                      # GELU on 8192 x 16384 fp32 (level 1 problem 9)
    python scripts/probe_placement.py --placements 16 --calls 30 --keep --out probe.json
    python scripts/probe_placement.py --processes 8 --alloc-conf expandable_segments:True --out probe.json
    python scripts/probe_placement.py --processes 8 --concurrent --rounds 2 --out probe.json

Identity candidates of short memory-bound problems (GELU, Tanh) timed up to 9% away from their own
reference on an H100, with samples clustered at two values, and in the committed samples one side held
the slow band for a whole session. This script times the same kernel with the evaluator's recipe (L2
flushed, CUDA events) under three arrangements and prints the median of each:

* one process, several placements (a padding block of varying size shifts the tensors). With
  ``--keep`` every placement's tensors stay allocated, so each placement is backed by new physical
  memory; without it they are freed and the driver may hand the same pages back.
* ``--processes N``: one placement in each of N fresh processes, one after another (each exits before
  the next starts, so they may all get the same physical memory).
* ``--processes N --concurrent``: N processes alive at once, as the evaluator's reference and candidate
  workers are; each holds its tensors while the others time theirs, ``--rounds`` times over. Medians
  that split into bands by process, stable across rounds, make the band a property of the process.

``--alloc-conf`` repeats the process arrangements with a ``PYTORCH_CUDA_ALLOC_CONF`` (e.g.
``expandable_segments:True``, which maps memory in fixed 2 MiB granules) to see whether that removes
the bands.

Two arrangements test the evaluator's own recipe instead (one process, variants interleaved in short
blocks so they share the GPU's clock states):

* ``--recipes``: a fixed input (the probe's loop) against the evaluator's loop (inputs freed and made
  again with ``torch.rand`` before every call, a 128 MiB flush, a checksum of the output after it);
  every call's time is printed with the addresses its input and output landed at.
* ``--offsets``: input and output carved from one buffer at chosen distances apart (the placements
  above always put the output exactly 512 MiB below the input).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

OPS = ("gelu", "tanh", "relu")


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="probe_placement.py", description=__doc__.strip().splitlines()[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter,
                                epilog="\n".join(__doc__.strip().splitlines()[1:]))
    p.add_argument("--rows", type=int, default=8192)
    p.add_argument("--cols", type=int, default=16384)
    p.add_argument("--op", choices=OPS, default="gelu")
    p.add_argument("--placements", type=int, default=12, help="placements to try in one process (default 12)")
    p.add_argument("--keep", action="store_true", help="keep every placement's tensors allocated (fresh memory each)")
    p.add_argument("--calls", type=int, default=25, help="timed calls per placement or round (default 25)")
    p.add_argument("--processes", type=int, default=0,
                   help="run one placement in each of N processes instead (default 0: one process)")
    p.add_argument("--concurrent", action="store_true", help="with --processes: keep all N alive at once")
    p.add_argument("--rounds", type=int, default=2, help="with --concurrent: times each process is timed (2)")
    p.add_argument("--alloc-conf", default=None,
                   help="with --processes: also run them with this PYTORCH_CUDA_ALLOC_CONF, for comparison")
    p.add_argument("--recipes", action="store_true", help="the evaluator's loop against a fixed input")
    p.add_argument("--offsets", action="store_true", help="input and output at chosen distances in one buffer")
    p.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)  # a --concurrent child
    p.add_argument("--out", default=None, help="write the medians as JSON here")
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.processes > 0:
        return across_processes(args)
    import torch

    if not torch.cuda.is_available():
        print("probe_placement.py: error: needs a CUDA GPU", file=sys.stderr)
        return 2
    if args.serve:
        return serve(args)
    if args.recipes or args.offsets:
        return recipes(args) if args.recipes else offsets(args)
    op = _op(args.op)
    flush = torch.empty(256 * 2**20, dtype=torch.uint8, device="cuda")
    gen = torch.Generator(device="cuda").manual_seed(0)
    rows, kept = [], []
    for k in range(args.placements):
        pad = torch.empty((k * 37 + 1) * 2**20, dtype=torch.uint8, device="cuda")  # shifts what follows
        x = torch.randn(args.rows, args.cols, device="cuda", generator=gen)
        times, y = time_calls(op, x, flush, args.calls)
        med = statistics.median(times)
        rows.append({"placement": k, "pad_mib": k * 37 + 1, "x_ptr": x.data_ptr(), "y_ptr": y.data_ptr(),
                     "median_ms": med, "min_ms": min(times), "max_ms": max(times)})
        print(f"placement {k:2d}: pad {k * 37 + 1:5d} MiB  x {x.data_ptr():#x}  y {y.data_ptr():#x}  "
              f"median {med:.4f} ms  min {min(times):.4f}  max {max(times):.4f}")
        if args.keep:
            kept.append((pad, x, y))
        else:
            del pad, x, y
            torch.cuda.empty_cache()
    meds = [r["median_ms"] for r in rows]
    print(f"\n{args.op} {args.rows}x{args.cols} on {torch.cuda.get_device_name()}"
          f"{' (placements kept)' if args.keep else ''}: medians over {len(meds)} placements from "
          f"{min(meds):.4f} to {max(meds):.4f} ms (max/min {max(meds) / min(meds):.3f})")
    if args.out:
        with open(args.out, "w") as f:
            json.dump({"gpu": torch.cuda.get_device_name(), "op": args.op, "shape": [args.rows, args.cols],
                       "keep": args.keep, "placements": rows}, f, indent=1)
    return 0


def _op(name: str):
    import torch

    return {"gelu": torch.nn.functional.gelu, "tanh": torch.tanh, "relu": torch.relu}[name]


def time_calls(op, x, flush, calls: int):
    """The evaluator's recipe: flush L2, event-timed call, output dropped before the next call."""
    import torch

    times = []
    y = op(x)  # the output's block, reused by every call below (as in the evaluator's timing loop)
    for i in range(calls + 3):
        flush.zero_()
        e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        e0.record()
        y = None
        y = op(x)
        e1.record()
        torch.cuda.synchronize()
        if i >= 3:
            times.append(e0.elapsed_time(e1))
    return times, y


def _event_time(fn) -> float:
    import torch

    e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    e0.record()
    fn()
    e1.record()
    torch.cuda.synchronize()
    return e0.elapsed_time(e1)


def _summarise(label: str, times: list[float], floor: float) -> dict:
    slow = sum(t > 1.04 * floor for t in times) / len(times)
    med = statistics.median(times)
    print(f"{label:>28s}: n {len(times):4d}  median {med:.4f} ms  min {min(times):.4f}  "
          f"slow (> 1.04 x fastest) {slow:6.1%}")
    return {"n": len(times), "median_ms": med, "min_ms": min(times), "slow_fraction": slow}


def recipes(args: argparse.Namespace) -> int:
    """The evaluator's timing loop against the probe's, interleaved, every call's addresses recorded."""
    import torch

    op = _op(args.op)
    props = torch.cuda.get_device_properties(0)
    flush = torch.empty(max(2 * int(props.L2_cache_size), 128 * 2**20), dtype=torch.uint8, device="cuda")
    shape = (args.rows, args.cols)
    fixed_x = torch.rand(shape, device="cuda")
    calls: list[dict] = []
    state: dict = {"x": None, "y": None}

    def fixed() -> float:
        state["y"] = None
        flush.zero_()
        t = _event_time(lambda: state.__setitem__("y", op(fixed_x)))
        calls.append({"variant": "fixed", "x": fixed_x.data_ptr(), "y": state["y"].data_ptr(), "ms": t})
        return t

    def fresh(checksum: bool) -> float:
        state["x"] = state["y"] = None
        state["x"] = torch.rand(shape, device="cuda")
        flush.zero_()
        t = _event_time(lambda: state.__setitem__("y", op(state["x"])))
        if checksum:
            float(state["y"].double().sum()), float(state["y"].abs().amax())
        calls.append({"variant": "evaluator" if checksum else "fresh", "x": state["x"].data_ptr(),
                      "y": state["y"].data_ptr(), "ms": t})
        return t

    variants = {"fixed": fixed, "fresh": lambda: fresh(False), "evaluator": lambda: fresh(True)}
    per_block = max(3, int(0.025 / 0.0006))
    for _ in range(3):  # warm-up
        for fn in variants.values():
            fn()
    calls.clear()
    for r in range(args.rounds):
        for name in (list(variants) if r % 2 == 0 else list(reversed(variants))):
            for _ in range(per_block):
                variants[name]()
            state["x"] = state["y"] = None
    floor = min(c["ms"] for c in calls)
    report = {"gpu": torch.cuda.get_device_name(), "op": args.op, "shape": list(shape), "variants": {}, "pairs": {}}
    print(f"{args.op} {shape} on {torch.cuda.get_device_name()}, {args.rounds} rounds of {per_block} calls per variant")
    for name in variants:
        report["variants"][name] = _summarise(name, [c["ms"] for c in calls if c["variant"] == name], floor)
    for name in variants:
        pairs: dict[tuple[int, int], list[float]] = {}
        for c in calls:
            if c["variant"] == name:
                pairs.setdefault((c["x"], c["y"]), []).append(c["ms"])
        for (xp, yp), ts in pairs.items():
            key = f"{name} x {xp:#x} y {yp:#x} (y-x {yp - xp:+#x})"
            report["pairs"][key] = _summarise(key[-60:], ts, floor)
    report["calls"] = calls
    if args.out:
        with open(args.out, "w") as f:
            json.dump(report, f, indent=1)
    return 0


def offsets(args: argparse.Namespace) -> int:
    """Input and output in one buffer at chosen distances: does the read/write offset set the band?"""
    import torch

    out_fn = {"gelu": torch.ops.aten.gelu.out, "tanh": torch.ops.aten.tanh.out, "relu": None}[args.op]
    if out_fn is None:
        print("probe_placement.py: error: --offsets needs --op gelu or tanh", file=sys.stderr)
        return 2
    n = args.rows * args.cols
    nbytes = n * 4
    deltas = [0, 512, 4096, 65536, 2**20, 2**21, 2**21 + 4096, 3 * 2**20 + 512, 2**25 + 65536]
    buf = torch.empty(2 * nbytes + 2 * max(deltas) + 2**22, dtype=torch.uint8, device="cuda")
    flush = torch.empty(256 * 2**20, dtype=torch.uint8, device="cuda")
    views = []
    for xoff in (0, 2**20 + 512):
        for d in deltas:
            x = buf[xoff:xoff + nbytes].view(torch.float32)
            y = buf[xoff + nbytes + d:xoff + 2 * nbytes + d].view(torch.float32)
            views.append((f"x +{xoff:#x} y-x {nbytes + d:#x}", x, y))
    buf[:buf.numel() // 4 * 4].view(torch.float32).uniform_()
    times: dict[str, list[float]] = {label: [] for label, _, _ in views}
    for r in range(args.rounds * 5):
        for label, x, y in (views if r % 2 == 0 else list(reversed(views))):
            for _ in range(5):
                flush.zero_()
                times[label].append(_event_time(lambda x=x, y=y: out_fn(x, out=y)))
    floor = min(min(t) for t in times.values())
    print(f"{args.op} {args.rows}x{args.cols} on {torch.cuda.get_device_name()}: output at a distance from the input")
    report = {"gpu": torch.cuda.get_device_name(), "op": args.op,
              "offsets": {label: _summarise(label, ts, floor) for label, ts in times.items()}}
    if args.out:
        with open(args.out, "w") as f:
            json.dump(report, f, indent=1)
    return 0


def serve(args: argparse.Namespace) -> int:
    """A --concurrent child: allocate, say ready, then time on each "time" line until "exit"."""
    import torch

    op = _op(args.op)
    flush = torch.empty(256 * 2**20, dtype=torch.uint8, device="cuda")
    gen = torch.Generator(device="cuda").manual_seed(0)
    x = torch.randn(args.rows, args.cols, device="cuda", generator=gen)
    _, y = time_calls(op, x, flush, 1)
    print(json.dumps({"ready": True, "pid": os.getpid(), "x_ptr": x.data_ptr(), "y_ptr": y.data_ptr()}), flush=True)
    for line in sys.stdin:
        if line.strip() != "time":
            break
        times, y = time_calls(op, x, flush, args.calls)
        print(json.dumps({"median_ms": statistics.median(times), "min_ms": min(times), "max_ms": max(times)}),
              flush=True)
    return 0


def _child_cmd(args: argparse.Namespace, *extra: str) -> list[str]:
    return [sys.executable, __file__, "--rows", str(args.rows), "--cols", str(args.cols), "--op", args.op,
            "--calls", str(args.calls), *extra]


def _variants(args: argparse.Namespace) -> list[tuple[str, dict[str, str]]]:
    out = []
    for label, conf in [("default", os.environ.get("PYTORCH_CUDA_ALLOC_CONF"))] + (
            [(args.alloc_conf, args.alloc_conf)] if args.alloc_conf else []):
        env = dict(os.environ)
        env.pop("PYTORCH_CUDA_ALLOC_CONF", None)
        if conf:
            env["PYTORCH_CUDA_ALLOC_CONF"] = conf
        out.append((label, env))
    return out


def across_processes(args: argparse.Namespace) -> int:
    """One placement per process, sequential or all alive at once: does the band follow the process?"""
    report = {"op": args.op, "shape": [args.rows, args.cols], "concurrent": args.concurrent, "variants": {}}
    for label, env in _variants(args):
        if args.concurrent:
            rounds = _concurrent(args, env, label)
            if rounds is None:
                return 1
            report["variants"][label] = rounds
            meds = [m for r in rounds for m in r]
        else:
            meds = []
            for k in range(args.processes):
                with tempfile.NamedTemporaryFile(suffix=".json") as tmp:
                    done = subprocess.run(_child_cmd(args, "--placements", "1", "--out", tmp.name), env=env,
                                          capture_output=True, text=True, timeout=300)
                    if done.returncode != 0:
                        print(done.stdout + done.stderr, file=sys.stderr)
                        return done.returncode
                    with open(tmp.name) as f:
                        row = json.load(f)["placements"][0]
                meds.append(row["median_ms"])
                print(f"[{label}] process {k}: median {row['median_ms']:.4f} ms  min {row['min_ms']:.4f}  "
                      f"max {row['max_ms']:.4f}")
            report["variants"][label] = meds
        print(f"[{label}] {args.op} medians over {args.processes} processes"
              f"{' alive at once' if args.concurrent else ''} from {min(meds):.4f} to {max(meds):.4f} ms "
              f"(max/min {max(meds) / min(meds):.3f})\n")
    if args.out:
        with open(args.out, "w") as f:
            json.dump(report, f, indent=1)
    return 0


def _concurrent(args: argparse.Namespace, env: dict[str, str], label: str) -> list[list[float]] | None:
    """Medians per round per process, all processes holding their memory throughout."""
    procs = [subprocess.Popen(_child_cmd(args, "--serve"), env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                              text=True) for _ in range(args.processes)]
    try:
        for k, p in enumerate(procs):
            line = p.stdout.readline()
            if not line:
                print(f"[{label}] process {k} died before it was ready (exit {p.wait()})", file=sys.stderr)
                return None
            info = json.loads(line)
            print(f"[{label}] process {k} (pid {info['pid']}): x {info['x_ptr']:#x}  y {info['y_ptr']:#x}")
        rounds = []
        for r in range(args.rounds):
            meds = []
            for k, p in enumerate(procs):
                p.stdin.write("time\n")
                p.stdin.flush()
                row = json.loads(p.stdout.readline())
                meds.append(row["median_ms"])
                print(f"[{label}] round {r} process {k}: median {row['median_ms']:.4f} ms  "
                      f"min {row['min_ms']:.4f}  max {row['max_ms']:.4f}")
            rounds.append(meds)
        return rounds
    finally:
        for p in procs:
            try:
                p.stdin.write("exit\n")
                p.stdin.close()
            except OSError:
                pass
        for p in procs:
            try:
                p.wait(timeout=30)
            except subprocess.TimeoutExpired:
                p.kill()


if __name__ == "__main__":
    sys.exit(main())
