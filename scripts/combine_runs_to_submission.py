#!/usr/bin/env python3
"""Bundle per-level run directories into one leaderboard submission file.

    python scripts/combine_runs_to_submission.py \
        --level1_run my_model_level1 --level2_run my_model_level2 --level3_run my_model_level3 \
        --output submissions/my_model.json --display_name "My Model" --organization "My Lab"

A run given by name is looked up under ``--runs_dir`` (default ``runs``); a path works as is.
Only sample 0 of each problem is included (the sample the leaderboard ranks).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path


def _resolve(run: str, runs_dir: str) -> Path:
    path = Path(run)
    if path.is_dir():
        return path
    return Path(runs_dir) / run


def main(argv: list[str] | None = None) -> int:
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
    p.add_argument("--backend", choices=["cuda", "triton"], default=None,
                   help="backend of all kernels (default: detected per kernel)")
    p.add_argument("--date", default=None, help="date the kernels were produced (YYYY-MM-DD)")
    args = p.parse_args(argv)
    runs = {lv: _resolve(getattr(args, f"level{lv}_run"), args.runs_dir)
            for lv in (1, 2, 3, 4) if getattr(args, f"level{lv}_run")}
    if not runs:
        p.error("give at least one --levelN_run")

    from pydantic import ValidationError

    from kernelbench.errors import KernelBenchError
    from leaderboard.convert import runs_to_submission, write_submission
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
        sub = runs_to_submission(runs, metadata)
        path = write_submission(sub, args.output)
    except KernelBenchError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    counts: dict[int, int] = {}
    for key, _ in sub.kernel_items():
        counts[key.level] = counts.get(key.level, 0) + 1
    for lv, n in sorted(counts.items()):
        print(f"level {lv}: {n} kernel(s) from {runs[lv]}")
    print(f"wrote {path} ({sum(counts.values())} kernels); check it with: "
          f"kernelbench leaderboard validate {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
