#!/usr/bin/env python3
"""Bundle per-level run directories into one leaderboard submission file.

    python scripts/combine_runs_to_submission.py \
        --level1_run my_model_level1 --level2_run my_model_level2 --level3_run my_model_level3 \
        --output submissions/my_model.json --display_name "My Model" --organization "My Lab"

A run given by name is looked up under ``--runs_dir`` (default ``runs``); a path works as is.
Only sample 0 of each problem is included (the sample the leaderboard ranks). ``--solutions_dir``
takes a folder laid out like a problem set instead (``level<L>/<id>_<Name>.py``, e.g.
``kernelbench/solutions/triton``); its file names are checked against ``--source`` problems.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import _checkout  # noqa: F401  (this checkout's kernelbench and leaderboard first on the path)


def _resolve(run: str, runs_dir: str) -> Path:
    path = Path(run)
    if path.is_dir():
        return path
    return Path(runs_dir) / run


def main(argv: list[str] | None = None) -> int:
    from kernelbench.backends import submission_backends
    from kernelbench.problems import source_names

    p = argparse.ArgumentParser(description="Combine per-level run directories into a submission JSON file.")
    for lv in (1, 2, 3, 4):
        p.add_argument(f"--level{lv}_run", f"--level{lv}-run", dest=f"level{lv}_run", default=None,
                       help=f"run directory (or run name under --runs_dir) holding level {lv} kernels")
    p.add_argument("--runs_dir", "--runs-dir", default="runs", help="where run names are looked up (default: runs)")
    p.add_argument("--output", required=True, help="submission file to write, e.g. submissions/my_model.json")
    p.add_argument("--display_name", "--display-name", required=True, help="name shown on the leaderboard")
    p.add_argument("--organization", default=None)
    p.add_argument("--notes", default=None)
    p.add_argument("--model", default=None, help="model that produced the kernels")
    p.add_argument("--backend", choices=submission_backends(), default=None,
                   help="backend of all kernels (default: detected per kernel)")
    p.add_argument("--date", default=None, help="date the kernels were produced (YYYY-MM-DD)")
    p.add_argument("--solutions_dir", "--solutions-dir", default=None,
                   help="instead of runs: a folder of level<L>/<id>_<Name>.py kernels")
    p.add_argument("--source", default="builtin", choices=source_names(),
                   help="problem set that --solutions_dir file names are checked against (default: builtin)")
    p.add_argument("--path", default=None, help="folder or dataset for --source directory/huggingface")
    args = p.parse_args(argv)
    runs = {lv: _resolve(getattr(args, f"level{lv}_run"), args.runs_dir)
            for lv in (1, 2, 3, 4) if getattr(args, f"level{lv}_run")}
    if not runs and not args.solutions_dir:
        p.error("give at least one --levelN_run, or --solutions_dir")
    if runs and args.solutions_dir:
        p.error("give either --levelN_run options or --solutions_dir, not both")

    from pydantic import ValidationError

    from kernelbench.errors import KernelBenchError
    from kernelbench.problems import load_problems
    from leaderboard.convert import runs_to_submission, solutions_to_submission, write_submission
    from leaderboard.schema import Metadata

    fields = {"display_name": args.display_name, "organization": args.organization, "notes": args.notes,
              "model": args.model, "backend": args.backend, "date": args.date}
    try:
        metadata = Metadata.model_validate({k: v for k, v in fields.items() if v is not None})
    except ValidationError as e:
        first = e.errors()[0]
        print(f"error: --{first['loc'][0]}: {first['msg']}", file=sys.stderr)
        return 2
    try:
        if args.solutions_dir:
            sub = solutions_to_submission(args.solutions_dir, metadata, load_problems(args.source, args.path))
        else:
            sub = runs_to_submission(runs, metadata)
        path = write_submission(sub, args.output)
    except KernelBenchError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    counts: dict[int, int] = {}
    for key, _ in sub.kernel_items():
        counts[key.level] = counts.get(key.level, 0) + 1
    for lv, n in sorted(counts.items()):
        print(f"level {lv}: {n} kernel(s) from {runs.get(lv, args.solutions_dir)}")
    print(f"wrote {path} ({sum(counts.values())} kernels); check it with: "
          f"kernelbench leaderboard validate {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
