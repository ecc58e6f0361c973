"""Allocation failures in the evaluator's own worker code, told apart from the candidate's.

Our worker code allocates in both processes: the inputs of every call, the poisoning before a trial, a
candidate's copies of what it exports (the export arena, a shared buffer, their fallbacks), and in the
reference its own copies of what a candidate exported. When one of those cannot be allocated (the GPU is
shared by two processes, and official problems reach 8 GiB per tensor) that is our shortfall, never a fact
about the candidate: it must not become a wrong-output or modified-input verdict (as "could not read the
candidate's outputs: CUDA out of memory" once did). Such failures are raised as :class:`EvaluatorOutOfMemory`
(:data:`kernelbench.evaluation.protocol.EVALUATOR_OUT_OF_MEMORY`), so the result says what ran short. The parent
makes it an infrastructure failure only before candidate code has run; after that it is a verdict flagged out of
memory (parent/job.py, parent/verdict.py), because a candidate's process can raise an exception of this name
itself, and can starve the reference of memory, while infrastructure results are left out of the scores.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

#: What the allocators' messages say when they give up (CUDA's caching allocator and driver, the CPU allocator).
_MESSAGES = ("out of memory", "can't allocate memory")


class EvaluatorOutOfMemory(RuntimeError):
    """Our worker code could not allocate what it needed (the name is protocol.EVALUATOR_OUT_OF_MEMORY)."""


def is_out_of_memory(torch: Any, e: BaseException) -> bool:
    """Whether ``e`` is an allocation that failed: torch's OutOfMemoryError, MemoryError, or a RuntimeError whose
    message is an allocator's (the CPU allocator's, a CUDA driver call's)."""
    if isinstance(e, (EvaluatorOutOfMemory, MemoryError)) or isinstance(e, torch.OutOfMemoryError):
        return True
    if isinstance(e, RuntimeError):
        try:
            text = str(e).lower()
        except Exception:
            return False
        return any(m in text for m in _MESSAGES)
    return False


def as_evaluator_oom(torch: Any, e: BaseException, what: str) -> EvaluatorOutOfMemory | None:
    """``e`` restated as our allocation failure during ``what``; None when it is not an allocation failure."""
    if isinstance(e, EvaluatorOutOfMemory):
        return e
    if not is_out_of_memory(torch, e):
        return None
    return EvaluatorOutOfMemory(f"the evaluator ran out of memory {what}: {type(e).__name__}: {e}")


@contextmanager
def evaluator_allocations(torch: Any, what: str) -> Iterator[None]:
    """Allocation failures inside the block are ours (:class:`EvaluatorOutOfMemory`); other errors pass as they are."""
    try:
        yield
    except Exception as e:
        ours = as_evaluator_oom(torch, e, what)
        if ours is None or ours is e:
            raise
        raise ours from e
