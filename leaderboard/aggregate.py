"""Aggregate submissions and their evaluated results into the ``data/`` files the site is built from.

Every number comes from ``kernelbench.scoring`` (``score_results``, ``outcomes_from_results``,
``fast_p``), so the board, ``kernelbench analyze`` and CI agree. The output is a pure function of
the inputs: keys sorted, floats rounded to a fixed number of places, no clock readings, and files
of entries that disappeared are removed; running it twice gives byte-identical files.

Layout written under ``out_dir`` (each file a model of ``leaderboard.data_model``)::

    index.json                       entries x GPUs, scores per level and overall, audit status
                                     (and per separate level: the official level 4 is a board of its own)
    results/<entry>__<GPU>.json      per-problem verdicts, speedups, kernel keys, fast_p curve
    problems/level<L>_<id>.json      reference source and the best kernels across entries, per GPU
    kernels/<entry>.json             the ranked kernels' sources, for the entry and problem pages
"""

from __future__ import annotations

import logging
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from pydantic import BaseModel, Field, ValidationError

from kernelbench.backends import DEFAULT_BACKEND
from kernelbench.baselines import Baseline, baseline_path_for_gpu, load_baseline
from kernelbench.io_utils import atomic_write_json
from kernelbench.problems.identity import (
    BUILTIN,
    ProblemSetIdentity,
    ProblemSetMismatchError,
    check_names,
    check_same_set,
    identify,
)
from kernelbench.problems.model import ProblemSet
from kernelbench.problems.sources import separate_board_levels
from kernelbench.results import KernelResult
from kernelbench.scoring import (
    FAST_P_THRESHOLDS,
    ProblemOutcome,
    Score,
    check_same_gpu,
    fast_p,
    outcomes_from_results,
    score_results,
    timing_mismatch,
)
from leaderboard.bundle import SEPARATOR, ResultsBundle, bundle_name, read_bundle
from leaderboard.data_model import (
    Audit,
    AuditStatus,
    BestKernel,
    BoardIndex,
    EntryMeta,
    GuardRow,
    IndexEntry,
    IndexProblem,
    PendingEntry,
    ProblemFile,
    ProblemRow,
    ProblemSetLabel,
    ResultsFile,
    ScoreData,
    Scores,
    rank_entries,
)
from leaderboard.errors import AggregationError
from leaderboard.schema import RANKED_SAMPLE, Submission, check_entry_id, entry_id_for, load_submission

log = logging.getLogger(__name__)

FLOAT_DIGITS = 6
#: p values of the fast_p curve drawn on the site (0 to 3 in steps of 0.05).
CURVE_P: tuple[float, ...] = tuple(round(i * 0.05, 2) for i in range(61))
MANAGED_DIRS = ("results", "problems", "kernels")


class Exclusion(BaseModel):
    entry: str
    #: Only this GPU's results; all GPUs when absent.
    gpu: str | None = None
    reason: str = Field(min_length=1)


class Exclusions(BaseModel):
    exclusions: list[Exclusion] = Field(default_factory=list)

    def reason_for(self, entry: str, gpu: str) -> str | None:
        for e in self.exclusions:
            if e.entry == entry and (e.gpu is None or e.gpu == gpu):
                return e.reason
        return None


def load_exclusions(path: str | Path | None) -> Exclusions:
    if path is None or not Path(path).exists():
        return Exclusions()
    try:
        return Exclusions.model_validate_json(Path(path).read_text(encoding="utf-8"))
    except ValidationError as e:
        first = e.errors()[0]
        raise AggregationError(f"exclusions file {path}: {'.'.join(map(str, first['loc']))}: {first['msg']}") from None


@dataclass(frozen=True)
class AggregateConfig:
    submissions_dir: Path = Path("submissions")
    evaluations_dir: Path = Path("data/evaluations")
    baselines_dir: Path = Path("baselines")
    exclusions_path: Path | None = Path("leaderboard/exclusions.json")
    out_dir: Path = Path("data")
    baseline_mode: str = "eager"


@dataclass
class BoardRow:
    entry: str
    gpu: str
    display_name: str
    rank: int | None
    status: AuditStatus
    score: Score
    speedup_basis: str


