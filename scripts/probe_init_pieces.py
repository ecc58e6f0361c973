#!/usr/bin/env python3
"""Where a fresh worker's Init goes, piece by piece, in wall and CPU seconds, alone and several at once (issue 25).

    python scripts/probe_init_pieces.py --json init_pieces.json

Each sweep job needs two fresh CUDA processes (its candidate's worker and its problem's reference), and each one's
Init (CUDA context, then the libraries' first use) must run while nothing is timed. This probe starts fresh Python
processes that do what a worker's Init does, one piece at a time, and reports for each piece its wall and CPU seconds:
a piece whose CPU time is near its wall time is the host's work (loading libraries), which could move to the process's
start, before its CUDA context exists; the rest waits on the driver or the GPU. Variants:

* ``plain``: the pieces in the worker's order (context, random-number kernels, cuBLAS, cuDNN);
* ``preloaded``: the cuDNN and cuBLAS shared libraries loaded first, before the context (``dlopen``, no GPU);
* ``concurrent-N``: N processes doing ``plain`` at once (how spares' Inits slow each other down).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import textwrap

CHILD = textwrap.dedent('''
    import json, os, sys, time, resource
    def cpu():
        r = resource.getrusage(resource.RUSAGE_SELF)
        return r.ru_utime + r.ru_stime
    out = {}
    def piece(name, fn):
        w0, c0 = time.perf_counter(), cpu()
        fn()
        out[name] = [round(time.perf_counter() - w0, 4), round(cpu() - c0, 4)]
    piece("import torch", lambda: __import__("torch"))
    import torch
    def preload():
        import ctypes, glob
        for pkg in ("cudnn", "cublas"):
            for d in sys.path:
                for lib in sorted(glob.glob(os.path.join(d, "nvidia", pkg, "lib", "lib*.so*"))):
                    try:
                        ctypes.CDLL(lib, mode=ctypes.RTLD_GLOBAL)
                    except OSError:
                        pass
    if os.environ.get("PROBE_PRELOAD") == "1":
        piece("dlopen cuDNN, cuBLAS (no context)", preload)
    if os.environ.get("PROBE_WAIT"):
        while not os.path.exists(os.environ["PROBE_WAIT"]):
            time.sleep(0.001)
    t_all = time.perf_counter()
    def context():
        torch.cuda.set_device(0)
        torch.cuda.init()
        torch.empty(1, device="cuda").add_(1)
        torch.cuda.synchronize()
    piece("context", context)
    a = None
    def rng():
        global a
        a = torch.randn(64, 64, device="cuda")
        torch.rand(64, device="cuda")
        torch.randint(0, 8, (64,), device="cuda")
        torch.cuda.synchronize()
    piece("random-number kernels", rng)
    piece("cuBLAS first matmul", lambda: ((a @ a), torch.cuda.synchronize()))
    piece("cuDNN first conv", lambda: (torch.nn.functional.conv2d(a.view(1, 1, 64, 64), a[:3, :3].reshape(1, 1, 3, 3)),
                                       torch.cuda.synchronize()))
    out["Init total (wall)"] = [round(time.perf_counter() - t_all, 4), None]
    print("PROBE " + json.dumps(out), flush=True)
''')


def run(variant: str, n: int = 1) -> list[dict]:
    env = dict(os.environ)
    if variant == "preloaded":
        env["PROBE_PRELOAD"] = "1"
    go = f"/tmp/probe-init-go-{os.getpid()}"
    if os.path.exists(go):
        os.unlink(go)
    if n > 1:
        env["PROBE_WAIT"] = go
    procs = [subprocess.Popen([sys.executable, "-c", CHILD], env=env, stdout=subprocess.PIPE, text=True)
             for _ in range(n)]
    if n > 1:
        import time

        time.sleep(12)  # every child has imported torch and waits
        open(go, "w").close()
    rows = []
    for p in procs:
        text, _ = p.communicate(timeout=300)
        for line in text.splitlines():
            if line.startswith("PROBE "):
                rows.append(json.loads(line[6:]))
    if os.path.exists(go):
        os.unlink(go)
    return rows


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--concurrent", type=int, nargs="*", default=[2, 4, 6])
    ap.add_argument("--json")
    args = ap.parse_args()
    result: dict[str, list[dict]] = {}
    for variant in ("plain", "preloaded"):
        result[variant] = [r for _ in range(args.repeats) for r in run(variant)]
    for n in args.concurrent:
        result[f"concurrent-{n}"] = run("plain", n)
    for name, rows in result.items():
        print(f"== {name}: {len(rows)} processes; median wall s / CPU s per piece")
        for piece in rows[0] if rows else []:
            walls = [r[piece][0] for r in rows if piece in r]
            cpus = [r[piece][1] for r in rows if piece in r and r[piece][1] is not None]
            cpu = f"{statistics.median(cpus):.3f}" if cpus else "-"
            print(f"   {piece:<36} {statistics.median(walls):7.3f} {cpu:>7}   (max wall {max(walls):.3f})")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
