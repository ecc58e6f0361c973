"""The ``data/`` files aggregation writes and the site reads, as pydantic models, and the board's ranking.

``leaderboard.aggregate`` builds these models and writes them (``model_dump(mode="json")``, keys
sorted); the site and the CI's score comment read them back with :func:`read_data_file`, so a field
means the same thing on both sides and a misspelt key is an error instead of a ``KeyError`` deep in
a template. Fields added after the first data files were written have defaults, so a ``data/``
folder aggregated by an earlier version still builds. Where no rank is stored (the per-level
boards), :func:`rank_entries` computes it the way aggregation ranked the overall board.

A board may have a *separate* level (the official level 4, Hugging Face models): ranked on a board of
its own, never part of the overall. ``BoardIndex.separate_levels`` names it; an entry's score there is
in ``Scores.separate`` only when the entry submitted a kernel for that level, and only such entries are
on its board.

``leaderboard.markdown`` keeps to plain dicts on purpose: the comment workflow imports it without
installing the project (it renders validation reports, not these files).

Layout (under ``data/``)::

    index.json                       BoardIndex
    results/<entry>__<GPU>.json      ResultsFile
    problems/level<L>_<id>.json      ProblemFile
    kernels/<entry>.json             {kernel key: source}
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any, Literal, TypeVar

from pydantic import BaseModel, TypeAdapter, ValidationError

from leaderboard.errors import SiteError

DATA_SCHEMA_VERSION = 1
AuditStatus = Literal["clean", "flagged", "excluded"]
#: The overall board; a level's board is named by its number as a string ("1").
OVERALL = "overall"


class ScoreData(BaseModel):
    """A :class:`kernelbench.scoring.Score` as the data files hold it (rounded, p-labels as keys)."""

    n_problems: int
    n_attempted: int
    n_compiled: int
    n_correct: int
    #: ``fast_<p>`` (``fast_0``, ``fast_1.5``, ...) -> share of the level's problems.
    fast_p: dict[str, float]
    geomean_speedup: float | None
    fulldeck_geomean: float
    #: ``pass@<k>`` -> estimate.
    pass_at_k: dict[str, float] = {}
    mean_sol_fraction: float | None = None
    #: Like ``fast_p``, counting only speedups whose 95% interval lies above p; empty in older data.
    fast_p_significant: dict[str, float] = {}
    #: 95% interval of ``geomean_speedup``; absent in older data.
    geomean_ci95: list[float] | None = None
    n_infrastructure: int = 0
    compile_rate: float
    correctness_rate: float


class Scores(BaseModel):
    #: Over the levels in ``levels`` (a separate level is never part of it).
    overall: ScoreData
    #: Level number as a string -> that level's score, for the levels the overall is made of.
    levels: dict[str, ScoreData]
    #: Separate level (a board of its own, e.g. "4") -> the score there; present only when the entry
    #: submitted at least one kernel for that level. Empty in older data.
    separate: dict[str, ScoreData] = {}


class Audit(BaseModel):
    status: AuditStatus
    reasons: list[str]


class EntryMeta(BaseModel):
    """What the submission says about itself, shown beside its scores."""

    display_name: str
    organization: str | None = None
    notes: str | None = None
    #: The submission's ``metadata.model`` as submitted (fields left empty are absent).
    model: dict[str, Any] | None = None
    #: ISO date the submission gives.
    date: str | None = None
    url: str | None = None
    #: ``cuda``, ``triton`` or ``cuda+triton``: the backends of its ranked kernels.
    backend: str


class PendingEntry(EntryMeta):
    """A submission with no results bundle yet."""

    entry: str


class EntryScores(EntryMeta):
    """One entry on one GPU: what both ``index.json`` and its results file hold."""

    entry: str
    gpu: str
    audit: Audit
    scores: Scores
    #: ``baseline <mode>`` or ``in-session reference``: what the speedups divide by.
    speedup_basis: str
    #: The same for each separate level the entry is on (level 4 has no committed baseline, so its
    #: speedups usually divide by the in-session reference).
    separate_speedup_basis: dict[str, str] = {}
    evaluated_on: str | None = None
    runner: str | None = None
    n_kernels: int

    def score(self, scope: str = OVERALL) -> ScoreData:
        """The overall score, or a level's (``scope`` = "1", "2", ..., or a separate level's "4")."""
        if scope == OVERALL:
            return self.scores.overall
        if scope in self.scores.levels:
            return self.scores.levels[scope]
        return self.scores.separate[scope]

    def on_board(self, scope: str = OVERALL) -> bool:
        """Whether the entry is ranked on ``scope``'s board: always on the overall and its levels; on a
        separate level's only with a kernel there."""
        return scope == OVERALL or scope in self.scores.levels or scope in self.scores.separate

    def speedup_basis_for(self, scope: str = OVERALL) -> str:
        return self.separate_speedup_basis.get(scope, self.speedup_basis)

    @property
    def excluded(self) -> bool:
        return self.audit.status == "excluded"


class IndexEntry(EntryScores):
    #: Rank on this GPU's overall board; None when excluded.
    rank: int | None = None
    results_file: str
    kernels_file: str


