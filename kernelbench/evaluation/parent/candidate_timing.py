"""Timing a candidate against its reference in the same run, and checking what it produced while timed.

Both workers are warmed up, then timed in interleaved rounds (:mod:`.rounds`). Every timed call's
outputs are fingerprinted on both sides and must match; the last timed call's outputs are compared
element by element; work left running after the timed stream finished (a side stream or thread)
fails the candidate.
"""

from __future__ import annotations

from kernelbench.evaluation import protocol
from kernelbench.evaluation.compare import fingerprints_match
from kernelbench.evaluation.parent.rounds import WARMUP_SEEDS, TimedSide, run_rounds, seed_lists, warm_up
from kernelbench.evaluation.parent.verdict import Verdict
from kernelbench.evaluation.parent.workers import call, reference_call, relayed
from kernelbench.evaluation.sandbox import WorkerProcess
from kernelbench.evaluation.settings import EvalJob
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
    rule = StopRule(s.target_rse, s.min_timing_trials, s.max_timing_trials, s.timing_budget_s, MIN_ROUNDS,
                    max_half_width=IMPRECISE_HALF_WIDTH, extension=s.timing_extension)
    r, c = sides["reference"], sides["candidate"]
    rounds, stop_reason = run_rounds(
        sides, block_order, lambda k: seed_lists(secret, "time", "time-forward", n, k), True, limit,
        accept=lambda k, replies: _timed_outputs_match(v, k, replies),
        stop=lambda k: should_stop(rule, c.samples_ms, r.samples_ms, c.spent_s, r.spent_s, k, block_calls=n),
        cushion_us=s.launch_cushion_us)
    if stop_reason is None:
        return
    if not _last_output_matches(job, v, ref, cand, len(c.samples_ms)):
        return
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


def _timed_outputs_match(v: Verdict, round_index: int, replies: dict[str, protocol.TimeReply]) -> bool:
    """Every timed output's fingerprint against the reference's for the same inputs (fails ``v`` if not)."""
    rfp, rb, cfp = replies["reference"].fingerprints, replies["reference"].bounds, \
        replies["candidate"].fingerprints
    for i in range(min(len(rfp), len(cfp))):
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
