"""Benchmark baseline measurement on this GPU: time to produce the file, run-to-run agreement, fraction of SOL.

    python scripts/bench_baselines.py                                   # built-in suite, every mode
    python scripts/bench_baselines.py --levels 1 2 --modes eager compile-default --deadline 480
    python scripts/bench_baselines.py --out $OUT/H100.json --json $OUT/bench_baselines.json

What it does, in order:

1. measures the baseline file for the selected problems and modes (``baselines/<GPU>.json``, or
   ``baselines/kernelbench/<GPU>.json`` for the official problems, unless ``--out``), resuming what is
   already there, and times it;
2. measures eager again into a second file (``<out stem>.eager-repeat.json``): two independent runs
   (other processes, other inputs, later in time), compared problem by problem (median of the
   per-problem ratios, and the worst case);
3. works out the fraction of speed of light that PyTorch eager reaches on each problem (roofline
   bound on this GPU / measured eager median);
4. prints a per-problem table and a summary, and writes all of it as JSON (``--json``).

``--deadline`` stops starting new measurements after that many seconds (both runs together); the
files keep what was measured and a second invocation continues. Expect torch.compile modes to
dominate: every problem is compiled in a fresh process, and compile-max-autotune benchmarks many
kernel variants per matmul and convolution (bound it with ``--compile-timeout``).
"""

from __future__ import annotations

import argparse
import json
import logging
import statistics
import sys
import time
from pathlib import Path
from typing import Any

