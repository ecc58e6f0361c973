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
from kernelbench.evaluation import seeds as seedlib
from kernelbench.evaluation.parent.session import DeviceSession
from kernelbench.evaluation.parent.stages import run_candidate
from kernelbench.evaluation.parent.verdict import (
    INFRASTRUCTURE_FLAG,
    StageTimes,
    Verdict,
    environment_from,
    format_tb,
)
from kernelbench.evaluation.parent.workers import ReferenceBroken, StageTimeout, WorkerDied, WorkerFailed
from kernelbench.evaluation.settings import EvalJob
from kernelbench.results import GuardFinding, KernelResult, Stage, trim

log = logging.getLogger(__name__)


def run_job(session: DeviceSession, job: EvalJob,
            on_stage: Callable[[str, float], None] | None = None) -> KernelResult:
    started = time.monotonic()
    v = Verdict()
    if on_stage is not None:
        v.stage_times = StageTimes(on_stage)
    try:
        _run_job(session, job, v)
    except StageTimeout as e:
        v.fail(Stage.TIMEOUT, "Timeout", f"{e} (during the {e.stage.value} stage); the worker was killed")
    except WorkerDied as e:
        v.fail(Stage.CRASH, "WorkerDied", str(e), e.tail)
    except ReferenceBroken as e:
        session.drop_reference()
        if e.before_candidate:
            # Nothing of the candidate has run: ours entirely, evaluated again on resume.
            v.fail(Stage.INFRASTRUCTURE, "ReferenceFailed", str(e), e.traceback)
        else:
            v.fail(Stage.CRASH, "ReferenceFailed", str(e), e.traceback)
        v.flags.append("the reference itself failed; this is not a verdict on the candidate")
    except Exception as e:  # a bug of ours, a lost worker pool: never the candidate's verdict
        log.exception("evaluation of %s failed in the evaluator", job.key)
        v.fail(Stage.INFRASTRUCTURE, type(e).__name__, f"evaluator error: {e}", format_tb(e))
        if v.error is not None and v.error.stage == Stage.INFRASTRUCTURE:
            v.flags.append(INFRASTRUCTURE_FLAG)
    return _result(session, job, v, started)


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


def _run_job(session: DeviceSession, job: EvalJob, v: Verdict) -> None:
    if not _checked_before_running(session, job, v):
        return
    secret = job.settings.seed_secret or seedlib.new_secret()
    session.allow_gpu_init()
    t0 = time.monotonic()
    try:
        ref, ref_info = session.reference_for(job, seedlib.derive_seed(secret, "probe"))
    except WorkerFailed as e:
        r = e.reply
        raise ReferenceBroken(f"the reference could not be set up: {r.type}: {r.message}",
                              r.traceback, before_candidate=True) from None
    except (WorkerDied, StageTimeout, RuntimeError) as e:
        raise ReferenceBroken(f"the reference could not be set up: {e}", before_candidate=True) from None
    v.environment = environment_from(ref_info.env, session.device)
    v.stage_times["reference_setup"] = time.monotonic() - t0
    if ref_info.stochastic:
        v.flags.append("the reference is random (e.g. dropout): both models were evaluated in eval() mode")
    if ref_info.nondeterministic:
        v.flags.append("the reference is not deterministic even in eval() mode; correctness may be unreliable")

    t0 = time.monotonic()
    cand = session.candidate_worker(job.settings.backend)
    session.in_flight = cand
    v.stage_times["candidate_start"] = time.monotonic() - t0
    try:
        run_candidate(session, job, v, ref, cand, secret, bool(ref_info.stochastic))
    finally:
        session.in_flight = None
        cand.kill()


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
        v.flags.append(INFRASTRUCTURE_FLAG)
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
