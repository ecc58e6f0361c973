"""The trusted parent: runs jobs through reference and candidate workers and decides verdicts.

This process never imports candidate code and never creates a CUDA context; the workers do
the GPU work. The reference worker (trusted code only) is kept per problem and device; every
candidate gets a fresh process, and a spare is started ahead so the next candidate does not
wait for Python, torch and CUDA to start. CUDA candidates of a batch are built on all CPU cores
in parallel (compile workers fill the extension cache) while the GPUs evaluate what is ready.

One module per job (docs/architecture.md, "Evaluation"): :mod:`.workers` (starting and calling
workers, spares), :mod:`.session` (one device: its reference and spares), :mod:`.job` and
:mod:`.stages` (one job's checks and stages), :mod:`.verdict` (what a job established),
:mod:`.rounds` (the timing loop), :mod:`.candidate_timing` and :mod:`.reference_timing` (its two
users), :mod:`.batch` (batches over the local devices, and :class:`Evaluator`). This package
exports what code outside the evaluator uses.
"""

from kernelbench.evaluation.parent.batch import Evaluator, evaluate, evaluate_batch
from kernelbench.evaluation.parent.job import run_job
from kernelbench.evaluation.parent.reference_timing import COMPILE_MODES, ReferenceTiming, measure_reference
from kernelbench.evaluation.parent.session import DeviceSession, visible_devices
from kernelbench.evaluation.parent.verdict import infrastructure_result
from kernelbench.evaluation.parent.workers import confinement_for, start_worker
from kernelbench.evaluation.settings import EvalJob, EvalSettings

__all__ = ["COMPILE_MODES", "DeviceSession", "EvalJob", "EvalSettings", "Evaluator", "ReferenceTiming",
           "confinement_for", "evaluate", "evaluate_batch", "infrastructure_result", "measure_reference", "run_job",
           "start_worker", "visible_devices"]
