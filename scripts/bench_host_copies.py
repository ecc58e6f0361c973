"""What a sandboxed candidate's outputs cost to reach the reference: the host-copy transport, one trial at a time.

A sandboxed candidate cannot share GPU memory with the reference (docs/threat-model.md), so each correctness trial
copies its outputs (and inputs) into its page-locked arena file in /dev/shm, and the reference copies them back to
the GPU. This script does both halves in one process with the library's own code, for tensors of the given sizes:

- ``export``: the candidate's half (``encode_tensors(host_copy=True)`` appends each CUDA tensor to the
  page-locked arena: one copy from the device);
- ``read, mapped per trial``: the reference's half as it was until session 14 (a fresh mapping of the file for
  every trial, copied to the GPU as pageable memory; then a private mapping, here a shared read-only one);
- ``read into own memory``: the bytes read (``preadv``) into the reference's memory, then copied to the GPU: what the
  reference does where the driver will not page-lock the mapping;
- ``read, kept mapping``: the mapping kept across trials, not page-locked;
- ``read, kept + page-locked``: what the reference does on a GPU now (one DMA from the file's pages; on a CPU, or
  where page-locking fails, this mode is skipped).

    python scripts/bench_host_copies.py --gib 0.5 2 --trials 5 [--json out.json]
    python scripts/bench_host_copies.py --device cpu --gib 0.25          # plumbing, on a machine without a GPU

Prints milliseconds per trial and GB/s for each; every read is checked against what was exported.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch  # noqa: E402

from kernelbench.evaluation import transport  # noqa: E402

MODES = ("export", "read, mapped per trial", "read into own memory", "read, kept mapping", "read, kept + page-locked")


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _read(mode: str, spec: dict, offset: int, nbytes: int, device: torch.device) -> torch.Tensor | None:
    fd = os.open(spec["path"], os.O_RDONLY | os.O_CLOEXEC)
    try:
        if mode == "read into own memory":
            return transport._pread(fd, offset, nbytes).to(device)
        pin = mode == "read, kept + page-locked"
        mapping = transport.kept_mapping(fd, os.fstat(fd), spec["path"], offset + nbytes, device, pin=pin)
        if mapping is None:
            return None
        out = mapping.read(offset, nbytes, device)
        if mode == "read, mapped per trial":
            transport.release_host_copy_mapping()
        return out
    finally:
        os.close(fd)


def measure(gib: float, trials: int, device: torch.device, shm: Path) -> dict:
    numel = int(gib * (1 << 30)) // 4
    x = torch.randn(numel, device=device)
    expect = x.view(torch.uint8)
    spec = {"path": str(shm / transport.HOST_ARENA), "uid": os.getuid()}
    ms: dict[str, list[float]] = {m: [] for m in MODES}
    pinned = None
    for mode in MODES[1:]:
        transport.release_host_copy_mapping()
        for _ in range(trials + 1):  # the first trial of each mode maps (and page-locks) the file: reported apart
            transport.begin_host_copies()
            _sync(device)
            t0 = time.perf_counter()
            offset = transport._host_arena().append(x)  # what encode_tensors(host_copy=True) does per CUDA tensor
            _sync(device)
            ms["export"].append((time.perf_counter() - t0) * 1e3)
            t1 = time.perf_counter()
            got = _read(mode, spec, offset, expect.numel(), device)
            _sync(device)
            if got is None:  # cannot be page-locked here: reported as skipped
                break
            ms[mode].append((time.perf_counter() - t1) * 1e3)
            if not torch.equal(got, expect):
                raise SystemExit(f"bench_host_copies: {mode}: the bytes read differ from those exported")
            del got
        if mode == "read, kept + page-locked":
            pinned = bool(transport._reading is not None and transport._reading.pinned)
    transport.release_host_copy_mapping()
    gb = expect.numel() / 1e9
    row = {"gib": gib, "bytes": expect.numel(), "device": str(device), "reader_page_locked": pinned,
           "arena_page_locked": bool(transport._arena is not None and transport._arena._pinned)}
    for mode, values in ms.items():
        if not values:
            row[mode] = None
            continue
        first, rest = values[0], values[1:]
        med = statistics.median(rest)
        row[mode] = {"first_ms": round(first, 2), "median_ms": round(med, 2), "gb_per_s": round(gb / (med / 1e3), 2)}
    return row


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--gib", type=float, nargs="+", default=[0.5, 2.0], help="tensor sizes in GiB (0.5 2)")
    ap.add_argument("--trials", type=int, default=5, help="timed trials per mode after the first (5)")
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu", help="cuda or cpu")
    ap.add_argument("--json", metavar="PATH", help="write the rows here")
    args = ap.parse_args(argv)
    if args.trials < 1 or any(g <= 0 for g in args.gib):
        ap.error("--trials and every --gib must be positive")
    device = torch.device(args.device)
    if device.type == "cuda" and not torch.cuda.is_available():
        ap.error("--device cuda needs a GPU")
    base = "/dev/shm" if os.path.isdir("/dev/shm") else None  # where a sandboxed candidate's arena lives (tmpfs)
    shm = Path(tempfile.mkdtemp(prefix="kb-bench-host-copies-", dir=base))
    transport.HOST_COPY_DIR, transport._arena = str(shm), None
    rows = []
    try:
        for gib in args.gib:
            row = measure(gib, args.trials, device, shm)
            rows.append(row)
            print(f"{gib:g} GiB on {device} (arena page-locked: {row['arena_page_locked']}, reader page-locked: "
                  f"{row['reader_page_locked']})")
            for mode in MODES:
                r = row[mode]
                if r is None:
                    print(f"  {mode:26} (cannot page-lock here)")
                    continue
                print(f"  {mode:26} {r['median_ms']:9.2f} ms per trial ({r['gb_per_s']:6.2f} GB/s); "
                      f"first {r['first_ms']:.2f} ms")
    finally:
        if transport._arena is not None:
            transport._arena.close()
        shutil.rmtree(shm, ignore_errors=True)
    if args.json:
        Path(args.json).write_text(json.dumps({"rows": rows}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
