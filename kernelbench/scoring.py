"""The one scoring module: fast_p, geometric-mean speedups, pass@k, per level and overall.

Used by ``kernelbench analyze``, the leaderboard and CI alike, so a number means the same
thing everywhere. Conventions (docs/leaderboard.md says how they differ from KernelBench's):

* The denominator is the full problem set of a level; a missing result counts as incorrect.
* Results are matched to problems and baselines by key (level, problem id), never by position.
* ``fast_p`` counts problems that are correct *and* strictly faster than ``p``; ``fast_0`` is the
  correctness rate (a correct kernel whose timing was not measured still counts there).
* The geometric mean over correct problems uses only correct problems with a measured speedup;
  the full-deck geometric mean counts every other problem as 1.0 (the user keeps PyTorch).
* Multi-level totals pool problems, which weights each level by its problem count.
* Beside fast_p (KernelBench's, unchanged), ``fast_p_significant`` counts a problem only when the lower
  end of its speedup's 95% interval exceeds ``p``: a kernel is not counted faster by noise. The geometric
  mean over correct problems carries a 95% interval too (``kernelbench.speedup``).
* Infrastructure failures (ours, never verdicts) are left out, as if the problem had no result yet, and
  counted apart (``n_infrastructure``).
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Literal

from kernelbench.baselines.format import Baseline
from kernelbench.errors import BaselineError
from kernelbench.hardware import canonical_gpu
from kernelbench.problems.model import ProblemSet
from kernelbench.results import KernelResult
from kernelbench.speedup import SpeedupInterval, geomean_interval

FAST_P_THRESHOLDS: tuple[float, ...] = (0.0, 0.5, 0.8, 1.0, 1.5, 2.0)
PASS_AT_K: tuple[int, ...] = (1, 5, 10)
SamplePolicy = Literal["first", "best"]


@dataclass(frozen=True)
class ProblemOutcome:
    """One problem's scored sample: the facts scoring needs and nothing else."""

    level: int
    problem_id: int
    compiled: bool
    correct: bool
    speedup: float | None = None
    sol_fraction: float | None = None
    #: The speedup's 95% interval (None when the result has none: older results, CPU timings).
    interval: SpeedupInterval | None = None

    @property
    def key(self) -> str:
        return f"level_{self.level}_problem_{self.problem_id}"


@dataclass(frozen=True)
class SampleCounts:
    """Samples per problem and how many were correct, for pass@k."""

    level: int
    problem_id: int
    n: int
    correct: int


@dataclass(frozen=True)
class Score:
    scope: str
    n_problems: int
    n_attempted: int
    n_compiled: int
    n_correct: int
    fast_p: dict[float, float]
    geomean_speedup: float | None
    fulldeck_geomean: float
    pass_at_k: dict[int, float] = field(default_factory=dict)
    mean_sol_fraction: float | None = None
    #: fast_p counting only problems whose speedup interval's lower end exceeds p (fast_0: correctness);
    #: empty when no timed result has an interval (results written before intervals existed).
    fast_p_significant: dict[float, float] = field(default_factory=dict)
    #: 95% interval of ``geomean_speedup``; None unless every speedup in it has an interval.
    geomean_ci95: tuple[float, float] | None = None
    #: Results that stand for our own failures: left out of every figure above, evaluated again on resume.
    n_infrastructure: int = 0

    @property
    def compile_rate(self) -> float:
        return self.n_compiled / self.n_problems if self.n_problems else 0.0

    @property
    def correctness_rate(self) -> float:
        return self.n_correct / self.n_problems if self.n_problems else 0.0

    def to_dict(self) -> dict:
        d = asdict(self)
        d["fast_p"] = {_p_label(p): v for p, v in self.fast_p.items()}
        d["fast_p_significant"] = {_p_label(p): v for p, v in self.fast_p_significant.items()}
        d["geomean_ci95"] = list(self.geomean_ci95) if self.geomean_ci95 is not None else None
        d["pass_at_k"] = {f"pass@{k}": v for k, v in self.pass_at_k.items()}
        d["compile_rate"] = self.compile_rate
        d["correctness_rate"] = self.correctness_rate
        return d


