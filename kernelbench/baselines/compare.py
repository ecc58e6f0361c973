"""Comparing two baseline files, problem by problem: the one comparison, two readings of it.

Both readings pair the two files' problems by level and file name (never by id: sets share ids) through
:func:`pair_by_name`, and keep only problems with a positive, finite time on both sides.

* :func:`compare_baselines`: two independent runs of ours (run-to-run agreement). Files timed under
  different protocols are refused: their ratio would measure the protocol change.
* :func:`compare_with_published`: ours beside a file KernelBench published
  (``results/timing/H100_Modal/baseline_time_torch.json`` and one file per ``torch.compile``
  configuration). Before our baselines replace theirs in anyone's scores, a reader needs to know how far
  the two disagree and why: any problem whose code differs between the two (by KernelBench's hash, where
  both sides have one) is kept out of the statistics, and each problem carries the evidence that can
  explain a disagreement (see :data:`CUES`). Nothing here decides a cause; the cues only say what is known.
  The ratio is ours / theirs: our headline (the median) over theirs (their mean; their files have no
  median); the mean ratio is kept beside it, so the choice of statistic can be told apart from a real
  difference.
"""

from __future__ import annotations

import math
import re
import statistics
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from kernelbench.baselines.format import Baseline, BaselineEntry, file_order, ref_order
from kernelbench.errors import BaselineError
from kernelbench.hardware import gpu_family
from kernelbench.problems.identity import BUILTIN, KERNELBENCH, official_manifest, problem_ref
from kernelbench.problems.resolve import guess_from_names


# ---------------------------------------------------------------------------------------------- pairing
@dataclass(frozen=True)
class Paired:
    """One problem named in both files."""

    level: int
    filename: str
    first: BaselineEntry
    second: BaselineEntry

    @property
    def ref(self) -> str:
        return problem_ref(self.level, self.filename)

    @property
    def comparable(self) -> bool:
        """A positive, finite headline time on both sides (a ratio means something)."""
        x, y = self.first.headline_ms, self.second.headline_ms
        return x > 0 and y > 0 and math.isfinite(x) and math.isfinite(y)


def pair_by_name(first: Baseline, second: Baseline) -> tuple[list[Paired], list[str], list[str]]:
    """(problems in both, refs only in ``first``, refs only in ``second``), each by level and problem id."""
    paired, only_first, only_second = [], [], []
    for level in sorted(set(first.levels) | set(second.levels)):
        a, b = first.levels.get(level, {}), second.levels.get(level, {})
        for name in sorted(set(a) | set(b), key=file_order):
            if name in a and name in b:
                paired.append(Paired(level, name, a[name], b[name]))
            else:
                (only_first if name in a else only_second).append(problem_ref(level, name))
    return paired, only_first, only_second


# ---------------------------------------------------------------------------------------------- run to run
@dataclass(frozen=True)
class ProblemRatio:
    level: int
    filename: str
    first_ms: float
    second_ms: float

    @property
    def ratio(self) -> float:
        """second / first."""
        return self.second_ms / self.first_ms

    @property
    def spread(self) -> float:
        """max / min of the two: 1.0 is perfect agreement, whichever run was faster."""
        return max(self.ratio, 1.0 / self.ratio)


@dataclass(frozen=True)
class BaselineAgreement:
    """How far two independent measurements of the same problems agree."""

    ratios: tuple[ProblemRatio, ...]
    only_in_one: tuple[str, ...] = ()

    @property
    def n(self) -> int:
        return len(self.ratios)

    @property
    def median_ratio(self) -> float | None:
        return statistics.median(r.ratio for r in self.ratios) if self.ratios else None

    @property
    def median_spread(self) -> float | None:
        return statistics.median(r.spread for r in self.ratios) if self.ratios else None

    @property
    def worst(self) -> ProblemRatio | None:
        return max(self.ratios, key=lambda r: r.spread) if self.ratios else None

    def within(self, limit: float) -> int:
        """Problems whose two runs differ by at most a factor of ``limit`` (1.02: within 2%)."""
        return sum(r.spread <= limit for r in self.ratios)

    def by_level(self) -> dict[int, BaselineAgreement]:
        """The same comparison, one per level (problems named in one file only stay with their level)."""
        out: dict[int, BaselineAgreement] = {}
        for level in sorted({r.level for r in self.ratios} | {int(x.split("/", 1)[0][5:]) for x in self.only_in_one}):
            out[level] = BaselineAgreement(tuple(r for r in self.ratios if r.level == level),
                                           tuple(x for x in self.only_in_one if x.startswith(f"level{level}/")))
        return out

    def to_dict(self) -> dict[str, Any]:
        worst = self.worst
        return {"n": self.n, "median_ratio": self.median_ratio, "median_spread": self.median_spread,
                "worst": None if worst is None else {"level": worst.level, "problem": worst.filename,
                                                     "first_ms": worst.first_ms, "second_ms": worst.second_ms,
                                                     "ratio": worst.ratio, "spread": worst.spread},
                "only_in_one": list(self.only_in_one)}


