"""Prompts: jinja2 templates per backend, one worked example each, and the feedback for refinement turns.

A prompt carries everything a model needs and nothing it could game: the problem source, a worked
example in the same backend, the target GPU, the precision and tolerance, how the answer is judged,
and the output contract (one fenced Python block defining ``ModelNew``). The exact text is what
``kernelbench prompt`` prints, so a user can always see what was sent.
"""

from __future__ import annotations

from functools import cache, lru_cache
from importlib import resources
from typing import TYPE_CHECKING

from kernelbench.backends import DEFAULT_BACKEND, REGISTRY, prompt_backends
from kernelbench.errors import KernelBenchError

if TYPE_CHECKING:
    from kernelbench.backends import BackendSpec, PromptSpec
    from kernelbench.hardware import GpuSpec
    from kernelbench.problems.model import Problem
    from kernelbench.results import KernelResult

_DTYPE_NAMES = {"fp32": "float32", "fp16": "float16", "bf16": "bfloat16"}
MAX_FEEDBACK_ERROR_CHARS = 6000


class PromptError(KernelBenchError, ValueError):
    """Bad prompt input (unknown backend or precision); the message names it."""


def _root():
    return resources.files("kernelbench.prompts")


@lru_cache(maxsize=1)
def _environment():
    import jinja2

    loader = jinja2.FunctionLoader(
        lambda name: (_root() / "templates" / name).read_text(encoding="utf-8")
    )
    return jinja2.Environment(loader=loader, undefined=jinja2.StrictUndefined, keep_trailing_newline=False,
                              trim_blocks=True, lstrip_blocks=True, autoescape=False)


@cache
def worked_example(backend: str) -> tuple[str, str]:
    """(Model source, ModelNew source) of the backend's worked example, as shipped in ``examples/``."""
    prompt = _prompt_spec(backend)[1]
    ex = _root() / "examples"
    return (ex / "model.py").read_text(encoding="utf-8").strip(), \
        (ex / prompt.example).read_text(encoding="utf-8").strip()


def _prompt_spec(backend: str) -> tuple[BackendSpec, PromptSpec]:
    """The backend's spec and its prompt files; a backend without prompts is a PromptError naming those with."""
    spec = REGISTRY.get(backend) if backend in REGISTRY else None
    if spec is None or spec.prompt is None:
        raise PromptError(f"no prompt template for backend {backend!r} (available: {', '.join(prompt_backends())})")
    return spec, spec.prompt


def describe_gpu(gpu: str | GpuSpec | None) -> str:
    """The target-GPU section: the hardware table's description, or the bare name if the table lacks it."""
    if gpu is None:
        return "Not specified: assume a recent NVIDIA data-center GPU (Hopper or Ampere class)."
    if isinstance(gpu, str):
        from kernelbench.hardware import find_gpu_spec

        spec = find_gpu_spec(gpu)
        if spec is None:
            return f"{gpu} (no detailed specification is known for this GPU)."
        return spec.describe()
    return gpu.describe()


def describe_precision(precision: str, tolerance_mode: str = "default") -> str:
    from kernelbench.evaluation.settings import tolerance_for

    if precision not in _DTYPE_NAMES:
        raise PromptError(f"unknown precision {precision!r} (choose from {', '.join(_DTYPE_NAMES)})")
    tol = tolerance_for(precision, tolerance_mode)
    dtype = _DTYPE_NAMES[precision]
    text = (f"Inputs and parameters are {dtype} (torch.{dtype}): the evaluator casts what `get_inputs()` "
            f"returns and the parameters of both models to it, and your outputs must be {dtype} too. Tolerance: "
            f"atol = {tol.atol:g}, rtol = {tol.rtol:g}.")
    if precision == "fp32":
        text += (" Lower-precision arithmetic (TF32, FP16 or BF16 tensor cores) is allowed only if the result "
                 "still meets this tolerance.")
    else:
        text += " Accumulate sums and dot products in float32."
    return text


def _tolerance(precision: str, tolerance_mode: str):
    from kernelbench.evaluation.settings import tolerance_for

    return tolerance_for(precision, tolerance_mode)


def build_prompt(problem: Problem, backend: str = DEFAULT_BACKEND, precision: str = "fp32",
                 gpu: str | GpuSpec | None = None, tolerance_mode: str = "default") -> str:
    """The first-turn prompt for one problem."""
    spec, prompt = _prompt_spec(backend)
    if precision not in _DTYPE_NAMES:
        raise PromptError(f"unknown precision {precision!r} (choose from {', '.join(_DTYPE_NAMES)})")
    model_src, model_new_src = worked_example(backend)
    template = _environment().get_template(prompt.template)
    text = template.render(
        problem=problem,
        backend_name=spec.display_name,
        tolerance=_tolerance(precision, tolerance_mode),
        gpu_description=describe_gpu(gpu),
        precision_description=describe_precision(precision, tolerance_mode),
        example_model=model_src,
        example_model_new=model_new_src,
        example_intro=prompt.example_intro,
    )
    return text.strip() + "\n"