@dataclass(frozen=True)
class ScoreReport:
    levels: dict[int, Score]
    overall: Score

    def to_dict(self) -> dict:
        return {"levels": {str(k): v.to_dict() for k, v in sorted(self.levels.items())},
                "overall": self.overall.to_dict()}


def _p_label(p: float) -> str:
    return f"fast_{p:g}"


# ---------------------------------------------------------------- primitive metrics
def fast_p(outcomes: Iterable[ProblemOutcome], n_problems: int, p: float) -> float:
    if n_problems <= 0:
        return 0.0
    if p == 0:
        hits = sum(1 for o in outcomes if o.correct)
    else:
        hits = sum(1 for o in outcomes if o.correct and o.speedup is not None and o.speedup > p)
    return hits / n_problems


def fast_p_significant(outcomes: Iterable[ProblemOutcome], n_problems: int, p: float) -> float:
    """Like :func:`fast_p`, but a problem counts only when its speedup interval lies wholly above ``p``.

    A speedup without an interval never counts for p > 0: it cannot show that it is not noise.
    """
    if n_problems <= 0:
        return 0.0
    if p == 0:
        return fast_p(outcomes, n_problems, 0.0)
    hits = sum(1 for o in outcomes if o.correct and o.interval is not None and o.interval.significantly_faster(p))
    return hits / n_problems


def geometric_mean(values: Sequence[float]) -> float | None:
    vals = [v for v in values if v is not None]
    if not vals:
        return None
    if any(v <= 0 or not math.isfinite(v) for v in vals):
        raise ValueError("geometric mean needs positive, finite values")
    return math.exp(sum(math.log(v) for v in vals) / len(vals))


def pass_at_k(n: int, c: int, k: int) -> float:
    """Unbiased estimator 1 - C(n-c, k) / C(n, k) (Chen et al., 2021), computed stably."""
    if k <= 0 or n <= 0:
        raise ValueError("pass@k needs n > 0 and k > 0")
    if k > n:
        raise ValueError(f"pass@{k} needs at least {k} samples, got {n}")
    if not 0 <= c <= n:
        raise ValueError("correct count must be between 0 and n")
    if n - c < k:
        return 1.0
    prod = 1.0
    for i in range(n - c + 1, n + 1):
        prod *= 1.0 - k / i
    return 1.0 - prod


# ---------------------------------------------------------------- from results
def protocol_mismatch(results: Iterable[KernelResult], baseline: Baseline) -> str | None:
    """The timing protocol of the first timed result that differs from the baseline's, or None.

    Times taken under two protocol versions are not comparable (kb-timing-2 changed what fp32 means
    for convolutions, for one); a caller either refuses (``check_same_gpu``) or scores against the
    reference timed in the same session instead (the leaderboard, for an entry evaluated long ago).
    """
    base_protocol = baseline.environment.timing_protocol if baseline.environment else None
    if base_protocol is None:
        return None
    for r in results:
        if r.runtime is None or r.environment is None:
            continue
        protocol = r.environment.timing_protocol
        if protocol is not None and protocol != base_protocol:
            return protocol
    return None


def precision_mismatch(results: Iterable[KernelResult], baseline: Baseline) -> str | None:
    """The precision of the first timed result that differs from the baseline's, or None.

    An fp16 candidate against an fp32 reference time would count the halved bytes as the kernel's merit.
    """
    base_precision = baseline.environment.precision if baseline.environment else None
    if base_precision is None:
        return None
    for r in results:
        if r.runtime is not None and r.precision != base_precision:
            return r.precision
    return None


def timing_mismatch(results: Iterable[KernelResult], baseline: Baseline) -> tuple[str, str] | None:
    """Why these results' times and the baseline's are not comparable, and what would make them so.

    The timing protocol is checked first, then the precision; None when neither differs.
    """
    results = list(results)
    env = baseline.environment
    where = baseline.path or ""
    protocol = protocol_mismatch(results, baseline)
    if protocol is not None:
        return (f"results were timed with protocol {protocol!r} but the baseline {where} with "
                f"{env.timing_protocol!r}", "measure a baseline with this version")
    precision = precision_mismatch(results, baseline)
    if precision is not None:
        return (f"results were timed in {precision} but the baseline {where} holds {env.precision} times",
                f"measure one with `kernelbench baselines --precision {precision}`")
    return None


