"""Does a worker's Init (CUDA context, library warm-up) or exit in another process disturb a timing? (issue 25)

The evaluator never lets a spare create its CUDA context while a job is timed (``DeviceSession.quiesce``), and on the
official problems jobs wait 0.7-0.9 s each for those Inits (session 21: a job's wait for a candidate worker and its
wait for spares' Inits are never both non-zero). Whether the rule buys precision was never measured. This probe
times four workloads the way a worker does (fresh L2, the launch cushion, CUDA events) on a core of their own,
in phases that alternate quiet with a storm: other processes, on other cores, doing what a spare's Init does (the
context and the library warm-up) and exiting, back to back, with torch already imported (``full``), or creating
the context only (``context``). It prints each workload's median, mean and 90th percentile per phase kind, and
the Init's own pieces, as measured inside the storm's processes.

    python3 scripts/probe_init_interference.py --device cuda:0 --json out.json
"""

from __future__ import annotations

import argparse
import json
import os
import queue
import statistics
import subprocess
import sys
import threading
import time

#: What a storm process runs once told to go: a spare's Init (worker/process.py: cmd_init and _warm_pieces), then
#: its exit. It prints the seconds of each piece as one JSON line.
STORM_CODE = r"""
import json, sys, time
t0 = time.perf_counter()
import torch
t_import = time.perf_counter() - t0
sys.stdout.write("ready\n"); sys.stdout.flush()
sys.stdin.readline()
mode = sys.argv[1]
dev = torch.device(sys.argv[2])
t = {"import": t_import}
def step(name, fn):
    t0 = time.perf_counter()
    fn()
    torch.cuda.synchronize()
    t[name] = time.perf_counter() - t0
step("context", lambda: (torch.cuda.set_device(dev), torch.cuda.init(), torch.empty(1, device=dev).add_(1)))
a = torch.randn(64, 64, device=dev)
if mode in ("evaluator", "full"):  # the evaluator's own kernels: inputs, comparisons, the fingerprint, the spin
    def evaluator():
        torch.rand(64, device=dev); torch.randint(0, 8, (64,), device=dev)
        b = a.clone()
        torch.isclose(a, b).all().item(); (a - b).abs().max().item(); a.double().sum().item()
        (a.reshape(-1).double() * b.reshape(-1).double()).sum().item(); torch.cuda._sleep(1000)
    step("evaluator", evaluator)
if mode in ("libraries", "full"):  # cuBLAS and cuDNN: their handles and first calls
    step("cublas", lambda: a @ a)
    step("cudnn", lambda: torch.nn.functional.conv2d(a.view(1, 1, 64, 64), a[:3, :3].reshape(1, 1, 3, 3)))
step("empty_cache", torch.cuda.empty_cache)
sys.stdout.write(json.dumps(t) + "\n"); sys.stdout.flush()
"""
#: The storm's kinds: what each of its processes does once told to go, before it exits.
MODES = ("context", "evaluator", "libraries", "full")
#: Processes kept started (torch imported) per kind, so that Inits follow each other back to back.
READY_PER_MODE = 3


