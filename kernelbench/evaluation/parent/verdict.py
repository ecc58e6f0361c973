"""What a job has established so far (:class:`Verdict`), and the records our own failures become.

A stage that fails records the first error and the job stops there; everything else a stage
learns (findings, flags, timings, stage durations) accumulates. The job turns the verdict into a
:class:`~kernelbench.results.KernelResult` at the end.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field

from kernelbench.evaluation import protocol
from kernelbench.evaluation.settings import EvalJob
from kernelbench.results import (
    CorrectnessDetail,
    EnvironmentInfo,
    GuardFinding,
    KernelResult,
    Stage,
    StageError,
    TimingStats,
)

log = logging.getLogger(__name__)

_COMPILE_ERROR_TYPES = {"CompilationError", "CompileTimeAssertionFailure", "MLIRCompilationError",
                        "PTXASError", "OutOfResources"}
#: The flag every infrastructure failure carries, for readers that look at flags only.
INFRASTRUCTURE_FLAG = "infrastructure failure: not a verdict on the candidate; evaluated again on resume"
#: Out of device memory after candidate code ran: still a verdict (the candidate may have caused it, and the scores
#: leave infrastructure results out), flagged for a human: on a GPU with more memory the result may differ.
OUT_OF_MEMORY_FLAG = ("out of device memory in the evaluation (the reference, the evaluator's copies or the candidate): "
                      "a verdict, but on a GPU with more memory the result may differ")

#: An error of our parent code after candidate code ran: a verdict too, since the candidate's process writes what
#: our code reads (it can put any well-formed reply on its channel, of types our code does not expect).
EVALUATOR_ERROR_FLAG = ("evaluator error after candidate code ran: a verdict (the candidate's process may have caused "
                        "it), flagged for a human")


class StageTimes(dict):
    """Stage durations that also report each one as it is recorded (progress while a job runs)."""

    def __init__(self, report: Callable[[str, float], None]):
        super().__init__()
        self._report = report

    def __setitem__(self, key: str, value: float) -> None:
        super().__setitem__(key, value)
        try:
            self._report(key, value)
        except Exception:  # a display must never break an evaluation
            log.exception("stage callback failed")


@dataclass
class Verdict:
    """What a job has established so far; becomes a KernelResult at the end."""

    compiled: bool = False
    correct: bool = False
    error: StageError | None = None
    correctness: CorrectnessDetail | None = None
    runtime: TimingStats | None = None
    ref_runtime: TimingStats | None = None
    timing_note: str | None = None
    findings: list[GuardFinding] = field(default_factory=list)
    flags: list[str] = field(default_factory=list)
    compile_log: str | None = None
    environment: EnvironmentInfo | None = None
    stage_times: dict[str, float] = field(default_factory=dict)
    host_share: float | None = None
    own_kernel_share: float | None = None
    #: A candidate worker was given this job (its code may have run): from then on an error of our parent code is a
    #: verdict, not an infrastructure failure (scores leave those out; see stage_of).
    candidate_started: bool = False

    def fail(self, stage: Stage, type_: str, message: str, traceback: str | None = None) -> None:
        if self.error is None:
            self.error = StageError.make(stage, type_, message, traceback)
            if stage == Stage.INFRASTRUCTURE and INFRASTRUCTURE_FLAG not in self.flags:
                self.flags.append(INFRASTRUCTURE_FLAG)
        self.correct = False

    def fail_with(self, reply: protocol.ErrorReply, stage: Stage) -> None:
        """Fail at ``stage`` with the error a worker reported."""
        self.fail(stage, str(reply.type), str(reply.message), reply.traceback)
        if reply.type in protocol.OUT_OF_MEMORY_TYPES and OUT_OF_MEMORY_FLAG not in self.flags:
            self.flags.append(OUT_OF_MEMORY_FLAG)

    def fail_on_guard_errors(self, findings: list[GuardFinding]) -> bool:
        """Fail the guard stage if any of ``findings`` is an error; returns whether it did."""
        if any(f.severity == "error" for f in findings):
            self.fail(Stage.GUARD, "RuntimeGuard", "; ".join(f.message for f in findings if f.severity == "error"))
            return True
        return False


def stage_of(reply: protocol.ErrorReply, default: Stage) -> Stage:
    """The stage a worker's error belongs to (compiler errors raised at a kernel's first call included).

    Never INFRASTRUCTURE: these replies come from the candidate's process, where candidate code can raise an exception
    of any name, ``EvaluatorOutOfMemory`` included. An infrastructure result is left out of the scores (pass@k
    counts only verdicts), so one a candidate could claim would let a kernel that knows it is wrong (it can compute
    the reference itself) withdraw its failures."""
    where = reply.where
    if reply.type in _COMPILE_ERROR_TYPES:
        return Stage.COMPILE
    mapping = {"load": Stage.LOAD, "compile": Stage.COMPILE, "init": Stage.INIT, "run": Stage.RUN,
               "time": Stage.TIMING, "profile": Stage.RUN, "launches": Stage.RUN}
    return mapping.get(where, default)


def findings_from(reply: protocol.LoadReply | protocol.PatchReply) -> list[GuardFinding]:
    """The guard findings a candidate worker reported; a malformed one is itself a failing finding."""
    out = []
    for f in reply.findings or []:
        try:
            out.append(GuardFinding.model_validate(f))
        except Exception:
            out.append(GuardFinding(rule="malformed-report", severity="error", origin="runtime",
                                    message="the candidate process sent a malformed guard report"))
    return out


def format_tb(e: BaseException) -> str:
    import traceback as tb

    return "".join(tb.format_exception(type(e), e, e.__traceback__))


def infrastructure_result(job: EvalJob, type_: str, message: str, traceback: str | None = None) -> KernelResult:
    """The record of a job that our side failed to evaluate (never a verdict on the candidate)."""
    p = job.problem
    return KernelResult(level=p.level, problem_id=p.problem_id, problem_name=p.name, problem_hash=p.hash,
                        sample_id=job.sample_id, backend=job.settings.backend, precision=job.settings.precision,
                        error=StageError.make(Stage.INFRASTRUCTURE, type_, message, traceback),
                        flags=[INFRASTRUCTURE_FLAG])


def environment_from(info: dict | None, device: str) -> EnvironmentInfo:
    info = dict(info or {})
    info.setdefault("device", device)
    return EnvironmentInfo.model_validate(info)