class GuardRow(BaseModel):
    rule: str
    severity: str
    origin: str
    line: int | None = None
    message: str


class ProblemRow(BaseModel):
    """One problem of the board for one entry: its verdict, speedup and what was flagged."""

    key: str
    level: int
    problem_id: int
    name: str
    #: Whether the submission has a ranked kernel for it (a missing one counts as incorrect).
    submitted: bool
    kernel_key: str | None
    baseline_ms: float | None
    verdict: str
    compiled: bool
    correct: bool
    speedup: float | None
    runtime_ms: float | None
    ref_runtime_ms: float | None
    error: str | None
    flags: list[str]
    guard: list[GuardRow]
    problem_changed: bool
    speedup_ci95: list[float] | None = None
    timing_flags: list[str] = []
    host_share: float | None = None
    own_kernel_share: float | None = None


class ResultsFile(EntryScores):
    """``results/<entry>__<GPU>.json``."""

    schema_version: int = DATA_SCHEMA_VERSION
    problems: list[ProblemRow]
    #: ``p`` -> the thresholds; ``overall`` and ``level<L>`` -> fast_p at each threshold.
    fast_p_curve: dict[str, list[float]]
    problem_source: str


class BestKernel(BaseModel):
    """A correct kernel for one problem, as listed on the problem's page."""

    entry: str
    display_name: str
    status: AuditStatus
    speedup: float | None
    runtime_ms: float | None
    kernel_key: str | None
    backend: str


class ProblemFile(BaseModel):
    """``problems/level<L>_<id>.json``: the reference and the best kernels per GPU."""

    schema_version: int = DATA_SCHEMA_VERSION
    level: int
    problem_id: int
    name: str
    key: str
    hash: str
    code: str
    #: GPU -> correct kernels, fastest first, excluded entries last.
    best: dict[str, list[BestKernel]]


class IndexProblem(BaseModel):
    key: str
    level: int
    problem_id: int
    name: str

    @property
    def file(self) -> str:
        return f"problems/level{self.level}_{self.problem_id}.json"


class ProblemSetLabel(BaseModel):
    """The board's set; per-problem hashes are in ``problems/`` and the bundles."""

    name: str
    revision: str


class BoardIndex(BaseModel):
    """``index.json``: every entry on every GPU, ranked, and what the board is made of."""

    schema_version: int = DATA_SCHEMA_VERSION
    problem_source: str
    #: Absent in data aggregated before problem sets had an identity.
    problem_set: ProblemSetLabel | None = None
    #: Level number as a string -> its problem count, for the levels of the overall board.
    levels: dict[str, int]
    #: Levels ranked on a board of their own, never in the overall (the official level 4, which loads
    #: Hugging Face models) -> problem count. Empty in older data and on boards without one.
    separate_levels: dict[str, int] = {}
    #: Every problem, those of separate levels included.
    problems: list[IndexProblem]
    fast_p_thresholds: list[float]
    gpus: list[str]
    default_gpu: str | None
    #: Per GPU (sorted), in board order.
    entries: list[IndexEntry]
    pending: list[PendingEntry]
    last_evaluated: str | None


#: ``kernels/<entry>.json``: kernel key -> source.
KernelSources = dict[str, str]

M = TypeVar("M")
E = TypeVar("E", bound=EntryScores)


def read_data_file(path: Path, kind: type[M]) -> M:
    """Read one ``data/`` file as ``kind`` (a model above, or :data:`KernelSources`).

    Raises SiteError naming the file (and the field) when it is missing, not JSON or not of that shape.
    """
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise SiteError(f"{path} does not exist: run 'kernelbench leaderboard aggregate' first") from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as e:
        raise SiteError(f"{path} is not valid JSON: {e}") from None
    try:
        return TypeAdapter(kind).validate_python(data)
    except ValidationError as e:
        first = e.errors()[0]
        loc = ".".join(str(x) for x in first["loc"]) or "(top level)"
        raise SiteError(f"{path}: {loc}: {first['msg']} (not a file 'leaderboard aggregate' writes)") from None


def rank_entries(entries: Iterable[E], scope: str = OVERALL) -> list[tuple[E, int | None]]:
    """One GPU's entries in board order, each with its rank on the ``scope`` board.

    Excluded entries come last and have no rank; the others go by full-deck geometric mean,
    highest first; equal values share a rank (1, 2, 2, 4); ties are listed by entry name.
    Entries not on the board (no kernel for a separate level) are left out.
    Aggregation stores the overall rank in ``index.json``; the site ranks each level the same way.
    """
    ordered = sorted((e for e in entries if e.on_board(scope)),
                     key=lambda e: (e.excluded, -e.score(scope).fulldeck_geomean, e.entry))
    out: list[tuple[E, int | None]] = []
    rank, prev, seen = 0, None, 0
    for e in ordered:
        if e.excluded:
            out.append((e, None))
            continue
        seen += 1
        value = e.score(scope).fulldeck_geomean
        if value != prev:
            rank, prev = seen, value
        out.append((e, rank))
    return out
