"""Compare a baseline file: with its second eager run, and with a file KernelBench published. No GPU needed.

    python scripts/compare_baselines.py baselines/kernelbench/H100.json \\
        --repeat baselines/kernelbench/H100.eager-repeat.json \\
        --published H100_Modal/baseline_time_torch.json --published-problems kb-1f8d20f/KernelBench \\
        --problems kb_official/KernelBench --host-shares docs/measurements/identity_official_L1_H200_2026-11-24.json \\
        --json docs/measurements/compare_official_H100_eager.json

Prints, for the mode given (``--mode``, default eager):

1. how long each mode of the file (and of the second run) took to measure, per level (sum of ``wall_s``);
2. with ``--repeat``: run-to-run agreement per level (median ratio, median and worst spread, problems within
   2%), and every problem that moved by more than 2% with its host share where ``--host-shares`` gives one;
3. with ``--published``: ours / theirs per problem (our median over their mean), per level the median,
   geometric mean, quartiles and 10th-90th percentiles, and the ``--top`` largest disagreements with the
   evidence that bears on each (``kernelbench.baselines.CUES``).

Problems are paired by level and file name, never by id. ``--published-problems`` is the KernelBench/
folder at the revision the published file was made from: problems whose code differs from ours (by
KernelBench's hash) are listed apart and left out of the statistics. ``--problems`` is our problems'
folder (its hashes must match the file's); it lets the code-based cues (cuDNN convolutions) be read, and
with ``--roofline`` each problem's speed-of-light bound for IEEE fp32 be counted.
KernelBench's files hold one mode each: compare ``--mode compile-default`` with their
``baseline_time_torch_compile_inductor_default.json``. The JSON (``--json``) holds ratios and our
times, never their raw times.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

import _checkout  # noqa: F401  (this checkout's kernelbench first on the path)

from kernelbench.cli.common import add_json_arg, stdout_for_json, write_json

SPREAD_SHOWN = 1.02


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="compare_baselines.py", description=__doc__.strip().splitlines()[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter,
                                epilog="\n".join(__doc__.strip().splitlines()[1:]))
    p.add_argument("baseline", help="our baseline file (e.g. baselines/kernelbench/H100.json)")
    p.add_argument("--mode", default="eager", help="mode of our file to compare (default eager)")
    p.add_argument("--repeat", default=None, help="our second, independent run of the same problems (eager)")
    p.add_argument("--published", default=None, help="a baseline file KernelBench published (one mode per file)")
    p.add_argument("--published-problems", default=None,
                   help="KernelBench/ folder at the revision the published file was made from (its hashes)")
    p.add_argument("--problems", default=None, help="our problems' folder (level1/, level2/, ...), for code cues")
    p.add_argument("--roofline", action="store_true",
                   help="with --problems: bound each problem for IEEE fp32 on the files' GPU (kernelbench.roofline, "
                        "datasheet rates) and mark published times below it; counting FLOPs runs every model once "
                        "on the CPU (minutes for the official RNNs; cached in KERNELBENCH_CACHE_DIR)")
    p.add_argument("--host-shares", nargs="+", default=[],
                   help="scripts/bench_evaluator.py JSON outputs whose rows carry host_share per problem")
    p.add_argument("--allow-other-gpu", action="store_true", help="compare files of two GPU types anyway")
    p.add_argument("--top", type=int, default=10, help="largest disagreements to list (default 10)")
    add_json_arg(p, "everything printed", deprecated=("--json-out",))
    return p.parse_args(argv)


def _hashes_of_folder(folder: str, levels: list[int]) -> dict[str, str]:
    from kernelbench.problems import load_problems
    from kernelbench.problems.identity import ref_of

    return {ref_of(p): p.hash for p in load_problems("directory", folder, levels=levels)}


def _ieee_bounds(folder: str, gpu_name: str | None, levels: list[int]) -> dict[str, float]:
    """Per problem, the roofline bound for IEEE fp32 on ``gpu_name`` at datasheet rates (the hard limit)."""
    from kernelbench.errors import BaselineError
    from kernelbench.problems import load_problems
    from kernelbench.problems.identity import ref_of
    from kernelbench.roofline import CostUnavailableError, find_gpu_spec, problem_cost, roofline_bound

    spec = find_gpu_spec(gpu_name or "")
    if spec is None:
        raise BaselineError(f"--roofline: GPU {gpu_name!r} of the baseline is not in the hardware table")
    out = {}
    for p in load_problems("directory", folder, levels=levels):
        try:
            cost = problem_cost(p, "fp32")
        except CostUnavailableError:
            continue
        out[ref_of(p)] = roofline_bound(cost, spec, "fp32", "ieee", prefer_measured=False).bound_ms
    return out


def _code_of_folder(folder: str, baseline) -> dict[str, str]:
    """Our problems' code, checked to be the code the file's times were taken of."""
    from kernelbench.errors import BaselineError
    from kernelbench.problems import load_problems
    from kernelbench.problems.identity import ref_of

    problems = load_problems("directory", folder, levels=sorted(baseline.levels))
    recorded = dict(baseline.problem_set.hashes) if baseline.problem_set else {}
    differ = [ref_of(p) for p in problems
              if ref_of(p) in recorded and not p.matches_hash(recorded[ref_of(p)])]
    if differ:
        raise BaselineError(f"--problems {folder} holds other versions of {', '.join(differ[:5])} than "
                            f"{baseline.path} was measured on")
    return {ref_of(p): p.code for p in problems}


def _host_shares(paths: list[str]) -> dict[str, float]:
    from kernelbench.baselines import host_shares_from_rows
    from kernelbench.errors import BaselineError

    shares: dict[str, float] = {}
    for path in paths:
        try:
            data = json.loads(Path(path).read_text(encoding="utf-8"))
        except (OSError, json.JSONDecodeError) as e:
            raise BaselineError(f"--host-shares {path}: cannot read it ({e})") from None
        rows = data.get("rows") if isinstance(data, dict) else None
        if not isinstance(rows, list):
            raise BaselineError(f"--host-shares {path}: no 'rows' list (expected scripts/bench_evaluator.py output)")
        shares.update(host_shares_from_rows(rows))
    return shares


def _measurement_seconds(path: str) -> dict[str, dict[str, Any]]:
    """Per mode and level: measurements and the seconds they took (sum of ``wall_s``)."""
    from kernelbench.baselines import BASELINE_MODES, load_baseline
    from kernelbench.errors import BaselineError

    out: dict[str, dict[str, Any]] = {}
    for mode in BASELINE_MODES:
        try:
            b = load_baseline(path, mode)
        except BaselineError:
            continue
        per_level = {}
        for level, entries in sorted(b.levels.items()):
            walls = [e.wall_s for e in entries.values() if e.wall_s is not None]
            per_level[str(level)] = {"times": len(entries), "seconds": sum(walls), "with_wall_s": len(walls)}
        out[mode] = per_level
    return out


def _f(v: float | None, spec: str = ".3f") -> str:
    return "-" if v is None else format(v, spec)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    with stdout_for_json(args):
        return _compare(args)


def _compare(args: argparse.Namespace) -> int:
    from tabulate import tabulate

    from kernelbench.baselines import CUES, Evidence, compare_baselines, compare_with_published, load_baseline
    from kernelbench.errors import BaselineError, KernelBenchError

    report: dict[str, Any] = {"baseline": args.baseline, "mode": args.mode}
    try:
        ours = load_baseline(args.baseline, args.mode)
        repeat = load_baseline(args.repeat) if args.repeat else None
        shares = _host_shares(args.host_shares)
        code = _code_of_folder(args.problems, ours) if args.problems else {}
        if args.roofline and not args.problems:
            raise BaselineError("--roofline needs --problems (the code whose FLOPs and bytes are counted)")
        bounds = _ieee_bounds(args.problems, ours.gpu_name, sorted(ours.levels)) if args.roofline else {}

        # 1. how long the files took
        timing = {args.baseline: _measurement_seconds(args.baseline)}
        if args.repeat:
            timing[args.repeat] = _measurement_seconds(args.repeat)
        report["measurement_seconds"] = timing
        rows = [[path, mode, level, v["times"], f"{v['seconds']:.1f}"]
                for path, modes in timing.items() for mode, levels in modes.items() for level, v in levels.items()]
        print("Measurement time in the files (sum of per-problem wall_s)")
        print(tabulate(rows, headers=["file", "mode", "level", "times", "seconds"], disable_numparse=True))

        # 2. run to run
        if repeat is not None:
            if args.mode != "eager":
                raise BaselineError("--repeat is a second eager run: compare it with --mode eager")
            agreement = compare_baselines(ours, repeat)
            print(f"\nRun to run: {args.baseline} against {args.repeat} (second / first, medians)")
            rows, levels = [], {}
            for level, a in [*agreement.by_level().items(), ("all", agreement)]:
                w = a.worst
                rows.append([level, a.n, _f(a.median_ratio, ".4f"), _f(a.median_spread, ".4f"),
                             f"{a.within(SPREAD_SHOWN)}/{a.n}",
                             f"{w.spread:.3f}x {w.filename} ({w.first_ms:.4g} vs {w.second_ms:.4g} ms)" if w else "-"])
                levels[str(level)] = {**a.to_dict(), "within_2pct": a.within(SPREAD_SHOWN)}
            print(tabulate(rows, headers=["level", "n", "median ratio", "median spread", "within 2%", "worst"],
                           disable_numparse=True))
            moved = sorted((r for r in agreement.ratios if r.spread > SPREAD_SHOWN), key=lambda r: -r.spread)
            moved_rows = [{"level": r.level, "problem": r.filename, "first_ms": r.first_ms, "second_ms": r.second_ms,
                           "spread": r.spread, "host_share": shares.get(f"level{r.level}/{r.filename}")}
                          for r in moved]
            print(f"\nProblems whose two runs differ by more than {SPREAD_SHOWN - 1:.0%} ({len(moved)}), with the host "
                  f"share of the sweep given{'' if shares else ' (none given)'}:")
            print(tabulate([[m["level"], m["problem"], f"{m['first_ms']:.4g}", f"{m['second_ms']:.4g}",
                             f"{m['spread']:.3f}x", _f(m["host_share"], ".2f")] for m in moved_rows],
                           headers=["level", "problem", "first ms", "second ms", "spread", "host share"],
                           disable_numparse=True))
            host_bound = sorted(ref for ref, s in shares.items() if s >= 0.8)
            report["run_to_run"] = {"levels": levels, "moved_over_2pct": moved_rows,
                                    "host_bound_in_sweep": host_bound}

        # 3. against KernelBench's published file
        if args.published:
            theirs = load_baseline(args.published)
            their_hashes = (_hashes_of_folder(args.published_problems, sorted(theirs.levels))
                            if args.published_problems else None)
            cmp = compare_with_published(ours, theirs, their_hashes=their_hashes,
                                         evidence=Evidence(code=code, repeat=repeat if args.mode == "eager" else None,
                                                           host_shares=shares, ieee_bound_ms=bounds),
                                         allow_other_gpu=args.allow_other_gpu)
            print(f"\nOurs ({args.baseline}, {args.mode}, median) / theirs ({args.published}, mean): "
                  f"{len(cmp.ratios)} problems, hashes {'checked' if cmp.hashes_checked else 'NOT checked'}; "
                  f"GPUs {cmp.ours_gpu} and {cmp.theirs_gpu}")
            rows = []
            for level, s in [*cmp.levels().items(), ("all", cmp.overall)]:
                rows.append([level, s.n, f"{s.median:.3f}", f"{s.geomean:.3f}", f"{s.p25:.3f}-{s.p75:.3f}",
                             f"{s.p10:.3f}-{s.p90:.3f}", f"{s.min:.3f}-{s.max:.3f}", f"{s.within_10pct}/{s.n}",
                             s.ours_over_2x, s.ours_under_half])
            print(tabulate(rows, headers=["level", "n", "median", "geomean", "25-75%", "10-90%", "min-max",
                                          "within 10%", "ours >2x", "ours <0.5x"], disable_numparse=True))
            if cmp.changed:
                print("\nChanged between the two problem sets (left out above): "
                      + ", ".join(f"{r.ref} ({r.ratio:.3f})" for r in cmp.changed))
            for what, refs in (("only in ours", cmp.only_ours), ("only in theirs", cmp.only_theirs)):
                if refs:
                    print(f"{len(refs)} {what}: {', '.join(refs[:10])}{' ...' if len(refs) > 10 else ''}")
            print(f"\nThe {args.top} largest disagreements:")
            print(tabulate([[r.level, r.filename, f"{r.ratio:.3f}", _f(r.mean_ratio), _f(r.min_ratio),
                             f"{r.ours_ms:.4g}", _f(r.their_cv, ".1%"), ", ".join(r.cues) or "-"]
                            for r in cmp.largest(args.top)],
                           headers=["level", "problem", "ours/theirs", "mean/mean", "ours/their min", "ours ms",
                                    "their cv", "cues"], disable_numparse=True))
            counts = cmp.cue_counts()
            if counts:
                print("\nBy cue (compared problems): n, median ratio with the cue, without it")
                print(tabulate([[cue, v["n"], f"{v['median_ratio']:.3f}", _f(v["median_ratio_without"]), CUES[cue]]
                                for cue, v in counts.items()], tablefmt="plain", disable_numparse=True))
            report["published"] = {"file": args.published, "problems_at": args.published_problems,
                                   **cmp.to_dict(args.top)}
    except KernelBenchError as e:  # a bad file, folder or pairing: one line, nothing written
        print(f"compare_baselines.py: error: {e}", file=sys.stderr)
        return 2
    if args.json:
        write_json(args, json.dumps(report, indent=2, allow_nan=False))
    return 0


if __name__ == "__main__":
    sys.exit(main())
