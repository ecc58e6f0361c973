"""``kernelbench run``: generate, evaluate and analyse one level in one command.

The three steps are the same code as ``generate``, ``evaluate-run`` and ``analyze``, on one run
directory, so an interrupted ``run`` resumes from where it stopped. With ``--turns N`` each sample
is refined: its verdict goes back to the model N-1 times and the best correct kernel is kept.
"""

from __future__ import annotations

import argparse
import sys

from kernelbench.cli.common import add_json_arg, add_source_args, positive_int
from kernelbench.cli.evaluate_run import add_eval_run_args
from kernelbench.cli.generate import add_model_args, add_run_dir_args, add_selection_args


def local_gpu_name() -> str | None:
    """The first local GPU's name from nvidia-smi (this process must not create a CUDA context)."""
    from kernelbench.hardware import local_gpu_names

    names = local_gpu_names(timeout_s=20)
    return names[0] if names else None


def target_gpu(args: argparse.Namespace) -> str | None:
    """The GPU the prompt describes: --target-gpu, else the one that will evaluate."""
    from kernelbench.cli.generate import prompt_gpu
    from kernelbench.hardware import find_gpu_spec

    if args.target_gpu:
        return prompt_gpu(args.target_gpu)
    if args.runner == "modal":
        return prompt_gpu(args.gpu)
    name = local_gpu_name()
    if name is None:
        return prompt_gpu(args.gpu)
    spec = find_gpu_spec(name)
    return spec.name if spec is not None else name


def add_refine_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--turns", type=positive_int, default=1,
                   help="refinement turns per sample: each verdict goes back to the model, the best correct "
                        "kernel is kept, every turn stays on disk (default 1: no refinement)")
    p.add_argument("--feedback", choices=("verdict", "profile"), default="verdict",
                   help="what goes back each turn: the verdict (errors and times), or also an Nsight Compute "
                        "profile of the last correct kernel (needs ncu and a local GPU; otherwise the prompt says "
                        "'profile unavailable: <why>'; see `kernelbench profile`)")
    p.add_argument("--target-gpu", default=None,
                   help="GPU the prompt describes (default: --gpu with --runner modal, else the local GPU) or 'none'")


def make_profiler(args: argparse.Namespace, backend: str, precision: str):
    """The profiler ``--feedback profile`` uses (None for ``--feedback verdict``); refuses it with one turn."""
    from kernelbench.errors import KernelBenchError

    if getattr(args, "feedback", "verdict") != "profile":
        return None
    if args.turns < 2:
        raise KernelBenchError("--feedback profile needs --turns 2 or more (the profile goes into the next turn's "
                               "prompt)")
    from kernelbench.generation.profiles import local_profiler, unavailable_profiler

    if args.runner != "local":
        return unavailable_profiler(f"profiles are taken with ncu on a local GPU; this run evaluates on {args.runner}")
    from kernelbench.profiling import ProfileOptions

    device = args.device if args.device and args.device.startswith("cuda") else "cuda:0"
    options = ProfileOptions(device=device, sandbox=args.sandbox, allow_network=getattr(args, "allow_network", False))
    return local_profiler(backend, precision, options)


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "run", help="generate, evaluate and analyse a level (resumable)",
        description="Generate kernels for a level with a model, evaluate them on the local GPUs (or Modal), and "
                    "print the fast_p table. Same run directory layout as generate / evaluate-run / analyze.",
    )
    add_selection_args(p)
    add_refine_args(p)
    add_model_args(p)
    add_run_dir_args(p)
    add_source_args(p)
    add_eval_run_args(p)
    g = p.add_argument_group("analysis")
    g.add_argument("--baseline", default=None,
                   help="baseline time file for speedups (default: the reference timed in the same session)")
    g.add_argument("--sample-policy", choices=["first", "best"], default="first",
                   help="which sample scores a problem: sample 0 (KernelBench) or the best correct one")
    add_json_arg(g, "the scores", deprecated=("--scores-out",))
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from kernelbench.backends import prompt_backends
    from kernelbench.cli import analyze
    from kernelbench.cli.evaluate_run import make_runner, print_evaluation_summary, settings_for
    from kernelbench.cli.generate import (
        check_resume,
        make_client,
        print_generation_summary,
        record_run_info,
        resolve_run_dir,
        select_problems,
    )
    from kernelbench.evaluation.settings import EvalSettings
    from kernelbench.generation.pipeline import PromptOptions, SpendTracker, generate_samples, refine_samples
    from kernelbench.generation.run_eval import evaluate_run_dir
    from kernelbench.prompts import PromptError
    from kernelbench.runs import RunDirectory, RunInfo

    backend = args.backend or EvalSettings.backend
    if backend not in prompt_backends():
        raise PromptError(f"--backend {backend}: generation has prompts for {', '.join(prompt_backends())} only")
    problems = select_problems(args)
    client = make_client(args)
    settings = settings_for(args, RunInfo(backend=backend))
    options = PromptOptions(backend, settings.precision, target_gpu(args), settings.tolerance_mode)
    run_path = resolve_run_dir(args, backend)
    rd = RunDirectory(run_path, level=args.level)
    check_resume(rd, client.config, options.backend, options.precision)
    record_run_info(rd, args, client.config, options, problems, args.samples, args.turns)
    runner = make_runner(args)
    tracker = SpendTracker(args.max_cost)
    profiler = make_profiler(args, backend, settings.precision)

    print(f"Run {run_path}: level {args.level}, {len(problems)} problem(s) x {args.samples} sample(s), "
          f"{client.config.model}, backend {backend}, {args.turns} turn(s)", file=sys.stderr)
    if args.turns > 1:
        refined = refine_samples(problems, rd, client, options, settings, runner, args.turns, samples=args.samples,
                                 concurrency=args.concurrency, tracker=tracker, feedback=args.feedback,
                                 profiler=profiler)
        gen_summary = refined.generation
    else:
        gen_summary = generate_samples(problems, rd, client, options, samples=args.samples,
                                       concurrency=args.concurrency, tracker=tracker)
    print_generation_summary(gen_summary, tracker, run_path)

    eval_summary = evaluate_run_dir(rd, problems, settings, runner, problem_ids=[p.problem_id for p in problems])
    print_evaluation_summary(eval_summary, run_path)

    print()
    analyze_args = argparse.Namespace(
        run_dir=str(run_path), baseline=args.baseline, gpu=None, baselines_dir="baselines", mode="eager",
        level=args.level, sample_policy=args.sample_policy, force=False, json=args.json,
        json_stdout=getattr(args, "json_stdout", sys.stdout), source=args.source, path=args.path)
    return analyze.run(analyze_args)
