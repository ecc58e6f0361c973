"""Baseline time files: one per GPU type, the reference's runtime per problem.

One module per job:

* :mod:`.format`: the file's model (:class:`Baseline`, :class:`BaselineEntry`) and reading it, ours and
  the files KernelBench publishes;
* :mod:`.paths`: where a GPU's file lives, per problem set;
* :mod:`.writer`: :class:`BaselineFile`, the one writer: merges times in one at a time with atomic
  writes, so a killed run resumes where it stopped, and refuses times that are not comparable;
* :mod:`.measure`: timing one problem's reference on this machine with the evaluator's own protocol;
* :mod:`.run`: a measuring run (what the file lacks, measured and written one by one, and its report);
* :mod:`.remote`: the same run with the measurements fanned out through the Modal runner;
* :mod:`.compare`: two files problem by problem (run to run, and ours beside KernelBench's published).

Names of GPUs (:func:`gpu_family`, :func:`gpu_label`) and the local GPU reader (:func:`local_gpu_names`)
live in :mod:`kernelbench.hardware`; they are importable from here too.
"""

from kernelbench.baselines.compare import (
    CUES,
    BaselineAgreement,
    Evidence,
    Paired,
    ProblemRatio,
    PublishedComparison,
    PublishedRatio,
    RatioSummary,
    compare_baselines,
    compare_with_published,
    host_shares_from_rows,
    pair_by_name,
    uses_cudnn_conv,
)
from kernelbench.baselines.format import (
    BASELINE_MODES,
    EAGER,
    Baseline,
    BaselineEntry,
    BaselineEnvironment,
    check_modes,
    load_baseline,
    one_line,
    parse_baseline,
)
from kernelbench.baselines.measure import (
    REFERENCE_SPARES,
    BaselineMeasureError,
    LocalMeasurer,
    MeasureFn,
    baseline_settings,
    entry_from_timing,
    measure_problem,
)
from kernelbench.baselines.paths import baseline_path_for_gpu, baselines_dir_for, find_baseline_for_gpu
from kernelbench.baselines.remote import measure_into_via_modal
from kernelbench.baselines.run import (
    BaselineOutcome,
    BaselineRunReport,
    Status,
    measure_into,
    plan,
    warm_compile_caches,
)
from kernelbench.baselines.writer import BaselineFile
from kernelbench.hardware import gpu_family, gpu_label, local_gpu_names

__all__ = [
    "BASELINE_MODES", "CUES", "EAGER", "REFERENCE_SPARES", "Baseline", "BaselineAgreement", "BaselineEntry",
    "BaselineEnvironment", "BaselineFile", "BaselineMeasureError", "BaselineOutcome", "BaselineRunReport",
    "Evidence", "LocalMeasurer", "MeasureFn", "Paired", "ProblemRatio", "PublishedComparison", "PublishedRatio",
    "RatioSummary", "Status", "baseline_path_for_gpu", "baseline_settings", "baselines_dir_for", "check_modes",
    "compare_baselines", "compare_with_published", "entry_from_timing", "find_baseline_for_gpu", "gpu_family",
    "gpu_label", "host_shares_from_rows", "load_baseline", "local_gpu_names", "measure_into",
    "measure_into_via_modal", "measure_problem", "one_line", "pair_by_name", "parse_baseline", "plan",
    "uses_cudnn_conv", "warm_compile_caches",
]
