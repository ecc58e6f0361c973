"""``kernelbench guard FILE...``: the static guard report for candidate sources, never running them."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from kernelbench.cli.common import add_json_arg, json_to_stdout, write_json


def register(sub: argparse._SubParsersAction) -> None:
    from kernelbench.backends import DEFAULT_BACKEND, backend_names

    p = sub.add_parser(
        "guard", help="static reward-hacking checks on candidate sources (no execution)",
        description="Read candidate kernel sources and report guard findings (monkey-patching, threads, "
                    "side streams, try/except fallbacks, missing kernel launches, ...). Exit status: 0 when "
                    "no file has an error finding, 1 when one does, 2 for bad usage.",
    )
    p.add_argument("files", nargs="*", metavar="FILE", help="candidate source files (Python)")
    p.add_argument("--backend", choices=("auto", *backend_names()), default="auto",
                   help="what the candidates are written in (default: auto, detected from each file's imports "
                        f"as the leaderboard does; {DEFAULT_BACKEND} when nothing marks a backend)")
    add_json_arg(p, "the reports (a list, one entry per file)")
    p.add_argument("--quiet", action="store_true", help="text form: only the per-file verdict lines")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from kernelbench.backends import DEFAULT_BACKEND, detect_backend
    from kernelbench.evaluation.guards import analyze_source

    if args.json is not None and args.json.endswith(".py"):
        # `guard --json a.py b.py` from before --json took a path: a.py is a candidate, not where JSON goes.
        args.files.insert(0, args.json)
        args.json = "-"
    if not args.files:
        print("error: give at least one candidate file", file=sys.stderr)
        return 2
    sources: list[tuple[str, str]] = []
    for name in args.files:
        path = Path(name)
        if not path.is_file():
            print(f"error: no such file: {name}", file=sys.stderr)
            return 2
        try:
            sources.append((name, path.read_text(encoding="utf-8")))
        except (OSError, UnicodeDecodeError) as e:
            print(f"error: cannot read {name}: {e}", file=sys.stderr)
            return 2

    from kernelbench.progress import progress_bar

    results = []
    for name, text in progress_bar(sources, desc="guard", unit="file", enabled=len(sources) >= 20):
        backend = (detect_backend(text) or DEFAULT_BACKEND) if args.backend == "auto" else args.backend
        results.append((name, analyze_source(text, backend)))

    if args.json:
        import json

        write_json(args, json.dumps([{"path": name, **report.model_dump(mode="json")} for name, report in results],
                                    indent=2))
    if not json_to_stdout(args):
        for name, report in results:
            print(f"{name}: {report.summary()}")
            if not args.quiet and report.findings:
                for line in report.to_text().splitlines():
                    print(f"  {line}")
        if len(results) > 1:
            from tabulate import tabulate

            rows = [[name, r.backend, "pass" if r.passed else "FAIL", len(r.errors), len(r.warnings)]
                    for name, r in results]
            print()
            print(tabulate(rows, headers=["file", "backend", "verdict", "errors", "warnings"]))
    return 0 if all(r.passed for _, r in results) else 1
