#!/usr/bin/env python3
"""Add an evaluated entry to the leaderboard data and re-aggregate (KernelBench-leaderboard compatible).

    python scripts/update_leaderboard.py --level1 runs/my_model_level1 --level2 runs/my_model_level2 \
        --level3 runs/my_model_level3 --submission submissions/my_model.json --hardware H100

Each ``--levelN`` is a run directory (or its ``eval_results.json``) holding per-problem results; the
results are stored as ``data/evaluations/<entry>__<hardware>.json`` and every ``data/`` file is
recomputed with ``kernelbench.scoring``, exactly as ``kernelbench leaderboard aggregate`` does.
(The seed's score-summary files from benchmark_eval_analysis carry no per-problem results and are
refused with a message saying what to pass instead.)
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import _checkout  # noqa: F401  (this checkout's kernelbench and leaderboard first on the path)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description="Import evaluated runs of a submission and update data/.")
    for lv in (1, 2, 3, 4):
        p.add_argument(f"--level{lv}", default=None, help=f"level {lv} run directory or its eval_results.json")
    p.add_argument("--submission", required=True, help="the entry's submission JSON file")
    p.add_argument("--hardware", default="H100", help="GPU type the runs were evaluated on (default: H100)")
    p.add_argument("--data_dir", "--data-dir", default="data", help="leaderboard data folder (default: data)")
    p.add_argument("--evaluations_dir", "--evaluations-dir", default=None,
                   help="results bundles folder (default: <data_dir>/evaluations)")
    p.add_argument("--submissions_dir", "--submissions-dir", default=None,
                   help="all submissions (default: the folder of --submission)")
    p.add_argument("--baselines_dir", "--baselines-dir", default=None,
                   help="default: baselines/kernelbench for the official set, baselines for the built-in suite")
    p.add_argument("--exclusions", default="leaderboard/exclusions.json")
    from kernelbench.problems import source_names

    p.add_argument("--source", default="kernelbench", choices=source_names())
    p.add_argument("--path", default=None, help="folder or dataset for --source directory/huggingface")
    args = p.parse_args(argv)
    level_runs = {lv: getattr(args, f"level{lv}") for lv in (1, 2, 3, 4) if getattr(args, f"level{lv}")}
    if not level_runs:
        p.error("give at least one --levelN results path")

    from kernelbench.baselines import baseline_path_for_gpu, baselines_dir_for, load_baseline
    from kernelbench.errors import KernelBenchError
    from kernelbench.hardware import canonical_gpu
    from kernelbench.problems import load_board_problems
    from kernelbench.problems.identity import identify
    from leaderboard.aggregate import AggregateConfig, aggregate, check_baseline_set
    from leaderboard.bundle import write_bundle
    from leaderboard.evaluate import bundle_from_runs
    from leaderboard.schema import entry_id_for, load_submission

    data_dir = Path(args.data_dir)
    evaluations = Path(args.evaluations_dir) if args.evaluations_dir else data_dir / "evaluations"
    submissions = Path(args.submissions_dir) if args.submissions_dir else Path(args.submission).parent
    try:
        problems = load_board_problems(args.source, args.path)
        identity = identify(problems)
        baselines_dir = Path(args.baselines_dir) if args.baselines_dir else baselines_dir_for(identity.name)
        sub = load_submission(args.submission)
        entry = entry_id_for(args.submission)
        gpu = canonical_gpu(args.hardware) or args.hardware
        bundle = bundle_from_runs(sub, entry, level_runs, problems, gpu)
        # The baseline is checked before the bundle is written: a baseline of another set writes nothing.
        baseline_file = baseline_path_for_gpu(gpu, baselines_dir)
        if baseline_file.exists():
            check_baseline_set(identity, load_baseline(baseline_file), gpu)
        bundle_path = write_bundle(bundle, evaluations)
        result = aggregate(problems, AggregateConfig(
            submissions_dir=submissions, evaluations_dir=evaluations, baselines_dir=baselines_dir,
            exclusions_path=Path(args.exclusions), out_dir=data_dir))
    except (KernelBenchError, ValueError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    print(f"imported {len(bundle.results)} result(s) into {bundle_path}")
    for row in result.rows:
        if row.entry == entry and row.gpu == gpu:
            s = row.score
            print(f"{row.display_name} on {gpu}: rank {row.rank if row.rank is not None else '-'} "
                  f"({row.status}); correct {s.correctness_rate:.1%}, fast_1 {s.fast_p[1.0]:.1%}, "
                  f"fast_2 {s.fast_p[2.0]:.1%}, full-deck geomean {s.fulldeck_geomean:.3f}x")
    print(f"updated {data_dir}/ ({len(result.written)} files)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
