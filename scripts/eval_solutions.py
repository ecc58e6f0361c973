"""Evaluate every worked solution through the full evaluator, guards on: the no-false-positive check.

    python scripts/eval_solutions.py                         # every solution, every backend
    python scripts/eval_solutions.py --backend triton --only 1:8 2:1 --out eval_solutions.json

Each solution goes through ``evaluate_batch`` exactly as a submitted kernel would (static guard,
separate candidate process, fresh-input correctness trials, runtime launch tracing, timing against
the reference). A worked solution is hand-written and correct, so anything other than a correct
verdict with no failing guard finding is a defect, in the solution or in the evaluator (a false
positive). The worked solutions must also stay free of *warning* findings (issue 23: a warning such as
``library-output`` or ``side-stream`` on a hand-written kernel is a false positive as well). The table
shows the verdict, the speedup over PyTorch eager, what share of device time the solution's own kernels
took and every warning or error finding; the exit status is 1 when any solution fails or has a warning
or error finding, 2 for bad usage.

With no GPU, Triton solutions run under the Triton interpreter (set ``TRITON_INTERPRET=1``) and
CUDA, CuTe and TileLang solutions cannot run: pass ``--backend triton``. Without ``--backend``, a backend
whose package is not installed (``kernelbench[cute]``, ``kernelbench[tilelang]``) is skipped with a line
saying so; named with ``--backend``, its solutions are evaluated and each gets the missing-package result.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import re
import sys
import time
from pathlib import Path

_SHARE_RE = re.compile(r"take (\d+)% of device time")


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    from kernelbench.backends import solution_backends

    p = argparse.ArgumentParser(prog="eval_solutions.py", description=__doc__.strip().splitlines()[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter,
                                epilog="\n".join(__doc__.strip().splitlines()[1:]))
    p.add_argument("--backend", action="append", choices=solution_backends(), default=None,
                   help="only this backend (repeatable; default: every backend with worked solutions)")
    p.add_argument("--only", nargs="+", default=None, metavar="L:P",
                   help="only these problems, as level:id (e.g. 1:8 2:1)")
    from kernelbench.evaluation.settings import EvalSettings

    p.add_argument("--correctness-trials", type=int, default=EvalSettings.correctness_trials,
                   help="fresh-input correctness trials (%(default)s)")
    p.add_argument("--timing-budget", type=float, default=EvalSettings.timing_budget_s,
                   help="seconds of timed calls per side (%(default)s)")
    p.add_argument("--no-timing", action="store_true", help="check correctness and guards only")
    p.add_argument("--device", default=None, help="cuda:N or cpu (default: the first GPU, else the CPU)")
    p.add_argument("--out", default=None, help="write every result (KernelResult JSON) and the summary here")
    return p.parse_args(argv)


def _parse_only(items: list[str] | None) -> set[tuple[int, int]] | None:
    if not items:
        return None
    wanted = set()
    for item in items:
        m = re.fullmatch(r"(\d+):(\d+)", item.strip())
        if not m:
            raise ValueError(f"--only expects level:id such as 1:8, got {item!r}")
        wanted.add((int(m.group(1)), int(m.group(2))))
    return wanted


def own_share(result) -> float | None:
    """The share of device time the solution's own kernels took: the result's ``own_kernel_share`` (the
    forward's launch trace), else the figure in the runtime launch report (results from before it existed)."""
    if result.own_kernel_share is not None:
        return result.own_kernel_share
    for f in result.guard_findings:
        if f.rule == "launch-report":
            m = _SHARE_RE.search(f.message)
            if m:
                return int(m.group(1)) / 100
    return None


def flagged_findings(result) -> list:
    """The findings that make a worked solution a defect: every warning and error (info is a report)."""
    return [f for f in result.guard_findings if f.severity in ("warning", "error")]


def solution_ok(result) -> bool:
    """A worked solution passes only when correct with no warning or error finding."""
    return bool(result.correct) and not flagged_findings(result)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    try:
        wanted = _parse_only(args.only)
    except ValueError as e:
        print(f"eval_solutions.py: error: {e}", file=sys.stderr)
        return 2

    from tabulate import tabulate

    from kernelbench.backends import get_backend, solution_backends
    from kernelbench.evaluation import EvalJob, EvalSettings, evaluate_batch
    from kernelbench.problems import load_builtin
    from kernelbench.solutions import list_solutions

    backends = args.backend or list(solution_backends())
    if not args.backend:  # not asked for by name: a backend whose package is missing is skipped, and said so
        for b in [b for b in backends if get_backend(b).missing_packages()]:
            print(f"eval_solutions: skipping {b}: {get_backend(b).missing_message()}", file=sys.stderr)
            backends.remove(b)
    solutions = [s for b in backends for s in list_solutions(b)
                 if wanted is None or (s.level, s.problem_id) in wanted]
    if not solutions:
        print("eval_solutions.py: error: no worked solution matches --backend/--only", file=sys.stderr)
        return 2
    suite = load_builtin(sorted({s.level for s in solutions}))
    base = EvalSettings(correctness_trials=args.correctness_trials, timing_budget_s=args.timing_budget,
                        measure_timing=not args.no_timing, device=args.device)
    # Backends that build ahead (CUDA) last: the GPU evaluates the others while those build on the CPU.
    order = sorted(solutions, key=lambda s: (get_backend(s.backend).builds_ahead, s.backend, s.level, s.problem_id))
    jobs = [EvalJob(suite.get(s.level, s.problem_id), s.source, base.with_(backend=s.backend)) for s in order]
    print(f"eval_solutions: {len(jobs)} worked solutions ({', '.join(backends)})", file=sys.stderr)
    started = time.monotonic()
    results = evaluate_batch(jobs, progress=True)
    wall = time.monotonic() - started

    rows, records, bad = [], [], 0
    for s, r in zip(order, results):
        noted = flagged_findings(r)
        ok = solution_ok(r)
        bad += not ok
        share = own_share(r)
        rows.append([s.backend, f"L{s.level} {s.name}", r.verdict(),
                     f"{r.runtime_ms:.4g}" if r.runtime_ms else "-",
                     f"{r.speedup:.3f}" if r.speedup else "-",
                     f"{share:.0%}" if share is not None else "-",
                     "; ".join(f"{f.severity} {f.rule}" for f in noted) or "-",
                     (r.error.one_line()[:70] if r.error else "")])
        # The source's hash lets a later import (scripts/solutions_bundle.py) prove which code was measured.
        records.append({"backend": s.backend, "level": s.level, "problem_id": s.problem_id, "name": s.name,
                        "ok": ok, "own_share": share,
                        "source_sha256": hashlib.sha256(s.source.encode("utf-8")).hexdigest(),
                        "result": json.loads(r.to_json())})
    print(tabulate(rows, headers=["backend", "solution", "verdict", "ms", "speedup", "own share", "findings",
                                  "error"]))
    print(f"\n{len(results) - bad}/{len(results)} worked solutions correct with no warning or error finding "
          f"({wall:.0f} s)")
    if args.out:
        from kernelbench.io_utils import atomic_write_text

        summary = {"wall_s": wall, "n": len(results), "n_ok": len(results) - bad,
                   "environment": json.loads(results[0].environment.model_dump_json()) if results[0].environment
                   else None, "solutions": records}
        atomic_write_text(Path(args.out), json.dumps(summary, indent=1))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
