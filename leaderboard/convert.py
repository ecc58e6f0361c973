"""Submission JSON <-> KernelBench run directories (one run directory per level).

Contributors usually produce kernels as run directories (``generate`` writes them) and submit a
JSON file; maintainers turn the JSON back into run directories to evaluate it with the same tools.
The run directory layout and file names are KernelBench's, through ``kernelbench.runs``.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from kernelbench.errors import KernelBenchError, RunDirectoryError
from kernelbench.io_utils import atomic_write_json, atomic_write_text, file_lock
from kernelbench.problems.model import ProblemSet
from kernelbench.runs import RunDirectory, RunInfo
from leaderboard.errors import SubmissionError
from leaderboard.schema import RANKED_SAMPLE, KernelKey, Metadata, Submission, parse_submission

log = logging.getLogger(__name__)


@dataclass
class LevelRun:
    """What writing one level's kernels did to its run directory."""

    level: int
    path: Path
    written: list[KernelKey] = field(default_factory=list)
    unchanged: list[KernelKey] = field(default_factory=list)
    #: Kernel files in the directory that the submission does not contain (left alone).
    stale: list[Path] = field(default_factory=list)

    @property
    def n_kernels(self) -> int:
        return len(self.written) + len(self.unchanged)


def level_run_name(name: str, level: int) -> str:
    """``<name>_level<L>``, the naming the KernelBench leaderboard's scripts use."""
    return f"{name}_level{level}"


def submission_to_runs(
    submission: Submission,
    runs_dir: str | Path,
    name: str,
    ranked_only: bool = False,
    run_info: RunInfo | None = None,
) -> list[LevelRun]:
    """Write each kernel to ``<runs_dir>/<name>_level<L>/level_<L>_problem_<P>_sample_<S>_kernel.py``.

    A kernel file whose content is already identical is not rewritten, so its existing result
    stays valid for a resumed evaluation; a changed one loses its old result before it is rewritten.
    """
    by_level: dict[int, list[tuple[KernelKey, str]]] = {}
    for key, source in submission.kernel_items(ranked_only=ranked_only):
        by_level.setdefault(key.level, []).append((key, source))
    out: list[LevelRun] = []
    for level in sorted(by_level):
        path = Path(runs_dir) / level_run_name(name, level)
        rd = RunDirectory(path, level=level)
        lr = LevelRun(level=level, path=path)
        wanted = set()
        for key, source in by_level[level]:
            wanted.add((key.problem_id, key.sample_id))
            kp = rd.kernel_path(level, key.problem_id, key.sample_id)
            if kp.exists() and kp.read_text(encoding="utf-8") == source:
                lr.unchanged.append(key)
                continue
            forget_results(rd, [(key.problem_id, key.sample_id)])  # before the write: a kill leaves no stale pair
            rd.write_kernel(level, key.problem_id, key.sample_id, source)
            lr.written.append(key)
        lr.stale = [k.path for k in rd.kernels() if (k.problem_id, k.sample_id) not in wanted]
        if lr.stale:
            log.warning("%s holds %d kernel file(s) that are not in the submission", path, len(lr.stale))
        info = {"level": level, "submission": name, "display_name": submission.metadata.display_name}
        info.update(run_info.recorded() if run_info is not None else {})
        rd.write_info(**info)
        out.append(lr)
    return out


def forget_results(rd: RunDirectory, pairs: Sequence[tuple[int, int]]) -> None:
    """Drop results of (problem, sample) pairs whose kernel changed, so a resume cannot reuse them."""
    if not pairs or not rd.results_path.exists():
        return
    drop: dict[str, set[int]] = {}
    for pid, sid in pairs:
        drop.setdefault(str(pid), set()).add(sid)
    with file_lock(rd.path / ".lock"):
        raw = json.loads(rd.results_path.read_text(encoding="utf-8"))
        changed = False
        for pid, sids in drop.items():
            entries = raw.get(pid)
            if not isinstance(entries, list):
                continue
            kept = [e for e in entries if not (isinstance(e, dict) and e.get("sample_id", 0) in sids)]
            if len(kept) != len(entries):
                changed = True
                if kept:
                    raw[pid] = kept
                else:
                    del raw[pid]
        if changed:
            atomic_write_json(rd.results_path, raw)


def runs_to_submission(
    level_runs: dict[int, str | Path],
    metadata: Metadata,
    all_samples: bool = False,
) -> Submission:
    """Bundle run directories (one per level) into a submission; sample 0 only unless ``all_samples``."""
    kernels: dict[str, str] = {}
    for level, run_path in sorted(level_runs.items()):
        path = Path(run_path)
        if not path.is_dir():
            raise RunDirectoryError(f"run directory {path} (level {level}) does not exist")
        rd = RunDirectory(path, level=level)
        files = rd.kernels()
        if not files:
            raise RunDirectoryError(f"run directory {path} has no level_{level}_problem_*_sample_*_kernel.py files")
        for kf in files:
            if kf.level != level:
                raise RunDirectoryError(f"{kf.path} is a level {kf.level} kernel in the level {level} run {path}")
            if not all_samples and kf.sample_id != RANKED_SAMPLE:
                continue
            key = str(KernelKey(kf.level, kf.problem_id, kf.sample_id))
            try:
                kernels[key] = kf.read()
            except UnicodeDecodeError:
                raise RunDirectoryError(f"{kf.path} is not UTF-8 text") from None
    if not kernels:
        raise SubmissionError("the runs hold no sample-0 kernels to submit")
    return parse_submission({"metadata": metadata.model_dump(mode="json", exclude_none=True),
                             "kernels": kernels}, "combined submission")


_SOLUTION_RE = re.compile(r"^(\d+)_(.+)\.py$")
_LEVEL_DIR_RE = re.compile(r"^level(\d+)$")


def solutions_to_submission(root: str | Path, metadata: Metadata, problems: ProblemSet | None = None) -> Submission:
    """Bundle a folder laid out like a problem set (``level<L>/<id>_<Name>.py``) into a submission.

    This is how the worked solutions become a leaderboard entry. With ``problems``, each file's name
    must match the problem with that id, so a solution cannot silently land on the wrong problem.
    """
    root = Path(root)
    if not root.is_dir():
        raise SubmissionError(f"solutions folder {root} does not exist")
    kernels: dict[str, str] = {}
    for level_dir in sorted(root.iterdir()):
        m = _LEVEL_DIR_RE.match(level_dir.name)
        if not m or not level_dir.is_dir():
            continue
        level = int(m.group(1))
        for f in sorted(level_dir.glob("*.py")):
            fm = _SOLUTION_RE.match(f.name)
            if not fm:
                continue
            pid = int(fm.group(1))
            if problems is not None:
                try:
                    problem = problems.get(level, pid)
                except KernelBenchError as e:
                    raise SubmissionError(f"{f}: {e}") from None
                if problem.name != f.stem:
                    raise SubmissionError(f"{f} is named after {f.stem!r} but level {level} problem {pid} is "
                                          f"{problem.name!r} in {problems.source}")
            kernels[str(KernelKey(level, pid, RANKED_SAMPLE))] = f.read_text(encoding="utf-8")
    if not kernels:
        raise SubmissionError(f"{root} has no level<L>/<id>_<Name>.py files")
    return parse_submission({"metadata": metadata.model_dump(mode="json", exclude_none=True),
                             "kernels": kernels}, str(root))


def write_submission(submission: Submission, path: str | Path) -> Path:
    """Write the canonical JSON form atomically (a crash never leaves half a submission)."""
    path = Path(path)
    atomic_write_text(path, submission.to_json())
    return path