def compare_baselines(first: Baseline, second: Baseline) -> BaselineAgreement:
    """Per-problem ratios of the headline times of two baselines (same mode), matched by level and file.

    Two files timed under different protocols are refused: their ratio would measure the protocol change,
    not how well two runs agree."""
    pa, pb = (b.environment.timing_protocol if b.environment else None for b in (first, second))
    if pa and pb and pa != pb:
        raise BaselineError(f"the two baselines were timed with different protocols ({pa!r} and {pb!r}); "
                            "measure both again to compare them")
    paired, only_first, only_second = pair_by_name(first, second)
    ratios = [ProblemRatio(p.level, p.filename, p.first.headline_ms, p.second.headline_ms)
              for p in paired if p.comparable]
    only = [*only_first, *only_second, *(p.ref for p in paired if not p.comparable)]
    return BaselineAgreement(tuple(ratios), tuple(sorted(only, key=ref_order)))


# ---------------------------------------------------------------------------------------------- published
#: What each cue means; a cue is evidence about one problem, attached only when the evidence was given.
CUES = {
    "changed": "the problem's code differs between the two files' problem sets (hashes differ): "
               "a different program was timed",
    "cudnn-conv": "runs a cuDNN convolution: PyTorch's default lets cuDNN round fp32 to TF32 (KernelBench's "
                  "timing), our baselines run IEEE fp32 (TF32 off)",
    "below-ieee-bound": "their time is below this GPU's speed-of-light bound for IEEE fp32 (datasheet FP32 "
                        "rate and bandwidth): it cannot have been computed in IEEE fp32",
    "host-bound": "the host needs most of the GPU time to launch the forward (host share >= 0.8 in the "
                  "given sweep): the time follows the CPU",
    "run-to-run": "our two runs differ by more than 5% on it",
    "their-noise": "their trials vary: std over mean above 5%",
    "our-skew": "our mean is over 2% above our median: a mean-based figure would differ from ours",
}
HOST_BOUND_SHARE = 0.8
RUN_TO_RUN_LIMIT = 1.05
THEIR_NOISE_CV = 0.05
OUR_SKEW = 1.02
_CONV = re.compile(r"\bConv(?:Transpose)?[123]d\b|\bconv(?:_transpose)?[123]d\s*\(")


def uses_cudnn_conv(code: str) -> bool:
    """The code builds or calls a 1/2/3-D (transposed) convolution, which PyTorch hands to cuDNN on a GPU."""
    return bool(_CONV.search(code))


