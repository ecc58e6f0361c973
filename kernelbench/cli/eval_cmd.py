"""``kernelbench eval``: evaluate one kernel file against one problem and print the verdict."""

from __future__ import annotations

import argparse
from pathlib import Path

from kernelbench.cli.common import add_eval_args, add_runner_args, add_source_args, level_type


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "eval", help="evaluate one candidate kernel file against a problem",
        description="Compile, verify and time one candidate (a Python file defining ModelNew) against a "
                    "problem's reference. Exits 0 whatever the verdict; non-zero only for bad usage.",
    )
    p.add_argument("--level", type=level_type, required=True)
    p.add_argument("--problem-id", type=int, required=True)
    p.add_argument("--kernel", required=True, help="candidate source file defining ModelNew")
    p.add_argument("--json", action="store_true", help="print the full result as JSON")
    p.add_argument("--output", default=None, help="also write the result JSON to this file")
    add_source_args(p)
    add_eval_args(p)
    add_runner_args(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from kernelbench.cli.common import eval_settings_from_args
    from kernelbench.errors import KernelBenchError
    from kernelbench.evaluation.settings import EvalJob
    from kernelbench.io_utils import atomic_write_text
    from kernelbench.problems import load_problems
    from kernelbench.runners import get_runner

    path = Path(args.kernel)
    if not path.is_file():
        raise KernelBenchError(f"kernel file {path} does not exist")
    try:
        source = path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise KernelBenchError(f"kernel file {path} is not UTF-8 text") from None
    problems = load_problems(args.source, args.path, levels=[args.level])
    problem = problems.get(args.level, args.problem_id)
    try:
        settings = eval_settings_from_args(args)
    except ValueError as e:
        raise KernelBenchError(str(e)) from None
    job = EvalJob(problem=problem, candidate_source=source, settings=settings)
    runner = get_runner(args.runner, gpu=args.gpu)
    result = runner.run([job], progress=False)[0]
    if args.output:
        atomic_write_text(args.output, result.to_json() + "\n")
    if args.json:
        print(result.to_json())
    else:
        print(format_verdict(result, str(path)))
    return 0


def format_verdict(r, kernel_name: str = "") -> str:
    """A human verdict: what happened at each stage, the timings, and why it failed."""
    from tabulate import tabulate

    env = r.environment
    where = env.gpu_name if env and env.gpu_name else (env.device if env else "?")
    rows = [
        ["problem", f"level {r.level} problem {r.problem_id} ({r.problem_name})"],
        ["candidate", f"{kernel_name} [{r.backend}, {r.precision}]"],
        ["device", where],
        ["compiled", "yes" if r.compiled else "no"],
        ["correct", "yes" if r.correct else "no"],
    ]
    if r.correctness:
        c = r.correctness
        rows.append(["correctness trials", f"{c.trials_passed}/{c.trials_run} passed "
                                           f"(atol {c.atol:g}, rtol {c.rtol:g}"
                                           + (f", max abs err {c.max_abs_error:.3g}" if c.max_abs_error is not None else "")
                                           + ")"])
    if r.runtime is not None:
        rt = r.runtime
        lo, hi = rt.ci95_ms
        rows.append(["runtime", f"{rt.median_ms:.4f} ms median (95% CI {lo:.4f}-{hi:.4f}, n={rt.n})"])
    if r.ref_runtime is not None:
        rows.append(["reference runtime", f"{r.ref_runtime.median_ms:.4f} ms median (n={r.ref_runtime.n})"])
    if r.speedup is not None:
        rows.append(["speedup", f"{r.speedup:.3f}x"])
    if r.timing_note:
        rows.append(["timing", r.timing_note])
    if r.error is not None:
        rows.append(["failed at", r.error.stage.value])
        rows.append(["reason", f"{r.error.type}: {r.error.message.strip()[:2000]}"])
    for f in r.guard_findings:
        line = f" (line {f.line})" if f.line else ""
        rows.append([f"guard [{f.severity}]", f"{f.rule}{line}: {f.message}"])
    for flag in r.flags:
        rows.append(["flag", flag])
    verdict = "CORRECT" if r.correct else "FAILED"
    return f"{verdict}\n" + tabulate(rows, tablefmt="plain", maxcolwidths=[20, 100])
