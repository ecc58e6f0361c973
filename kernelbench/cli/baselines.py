"""``kernelbench baselines``: time every problem's reference on this GPU type and write ``baselines/<GPU>.json``."""

from __future__ import annotations

import argparse
import sys

from kernelbench.cli.common import (
    add_runner_args,
    add_source_args,
    level_type,
    non_negative_int,
    positive_int,
    problem_ids,
)

ALL_MODES = ("eager", "compile-default", "compile-max-autotune", "compile-cudagraphs")


def _mode_type(value: str) -> str:
    if value != "all" and value not in ALL_MODES:
        raise argparse.ArgumentTypeError(f"unknown mode {value!r} (choose from all, {', '.join(ALL_MODES)})")
    return value


def _positive_float(value: str) -> float:
    try:
        v = float(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number of seconds, got {value!r}") from None
    if not v > 0:
        raise argparse.ArgumentTypeError(f"expected a positive number of seconds, got {value!r}")
    return v


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "baselines", help="measure reference (PyTorch) times per problem on this GPU type",
        description="Time each selected problem's reference with the evaluator's timing protocol (warm-up, fresh "
                    "inputs, L2 flushed, adaptive stopping) in PyTorch eager and torch.compile modes, and write "
                    "baselines/<gpu-name>.json. Resumable: times already in the file are kept, and each time is "
                    "written as soon as it is measured. A problem that fails is recorded in the file and skipped.",
    )
    p.add_argument("--gpu-name", default=None,
                   help="GPU the file is for, e.g. H100 (default: this machine's GPU; with --runner modal, --gpu)")
    p.add_argument("--levels", nargs="+", type=level_type, default=None, metavar="LEVEL",
                   help="levels to measure (default: every level of the source)")
    p.add_argument("--problem-id", default=None, help="only these problem ids, e.g. 1,3,5-8")
    p.add_argument("--modes", nargs="+", type=_mode_type, default=["all"], metavar="MODE",
                   help=f"baseline modes: {', '.join(ALL_MODES)} or all (default: all)")
    p.add_argument("--out", default=None, help="baseline file to write (default: <baselines-dir>/<gpu-name>.json)")
    p.add_argument("--baselines-dir", default=None,
                   help="folder of per-GPU baseline files (default: baselines/kernelbench for the official set, "
                        "baselines otherwise)")
    from kernelbench.constants import PRECISIONS
    from kernelbench.evaluation.settings import EvalSettings as S  # the defaults, so they are stated once

    g = p.add_argument_group("timing")
    g.add_argument("--timing-budget", type=_positive_float, default=S.timing_budget_s,
                   help="seconds of timed calls per problem and mode (default %(default)g)")
    from kernelbench.baselines.measure import BASELINE_MIN_TRIALS

    g.add_argument("--min-trials", type=positive_int, default=None,
                   help=f"timed calls at least (default {BASELINE_MIN_TRIALS}), unless the budget runs out first")
    g.add_argument("--max-trials", type=positive_int, default=None,
                   help=f"timed calls at most (default {S.max_timing_trials})")
    g.add_argument("--compile-timeout", type=_positive_float, default=None,
                   help="seconds allowed to build one problem's reference, torch.compile included "
                        f"(default {S.compile_timeout_s:g})")
    g.add_argument("--compile-jobs", type=non_negative_int, default=None, metavar="N",
                   help="compile references for the torch.compile modes in N parallel workers before timing them "
                        "one at a time (default: half the CPU cores, at most 8; 0: compile inside each timed run)")
    g.add_argument("--spares", type=non_negative_int, default=None, metavar="N",
                   help="reference workers kept started ahead, so no measurement waits for Python and torch to "
                        "start (default 6; each holds a CUDA context of about 0.5 GB: lower it on a small GPU)")
    g.add_argument("--timeout", type=_positive_float, default=None,
                   help=f"seconds allowed per other stage (default {S.stage_timeout_s:g})")
    g.add_argument("--precision", choices=PRECISIONS, default=S.precision,
                   help="precision of inputs and weights (default %(default)s)")
    g.add_argument("--device", default=None,
                   help="cuda:N (default: the first GPU); cpu times on the CPU, for testing only")
    r = p.add_argument_group("resuming")
    r.add_argument("--restart", action="store_true", help="ignore the times already in the file and start over")
    r.add_argument("--skip-failed", action="store_true",
                   help="do not retry (problem, mode) pairs whose failure the file records")
    r.add_argument("--force", action="store_true",
                   help="write into a file from another GPU type, timing protocol or precision anyway")
    r.add_argument("--deadline", type=_positive_float, default=None,
                   help="stop starting new measurements after this many seconds (run again to continue)")
    r.add_argument("--strict", action="store_true", help="exit with status 1 if any measurement failed")
    add_source_args(p)
    add_runner_args(p)
    p.set_defaults(func=run)


def expand_modes(modes: list[str]) -> list[str]:
    out: list[str] = []
    for m in modes:
        for x in (ALL_MODES if m == "all" else (m,)):
            if x not in out:
                out.append(x)
    return out