def check_same_gpu(results: Iterable[KernelResult], baseline: Baseline, force: bool = False) -> None:
    """Refuse to compare timings with a baseline from another GPU type, timing-protocol version or precision."""
    if force:
        return
    results = list(results)
    base_gpu = canonical_gpu(baseline.gpu_name)
    for r in results:
        if r.runtime is None or r.environment is None:
            continue
        gpu = canonical_gpu(r.environment.gpu_name)
        if base_gpu is not None and gpu is not None and gpu != base_gpu:
            raise BaselineError(
                f"results were measured on {gpu} but the baseline {baseline.path or ''} is for {base_gpu}; "
                f"use the baseline for {gpu} or pass --force to compare anyway"
            )
    mismatch = timing_mismatch(results, baseline)
    if mismatch is not None:
        what, remedy = mismatch
        raise BaselineError(f"{what}; {remedy} or pass --force to compare anyway")


def _choose(samples: list[KernelResult], policy: SamplePolicy, speed: dict[int, float | None]) -> KernelResult:
    if policy == "first":
        return min(samples, key=lambda r: r.sample_id)
    correct = [r for r in samples if r.correct]
    if not correct:
        return min(samples, key=lambda r: r.sample_id)
    return max(correct, key=lambda r: (speed.get(id(r)) or 0.0, -r.sample_id))


def outcomes_from_results(
    problems: ProblemSet,
    results: Iterable[KernelResult],
    baseline: Baseline | None = None,
    sample_policy: SamplePolicy = "first",
    missing_baseline: Literal["error", "untimed"] = "error",
) -> tuple[list[ProblemOutcome], list[SampleCounts]]:
    """Match results to problems by key and compute each problem's speedup.

    With a baseline the speedup is baseline time over the candidate's median; without one it is
    the in-session speedup (reference timed interleaved with the candidate). A baseline lacking a
    problem of the set is an error that names the problem, or with ``missing_baseline="untimed"``
    that problem has no speedup: a correct kernel still counts as correct but never as faster, and
    the problem stays in the denominator, so an incomplete baseline can never raise a score.
    """
    by_problem: dict[tuple[int, int], list[KernelResult]] = {}
    known = {(p.level, p.problem_id) for p in problems}
    for r in results:
        if (r.level, r.problem_id) in known and not r.infrastructure_failure:
            by_problem.setdefault((r.level, r.problem_id), []).append(r)

    baseline_ms: dict[tuple[int, int], float] = {}
    if baseline is not None:
        missing = [p for p in problems if baseline.find(p) is None]
        if missing and missing_baseline == "error":
            names = ", ".join(f"level {p.level} problem {p.problem_id} ({p.filename})" for p in missing[:5])
            more = f" and {len(missing) - 5} more" if len(missing) > 5 else ""
            raise BaselineError(f"baseline {baseline.path or ''} has no time for {names}{more}")
        for p in problems:
            entry = baseline.find(p)
            if entry is not None:
                baseline_ms[(p.level, p.problem_id)] = entry.headline_ms

    outcomes, counts = [], []
    for p in problems:
        key = (p.level, p.problem_id)
        samples = by_problem.get(key, [])
        counted = samples if sample_policy != "first" else [r for r in samples if r.sample_id == 0]
        if not counted:
            # "first" is sample 0, as in KernelBench: without it the problem has no kernel, even if
            # another sample of it was evaluated (pass@k below still sees every sample).
            if samples:
                counts.append(SampleCounts(p.level, p.problem_id, len(samples), sum(1 for r in samples if r.correct)))
            continue
        speed: dict[int, float | None] = {}
        for r in samples:
            if not r.correct:
                speed[id(r)] = None
            elif baseline is not None:
                speed[id(r)] = (baseline_ms[key] / r.runtime_ms) if r.runtime_ms and key in baseline_ms else None
            else:
                speed[id(r)] = r.speedup
        chosen = _choose(counted, sample_policy, speed)
        sol = chosen.roofline.fraction_of_sol if (chosen.roofline and chosen.correct) else None
        outcomes.append(ProblemOutcome(p.level, p.problem_id, chosen.compiled, chosen.correct,
                                       speed[id(chosen)], sol, _interval_for(chosen, speed[id(chosen)])))
        counts.append(SampleCounts(p.level, p.problem_id, len(samples), sum(1 for r in samples if r.correct)))
    return outcomes, counts


