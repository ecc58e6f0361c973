#!/usr/bin/env python
"""Benchmark the evaluator itself: identity candidates (ModelNew = Model) over a problem set.

For each problem the candidate is the reference, so a perfect evaluator reports speedup 1.0.
Prints, per problem: wall time of the whole evaluation (both timings included), the reference
median, the identity speedup, timed calls per side; then a summary. Run on a GPU machine:

    python scripts/bench_evaluator.py --levels 1 2 3 --out bench.json
    python scripts/bench_evaluator.py --path ~/KernelBench/KernelBench --source directory --levels 1
    python scripts/bench_evaluator.py --repeat 5 --level 3 --problem-id 3   # timing spread
    python scripts/bench_evaluator.py --sandbox off --out off.json          # the OS sandbox's overhead
    python scripts/bench_evaluator.py --no-overlap --out before.json        # untimed work in turn (issue 25)
    python scripts/bench_evaluator.py --source directory --path /work/kb_official/KernelBench --levels 1 2 3
    python scripts/bench_evaluator.py ... --resume first.json --out all.json  # go on where a cut-short run stopped
                                                                   # (--out is written every 5 s and at the end)

Per level it also prints what issue 23 measures: identity speedup intervals that hold 1.0, identity
candidates significantly faster at p = 1, speedups outside [0.97, 1.03] without an imprecise or host-bound
flag, the problems flagged host-bound, infrastructure failures, and the GPU-seconds of the sweep (the sum
of every evaluation's wall time: each holds one GPU from its reference setup to its last check).
"""

from __future__ import annotations

import argparse
import json
import logging
import re
import statistics
import sys
import threading
import time
from pathlib import Path

import _checkout  # noqa: F401  (this checkout first on the path)

from kernelbench.evaluation import EvalJob, EvalSettings, evaluate_batch
from kernelbench.evaluation.parent import workers
from kernelbench.problems import load_problems


def identity_source(problem_code: str) -> str:
    from kernelbench.problems.contract import identity_candidate

    return identity_candidate(problem_code)


def previous_rows(path: str) -> tuple[list[dict], float]:
    """The rows an earlier run wrote (infrastructure failures left out: evaluated again) and its wall seconds."""
    try:
        data = json.loads(Path(path).read_text())
        rows = data["rows"]
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise SystemExit(f"--resume {path}: not a file bench_evaluator.py wrote ({e})") from None
    kept = [r for r in rows if not r.get("infrastructure")]
    if "total_s" in data:
        earlier = float(data["total_s"])
    else:  # cut short: what it had resumed from, and the wall between the results it added
        added = rows[int(data.get("new_from", 0)):]
        earlier = float(data.get("earlier_s", 0.0)) + sum(float(r.get("wall_s") or 0.0) for r in added)
    return kept, earlier


def command_totals(rows: list[dict]) -> dict[str, float]:
    """Seconds per worker command over the rows' recorded calls, largest first (trial and round numbers merged)."""
    out: dict[str, float] = {}
    for r in rows:
        for role, what, secs in r.get("calls") or []:
            key = f"{role}: {re.sub(r'[0-9]+', 'N', what)}"
            out[key] = out.get(key, 0.0) + float(secs)
    return dict(sorted(out.items(), key=lambda kv: -kv[1]))


def reference_starts(rows: list[dict]) -> dict[str, int]:
    """How the run's reference workers came to be: forked from the session's template, or started (the template off,
    or lost: its warning is in the log). A figure is comparable with another only where these agree."""
    out = {"forked": 0, "started": 0}
    for r in rows:
        for role, what, _ in r.get("calls") or []:
            if role == "reference" and what == workers.FORKED_START:
                out["forked"] += 1
            elif role == "reference" and what == workers.STARTED:
                out["started"] += 1
    return out


