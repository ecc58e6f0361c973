#!/usr/bin/env python3
"""Write a submission's kernels as KernelBench run directories, one per level.

    python scripts/submission_to_run.py --submission submissions/my_model.json [--output_dir runs] [--run_name NAME]

Creates ``<output_dir>/<run_name>_level<L>/level_<L>_problem_<P>_sample_<S>_kernel.py`` (the run name
defaults to the submission's file stem), ready for ``kernelbench evaluate-run``.
"""

from __future__ import annotations

import argparse
import sys

import _checkout  # noqa: F401  (this checkout's kernelbench and leaderboard first on the path)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description="Convert a submission JSON file into per-level run directories.")
    p.add_argument("--submission", required=True, help="submission JSON file")
    p.add_argument("--output_dir", "--output-dir", default="runs", help="folder of run directories (default: runs)")
    p.add_argument("--run_name", "--run-name", default=None, help="run name prefix (default: the file stem)")
    p.add_argument("--all_samples", "--all-samples", action="store_true", help="also write samples other than 0")
    args = p.parse_args(argv)

    from kernelbench.errors import KernelBenchError
    from leaderboard.convert import submission_to_runs
    from leaderboard.schema import entry_id_for, load_submission

    try:
        sub = load_submission(args.submission)
        name = args.run_name or entry_id_for(args.submission)
        runs = submission_to_runs(sub, args.output_dir, name, ranked_only=not args.all_samples)
    except KernelBenchError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    for lr in runs:
        print(f"level {lr.level}: {lr.n_kernels} kernel(s) -> {lr.path}"
              + (f" ({len(lr.stale)} stale file(s) left alone)" if lr.stale else ""))
    print("\nto evaluate:")
    for lr in runs:
        print(f"  kernelbench evaluate-run --run-dir {lr.path} --level {lr.level}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