def _interval_for(result: KernelResult, speedup: float | None) -> SpeedupInterval | None:
    """The result's interval, moved onto ``speedup`` when that is against a baseline.

    Against a baseline the speedup is baseline time over the candidate's median; the interval keeps the
    relative width measured in session (the candidate's share of the noise; the baseline's own is not
    included).
    """
    iv = result.speedup_ci95 if result.correct else None
    if iv is None or speedup is None or iv.speedup <= 0:
        return None
    if speedup == iv.speedup:
        return iv
    k = speedup / iv.speedup
    return iv.model_copy(update={"speedup": speedup, "lo": iv.lo * k, "hi": iv.hi * k, "paired": iv.paired * k})


#: How far a baseline time may sit from the reference timed beside the candidates before it is reported.
DRIFT_TOLERANCE = 0.10


@dataclass(frozen=True)
class BaselineDrift:
    """A problem whose baseline time and the reference timed in the run's own sessions disagree.

    Both time the same eager reference under the same protocol, so a large gap means the baseline was
    taken while the machine ran at another speed (host-bound references follow the CPU's clock), and a
    speedup against it is only as good as that gap.
    """

    level: int
    problem_id: int
    filename: str
    baseline_ms: float
    in_session_ms: float

    @property
    def ratio(self) -> float:
        """baseline / in-session: above 1 the baseline is slower and flatters the candidate."""
        return self.baseline_ms / self.in_session_ms

    def to_dict(self) -> dict:
        return {**asdict(self), "ratio": self.ratio}


def baseline_drift(problems: ProblemSet, results: Iterable[KernelResult], baseline: Baseline,
                   tolerance: float = DRIFT_TOLERANCE) -> list[BaselineDrift]:
    """Problems whose eager baseline and in-session reference medians differ by more than ``tolerance``.

    Only an eager baseline is comparable: the evaluator times the reference as written. The in-session
    time is the median over the problem's samples, each of which timed the reference afresh.
    """
    if tolerance < 0:
        raise ValueError("drift tolerance must not be negative")
    if baseline.mode != "eager":
        return []
    refs: dict[tuple[int, int], list[float]] = {}
    for r in results:
        if r.ref_runtime_ms is not None and r.ref_runtime_ms > 0:
            refs.setdefault((r.level, r.problem_id), []).append(r.ref_runtime_ms)
    out = []
    for p in problems:
        entry = baseline.find(p)
        times = refs.get((p.level, p.problem_id))
        if entry is None or not times or not entry.headline_ms > 0:
            continue
        drift = BaselineDrift(p.level, p.problem_id, p.filename, entry.headline_ms, statistics.median(times))
        if max(drift.ratio, 1 / drift.ratio) > 1 + tolerance:
            out.append(drift)
    return out


# ---------------------------------------------------------------- aggregate
def score_outcomes(
    scope: str,
    n_problems: int,
    outcomes: Sequence[ProblemOutcome],
    counts: Sequence[SampleCounts] = (),
    ks: Sequence[int] = PASS_AT_K,
    n_infrastructure: int = 0,
) -> Score:
    if len({o.key for o in outcomes}) != len(outcomes):
        raise ValueError("more than one outcome for a problem; pick one sample per problem first")
    if len(outcomes) > n_problems:
        raise ValueError(f"{len(outcomes)} outcomes for a set of {n_problems} problems")
    speedups = [o.speedup for o in outcomes if o.correct and o.speedup is not None]
    full_deck = speedups + [1.0] * (n_problems - len(speedups))
    pk: dict[int, float] = {}
    attempted = [c for c in counts if c.n > 0]
    if attempted:
        min_n = min(c.n for c in attempted)
        for k in ks:
            if k <= min_n:
                pk[k] = sum(pass_at_k(c.n, c.correct, k) for c in attempted) / n_problems
    sols = [o.sol_fraction for o in outcomes if o.sol_fraction is not None]
    timed = [o for o in outcomes if o.correct and o.speedup is not None]
    gm = geomean_interval([o.interval for o in timed]) if timed and all(o.interval for o in timed) else None
    # Results from before speedups had intervals: not measured (empty), rather than a misleading 0.
    unmeasured = bool(timed) and not any(o.interval for o in timed)
    return Score(
        scope=scope,
        n_problems=n_problems,
        n_attempted=len(outcomes),
        n_compiled=sum(1 for o in outcomes if o.compiled),
        n_correct=sum(1 for o in outcomes if o.correct),
        fast_p={p: fast_p(outcomes, n_problems, p) for p in FAST_P_THRESHOLDS},
        geomean_speedup=geometric_mean(speedups),
        fulldeck_geomean=geometric_mean(full_deck) if n_problems else 1.0,
        pass_at_k=pk,
        mean_sol_fraction=(sum(sols) / len(sols)) if sols else None,
        fast_p_significant={} if unmeasured else {p: fast_p_significant(outcomes, n_problems, p)
                                                   for p in FAST_P_THRESHOLDS},
        geomean_ci95=(gm[1], gm[2]) if gm is not None else None,
        n_infrastructure=n_infrastructure,
    )


