"""``kernelbench evaluate-run``: evaluate every kernel of a run directory that has no result yet.

Backend, precision, tolerance mode and problem source default to what ``run.json`` recorded at
generation time, so ``kernelbench evaluate-run --run-dir runs/x`` is enough. Each result is saved as
it arrives; an interrupted evaluation resumes where it stopped.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from kernelbench.cli.common import (
    add_eval_args,
    add_runner_args,
    add_source_args,
    level_type,
    positive_int,
    problem_ids,
)

if TYPE_CHECKING:
    from kernelbench.evaluation.settings import EvalSettings
    from kernelbench.generation.run_eval import EvaluationSummary
    from kernelbench.runners.base import Runner
    from kernelbench.runs import RunInfo


def add_eval_run_args(p: argparse.ArgumentParser) -> None:
    """Evaluation options whose defaults come from run.json (so they default to None here)."""
    from kernelbench.evaluation.settings import EvalSettings

    add_eval_args(p)
    add_runner_args(p)
    g = p.add_argument_group("batch evaluation")
    g.add_argument("--timeout", type=float, default=None,
                   help="seconds allowed per evaluation stage (init, one correctness trial, timing); "
                        f"default {EvalSettings.stage_timeout_s:g}")
    g.add_argument("--compile-timeout", type=float, default=None,
                   help=f"seconds allowed to build/import (default {EvalSettings.compile_timeout_s:g})")
    g.add_argument("--num-gpus", type=positive_int, default=None,
                   help="use the first N local GPUs (default: all visible); ignored with --runner modal")
    p.set_defaults(backend=None, precision=None, tolerance_mode=None)


def settings_for(args: argparse.Namespace, info: RunInfo) -> EvalSettings:
    """Command line over run.json over EvalSettings' defaults."""
    from kernelbench.errors import KernelBenchError
    from kernelbench.evaluation.settings import EvalSettings

    backend = args.backend or info.backend or EvalSettings.backend
    precision = args.precision or info.precision or EvalSettings.precision
    mode = args.tolerance_mode or info.tolerance_mode or EvalSettings.tolerance_mode
    extra = {}
    if args.timeout is not None:
        extra["stage_timeout_s"] = args.timeout
    if args.compile_timeout is not None:
        extra["compile_timeout_s"] = args.compile_timeout
    try:
        return EvalSettings(backend=backend, precision=precision, correctness_trials=args.correctness_trials,
                            tolerance_mode=mode, measure_timing=not args.no_timing,
                            timing_budget_s=args.timing_budget, device=args.device,
                            sandbox=args.sandbox, allow_network=args.allow_network, **extra)
    except ValueError as e:
        raise KernelBenchError(str(e)) from None


def make_runner(args: argparse.Namespace) -> Runner:
    from kernelbench.runners import get_runner

    devices = [f"cuda:{i}" for i in range(args.num_gpus)] if args.num_gpus and args.runner == "local" else None
    from kernelbench.cli.common import runner_options

    return get_runner(args.runner, gpu=args.gpu, devices=devices, **runner_options(args))


def print_evaluation_summary(summary: EvaluationSummary, run_dir: Path) -> None:
    from tabulate import tabulate

    results = summary.results
    print(f"\nEvaluation summary ({run_dir})")
    rows = [["results", len(results)], ["evaluated now", summary.evaluated],
            ["already evaluated", summary.already_done], ["no kernel (generation failed)", summary.placeholders]]
    for verdict, n in summary.verdict_counts().items():
        if verdict != "infrastructure-failure":
            rows.append([f"  {verdict}", n])
    print(tabulate(rows, tablefmt="simple"))
    if summary.infrastructure_failures:
        print(f"not evaluated (our failures, not verdicts; evaluate-run evaluates them again): "
              f"{summary.infrastructure_failures}")
    if results and len(results) <= 60:
        print()
        print(tabulate([[r.problem_id, r.sample_id, r.problem_name, r.verdict(),
                         f"{r.speedup:.3f}x" if r.speedup is not None else "",
                         (r.error.one_line()[:80] if r.error else "")] for r in results],
                       headers=["problem", "sample", "name", "verdict", "speedup", "error"], tablefmt="simple"))


def resolve_source(args: argparse.Namespace, info: RunInfo, run_dir: Path) -> tuple[str, str | None]:
    """--source, else run.json's, else ./KernelBench/ (a KernelBench checkout); never silently builtin."""
    from kernelbench.problems.resolve import resolve_run_source

    choice = resolve_run_source(run_dir, source=args.source, path=args.path, run_info=info, cwd=Path.cwd())
    return choice.source, choice.path


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "evaluate-run", help="evaluate the kernels of a run directory (resumable)",
        description="Evaluate every kernel of a run directory that has no result yet, on the local GPUs or on "
                    "Modal, saving each result to eval_results.json as it arrives. A sample whose generation "
                    "failed is recorded as a load failure.",
    )
    g = p.add_argument_group("run directory")
    g.add_argument("--run-dir", default=None, help="run directory holding the *_kernel.py files")
    g.add_argument("--run-name", default=None, help="run name under --runs-dir (instead of --run-dir)")
    g.add_argument("--runs-dir", default="runs", help="parent folder of run directories (default runs)")
    p.add_argument("--level", type=level_type, default=None, help="level of the run (default: from the run)")
    p.add_argument("--problem-ids", default=None, help="only these problem ids, e.g. 1,3,5-8")
    p.add_argument("--reevaluate", action="store_true", help="evaluate again kernels that already have a result")
    add_source_args(p, default_help="the run's: run.json, else ./KernelBench/ (never silently builtin)")
    p.set_defaults(source=None)
    add_eval_run_args(p)
    p.set_defaults(func=run)


def run_dir_from(args: argparse.Namespace) -> Path:
    from kernelbench.errors import KernelBenchError

    if args.run_dir:
        return Path(args.run_dir)
    if args.run_name:
        return Path(args.runs_dir) / args.run_name
    raise KernelBenchError("name the run: --run-dir PATH or --run-name NAME")


def run(args: argparse.Namespace) -> int:
    from kernelbench.cli.generate import merged_problem_set
    from kernelbench.errors import RunDirectoryError
    from kernelbench.generation.run_eval import evaluate_run_dir
    from kernelbench.problems import load_problems
    from kernelbench.problems.identity import identify
    from kernelbench.runs import RunDirectory
    from kernelbench.setcheck import check_run

    path = run_dir_from(args)
    if not path.is_dir():
        raise RunDirectoryError(f"run directory {path} does not exist")
    rd = RunDirectory(path, level=args.level)
    if rd.level is None:
        raise RunDirectoryError(f"cannot tell the level of {path}: no kernels and no run.json; pass --level")
    info = rd.info()
    source, source_path = resolve_source(args, info, path)
    problems = load_problems(source, source_path, levels=[rd.level])
    # Results already in the run must be of the same set; then the run records it (run.json).
    identity = identify(problems)
    check_run(identity, problems, rd.load_results().values(), info.problem_set, f"run {path}")
    rd.write_info(problem_set=merged_problem_set(rd, info, problems))
    ids = problem_ids(args.problem_ids, "--problem-ids")
    settings = settings_for(args, info)
    runner = make_runner(args)
    print(f"Evaluating {path} (level {rd.level}, {settings.backend}, {settings.precision}) with the "
          f"{args.runner} runner", file=sys.stderr)
    summary = evaluate_run_dir(rd, problems, settings, runner, reevaluate=args.reevaluate, problem_ids=ids)
    print_evaluation_summary(summary, path)
    return 0
