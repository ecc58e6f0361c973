"""Timing a candidate against its reference in the same run, and checking what it produced while timed.

Both workers are warmed up, then timed in interleaved rounds (:mod:`.rounds`). Every timed call's
outputs are fingerprinted on both sides and must match, call by call and, for the weighted sums, on
average over the run; the last timed call's outputs are compared element by element; work left running
after the timed stream finished (a side stream or thread) fails the candidate; timed calls much more
uneven than the reference's (work moved into a few calls, which the median does not show) are flagged.
"""

from __future__ import annotations

import statistics

from kernelbench.evaluation import protocol
from kernelbench.evaluation.compare import POOLED_MIN_COUNT, POOLED_Z2_LIMIT, fingerprints_match, weighted_z2
from kernelbench.evaluation.parent.rounds import WARMUP_SEEDS, TimedSide, run_rounds, seed_lists, warm_up
from kernelbench.evaluation.parent.verdict import Verdict
from kernelbench.evaluation.parent.workers import call, reference_call, relayed
from kernelbench.evaluation.sandbox import WorkerProcess
from kernelbench.evaluation.settings import EvalJob, EvalSettings
from kernelbench.evaluation.timing import (
    MIN_ROUNDS,
    StopRule,
    block_order,
    should_stop,
    side_stream_gap_suspicious,
)
from kernelbench.results import GuardFinding, Stage, TimingStats
from kernelbench.speedup import IMPRECISE_HALF_WIDTH


def time_candidate(job: EvalJob, v: Verdict, ref: WorkerProcess, cand: WorkerProcess, secret: bytes) -> None:
    """Time both sides until precise or out of budget; records the timings, or the failure, in ``v``."""
    s = job.settings
    limit = s.stage_timeout_s + s.timing_budget_s * 2
    sides = {
        "reference": TimedSide("reference", "reference",
                               lambda m, t, what: reference_call(ref, m, protocol.TimeReply, t, what)[0]),
        "candidate": TimedSide("candidate", "candidate",
                               lambda m, t, what: call(cand, m, protocol.TimeReply, t, Stage.TIMING, what)[0]),
    }
    n = warm_up(list(sides.values()), *seed_lists(secret, "warm", "warm-forward", WARMUP_SEEDS), limit,
                s.launch_cushion_us, fingerprint=True)
    rule = stop_rule(s)
    r, c = sides["reference"], sides["candidate"]
    z2: list[float] = []
    rounds, stop_reason = run_rounds(
        sides, block_order, lambda k: seed_lists(secret, "time", "time-forward", n, k), True, limit,
        accept=lambda k, replies: _timed_outputs_match(v, k, replies, z2),
        stop=lambda k: should_stop(rule, c.samples_ms, r.samples_ms, c.spent_s, r.spent_s, k, block_calls=n),
        cushion_us=s.launch_cushion_us)
    if stop_reason is None:
        return
    pooled = _pooled_deviation(z2)
    if pooled:
        v.fail(Stage.TIMING, "TimedOutputMismatch", pooled)
        return
    if not _last_output_matches(job, v, ref, cand, len(c.samples_ms)):
        return
    uneven = _uneven_calls(c.samples_ms, r.samples_ms)
    if uneven:
        v.flags.append(uneven)
    suspicious, excess = side_stream_gap_suspicious(c.samples_ms, c.drained_ms, r.samples_ms, r.drained_ms)
    if suspicious:
        v.findings.append(GuardFinding(
            rule="side-stream", severity="error", origin="runtime",
            message=f"work continued {excess:.3f} ms (median) after the timed stream finished: computation hidden "
                    "on another stream or thread"))
        v.fail(Stage.GUARD, "RuntimeGuard", v.findings[-1].message)
        return
    v.runtime = TimingStats(samples_ms=c.samples_ms, warmup_calls=int(c.warm.calls), block_calls=n)
    v.ref_runtime = TimingStats(samples_ms=r.samples_ms, warmup_calls=int(r.warm.calls), block_calls=n)
    v.timing_note = f"{len(c.samples_ms)} timed calls per side in {rounds} rounds; stopped: {stop_reason}"


def stop_rule(s: EvalSettings) -> StopRule:
    """When a candidate timing under ``s`` stops (also what ``scripts/replay_timing_stop.py`` asks again)."""
    return StopRule(s.target_rse, s.min_timing_trials, s.max_timing_trials, s.timing_budget_s, MIN_ROUNDS,
                    max_half_width=IMPRECISE_HALF_WIDTH, extension=s.timing_extension)