def _trim(text: str | None, limit: int = MAX_FEEDBACK_ERROR_CHARS) -> str:
    from kernelbench.results import trim

    return (trim(text, limit) or "").strip()


def describe_verdict(result: KernelResult | None, extraction_error: str | None = None) -> str:
    """The verdict in words for the model: what failed and the evidence (error, mismatch, timing)."""
    from kernelbench.results import Stage

    if result is None:
        reason = extraction_error or "no code was found"
        return f"No kernel could be evaluated: {reason}."
    if result.correct:
        if result.runtime_ms is not None and result.ref_runtime_ms is not None:
            speed = result.speedup
            verdict = (f"It was correct. It ran in {result.runtime_ms:.4g} ms against {result.ref_runtime_ms:.4g} ms "
                       f"for the PyTorch reference: a speedup of {speed:.3g}x.") if speed else \
                f"It was correct. It ran in {result.runtime_ms:.4g} ms."
            return verdict
        return "It was correct (its speed was not measured)."
    err = result.error
    if err is None:
        detail = result.correctness.first_failure if result.correctness else None
        return "Its outputs were wrong." + (f" {detail}" if detail else "")
    message = _trim(err.message)
    tb = _trim(err.traceback, 2000) if err.traceback else ""
    if err.stage == Stage.COMPILE:
        log = _trim(result.compile_log) if result.compile_log else ""
        body = log or message
        return f"It failed to compile or import ({err.type}):\n\n```\n{body}\n```"
    if err.stage == Stage.LOAD:
        return f"It could not be loaded ({err.type}): {message}"
    if err.stage == Stage.CORRECTNESS:
        c = result.correctness
        parts = [f"Its outputs were wrong ({err.type}): {message}"]
        if c is not None:
            parts.append(f"Correctness trials passed: {c.trials_passed} of {c.trials_run}.")
            if c.max_abs_error is not None:
                parts.append(f"Largest absolute error {c.max_abs_error:.3g}, relative {c.max_rel_error or 0:.3g} "
                             f"(tolerance atol {c.atol:g}, rtol {c.rtol:g}).")
            if c.first_failure and c.first_failure not in message:
                parts.append(c.first_failure)
        return " ".join(parts)
    if err.stage == Stage.TIMEOUT:
        return f"It ran out of time ({message}). Look for hangs, deadlocks or very slow launches."
    if err.stage == Stage.GUARD:
        findings = "; ".join(f.message for f in result.failing_findings) or message
        return f"It was rejected because it breaks the measurement rules: {findings}"
    where = {Stage.INIT: "failed while building ModelNew", Stage.RUN: "failed while running forward",
             Stage.TIMING: "failed while being timed", Stage.CRASH: "crashed its process"}.get(err.stage, "failed")
    text = f"It {where} ({err.type}): {message}"
    if tb:
        text += f"\n\n```\n{tb}\n```"
    return text


def build_feedback_prompt(problem: Problem, backend: str, precision: str, gpu: str | GpuSpec | None,
                          previous_source: str | None, result: KernelResult | None, turn: int,
                          extraction_error: str | None = None, best: KernelResult | None = None,
                          tolerance_mode: str = "default", profile: str | None = None,
                          profile_turn: int | None = None) -> str:
    """The prompt for the turn after ``turn``: the task again, the previous kernel and its verdict.

    Each turn is a fresh single message rather than a growing conversation, so the context stays
    the same size however many turns there are. ``profile`` (refinement with ``--feedback profile``) is the
    Nsight Compute summary of the last correct kernel, from turn ``profile_turn``, or the line saying why
    there is none.
    """
    base = build_prompt(problem, backend, precision, gpu, tolerance_mode)
    verdict = describe_verdict(result if previous_source else None, extraction_error)
    if result is not None and result.correct:
        instruction = "Make it faster while keeping it correct."
    elif previous_source:
        instruction = "Fix the problem."
    else:
        instruction = "Write the kernel."
    best_note = None
    if best is not None and best.correct and best.speedup is not None and best is not result:
        best_note = (f"Your best correct kernel so far reached a speedup of {best.speedup:.3g}x; "
                     f"an answer that is slower or wrong will not replace it.")
    if profile and not profile.startswith("profile unavailable") and result is not None and result.correct:
        instruction = "Make it faster while keeping it correct: the profile shows where its time goes."
    text = _environment().get_template("feedback.j2").render(
        base_prompt=base.strip(), turn=turn, previous_source=(previous_source or "").strip() or None,
        verdict=verdict, best_note=best_note, instruction=instruction,
        profile=_trim(profile) if profile else None, profile_turn=profile_turn,
        profile_is_previous=profile_turn == turn,
    )
    return text.strip() + "\n"
