"""``kernelbench eval``: evaluate one kernel file against one problem and print the verdict."""

from __future__ import annotations

import argparse
import sys
import threading
import time
from pathlib import Path

from kernelbench.cli.common import add_eval_args, add_json_arg, add_runner_args, add_source_args, level_type


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "eval", help="evaluate one candidate kernel file against a problem",
        description="Compile, verify and time one candidate (a Python file defining ModelNew) against a "
                    "problem's reference. Exits 0 whatever the verdict; non-zero only for bad input or a crash (kernelbench --help).",
    )
    p.add_argument("--level", type=level_type, required=True)
    p.add_argument("--problem-id", type=int, required=True)
    p.add_argument("--kernel", required=True, help="candidate source file defining ModelNew")
    add_json_arg(p, "the full result", deprecated=("--output",))
    p.add_argument("--reduced-size", action="store_true",
                   help="run the problem at its declared CPU_SIZE (correctness only at a small size; the "
                        "result says so and is never scored)")
    add_source_args(p)
    add_eval_args(p)
    add_runner_args(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from kernelbench.cli.common import eval_settings_from_args, json_to_stdout, read_kernel_file, write_json
    from kernelbench.errors import KernelBenchError
    from kernelbench.evaluation.settings import EvalJob
    from kernelbench.problems import load_problems
    from kernelbench.runners import get_runner

    path = Path(args.kernel)
    source = read_kernel_file(args.kernel)
    problems = load_problems(args.source, args.path, levels=[args.level])
    problem = problems.get(args.level, args.problem_id)
    try:
        settings = eval_settings_from_args(args)
    except ValueError as e:
        raise KernelBenchError(str(e)) from None
    if args.reduced_size:
        try:
            problem = problem.at_reduced_size()
        except ValueError as e:
            raise KernelBenchError(f"--reduced-size: {e}") from None
    local_cpu = args.runner == "local" and _local_device(settings.device) == "cpu"
    if local_cpu and not problem.reduced_size:
        warning = cpu_size_warning(problem)
        if warning:
            print(warning, file=sys.stderr, flush=True)
    job = EvalJob(problem=problem, candidate_source=source, settings=settings)
    from kernelbench.cli.common import runner_options

    runner = get_runner(args.runner, gpu=args.gpu, **runner_options(args))
    print(f"evaluating {path} on level {problem.level} problem {problem.problem_id} ({problem.name})"
          + (" at reduced size" if problem.reduced_size else ""), file=sys.stderr, flush=True)
    with _Heartbeat() as beat:
        if args.runner == "local":
            from kernelbench.evaluation import evaluate_batch

            result = evaluate_batch([job], devices=getattr(runner, "devices", None), progress=False,
                                    on_stage=beat.stage_done)[0]
        else:
            result = runner.run([job], progress=False)[0]
    if not json_to_stdout(args):
        print(format_verdict(result, str(path)))
    write_json(args, result.to_json())
    return 0


#: Inputs above this many elements take minutes under the Triton interpreter (8_ReLU, 134M elements,
#: took 195-451 s and 8.5 GB on a 2-core machine, issue 27).
LARGE_CPU_ELEMENTS = 16 * 2**20
_SECONDS_PER_MELEMENT = 195 / 134  # the quiet-machine 8_ReLU measurement, as a rough rate


def _local_device(device: str | None) -> str:
    if device:
        return "cpu" if device == "cpu" else "cuda"
    from kernelbench.evaluation.parent import visible_devices

    return "cpu" if visible_devices() == ["cpu"] else "cuda"


def input_elements(problem) -> int | None:
    """Elements of the problem's inputs, built on torch's meta device (no memory, no compute).

    The problem code is trusted (it is the reference, not a candidate). None if it cannot be sized.
    """
    import torch

    ns: dict = {"__name__": f"kernelbench_size_probe_{problem.problem_id}"}
    try:
        exec(compile(problem.code, problem.filename, "exec"), ns)
        with torch.device("meta"):
            inputs = ns["get_inputs"]()
    except Exception:
        return None
    return sum(int(x.numel()) for x in inputs if isinstance(x, torch.Tensor))


def cpu_size_warning(problem) -> str | None:
    """What to say before interpreting a large problem on the CPU: an estimate and how to avoid it."""
    n = input_elements(problem)
    if n is None or n < LARGE_CPU_ELEMENTS:
        return None
    from kernelbench.problems.contract import reduced_size

    est = n / 1e6 * _SECONDS_PER_MELEMENT
    alt = ("rerun with --reduced-size to check correctness at its CPU_SIZE in seconds"
           if reduced_size(problem.code) else "it declares no CPU_SIZE (reduced size)")
    return (f"note: {problem.name} is sized for a GPU ({n / 1e6:.0f}M input elements, {n * 4 / 2**30:.1f} GiB "
            f"in fp32). On the CPU the Triton interpreter needs roughly {est / 60:.0f} min or more and several "
            f"GB for it; press Ctrl-C to stop, or {alt}.")


class _Heartbeat:
    """Prints the elapsed time every few seconds while an evaluation runs, so the CLI never sits silent."""

    def __init__(self, every_s: float = 5.0):
        self.every_s = every_s
        self._last: str | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._beat, daemon=True)

    def stage_done(self, _index: int, stage: str, seconds: float) -> None:
        self._last = stage
        print(f"  {stage.replace('_', ' ')} done ({seconds:.1f} s)", file=sys.stderr, flush=True)

    def _beat(self) -> None:
        started = time.monotonic()
        while not self._stop.wait(self.every_s):
            after = f", after {self._last.replace('_', ' ')}" if self._last else ""
            print(f"  ... still evaluating ({time.monotonic() - started:.0f} s{after})", file=sys.stderr, flush=True)

    def __enter__(self) -> _Heartbeat:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()


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
        iv = r.speedup_ci95
        text = f"{r.speedup:.3f}x"
        if iv is not None:
            text += f" (95% CI {iv.lo:.3f}-{iv.hi:.3f}, {iv.rounds} paired rounds)"
        rows.append(["speedup", text])
    for tf in r.timing_flags:
        if tf == "imprecise":
            rows.append(["timing flag", "imprecise: the timing rounds left the speedup's 95% interval wider than "
                                        "+/-2% when timing stopped; treat the speedup as the interval, not the point"])
        elif tf == "host-bound":
            rows.append(["timing flag", f"host-bound: the host needs {r.host_share:.2f}x the GPU's time to launch the "
                                        "forward, so the time follows the CPU"])
    if r.host_share is not None and "host-bound" not in r.timing_flags:
        rows.append(["host share", f"{r.host_share:.2f} (host enqueue time / GPU busy time)"])
    if r.own_kernel_share is not None:
        rows.append(["own kernels", f"{r.own_kernel_share:.0%} of the forward's GPU kernel time"])
    if r.infrastructure_failure:
        rows.append(["not a verdict", "our failure (the evaluator's, a worker pool's or a container's): evaluate "
                                      "again"])
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
    if r.reduced_size:
        sizes = ", ".join(f"{k}={v}" for k, v in r.reduced_size.items())
        rows.append(["size", f"REDUCED ({sizes}): correctness only, never scored"])
    verdict = "CORRECT" if r.correct else ("NOT EVALUATED" if r.infrastructure_failure else "FAILED")
    if r.reduced_size:
        verdict += " (reduced size)"
    return f"{verdict}\n" + tabulate(rows, tablefmt="plain", maxcolwidths=[20, 100])