def _pooled_deviation(z2: list[float]) -> str | None:
    """Why the timed outputs fail on average over the run (``compare.POOLED_Z2_LIMIT``), or None."""
    mean = statistics.fmean(z2) if len(z2) >= POOLED_MIN_COUNT else 0.0
    if mean <= POOLED_Z2_LIMIT:
        return None
    return (f"the outputs produced during timing are further from the reference than the tolerance allows: their "
            f"weighted sums stray {mean:.1f} squared units of honest rounding on average over "
            f"{len(z2)} outputs (at most {POOLED_Z2_LIMIT:g}); the kernel computes less exactly when timed")


#: A candidate's mean over median of its timed calls this many times the reference's is flagged for review.
UNEVEN_RATIO = 1.5


def _uneven_calls(cand_ms: list[float], ref_ms: list[float]) -> str | None:
    """A flag when the candidate's timed calls are far more uneven than the reference's, else None.

    Why: the speedup is a ratio of medians, and a candidate that could tell its timed calls apart could do a block's
    work in a few of them and return in the rest, so that the median shows the fast ones. The total work is then
    unchanged, so its mean does not move: a mean over median of r reports a median speedup up to r times too high.
    Honest calls are even on both sides (the ratio is about 1 for each), so a ratio well above the reference's
    is worth a human's look; it is a flag, not a failure, because an honest kernel can have slow calls of its own.
    Each side's slowest call is left out of its mean: one stray slow call (a clock change, a preemption) would
    otherwise flag a fast kernel, while work moved between calls shows in every block (at least ``MIN_ROUNDS``).
    """
    if len(cand_ms) < 3 or len(ref_ms) < 3:
        return None
    cm, rm = statistics.median(cand_ms), statistics.median(ref_ms)
    if cm <= 0 or rm <= 0:
        return None
    cr, rr = statistics.fmean(sorted(cand_ms)[:-1]) / cm, statistics.fmean(sorted(ref_ms)[:-1]) / rm
    if cr <= UNEVEN_RATIO * max(1.0, rr):
        return None
    return (f"timed calls uneven: the candidate's mean is {cr:.2f}x its median (the reference's {rr:.2f}x); work moved "
            "into a few calls would make the median speedup read too high")


def _timed_outputs_match(v: Verdict, round_index: int, replies: dict[str, protocol.TimeReply],
                         z2: list[float]) -> bool:
    """Every timed output's fingerprint against the reference's for the same inputs (fails ``v`` if not); the
    weighted sums' squared deviations go to ``z2``, for the mean over the run."""
    rfp, rb, cfp = replies["reference"].fingerprints, replies["reference"].bounds, \
        replies["candidate"].fingerprints
    for i in range(min(len(rfp), len(cfp))):
        z2.extend(weighted_z2(cfp[i], rfp[i], rb[i]))
        if not fingerprints_match(cfp[i], rfp[i], rb[i]):
            v.fail(Stage.TIMING, "TimedOutputMismatch",
                   f"an output produced during timing (round {round_index + 1}, call {i + 1}) does not match the "
                   f"reference for the same inputs: the kernel behaves differently when timed")
            return False
    if len(rfp) != len(cfp):
        v.fail(Stage.TIMING, "TimedOutputMismatch", "the candidate returned a different number of timed outputs")
        return False
    return True


def _last_output_matches(job: EvalJob, v: Verdict, ref: WorkerProcess, cand: WorkerProcess, timed_calls: int) -> bool:
    """The very last timed call is also checked element by element (fails ``v`` if wrong)."""
    s = job.settings
    exp, eblobs = call(cand, protocol.ExportLast(), protocol.ExportReply, s.stage_timeout_s, Stage.TIMING,
                       "export of the last timed output")
    exp, eblobs = relayed(cand, exp, eblobs, "time")
    comp, _ = reference_call(ref, protocol.Compare(slot="last", tree=exp.tree, outputs=exp.outputs, inputs=exp.inputs),
                             protocol.CompareReply, s.stage_timeout_s, "check of the last timed output", eblobs)
    call(cand, protocol.Release(), protocol.DoneReply, s.stage_timeout_s, Stage.TIMING, "release")
    if v.correctness is not None:
        v.correctness.timed_outputs_checked = timed_calls
    if not comp.passed:
        v.fail(Stage.TIMING, "TimedOutputMismatch", f"the last timed output is wrong: {comp.reason}")
        return False
    return True
