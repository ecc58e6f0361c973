"""Which problems the Modal GPU functions can run, and the result for one they cannot.

Apart from the runner because the leaderboard's validation (which never runs anything) and the baseline
commands ask the same question before anything is sent.
"""

from __future__ import annotations

from collections.abc import Iterable

from kernelbench.errors import KernelBenchError
from kernelbench.evaluation.settings import EvalJob
from kernelbench.problems.model import Problem
from kernelbench.results import KernelResult, Stage, StageError

#: Error type of a result for a kernel whose problem cannot run on Modal (a package the image lacks,
#: or a hub model the source does not name).
NOT_RUNNABLE_TYPE = "NotRunnableOnModal"
#: Packages beyond the evaluator's own that the Modal image installs, by import name, for problems
#: that need them (official level 3 imports einops, level 4 transformers). ``tests/test_modal_app.py``
#: checks the image pins a distribution for each.
MODAL_IMAGE_MODULES: tuple[str, ...] = ("einops", "transformers")


def hub_models_of(problem: Problem) -> tuple[str, ...]:
    """The hub models a problem loads (official level 4), read from its source."""
    from kernelbench.problems.hub import hub_needs

    return hub_needs(problem.code).models


def modal_blocker(problem: Problem) -> str | None:
    """Why ``problem`` cannot run in the Modal GPU functions, or None if it can.

    A problem that loads a hub model can run: the trusted fetch puts the model into the hub cache
    Volume first, and the evaluation reads it offline. It cannot when it imports a package the image
    does not install, or loads a model whose id its source does not spell out (nothing to fetch).
    """
    from kernelbench.problems.hub import hub_needs

    missing = [r for r in problem.requirements if r not in MODAL_IMAGE_MODULES]
    where = f"level {problem.level} problem {problem.problem_id} ({problem.name})"
    if missing:
        return (f"{where} needs {', '.join(missing)}, which the Modal image does not install: evaluate it on a "
                "local GPU (--runner local)")
    needs = hub_needs(problem.code)
    if needs.unresolved:
        return (f"{where} loads a Hugging Face model its source does not name ({', '.join(needs.unresolved)}), so "
                "it cannot be fetched for the network-less GPU functions: evaluate it on a local GPU (--runner local)")
    return None


def check_runnable_on_modal(problems: Iterable[Problem]) -> None:
    """Refuse, before anything is sent, problems that need packages the image lacks."""
    for p in problems:
        reason = modal_blocker(p)
        if reason:
            raise KernelBenchError(reason)


def not_runnable_result(job: EvalJob, message: str, runner: str) -> KernelResult:
    """The per-kernel result for a job this runner cannot run: failed at load, nothing was sent."""
    p = job.problem
    return KernelResult(
        level=p.level, problem_id=p.problem_id, problem_name=p.name, problem_hash=p.hash,
        sample_id=job.sample_id, backend=job.settings.backend, precision=job.settings.precision,
        error=StageError.make(Stage.LOAD, NOT_RUNNABLE_TYPE, message), runner=runner,
    )
