"""Score freshly evaluated entries exactly as the published board would, before anything is merged.

The base branch's submissions and results bundles are copied to a scratch folder, the pull
request's submissions and new bundles laid over them, and ``leaderboard.aggregate`` run on the
lot. The comment then quotes the same numbers and rank the site will show after the merge.
"""

from __future__ import annotations

import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from ci_github import CIError


@dataclass
class EntryScore:
    entry: str
    gpu: str
    display_name: str
    rank: int | None
    #: Ranked (not excluded) entries on this GPU, this one included.
    n_ranked: int
    status: str
    reasons: list[str]
    speedup_basis: str
    n_kernels: int
    overall: dict
    levels: dict[str, dict]
    #: Per-problem rows of the problems this entry has a kernel for.
    problems: list[dict] = field(default_factory=list)
    bundle_file: str = ""
    #: A separate level's board (official level 4: its own ranking, not in the overall), when the entry is on it:
    #: level -> {"score": ScoreData as a dict, "rank", "n_ranked", "speedup_basis"}.
    separate: dict[str, dict] = field(default_factory=dict)


def _copy_json(src: Path, dest: Path) -> None:
    dest.mkdir(parents=True, exist_ok=True)
    if src.is_dir():
        for f in sorted(src.glob("*.json")):
            shutil.copy2(f, dest / f.name)


def score_new_bundles(problems, base_root: str | Path, new_submissions: str | Path, new_bundles: str | Path,
                      deleted_entries: list[str] | None = None, baseline_mode: str = "eager") -> list[EntryScore]:
    """Aggregate base + pull request in a scratch folder; one EntryScore per new bundle."""
    from kernelbench.baselines import baselines_dir_for
    from kernelbench.problems.identity import identify
    from leaderboard.aggregate import AggregateConfig, aggregate
    from leaderboard.bundle import read_bundle
    from leaderboard.data_model import BoardIndex, ResultsFile, rank_entries, read_data_file

    base = Path(base_root)
    bundles = sorted(Path(new_bundles).glob("*.json")) if Path(new_bundles).is_dir() else []
    if not bundles:
        raise CIError(f"no results bundle in {new_bundles}: the evaluation did not finish")
    wanted = [(b.entry, b.gpu, p.name) for p, b in ((p, read_bundle(p)) for p in bundles)]
    with tempfile.TemporaryDirectory(prefix="kb-score-") as tmp:
        scratch = Path(tmp)
        _copy_json(base / "submissions", scratch / "submissions")
        _copy_json(Path(new_submissions), scratch / "submissions")
        _copy_json(base / "data" / "evaluations", scratch / "evaluations")
        for p in bundles:
            shutil.copy2(p, scratch / "evaluations" / p.name)
        gone = set(deleted_entries or [])
        present = {p.stem for p in (scratch / "submissions").glob("*.json")} - gone
        for p in list((scratch / "submissions").glob("*.json")):
            if p.stem in gone:
                p.unlink()
        for p in list((scratch / "evaluations").glob("*.json")):
            if p.name.split("__", 1)[0] not in present:
                p.unlink()  # a bundle whose submission the pull request removes
        exclusions = base / "leaderboard" / "exclusions.json"
        config = AggregateConfig(submissions_dir=scratch / "submissions", evaluations_dir=scratch / "evaluations",
                                 baselines_dir=base / baselines_dir_for(identify(problems).name),
                                 exclusions_path=exclusions if exclusions.exists() else None,
                                 out_dir=scratch / "data", baseline_mode=baseline_mode)
        aggregate(problems, config)
        index = read_data_file(scratch / "data" / "index.json", BoardIndex)
        out = []
        for entry, gpu, bundle_file in wanted:
            rec = next((e for e in index.entries if e.entry == entry and e.gpu == gpu), None)
            if rec is None:
                raise CIError(f"aggregation produced no row for {entry} on {gpu}")
            results = read_data_file(scratch / "data" / rec.results_file, ResultsFile)
            n_ranked = sum(1 for e in index.entries if e.gpu == gpu and e.rank is not None)
            separate = {}
            for lv in index.separate_levels:
                if rec.on_board(lv):
                    ranked = rank_entries([e for e in index.entries if e.gpu == gpu], lv)
                    separate[lv] = {"score": rec.score(lv).model_dump(mode="json"),
                                    "rank": next(r for e, r in ranked if e.entry == entry),
                                    "n_ranked": sum(1 for _, r in ranked if r is not None),
                                    "speedup_basis": rec.speedup_basis_for(lv)}
            # The comment's renderer (ci_comments) imports only the standard library: it gets plain dicts.
            out.append(EntryScore(
                entry=entry, gpu=gpu, display_name=rec.display_name, rank=rec.rank, n_ranked=n_ranked,
                status=rec.audit.status, reasons=list(rec.audit.reasons),
                speedup_basis=rec.speedup_basis, n_kernels=rec.n_kernels,
                overall=rec.scores.overall.model_dump(mode="json"),
                levels={lv: s.model_dump(mode="json") for lv, s in rec.scores.levels.items()},
                problems=[r.model_dump(mode="json") for r in results.problems if r.submitted], bundle_file=bundle_file,
                separate=separate,
            ))
        return out
