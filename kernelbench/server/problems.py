"""Turning an :class:`EvalRequest` into an :class:`EvalJob`, or into a 400 that says exactly what is wrong.

Everything a request can get wrong is found here, before the job is queued: an unknown problem, a
problem source that breaks the KernelBench contract, an oversized source, a setting beyond the server's
limits. A queued job is then one the evaluator can run; what happens in it is the verdict.
"""

from __future__ import annotations

import threading

from kernelbench.errors import KernelBenchError
from kernelbench.evaluation.settings import EvalJob, EvalSettings
from kernelbench.problems import ProblemSet, load_problems
from kernelbench.problems.contract import check_problem_code
from kernelbench.problems.model import Problem
from kernelbench.server.config import ServerConfig
from kernelbench.server.models import EvalRequest


class RequestError(Exception):
    """A request the server refuses; ``status`` is the HTTP status (400 unless said otherwise)."""

    def __init__(self, message: str, status: int = 400):
        super().__init__(message)
        self.status = status


class JobBuilder:
    """Resolves problems against the server's problem set (loaded once, on first use) and applies limits."""

    def __init__(self, config: ServerConfig):
        self.config = config
        self._problems: ProblemSet | None = None
        self._lock = threading.Lock()

    @property
    def set_name(self) -> str:
        return self.config.problem_source

    def problems(self) -> ProblemSet:
        with self._lock:
            if self._problems is None:
                self._problems = load_problems(self.config.problem_source, self.config.problem_path)
            return self._problems

    def _check_size(self, what: str, text: str) -> None:
        n = len(text.encode("utf-8"))
        if n > self.config.max_source_bytes:
            raise RequestError(f"{what} is {n} bytes; this server accepts at most {self.config.max_source_bytes} "
                               "bytes per source (kernelbench serve --max-source-bytes)", status=413)

    def _problem(self, req: EvalRequest) -> Problem:
        if req.reference_source is not None:
            if not self.config.allow_reference_source:
                raise RequestError("this server does not accept problems by source: a reference runs as trusted code "
                                   "outside the sandbox, so the operator must allow it (kernelbench serve "
                                   "--allow-reference-source, for trusted clients only); name a problem of the "
                                   f"server's set ({self.set_name}) with `problem` instead", status=403)
            self._check_size("reference_source", req.reference_source)
            try:
                check_problem_code(req.reference_source, "reference_source")
            except KernelBenchError as e:
                raise RequestError(str(e)) from None
            return Problem(level=0, problem_id=0, name=req.reference_name, code=req.reference_source, source="request")
        ref = req.problem
        assert ref is not None  # the model's validator guarantees one of the two
        if ref.set is not None and ref.set != self.set_name:
            raise RequestError(f"unknown problem set {ref.set!r}: this server serves {self.set_name!r} (started with "
                               f"--source {self.set_name}); omit `set` or send the problem as reference_source")
        try:
            return self.problems().get(ref.level, ref.problem_id)
        except KernelBenchError as e:
            raise RequestError(f"unknown problem: {e}") from None

    def build(self, req: EvalRequest) -> EvalJob:
        """The job for ``req``; raises :class:`RequestError` for anything the evaluator should never see."""
        cfg = self.config
        self._check_size("candidate_source", req.candidate_source)
        if not req.candidate_source.strip():
            raise RequestError("candidate_source is empty: send the Python source that defines ModelNew")
        problem = self._problem(req)
        s = req.settings
        if s.reduced_size:
            try:
                problem = problem.at_reduced_size()
            except ValueError as e:
                raise RequestError(f"settings.reduced_size: {e}") from None
        if s.timeout_s is not None and s.timeout_s > cfg.max_timeout_s:
            raise RequestError(f"settings.timeout_s is {s.timeout_s:g} s; this server allows at most "
                               f"{cfg.max_timeout_s:g} s")
        if s.timing_budget_s > cfg.max_timing_budget_s:
            raise RequestError(f"settings.timing_budget_s is {s.timing_budget_s:g} s; this server allows at most "
                               f"{cfg.max_timing_budget_s:g} s")
        timeout = self.timeout_of(req)
        defaults = EvalSettings()
        try:
            settings = EvalSettings(
                backend=s.backend, precision=s.precision, correctness_trials=s.correctness_trials,
                tolerance_mode=s.tolerance_mode, atol=s.atol, rtol=s.rtol, measure_timing=s.measure_timing,
                timing_budget_s=s.timing_budget_s, device=None, sandbox=cfg.sandbox, allow_network=cfg.allow_network,
                # Every stage is bounded by the request's limit as well as the whole evaluation.
                compile_timeout_s=min(defaults.compile_timeout_s, timeout),
                stage_timeout_s=min(defaults.stage_timeout_s, timeout),
            )
        except ValueError as e:
            raise RequestError(f"settings: {e}") from None
        return EvalJob(problem=problem, candidate_source=req.candidate_source, settings=settings,
                       sample_id=req.sample_id)

    def timeout_of(self, req: EvalRequest) -> float:
        """The evaluation's wall-clock limit once it starts."""
        return req.settings.timeout_s if req.settings.timeout_s is not None else self.config.default_timeout_s
