"""The submission format (seed 004's JSON) as pydantic models, plus kernel-key parsing.

A submission is ``{"metadata": {...}, "kernels": {"level_<L>_problem_<P>_sample_<S>": "<source>"}}``.
The models are the contract shared by validation, conversion to run directories, evaluation and
aggregation, so a field means the same thing in each of them.
"""

from __future__ import annotations

import ast
import hashlib
import re
from dataclasses import dataclass
from datetime import date as Date
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from kernelbench.backends import DEFAULT_BACKEND, detect_backend, submission_backends
from leaderboard.errors import SubmissionError

#: A kernel larger than this is not a hand- or model-written kernel any more (embedded binaries...).
MAX_KERNEL_BYTES = 256 * 1024
#: A whole submission file; checked with stat() before reading, so a huge file costs nothing.
MAX_FILE_BYTES = 50 * 1024 * 1024
#: The sample the leaderboard evaluates and ranks (KernelBench's greedy sample).
RANKED_SAMPLE = 0
#: What ``metadata.backend`` accepts: the backends whose spec allows submissions (kernelbench.backends).
SubmissionBackend = Literal[submission_backends()]

KEY_RE = re.compile(r"^level_([1-9]\d*)_problem_([1-9]\d*)_sample_(0|[1-9]\d*)$")
_LOOSE_KEY_RE = re.compile(r"^level_(\d+)_problem_(\d+)_sample_(\d+)$")
#: Entry ids are file stems used in URLs and file names; ``__`` separates entry and GPU in data/.
ENTRY_RE = re.compile(r"^[A-Za-z0-9](?:[A-Za-z0-9._-]*[A-Za-z0-9])?$")


@dataclass(frozen=True, order=True)
class KernelKey:
    level: int
    problem_id: int
    sample_id: int

    def __str__(self) -> str:
        return f"level_{self.level}_problem_{self.problem_id}_sample_{self.sample_id}"

    @property
    def problem_key(self) -> str:
        return f"level_{self.level}_problem_{self.problem_id}"


def parse_kernel_key(key: str) -> KernelKey:
    """Parse ``level_<L>_problem_<P>_sample_<S>``; the ValueError says what a good key looks like."""
    m = KEY_RE.match(key)
    if m:
        return KernelKey(int(m.group(1)), int(m.group(2)), int(m.group(3)))
    loose = _LOOSE_KEY_RE.match(key)
    if loose:
        fixed = f"level_{int(loose.group(1))}_problem_{int(loose.group(2))}_sample_{int(loose.group(3))}"
        if fixed != key:
            raise ValueError(f"kernel key {key!r} has leading zeros or a zero level/problem; write {fixed!r}")
        raise ValueError(f"kernel key {key!r}: levels and problem ids start at 1")
    raise ValueError(f"kernel key {key!r} is not of the form level_<L>_problem_<P>_sample_<S> "
                     f"(e.g. level_1_problem_3_sample_0)")


def check_entry_id(entry: str) -> str:
    if not ENTRY_RE.match(entry) or "__" in entry or len(entry) > 80:
        raise ValueError(
            f"entry name {entry!r} (the submission's file name) must be letters, digits, '.', '_' or '-', "
            f"at most 80 characters, without '__'"
        )
    return entry


def entry_id_for(path: str | Path) -> str:
    """The entry id is the submission's file stem: ``submissions/my_model.json`` -> ``my_model``."""
    return Path(path).stem


class ModelDetails(BaseModel):
    """What produced the kernels, so readers can compare like with like (seed 002's reporting list)."""

    model_config = ConfigDict(extra="forbid", str_strip_whitespace=True)

    name: str = Field(min_length=1, max_length=120)
    provider: str | None = Field(default=None, max_length=120)
    version: str | None = Field(default=None, max_length=120)
    temperature: float | None = Field(default=None, ge=0, le=10)
    samples_per_problem: int | None = Field(default=None, ge=1, le=100000)
    agentic: bool | None = None
    url: str | None = Field(default=None, max_length=500)

    @field_validator("url")
    @classmethod
    def _https(cls, v: str | None) -> str | None:
        if v is not None and not re.match(r"^https?://\S+$", v):
            raise ValueError("must be an http(s) URL")
        return v


