"""Request and response bodies of the evaluation server: the API's contract, shared with the client.

Every request model forbids unknown fields, so a typo (``correctnes_trials``) is a 400 naming the field
rather than a silently ignored option. Limits that depend on the server's configuration (source sizes,
timeouts) are checked by the server, not here, so that the client can import these models unchanged.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from kernelbench.backends import DEFAULT_BACKEND, backend_names
from kernelbench.results import KernelResult

#: The backends a request may name: the registry's, when the server starts (an enum in the OpenAPI schema).
BackendName = Literal[backend_names()]

#: A job id chosen by the client (so a client that lost a blocking call's connection can still poll it).
JOB_ID_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_.:-]{0,63}$"

JobState = Literal["queued", "running", "done"]


class ProblemRef(BaseModel):
    """A problem of the set the server was started with (``kernelbench serve --source ...``)."""

    model_config = ConfigDict(extra="forbid")

    set: str | None = Field(default=None, description="The server's problem set name (builtin, kernelbench, "
                                                      "huggingface, directory); omitted: the server's own.")
    level: int
    problem_id: int


class RequestSettings(BaseModel):
    """How to evaluate; the same options as ``kernelbench eval``. The device and the sandbox are the server's."""

    model_config = ConfigDict(extra="forbid")

    backend: BackendName = DEFAULT_BACKEND
    precision: Literal["fp32", "fp16", "bf16"] = "fp32"
    correctness_trials: int = Field(default=5, ge=1, le=100)
    tolerance_mode: Literal["default", "kernelbench-v0.1"] = "default"
    atol: float | None = Field(default=None, ge=0)
    rtol: float | None = Field(default=None, ge=0)
    measure_timing: bool = True
    timing_budget_s: float = Field(default=1.0, gt=0)
    #: Run the problem at its declared CPU_SIZE (correctness only; the result says so).
    reduced_size: bool = False
    #: Wall-clock limit of this evaluation once it starts (every stage is bounded by it too); None: the
    #: server's default. Time spent waiting in the queue does not count.
    timeout_s: float | None = Field(default=None, gt=0)


class EvalRequest(BaseModel):
    """One candidate for one problem: the problem by reference (``problem``) or by source (``reference_source``)."""

    model_config = ConfigDict(extra="forbid")

    candidate_source: str = Field(description="Python source defining ModelNew.")
    problem: ProblemRef | None = None
    reference_source: str | None = Field(default=None, description="A KernelBench problem's source (Model, "
                                                                   "get_inputs, get_init_inputs) instead of `problem`.")
    reference_name: str = Field(default="custom", max_length=200,
                                description="Name given to a problem sent by source, in the result.")
    settings: RequestSettings = Field(default_factory=RequestSettings)
    sample_id: int = Field(default=0, ge=0)
    id: str | None = Field(default=None, pattern=JOB_ID_PATTERN,
                           description="Optional job id of the client's choosing (unique among the server's jobs).")

    @model_validator(mode="after")
    def _one_problem(self) -> EvalRequest:
        if (self.problem is None) == (self.reference_source is None):
            raise ValueError("give exactly one of `problem` ({\"level\": L, \"problem_id\": N}) and "
                             "`reference_source` (a problem's source)")
        return self


class BatchRequest(BaseModel):
    """Several candidates admitted together: all of them or (queue full) none."""

    model_config = ConfigDict(extra="forbid")

    requests: list[EvalRequest] = Field(min_length=1)


class JobInfo(BaseModel):
    """Where a job stands; ``result`` once it is done. Times are seconds since the epoch."""

    id: str
    status: JobState
    position: int | None = Field(default=None, description="Jobs ahead of it in the queue, while queued.")
    attempts: int = Field(default=0, description="Evaluations started; more than 1 after an evaluator process died.")
    device: str | None = None
    submitted_at: float
    started_at: float | None = None
    finished_at: float | None = None
    result: KernelResult | None = None


class BatchInfo(BaseModel):
    jobs: list[JobInfo]


class DeviceInfo(BaseModel):
    device: str
    state: Literal["starting", "idle", "busy", "stopped"]
    pid: int | None = None
    job_id: str | None = None
    evaluations: int = 0
    restarts: int = 0
    reference: str | None = Field(default=None, description="The problem whose reference worker this device's "
                                  "evaluator process holds (its last job that finished normally); None while busy.")
    reference_reuses: int = Field(default=0, description="Jobs started while the process held their reference "
                                  "(they skip the reference's start and setup).")
    affinity_picks: int = Field(default=0, description="Of those, jobs taken ahead of an older waiting job "
                                "(kernelbench serve --affinity-window).")


class Health(BaseModel):
    status: Literal["ok", "draining"]
    version: str
    problem_set: str
    sandbox: str
    queued: int
    running: int
    max_queue: int
    max_batch: int
    stored_results: int
    affinity_window_s: float = 0.0
    devices: list[DeviceInfo]


class ProblemInfo(BaseModel):
    """A problem of the server's set; ``code`` (the reference source) only when asked for one problem."""

    level: int
    problem_id: int
    name: str
    hash: str
    reduced_size: bool = Field(description="Whether it declares a CPU_SIZE (settings.reduced_size may be used).")
    code: str | None = None


class ProblemList(BaseModel):
    problem_set: str
    problems: list[ProblemInfo]


class ErrorBody(BaseModel):
    """Every 4xx and 5xx: one sentence saying what was wrong and what to do."""

    detail: str


__all__ = ["BatchInfo", "BatchRequest", "DeviceInfo", "ErrorBody", "EvalRequest", "Health", "JOB_ID_PATTERN",
           "JobInfo", "JobState", "ProblemInfo", "ProblemList", "ProblemRef", "RequestSettings"]
