"""One job, start to KernelResult: the checks that need no worker, the reference, the candidate's stages.

Whatever goes wrong is classified here: a stage's timeout, a worker that died, a reference that
failed (never the candidate's verdict) and an error of ours (an infrastructure failure, evaluated
again on resume).
"""

from __future__ import annotations

import ast
import logging
import time
from collections.abc import Callable

from kernelbench.backends import get_backend
from kernelbench.evaluation import protocol
from kernelbench.evaluation import seeds as seedlib
from kernelbench.evaluation.parent.session import DeviceSession, ReferenceInfo
from kernelbench.evaluation.parent.stages import load, run_candidate, run_loaded
from kernelbench.evaluation.parent.verdict import (
    EVALUATOR_ERROR_FLAG,
    OUT_OF_MEMORY_FLAG,
    StageTimes,
    Verdict,
    environment_from,
    format_tb,
    stage_of,
)
from kernelbench.evaluation.parent.workers import ReferenceBroken, StageTimeout, WorkerDied, WorkerFailed
from kernelbench.evaluation.sandbox import WorkerProcess
from kernelbench.evaluation.settings import EvalJob
from kernelbench.results import GuardFinding, KernelResult, Stage, trim

log = logging.getLogger(__name__)


class _RedoAlone(Exception):
    """The overlapped start cannot give the job's verdict as the sequential one would: run the job again
    with its reference set up before any candidate code runs."""


def run_job(session: DeviceSession, job: EvalJob,
            on_stage: Callable[[str, float], None] | None = None) -> KernelResult:
    started = time.monotonic()
    v = _new_verdict(on_stage)
    try:
        try:
            _run_job(session, job, v, overlap=job.settings.overlap)
        except _RedoAlone as e:
            log.info("%s: %s", job.key, e)
            v = _new_verdict(on_stage)
            _run_job(session, job, v, overlap=False)
    except StageTimeout as e:
        v.fail(Stage.TIMEOUT, "Timeout", f"{e} (during the {e.stage.value} stage); the worker was killed")
    except WorkerDied as e:
        v.fail(Stage.CRASH, "WorkerDied", str(e), e.tail)
    except ReferenceBroken as e:
        session.drop_reference()
        if e.before_candidate:
            # Nothing of the candidate has run: ours entirely, evaluated again on resume.
            v.fail(Stage.INFRASTRUCTURE, protocol.EVALUATOR_OUT_OF_MEMORY if e.out_of_memory else "ReferenceFailed",
                   str(e), e.traceback)
        else:
            # After candidate code has run the candidate may be the cause (a process that holds the GPU's memory, say),
            # and an infrastructure result is left out of the scores: a verdict, marked for what it is.
            v.fail(Stage.CRASH, "ReferenceOutOfMemory" if e.out_of_memory else "ReferenceFailed", str(e), e.traceback)
            if e.out_of_memory:
                v.flags.append(OUT_OF_MEMORY_FLAG)
        if not (e.out_of_memory and not e.before_candidate):  # that one is a verdict, and its flag says so
            v.flags.append("the reference itself failed; this is not a verdict on the candidate")
    except WorkerFailed as e:
        # A candidate's command answered with an error where no stage catches it (a Release, say): a reference's
        # failures arrive as ReferenceBroken, so this one is the candidate's, never an infrastructure failure.
        v.fail_with(e.reply, stage_of(e.reply, Stage.RUN))
    except Exception as e:  # a bug of ours, a lost worker pool; or a reply the candidate's process made to break us
        log.exception("evaluation of %s failed in the evaluator", job.key)
        if v.candidate_started:
            # What our code reads comes from the candidate's process, which can write any well-formed reply on its
            # channel (a LoadReply whose threads_started is a string raised TypeError here): as an infrastructure
            # result it would be left out of the scores, so a kernel that knows it is wrong could withdraw itself.
            v.fail(Stage.CRASH, type(e).__name__, f"evaluator error after candidate code ran: {e}", format_tb(e))
            v.flags.append(EVALUATOR_ERROR_FLAG)
        else:
            v.fail(Stage.INFRASTRUCTURE, type(e).__name__, f"evaluator error: {e}", format_tb(e))  # flagged by fail
    return _result(session, job, v, started)


