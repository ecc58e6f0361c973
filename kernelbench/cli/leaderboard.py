"""``kernelbench leaderboard validate|to-run|evaluate|aggregate|build``: the maintainer's workflow.

The ``leaderboard`` package is imported inside the handlers only: ``kernelbench`` never imports it
at module import time, and ``--help`` stays fast. It is a folder of the repository, not part of the
installed package: every handler first makes it importable from a checkout (``kernelbench.cli.checkout``).
"""

from __future__ import annotations

import argparse
import functools
import sys
from collections.abc import Callable
from pathlib import Path

from kernelbench.cli.common import add_eval_args, add_json_arg, add_runner_args, add_source_args

#: The public board ranks the official set; ``--source builtin`` is the offline demo board.
BOARD_DEFAULT_HELP = ("kernelbench: the official levels 1-3, 250 problems, with level 4 (Hugging Face models) "
                     "as a board of its own; --source builtin is the offline demo")


def _board_sources(p: argparse.ArgumentParser) -> None:
    add_source_args(p, default="kernelbench", default_help=BOARD_DEFAULT_HELP)


def _board_problems(args: argparse.Namespace):
    """The board's problems: the official levels 1-3 by default, and level 4 for its own board (read, never run)."""
    from kernelbench.problems import load_board_problems

    return load_board_problems(args.source, args.path)


def _from_checkout(handler: Callable[[argparse.Namespace], int]) -> Callable[[argparse.Namespace], int]:
    """``handler`` once ``leaderboard`` is importable from a checkout (else a one-line error, exit 2)."""

    @functools.wraps(handler)
    def run(args: argparse.Namespace) -> int:
        from kernelbench.cli.checkout import import_from_checkout

        import_from_checkout("leaderboard", "kernelbench leaderboard")
        return handler(args)

    return run


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "leaderboard", help="validate submissions, evaluate them, aggregate results and build the site",
        description="The public leaderboard: submission JSON -> validation -> evaluation -> data/ -> static site.",
    )
    lsub = p.add_subparsers(dest="leaderboard_command", metavar="ACTION", required=True)

    v = lsub.add_parser(
        "validate", help="check submission files (never executes them)",
        description="Check submission JSON files: metadata, kernel keys against the problem set, size limits, "
                    "that each kernel parses and defines ModelNew, and the static guard. Every problem is "
                    "reported; the exit code is 1 if any file has an error.",
    )
    v.add_argument("files", nargs="+", metavar="FILE", help="submission JSON file(s)")
    add_json_arg(v, "the full report", deprecated=("--report-json",))
    v.add_argument("--report-md", default=None, metavar="F", help="write a Markdown summary (for a PR comment)")
    v.add_argument("--no-guard", action="store_true", help="skip the static guard")
    v.add_argument("--quiet", action="store_true", help="print only the summary table")
    _board_sources(v)
    v.set_defaults(func=_from_checkout(_validate))

    t = lsub.add_parser(
        "to-run", help="write a submission's kernels as run directories (one per level)",
        description="Write runs/<name>_level<L>/level_<L>_problem_<P>_sample_<S>_kernel.py for each kernel, "
                    "KernelBench's layout, ready for 'kernelbench evaluate-run'.",
    )
    t.add_argument("submission", metavar="SUBMISSION", help="submission JSON file")
    t.add_argument("--runs-dir", default="runs", help="folder that holds run directories (default: runs)")
    t.add_argument("--name", default=None, help="run name prefix (default: the submission's file stem)")
    t.add_argument("--all-samples", action="store_true", help="also write samples other than sample 0")
    t.set_defaults(func=_from_checkout(_to_run))

    e = lsub.add_parser(
        "evaluate", help="evaluate a submission locally or on Modal and write its results bundle",
        description="Evaluate every sample-0 kernel of a submission (resuming where a previous run stopped) and "
                    "write data/evaluations/<entry>__<GPU>.json for 'leaderboard aggregate'.",
    )
    e.add_argument("submission", metavar="SUBMISSION", help="submission JSON file")
    e.add_argument("--runs-dir", default="runs", help="where the per-level run directories go (default: runs)")
    e.add_argument("--results-dir", default="data/evaluations",
                   help="where the results bundle goes (default: data/evaluations)")
    e.add_argument("--entry", default=None, help="entry id (default: the submission's file stem)")
    add_runner_args(e)
    add_eval_args(e, sandbox_default="require")
    _board_sources(e)
    e.set_defaults(func=_from_checkout(_evaluate))

    a = lsub.add_parser(
        "aggregate", help="recompute data/ from submissions, results bundles and baselines",
        description="Score every results bundle with kernelbench.scoring and write data/index.json, "
                    "data/results/, data/problems/ and data/kernels/. Same inputs give byte-identical files.",
    )
    a.add_argument("--submissions-dir", default="submissions", help="submission JSON files (default: submissions)")
    a.add_argument("--evaluations-dir", default="data/evaluations",
                   help="results bundles from 'leaderboard evaluate' (default: data/evaluations)")
    a.add_argument("--baselines-dir", default=None,
                   help="folder of <GPU>.json baseline files (default: baselines/kernelbench for the official set, "
                        "baselines for the built-in suite)")
    a.add_argument("--baseline-mode", default="eager", help="baseline mode to score against (default: eager)")
    a.add_argument("--exclusions", default="leaderboard/exclusions.json",
                   help="maintainers' exclusion list (default: leaderboard/exclusions.json, if present)")
    a.add_argument("--out", default="data", help="output folder (default: data)")
    _board_sources(a)
    a.set_defaults(func=_from_checkout(_aggregate))

    b = lsub.add_parser(
        "build", help="render the static site from data/",
        description="Render the leaderboard as static HTML (jinja2, no external requests): ranking per GPU and "
                    "level, entry pages, problem pages, fast_p curves and a how-to-submit page.",
    )
    b.add_argument("--out", default="site", help="output folder (default: site)")
    b.add_argument("--data", default="data", help="folder written by 'leaderboard aggregate' (default: data)")
    b.add_argument("--base-title", default="KernelBench Leaderboard", help="site title")
    b.set_defaults(func=_from_checkout(_build))