@dataclass(frozen=True)
class PublishedRatio:
    """One problem in both files."""

    level: int
    filename: str
    ours_ms: float
    theirs_ms: float
    ours_mean_ms: float | None = None
    theirs_std_ms: float | None = None
    theirs_min_ms: float | None = None
    #: KernelBench's hash of the problem's code on each side, where known.
    ours_hash: str | None = None
    theirs_hash: str | None = None
    cues: tuple[str, ...] = ()

    @property
    def ref(self) -> str:
        return problem_ref(self.level, self.filename)

    @property
    def ratio(self) -> float:
        """Ours over theirs: above 1, our baseline is slower."""
        return self.ours_ms / self.theirs_ms

    @property
    def mean_ratio(self) -> float | None:
        """Our mean over their mean: the same statistic on both sides."""
        return None if self.ours_mean_ms is None else self.ours_mean_ms / self.theirs_ms

    @property
    def min_ratio(self) -> float | None:
        """Our median over their fastest trial: near 1 where their mean was pulled up by slow trials."""
        return None if not self.theirs_min_ms else self.ours_ms / self.theirs_min_ms

    @property
    def spread(self) -> float:
        """How far apart, whichever side is faster (1.0: the same)."""
        return max(self.ratio, 1.0 / self.ratio)

    @property
    def changed(self) -> bool:
        return bool(self.ours_hash and self.theirs_hash and self.ours_hash != self.theirs_hash)

    @property
    def their_cv(self) -> float | None:
        return None if self.theirs_std_ms is None else self.theirs_std_ms / self.theirs_ms

    def to_dict(self) -> dict[str, Any]:
        """Ratios and our times; their raw times stay in their file (only their spread, as a fraction)."""
        return {"level": self.level, "problem": self.filename, "ratio": self.ratio, "mean_ratio": self.mean_ratio,
                "min_ratio": self.min_ratio,
                "ours_median_ms": self.ours_ms, "ours_mean_ms": self.ours_mean_ms, "their_cv": self.their_cv,
                "changed": self.changed, "cues": list(self.cues)}


def _percentile(sorted_values: Sequence[float], q: float) -> float:
    """Linear interpolation between closest ranks (numpy's default), on already sorted values."""
    pos = (len(sorted_values) - 1) * q
    lo = math.floor(pos)
    hi = min(lo + 1, len(sorted_values) - 1)
    return sorted_values[lo] + (sorted_values[hi] - sorted_values[lo]) * (pos - lo)


@dataclass(frozen=True)
class RatioSummary:
    """Where a group of ratios sits (median, geometric mean) and how widely they spread."""

    n: int
    median: float
    geomean: float
    p10: float
    p25: float
    p75: float
    p90: float
    min: float
    max: float
    #: Ratios within [1/1.1, 1.1], and beyond a factor of 2 either way.
    within_10pct: int
    ours_over_2x: int
    ours_under_half: int

    @classmethod
    def of(cls, ratios: Iterable[float]) -> RatioSummary | None:
        values = sorted(ratios)
        if not values:
            return None
        return cls(n=len(values), median=statistics.median(values),
                   geomean=math.exp(statistics.fmean(math.log(v) for v in values)),
                   p10=_percentile(values, 0.10), p25=_percentile(values, 0.25), p75=_percentile(values, 0.75),
                   p90=_percentile(values, 0.90), min=values[0], max=values[-1],
                   within_10pct=sum(1 / 1.1 <= v <= 1.1 for v in values),
                   ours_over_2x=sum(v > 2 for v in values), ours_under_half=sum(v < 0.5 for v in values))

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


@dataclass(frozen=True)
class PublishedComparison:
    """Every problem of both files, paired by name; ``ratios`` holds the ones that are the same problem."""

    ratios: tuple[PublishedRatio, ...]
    #: Paired by name, but their code differs: shown, never counted in a summary.
    changed: tuple[PublishedRatio, ...] = ()
    only_ours: tuple[str, ...] = ()
    only_theirs: tuple[str, ...] = ()
    ours_gpu: str | None = None
    theirs_gpu: str | None = None
    #: Whether both sides had hashes for the paired problems (else "the same problem" rests on names).
    hashes_checked: bool = False
    notes: tuple[str, ...] = field(default_factory=tuple)

    def levels(self) -> dict[int, RatioSummary]:
        out: dict[int, RatioSummary] = {}
        for level in sorted({r.level for r in self.ratios}):
            summary = RatioSummary.of(r.ratio for r in self.ratios if r.level == level)
            if summary is not None:
                out[level] = summary
        return out

    @property
    def overall(self) -> RatioSummary | None:
        return RatioSummary.of(r.ratio for r in self.ratios)

    def largest(self, k: int = 10, include_changed: bool = True) -> list[PublishedRatio]:
        """The ``k`` problems the two files disagree on most (by factor, either way)."""
        pool = [*self.ratios, *(self.changed if include_changed else ())]
        return sorted(pool, key=lambda r: (-r.spread, ref_order(r.ref)))[:k]

    def cue_counts(self) -> dict[str, dict[str, Any]]:
        """Per cue: how many compared problems carry it and the median ratio with and without it."""
        out: dict[str, dict[str, Any]] = {}
        for cue in CUES:
            if cue == "changed":
                continue
            having = [r.ratio for r in self.ratios if cue in r.cues]
            rest = [r.ratio for r in self.ratios if cue not in r.cues]
            if having:
                out[cue] = {"n": len(having), "median_ratio": statistics.median(having),
                            "median_ratio_without": statistics.median(rest) if rest else None}
        return out

    def to_dict(self, top: int = 10) -> dict[str, Any]:
        overall = self.overall
        return {"ours_gpu": self.ours_gpu, "theirs_gpu": self.theirs_gpu, "hashes_checked": self.hashes_checked,
                "ratio": "ours (median) / theirs (mean)", "n": len(self.ratios),
                "overall": overall.to_dict() if overall else None,
                "levels": {str(lv): s.to_dict() for lv, s in self.levels().items()},
                "cues": {cue: {"meaning": CUES[cue], **stats} for cue, stats in self.cue_counts().items()},
                "largest": [r.to_dict() for r in self.largest(top)],
                "changed": [r.to_dict() for r in self.changed], "only_ours": list(self.only_ours),
                "only_theirs": list(self.only_theirs), "notes": list(self.notes),
                "problems": [r.to_dict() for r in self.ratios]}