def _new_verdict(on_stage: Callable[[str, float], None] | None) -> Verdict:
    v = Verdict()
    if on_stage is not None:
        v.stage_times = StageTimes(on_stage)
    return v


def _result(session: DeviceSession, job: EvalJob, v: Verdict, started: float) -> KernelResult:
    s = job.settings
    env = v.environment or environment_from(session.reference_info.env if session.reference_info else None,
                                            session.device)
    env = env.model_copy(update={"isolation": session.isolation,
                                 "network": session.allow_network if session.confinement is not None else True,
                                 "launch_cushion_us": s.launch_cushion_us if session.is_cuda else None,
                                 "cpu_pinned": session.cores is not None if session.is_cuda else None})
    result = KernelResult(
        level=job.problem.level, problem_id=job.problem.problem_id, problem_name=job.problem.name,
        problem_hash=job.problem.hash, sample_id=job.sample_id, backend=s.backend, precision=s.precision,
        compiled=v.compiled, correct=v.correct and v.error is None, error=v.error, correctness=v.correctness,
        runtime=v.runtime, ref_runtime=v.ref_runtime, timing_note=v.timing_note,
        guard_findings=v.findings, flags=v.flags, compile_log=trim(v.compile_log, 20000), environment=env,
        wall_time_s=time.monotonic() - started, stage_times_s=dict(v.stage_times),
        host_share=v.host_share, own_kernel_share=v.own_kernel_share,
        reduced_size=dict(job.problem.reduced_size) if job.problem.reduced_size else None,
    )
    if result.runtime is not None and env.gpu_name:
        from kernelbench.roofline import check_speed_of_light

        chk = check_speed_of_light(job.problem, env.gpu_name, s.precision, result.runtime_ms)
        result.roofline = chk.info
        if chk.flag:
            result.flags.append(chk.flag)
    speed = result.speedup
    if speed is not None and speed > s.review_speedup:
        result.flags.append(f"speedup {speed:.2f}x is above the review threshold of {s.review_speedup:g}x")
    return result


def _run_job(session: DeviceSession, job: EvalJob, v: Verdict, overlap: bool) -> None:
    if not _checked_before_running(session, job, v):
        return
    secret = job.settings.seed_secret or seedlib.new_secret()
    session.allow_gpu_init()
    probe_seed = seedlib.derive_seed(secret, "probe")
    if overlap and not session.has_reference(job):
        _run_overlapped(session, job, v, secret, probe_seed)
        return
    t0 = time.monotonic()
    try:
        ref, ref_info = session.reference_for(job, probe_seed)
    except (WorkerFailed, WorkerDied, StageTimeout, RuntimeError) as e:
        raise _reference_broken(e) from None
    v.stage_times["reference_setup"] = time.monotonic() - t0
    _note_reference(session, v, ref_info)
    cand = _candidate_worker(session, job, v)
    try:
        run_candidate(session, job, v, ref, cand, secret, bool(ref_info.stochastic))
    finally:
        session.in_flight = None
        cand.kill()


