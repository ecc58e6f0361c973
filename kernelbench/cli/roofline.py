"""``kernelbench roofline``: speed-of-light bounds per problem, and the hardware table behind them."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from kernelbench.cli.common import (
    add_json_arg,
    add_source_args,
    json_to_stdout,
    level_type,
    problem_ids,
    write_json,
)

PRECISION_CHOICES = ("fp32", "fp16", "bf16")
FP32_MATH_CHOICES = ("default", "ieee", "tf32")


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "roofline", help="speed-of-light (roofline) bound per problem on a GPU",
        description="Lower bound on each problem's runtime: max(FLOPs / peak FLOP/s, minimum bytes / memory "
                    "bandwidth). FLOPs come from PyTorch's flop counter on the reference (matmuls, convolutions, "
                    "attention; element-wise work is not counted); bytes are inputs, outputs and weights once.",
    )
    p.add_argument("--level", type=level_type, default=None, help="level to bound (required unless --list-gpus)")
    p.add_argument("--problem-id", default=None, help="only these problem ids, e.g. 1,3,5-8")
    p.add_argument("--gpu", default=None,
                   help="GPU to bound for: H100, H200, A100-80GB, L40S, B200 or a device name "
                        "(default: this machine's GPU, else H100)")
    p.add_argument("--precision", choices=PRECISION_CHOICES, default="fp32", help="precision of inputs and weights")
    p.add_argument("--fp32-math", choices=FP32_MATH_CHOICES, default=None,
                   help="fp32 only: default = PyTorch's defaults (matmul on CUDA cores, convolution on TF32 tensor "
                        "cores); ieee = everything on CUDA cores; tf32 = everything on TF32 tensor cores. "
                        "Default: ieee with a baseline measured by kernelbench (the math it was timed with), "
                        "else default")
    p.add_argument("--datasheet-only", action="store_true",
                   help="use datasheet peaks even where measured rates exist")
    p.add_argument("--baseline", default=None,
                   help="baseline time file: adds PyTorch's time and the fraction of speed of light it reaches "
                        "(default for the built-in suite: the committed <baselines-dir>/<GPU>.json, if there)")
    p.add_argument("--baselines-dir", default="baselines", help="folder of per-GPU baseline files")
    p.add_argument("--no-baseline", action="store_true", help="bounds only, even where a baseline file exists")
    p.add_argument("--baseline-mode", default="eager", help="mode within the baseline file (default: eager)")
    p.add_argument("--no-cache", action="store_true", help="recount every problem instead of using the cost cache")
    p.add_argument("--list-gpus", action="store_true", help="print the hardware table and exit")
    add_json_arg(p, "the bounds (with --list-gpus: the hardware table)")
    add_source_args(p)
    p.set_defaults(func=run)


def _pick_gpu(name: str | None):
    from kernelbench.hardware import current_gpu_spec, get_gpu_spec

    if name:
        return get_gpu_spec(name), "--gpu"
    local = current_gpu_spec()
    if local is not None:
        return local, "this machine's GPU"
    return get_gpu_spec("H100"), "default (no local GPU)"


def _list_gpus(args: argparse.Namespace) -> int:
    import json

    from tabulate import tabulate

    from kernelbench.hardware import gpu_table

    table = gpu_table()
    write_json(args, json.dumps([s.to_dict() for s in table], indent=2))
    if json_to_stdout(args):
        return 0
    rows = []
    for s in table:
        m = s.measured
        rows.append([s.name, s.architecture, s.compute_capability, s.sm_count, f"{s.memory_gb:g}", f"{s.l2_mb:g}",
                     f"{s.memory_bandwidth_bytes_s / 1e12:.2f}", f"{s.fp32_flops / 1e12:g}",
                     f"{s.tf32_tensor_flops / 1e12:g}", f"{s.bf16_tensor_flops / 1e12:g}",
                     "yes" if m is not None else "no"])
    print(tabulate(rows, headers=["GPU", "arch", "CC", "SMs", "memory GB", "L2 MB", "TB/s", "FP32 TFLOP/s",
                                  "TF32 TC", "FP16/BF16 TC", "measured"], disable_numparse=True))
    print("\nTensor-core rates are dense (vendors' sparsity figures halved). Sources:")
    for s in table:
        print(f"  {s.name}: {s.datasheet}")
        if s.measured is not None:
            print(f"    measured: {s.measured.source}")
    return 0


def run(args: argparse.Namespace) -> int:
    if args.list_gpus:
        return _list_gpus(args)
    if args.level is None:
        print("error: --level is required (or use --list-gpus)", file=sys.stderr)
        return 2

    from tabulate import tabulate

    from kernelbench.baselines import load_baseline
    from kernelbench.hardware import find_gpu_spec
    from kernelbench.problems import load_problems
    from kernelbench.roofline import problem_roofline

    spec, why = _pick_gpu(args.gpu)
    problems = load_problems(args.source, args.path, levels=[args.level]).select(levels=[args.level])
    ids = problem_ids(args.problem_id, "--problem-id")
    if ids:
        problems = problems.select(ids=ids)

    if args.baseline and args.no_baseline:
        print("error: --baseline and --no-baseline contradict each other", file=sys.stderr)
        return 2
    baseline_path = args.baseline or (None if args.no_baseline else _committed_baseline(args, spec, problems))
    baseline = None
    if baseline_path:
        baseline = load_baseline(baseline_path, mode=args.baseline_mode)
        base_gpu = baseline.gpu_name
        base_spec = find_gpu_spec(base_gpu) if base_gpu else None
        if base_gpu and (base_spec is None or base_spec.name != spec.name):
            print(f"warning: baseline {baseline_path} was measured on {base_gpu!r}, but the bound is for "
                  f"{spec.name}: the fractions of speed of light compare different GPUs", file=sys.stderr)
        base_precision = baseline.environment.precision if baseline.environment else None
        if base_precision and base_precision != args.precision and not args.baseline:
            print(f"note: not using {baseline_path}: it holds {base_precision} times and the bound is for "
                  f"{args.precision}", file=sys.stderr)
            baseline = baseline_path = None
        elif base_precision and base_precision != args.precision:
            print(f"warning: baseline {baseline_path} holds {base_precision} times, but the bound is for "
                  f"{args.precision}: the fractions of speed of light compare different precisions", file=sys.stderr)
    fp32_math = _fp32_math(args, baseline, baseline_path)

    rows = []
    from kernelbench.progress import progress_bar

    for p in progress_bar(list(problems), desc=f"roofline level {args.level}", unit="problem"):
        entry = baseline.find(p) if baseline is not None else None
        rows.append(problem_roofline(p, spec, args.precision, fp32_math, not args.datasheet_only,
                                     baseline_ms=entry.headline_ms if entry else None, use_cache=not args.no_cache))

    ok = [r for r in rows if r.bound is not None]
    fractions = [r.fraction_of_sol for r in ok if r.fraction_of_sol is not None]
    sources = sorted({r.bound.rates_source for r in ok})
    summary = {
        "problems": len(rows),
        "compute_bound": sum(1 for r in ok if r.bound.bound_by == "compute"),
        "memory_bound": sum(1 for r in ok if r.bound.bound_by == "memory"),
        "unavailable": len(rows) - len(ok),
        "with_baseline": len(fractions),
        "mean_fraction_of_sol": (sum(fractions) / len(fractions)) if fractions else None,
        "rates_source": "+".join(sources) if sources else None,
    }
    if args.json:
        import json

        write_json(args, json.dumps({
            "level": args.level, "source": problems.source, "gpu": spec.name, "gpu_choice": why,
            "gpu_spec": spec.to_dict(), "precision": args.precision, "fp32_math": fp32_math,
            "baseline": str(baseline_path) if baseline_path else None,
            "baseline_mode": args.baseline_mode if baseline_path else None,
            "problems": [r.to_dict() for r in rows], "summary": summary}, indent=2))
    if json_to_stdout(args):
        return 0

    headers = ["id", "name", "GFLOP", "MB moved", "bound (ms)", "bound by"]
    if baseline is not None:
        headers += ["baseline (ms)", "fraction of SOL"]
    headers.append("note")
    table = []
    for r in rows:
        if r.bound is None:
            line = [r.problem_id, r.name, "-", "-", "-", "unavailable"]
            if baseline is not None:
                line += [_fmt(r.baseline_ms), "-"]
            table.append(line + [_short(r.unavailable_reason)])
            continue
        line = [r.problem_id, r.name, f"{r.cost.flops / 1e9:.4g}", f"{r.cost.min_bytes / 1e6:.4g}",
                f"{r.bound.bound_ms:.4g}", r.bound.bound_by]
        if baseline is not None:
            line += [_fmt(r.baseline_ms), "-" if r.fraction_of_sol is None else f"{r.fraction_of_sol:.1%}"]
        table.append(line + [_short(r.cost.note or "")])
    print(f"Speed of light on {spec.full_name} ({why}), {args.precision}"
          + (f", fp32 math {fp32_math}" if args.precision == "fp32" else "")
          + f"; rates: {summary['rates_source'] or 'n/a'}"
          + (f"; baseline {baseline_path} ({args.baseline_mode})" if baseline_path else ""))
    align = ["right", "left", "right", "right", "right", "left"] + (["right", "right"] if baseline else []) + ["left"]
    print(tabulate(table, headers=headers, disable_numparse=True, colalign=align))
    line = (f"\nlevel {args.level}: {len(rows)} problems from {problems.source}: {summary['compute_bound']} "
            f"compute-bound, {summary['memory_bound']} memory-bound, {summary['unavailable']} unavailable")
    if baseline is not None:
        mean = summary["mean_fraction_of_sol"]
        line += (f"; PyTorch {args.baseline_mode} reaches {mean:.1%} of speed of light on average "
                 f"({len(fractions)} problems with a baseline time)" if mean is not None
                 else "; no baseline times matched these problems")
    print(line)
    return 0


def _committed_baseline(args: argparse.Namespace, spec, problems) -> Path | None:
    """The committed baseline for this GPU, for the built-in suite only: its times are keyed by file name
    and problem id, which another source's problems could share without being the same problem."""
    from kernelbench.baselines import baseline_path_for_gpu
    from kernelbench.hardware import gpu_label

    if problems.source != "builtin":
        return None
    path = baseline_path_for_gpu(gpu_label(spec.name), args.baselines_dir)
    return path if path.is_file() else None


def _fp32_math(args: argparse.Namespace, baseline, baseline_path) -> str:
    """The fp32 math to bound with: as asked, else the math the baseline's times were taken with.

    kernelbench times fp32 references in IEEE fp32 (cuDNN's TF32 off), so against one of its baselines
    the TF32 convolution bound of PyTorch's defaults would understate how close PyTorch came."""
    ours = baseline is not None and baseline.environment is not None and bool(baseline.environment.timing_protocol)
    if args.fp32_math is None:
        return "ieee" if ours and args.precision == "fp32" else "default"
    if ours and args.precision == "fp32" and args.fp32_math != "ieee":
        print(f"warning: baseline {baseline_path} was timed in IEEE fp32; against a --fp32-math {args.fp32_math} "
              "bound its fraction of speed of light is not like for like", file=sys.stderr)
    return args.fp32_math


def _fmt(v: float | None) -> str:
    return "-" if v is None else f"{v:.4g}"


def _short(text: str | None, limit: int = 90) -> str:
    """Notes stay readable in a terminal table; --json carries them in full."""
    if not text:
        return ""
    return text if len(text) <= limit else text[:limit - 3] + "..."