def identity_summary(rows: list[dict]) -> dict[int, dict]:
    """Per level (and 0 for all levels): the counts issue 23's acceptance needs, from the rows main() writes."""
    out: dict[int, dict] = {}
    for level in sorted({r["level"] for r in rows}) + [0]:
        rs = [r for r in rows if level == 0 or r["level"] == level]
        timed = [r for r in rs if r["speedup"] is not None]
        with_ci = [r for r in timed if r.get("ci95")]
        outside = [r for r in timed if not 0.97 <= r["speedup"] <= 1.03]
        out[level] = {
            "evaluated": len(rs),
            "correct": sum(1 for r in rs if r["correct"]),
            "infrastructure_failures": sum(1 for r in rs if r.get("infrastructure")),
            "timed": len(timed),
            "with_interval": len(with_ci),
            "interval_holds_1": sum(1 for r in with_ci if r["ci95"][0] <= 1.0 <= r["ci95"][1]),
            "significantly_faster_p1": sum(1 for r in with_ci if r["ci95"][0] > 1.0),
            "outside_3pct": len(outside),
            "outside_3pct_unflagged": [f"L{r['level']} #{r['problem_id']} {r['name']} {r['speedup']:.3f}"
                                       for r in outside if not r.get("timing_flags")],
            "imprecise": sum(1 for r in timed if "imprecise" in (r.get("timing_flags") or [])),
            "host_bound": [f"L{r['level']} #{r['problem_id']} {r['name']} (host share {r['host_share']:.2f})"
                           for r in timed if "host-bound" in (r.get("timing_flags") or [])],
            "gpu_seconds": sum(r["eval_s"] or 0.0 for r in rs),
            "timing_seconds": sum((r["stage_s"] or {}).get("timing", 0.0) for r in rs),
        }
    return out


def print_identity_summary(summary: dict[int, dict]) -> None:
    for level, s in summary.items():
        name = "all levels" if level == 0 else f"level {level}"
        w = max(1, s["with_interval"])
        print(f"{name}: {s['correct']}/{s['evaluated']} correct ({s['infrastructure_failures']} infrastructure "
              f"failures); intervals holding 1.0: {s['interval_holds_1']}/{s['with_interval']} "
              f"({s['interval_holds_1'] / w:.1%}); significantly faster at p=1: {s['significantly_faster_p1']}; "
              f"outside [0.97,1.03]: {s['outside_3pct']}, of them without a flag: {len(s['outside_3pct_unflagged'])}; "
              f"imprecise: {s['imprecise']}; host-bound: {len(s['host_bound'])}; GPU-seconds {s['gpu_seconds']:.1f} "
              f"(timing {s['timing_seconds']:.1f})")
        for line in s["outside_3pct_unflagged"]:
            print(f"    outside without a flag: {line}")
        if level != 0:
            for line in s["host_bound"]:
                print(f"    host-bound: {line}")


