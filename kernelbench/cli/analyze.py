"""``kernelbench analyze``: fast_p and speedup table for a run directory."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from kernelbench.cli.common import add_json_arg, add_source_args, level_type, write_json


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "analyze", help="score a run directory (fast_p, geometric-mean speedup, pass@k)",
        description="Score a run directory against a baseline file (or the in-session reference timings). "
                    "The problem set is --source if given, else the one run.json records, else the KernelBench/ "
                    "folder in the working directory (a KernelBench checkout), else the set the baseline's problem "
                    "names belong to; otherwise the command asks for it. A run, baseline or problem source of "
                    "different problem sets is refused (--force to score anyway).",
    )
    p.add_argument("--run-dir", required=True, help="run directory holding eval_results.json")
    p.add_argument("--baseline", default=None, help="baseline file, e.g. baselines/H100.json")
    p.add_argument("--gpu", default=None,
                   help="use the run's problem set's baseline for this GPU (e.g. H100) when --baseline is not given: "
                        "baselines/kernelbench/<GPU>.json for the official problems, baselines/<GPU>.json otherwise")
    p.add_argument("--baselines-dir", default="baselines",
                   help="the baselines folder (default: baselines), or one set's folder of <GPU>.json files")
    p.add_argument("--mode", default="eager", help="baseline mode (eager, compile-default, ...)")
    p.add_argument("--level", type=level_type, default=None, help="level of the run (default: from the run)")
    p.add_argument("--sample-policy", choices=["first", "best"], default="first",
                   help="which sample scores a problem: sample 0 (greedy, KernelBench) or the best correct one")
    p.add_argument("--force", action="store_true",
                   help="compare against another GPU's baseline, one timed with another protocol version, or one "
                        "made on another problem set, anyway")
    add_json_arg(p, "the scores", deprecated=("--output", "--json-out"))
    add_source_args(p, default_help="the run's: run.json, else ./KernelBench/, else the baseline's problem names")
    # Never silently the built-in suite: None means "find the run's set" (see the description).
    p.set_defaults(func=run, source=None)


def run(args: argparse.Namespace) -> int:
    from tabulate import tabulate

    from kernelbench.baselines import (
        baseline_path_for_gpu,
        baselines_dir_for,
        find_baseline_for_gpu,
        load_baseline,
    )
    from kernelbench.errors import RunDirectoryError
    from kernelbench.problems import load_problems
    from kernelbench.problems.identity import KERNELBENCH, ProblemSetMismatchError, identify, problem_ref
    from kernelbench.problems.resolve import resolve_run_source
    from kernelbench.runs import RunDirectory
    from kernelbench.scoring import (
        DRIFT_TOLERANCE,
        FAST_P_THRESHOLDS,
        baseline_drift,
        check_same_gpu,
        kernelbench_figures,
        score_results,
    )
    from kernelbench.setcheck import check_baseline, check_run

    run_dir = Path(args.run_dir)
    if not run_dir.is_dir():
        raise RunDirectoryError(f"run directory {run_dir} does not exist")
    rd = RunDirectory(run_dir, level=args.level)
    if rd.level is None:
        raise RunDirectoryError(f"cannot tell the level of {run_dir}: no kernels, no run.json; pass --level")
    if not rd.results_path.exists():
        raise RunDirectoryError(f"{rd.results_path} does not exist: evaluate the run first (kernelbench evaluate-run)")
    results = list(rd.load_results().values())
    from kernelbench.results import reduced_size_message, reduced_size_results

    reduced = reduced_size_results(results)
    if reduced:
        raise RunDirectoryError(reduced_size_message(reduced, f"cannot analyze {run_dir}"))
    info = rd.info()

    baseline = None
    refs: list[str] = []
    if args.baseline:
        baseline = load_baseline(args.baseline, mode=args.mode)
        refs = baseline.refs(rd.level)
    elif args.gpu:
        # Which file depends on the run's problem set; until that is known, the files this GPU has (one per
        # set) may tell the set by their problem names, as a --baseline file would.
        for path in dict.fromkeys([baseline_path_for_gpu(args.gpu, args.baselines_dir),
                                   baseline_path_for_gpu(args.gpu, baselines_dir_for(KERNELBENCH, args.baselines_dir))]):
            if path.is_file():
                refs += load_baseline(path).refs(rd.level)
    choice = resolve_run_source(run_dir, source=args.source, path=args.path, run_info=info, cwd=Path.cwd(),
                                baseline_refs=refs)
    problems = load_problems(choice.source, choice.path, levels=[rd.level])
    identity = identify(problems)
    if baseline is None and args.gpu:
        baseline = load_baseline(find_baseline_for_gpu(args.gpu, identity.name, args.baselines_dir), mode=args.mode)
    try:
        check_run(identity, problems, results, info.problem_set, f"run {run_dir}")
        if baseline is not None:
            check_baseline(identity, baseline, rd.level)
    except ProblemSetMismatchError as e:
        if not args.force:
            raise ProblemSetMismatchError(f"{e} (--force to score anyway)") from None
        print(f"warning: {e} (scoring anyway: --force)", file=sys.stderr)
    if baseline is not None:
        check_same_gpu(results, baseline, force=args.force)

    # A baseline without some of the level's problems: KernelBench's script skips them (its denominator
    # shrinks); ours keeps them in the denominator as untimed, so no problem counts as faster without a
    # baseline time, and says which they are.
    unbaselined = [p for p in problems if baseline is not None and baseline.find(p) is None]
    if unbaselined:
        names = ", ".join(p.filename for p in unbaselined[:5]) + (
            f" and {len(unbaselined) - 5} more" if len(unbaselined) > 5 else "")
        print(f"warning: baseline {baseline.path} has no time for {len(unbaselined)} problem(s) of level {rd.level} "
              f"({names}): they count as untimed here (a correct kernel is correct but not faster); "
              "KernelBench's figures below leave them out", file=sys.stderr)
    report = score_results(problems, results, baseline, sample_policy=args.sample_policy,
                           missing_baseline="untimed")
    drift = baseline_drift(problems, results, baseline) if baseline is not None else []
    score = report.levels[rd.level]

    speed_src = f"baseline {baseline.path} ({baseline.mode})" if baseline else "in-session reference timings"
    print(f"Run {run_dir} - level {rd.level}, {score.n_problems} problems of {identity.label} "
          f"({problems.source}; set from {choice.reason})")
    print(f"Speedups against {speed_src}; sample policy: {args.sample_policy}\n")
    summary = [
        ["problems with a result", f"{score.n_attempted} / {score.n_problems}"],
        ["compiled", f"{score.n_compiled} ({score.compile_rate:.1%})"],
        ["correct", f"{score.n_correct} ({score.correctness_rate:.1%})"],
        ["geomean speedup (correct)", _fmt(score.geomean_speedup, "x") + _fmt_ci(score.geomean_ci95)],
        ["full-deck geomean speedup", _fmt(score.fulldeck_geomean, "x")],
    ]
    if score.n_infrastructure:
        summary.append(["not evaluated (our failures; evaluate-run redoes them)", score.n_infrastructure])
    for k, v in score.pass_at_k.items():
        summary.append([f"pass@{k}", f"{v:.3f}"])
    if score.mean_sol_fraction is not None:
        summary.append(["mean fraction of speed of light", f"{score.mean_sol_fraction:.1%}"])
    print(tabulate(summary, tablefmt="simple"))
    print()
    print(tabulate([[f"{p:g}", f"{score.fast_p[p]:.3f}", _fmt(score.fast_p_significant.get(p))]
                    for p in FAST_P_THRESHOLDS],
                   headers=["speedup threshold p", "fast_p", "fast_p significant (95% interval above p)"],
                   tablefmt="grid"))
    flagged = [r for r in results if r.correct and r.level == rd.level and r.timing_flags]
    if flagged:
        print(f"\n{len(flagged)} timed result(s) carry timing flags (imprecise: the speedup's 95% interval is wider "
              "than +/-2%; host-bound: the host needs most of the GPU's time to launch the forward):")
        print(tabulate([[r.problem_id, r.sample_id, r.problem_name, _fmt(r.speedup, "x") + _fmt_ci(
                            (r.speedup_ci95.lo, r.speedup_ci95.hi) if r.speedup_ci95 else None),
                         ", ".join(r.timing_flags) + (f" (host share {r.host_share:.2f})"
                                                      if r.host_share is not None else "")]
                        for r in sorted(flagged, key=lambda r: (r.problem_id, r.sample_id))],
                       headers=["problem", "sample", "name", "speedup [95% interval]", "flags"], tablefmt="simple"))
    if drift:
        print(f"\nOn {len(drift)} problem(s) the baseline and the reference timed beside the candidates differ by "
              f"more than {DRIFT_TOLERANCE:.0%}; speedups against the baseline are only as good as that gap "
              "(host-bound references follow the CPU's speed):")
        print(tabulate([[d.level, d.filename, f"{d.baseline_ms:.4g}", f"{d.in_session_ms:.4g}", f"{d.ratio:.2f}x"]
                        for d in drift],
                       headers=["level", "problem", "baseline (ms)", "in-session (ms)", "baseline / in-session"]))
    kb = kernelbench_figures(problems, results, baseline) if baseline is not None else None
    if kb is not None:
        print(f"\nAs KernelBench's benchmark_eval_analysis.py computes them ({kb.n_aligned} problems with a baseline "
              f"time, sample 0, baseline mean): geomean speedup (correct) {kb.geomean_speedup_correct:.4f}")
        print(tabulate([[f"{p:g}", f"{v:.3f}"] for p, v in kb.fast_p.items()],
                       headers=["speedup threshold p", "fast_p (KernelBench)"], tablefmt="grid"))
    if args.json:
        data = {"run_dir": str(run_dir), "level": rd.level, "source": problems.source,
                "problem_set": identity.to_dict(),
                "kernelbench_compatible": kb.to_dict() if kb is not None else None,
                "baseline": str(baseline.path) if baseline else None,
                "baseline_mode": baseline.mode if baseline else None,
                "baseline_missing": [problem_ref(p.level, p.filename) for p in unbaselined],
                "sample_policy": args.sample_policy, **report.to_dict(),
                "baseline_drift": [d.to_dict() for d in drift],
                "timing_flags": [{"problem_id": r.problem_id, "sample_id": r.sample_id, "name": r.problem_name,
                                  "speedup": r.speedup,
                                  "speedup_ci95": [r.speedup_ci95.lo, r.speedup_ci95.hi] if r.speedup_ci95 else None,
                                  "flags": r.timing_flags, "host_share": r.host_share} for r in flagged]}
        write_json(args, json.dumps(data, indent=2, allow_nan=False))
    return 0


def _fmt(v: float | None, unit: str = "") -> str:
    return "n/a" if v is None else f"{v:.3f}{unit}"


def _fmt_ci(ci: tuple[float, float] | None) -> str:
    return "" if ci is None else f" [{ci[0]:.3f}, {ci[1]:.3f}]"
