#!/usr/bin/env python3
"""Validate leaderboard submission files (KernelBench-leaderboard compatible entry point).

    python scripts/validate_submission.py --submission submissions/my_model.json \
        --json report.json --report_md report.md

Same checks as ``kernelbench leaderboard validate``; nothing in the submission is executed.
Exit code 0 when every file passes, 1 when any has an error, 2 for bad usage.
"""

from __future__ import annotations

import argparse
import sys

import _checkout  # noqa: F401  (this checkout's kernelbench and leaderboard first on the path)

from kernelbench.cli.common import add_json_arg, stdout_for_json, write_json


def main(argv: list[str] | None = None) -> int:
    from kernelbench.problems import source_names

    p = argparse.ArgumentParser(description="Validate leaderboard submission JSON files (never executes them).")
    p.add_argument("files", nargs="*", metavar="FILE", help="submission JSON file(s)")
    p.add_argument("--submission", action="append", default=[], help="a submission file (repeatable)")
    add_json_arg(p, "the full report", deprecated=("--report_json", "--report-json"))
    p.add_argument("--report_md", "--report-md", default=None, help="write a Markdown summary for a PR comment")
    p.add_argument("--source", default="kernelbench", choices=source_names(),
                   help="problem set the keys are checked against (default: kernelbench, the official levels 1-3 and, on "
                        "its own board, level 4; builtin is the demo)")
    p.add_argument("--path", default=None, help="folder or dataset for --source directory/huggingface")
    p.add_argument("--no_guard", "--no-guard", action="store_true", help="skip the static guard")
    args = p.parse_args(argv)
    files = [*args.files, *args.submission]
    if not files:
        p.error("give at least one submission file")
    with stdout_for_json(args):
        return _validate(args, files)


def _validate(args: argparse.Namespace, files: list[str]) -> int:
    from kernelbench.errors import KernelBenchError
    from kernelbench.io_utils import atomic_write_text
    from kernelbench.problems import load_board_problems
    from leaderboard.schema import is_submission_file
    from leaderboard.validate import validate_files

    if is_submission_file(args.json):
        print(f"error: --json {args.json} names a submission file, and the report would replace it", file=sys.stderr)
        return 2
    try:
        # The board's problems: for the official set, levels 1-3 and level 4 (its own board).
        problems = load_board_problems(args.source, args.path)
    except KernelBenchError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    report = validate_files(files, problems, use_guard=not args.no_guard, progress=True)
    write_json(args, report.to_json())
    if args.report_md:
        atomic_write_text(args.report_md, report.to_markdown())
    for f in report.files:
        for i in f.issues:
            if i.severity == "error" or (i.severity == "warning" and i.code != "missing-problems"):
                where = f" {i.key}" if i.key else ""
                print(f"{f.path}:{where}: {i.severity}: {i.message}")
        print(f"{f.path}: {'PASS' if f.passed else 'FAIL'} ({f.n_kernels} kernels, {f.n_errors} errors, "
              f"{f.n_warnings} warnings)")
    return 0 if report.passed else 1


if __name__ == "__main__":
    sys.exit(main())
