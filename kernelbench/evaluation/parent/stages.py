"""The stages of one candidate's evaluation, in order, once its reference and its worker are ready.

load (import and build ``ModelNew``), correctness (fresh inputs per trial), timing (GPU only, against
the reference in the same run), launch trace (whose kernels ran, and where) and a last patch check.
Each stage records what it established in the job's :class:`~.verdict.Verdict` and returns whether
the job goes on; a stage that stops the job has recorded why.
"""

from __future__ import annotations

import time

from kernelbench.backends import get_backend
from kernelbench.evaluation import compile_cache, protocol
from kernelbench.evaluation import seeds as seedlib
from kernelbench.evaluation.cpu_affinity import pinned
from kernelbench.evaluation.guards import runtime as rt
from kernelbench.evaluation.parent import sharing
from kernelbench.evaluation.parent.candidate_timing import time_candidate
from kernelbench.evaluation.parent.session import DeviceSession
from kernelbench.evaluation.parent.verdict import Verdict, findings_from, stage_of
from kernelbench.evaluation.parent.workers import (
    WorkerFailed,
    call,
    publish_after_exit,
    reference_call,
    reference_receive,
    reference_send,
    relayed,
)
from kernelbench.evaluation.provenance import host_share
from kernelbench.evaluation.sandbox import WorkerProcess
from kernelbench.evaluation.seeds import INIT_SEED
from kernelbench.evaluation.settings import EvalJob, EvalSettings
from kernelbench.results import CorrectnessDetail, GuardFinding, Stage


def run_candidate(session: DeviceSession, job: EvalJob, v: Verdict, ref: WorkerProcess, cand: WorkerProcess,
                  secret: bytes, eval_mode: bool) -> None:
    """Every stage in turn, until one stops the job."""
    if load(job, v, cand, eval_mode):
        run_loaded(session, job, v, ref, cand, secret)


def run_loaded(session: DeviceSession, job: EvalJob, v: Verdict, ref: WorkerProcess, cand: WorkerProcess,
               secret: bytes) -> None:
    """The stages after a successful load, in turn, until one stops the job."""
    if not sharing.settle(job.settings, v, ref, cand):
        return
    if not correctness(job, v, ref, cand, secret):
        return
    if not timing(session, job, v, ref, cand, secret):
        return
    if not launch_trace(session, job, v, cand, secret):
        return
    patch_check(job, v, cand)


# ---------------------------------------------------------------------------- load
def load(job: EvalJob, v: Verdict, cand: WorkerProcess, eval_mode: bool) -> bool:
    """Import the candidate (building its kernels) and construct ModelNew."""
    s = job.settings
    spec = get_backend(s.backend)
    t0 = time.monotonic()
    sharing.offer(s, cand)  # before any candidate code runs in the worker
    try:
        reply, _ = call(cand, protocol.Load(problem_code=job.problem.code, source=job.candidate_source,
                                            backend=s.backend, record_launches=spec.records_launches,
                                            precision=s.precision, init_seed=INIT_SEED,
                                            eval_mode=eval_mode, cache_namespace=s.cache_namespace,
                                            cache_scope=compile_cache.source_scope(job.candidate_source),
                                            ieee_fp32=s.ieee_fp32),
                        protocol.LoadReply, s.compile_timeout_s, Stage.COMPILE, "candidate import and compilation")
        publish_after_exit(cand, reply, job)
    except WorkerFailed as e:
        r = e.reply
        publish_after_exit(cand, r, job)
        stage = stage_of(r, Stage.LOAD)
        v.compiled = stage == Stage.INIT
        v.compile_log = _builds_log(r) if stage == Stage.COMPILE else None
        v.fail_with(r, stage)
        return False
    finally:
        v.stage_times["load"] = time.monotonic() - t0
    v.compiled = True
    v.findings.extend(findings_from(reply))
    if reply.threads_started > 0:
        v.findings.append(GuardFinding(rule="thread-started", severity="warning", origin="runtime",
                                       message=f"importing the candidate started {reply.threads_started} thread(s)"))
    return not v.fail_on_guard_errors(v.findings)