@dataclass
class AggregateResult:
    #: The overall board, per GPU in board order.
    rows: list[BoardRow] = field(default_factory=list)
    #: Separate level (official level 4) -> its board's rows (``score`` is that level's), per GPU in order.
    separate: dict[int, list[BoardRow]] = field(default_factory=dict)
    pending: list[str] = field(default_factory=list)
    written: list[Path] = field(default_factory=list)
    removed: list[Path] = field(default_factory=list)


# ---------------------------------------------------------------- helpers
def _r(x: float | None) -> float | None:
    """Round for stable, readable output; non-finite values never reach JSON."""
    if x is None:
        return None
    if not math.isfinite(x):
        raise AggregationError(f"non-finite value {x} in scores")
    return round(float(x), FLOAT_DIGITS)


def _rounded_map(values: dict[str, float]) -> dict[str, float]:
    return {k: _r(v) for k, v in values.items()}  # type: ignore[misc]


def score_data(score: Score) -> ScoreData:
    """The score as the data files hold it: rounded, with ``Score.to_dict``'s key labels."""
    d = score.to_dict()
    return ScoreData(
        n_problems=score.n_problems, n_attempted=score.n_attempted, n_compiled=score.n_compiled,
        n_correct=score.n_correct, fast_p=_rounded_map(d["fast_p"]), geomean_speedup=_r(score.geomean_speedup),
        fulldeck_geomean=_r(score.fulldeck_geomean), pass_at_k=_rounded_map(d["pass_at_k"]),  # type: ignore[arg-type]
        mean_sol_fraction=_r(score.mean_sol_fraction), fast_p_significant=_rounded_map(d["fast_p_significant"]),
        geomean_ci95=[_r(v) for v in score.geomean_ci95] if score.geomean_ci95 is not None else None,  # type: ignore[misc]
        n_infrastructure=score.n_infrastructure, compile_rate=_r(score.compile_rate),  # type: ignore[arg-type]
        correctness_rate=_r(score.correctness_rate),  # type: ignore[arg-type]
    )


def fast_p_curve(outcomes: Sequence[ProblemOutcome], n_problems: int, ps: Iterable[float] = CURVE_P) -> list[float]:
    return [_r(fast_p(outcomes, n_problems, p)) for p in ps]  # type: ignore[misc]


def _load_submissions(directory: Path) -> dict[str, Submission]:
    subs: dict[str, Submission] = {}
    if not directory.is_dir():
        raise AggregationError(f"submissions folder {directory} does not exist")
    for path in sorted(directory.glob("*.json")):
        entry = entry_id_for(path)
        try:
            check_entry_id(entry)
        except ValueError as e:
            raise AggregationError(str(e)) from None
        subs[entry] = load_submission(path)
    return subs


def _load_bundles(directory: Path, subs: dict[str, Submission]) -> list[ResultsBundle]:
    if not directory.is_dir():
        return []
    bundles = []
    for path in sorted(directory.glob("*.json")):
        b = read_bundle(path)
        expected = f"{b.entry}{SEPARATOR}{b.gpu}.json"
        if path.name != expected:
            raise AggregationError(f"results bundle {path} holds {b.entry} on {b.gpu}; name it {expected}")
        if b.entry not in subs:
            raise AggregationError(f"results bundle {path} is for entry {b.entry!r}, which has no "
                                   f"submissions/{b.entry}.json")
        bundles.append(b)
    return bundles


def _baseline_for(gpu: str, config: AggregateConfig, cache: dict[str, Baseline | None]) -> Baseline | None:
    if gpu not in cache:
        path = baseline_path_for_gpu(gpu, config.baselines_dir)
        cache[gpu] = load_baseline(path, mode=config.baseline_mode) if path.exists() else None
        if cache[gpu] is None:
            log.warning("no baseline %s: speedups on %s use the in-session reference timings", path, gpu)
    return cache[gpu]