MODES = ("eager", "compile-default", "compile-max-autotune", "compile-cudagraphs")


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    from kernelbench.cli.common import add_json_arg, non_negative_int

    p = argparse.ArgumentParser(prog="bench_baselines.py", description=__doc__.strip().splitlines()[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter,
                                epilog="\n".join(__doc__.strip().splitlines()[1:]))
    p.add_argument("--levels", nargs="+", type=int, default=None, help="levels (default: every level of the source)")
    p.add_argument("--problem-id", default=None, help="only these problem ids, e.g. 1,3,5-8")
    p.add_argument("--modes", nargs="+", choices=[*MODES, "all"], default=["all"], help="modes (default: all)")
    p.add_argument("--source", default="builtin", help="problem source: builtin, directory, huggingface")
    p.add_argument("--path", default=None, help="folder or dataset for --source directory/huggingface")
    p.add_argument("--timing-budget", type=float, default=0.5, help="seconds of timed calls per measurement (0.5)")
    p.add_argument("--compile-timeout", type=float, default=180.0,
                   help="seconds allowed to build one reference, torch.compile included (180)")
    p.add_argument("--compile-jobs", type=int, default=None,
                   help="parallel compile warm-up workers before timing (default: half the cores, at most 8; 0: off)")
    p.add_argument("--spares", type=non_negative_int, default=None,
                   help="reference workers kept started ahead (default 6; each holds a CUDA context)")
    p.add_argument("--deadline", type=float, default=None, help="stop starting measurements after this many seconds")
    p.add_argument("--out", default=None, help="baseline file (default baselines/<GPU>.json; official problems: baselines/kernelbench/<GPU>.json)")
    p.add_argument("--repeat-out", default=None, help="second eager run (default <out stem>.eager-repeat.json)")
    add_json_arg(p, "the results", deprecated=("--json-out",), default="bench_baselines.json")
    p.add_argument("--no-repeat", action="store_true", help="skip the second eager run")
    p.add_argument("--restart", action="store_true", help="start both files over instead of resuming")
    p.add_argument("--device", default=None, help="cuda:N (default: the first GPU); cpu for a smoke test")
    p.add_argument("--precision", choices=("fp32", "fp16", "bf16"), default="fp32")
    p.add_argument("--no-sol", action="store_true",
                   help="skip the fraction-of-speed-of-light column (its FLOP count runs every model once more: "
                        "minutes over the official level 3, which a resumed run need not spend)")
    p.add_argument("-v", "--verbose", action="store_true", help="log what each measurement does")
    return p.parse_args(argv)


def _label_and_device(args: argparse.Namespace) -> tuple[str, str]:
    from kernelbench.hardware import gpu_label, local_gpu_names

    if args.device == "cpu":
        return "cpu", "cpu"
    names = local_gpu_names()
    if not names:
        raise SystemExit("bench_baselines.py: error: no GPU visible (nvidia-smi lists none); use a GPU machine, "
                         "or --device cpu for a smoke test")
    device = args.device or "cuda:0"
    index = int(device.split(":", 1)[1]) if ":" in device else 0
    if index >= len(names):
        raise SystemExit(f"bench_baselines.py: error: {device} does not exist ({len(names)} GPU(s) visible)")
    return gpu_label(names[index]), device


def _sum_wall(file_path: Path, mode: str) -> tuple[float, int]:
    """Seconds the file's times for one mode took to measure (summed over every invocation that wrote them)."""
    from kernelbench.baselines import load_baseline
    from kernelbench.errors import BaselineError

    try:
        b = load_baseline(file_path, mode=mode)
    except BaselineError:
        return 0.0, 0
    walls = [e.wall_s for entries in b.levels.values() for e in entries.values() if e.wall_s is not None]
    return sum(walls), len(walls)


def _fmt(v: float | None, spec: str = ".4g") -> str:
    return "-" if v is None else format(v, spec)


def main(argv: list[str] | None = None) -> int:
    from kernelbench.cli.common import stdout_for_json

    args = parse_args(argv)
    with stdout_for_json(args):
        return _bench(args)


def _bench(args: argparse.Namespace) -> int:
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING,
                        format="%(levelname)s %(name)s: %(message)s", stream=sys.stderr)
    from tabulate import tabulate

    from kernelbench.baselines import (
        BaselineFile,
        LocalMeasurer,
        baseline_path_for_gpu,
        baseline_settings,
        baselines_dir_for,
        compare_baselines,
        load_baseline,
        measure_into,
        warm_compile_caches,
    )
    from kernelbench.cli.common import write_json
    from kernelbench.errors import BaselineError
    from kernelbench.problems import load_problems, parse_id_spec
    from kernelbench.roofline import check_speed_of_light

    modes = list(MODES) if "all" in args.modes else list(dict.fromkeys(args.modes))
    label, device = _label_and_device(args)
    problems = load_problems(args.source, args.path, levels=args.levels)
    if args.levels:
        problems = problems.select(levels=args.levels)
    if args.problem_id:
        problems = problems.select(ids=parse_id_spec(args.problem_id))
    if args.out:
        out = Path(args.out)
    else:
        from kernelbench.problems.identity import identify

        out = baseline_path_for_gpu(label, baselines_dir_for(identify(problems).name))
    repeat_out = Path(args.repeat_out) if args.repeat_out else out.with_name(f"{out.stem}.eager-repeat.json")
    settings = baseline_settings(args.timing_budget, compile_timeout_s=args.compile_timeout,
                                 precision=args.precision, device=device)
    print(f"bench_baselines: {len(problems)} problems x {len(modes)} modes on {label} ({device}), "
          f"budget {args.timing_budget:g} s per measurement -> {out}", file=sys.stderr)

    started = time.monotonic()
    try:
        file = BaselineFile.open(out, label, precision=args.precision, restart=args.restart)
        # Opened now, so a stale second-run file stops the run before any measuring, and --restart
        # covers both files even when the deadline leaves no time for the second run.
        rfile = None if args.no_repeat else BaselineFile.open(repeat_out, label, precision=args.precision,
                                                              restart=args.restart)
        warm = warm_compile_caches(file, problems, modes, settings, device, args.compile_jobs,
                                   deadline_s=None if args.deadline is None else args.deadline / 2)
        if warm.outcomes:
            print(warm.summary(), file=sys.stderr)
        deadline = None if args.deadline is None else max(0.0, args.deadline - warm.wall_s)
        with LocalMeasurer(device, args.spares,
                           preload_compiler=any(m != "eager" for m in modes)) as measure:
            first = measure_into(file, problems, modes, settings, measure, deadline_s=deadline)
            first_wall = time.monotonic() - started
            second = None
            if rfile is not None:
                left = None if args.deadline is None else max(0.0, args.deadline - first_wall)
                second = measure_into(rfile, problems, ["eager"], settings, measure, deadline_s=left)
    except BaselineError as e:
        print(f"bench_baselines.py: error: {e}", file=sys.stderr)
        return 2
    total_wall = time.monotonic() - started

    # -- agreement of the two eager runs
    agreement = None
    if second is not None and repeat_out.exists() and out.exists():
        try:
            agreement = compare_baselines(load_baseline(out), load_baseline(repeat_out))
        except BaselineError as e:
            print(f"note: no agreement figures: {e}", file=sys.stderr)
    ratio_of = {(r.level, r.filename): r.ratio for r in (agreement.ratios if agreement else ())}

    # -- per problem: times per mode, fraction of speed of light for eager
    times: dict[str, Any] = {}
    for mode in modes:
        try:
            times[mode] = load_baseline(out, mode=mode)
        except BaselineError:
            times[mode] = None
    gpu_name = (times.get("eager").gpu_name if times.get("eager") else None) or label
    rows, records = [], []
    for p in problems:
        medians = {m: (times[m].find(p).headline_ms if times[m] and times[m].find(p) else None) for m in modes}
        eager_ms = medians.get("eager")
        info = None
        if eager_ms is not None and device != "cpu" and not args.no_sol:
            # Baselines run fp32 as IEEE fp32 (the evaluator's strict mode turns cuDNN's TF32 off),
            # so every fp32 FLOP is bounded at the CUDA-core rate.
            info = check_speed_of_light(p, gpu_name, args.precision, eager_ms, fp32_math="ieee").info
        sol = info.fraction_of_sol if info else None
        ratio = ratio_of.get((p.level, p.filename))
        records.append({"level": p.level, "problem_id": p.problem_id, "name": p.name, "median_ms": medians,
                        "repeat_ratio": ratio, "bound_ms": info.bound_ms if info else None,
                        "bound_by": info.bound_by if info else None, "fraction_of_sol": sol,
                        "rates_source": info.rates_source if info else None})
        rows.append([p.level, p.name, *[_fmt(medians[m]) for m in modes], _fmt(ratio, ".3f"),
                     _fmt(info.bound_ms if info else None), info.bound_by if info else "-",
                     "-" if sol is None else f"{sol:.1%}"])
    print(tabulate(rows, headers=["level", "problem", *[f"{m} ms" for m in modes], "repeat/first",
                                  "SOL bound ms", "bound by", "eager frac. SOL"], disable_numparse=True))

    per_mode = {}
    for m in modes:
        s, n = _sum_wall(out, m)
        per_mode[m] = {"seconds": s, "times": n, "measured_now": first.count("measured", m),
                       "failed_now": first.count("failed", m), "pending": first.count("pending", m)}
    fractions = [r["fraction_of_sol"] for r in records if r["fraction_of_sol"] is not None]
    summary = {
        "gpu": gpu_name, "label": label, "device": device, "problems": len(problems), "modes": modes,
        "timing_budget_s": args.timing_budget, "compile_timeout_s": args.compile_timeout,
        "spares": measure.spares,
        "baseline_file": str(out), "complete": first.complete, "stopped": first.stopped,
        "wall_s_this_invocation": total_wall, "wall_s_first_run": first_wall,
        "compile_warmup": {"jobs": warm.jobs, "references": len(warm.outcomes), "compiled": warm.compiled,
                           "already_warm": warm.reused,
                           "wall_s": warm.wall_s, "compile_seconds": warm.compile_seconds,
                           "timed_choices_dropped": warm.decisions_removed,
                           "failed": [{"problem": o.problem_key, "mode": o.mode, "error": o.error}
                                      for o in warm.failed]},
        "measurement_seconds_in_file": sum(v["seconds"] for v in per_mode.values()), "per_mode": per_mode,
        "failures": [{"level": o.level, "problem": o.filename, "mode": o.mode, "error": o.error}
                     for o in first.failures],
        "repeat_file": str(repeat_out) if second is not None else None,
        "agreement": agreement.to_dict() if agreement else None,
        "fraction_of_sol": {"n": len(fractions), "median": statistics.median(fractions) if fractions else None,
                            "mean": statistics.fmean(fractions) if fractions else None,
                            "min": min(fractions) if fractions else None, "max": max(fractions) if fractions else None},
    }
    print()
    lines = [["this invocation", f"{total_wall:.1f} s ({first_wall:.1f} s for the file, "
                                 f"{warm.wall_s:.1f} s of it compile warm-up)"],
             ["file complete", f"{first.complete}" + (f" (stopped: {first.stopped})" if first.stopped else "")]]
    for m, v in per_mode.items():
        lines.append([f"{m}: measurement time in file", f"{v['seconds']:.1f} s over {v['times']} times "
                                                         f"({v['failed_now']} failed now, {v['pending']} pending)"])
    if agreement and agreement.n:
        w = agreement.worst
        lines.append(["eager run-to-run, median ratio", f"{agreement.median_ratio:.4f} over {agreement.n} problems"])
        lines.append(["eager run-to-run, median spread", f"{agreement.median_spread:.4f} (max/min of the two)"])
        lines.append(["eager run-to-run, worst", f"{w.spread:.3f}x on level {w.level} {w.filename} "
                                                 f"({w.first_ms:.4g} vs {w.second_ms:.4g} ms)"])
    fs = summary["fraction_of_sol"]
    if fs["n"]:
        lines.append(["eager fraction of SOL", f"median {fs['median']:.1%}, mean {fs['mean']:.1%}, "
                                               f"range {fs['min']:.1%}-{fs['max']:.1%} over {fs['n']} problems"])
    print(tabulate(lines, tablefmt="plain"))
    for o in first.failures:
        print(f"failed: level {o.level} {o.filename} {o.mode}: {(o.error or '')[:150]}")
    write_json(args, json.dumps({"summary": summary, "problems": records}, indent=2, allow_nan=False))
    return 0


if __name__ == "__main__":
    sys.exit(main())