def _validate(args: argparse.Namespace) -> int:
    from tabulate import tabulate

    from kernelbench.cli.common import write_json
    from kernelbench.errors import KernelBenchError
    from kernelbench.io_utils import atomic_write_text
    from leaderboard.schema import is_submission_file
    from leaderboard.validate import validate_files

    if is_submission_file(args.json):
        raise KernelBenchError(f"--json {args.json} names a submission file, and the report would replace it: "
                               "give the submission files after a new report path (or --json - for stdout)")
    problems = _board_problems(args)
    report = validate_files(args.files, problems, use_guard=not args.no_guard, progress=True)
    write_json(args, report.to_json())
    if args.report_md:
        atomic_write_text(args.report_md, report.to_markdown())
    if not args.quiet:
        for f in report.files:
            for i in f.issues:
                if (i.severity == "info" and i.code not in ("needs-hub", "not-on-modal")) or i.code == "missing-problems":
                    continue
                where = f" {i.key}" if i.key else ""
                line = f" line {i.line}" if i.line else ""
                print(f"{f.path}:{where}{line}: {i.severity}: {i.message} [{i.code}]")
    rows = []
    for f in report.files:
        cover = ", ".join(f"L{lv} {f.kernels_per_level.get(lv, 0)}/{n}"
                          + (" (own board)" if lv in report.separate_levels else "")
                          for lv, n in sorted(f.problems_per_level.items()))
        rows.append([f.path, f.display_name or "-", f.n_kernels, cover, f.n_errors, f.n_warnings,
                     "pass" if f.passed else "FAIL"])
    print()
    print(tabulate(rows, headers=["file", "display name", "kernels", "coverage", "errors", "warnings", "result"]))
    if args.report_md:
        print(f"wrote {args.report_md}")
    return 0 if report.passed else 1


def _to_run(args: argparse.Namespace) -> int:
    from tabulate import tabulate

    from leaderboard.convert import submission_to_runs
    from leaderboard.schema import entry_id_for, load_submission

    sub = load_submission(args.submission)
    name = args.name or entry_id_for(args.submission)
    runs = submission_to_runs(sub, args.runs_dir, name, ranked_only=not args.all_samples)
    rows = [[lr.level, str(lr.path), lr.n_kernels, len(lr.written), len(lr.stale)] for lr in runs]
    print(tabulate(rows, headers=["level", "run directory", "kernels", "written", "stale files"]))
    print("\nto evaluate: " + "; ".join(
        f"kernelbench evaluate-run --run-dir {lr.path} --level {lr.level}" for lr in runs))
    return 0