def _usable_baseline(baseline: Baseline | None, results: Sequence[KernelResult], problems: ProblemSet,
                     entry: str, gpu: str) -> Baseline | None:
    """The baseline to score ``results`` on ``problems`` against, or None for the in-session reference.

    Checked per board: a baseline that covers levels 1-3 but not level 4 still serves the overall
    board, while the level-4 board falls back to the reference timed in each evaluation session.
    """
    if baseline is None:
        return None
    mismatch = timing_mismatch(results, baseline)
    if mismatch is not None:
        # Timed under another protocol version or precision than the baseline (an entry evaluated before
        # the protocol changed, or in fp16): the two sets of times are not comparable, but each
        # evaluation's own reference (timed in the same session) still is.
        log.warning("%s on %s: %s; speedups use in-session reference timings", entry, gpu, mismatch[0])
        return None
    check_same_gpu(results, baseline)
    missing = [p for p in problems if baseline.find(p) is None]
    if missing:
        # An incomplete baseline would score some problems against it and others not:
        # use the reference timed in each evaluation session for every problem instead.
        levels = ", ".join(str(lv) for lv in sorted({p.level for p in missing}))
        log.warning("baseline for %s lacks %d problem(s) of level(s) %s (e.g. %s); speedups there use in-session "
                    "reference timings", gpu, len(missing), levels, missing[0].filename)
        return None
    return baseline


def _basis(baseline: Baseline | None, config: AggregateConfig) -> str:
    return f"baseline {config.baseline_mode}" if baseline is not None else "in-session reference"


def _finding_reasons(results: Iterable[KernelResult]) -> list[str]:
    reasons = []
    for r in sorted(results, key=lambda r: (r.level, r.problem_id, r.sample_id)):
        for f in r.guard_findings:
            if f.severity in ("error", "warning"):
                reasons.append(f"{r.key}: {f.origin} guard {f.severity} {f.rule}")
        for flag in r.flags:
            reasons.append(f"{r.key}: {flag}")
    return reasons


def _problem_row(problem, result: KernelResult | None, outcome: ProblemOutcome | None,
                 baseline: Baseline | None, submitted: bool) -> ProblemRow:
    entry = baseline.find(problem) if baseline is not None else None
    common = dict(key=problem.key, level=problem.level, problem_id=problem.problem_id, name=problem.name,
                  submitted=submitted, kernel_key=f"{problem.key}_sample_{RANKED_SAMPLE}" if submitted else None,
                  baseline_ms=_r(entry.headline_ms) if entry is not None else None)
    if result is None:
        return ProblemRow(**common, verdict="missing" if not submitted else "not-evaluated", compiled=False,
                          correct=False, speedup=None, runtime_ms=None, ref_runtime_ms=None, error=None, flags=[],
                          guard=[], problem_changed=False)
    return ProblemRow(
        **common, verdict=result.verdict(), compiled=result.compiled, correct=result.correct,
        speedup=_r(outcome.speedup) if outcome is not None else None,
        runtime_ms=_r(result.runtime_ms), ref_runtime_ms=_r(result.ref_runtime_ms),
        error=result.error.one_line() if result.error else None,
        flags=list(result.flags),
        guard=[GuardRow(rule=f.rule, severity=f.severity, origin=f.origin, line=f.line, message=f.message)
               for f in result.guard_findings if f.severity in ("error", "warning")],
        problem_changed=bool(result.problem_hash and not problem.matches_hash(result.problem_hash)),
        speedup_ci95=([_r(outcome.interval.lo), _r(outcome.interval.hi)]  # type: ignore[list-item]
                      if outcome is not None and outcome.interval is not None else None),
        timing_flags=list(result.timing_flags), host_share=_r(result.host_share),
        own_kernel_share=_r(result.own_kernel_share),
    )


# ---------------------------------------------------------------- main entry
def check_bundle_set(identity: ProblemSetIdentity, bundle: ResultsBundle, problems: ProblemSet | None = None) -> None:
    """A bundle evaluated on another problem set (or another revision's problems) is refused, never mixed.

    Bundles from before sets had an identity record only a source label: one saying ``builtin`` is
    accepted on the built-in board only. Results are matched to problems by level and id, so with
    ``problems`` each result that names its problem must name the board's problem of that id.
    """
    what = f"results bundle {bundle_name(bundle.entry, bundle.gpu)}"
    try:
        if bundle.problem_set is not None:
            check_same_set(identity, bundle.problem_set, what)
        elif (bundle.problem_source == BUILTIN) != (identity.name == BUILTIN):
            raise ProblemSetMismatchError(
                f"{what} was evaluated on problem source {bundle.problem_source}, not {identity.label}")
        if problems is not None:
            names = {(p.level, p.problem_id): p.name for p in problems}
            other = sorted({f"level {r.level} problem {r.problem_id} is {r.problem_name} in the bundle but "
                            f"{names[(r.level, r.problem_id)]} here" for r in bundle.results
                            if (r.level, r.problem_id) in names and r.problem_name
                            and not r.problem_name.isdigit() and r.problem_name != names[(r.level, r.problem_id)]})
            if other:
                more = f" and {len(other) - 3} more" if len(other) > 3 else ""
                raise ProblemSetMismatchError(f"{what} holds results for other problems: {'; '.join(other[:3])}{more}")
    except ProblemSetMismatchError as e:
        raise AggregationError(f"{e}; evaluate the entry again on {identity.label}") from None