def _builds_log(reply: protocol.ErrorReply) -> str | None:
    events = reply.builds or []
    parts = []
    for ev in events:
        if ev.get("failed"):
            parts.append(str(ev.get("error", "")))
    return "\n".join(parts) if parts else None


# ---------------------------------------------------------------------------- correctness
def correctness(job: EvalJob, v: Verdict, ref: WorkerProcess, cand: WorkerProcess, secret: bytes) -> bool:
    """Correctness on fresh inputs per trial."""
    s = job.settings
    tol = s.tolerance
    t0 = time.monotonic()
    detail = CorrectnessDetail(atol=tol.atol, rtol=tol.rtol)
    v.correctness = detail
    for k in range(s.correctness_trials):
        if not _trial(s, v, ref, cand, secret, detail, k):
            return False
        detail.trials_passed = k + 1
    v.stage_times["correctness"] = time.monotonic() - t0
    v.correct = True
    return True


def _trial(s: EvalSettings, v: Verdict, ref: WorkerProcess, cand: WorkerProcess, secret: bytes,
           detail: CorrectnessDetail, k: int) -> bool:
    """Trial ``k``: the reference's outputs kept in slot ``k``, the candidate's compared with them there."""
    seed = seedlib.derive_seed(secret, "correct", k)
    fwd = seedlib.derive_seed(secret, "forward", k)
    ref_run = reference_send(ref, protocol.Run(seed=seed, fwd_seed=fwd, slot=k, poison=False), protocol.DoneReply,
                             s.stage_timeout_s, f"reference run of trial {k + 1}")
    if not s.overlap:
        reference_receive(ref_run)
    try:
        # With overlap, both workers run the trial at once (nothing is timed now); the reference's reply
        # is read whatever becomes of the candidate's, so the reference stays in step for the next job.
        creply, cblobs = call(cand, protocol.Run(seed=seed, fwd_seed=fwd, slot=None, poison=True),
                              protocol.ExportReply, s.stage_timeout_s, Stage.RUN, f"correctness trial {k + 1}")
        creply, cblobs = relayed(cand, creply, cblobs, "run")
    except WorkerFailed as e:
        r = e.reply
        stage = stage_of(r, Stage.RUN)
        if stage == Stage.COMPILE:
            v.compiled = False
        v.fail_with(r, stage)
        detail.trials_run = k + 1
        return False
    finally:
        if s.overlap:
            reference_receive(ref_run)
    detail.trials_run = k + 1
    comp, _ = reference_call(ref, protocol.Compare(slot=k, tree=creply.tree, outputs=creply.outputs,
                                                   inputs=creply.inputs),
                             protocol.CompareReply, s.stage_timeout_s, f"comparison of trial {k + 1}", cblobs)
    call(cand, protocol.Release(), protocol.DoneReply, s.stage_timeout_s, Stage.RUN, "release")
    if comp.max_abs is not None:
        detail.max_abs_error = max(detail.max_abs_error or 0.0, float(comp.max_abs))
        detail.max_rel_error = max(detail.max_rel_error or 0.0, float(comp.max_rel or 0.0))
    if creply.threads_started > 0:
        v.findings.append(GuardFinding(
            rule="thread-running", severity="warning", origin="runtime",
            message=f"{creply.threads_started} extra thread(s) alive after forward returned; "
                    "outputs were snapshotted at return"))
    if not comp.passed:
        detail.first_failure = f"trial {k + 1}: {comp.reason}"
        v.fail(Stage.CORRECTNESS, "InputsModified" if comp.inputs_modified else "WrongOutput",
               detail.first_failure)
        return False
    return True