class Metadata(BaseModel):
    """Who submitted what. Unknown fields are kept (and reported as warnings by validation)."""

    model_config = ConfigDict(extra="allow", str_strip_whitespace=True)

    display_name: str = Field(min_length=1, max_length=80, description="Name shown on the leaderboard.")
    organization: str | None = Field(default=None, max_length=80)
    notes: str | None = Field(default=None, max_length=2000)
    #: cuda or triton; when absent each kernel's backend is detected from its source (default cuda).
    backend: SubmissionBackend | None = None
    model: ModelDetails | None = None
    #: When the kernels were produced (ISO date); shown on the board, never taken from the clock.
    date: Date | None = None
    url: str | None = Field(default=None, max_length=500)

    @field_validator("model", mode="before")
    @classmethod
    def _model_from_string(cls, v):
        return {"name": v} if isinstance(v, str) else v

    @field_validator("display_name")
    @classmethod
    def _printable(cls, v: str) -> str:
        if any(ord(c) < 32 for c in v):
            raise ValueError("must not contain control characters or newlines")
        return v

    @field_validator("url")
    @classmethod
    def _http(cls, v: str | None) -> str | None:
        if v is not None and not re.match(r"^https?://\S+$", v):
            raise ValueError("must be an http(s) URL")
        return v


class Submission(BaseModel):
    model_config = ConfigDict(extra="forbid")

    metadata: Metadata
    kernels: dict[str, str]

    def kernel_items(self, ranked_only: bool = False) -> list[tuple[KernelKey, str]]:
        """Kernels in (level, problem, sample) order; keys that do not parse are skipped."""
        out = []
        for key, source in self.kernels.items():
            try:
                k = parse_kernel_key(key)
            except ValueError:
                continue
            if ranked_only and k.sample_id != RANKED_SAMPLE:
                continue
            out.append((k, source))
        return sorted(out, key=lambda kv: kv[0])

    def backend_for(self, source: str) -> str:
        """The metadata's backend, else what the source itself uses (:func:`kernelbench.backends.detect_backend`),
        else the default (cuda)."""
        if self.metadata.backend:
            return self.metadata.backend
        return detect_backend(source) or DEFAULT_BACKEND

    def sha256(self) -> str:
        """Identity of the content (not the formatting), to tell whether results are stale."""
        return content_sha256(self)

    def to_json(self) -> str:
        """Canonical form: metadata first, kernels in level/problem/sample order."""
        import json

        meta = self.metadata.model_dump(mode="json", exclude_none=True)
        ordered = dict(sorted(self.kernels.items(), key=lambda kv: _sort_key(kv[0])))
        return json.dumps({"metadata": meta, "kernels": ordered}, indent=2, ensure_ascii=False) + "\n"


def _sort_key(key: str) -> tuple:
    try:
        k = parse_kernel_key(key)
        return (0, k.level, k.problem_id, k.sample_id, key)
    except ValueError:
        return (1, 0, 0, 0, key)


def content_sha256(sub: Submission) -> str:
    import json

    canonical = json.dumps({"metadata": sub.metadata.model_dump(mode="json"), "kernels": sub.kernels},
                           sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()


def defines_model_new(tree: ast.Module) -> bool:
    """True if the module binds ``ModelNew`` at top level (class, assignment or import alias)."""
    for node in tree.body:
        if isinstance(node, ast.ClassDef) and node.name == "ModelNew":
            return True
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "ModelNew"
                                                for t in node.targets):
            return True
        if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.target.id == "ModelNew":
            return True
    return False


def is_submission_file(path: str | Path | None) -> bool:
    """Whether ``path`` is an existing JSON object with ``kernels``: a submission, never where a report may go.

    ``--json PATH`` takes the next word as its path; a command that also takes submission files checks
    this first, so that ``--json a.json b.json`` cannot overwrite the submission ``a.json``.
    """
    import json

    if path is None or str(path) == "-" or not Path(path).is_file() or Path(path).stat().st_size > MAX_FILE_BYTES:
        return False
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    return isinstance(data, dict) and "kernels" in data


def load_submission(path: str | Path) -> Submission:
    """Read a submission for conversion or evaluation; the first problem becomes a SubmissionError.

    ``validate`` gives the full report; this is the gate for commands that need a usable file.
    """
    from leaderboard.jsonio import read_json_document

    doc = read_json_document(path, MAX_FILE_BYTES)
    if doc.errors:
        raise SubmissionError(doc.errors[0])
    if doc.duplicate_keys:
        raise SubmissionError(f"{path}: duplicate key {doc.duplicate_keys[0]!r} (each key may appear once)")
    return parse_submission(doc.value, str(path))


def parse_submission(value, where: str) -> Submission:
    if not isinstance(value, dict):
        raise SubmissionError(f"{where}: a submission is a JSON object with 'metadata' and 'kernels'")
    try:
        sub = Submission.model_validate(value)
    except ValidationError as e:
        first = e.errors()[0]
        loc = ".".join(str(x) for x in first["loc"])
        more = f" (and {e.error_count() - 1} more problems; run 'kernelbench leaderboard validate')" \
            if e.error_count() > 1 else ""
        raise SubmissionError(f"{where}: {loc}: {first['msg']}{more}") from None
    bad = []
    for key in sub.kernels:
        try:
            parse_kernel_key(key)
        except ValueError as e:
            bad.append(str(e))
    if bad:
        raise SubmissionError(f"{where}: {bad[0]}")
    return sub