class Storm:
    """``threads`` loops letting started processes (torch imported) Init and exit back to back while on; a starter
    thread keeps :data:`READY_PER_MODE` started per kind."""

    def __init__(self, device: str, threads: int, cores: list[int]):
        self.device, self.cores = device, cores
        self.mode: str | None = None
        self.lock = threading.Lock()
        self.busy = 0
        self.records: list[dict] = []
        self.stop = False
        self.ready: dict[str, queue.Queue] = {m: queue.Queue() for m in MODES}
        threading.Thread(target=self._starter, daemon=True).start()
        for _ in range(threads):
            threading.Thread(target=self._loop, daemon=True).start()

    def _start(self, mode: str) -> subprocess.Popen:
        p = subprocess.Popen([sys.executable, "-c", STORM_CODE, mode, self.device], stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, text=True)
        if self.cores:
            os.sched_setaffinity(p.pid, self.cores)
        assert p.stdout.readline().strip() == "ready"
        return p

    def _starter(self) -> None:
        while not self.stop:
            short = [m for m in MODES if self.ready[m].qsize() < READY_PER_MODE]
            if not short:
                time.sleep(0.05)
                continue
            mode = min(short, key=lambda m: (m != self.mode, self.ready[m].qsize()))
            self.ready[mode].put(self._start(mode))

    def _loop(self) -> None:
        while not self.stop:
            with self.lock:
                mode = self.mode
                if mode is not None:
                    self.busy += 1
            if mode is None:
                time.sleep(0.005)
                continue
            try:
                try:
                    p = self.ready[mode].get(timeout=0.5)
                except queue.Empty:
                    continue
                p.stdin.write("go\n")
                p.stdin.flush()
                line = p.stdout.readline()
                t0 = time.perf_counter()
                p.wait()
                rec = json.loads(line) if line.strip() else {}
                rec["exit"] = time.perf_counter() - t0
                rec["mode"] = mode
                self.records.append(rec)
            finally:
                with self.lock:
                    self.busy -= 1

    def set(self, mode: str | None) -> None:
        with self.lock:
            self.mode = mode
        if mode is None:  # quiet means no Init or exit under way
            while True:
                with self.lock:
                    if self.busy == 0:
                        return
                time.sleep(0.002)

    def close(self) -> None:
        self.set(None)
        self.stop = True
        for q in self.ready.values():
            while not q.empty():
                q.get().kill()


def workloads(torch, dev):
    x_small = torch.zeros(4096, device=dev)
    x_big = torch.randn(64 * 1024 * 1024, device=dev)
    a = torch.randn(4096, 4096, device=dev)
    img = torch.randn(32, 64, 128, 128, device=dev)
    w = torch.randn(64, 64, 3, 3, device=dev)
    return {
        "tiny_add_4k": lambda: x_small.add_(1),
        "relu_64M": lambda: torch.relu(x_big),
        "matmul_4096": lambda: a @ a,
        "conv_32x64x128": lambda: torch.nn.functional.conv2d(img, w, padding=1),
    }


