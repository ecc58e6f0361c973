"""The evaluator: isolated compile, verify and time of candidate kernels.

Public entry points: :func:`evaluate` (one job) and :func:`evaluate_batch` (many jobs over the
local devices). Both return :class:`kernelbench.results.KernelResult` objects.
"""

from kernelbench.evaluation.settings import EvalJob, EvalSettings, Tolerance, tolerance_for

__all__ = ["EvalJob", "EvalSettings", "Tolerance", "evaluate", "evaluate_batch", "tolerance_for"]


def evaluate(job, **kwargs):
    from kernelbench.evaluation.parent import evaluate as _evaluate

    return _evaluate(job, **kwargs)


def evaluate_batch(jobs, **kwargs):
    from kernelbench.evaluation.parent import evaluate_batch as _evaluate_batch

    return _evaluate_batch(jobs, **kwargs)