def check_baseline_set(identity: ProblemSetIdentity, baseline: Baseline, gpu: str) -> None:
    """A baseline file measured on another set would time problems by other problems' references."""
    try:
        if baseline.problem_set is not None:
            check_same_set(identity, baseline.problem_set, f"baseline for {gpu} ({baseline.path})")
        for level in sorted(baseline.levels):
            check_names(identity, baseline.refs(level), f"baseline for {gpu} ({baseline.path})")
    except ProblemSetMismatchError as e:
        raise AggregationError(f"{e}; measure a baseline on {identity.label}") from None


def aggregate(problems: ProblemSet, config: AggregateConfig = AggregateConfig(),
              progress: bool = False) -> AggregateResult:
    """Recompute every ``data/`` file from submissions, results bundles, baselines and exclusions.

    Every input is checked against the board's problem set before anything is written, so a bundle
    or baseline of another set is one error and ``data/`` stays as it was.
    """
    identity = identify(problems)
    subs = _load_submissions(Path(config.submissions_dir))
    bundles = _load_bundles(Path(config.evaluations_dir), subs)
    for b in bundles:
        check_bundle_set(identity, b, problems)
    baselines: dict[str, Baseline | None] = {}
    for gpu in sorted({b.gpu for b in bundles}):
        checked = _baseline_for(gpu, config, baselines)
        if checked is not None:
            check_baseline_set(identity, checked, gpu)
    exclusions = load_exclusions(config.exclusions_path)
    for ex in exclusions.exclusions:
        if ex.entry not in subs:
            log.warning("exclusion for %r matches no submission", ex.entry)
    out = Path(config.out_dir)
    result = AggregateResult()
    separate = {lv: problems.select(levels=[lv]) for lv in separate_board_levels(problems)}
    # The overall board: every level but the separate ones (on the official set, levels 1-3).
    board = ProblemSet([p for p in problems if p.level not in separate], source=problems.source)
    level_counts = board.count_by_level()

    entries_index: list[IndexEntry] = []
    per_problem: dict[tuple[int, int], dict[str, list[BestKernel]]] = {}
    files: dict[Path, BaseModel | dict[str, str]] = {}

    iterator: Iterable[ResultsBundle] = bundles
    if progress and bundles:
        from kernelbench.progress import progress_bar

        iterator = progress_bar(bundles, desc="aggregating", unit="entry")
    for bundle in iterator:
        sub = subs[bundle.entry]
        ranked = {(k.level, k.problem_id): src for k, src in sub.kernel_items(ranked_only=True)}
        results = [r for r in bundle.results
                   if r.sample_id == RANKED_SAMPLE and (r.level, r.problem_id) in ranked]
        full_baseline = _baseline_for(bundle.gpu, config, baselines)
        main_results = [r for r in results if r.level not in separate]
        baseline = _usable_baseline(full_baseline, main_results, board, bundle.entry, bundle.gpu)
        report = score_results(board, main_results, baseline, sample_policy="first")
        outcomes, _ = outcomes_from_results(board, main_results, baseline, sample_policy="first")
        by_key = {(o.level, o.problem_id): o for o in outcomes}
        res_by_key = {(r.level, r.problem_id): r for r in results}

        reasons: list[str] = []
        excluded = exclusions.reason_for(bundle.entry, bundle.gpu)
        if bundle.submission_sha256 != sub.sha256():
            reasons.append("results are for an earlier version of the submission; re-evaluate it")
        reasons += _finding_reasons(results)
        rows = [_problem_row(p, res_by_key.get((p.level, p.problem_id)), by_key.get((p.level, p.problem_id)),
                             baseline, (p.level, p.problem_id) in ranked) for p in board]
        curve = {"p": list(CURVE_P), "overall": fast_p_curve(outcomes, len(board))}
        for lv, n in sorted(level_counts.items()):
            curve[f"level{lv}"] = fast_p_curve([o for o in outcomes if o.level == lv], n)

        # A separate level (official level 4) is a board of its own: scored only for an entry with a kernel
        # there, against its own baseline check (no committed baseline has level 4: in-session reference).
        separate_scores: dict[str, ScoreData] = {}
        separate_basis: dict[str, str] = {}
        separate_score: dict[int, Score] = {}
        for lv, lv_problems in separate.items():
            if not any(level == lv for level, _ in ranked):
                continue
            lv_results = [r for r in results if r.level == lv]
            lv_baseline = _usable_baseline(full_baseline, lv_results, lv_problems, bundle.entry, bundle.gpu)
            lv_report = score_results(lv_problems, lv_results, lv_baseline, sample_policy="first")
            lv_outcomes, _ = outcomes_from_results(lv_problems, lv_results, lv_baseline, sample_policy="first")
            lv_by_key = {(o.level, o.problem_id): o for o in lv_outcomes}
            separate_score[lv] = lv_report.levels[lv]
            separate_scores[str(lv)] = score_data(lv_report.levels[lv])
            separate_basis[str(lv)] = _basis(lv_baseline, config)
            rows += [_problem_row(p, res_by_key.get((p.level, p.problem_id)), lv_by_key.get((p.level, p.problem_id)),
                                  lv_baseline, (p.level, p.problem_id) in ranked) for p in lv_problems]
            curve[f"level{lv}"] = fast_p_curve(lv_outcomes, len(lv_problems))

        changed = [r.key for r in rows if r.problem_changed]
        if changed:
            reasons.append(f"problem(s) changed since evaluation: {', '.join(changed)}")
        status: AuditStatus = "excluded" if excluded else ("flagged" if reasons else "clean")
        audit = Audit(status=status, reasons=([f"excluded: {excluded}"] if excluded else []) + reasons)

        speedup_basis = _basis(baseline, config)
        scores = Scores(overall=score_data(report.overall),
                        levels={str(lv): score_data(s) for lv, s in sorted(report.levels.items())},
                        separate=separate_scores)
        meta = _entry_meta(sub)
        results_file = f"results/{bundle.entry}{SEPARATOR}{bundle.gpu}.json"
        common = dict(**meta.model_dump(), entry=bundle.entry, gpu=bundle.gpu, audit=audit, scores=scores,
                      speedup_basis=speedup_basis, separate_speedup_basis=separate_basis,
                      evaluated_on=bundle.evaluated_on, runner=bundle.runner, n_kernels=len(ranked))
        files[out / results_file] = ResultsFile(**common, problems=rows, fast_p_curve=curve,
                                                problem_source=problems.source)
        entries_index.append(IndexEntry(**common, results_file=results_file,
                                        kernels_file=f"kernels/{bundle.entry}.json"))
        for row in rows:
            if row.correct:
                per_problem.setdefault((row.level, row.problem_id), {}).setdefault(bundle.gpu, []).append(BestKernel(
                    entry=bundle.entry, display_name=meta.display_name, status=status, speedup=row.speedup,
                    runtime_ms=row.runtime_ms, kernel_key=row.kernel_key, backend=meta.backend,
                ))
        result.rows.append(BoardRow(bundle.entry, bundle.gpu, meta.display_name, None, status,
                                    report.overall, speedup_basis))
        for lv, lv_score in separate_score.items():
            result.separate.setdefault(lv, []).append(BoardRow(
                bundle.entry, bundle.gpu, meta.display_name, None, status, lv_score, separate_basis[str(lv)]))

    entries_index = _rank(entries_index, result.rows)
    for lv, lv_rows in result.separate.items():
        _rank_rows(lv_rows, [e for e in entries_index if e.on_board(str(lv))], str(lv))
    evaluated = {b.entry for b in bundles}
    result.pending = sorted(e for e in subs if e not in evaluated)
    for entry in sorted(evaluated):
        files[out / "kernels" / f"{entry}.json"] = {
            str(k): src for k, src in subs[entry].kernel_items(ranked_only=True)}
    for p in problems:
        ranked_lists = {}
        for gpu, items in sorted(per_problem.get((p.level, p.problem_id), {}).items()):
            ranked_lists[gpu] = sorted(items, key=lambda it: (it.status == "excluded", -(it.speedup or 0.0), it.entry))
        files[out / "problems" / f"level{p.level}_{p.problem_id}.json"] = ProblemFile(
            level=p.level, problem_id=p.problem_id, name=p.name, key=p.key, hash=p.hash, code=p.code,
            best=ranked_lists)

    gpus = sorted({e.gpu for e in entries_index})
    counts = {g: sum(1 for e in entries_index if e.gpu == g) for g in gpus}
    dates = sorted(d for d in (b.evaluated_on for b in bundles) if d)
    files[out / "index.json"] = BoardIndex(
        problem_source=problems.source,
        # The board's set (name and revision); per-problem hashes are in problems/ and the bundles.
        problem_set=ProblemSetLabel(name=identity.name, revision=identity.revision),
        levels={str(lv): n for lv, n in sorted(level_counts.items())},
        separate_levels={str(lv): len(ps) for lv, ps in sorted(separate.items())},
        problems=[IndexProblem(key=p.key, level=p.level, problem_id=p.problem_id, name=p.name) for p in problems],
        fast_p_thresholds=list(FAST_P_THRESHOLDS),
        gpus=gpus,
        default_gpu=_default_gpu(counts),
        entries=entries_index,
        pending=[PendingEntry(entry=e, **_entry_meta(subs[e]).model_dump()) for e in result.pending],
        last_evaluated=dates[-1] if dates else None,
    )

    for path, data in sorted(files.items(), key=lambda kv: str(kv[0])):
        atomic_write_json(path, data.model_dump(mode="json") if isinstance(data, BaseModel) else data,
                          indent=1, sort_keys=True)
        result.written.append(path)
    written = set(files)
    for sub_dir in MANAGED_DIRS:
        d = out / sub_dir
        if d.is_dir():
            for f in sorted(d.glob("*.json")):
                if f not in written:
                    f.unlink()
                    result.removed.append(f)
    return result