def first_uses(torch, dev) -> dict[str, list[float]]:
    """Seconds of the first and the second use of the evaluator's between-call work in a process warmed as a worker's
    Init warms it: the first timed block of each side took 45 ms more than the next ones on every problem."""
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
    from kernelbench.evaluation import compare, transport

    a = torch.randn(64, 64, device=dev)
    torch.rand(64, device=dev)
    torch.randint(0, 8, (64,), device=dev)
    b = a @ a
    torch.nn.functional.conv2d(a.view(1, 1, 64, 64), a[:3, :3].reshape(1, 1, 3, 3))
    tree, leaves = transport.flatten(b.clone())
    compare.compare_outputs(tree, leaves, b, 1e-4, 1e-4)
    compare.tensors_equal(a, a.clone())
    torch.cuda.synchronize()
    fp = compare.Fingerprinter()
    out = torch.randn(1 << 20, device=dev)
    fp.prepare([out])
    flush = torch.empty(128 << 20, dtype=torch.uint8, device=dev)
    res: dict[str, list[float]] = {}
    steps = {
        "fingerprint": lambda k: fp.measure([out], (1e-4, 1e-4), key=k),
        "l2_flush": lambda k: flush.zero_(),
        "sleep": lambda k: torch.cuda._sleep(1000),
        "events": lambda k: torch.cuda.Event(enable_timing=True).record(),
    }
    for name, fn in steps.items():
        res[name] = []
        for k in (11, 12):
            t0 = time.perf_counter()
            fn(k)
            torch.cuda.synchronize()
            res[name].append(time.perf_counter() - t0)
    return res


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--device", default="cuda:0")
    p.add_argument("--phase-s", type=float, default=3.0, help="seconds per phase")
    p.add_argument("--cycles", type=int, default=2, help="cycles of a quiet phase before each storm kind")
    p.add_argument("--storm", type=int, default=3, help="processes doing Inits at once")
    p.add_argument("--modes", nargs="+", default=list(MODES), choices=MODES)
    p.add_argument("--cushion-us", type=int, default=200)
    p.add_argument("--json", default=None)
    a = p.parse_args()

    import torch

    dev = torch.device(a.device)
    torch.cuda.set_device(dev)
    cpus = sorted(os.sched_getaffinity(0))
    timer_core, others = cpus[0], cpus[1:]
    os.sched_setaffinity(0, [timer_core])
    storm = Storm(a.device, a.storm, others)

    first = first_uses(torch, dev)
    fns = workloads(torch, dev)
    flush = torch.empty(256 * 1024 * 1024, dtype=torch.uint8, device=dev)
    stream = torch.cuda.current_stream(dev)
    # the launch cushion, calibrated as the worker does (worker/timing.py)
    cycles = 200_000
    for _ in range(2):
        e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        e0.record(stream)
        torch.cuda._sleep(cycles)
        e1.record(stream)
        e1.synchronize()
        ms = e0.elapsed_time(e1)
    cushion = max(1, round(cycles * (a.cushion_us / 1000.0) / ms))

    def timed(fn) -> float:
        flush.zero_()
        torch.cuda._sleep(cushion)
        e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        e0.record(stream)
        fn()
        e1.record(stream)
        e1.synchronize()
        return e0.elapsed_time(e1)

    for fn in fns.values():  # warm-up
        for _ in range(20):
            timed(fn)
    kinds = ["quiet", *a.modes]
    samples: dict[str, dict[str, list[float]]] = {k: {n: [] for n in fns} for k in kinds}
    time.sleep(8)  # the storm's first processes started (torch imported) before any phase
    plan = [k for _ in range(a.cycles) for m in a.modes for k in ("quiet", m)]
    for kind in plan:
        storm.set(None if kind == "quiet" else kind)
        if kind != "quiet":
            time.sleep(0.3)  # the storm under way before the first sample
        t_end = time.monotonic() + a.phase_s
        while time.monotonic() < t_end:
            for name, fn in fns.items():
                samples[kind][name].append(timed(fn))
        print(f"phase {kind}: {len(storm.records)} Inits so far", flush=True)
    storm.close()

    out = {"device": torch.cuda.get_device_name(dev), "phase_s": a.phase_s, "cycles": a.cycles,
           "storm_processes": a.storm, "workloads": {}, "inits": {}, "first_uses": first}
    print("first and second use after a worker's Init warm-up (s): " +
          ", ".join(f"{k} {v[0]:.4f} / {v[1]:.4f}" for k, v in first.items()))
    print(f"\n{out['device']}: {a.cycles} cycles of {a.phase_s:g} s phases, {a.storm} storm processes")
    print(f"{'workload':18} {'phase':9} {'n':>5} {'median ms':>10} {'vs quiet':>9} {'mean ms':>9} {'vs quiet':>9} "
          f"{'p90 ms':>9} {'max ms':>9} {'>+5%':>6}")
    for name in fns:
        q = samples["quiet"][name]
        qm, qa = statistics.median(q), statistics.fmean(q)
        out["workloads"][name] = {}
        for kind in kinds:
            s = sorted(samples[kind][name])
            if not s:
                continue
            med, mean, p90 = statistics.median(s), statistics.fmean(s), s[int(0.9 * (len(s) - 1))]
            slow = sum(x > 1.05 * qm for x in s) / len(s)
            out["workloads"][name][kind] = {"n": len(s), "median_ms": med, "mean_ms": mean, "p90_ms": p90,
                                            "max_ms": s[-1], "share_over_5pct": slow, "samples_ms": s}
            print(f"{name:18} {kind:9} {len(s):5d} {med:10.4f} {med / qm - 1:+9.2%} {mean:9.4f} {mean / qa - 1:+9.2%} "
                  f"{p90:9.4f} {s[-1]:9.4f} {slow:6.1%}")
    for mode in a.modes:
        recs = [r for r in storm.records if r.get("mode") == mode]
        if recs:
            keys = [k for k in recs[0] if k != "mode"]
            out["inits"][mode] = {"count": len(recs), **{k: statistics.fmean(r.get(k, 0.0) for r in recs) for k in keys}}
            print(f"Init '{mode}' ({len(recs)}): " + ", ".join(f"{k} {out['inits'][mode][k]:.3f} s" for k in keys))
    if a.json:
        with open(a.json, "w") as f:
            json.dump(out, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
