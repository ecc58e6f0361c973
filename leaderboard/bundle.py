"""Results bundle: every result of one entry on one GPU type, the input of aggregation.

``leaderboard evaluate`` writes one per (entry, GPU) to ``data/evaluations/<entry>__<GPU>.json``;
run directories can be imported into one too. A bundle records which submission content it
belongs to, so aggregation can tell fresh results from stale ones.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from pydantic import BaseModel, Field, ValidationError

from kernelbench.io_utils import atomic_write_text
from kernelbench.problems.identity import RecordedProblemSet
from kernelbench.results import KernelResult
from leaderboard.errors import AggregationError

BUNDLE_SCHEMA_VERSION = 1
SEPARATOR = "__"
_GPU_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9.-]*$")


def check_gpu_label(gpu: str) -> str:
    if not _GPU_RE.match(gpu) or len(gpu) > 40:
        raise ValueError(f"GPU label {gpu!r} must be letters, digits, '.' or '-' (e.g. H100, A100, CPU)")
    return gpu


def bundle_name(entry: str, gpu: str) -> str:
    return f"{entry}{SEPARATOR}{gpu}.json"


class ResultsBundle(BaseModel):
    schema_version: int = BUNDLE_SCHEMA_VERSION
    entry: str
    #: Canonical GPU family ("H100"), or "CPU" for the interpreter path.
    gpu: str
    submission_sha256: str
    problem_source: str
    #: The problem set the kernels were evaluated on (name, revision, per-problem hash; written as
    #: ``ProblemSetIdentity.to_dict()``); aggregation refuses a bundle whose set is not the board's.
    #: Absent in bundles written before sets had an identity.
    problem_set: RecordedProblemSet | None = None
    #: Where it ran, e.g. "local" or "modal:H100".
    runner: str | None = None
    #: The day the evaluation finished (ISO date), recorded by evaluate, never by aggregation.
    evaluated_on: str | None = None
    settings: dict = Field(default_factory=dict)
    results: list[KernelResult] = Field(default_factory=list)

    def sorted_results(self) -> list[KernelResult]:
        return sorted(self.results, key=lambda r: (r.level, r.problem_id, r.sample_id))

    def to_json(self) -> str:
        data = json.loads(self.model_dump_json())
        data["results"] = [json.loads(r.model_dump_json()) for r in self.sorted_results()]
        return json.dumps(data, indent=1, sort_keys=True, allow_nan=False) + "\n"


def write_bundle(bundle: ResultsBundle, directory: str | Path) -> Path:
    path = Path(directory) / bundle_name(bundle.entry, bundle.gpu)
    atomic_write_text(path, bundle.to_json())
    return path


def read_bundle(path: str | Path) -> ResultsBundle:
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise AggregationError(f"results bundle {path} does not exist") from None
    except UnicodeDecodeError:
        raise AggregationError(f"results bundle {path} is not UTF-8") from None
    try:
        bundle = ResultsBundle.model_validate_json(text)
    except ValidationError as e:
        first = e.errors()[0]
        loc = ".".join(str(x) for x in first["loc"])
        raise AggregationError(f"results bundle {path}: {loc}: {first['msg']}") from None
    from kernelbench.results import reduced_size_message, reduced_size_results

    reduced = reduced_size_results(bundle.results)
    if reduced:
        raise AggregationError(reduced_size_message(reduced, f"results bundle {path}"))
    return bundle
