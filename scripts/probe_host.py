"""Is a launch-heavy reference's time set by the host core it runs on, or by the GPU?

    python scripts/probe_host.py --level 3 --problem-id 5 --out probe_host.json

Identical cuDNN LSTM and GRU references timed 4.0 ms in one worker and 5.5 ms in the other for
stretches of hundreds of milliseconds on an H100, so their identity speedups missed [0.97, 1.03]. The
bands belonged to a process and a stretch of time, not to the machine (pairing each round's two blocks
did not cancel them). This probe times the problem's reference with the evaluator's recipe (fresh
inputs made on the GPU, L2 flushed, the launch cushion before the start event, CUDA events) and records,
per call, the GPU time, the host time to enqueue the forward, and the CPU the thread ran on:

* ``trace``: calls with the thread free to move; do the bands follow the CPU?
* ``percpu``: the thread pinned to each allowed CPU in turn, twice over; are some CPUs slower?
* ``siblings``: pinned to one CPU, alone, with a busy process on its SMT sibling, on another core, and
  on the same CPU; does a neighbour's load move the time?

It also prints the CPU topology and the GPU's NUMA node, from /sys.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

import _checkout  # noqa: F401  (this checkout first on the path)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="probe_host.py", description=__doc__.strip().splitlines()[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter,
                                epilog="\n".join(__doc__.strip().splitlines()[1:]))
    p.add_argument("--level", type=int, default=3)
    p.add_argument("--problem-id", type=int, default=5)
    p.add_argument("--trace-calls", type=int, default=400)
    p.add_argument("--percpu-calls", type=int, default=12)
    p.add_argument("--sibling-calls", type=int, default=20)
    p.add_argument("--out", default=None, help="write everything as JSON here")
    return p.parse_args(argv)


def _read(path: str) -> str | None:
    try:
        return Path(path).read_text().strip()
    except OSError:
        return None


def topology(cpus: list[int]) -> dict:
    rows = {}
    for c in cpus:
        base = f"/sys/devices/system/cpu/cpu{c}"
        node = next((p.name[4:] for p in Path(base).glob("node*")), None)
        rows[c] = {"core_id": _read(f"{base}/topology/core_id"), "package": _read(f"{base}/topology/physical_package_id"),
                   "siblings": _read(f"{base}/topology/thread_siblings_list"), "node": node,
                   "cur_khz": _read(f"{base}/cpufreq/scaling_cur_freq"), "governor": _read(f"{base}/cpufreq/scaling_governor")}
    return rows


def siblings_of(cpu: int) -> list[int]:
    text = _read(f"/sys/devices/system/cpu/cpu{cpu}/topology/thread_siblings_list") or str(cpu)
    out: list[int] = []
    for part in text.split(","):
        a, _, b = part.partition("-")
        out.extend(range(int(a), int(b or a) + 1))
    return out


def current_cpu() -> int:
    fields = Path("/proc/thread-self/stat").read_text().rsplit(")", 1)[1].split()
    return int(fields[36])  # field 39 of stat, counted after the command name


class Timer:
    """The evaluator's per-call recipe, outside the evaluator, so the host can be varied around it."""

    def __init__(self, problem) -> None:
        import torch

        from kernelbench.evaluation.timing import LAUNCH_CUSHION_US, cushion_cycles

        self.torch = torch
        ns: dict = {}
        exec(compile(problem.code, problem.name, "exec"), ns)
        torch.manual_seed(0)
        with torch.device("cuda"):
            self.model = ns["Model"](*ns["get_init_inputs"]()).cuda().eval()
        self.get_inputs = ns["get_inputs"]
        l2 = int(getattr(torch.cuda.get_device_properties(0), "L2_cache_size", 0) or 64 << 20)
        self.flush = torch.empty(max(2 * l2, 128 << 20), dtype=torch.uint8, device="cuda")
        e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        torch.cuda._sleep(1_000_000)
        e0.record()
        torch.cuda._sleep(1_000_000)
        e1.record()
        e1.synchronize()
        self.cycles = cushion_cycles(LAUNCH_CUSHION_US, 1_000_000, e0.elapsed_time(e1))

    def call(self, seed: int) -> dict:
        torch = self.torch
        torch.manual_seed(seed)
        with torch.device("cuda"):
            x = [t.cuda() if isinstance(t, torch.Tensor) else t for t in self.get_inputs()]
        self.flush.zero_()
        e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        cpu0 = current_cpu()
        with torch.no_grad():
            torch.cuda._sleep(self.cycles)
            e0.record()
            h0 = time.perf_counter()
            out = self.model(*x)
            h1 = time.perf_counter()
            e1.record()
        torch.cuda.synchronize()
        return {"gpu_ms": e0.elapsed_time(e1), "host_ms": (h1 - h0) * 1e3, "cpu": cpu0, "cpu_after": current_cpu(),
                "out_ptr": out.data_ptr() % (1 << 32)}

    def many(self, n: int, seed0: int = 0) -> list[dict]:
        return [self.call(seed0 + i) for i in range(n)]