def _select(args: argparse.Namespace):
    from kernelbench.errors import KernelBenchError
    from kernelbench.problems import load_problems

    problems = load_problems(args.source, args.path, levels=args.levels)
    if args.levels:
        problems = problems.select(levels=args.levels)
    ids = problem_ids(args.problem_id, "--problem-id")
    if ids:
        problems = problems.select(ids=ids)
    if not problems:
        raise KernelBenchError("no problems selected")
    return problems


def _local_target(args: argparse.Namespace) -> tuple[str, str]:
    """(device, GPU label) for a local run; refuses the CPU unless asked for and a --gpu-name that is not this GPU."""
    from kernelbench.errors import BaselineError
    from kernelbench.evaluation.parent import visible_devices
    from kernelbench.hardware import gpu_family, gpu_label, local_gpu_names

    device = args.device or visible_devices()[0]
    if device == "cpu":
        if args.device != "cpu":
            raise BaselineError("no GPU is visible: baselines are GPU timings (use --runner modal --gpu H100, or "
                                "--device cpu to time on the CPU for testing)")
        return device, args.gpu_name or "cpu"
    if not device.startswith("cuda"):
        raise BaselineError(f"--device {device!r}: expected cuda:N or cpu")
    index = int(device.split(":", 1)[1]) if ":" in device else 0
    names = local_gpu_names()
    local = names[index] if index < len(names) else None
    if args.gpu_name is None:
        if local is None:
            raise BaselineError("cannot tell this GPU's name (nvidia-smi gave none): pass --gpu-name, e.g. H100")
        return device, gpu_label(local)
    if local is not None and gpu_family(local) != gpu_family(args.gpu_name) and not args.force:
        raise BaselineError(f"--gpu-name {args.gpu_name} but {device} is {local!r}: the file would hold another "
                            "GPU's times (drop --gpu-name, or pass --force)")
    return device, args.gpu_name


def run(args: argparse.Namespace) -> int:
    from pathlib import Path

    from tabulate import tabulate

    from kernelbench.baselines import (
        BaselineFile,
        LocalMeasurer,
        baseline_path_for_gpu,
        baseline_settings,
        baselines_dir_for,
        measure_into,
        measure_into_via_modal,
        warm_compile_caches,
    )

    modes = expand_modes(args.modes)
    problems = _select(args)
    runner = None
    if args.runner == "modal":
        from kernelbench.cli.common import load_modal_app
        from kernelbench.runners.modal_runner import ModalRunner

        runner = ModalRunner(gpu=args.gpu, app_loader=load_modal_app)
        device, label = None, args.gpu_name or runner.gpu
    else:
        device, label = _local_target(args)
    settings = baseline_settings(args.timing_budget, args.min_trials, args.max_trials, args.compile_timeout,
                                 args.timeout, args.precision, device)
    if args.out:
        out = Path(args.out)
    else:
        from kernelbench.problems.identity import identify

        out = baseline_path_for_gpu(label, args.baselines_dir or baselines_dir_for(identify(problems).name))
    file = BaselineFile.open(out, label, precision=args.precision, restart=args.restart, force=args.force)

    where = f"Modal {runner.gpu}" if runner is not None else device
    print(f"Baselines for {label} on {where}: {len(problems)} problems x {len(modes)} mode(s) "
          f"({', '.join(modes)}) from {problems.source} -> {out}", file=sys.stderr)
    if runner is not None:
        report = measure_into_via_modal(file, problems, modes, settings, runner, retry_failed=not args.skip_failed)
    else:
        warm = warm_compile_caches(file, problems, modes, settings, device, args.compile_jobs,
                                   retry_failed=not args.skip_failed,
                                   deadline_s=None if args.deadline is None else args.deadline / 2)
        if warm.outcomes:
            print(warm.summary(), file=sys.stderr)
        deadline = None if args.deadline is None else max(0.0, args.deadline - warm.wall_s)
        with LocalMeasurer(device, args.spares,
                           preload_compiler=any(m != "eager" for m in modes)) as measure:
            report = measure_into(file, problems, modes, settings, measure, retry_failed=not args.skip_failed,
                                  deadline_s=deadline)

    print(tabulate(report.summary_rows(), headers=["level", "mode", "measured", "already in file", "failed",
                                                   "not tried", "seconds"], disable_numparse=True))
    if report.failures:
        print("\nfailures (recorded in the file; a rerun retries them unless --skip-failed):")
        print(tabulate([[f"level {o.level}", o.filename, o.mode, (o.error or "")[:110]] for o in report.failures],
                       tablefmt="plain"))
    for note in report.notes:
        print(f"note: {note}")
    state = "complete" if report.complete else "incomplete"
    print(f"\n{out}: {state}; {report.count('measured')} measured, {report.count('reused')} already there, "
          f"{report.count('failed')} failed in {report.wall_s:.1f} s")
    if report.stopped:
        print(f"stopped: {report.stopped}; run the same command again to continue")
    return 1 if (args.strict and report.failures) else 0
