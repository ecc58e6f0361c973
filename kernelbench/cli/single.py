"""``kernelbench single``: generate a kernel for one problem, evaluate it, print the kernel and the verdict.

The quickest way to try a model (or a prompt change) on one problem. Every call writes a fresh run
directory (``runs/single/<model>_level<L>_problem<P>_<time>`` unless ``--run-dir`` is given), so the
prompt, the raw reply and the result stay on disk. ``--kernel FILE`` skips generation and evaluates
a kernel you already have.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from kernelbench.cli.common import add_source_args, level_type
from kernelbench.cli.evaluate_run import add_eval_run_args
from kernelbench.cli.generate import add_model_args
from kernelbench.cli.run_cmd import add_refine_args


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "single", help="generate and evaluate one problem, printing the kernel and the verdict",
        description="Ask a model for one kernel for one problem, evaluate it and print both. With --turns N the "
                    "verdict goes back to the model and the best correct kernel is kept.",
    )
    p.add_argument("--level", type=level_type, required=True)
    p.add_argument("--problem-id", type=int, required=True)
    p.add_argument("--kernel", default=None, help="evaluate this kernel file instead of generating one")
    p.add_argument("--run-dir", default=None, help="where to keep the files (default: a new runs/single/... folder)")
    p.add_argument("--quiet-kernel", action="store_true", help="do not print the kernel source")
    add_refine_args(p)
    add_model_args(p, model_required=False)  # not needed with --kernel
    add_source_args(p)
    add_eval_run_args(p)
    p.set_defaults(func=run)


def _fresh_run_dir(args: argparse.Namespace) -> Path:
    from datetime import datetime

    from kernelbench.cli.generate import default_run_name
    from kernelbench.evaluation.settings import EvalSettings

    stamp = datetime.now().strftime("%Y%m%d-%H%M%S-%f")
    name = default_run_name(args.model, args.level, args.backend or EvalSettings.backend).replace(
        f"_level{args.level}_", f"_level{args.level}_problem{args.problem_id}_")
    return Path("runs") / "single" / f"{name}_{stamp}"


def run(args: argparse.Namespace) -> int:
    from kernelbench.backends import prompt_backends
    from kernelbench.cli.eval_cmd import format_verdict
    from kernelbench.cli.evaluate_run import make_runner, settings_for
    from kernelbench.cli.generate import check_resume, make_client, record_run_info
    from kernelbench.cli.run_cmd import make_profiler, target_gpu
    from kernelbench.errors import KernelBenchError
    from kernelbench.evaluation.settings import EvalJob, EvalSettings
    from kernelbench.generation.pipeline import PromptOptions, SpendTracker, generate_samples, refine_samples
    from kernelbench.problems import load_problems
    from kernelbench.prompts import PromptError
    from kernelbench.runs import RunDirectory, RunInfo

    backend = args.backend or EvalSettings.backend
    problems = load_problems(args.source, args.path, levels=[args.level])
    problem = problems.get(args.level, args.problem_id)
    settings = settings_for(args, RunInfo(backend=backend))
    runner = make_runner(args)

    if args.kernel:
        path = Path(args.kernel)
        if not path.is_file():
            raise KernelBenchError(f"kernel file {path} does not exist")
        source = path.read_text(encoding="utf-8")
        result = runner.run([EvalJob(problem, source, settings, 0)], progress=False)[0]
        if not args.quiet_kernel:
            print(f"# kernel: {path}\n```python\n{source.rstrip()}\n```\n")
        print(format_verdict(result, str(path)))
        return 0

    if not args.model:
        raise KernelBenchError("--model is required to generate a kernel (or pass --kernel FILE)")
    if backend not in prompt_backends():
        raise PromptError(f"--backend {backend}: generation has prompts for {', '.join(prompt_backends())} only")
    profiler = make_profiler(args, backend, settings.precision)
    client = make_client(args)
    run_path = Path(args.run_dir) if args.run_dir else _fresh_run_dir(args)
    rd = RunDirectory(run_path, level=args.level)
    check_resume(rd, client.config, backend, settings.precision)
    options = PromptOptions(backend, settings.precision, target_gpu(args), settings.tolerance_mode)
    selected = problems.select(ids=[problem.problem_id])
    record_run_info(rd, args, client.config, options, selected, 1, args.turns)
    tracker = SpendTracker(args.max_cost)
    print(f"Generating level {args.level} problem {args.problem_id} ({problem.name}) with {client.config.model} "
          f"into {run_path}", file=sys.stderr)

    if args.turns > 1:
        refined = refine_samples(selected, rd, client, options, settings, runner, args.turns, samples=1,
                                 concurrency=1, tracker=tracker, feedback=args.feedback, profiler=profiler)
        chain = refined.chains[0]
        for t in chain.turns:
            s = t.summary()
            print(f"turn {s['turn']}: {s['verdict']}" + (f" ({s['error']})" if s["error"] else "")
                  + (f", speedup {s['speedup']:.3f}x" if s["speedup"] else "")
                  + (f"; {s['profile'].splitlines()[0]}" if s.get("profile") and s["profile"].startswith(
                      "profile unavailable") else ""))
        best = chain.best()
        record = refined.generation.records[-1] if refined.generation.records else None
        source = best.source if best else None
        result = best.result if best else None
        if best is not None:
            print(f"best: turn {best.turn}")
    else:
        summary = generate_samples(selected, rd, client, options, samples=1, concurrency=1, tracker=tracker,
                                   progress=False)
        record = summary.records[0]
        source = record.kernel_path.read_text(encoding="utf-8") if record.kernel_path else None
        result = runner.run([EvalJob(problem, source, settings, 0)], progress=False)[0] if source else None
        if result is not None:
            rd.save_result(result)

    kernel_file = rd.kernel_path(args.level, args.problem_id, 0)
    if source is None:
        reason = record.reason if record is not None else "no kernel"
        print(f"FAILED: the model produced no kernel ({reason}); see {run_path}")
        return 0
    if not args.quiet_kernel:
        print(f"# kernel: {kernel_file}\n```python\n{source.rstrip()}\n```\n")
    if result is not None:
        print(format_verdict(result, str(kernel_file)))
    usage = record.usage if record is not None else None
    if usage is not None:
        cost = f", ${usage.cost_usd:.4f}" if usage.cost_usd is not None else ""
        print(f"\nlast request: {usage.prompt_tokens} prompt + {usage.completion_tokens} completion tokens{cost}, "
              f"{record.latency_s or 0:.1f}s; files in {run_path}")
    return 0