@dataclass(frozen=True)
class Evidence:
    """What is known about each problem beyond the two files, keyed by ``level<N>/<file>``."""

    #: The problem's code (our side's), for the cues read from it.
    code: Mapping[str, str] = field(default_factory=dict)
    #: Our second, independent run of the same mode.
    repeat: Baseline | None = None
    #: Host share per problem from an evaluation sweep (``KernelResult.host_share``).
    host_shares: Mapping[str, float] = field(default_factory=dict)
    #: Roofline lower bound per problem for IEEE fp32 on the GPU of the files, at datasheet rates
    #: (``kernelbench.roofline``): no fp32 program that computes in IEEE fp32 runs faster.
    ieee_bound_ms: Mapping[str, float] = field(default_factory=dict)


def _set_refs(name: str) -> set[str] | None:
    """Every problem name of a named set (all levels), or None for a set that has no fixed list."""
    if name == KERNELBENCH:
        return set(official_manifest().hashes)
    if name == BUILTIN:
        from kernelbench.problems.sources import load_builtin

        return {problem_ref(p.level, p.filename) for p in load_builtin()}
    return None


def _first(items: Sequence[str], shown: int = 5) -> str:
    more = f" and {len(items) - shown} more" if len(items) > shown else ""
    return ", ".join(items[:shown]) + more


def _cues(ref: str, ratio: PublishedRatio, evidence: Evidence) -> tuple[str, ...]:
    cues = []
    if ratio.changed:
        cues.append("changed")
    code = evidence.code.get(ref)
    if code is not None and uses_cudnn_conv(code):
        cues.append("cudnn-conv")
    bound = evidence.ieee_bound_ms.get(ref)
    if bound is not None and ratio.theirs_ms < bound:
        cues.append("below-ieee-bound")
    share = evidence.host_shares.get(ref)
    if share is not None and share >= HOST_BOUND_SHARE:
        cues.append("host-bound")
    if evidence.repeat is not None:
        level, name = ref.split("/", 1)
        again = evidence.repeat.levels.get(int(level[5:]), {}).get(name)
        if again is not None and again.headline_ms > 0:
            r = again.headline_ms / ratio.ours_ms
            if max(r, 1 / r) > RUN_TO_RUN_LIMIT:
                cues.append("run-to-run")
    cv = ratio.their_cv
    if cv is not None and cv > THEIR_NOISE_CV:
        cues.append("their-noise")
    if ratio.ours_mean_ms is not None and ratio.ours_mean_ms / ratio.ours_ms > OUR_SKEW:
        cues.append("our-skew")
    return tuple(cues)


