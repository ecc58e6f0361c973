"""Which problem set a run directory belongs to, found the way KernelBench's users work.

A run made by KernelBench's own scripts has no ``run.json``; its users run the analysis from a
checkout of KernelBench, whose ``KernelBench/`` folder sits in the working directory. Falling back to
the built-in suite there would score official kernels against other problems that happen to share
their ids, so when nothing tells, the caller is asked to name the set.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from kernelbench.errors import SourceError
from kernelbench.problems.identity import BUILTIN, KERNELBENCH, official_manifest, ref_of

if TYPE_CHECKING:
    from kernelbench.runs import RunInfo


@dataclass(frozen=True)
class SourceChoice:
    """A problem source (as ``load_problems`` takes it) and why it was chosen."""

    source: str
    path: str | None
    reason: str


def guess_from_names(names: Iterable[str]) -> str | None:
    """``builtin`` or ``kernelbench`` when every ``level<N>/<file>`` ref belongs to exactly one of them.

    Here rather than in :mod:`kernelbench.problems.identity`, which loads no problems: it needs the
    built-in suite's names, and the sources need the identity to check the official set.
    """
    refs = set(names)
    if not refs:
        return None
    from kernelbench.problems.sources import load_builtin

    builtin_refs = {ref_of(p) for p in load_builtin()}
    official_refs = set(official_manifest().hashes)
    in_builtin, in_official = refs <= builtin_refs, refs <= official_refs
    if in_builtin and not in_official:
        return BUILTIN
    if in_official and not in_builtin:
        return KERNELBENCH
    return None


def has_level_dirs(folder: Path) -> bool:
    return folder.is_dir() and any(c.is_dir() and c.name.startswith("level") for c in folder.iterdir())


def resolve_run_source(run_dir: Path, *, source: str | None, path: str | None, run_info: RunInfo,
                       cwd: Path, baseline_refs: Iterable[str] = ()) -> SourceChoice:
    """Pick the problem source for ``run_dir``: given > run.json > ./KernelBench/ > the baseline's names.

    Raises SourceError, naming every way to say it, when none of these tells.
    """
    if source:
        return SourceChoice(source, path, "given")
    if run_info.source:
        return SourceChoice(run_info.source, path or run_info.source_path, "recorded in run.json")
    checkout = cwd / "KernelBench"
    if has_level_dirs(checkout):
        return SourceChoice("directory", str(checkout), f"the KernelBench/ folder in {cwd}")
    guess = guess_from_names(baseline_refs)
    if guess == BUILTIN:
        return SourceChoice("builtin", None, "the baseline names only built-in problems")
    hint = ("pass --source builtin, --source directory --path <KernelBench checkout>/KernelBench or "
            "--source huggingface [--path <local dataset>] (dataset_src=... in the scripts)")
    if guess == KERNELBENCH:
        raise SourceError(
            f"run {run_dir} looks like a run on the official KernelBench problems (its baseline names them), "
            f"but they are not here: run from a KernelBench checkout, or {hint}")
    raise SourceError(
        f"cannot tell which problem set run {run_dir} belongs to (no run.json, no KernelBench/ folder in "
        f"{cwd}, no baseline naming its problems); {hint}")
