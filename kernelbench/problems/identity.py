"""Problem-set identity: which named, pinned set of problems an artefact belongs to.

Scores are only comparable between results, baselines and leaderboard entries made on the same
problems. Ids alone do not say that (built-in ``4_Matmul_transposed_A`` and official
``4_Matrix_vector_multiplication_`` share id 4), so every artefact records the set's name, its
revision and each problem's hash, and every consumer compares them before mixing anything.

The per-problem hash is ``Problem.hash``: KernelBench's own (``kernelbench.dataset.get_code_hash``
upstream; MD5 of the code with triple-quoted strings, ``#`` comments and all whitespace removed), of
the code less a ``CPU_SIZE`` declaration, which official problems never have. Using the same formula
means a hash we record can be checked against one KernelBench computes, and vice versa.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import Annotated, Any

from pydantic import PlainSerializer, PlainValidator

from kernelbench.errors import KernelBenchError
from kernelbench.problems.model import Problem, ProblemSet
from kernelbench.problems.model import kernelbench_code_hash as kernelbench_code_hash  # re-exported

BUILTIN = "builtin"
KERNELBENCH = "kernelbench"
CUSTOM = "custom"
#: Commit of github.com/ScalingIntelligence/KernelBench whose ``KernelBench/`` folder the official
#: manifest was computed from. The Hugging Face dataset is checked against the same hashes.
KERNELBENCH_REVISION = "423217d9fda91e0c2d67e4a43bf62f96f6d104f1"
MANIFEST_RESOURCE = "kernelbench_manifest.json"
#: How many mismatches an error names before it says "and N more".
SHOWN = 5

class ProblemSetMismatchError(KernelBenchError):
    """Two artefacts come from different problem sets (or different revisions of one)."""


def problem_ref(level: int, filename: str) -> str:
    """``level1/19_ReLU.py``: the name a problem has in every set's own layout."""
    return f"level{level}/{filename}"


def ref_of(problem: Problem) -> str:
    return problem_ref(problem.level, problem.filename)


@dataclass(frozen=True)
class ProblemSetIdentity:
    """Name, revision and per-problem hashes of the problems an artefact was made from."""

    name: str
    revision: str
    #: ``level1/1_Name.py`` -> KernelBench hash of that problem's code.
    hashes: Mapping[str, str] = field(default_factory=dict)

    @property
    def label(self) -> str:
        return f"{self.name}@{self.revision}"

    def to_dict(self) -> dict:
        return {"name": self.name, "revision": self.revision, "hashes": dict(sorted(self.hashes.items()))}

    @classmethod
    def from_dict(cls, data: Mapping, where: str = "problem_set") -> ProblemSetIdentity:
        try:
            name, revision = str(data["name"]), str(data["revision"])
            hashes = {str(k): str(v) for k, v in dict(data.get("hashes") or {}).items()}
        except (KeyError, TypeError, ValueError) as e:
            raise ProblemSetMismatchError(f"{where}: malformed problem_set block ({e})") from None
        return cls(name, revision, hashes)

    def restricted(self, levels: Iterable[int]) -> ProblemSetIdentity:
        """The same identity, holding only the problems of ``levels``."""
        prefixes = tuple(f"level{lv}/" for lv in levels)
        return ProblemSetIdentity(self.name, self.revision,
                                  {k: v for k, v in self.hashes.items() if k.startswith(prefixes)})


def _recorded_identity(value: Any) -> ProblemSetIdentity:
    if isinstance(value, ProblemSetIdentity):
        return value
    if not isinstance(value, Mapping):
        raise ValueError(f"expected an object with name, revision and hashes, got {type(value).__name__}")
    try:
        return ProblemSetIdentity.from_dict(value, where="problem_set")
    except ProblemSetMismatchError as e:
        raise ValueError(str(e).removeprefix("problem_set: ")) from None


#: A pydantic field holding a set's identity, read from and written as ``to_dict()``'s JSON object
#: (run.json, results bundles).
RecordedProblemSet = Annotated[ProblemSetIdentity, PlainValidator(_recorded_identity),
                               PlainSerializer(lambda identity: identity.to_dict())]


#: Names another manifest file (same format) to pin another revision of the official set; the tests
#: use it to stand a small set written for them in for the official one.
MANIFEST_ENV = "KERNELBENCH_MANIFEST"


def official_manifest() -> ProblemSetIdentity:
    """The pinned official set, shipped as names and hashes only (no problem code)."""
    return _load_manifest(os.environ.get(MANIFEST_ENV) or None)