def _check_comparable(ours: Baseline, theirs: Baseline, allow_other_gpu: bool) -> None:
    """Refuse two GPU types, two problem sets, a file naming problems outside its set, nothing in common."""
    fa, fb = gpu_family(ours.gpu_name), gpu_family(theirs.gpu_name)
    if fa and fb and fa != fb and not allow_other_gpu:
        raise BaselineError(f"the two baselines are for different GPUs ({fa} and {fb}); a ratio would compare "
                            "the GPUs, not the measurements")
    ours_refs, theirs_refs = set(ours.refs()), set(theirs.refs())
    # A file that records no set (KernelBench's never do) is known by its problem names, where they are
    # all of one set.
    ours_name = ours.problem_set.name if ours.problem_set else guess_from_names(ours_refs)
    theirs_name = theirs.problem_set.name if theirs.problem_set else guess_from_names(theirs_refs)
    if ours_name and theirs_name and ours_name != theirs_name:
        raise BaselineError(f"the two baselines were made on different problem sets ({ours_name} and "
                            f"{theirs_name}); problems that share a name there are not the same problem")
    named = ours_name or theirs_name
    allowed = _set_refs(named) if named else None
    if allowed is not None:
        for side, refs in (("ours", ours_refs), ("theirs", theirs_refs)):
            foreign = sorted(refs - allowed, key=ref_order)
            if foreign:
                raise BaselineError(f"baseline {side} names problems that are not in problem set {named}: "
                                    f"{_first(foreign)}; it was made on another problem set")
    if not ours_refs & theirs_refs:
        raise BaselineError(f"the two baselines have no problem in common ({len(ours_refs)} and {len(theirs_refs)} "
                            "problems, matched by level and file name)")


def compare_with_published(ours: Baseline, theirs: Baseline, *, their_hashes: Mapping[str, str] | None = None,
                           evidence: Evidence | None = None, allow_other_gpu: bool = False) -> PublishedComparison:
    """Pair ``ours`` and ``theirs`` by level and file name and compute ours / theirs for each problem.

    ``their_hashes`` (``level<N>/<file>`` -> KernelBench hash) says which code their times are of, when
    their file does not record it (KernelBench's files do not): pass the hashes of the problem set at the
    revision their file was made from. Refused with a one-line :class:`BaselineError`: files of two GPU
    types (unless ``allow_other_gpu``), files that record different problem sets, a file naming problems
    that are not in the other's set, and two files with no problem in common.
    """
    evidence = evidence or Evidence()
    _check_comparable(ours, theirs, allow_other_gpu)
    paired, only_ours, only_theirs = pair_by_name(ours, theirs)
    ours_hashes = dict(ours.problem_set.hashes) if ours.problem_set else {}
    theirs_hashes = (dict(their_hashes) if their_hashes is not None
                     else dict(theirs.problem_set.hashes) if theirs.problem_set else {})
    same: list[PublishedRatio] = []
    changed: list[PublishedRatio] = []
    notes: list[str] = []
    for p in paired:
        if not p.comparable:
            notes.append(f"{p.ref}: no positive time on both sides ({p.first.headline_ms} and "
                         f"{p.second.headline_ms} ms); left out")
            continue
        r = PublishedRatio(p.level, p.filename, p.first.headline_ms, p.second.headline_ms,
                           ours_mean_ms=p.first.mean, theirs_std_ms=p.second.std, theirs_min_ms=p.second.min,
                           ours_hash=ours_hashes.get(p.ref), theirs_hash=theirs_hashes.get(p.ref))
        r = replace(r, cues=_cues(p.ref, r, evidence))
        (changed if r.changed else same).append(r)
    hashed = all(ours_hashes.get(p.ref) and theirs_hashes.get(p.ref) for p in paired)
    return PublishedComparison(
        ratios=tuple(same), changed=tuple(changed), only_ours=tuple(only_ours), only_theirs=tuple(only_theirs),
        ours_gpu=ours.gpu_name, theirs_gpu=theirs.gpu_name, hashes_checked=hashed, notes=tuple(notes))


def host_shares_from_rows(rows: Iterable[Mapping[str, Any]]) -> dict[str, float]:
    """``level<N>/<name>.py`` -> host share, from ``scripts/bench_evaluator.py`` result rows.

    A problem timed more than once (``--repeat``) gets the median of its shares.
    """
    shares: dict[str, list[float]] = {}
    for row in rows:
        share = row.get("host_share")
        if share is None or row.get("level") is None or not row.get("name"):
            continue
        shares.setdefault(problem_ref(int(row["level"]), f"{row['name']}.py"), []).append(float(share))
    return {ref: statistics.median(v) for ref, v in shares.items()}
