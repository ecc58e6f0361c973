#!/usr/bin/env python3
"""What a smaller minimum of timed calls would have changed in recorded sweeps, replayed exactly (issue 25).

    python scripts/replay_timing_stop.py docs/measurements/bench_official_250_H200_s24_final_run*.json
    python scripts/replay_timing_stop.py --min-trials 12 18 20 --json replay.json RUN.json [RUN.json ...]

A candidate timing stops for precision only after whole ABBA cycles of at least ``timing.MIN_ROUNDS`` rounds and
at least ``min_timing_trials`` calls per side. Level 1's and 2's large problems run blocks of 3 calls (a call takes
over 8 ms), so a minimum of 20 calls meant 8 rounds where 4 were the protocol's own minimum. Every row of a
``scripts/bench_evaluator.py`` file keeps each side's timed calls in the order they ran and the block size, so the
stop rule can be asked again after each even round, with the same calls: the first round where it would have
stopped under the smaller minimum is where that run would have ended (the calls up to there are the very ones
it made; the budget had not run out there, since the run went on). Rows the rule does not stop earlier keep
their recorded end.

Prints, per file and minimum: the identity counts ``bench_evaluator.py`` reports (speedups outside [0.97, 1.03]
and [0.99, 1.01], intervals holding 1.0, flagged imprecise) before and after, the calls per side saved, and the
timing seconds saved, estimated from each row's own timing seconds per timed call (round trips included).
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from dataclasses import asdict, dataclass, replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from kernelbench.evaluation.parent.candidate_timing import stop_rule  # noqa: E402
from kernelbench.evaluation.settings import EvalSettings  # noqa: E402
from kernelbench.evaluation.timing import should_stop  # noqa: E402
from kernelbench.results import KernelResult, TimingStats  # noqa: E402

_NOTE = re.compile(r"(\d+) timed calls per side in (\d+) rounds; stopped: (.*)")


@dataclass
class Identity:
    """The identity counts of one set of timings (``bench_evaluator.identity_summary``'s, plus within 1%)."""

    timed: int = 0
    outside_3pct: int = 0
    outside_1pct: int = 0
    interval_holds_1: int = 0
    imprecise: int = 0
    calls_per_side: int = 0

    def add(self, ref: list[float], cand: list[float], block: int, host_share: float | None) -> None:
        # (a result as the evaluator makes it: its interval and flags by the rules every result follows)
        r = KernelResult(level=0, problem_id=0, problem_name="replayed", backend="torch", compiled=True, correct=True,
                         runtime=TimingStats(samples_ms=cand, block_calls=block),
                         ref_runtime=TimingStats(samples_ms=ref, block_calls=block), host_share=host_share)
        speedup, iv = r.speedup, r.speedup_ci95
        self.timed += 1
        self.outside_3pct += not 0.97 <= speedup <= 1.03
        self.outside_1pct += not 0.99 <= speedup <= 1.01
        self.interval_holds_1 += iv is not None and iv.lo <= 1.0 <= iv.hi
        self.imprecise += "imprecise" in r.timing_flags
        self.calls_per_side += len(cand)


@dataclass
class Replay:
    file: str
    min_trials: int
    rows: int
    stopped_earlier: int
    recorded: Identity
    replayed: Identity
    timing_s_saved: float


def replayed_end(ref: list[float], cand: list[float], block: int, min_trials: int) -> int:
    """Calls per side after which the stop rule, with ``min_trials``, first stops for precision (else all)."""
    # The evaluator's rule with this floor; no budget or call limit: the recorded run did not reach them before its end.
    rule = replace(stop_rule(EvalSettings(min_timing_trials=min_trials)), max_trials=10**9, budget_s=float("inf"))
    n = min(len(ref), len(cand))
    for rounds in range(1, n // block + 1):
        k = rounds * block
        if k >= n:
            break
        stop, _ = should_stop(rule, cand[:k], ref[:k], 0.0, 0.0, rounds, block_calls=block)
        if stop:
            return k
    return n


def replay(path: Path, min_trials: int) -> Replay:
    data = json.loads(path.read_text())
    rows = data["rows"] if isinstance(data, dict) else data
    before, after = Identity(), Identity()
    earlier, saved, used = 0, 0.0, 0
    for r in rows:
        m = _NOTE.match(r.get("timing_note") or "")
        ref, cand = r.get("ref_samples") or [], r.get("cand_samples") or []
        if not m or not ref or not cand or r.get("speedup") is None:
            continue
        n, rounds = int(m[1]), int(m[2])
        if n != len(ref) or n != len(cand) or rounds <= 0 or n % rounds:
            raise SystemExit(f"{path}: L{r['level']} #{r['problem_id']}: its timing note says {n} calls in {rounds} "
                             f"rounds but it holds {len(ref)} and {len(cand)} samples")
        block = n // rounds
        used += 1
        before.add(ref, cand, block, r.get("host_share"))
        k = replayed_end(ref, cand, block, min_trials)
        after.add(ref[:k], cand[:k], block, r.get("host_share"))
        if k < n:
            earlier += 1
            stages = r.get("stage_s") or {}
            timing = float(stages.get("timing", 0.0)) - float(stages.get("spare_wait", 0.0))
            saved += timing * (n - k) / n
    return Replay(str(path), min_trials, used, earlier, before, after, saved)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("files", nargs="+", type=Path, help="bench_evaluator.py results files (JSON)")
    ap.add_argument("--min-trials", nargs="+", type=int, default=[12, 18, 20],
                    help="minimums of timed calls per side to replay (default: 12 18 20)")
    ap.add_argument("--json", type=Path, help="also write the replays here")
    args = ap.parse_args(argv)
    if any(m < 1 for m in args.min_trials):
        ap.error("--min-trials: each minimum must be at least 1")
    out = []
    for path in args.files:
        if not path.is_file():
            ap.error(f"{path}: no such file")
        for m in args.min_trials:
            try:
                rep = replay(path, m)
            except (ValueError, KeyError, TypeError) as e:
                print(f"{path}: not a bench_evaluator.py results file ({e})", file=sys.stderr)
                return 2
            out.append(rep)
            b, a = rep.recorded, rep.replayed
            print(f"{path.name}  min {m:3d}: {rep.rows} timed, {rep.stopped_earlier} stop earlier; calls per side "
                  f"{b.calls_per_side} -> {a.calls_per_side}; timing s saved ~{rep.timing_s_saved:.1f}; outside 3%: "
                  f"{b.outside_3pct} -> {a.outside_3pct}; outside 1%: {b.outside_1pct} -> {a.outside_1pct}; "
                  f"intervals holding 1.0: {b.interval_holds_1} -> {a.interval_holds_1}; imprecise: "
                  f"{b.imprecise} -> {a.imprecise}")
    if args.json:
        args.json.write_text(json.dumps([asdict(r) for r in out], indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
