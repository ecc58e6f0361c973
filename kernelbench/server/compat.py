"""``POST /eval``: KBenchEval's (TritonForge's) evaluation-server call, for trainers written against it.

KBenchEval's ``simple_eval_server.py`` takes ``original_model_src`` and ``custom_model_src`` and answers
KernelBench's ``KernelExecResult`` (``compiled``, ``correctness``, ``runtime`` in ms with ``-1.0`` for "not
measured", ``runtime_stats``, ``metadata``). This module translates both ways and nothing else; the job runs
through the same queue and evaluator as every other request, and the full ``KernelResult`` rides along in
``metadata["kernelbench_result"]``.

The reference is matched to the server's problem set by its normalised hash, so a trainer that sends the
official problem text gets the server's own (trusted) copy; an unknown reference is a problem by source,
refused unless the server allows those (``--allow-reference-source``), since a reference runs unconfined.
Options KBenchEval takes that have no meaning here are accepted and ignored, as documented per field.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from kernelbench.backends import DEFAULT_BACKEND
from kernelbench.problems.model import normalized_code_hash
from kernelbench.results import KernelResult, Stage
from kernelbench.server.models import BackendName, EvalRequest, ProblemRef, RequestSettings
from kernelbench.server.problems import JobBuilder


class KBenchEvalRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    original_model_src: str = Field(description="The problem's source (Model, get_inputs, get_init_inputs).")
    custom_model_src: str = Field(description="The candidate's source (ModelNew).")
    num_correct_trials: int = Field(default=5, ge=1, le=100)
    measure_performance: bool = True
    backend: BackendName = DEFAULT_BACKEND
    #: Accepted and ignored: input seeds are drawn per evaluation and kept from the candidate.
    seed_num: int | None = None
    #: Accepted and ignored: timing stops adaptively (the median's standard error, a time budget).
    num_perf_trials: int | None = None
    #: Accepted and ignored: the server logs; the result carries every message.
    verbose: bool | None = None
    #: Accepted and ignored: the queue picks the device.
    preferred_device: int | None = None


def to_request(req: KBenchEvalRequest, builder: JobBuilder) -> EvalRequest:
    """The native request: the server's own copy of the problem when the reference is one of its problems."""
    settings = RequestSettings(backend=req.backend, correctness_trials=req.num_correct_trials,
                               measure_timing=req.measure_performance)
    wanted = normalized_code_hash(req.original_model_src)
    for p in builder.problems():
        if p.hash == wanted:
            return EvalRequest(candidate_source=req.custom_model_src,
                               problem=ProblemRef(level=p.level, problem_id=p.problem_id), settings=settings)
    return EvalRequest(candidate_source=req.custom_model_src, reference_source=req.original_model_src,
                       settings=settings)


_METADATA_KEY = {Stage.LOAD: "compilation_error", Stage.COMPILE: "compilation_error", Stage.INIT: "runtime_error",
                 Stage.RUN: "runtime_error", Stage.TIMEOUT: "runtime_error", Stage.CRASH: "runtime_error",
                 Stage.CORRECTNESS: "correctness_issue", Stage.TIMING: "correctness_issue",
                 Stage.GUARD: "guard_violation"}


def to_kernel_exec_result(r: KernelResult) -> dict[str, Any]:
    """KernelBench's ``KernelExecResult`` shape, as KBenchEval's clients read it."""
    env = r.environment
    metadata: dict[str, Any] = {"hardware": env.gpu_name if env and env.gpu_name else "cpu",
                                "device": env.device if env else None,
                                "kernelbench_result": r.model_dump(mode="json")}
    if r.error is not None:
        metadata[_METADATA_KEY[r.error.stage]] = f"{r.error.type}: {r.error.message}"
    if r.correctness is not None:
        metadata["correctness_trials"] = f"({r.correctness.trials_passed} / {r.correctness.trials_run})"
        if r.correctness.max_abs_error is not None:
            metadata["max_difference"] = [str(r.correctness.max_abs_error)]
    stats: dict[str, Any] = {}
    if r.runtime is not None:
        t = r.runtime
        stats = {"mean": t.mean_ms, "std": t.std_ms, "min": t.min_ms, "max": t.max_ms, "median": t.median_ms,
                 "num_trials": t.n, "hardware": metadata["hardware"], "device": metadata["device"]}
        if r.ref_runtime is not None:
            stats["ref_median"] = r.ref_runtime.median_ms
            stats["speedup"] = r.speedup
    return {"compiled": r.compiled, "correctness": r.correct, "metadata": metadata,
            "runtime": r.runtime_ms if r.runtime_ms is not None else -1.0, "runtime_stats": stats}