def _run_overlapped(session: DeviceSession, job: EvalJob, v: Verdict, secret: bytes, probe_seed: int) -> None:
    """A new problem: its reference is set up while the candidate loads (two workers, nothing timed).

    The verdict must be the one the sequential order gives, where a reference that fails is never the
    candidate's fault and a random reference has the candidate loaded in eval() mode; so when the setup
    fails or finds the reference random, the job is redone alone (:class:`_RedoAlone`). Stage times are
    what the job waited for: ``reference_start`` for a started reference worker, ``reference_setup`` the
    wait for its setup past the candidate's load.
    """
    t0 = time.monotonic()
    try:
        setup = session.begin_reference(job, probe_seed)
    except (WorkerDied, RuntimeError) as e:
        raise _reference_broken(e) from None
    v.stage_times["reference_start"] = time.monotonic() - t0  # waiting for a started reference worker
    cand = _candidate_worker(session, job, v)
    try:
        candidate_error: Exception | None = None
        try:
            loaded = load(job, v, cand, eval_mode=False)
        except (StageTimeout, WorkerDied) as e:
            candidate_error, loaded = e, False
        t0 = time.monotonic()
        try:
            ref, ref_info = session.finish_reference(setup)
        except (WorkerFailed, WorkerDied, StageTimeout) as e:
            session.drop_reference()
            raise _RedoAlone(f"the reference's setup beside the candidate's load failed ({e})") from None
        v.stage_times["reference_setup"] = time.monotonic() - t0
        if ref_info.stochastic:
            raise _RedoAlone("the reference is random: the candidate is loaded again, in eval() mode")
        _note_reference(session, v, ref_info)
        if candidate_error is not None:
            raise candidate_error
        if loaded:
            run_loaded(session, job, v, ref, cand, secret)
    finally:
        session.in_flight = None
        cand.kill()


def _reference_broken(e: Exception) -> ReferenceBroken:
    """A reference that could not be set up, before any candidate code ran: ours entirely."""
    if isinstance(e, WorkerFailed):
        r = e.reply
        return ReferenceBroken(f"the reference could not be set up: {r.type}: {r.message}", r.traceback,
                               before_candidate=True)
    return ReferenceBroken(f"the reference could not be set up: {e}", before_candidate=True)


def _note_reference(session: DeviceSession, v: Verdict, ref_info: ReferenceInfo) -> None:
    v.environment = environment_from(ref_info.env, session.device)
    if ref_info.stochastic:
        v.flags.append("the reference is random (e.g. dropout): both models were evaluated in eval() mode")
    if ref_info.nondeterministic:
        v.flags.append("the reference is not deterministic even in eval() mode; correctness may be unreliable")


def _candidate_worker(session: DeviceSession, job: EvalJob, v: Verdict) -> WorkerProcess:
    t0 = time.monotonic()
    cand = session.candidate_worker(job.settings.backend)
    session.in_flight = cand
    v.candidate_started = True
    v.stage_times["candidate_start"] = time.monotonic() - t0
    return cand


def _checked_before_running(session: DeviceSession, job: EvalJob, v: Verdict) -> bool:
    """What needs no worker: a GPU for CUDA candidates, the source parses, the static guard passes, the
    backend's own package is installed."""
    s = job.settings
    source = job.candidate_source
    spec = get_backend(s.backend)
    if not session.is_cuda and spec.needs_gpu:
        v.fail(Stage.COMPILE, "NoGPU", f"{spec.display_name} candidates need an NVIDIA GPU; this evaluation runs on "
                                       "the CPU (use a GPU machine, or --runner modal)")
        return False
    try:
        ast.parse(source)
    except SyntaxError as e:
        v.fail(Stage.LOAD, "SyntaxError", f"line {e.lineno}: {e.msg}")
        return False
    static = _static_findings(source, s.backend) if s.static_guard else []
    v.findings.extend(static)
    if any(f.severity == "error" for f in static):
        bad = "; ".join(f"line {f.line}: {f.rule}: {f.message}" for f in static if f.severity == "error")
        v.fail(Stage.GUARD, "StaticGuard", f"the static guard refused the candidate: {bad}")
        return False
    missing = spec.missing_packages()
    if missing:
        # Our environment lacks the backend's optional package (kernelbench[cute], kernelbench[tilelang]): not a
        # verdict on the candidate, and evaluated again on resume once it is installed.
        v.fail(Stage.INFRASTRUCTURE, "MissingBackendPackage", spec.missing_message(missing))
        return False
    return True


def _static_findings(source: str, backend: str) -> list[GuardFinding]:
    try:
        from kernelbench.evaluation.guards.static import analyze_source
    except ImportError:
        return []
    try:
        return list(analyze_source(source, backend).findings)
    except Exception as e:  # the guard must never take the evaluator down
        log.warning("static guard failed: %s", e)
        return [GuardFinding(rule="static-guard-error", severity="warning", origin="static",
                             message=f"static guard failed: {e}")]