@lru_cache(maxsize=4)
def _load_manifest(path: str | None) -> ProblemSetIdentity:
    if path is None:
        text = (resources.files("kernelbench") / "data" / MANIFEST_RESOURCE).read_text(encoding="utf-8")
        where = MANIFEST_RESOURCE
    else:
        try:
            text = Path(path).read_text(encoding="utf-8")
        except OSError as e:
            raise ProblemSetMismatchError(f"{MANIFEST_ENV}={path}: cannot read the manifest ({e})") from None
        where = path
    try:
        data = json.loads(text)
    except json.JSONDecodeError as e:
        raise ProblemSetMismatchError(f"{where}: manifest is not valid JSON ({e})") from None
    return ProblemSetIdentity.from_dict(data, where=where)


def write_manifest(identity: ProblemSetIdentity, path: str | Path) -> None:
    """Save a set's names and hashes in the manifest format (how the shipped one was made)."""
    Path(path).write_text(json.dumps(identity.to_dict(), indent=1) + "\n", encoding="utf-8")


def builtin_revision() -> str:
    from kernelbench import __version__

    return __version__


def _hashes(problems: Iterable[Problem]) -> dict[str, str]:
    return {ref_of(p): p.hash for p in problems}


def identify(problems: ProblemSet, official: ProblemSetIdentity | None = None) -> ProblemSetIdentity:
    """Name the set ``problems`` come from.

    The built-in suite is ``builtin`` at the package version. Problems whose names are all in the
    official manifest are ``kernelbench`` at its revision, but only when every hash matches too: a
    checkout that differs is a different set, and saying so here is what stops it being scored as
    the official one. Anything else is ``custom``, named by where it came from.
    """
    hashes = _hashes(problems)
    if problems.source == BUILTIN:
        return ProblemSetIdentity(BUILTIN, builtin_revision(), hashes)
    official = official if official is not None else official_manifest()
    if hashes and all(ref in official.hashes for ref in hashes):
        differ = [ref for ref, h in hashes.items() if official.hashes[ref] != h]
        if not differ:
            return ProblemSetIdentity(official.name, official.revision, hashes)
        raise ProblemSetMismatchError(
            f"{problems.source} names the official problems but does not hash the same as "
            f"{official.label}: {_first(differ)}; use a checkout of KernelBench at {official.revision[:12]} "
            f"or the dataset at the pinned revision"
        )
    return ProblemSetIdentity(CUSTOM, problems.source or "unknown", hashes)


def _first(items: list[str]) -> str:
    more = f" and {len(items) - SHOWN} more" if len(items) > SHOWN else ""
    return ", ".join(items[:SHOWN]) + more


def check_same_set(expected: ProblemSetIdentity, recorded: ProblemSetIdentity, what: str) -> None:
    """Raise unless ``recorded`` (what an artefact says it was made from) matches ``expected``.

    Only the problems both name are compared by hash, so a baseline of the full set serves a run of
    one level; a different set name or a hash that differs is a mismatch.
    """
    if recorded.name != expected.name:
        raise ProblemSetMismatchError(
            f"{what} was made from problem set {recorded.label}, not {expected.label}; "
            f"scores from different problem sets cannot be mixed"
        )
    differ = [ref for ref, h in expected.hashes.items() if ref in recorded.hashes and recorded.hashes[ref] != h]
    if differ:
        raise ProblemSetMismatchError(
            f"{what} ({recorded.label}) holds other versions of {_first(differ)} than {expected.label}"
        )


def check_names(expected: ProblemSetIdentity, names: Iterable[str], what: str) -> None:
    """Raise if ``names`` (``level1/x.py`` refs an artefact uses) include problems ``expected`` lacks."""
    foreign = sorted({n for n in names if n not in expected.hashes})
    if foreign:
        raise ProblemSetMismatchError(
            f"{what} names problems that are not in {expected.label}: {_first(foreign)}; "
            f"it belongs to another problem set"
        )


def set_of_problem(problem: Problem, official: ProblemSetIdentity | None = None) -> tuple[str, str]:
    """(name, revision) of the set one problem belongs to, for artefacts written a problem at a time."""
    if problem.source == BUILTIN:
        return BUILTIN, builtin_revision()
    official = official if official is not None else official_manifest()
    if official.hashes.get(ref_of(problem)) == problem.hash:
        return official.name, official.revision
    return CUSTOM, problem.source or "unknown"