def med(rows: list[dict], key: str = "gpu_ms") -> float:
    return statistics.median(r[key] for r in rows) if rows else float("nan")


def busy(cpu: int) -> subprocess.Popen:
    code = f"import os\nos.sched_setaffinity(0, {{{cpu}}})\nwhile True: pass\n"
    return subprocess.Popen([sys.executable, "-c", code])


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    import torch

    if not torch.cuda.is_available():
        print("probe_host.py: error: needs a CUDA GPU", file=sys.stderr)
        return 2
    from kernelbench.problems.sources import load_builtin

    problem = load_builtin([args.level]).get(args.level, args.problem_id)
    cpus = sorted(os.sched_getaffinity(0))
    props = torch.cuda.get_device_properties(0)
    bus = f"{getattr(props, 'pci_domain_id', 0):04x}:{getattr(props, 'pci_bus_id', 0):02x}:" \
          f"{getattr(props, 'pci_device_id', 0):02x}.0"
    report: dict = {"problem": problem.name, "gpu": torch.cuda.get_device_name(0), "cpus": cpus,
                    "gpu_pci": bus, "gpu_numa_node": _read(f"/sys/bus/pci/devices/{bus}/numa_node"),
                    "gpu_local_cpus": _read(f"/sys/bus/pci/devices/{bus}/local_cpulist"),
                    "topology": topology(cpus), "loadavg": _read("/proc/loadavg")}
    print(json.dumps({k: v for k, v in report.items() if k != "topology"}))
    for c, row in report["topology"].items():
        print(f"cpu{c}: {row}")
    t = Timer(problem)
    t.many(30)

    trace = t.many(args.trace_calls, 1000)
    report["trace"] = trace
    by_cpu: dict[int, list[dict]] = {}
    for r in trace:
        by_cpu.setdefault(r["cpu"], []).append(r)
    moved = sum(r["cpu"] != r["cpu_after"] for r in trace)
    print(f"\ntrace, free to move: {len(trace)} calls, median {med(trace):.3f} ms GPU, {med(trace, 'host_ms'):.3f} ms "
          f"host enqueue; {moved} calls changed CPU mid-call; lowest/highest decile "
          f"{sorted(r['gpu_ms'] for r in trace)[len(trace) // 10]:.3f}/{sorted(r['gpu_ms'] for r in trace)[-len(trace) // 10]:.3f}")
    for c, rows in sorted(by_cpu.items()):
        print(f"  cpu{c:>3}: {len(rows):>4} calls, GPU median {med(rows):.3f} ms, host median {med(rows, 'host_ms'):.3f} ms")
    print("  sequence (GPU ms / cpu):", " ".join(f"{r['gpu_ms']:.2f}/{r['cpu']}" for r in trace[:120]))

    percpu: dict[str, list[float]] = {}
    for _ in range(2):
        for c in cpus:
            os.sched_setaffinity(0, {c})
            rows = t.many(args.percpu_calls, 5000 + 100 * c)
            percpu.setdefault(str(c), []).append(med(rows))
            percpu.setdefault(f"{c}-host", []).append(med(rows, "host_ms"))
    os.sched_setaffinity(0, set(cpus))
    report["percpu"] = percpu
    print("\npinned to each CPU (median GPU ms, two passes; host enqueue ms):")
    for c in cpus:
        print(f"  cpu{c:>3}: {percpu[str(c)][0]:.3f} {percpu[str(c)][1]:.3f}   host {percpu[f'{c}-host'][0]:.3f} "
              f"{percpu[f'{c}-host'][1]:.3f}")

    home = cpus[-1]
    sib = [s for s in siblings_of(home) if s != home and s in cpus]
    other = next(c for c in cpus if c != home and c not in siblings_of(home))
    arrangements = [("alone", None), ("same cpu busy", home), ("other core busy", other)]
    if sib:
        arrangements.insert(1, ("sibling busy", sib[0]))
    os.sched_setaffinity(0, {home})
    sibling_rows: dict[str, list[float]] = {}
    for rep in range(3):
        for name, load in arrangements:
            p = busy(load) if load is not None else None
            time.sleep(0.05)
            try:
                rows = t.many(args.sibling_calls, 9000 + rep)
            finally:
                if p is not None:
                    p.kill()
                    p.wait()
            sibling_rows.setdefault(name, []).append(med(rows))
            sibling_rows.setdefault(name + " host", []).append(med(rows, "host_ms"))
    os.sched_setaffinity(0, set(cpus))
    report["neighbours"] = {"cpu": home, "sibling": sib, "other": other, "medians": sibling_rows}
    print(f"\npinned to cpu{home} (siblings {sib}), median GPU ms over 3 rounds (host enqueue ms):")
    for name, _ in arrangements:
        print(f"  {name:>16}: " + " ".join(f"{x:.3f}" for x in sibling_rows[name])
              + "   host " + " ".join(f"{x:.3f}" for x in sibling_rows[name + ' host']))
    if args.out:
        Path(args.out).write_text(json.dumps(report, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