#: Seconds between writes of the partial results file (and one at the first result, one at the end).
PARTIAL_EVERY_S = 5.0


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--source", default="builtin")
    p.add_argument("--path", default=None)
    p.add_argument("--levels", type=int, nargs="*", default=[1, 2, 3])
    p.add_argument("--level", type=int, default=None)
    p.add_argument("--problem-id", type=int, nargs="*", default=None)
    p.add_argument("--repeat", type=int, default=1, help="evaluate each problem this many times")
    p.add_argument("--correctness-trials", type=int, default=EvalSettings.correctness_trials)
    p.add_argument("--timing-budget", type=float, default=EvalSettings.timing_budget_s)
    p.add_argument("--sandbox", choices=["auto", "require", "off"], default="auto",
                   help="OS sandbox around the candidate workers (compare require with off for its overhead)")
    p.add_argument("--reduced-size", action="store_true",
                   help="each problem at its declared CPU size (built-in suite; for checking the plumbing on a CPU)")
    p.add_argument("--no-overlap", action="store_true",
                   help="do every worker's untimed work in turn (EvalSettings.overlap off: the 'before' of issue 25)")
    p.add_argument("--out", default=None, help="write per-problem numbers as JSON")
    p.add_argument("--resume", default=None, metavar="JSON",
                   help="a file an earlier run wrote with --out (finished or cut short): its results are kept and "
                        "only the problems it lacks (or that failed on our side) are evaluated; the summary covers both "
                        "(a sweep longer than one device call: carry the file to the next)")
    p.add_argument("-v", "--verbose", action="store_true",
                   help="log every worker step with the GPU memory each process holds after it")
    args = p.parse_args()
    if args.verbose:
        logging.basicConfig(level=logging.DEBUG, format="%(asctime)s %(name)s %(message)s")
    levels = [args.level] if args.level else args.levels
    problems = load_problems(args.source, args.path, levels=levels).select(levels=levels)
    if args.problem_id:
        problems = problems.select(ids=args.problem_id)
    if args.reduced_size:
        from kernelbench.problems.model import at_reduced_sizes

        sized = at_reduced_sizes(problems)
        if not sized:
            p.error("--reduced-size: none of the selected problems declares a CPU_SIZE")
        print(f"--reduced-size: {len(sized)} of {len(list(problems))} selected problems declare a CPU size; "
              "the others are left out", file=sys.stderr)
        problems = sized
    settings = EvalSettings(backend="torch", correctness_trials=args.correctness_trials,
                            timing_budget_s=args.timing_budget, sandbox=args.sandbox, overlap=not args.no_overlap)
    rows, earlier_s = previous_rows(args.resume) if args.resume else ([], 0.0)
    have = {(r["level"], r["problem_id"], r["repeat"]) for r in rows}
    new_from = len(rows)  # the rows this run adds start here
    jobs = []
    for prob in problems:
        for r in range(args.repeat):
            if (prob.level, prob.problem_id, r) not in have:
                jobs.append(EvalJob(prob, identity_source(prob.code), settings, sample_id=r))
    if args.resume:
        print(f"--resume: {len(rows)} results kept from {args.resume} ({earlier_s:.1f} s of evaluation), "
              f"{len(jobs)} to evaluate", file=sys.stderr)
    t_start = time.perf_counter()
    done_at = [t_start]
    written_at = [t_start - PARTIAL_EVERY_S]  # (the first result is written at once)
    # Every answered worker command (and wait for a started worker) since the last result: one device evaluates one
    # job at a time, so these are the job's, in order (the row's "calls": where its stages spent their time).
    # (Spares' process starts and Inits are recorded too, from the threads that start them: under a lock.)
    calls: list[list] = []
    calls_lock = threading.Lock()

    def observe(role: str, what: str, seconds: float) -> None:
        with calls_lock:
            calls.append([role, what, round(seconds, 4)])

    workers.call_observer = observe

    def on_result(i: int, res) -> None:
        with calls_lock:
            taken = calls[:]
            calls.clear()
        now = time.perf_counter()
        wall = now - done_at[0]
        done_at[0] = now
        rows.append({
            "level": res.level, "problem_id": res.problem_id, "name": res.problem_name, "repeat": res.sample_id,
            "correct": res.correct, "error": res.error.one_line() if res.error else None,
            "wall_s": wall, "eval_s": res.wall_time_s, "ref_ms": res.ref_runtime_ms, "cand_ms": res.runtime_ms,
            "speedup": res.speedup, "n": res.runtime.n if res.runtime else 0,
            "stage_s": res.stage_times_s, "flags": res.flags,
            "gpu": res.environment.gpu_name if res.environment else None,
            "isolation": res.environment.isolation if res.environment else None,
            "cand_samples": res.runtime.samples_ms if res.runtime else [],
            "ref_samples": res.ref_runtime.samples_ms if res.ref_runtime else [],
            "timing_note": res.timing_note,
            "ci95": [res.speedup_ci95.lo, res.speedup_ci95.hi] if res.speedup_ci95 else None,
            "ci_rounds": res.speedup_ci95.rounds if res.speedup_ci95 else None,
            "timing_flags": list(res.timing_flags), "host_share": res.host_share,
            "own_kernel_share": res.own_kernel_share, "infrastructure": res.infrastructure_failure,
            "findings": [f"{f.severity}:{f.rule}" for f in res.guard_findings if f.severity != "info"],
            "warmup_calls": [res.runtime.warmup_calls if res.runtime else None,
                             res.ref_runtime.warmup_calls if res.ref_runtime else None],
            "calls": taken,
        })
        r = rows[-1]
        # Written as it goes, so a run cut short keeps what it measured (all but the last PARTIAL_EVERY_S seconds'):
        # this runs between two jobs, and writing all rows after every result took 7.7 s of a 250-problem sweep.
        if args.out and now - written_at[0] >= PARTIAL_EVERY_S:
            written_at[0] = now
            Path(args.out).write_text(json.dumps({"partial": True, "earlier_s": earlier_s, "new_from": new_from,
                                                  "rows": rows}))
        print(f"L{r['level']} #{r['problem_id']:<3} {r['name'][:34]:34} wall {wall:6.2f}s  "
              f"ref {r['ref_ms'] or float('nan'):9.4f} ms  speedup {r['speedup'] or float('nan'):6.3f}"
              + (f" [{r['ci95'][0]:.3f},{r['ci95'][1]:.3f}]" if r["ci95"] else "")
              + (f" host {r['host_share']:.2f}" if r["host_share"] is not None else "")
              + (f" {','.join(r['timing_flags'])}" if r["timing_flags"] else "") + "  "
              + f"n={r['n']:<4} [{' '.join(f'{k[:5]}={v:.1f}' for k, v in (r['stage_s'] or {}).items())}] "
              f"{'' if r['correct'] else 'FAILED ' + str(r['error'])}", flush=True)

    if jobs:
        evaluate_batch(jobs, on_result=on_result, progress=False)
    total = time.perf_counter() - t_start + earlier_s
    ok = [r for r in rows if r["speedup"] is not None]
    sp = [r["speedup"] for r in ok]
    print("\n=== summary ===")
    print(f"problems evaluated: {len(rows)}, correct with timing: {len(ok)}, total wall {total:.1f} s, "
          f"mean {total / max(1, len(rows)):.2f} s per evaluation, max {max((r['wall_s'] for r in rows), default=0):.2f} s")
    if sp:
        within3 = sum(1 for s in sp if 0.97 <= s <= 1.03)
        within1 = sum(1 for s in sp if 0.99 <= s <= 1.01)
        print(f"identity speedup: min {min(sp):.4f} max {max(sp):.4f} median {statistics.median(sp):.4f}; "
              f"within [0.97,1.03]: {within3}/{len(sp)}; within [0.99,1.01]: {within1}/{len(sp)} "
              f"({within1 / len(sp):.0%})")
    stages: dict[str, float] = {}
    for r in rows:
        for k, v in (r["stage_s"] or {}).items():
            stages[k] = stages.get(k, 0.0) + v
    isolations = sorted({str(r["isolation"]) for r in rows})
    print(f"isolation: {', '.join(isolations)}; overlap {'off' if args.no_overlap else 'on'}; "
          "mean seconds per evaluation by stage (what the job waited for): "
          + ", ".join(f"{k} {v / max(1, len(rows)):.3f}" for k, v in stages.items()))
    starts = reference_starts(rows)
    print(f"reference workers: {starts['forked']} forked from the template, {starts['started']} started")
    by_command = command_totals(rows)
    if by_command:
        print("mean seconds per evaluation by worker command (role: command, trial numbers merged): "
              + ", ".join(f"{k} {v / max(1, len(rows)):.3f}" for k, v in list(by_command.items())[:16]))
    summary = identity_summary(rows)
    print("\n=== issue 23: intervals, flags, GPU time ===")
    print_identity_summary(summary)
    if args.repeat > 1:
        by = {}
        for r in ok:
            by.setdefault((r["level"], r["problem_id"]), []).append(r["ref_ms"])
        for key, vals in sorted(by.items()):
            spread = (max(vals) - min(vals)) / statistics.median(vals)
            print(f"repeat spread L{key[0]} #{key[1]}: ref medians {', '.join(f'{v:.4f}' for v in vals)} ms; "
                  f"spread {spread:.2%}")
    if args.out:
        Path(args.out).write_text(json.dumps({"total_s": total, "sandbox": args.sandbox, "isolation": isolations,
                                              "overlap": not args.no_overlap, "reference_workers": starts,
                                              "stage_means_s": {k: v / max(1, len(rows)) for k, v in stages.items()},
                                              "command_means_s": {k: v / max(1, len(rows))
                                                                  for k, v in by_command.items()},
                                              "identity_summary": {str(k): v for k, v in summary.items()},
                                              "rows": rows}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