def _evaluate(args: argparse.Namespace) -> int:
    from tabulate import tabulate

    from kernelbench.cli.common import eval_settings_from_args, runner_options
    from leaderboard.evaluate import evaluate_submission

    problems = _board_problems(args)
    settings = eval_settings_from_args(args)
    ev = evaluate_submission(args.submission, problems, settings, runs_dir=args.runs_dir,
                             results_dir=args.results_dir, runner_name=args.runner, gpu=args.gpu,
                             entry=args.entry, progress=True, runner_options=runner_options(args))
    verdicts: dict[str, int] = {}
    for r in ev.results:
        verdicts[r.verdict()] = verdicts.get(r.verdict(), 0) + 1
    rows = [[v, n] for v, n in sorted(verdicts.items())]
    print(tabulate(rows, headers=["verdict", "kernels"]))
    print(f"\n{ev.entry} on {ev.gpu}: {ev.n_evaluated} evaluated now, {ev.n_reused} reused from earlier runs")
    if ev.bundle_path:
        print(f"wrote {ev.bundle_path}; next: kernelbench leaderboard aggregate")
        return 0
    for r in sorted(ev.no_verdict, key=lambda r: (r.level, r.problem_id, r.sample_id))[:10]:
        print(f"no verdict for {r.key}: {r.error.one_line() if r.error else 'not evaluated'}", file=sys.stderr)
    if len(ev.no_verdict) > 10:
        print(f"... and {len(ev.no_verdict) - 10} more without a verdict", file=sys.stderr)
    print("some kernels have no result yet: run the same command again to resume", file=sys.stderr)
    return 1


def _aggregate(args: argparse.Namespace) -> int:
    from tabulate import tabulate

    from kernelbench.baselines import baselines_dir_for
    from kernelbench.problems.identity import identify
    from leaderboard.aggregate import AggregateConfig, aggregate

    problems = _board_problems(args)
    baselines_dir = Path(args.baselines_dir) if args.baselines_dir else baselines_dir_for(identify(problems).name)
    config = AggregateConfig(submissions_dir=Path(args.submissions_dir), evaluations_dir=Path(args.evaluations_dir),
                             baselines_dir=baselines_dir, exclusions_path=Path(args.exclusions),
                             out_dir=Path(args.out), baseline_mode=args.baseline_mode)
    result = aggregate(problems, config, progress=True)
    headers = ["gpu", "rank", "entry", "audit", "correct", "fast_1", "fast_2", "geomean (correct)",
               "full-deck geomean"]
    print(tabulate(_board_table(result.rows), headers=headers, disable_numparse=True))
    for lv, rows in sorted(result.separate.items()):
        print(f"\nlevel {lv}, a board of its own (not in the overall): entries with level-{lv} kernels, speedups "
              f"against {' / '.join(sorted({r.speedup_basis for r in rows}))}")
        print(tabulate(_board_table(rows), headers=headers, disable_numparse=True))
    if result.pending:
        print(f"\nnot evaluated yet: {', '.join(result.pending)}")
    print(f"\nwrote {len(result.written)} file(s) under {args.out}"
          + (f", removed {len(result.removed)} stale file(s)" if result.removed else ""))
    return 0


def _board_table(rows) -> list[list]:
    out = []
    for r in rows:
        s = r.score
        out.append([r.gpu, r.rank if r.rank is not None else "-", r.entry, r.status,
                    f"{s.correctness_rate:.1%}", f"{s.fast_p[1.0]:.1%}", f"{s.fast_p[2.0]:.1%}",
                    f"{s.geomean_speedup:.3f}" if s.geomean_speedup is not None else "n/a",
                    f"{s.fulldeck_geomean:.3f}"])
    return out


def _build(args: argparse.Namespace) -> int:
    from tabulate import tabulate

    from leaderboard.site import build_site

    built = build_site(Path(args.data), Path(args.out), title=args.base_title, progress=True)
    counts: dict[str, int] = {}
    for page in built.pages:
        kind = page.parent.name if page.parent != built.out_dir else "top level"
        counts[kind] = counts.get(kind, 0) + 1
    print(tabulate(sorted(counts.items()), headers=["pages", "count"]))
    print(f"\nsite written to {built.out_dir} (open {built.out_dir / 'index.html'})")
    return 0
