"""Measure this GPU's copy bandwidth and matmul rates and record them for speed-of-light bounds.

    python scripts/measure_rates.py                      # first GPU -> kernelbench/data/measured_rates.json
    python scripts/measure_rates.py --dry-run            # print only
    python scripts/measure_rates.py --device cpu --gpu-name H100 --out /tmp/rates.json --copy-mb 8 --matmul-n 256

Bounds prefer a measured figure over the datasheet once it is in the file (``kernelbench roofline``
says which it used; ``--datasheet-only`` ignores them); the evaluator's "faster than the bound" flag
always uses the datasheet. The entry is keyed by the GPU's family (``H100``), as the baseline files
are. Measuring on the CPU is for smoke tests only: it needs ``--gpu-name`` and ``--out``, so CPU
numbers can never land in the shipped file.
"""

from __future__ import annotations

import argparse
import logging
import sys

from kernelbench.cli.common import positive_int

SOURCE = "scripts/measure_rates.py: Tensor.copy_ and torch.mm (cuBLAS), median of CUDA-event timed calls"


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="measure_rates.py", description=__doc__.strip().splitlines()[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter,
                                epilog="\n".join(__doc__.strip().splitlines()[1:]))
    p.add_argument("--device", default=None, help="cuda:N (default: the first GPU) or cpu (smoke test)")
    p.add_argument("--gpu-name", default=None, help="file key (default: the device's family, e.g. H100)")
    p.add_argument("--out", default=None, help="measured-rates file (default: kernelbench/data/measured_rates.json)")
    p.add_argument("--copy-mb", type=positive_int, default=1024, help="buffer size copied, MiB (1024)")
    p.add_argument("--matmul-n", type=positive_int, default=8192, help="square matmul size (8192)")
    p.add_argument("--calls", type=positive_int, default=20, help="timed calls per rate (20; matmuls use half)")
    p.add_argument("--dry-run", action="store_true", help="measure and print, write nothing")
    p.add_argument("-v", "--verbose", action="store_true")
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING, format="%(message)s")
    import torch
    from tabulate import tabulate

    from kernelbench.errors import KernelBenchError
    from kernelbench.hardware import find_gpu_spec, gpu_label
    from kernelbench.rate_measurement import measure_gpu_rates, merge_measured_rates

    device = args.device or ("cuda:0" if torch.cuda.is_available() else None)
    if device is None:
        print("measure_rates.py: error: no GPU visible; pass --device cpu with --gpu-name and --out for a "
              "smoke test", file=sys.stderr)
        return 2
    on_cpu = device.startswith("cpu")
    if on_cpu and not args.dry_run and (args.out is None or args.gpu_name is None):
        print("measure_rates.py: error: rates measured on the CPU are not a GPU's: pass --gpu-name and --out "
              "(never the shipped file), or --dry-run", file=sys.stderr)
        return 2

    rates = measure_gpu_rates(device, copy_bytes=args.copy_mb << 20, matmul_n=args.matmul_n, calls=args.calls)
    key = args.gpu_name or gpu_label(rates.device_name)
    spec = find_gpu_spec(key)
    rows = []
    for s in rates.samples:
        if s.kind == "memory":
            peak = spec.memory_bandwidth_bytes_s if spec else None
            rows.append(["memory (copy)", f"{s.value / 1e12:.3f} TB/s", f"{s.size >> 20} MiB", f"{s.median_ms:.3f}",
                         f"{s.value / peak:.0%}" if peak else "-"])
        else:
            peak = spec.peak(s.kind, prefer_measured=False).value if spec else None
            rows.append([f"matmul {s.kind}", f"{s.value / 1e12:.1f} TFLOP/s", f"N={s.size}", f"{s.median_ms:.3f}",
                         f"{s.value / peak:.0%}" if peak else "-"])
    print(f"{rates.device_name} ({device}), torch {rates.torch}, CUDA {rates.cuda}")
    print(tabulate(rows, headers=["rate", "measured", "size", "median ms", "of datasheet"]))
    if args.dry_run:
        return 0
    try:
        path = merge_measured_rates(key, rates.to_entry(SOURCE), args.out)
    except (KernelBenchError, ValueError, OSError) as e:
        print(f"measure_rates.py: error: {e}", file=sys.stderr)
        return 2
    print(f"\nwrote the {key} entry of {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
