"""``kernelbench demo``: the project end to end in seconds, through the real evaluator and guards."""

from __future__ import annotations

import argparse
import sys
import time

from kernelbench.cli.common import add_json_arg


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "demo", help="evaluate a few worked, wrong and cheating kernels and show the verdicts (start here)",
        description="Send four candidates (Triton and torch worked solutions, a wrong kernel, an exploit) "
                    "through the full evaluator: separate worker processes, correctness trials on fresh "
                    "inputs, static and runtime guards. With a GPU they run at full size and are timed "
                    "against the reference; without one they run at the problems' reduced CPU size "
                    "(correctness only), in well under a minute. Exits 1 if a verdict is not the expected one.",
    )
    p.add_argument("--device", default=None, help="cuda:N or cpu (default: the first GPU, else the CPU)")
    p.add_argument("--full-size", action="store_true",
                   help="on the CPU, run the problems at full size (minutes and gigabytes) instead of CPU_SIZE")
    p.add_argument("--correctness-trials", type=int, default=3, help="trials per candidate (default 3)")
    add_json_arg(p, "the results")
    p.set_defaults(func=run)


def speed_cell(result) -> str:
    """The table's speedup: the figure with its 95% interval and timing flags (see the README on reading
    them), and the candidate's median time; "-" when nothing was timed (the CPU path)."""
    if result.speedup is None or result.runtime is None:
        return "-"
    text = f"{result.speedup:.2f}x"
    iv = result.speedup_ci95
    if iv is not None:
        text += f" (95% CI {iv.lo:.2f}-{iv.hi:.2f})"
    text += f", cand. {result.runtime.median_ms:.3f} ms"
    if result.timing_flags:
        text += f"; {', '.join(result.timing_flags)}"
    return text


def run(args: argparse.Namespace) -> int:
    from tabulate import tabulate

    from kernelbench.cli.common import write_json
    from kernelbench.demo import CASES, demo_problem, meets_expectation
    from kernelbench.errors import KernelBenchError
    from kernelbench.evaluation import EvalJob, EvalSettings, evaluate_batch
    from kernelbench.evaluation.parent import visible_devices
    from kernelbench.problems import load_problems

    if args.correctness_trials < 1:
        raise KernelBenchError("--correctness-trials must be at least 1")
    device = args.device or visible_devices()[0]
    if not (device == "cpu" or device.startswith("cuda")):
        raise KernelBenchError(f"--device {device!r}: expected cpu or cuda:N")
    on_gpu = device.startswith("cuda")
    reduced = not on_gpu and not args.full_size
    problems = load_problems("builtin", None, levels=[1])
    jobs = []
    for case in CASES:
        problem = demo_problem(problems.get(case.level, case.problem_id), reduced)
        settings = EvalSettings(backend=case.backend, device=device, correctness_trials=args.correctness_trials,
                                measure_timing=on_gpu)
        jobs.append(EvalJob(problem=problem, candidate_source=case.read_source(), settings=settings))

    where = device if on_gpu else "cpu (Triton under its interpreter)"
    size = "full size, timed" if on_gpu else ("reduced CPU size, correctness only" if reduced else "full size")
    print(f"kernelbench demo: {len(jobs)} candidates on {where}, {size}", file=sys.stderr, flush=True)
    started = time.monotonic()

    def on_result(i: int, result) -> None:
        ok = "as expected" if meets_expectation(CASES[i], result) else "NOT AS EXPECTED"
        print(f"  [{time.monotonic() - started:5.1f}s] {CASES[i].label}: {result.verdict()} ({ok})",
              file=sys.stderr, flush=True)

    results = evaluate_batch(jobs, devices=[device], on_result=on_result, progress=False)
    elapsed = time.monotonic() - started

    rows = []
    all_ok = True
    for case, r in zip(CASES, results):
        ok = meets_expectation(case, r)
        all_ok &= ok
        why = case.why
        if r.failing_findings:
            why = f"guard {r.failing_findings[0].rule}: {r.failing_findings[0].message}"
        elif r.correctness and not r.correct:
            c = r.correctness
            why = f"{c.trials_passed}/{c.trials_run} trials passed" + (
                f", max abs err {c.max_abs_error:.3g}" if c.max_abs_error is not None else "")
        elif r.error is not None:
            why = f"{r.error.type}: {r.error.message.strip()[:120]}"
        rows.append([case.label, f"L{r.level} P{r.problem_id} {r.problem_name}", r.verdict(), speed_cell(r),
                     "yes" if ok else "NO", why])
    print(tabulate(rows, headers=["candidate", "problem", "verdict", "speedup", "expected", "why"],
                   maxcolwidths=[None, None, None, 36, None, 60]))
    print(f"\n{len(results)} candidates in {elapsed:.1f} s; "
          + ("every verdict as expected." if all_ok else "SOME VERDICTS WERE NOT AS EXPECTED."))
    if reduced:
        print("Ran at the problems' reduced CPU size (CPU_SIZE): correctness only; such results are never "
              "scored. With a GPU the same command times each candidate at full size.")
    if args.json:
        import json

        write_json(args, json.dumps([r.model_dump(mode="json") for r in results], indent=1))
    print("\nNext:\n"
          "  kernelbench eval --level 1 --problem-id 8 --backend triton --kernel MY_KERNEL.py   # your kernel\n"
          "  kernelbench problems                          # the built-in suite\n"
          "  python scripts/eval_solutions.py              # every worked solution (GPU: minutes)\n"
          "  kernelbench run --help                        # generate candidates with an LLM and score a run")
    return 0 if all_ok else 1
