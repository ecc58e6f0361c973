"""Problems: the Problem/ProblemSet contract and the sources that produce them."""

from kernelbench.problems.model import (
    LEVELS,
    Problem,
    ProblemSet,
    normalized_code_hash,
    parse_id_spec,
    problem_key,
)
from kernelbench.problems.sources import (
    HF_DATASET_ID,
    OFFICIAL_LEVELS,
    OFFICIAL_SEPARATE_LEVELS,
    SOURCE_REGISTRY,
    ProblemSource,
    UnknownSourceError,
    builtin_root,
    get_source,
    load_board_problems,
    load_builtin,
    load_directory,
    load_huggingface,
    load_official,
    load_problems,
    separate_board_levels,
    source_names,
)

__all__ = [
    "HF_DATASET_ID", "LEVELS", "OFFICIAL_LEVELS", "OFFICIAL_SEPARATE_LEVELS", "SOURCE_REGISTRY", "Problem",
    "ProblemSet", "ProblemSource", "UnknownSourceError", "builtin_root", "get_source", "load_board_problems",
    "load_builtin", "load_directory", "load_huggingface", "load_official", "load_problems", "normalized_code_hash",
    "parse_id_spec", "problem_key", "separate_board_levels", "source_names",
]