def _entry_meta(sub: Submission) -> EntryMeta:
    m = sub.metadata
    backends = sorted({sub.backend_for(src) for _, src in sub.kernel_items(ranked_only=True)})
    return EntryMeta(
        display_name=m.display_name, organization=m.organization, notes=m.notes,
        model=m.model.model_dump(mode="json", exclude_none=True) if m.model else None,
        date=m.date.isoformat() if m.date else None, url=m.url,
        backend="+".join(backends) if backends else (m.backend or DEFAULT_BACKEND),
    )


def _default_gpu(counts: dict[str, int]) -> str | None:
    if not counts:
        return None
    if "H100" in counts:
        return "H100"  # the leaderboard's reference GPU (seed 004)
    return sorted(counts, key=lambda g: (-counts[g], g))[0]


def _rank_rows(rows: list[BoardRow], entries: list[IndexEntry], scope: str) -> None:
    """Set ``rows``' ranks on ``scope``'s board (:func:`rank_entries` per GPU) and put them in board order."""
    rank_of = {}
    for gpu in sorted({e.gpu for e in entries}):
        for e, rank in rank_entries([e for e in entries if e.gpu == gpu], scope):
            rank_of[(e.entry, e.gpu)] = rank
    for r in rows:
        r.rank = rank_of.get((r.entry, r.gpu))
    rows.sort(key=lambda r: (r.gpu, r.rank is None, r.rank or 0, r.entry))


def _rank(entries: list[IndexEntry], rows: list[BoardRow]) -> list[IndexEntry]:
    """The entries per GPU in board order (:func:`rank_entries`), each with its rank set; ``rows`` likewise."""
    ordered: list[IndexEntry] = []
    for gpu in sorted({e.gpu for e in entries}):
        for e, rank in rank_entries([e for e in entries if e.gpu == gpu]):
            e.rank = rank
            ordered.append(e)
    rank_of = {(e.entry, e.gpu): e.rank for e in ordered}
    for r in rows:
        r.rank = rank_of.get((r.entry, r.gpu))
    rows.sort(key=lambda r: (r.gpu, r.rank is None, r.rank or 0, r.entry))
    return ordered
