"""Measure ``kernelbench demo``: wall time and peak memory, child processes included.

Runs the demo as a subprocess (``--repeat`` times) and, while it runs, samples /proc every 50 ms for
the summed resident memory of the whole process tree (the CLI plus its reference and candidate
workers), since the workers are where the memory goes. Also reports the largest single process
(getrusage RUSAGE_CHILDREN max RSS). Prints a small table; ``--json PATH`` writes the numbers.

    python scripts/bench_demo.py [--repeat 3] [--device cpu|cuda:0] [--json bench.json]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import statistics
import subprocess
import sys
import threading
import time
from datetime import datetime, timezone


def _children(pid: int) -> list[int]:
    kids: list[int] = []
    try:
        for tid in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{tid}/children") as f:
                kids.extend(int(x) for x in f.read().split())
    except OSError:
        pass
    return kids


def _tree_rss_bytes(root: int) -> int:
    """Summed RSS of ``root`` and all its descendants (processes that vanish mid-walk count 0)."""
    total, stack, seen = 0, [root], set()
    page = os.sysconf("SC_PAGE_SIZE")
    while stack:
        pid = stack.pop()
        if pid in seen:
            continue
        seen.add(pid)
        try:
            with open(f"/proc/{pid}/statm") as f:
                total += int(f.read().split()[1]) * page
        except (OSError, IndexError, ValueError):
            continue
        stack.extend(_children(pid))
    return total


def run_once(cmd: list[str]) -> dict:
    """One demo run: wall seconds, peak summed tree RSS, exit code."""
    started = time.monotonic()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    peak = 0
    done = threading.Event()

    def sample() -> None:
        nonlocal peak
        while not done.is_set():
            peak = max(peak, _tree_rss_bytes(proc.pid))
            done.wait(0.05)

    t = threading.Thread(target=sample, daemon=True)
    t.start()
    out, _ = proc.communicate()
    wall = time.monotonic() - started
    done.set()
    t.join()
    return {"wall_s": wall, "peak_tree_rss_mb": peak / 2**20, "returncode": proc.returncode, "output": out}


def main(argv: list[str] | None = None) -> int:
    from kernelbench.cli.common import add_json_arg, stdout_for_json

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=3, help="runs to measure (default 3)")
    ap.add_argument("--device", default=None, help="passed to kernelbench demo (default: GPU if any, else cpu)")
    add_json_arg(ap, "the measurements")
    args = ap.parse_args(argv)
    if args.repeat < 1:
        ap.error("--repeat must be at least 1")
    with stdout_for_json(args):
        return _bench(args)


def _bench(args: argparse.Namespace) -> int:
    from kernelbench.cli.common import write_json

    cmd = [sys.executable, "-m", "kernelbench.cli.main", "demo"]
    if args.device:
        cmd += ["--device", args.device]
    runs = []
    for i in range(args.repeat):
        r = run_once(cmd)
        print(f"run {i + 1}/{args.repeat}: {r['wall_s']:.1f} s, peak {r['peak_tree_rss_mb']:.0f} MB, "
              f"exit {r['returncode']}", file=sys.stderr, flush=True)
        if r["returncode"] != 0:
            print(r["output"], file=sys.stderr)
        runs.append(r)
    max_single_mb = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024  # KiB on Linux
    walls = [r["wall_s"] for r in runs]
    peaks = [r["peak_tree_rss_mb"] for r in runs]
    rows = [
        ("wall time, median (s)", f"{statistics.median(walls):.1f}"),
        ("wall time, min-max (s)", f"{min(walls):.1f}-{max(walls):.1f}"),
        ("peak memory, process tree summed (MB)", f"{max(peaks):.0f}"),
        ("peak memory, largest single process (MB)", f"{max_single_mb:.0f}"),
        ("all verdicts as expected", "yes" if all(r["returncode"] == 0 for r in runs) else "NO"),
    ]
    width = max(len(k) for k, _ in rows)
    for k, v in rows:
        print(f"{k:<{width}}  {v}")
    if args.json:
        info = {
            "date": datetime.now(timezone.utc).isoformat(timespec="seconds"),
            "host": platform.node(), "cpus": os.cpu_count(), "python": platform.python_version(),
            "device": args.device or "auto", "repeat": args.repeat,
            "wall_s": walls, "peak_tree_rss_mb": peaks, "max_single_process_rss_mb": max_single_mb,
            "all_expected": all(r["returncode"] == 0 for r in runs),
        }
        write_json(args, json.dumps(info, indent=1))
    return 0 if all(r["returncode"] == 0 for r in runs) else 1


if __name__ == "__main__":
    sys.exit(main())