def score_results(
    problems: ProblemSet,
    results: Iterable[KernelResult],
    baseline: Baseline | None = None,
    sample_policy: SamplePolicy = "first",
    ks: Sequence[int] = PASS_AT_K,
    missing_baseline: Literal["error", "untimed"] = "error",
) -> ScoreReport:
    """Per-level scores over the full problem set and the pooled overall score."""
    results = list(results)
    outcomes, counts = outcomes_from_results(problems, results, baseline, sample_policy, missing_baseline)
    known = {(p.level, p.problem_id) for p in problems}
    infra = [r for r in results if r.infrastructure_failure and (r.level, r.problem_id) in known]
    per_level: dict[int, Score] = {}
    for level, n in sorted(problems.count_by_level().items()):
        per_level[level] = score_outcomes(
            f"level {level}", n, [o for o in outcomes if o.level == level],
            [c for c in counts if c.level == level], ks, sum(1 for r in infra if r.level == level),
        )
    overall = score_outcomes("overall", len(problems), outcomes, counts, ks, len(infra))
    return ScoreReport(levels=per_level, overall=overall)


@dataclass(frozen=True)
class KernelBenchFigures:
    """fast_p and geometric mean exactly as KernelBench's ``benchmark_eval_analysis.py`` computes them.

    Kept beside our own score so that a user comparing with a paper or with KernelBench's script
    sees the same numbers: sample 0 only, a missing kernel is incorrect, the baseline's *mean* over
    the candidate's recorded runtime, and the denominator is the problems that have a baseline time
    (KernelBench skips the others; our score counts them, and either refuses a baseline that lacks them or,
    in ``kernelbench analyze``, scores them as untimed).
    """

    n_aligned: int
    n_correct: int
    fast_p: dict[float, float]
    geomean_speedup_correct: float

    def to_dict(self) -> dict:
        return {"n_aligned": self.n_aligned, "n_correct": self.n_correct,
                "fast_p": {_p_label(p): v for p, v in self.fast_p.items()},
                "geomean_speedup_correct": self.geomean_speedup_correct}


def kernelbench_figures(problems: ProblemSet, results: Iterable[KernelResult], baseline: Baseline) -> KernelBenchFigures:
    """KernelBench's own formulas over sample 0 of each problem (see :class:`KernelBenchFigures`)."""
    first = {(r.level, r.problem_id): r for r in results if r.sample_id == 0}
    correct_ratios: list[float] = []
    n = 0
    for p in problems:
        entry = baseline.find(p)
        if entry is None:
            continue
        n += 1
        r = first.get((p.level, p.problem_id))
        if r is not None and r.correct:
            # KernelBench divides by the recorded runtime, -1.0 when it was not measured.
            runtime = r.runtime_ms if r.runtime_ms is not None else -1.0
            correct_ratios.append(entry.mean / runtime)
    fast = {p: (sum(1 for s in correct_ratios if s > p) / n if n else 0.0) for p in FAST_P_THRESHOLDS}
    prod = math.prod(correct_ratios)
    if not correct_ratios:
        geo = 0.0
    elif prod < 0:  # an untimed correct kernel (-1.0): numpy's power gives NaN there, and so do we
        geo = math.nan
    else:
        geo = prod ** (1 / len(correct_ratios))
    return KernelBenchFigures(n, len(correct_ratios), fast, float(geo))