# ---------------------------------------------------------------------------- timing
def timing(session: DeviceSession, job: EvalJob, v: Verdict, ref: WorkerProcess, cand: WorkerProcess,
           secret: bytes) -> bool:
    """Timing against the reference (GPU only), both main threads pinned to the session's core."""
    s = job.settings
    if not s.measure_timing:
        v.timing_note = "timing not requested"
    elif not session.is_cuda:
        v.timing_note = "not measured: no GPU (CPU path checks correctness only)"
    else:
        t0 = time.monotonic()
        try:
            session.quiesce()
            # Waiting for spare workers to finish creating their CUDA contexts, part of "timing".
            v.stage_times["spare_wait"] = time.monotonic() - t0
            try:
                with pinned(session.cores, session.slot, ref.main_pid, cand.main_pid):
                    time_candidate(job, v, ref, cand, secret)
            except WorkerFailed as e:
                v.fail_with(e.reply, stage_of(e.reply, Stage.TIMING))
            v.stage_times["timing"] = time.monotonic() - t0
        finally:  # a timeout or a dead worker too: spares may create their contexts again
            session.allow_gpu_init()
        if v.error is not None:
            return False
    return True


# ---------------------------------------------------------------------------- launch trace
def launch_trace(session: DeviceSession, job: EvalJob, v: Verdict, cand: WorkerProcess, secret: bytes) -> bool:
    """Runtime guards: whose kernels ran, and where. After timing, so that the profiler's state (CUPTI)
    never differs between the candidate's and the reference's timed calls."""
    s = job.settings
    t0 = time.monotonic()
    own = rt.own_kernel_names(job.candidate_source)
    seed = seedlib.derive_seed(secret, "profile")
    fwd = seedlib.derive_seed(secret, "forward-profile")
    try:
        if session.is_cuda:
            _profiled_run(s, v, cand, own, seed, fwd)
        elif get_backend(s.backend).records_launches:  # the CPU path: no profiler, the launcher counts
            _counted_launches(s, v, cand, own, seed, fwd)
    except WorkerFailed as e:
        v.fail_with(e.reply, stage_of(e.reply, Stage.RUN))
        return False
    v.stage_times["launch_trace"] = time.monotonic() - t0
    return not v.fail_on_guard_errors(v.findings)


def _profiled_run(s: EvalSettings, v: Verdict, cand: WorkerProcess, own: set[str], seed: int, fwd: int) -> None:
    """GPU: one forward under the profiler; its kernels, its host share and its outputs' provenance."""
    prof, _ = call(cand, protocol.Profile(seed=seed, fwd_seed=fwd), protocol.ProfileReply,
                   s.stage_timeout_s, Stage.RUN, "profiled run")
    report = rt.classify_launches(prof.kernels or [], own, prof.marker_stream)
    v.findings.extend(rt.launch_findings(report, s.backend))
    v.own_kernel_share = report.own_share
    host_us, busy_us = prof.host_enqueue_us, prof.gpu_busy_us
    if isinstance(host_us, (int, float)) and isinstance(busy_us, (int, float)):
        v.host_share = host_share(float(host_us), float(busy_us))
    v.findings.extend(rt.output_provenance_findings(prof, report))


def _counted_launches(s: EvalSettings, v: Verdict, cand: WorkerProcess, own: set[str], seed: int, fwd: int) -> None:
    """CPU, Triton: the launches the interpreter counted in one forward."""
    lr, _ = call(cand, protocol.Launches(seed=seed, fwd_seed=fwd), protocol.LaunchesReply,
                 s.stage_timeout_s, Stage.RUN, "launch count")
    launches = lr.launches or {}
    kernels = [{"name": n, "stream": None, "dur_us": 0.0} for n, c in launches.items() if c]
    report = rt.classify_launches(kernels, own or set(launches), None)
    v.findings.extend(rt.launch_findings(report, s.backend))
    v.findings.extend(rt.output_provenance_findings(lr, report))


# ---------------------------------------------------------------------------- patch check
def patch_check(job: EvalJob, v: Verdict, cand: WorkerProcess) -> None:
    """Anything patched while running?"""
    pr, _ = call(cand, protocol.CheckPatches(when="while running"), protocol.PatchReply, job.settings.stage_timeout_s,
                 Stage.RUN, "patch check")
    late = findings_from(pr)
    v.findings.extend(late)
    v.fail_on_guard_errors(late)
