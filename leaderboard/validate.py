"""Validate submission files without executing them, reporting every problem at once.

A contributor fixing a pull request wants the whole list, not the first error; so each check
records issues and carries on where it still can. The report renders to JSON (for CI) and to a
Markdown summary short enough for a pull-request comment.
"""

from __future__ import annotations

import ast
import hashlib
import logging
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, Field, ValidationError, computed_field

from kernelbench.backends import DEFAULT_BACKEND, detect_backend, submission_backends
from kernelbench.problems.model import ProblemSet
from kernelbench.problems.sources import separate_board_levels
from leaderboard.jsonio import human_bytes, read_json_document
from leaderboard.markdown import MARKDOWN_ISSUE_LIMIT, _ranges, md_code, md_escape, render_markdown  # noqa: F401
from leaderboard.schema import (
    MAX_FILE_BYTES,
    MAX_KERNEL_BYTES,
    RANKED_SAMPLE,
    Metadata,
    check_entry_id,
    defines_model_new,
    entry_id_for,
    parse_kernel_key,
)

log = logging.getLogger(__name__)

Severity = Literal["error", "warning", "info"]
GuardFn = Callable[[str, str], object]
#: Per file, this many issues are listed in Markdown; the JSON report keeps all of them.


class Issue(BaseModel):
    severity: Severity
    #: Stable identifier for tooling, e.g. ``key-format``, ``syntax``, ``guard:side-stream``.
    code: str
    message: str
    key: str | None = Field(default=None, description="The kernel key the issue is about, if any.")
    line: int | None = None


class FileReport(BaseModel):
    path: str
    entry: str
    display_name: str | None = None
    size_bytes: int = 0
    sha256: str | None = None
    n_kernels: int = 0
    kernels_per_level: dict[str, int] = Field(default_factory=dict)
    problems_per_level: dict[str, int] = Field(default_factory=dict)
    #: Problems of the set with no sample-0 kernel, per level ("1": [3, 5, 6]).
    missing: dict[str, list[int]] = Field(default_factory=dict)
    backends: dict[str, int] = Field(default_factory=dict)
    guard_checked: int = 0
    guard_available: bool = True
    issues: list[Issue] = Field(default_factory=list)

    @computed_field  # type: ignore[prop-decorator]
    @property
    def n_errors(self) -> int:
        return sum(1 for i in self.issues if i.severity == "error")

    @computed_field  # type: ignore[prop-decorator]
    @property
    def n_warnings(self) -> int:
        return sum(1 for i in self.issues if i.severity == "warning")

    @computed_field  # type: ignore[prop-decorator]
    @property
    def passed(self) -> bool:
        return self.n_errors == 0

    def add(self, severity: Severity, code: str, message: str, key: str | None = None,
            line: int | None = None) -> None:
        self.issues.append(Issue(severity=severity, code=code, message=message, key=key, line=line))


class ValidationReport(BaseModel):
    problem_source: str
    #: Levels ranked on a board of their own, not in the overall (the official level 4): a file without
    #: kernels there is simply not on that board, so nothing is reported missing for it.
    separate_levels: list[str] = Field(default_factory=list)
    limits: dict[str, int] = Field(default_factory=lambda: {"max_kernel_bytes": MAX_KERNEL_BYTES,
                                                            "max_file_bytes": MAX_FILE_BYTES})
    files: list[FileReport] = Field(default_factory=list)

    @computed_field  # type: ignore[prop-decorator]
    @property
    def passed(self) -> bool:
        return all(f.passed for f in self.files)

    def to_json(self) -> str:
        return self.model_dump_json(indent=2) + "\n"

    def to_markdown(self) -> str:
        return render_markdown(self.model_dump(mode="json"))


# ---------------------------------------------------------------- the static guard, if present
def load_static_guard() -> GuardFn | None:
    """``analyze_source`` from the static guard module, or None while it is not installed."""
    try:
        from kernelbench.evaluation.guards.static import analyze_source
    except ImportError as e:
        log.info("static guard unavailable: %s", e)
        return None
    return analyze_source


def _run_guard(report: FileReport, guard: GuardFn, key: str, source: str, backend: str) -> None:
    try:
        result = guard(source, backend)
    except Exception as e:  # a guard bug must not hide the rest of the report
        report.add("warning", "guard-crashed", f"the static guard failed on this kernel: {type(e).__name__}: {e}",
                   key=key)
        return
    report.guard_checked += 1
    for f in getattr(result, "findings", []):
        severity = getattr(f, "severity", "info")
        if severity not in ("error", "warning"):
            continue
        report.add(severity, f"guard:{getattr(f, 'rule', 'unknown')}", str(getattr(f, "message", "")),
                   key=key, line=getattr(f, "line", None))


# ---------------------------------------------------------------- checks
def _check_metadata(report: FileReport, meta: object) -> Metadata | None:
    if not isinstance(meta, dict):
        report.add("error", "metadata-type", "'metadata' must be a JSON object with at least display_name")
        return None
    for extra in sorted(set(meta) - set(Metadata.model_fields)):
        report.add("warning", "metadata-unknown-field",
                   f"metadata.{extra} is not a known field; it is kept but not shown")
    try:
        parsed = Metadata.model_validate(meta)
    except ValidationError as e:
        for err in e.errors():
            loc = ".".join(str(x) for x in err["loc"])
            report.add("error", "metadata", f"metadata.{loc}: {err['msg']}")
        name = meta.get("display_name")
        report.display_name = name if isinstance(name, str) else None
        return None
    report.display_name = parsed.display_name
    return parsed


def _printable(text: str) -> str:
    """``text`` with anything UTF-8 cannot hold shown as a ``\\uXXXX`` escape (for messages)."""
    return text.encode("utf-8", "backslashreplace").decode("utf-8")


def unencodable_strings(value: object, where: str = "$", limit: int = 20) -> list[tuple[str, str]]:
    """(JSON path, message) for each key or string that is not valid Unicode text.

    JSON's ``\\uD800``-style escapes can name lone surrogates, which Python decodes into a ``str``
    that no UTF-8 writer accepts: without this check the first ``.encode()`` (the size check, the
    report, the pull-request comment) raised ``UnicodeEncodeError`` instead of a validation error.
    """
    out: list[tuple[str, str]] = []

    def check(text: str, path: str) -> None:
        try:
            text.encode("utf-8")
        except UnicodeEncodeError as e:
            bad = text[e.start:e.end]
            out.append((path, f"character {e.start + 1} ({_printable(bad)}) is a lone surrogate, not valid "
                              f"Unicode text; write the character itself, or a surrogate pair for one "
                              f"outside the Basic Multilingual Plane"))

    stack: list[tuple[object, str]] = [(value, where)]
    while stack and len(out) < limit:
        node, path = stack.pop()
        if isinstance(node, str):
            check(node, path)
        elif isinstance(node, dict):
            for k in reversed(list(node)):
                child = f"{path}.{_printable(k)}"
                if isinstance(k, str):
                    check(k, f"{path} (a key)")
                stack.append((node[k], child))
        elif isinstance(node, list):
            stack.extend((item, f"{path}[{i}]") for i, item in reversed(list(enumerate(node))))
    return out


def _runner_notes(report: FileReport, problem, key: str) -> None:
    """Notes (severity info) for kernels whose problem needs more than torch: a hub model, or a package Modal lacks."""
    from kernelbench.runners.modal_problems import hub_models_of, modal_blocker

    blocker = modal_blocker(problem)
    if blocker is not None:
        report.add("info", "not-on-modal", f"{blocker}; on Modal it gets a not-runnable result and the other "
                                           "kernels are evaluated", key=key)
        return
    models = hub_models_of(problem)
    if models:
        report.add("info", "needs-hub",
                   f"loads {', '.join(models)} from the Hugging Face hub (needs {', '.join(problem.requirements)}): on "
                   "Modal a trusted function caches the model first and the kernel reads it read-only, offline; on a "
                   "local GPU the model must already be in the hub cache that HF_HUB_CACHE names", key=key)


def _check_kernel(report: FileReport, key: str, source: object, problems: ProblemSet,
                  meta_backend: str | None, guard: GuardFn | None, seen: set[tuple[int, int]]) -> None:
    try:
        k = parse_kernel_key(key)
    except ValueError as e:
        report.add("error", "key-format", str(e), key=key)
        k = None
    if k is not None:
        if k.level not in problems.levels():
            levels = ", ".join(map(str, problems.levels())) or "none"
            report.add("error", "unknown-level",
                       f"level {k.level} is not in the problem set {problems.source} (levels {levels})", key=key)
        elif k.problem_id not in problems.ids(k.level):
            ids = problems.ids(k.level)
            report.add("error", "unknown-problem",
                       f"level {k.level} has no problem {k.problem_id} in {problems.source} "
                       f"(ids {_ranges(ids)})", key=key)
        if k.sample_id != RANKED_SAMPLE:
            report.add("warning", "extra-sample",
                       f"only sample {RANKED_SAMPLE} is evaluated and ranked; this kernel is ignored", key=key)
        elif k.level in problems.levels() and k.problem_id in problems.ids(k.level):
            seen.add((k.level, k.problem_id))
            lv = str(k.level)
            report.kernels_per_level[lv] = report.kernels_per_level.get(lv, 0) + 1
            _runner_notes(report, problems.get(k.level, k.problem_id), key)
    if not isinstance(source, str):
        report.add("error", "kernel-type", f"the kernel must be a string of Python source, got {_json_type(source)}",
                   key=key)
        return
    size = len(source.encode("utf-8"))
    if size > MAX_KERNEL_BYTES:
        report.add("error", "kernel-too-large",
                   f"kernel is {human_bytes(size)}, over the {human_bytes(MAX_KERNEL_BYTES)} limit per kernel", key=key)
        return
    if not source.strip():
        report.add("error", "kernel-empty", "the kernel source is empty", key=key)
        return
    try:
        tree = ast.parse(source, filename=key)
    except SyntaxError as e:
        report.add("error", "syntax", f"not valid Python: {e.msg} (line {e.lineno})", key=key, line=e.lineno)
        return
    except (ValueError, RecursionError) as e:  # null bytes, absurd nesting
        report.add("error", "syntax", f"not valid Python: {e}", key=key)
        return
    if not defines_model_new(tree):
        report.add("error", "no-modelnew", "the source does not define ModelNew at module level "
                   "(class ModelNew(nn.Module): ...)", key=key)
    detected = detect_backend(source)
    backend = meta_backend or detected or DEFAULT_BACKEND
    if meta_backend and detected and detected != meta_backend:
        report.add("warning", "backend-mismatch",
                   f"metadata.backend is {meta_backend} but this kernel looks like {detected}; "
                   f"it is evaluated as {meta_backend}", key=key)
    report.backends[backend] = report.backends.get(backend, 0) + 1
    if guard is not None and (k is None or k.sample_id == RANKED_SAMPLE):
        _run_guard(report, guard, key, source, backend)


def validate_file(path: str | Path, problems: ProblemSet, guard: GuardFn | None = None,
                  use_guard: bool = True, separate_levels: Iterable[int] | None = None) -> FileReport:
    """Check one submission file against ``problems``; never raises for bad content.

    ``separate_levels``: levels ranked on a board of their own (default: the set's own, see
    ``separate_board_levels``); their problems are accepted like any other, but a file with no kernel
    for such a level is not on that board rather than missing all of it.
    """
    if separate_levels is None:
        separate_levels = separate_board_levels(problems)
    separate = set(separate_levels)
    path = Path(path)
    entry = entry_id_for(path)
    report = FileReport(path=str(path), entry=entry)
    report.problems_per_level = {str(lv): n for lv, n in problems.count_by_level().items()}
    if path.suffix != ".json":
        report.add("error", "file-name", f"{path.name}: a submission file name ends in .json")
    try:
        check_entry_id(entry)
    except ValueError as e:
        report.add("error", "file-name", str(e))

    doc = read_json_document(path, MAX_FILE_BYTES)
    report.size_bytes = doc.size_bytes
    for w in doc.warnings:
        report.add("warning", "encoding", w)
    if doc.errors:
        for err in doc.errors:
            code = "too-large" if "limit" in err else "encoding" if "UTF-8" in err else "json"
            if "does not exist" in err or "not a regular file" in err:
                code = "missing-file"
            report.add("error", code, err)
        return report
    report.sha256 = hashlib.sha256(doc.raw).hexdigest()
    for dup in doc.duplicate_keys:
        report.add("error", "duplicate-key", f"key {dup!r} appears more than once; JSON readers would keep only "
                   f"the last one", key=dup if dup.startswith("level_") else None)

    value = doc.value
    bad_text = unencodable_strings(value)
    for where, message in bad_text:
        report.add("error", "encoding", f"{where}: {message}")
    if bad_text:  # every later check, report and comment writes this text out: stop here, cleanly
        return report
    if not isinstance(value, dict):
        report.add("error", "top-level-type",
                   f"a submission is a JSON object with 'metadata' and 'kernels', not {_json_type(value)}")
        return report
    for extra in sorted(set(value) - {"metadata", "kernels"}):
        report.add("warning", "unknown-field", f"top-level field {extra!r} is not part of the format and is ignored")
    meta = None
    if "metadata" not in value:
        report.add("error", "metadata-missing", "'metadata' is missing (it needs at least display_name)")
    else:
        meta = _check_metadata(report, value["metadata"])
    meta_backend = meta.backend if meta else (
        value["metadata"].get("backend") if isinstance(value.get("metadata"), dict)
        and value["metadata"].get("backend") in submission_backends() else None)

    kernels = value.get("kernels")
    if "kernels" not in value:
        report.add("error", "kernels-missing", "'kernels' is missing (an object of level_L_problem_P_sample_S keys)")
        return report
    if not isinstance(kernels, dict):
        report.add("error", "kernels-type", f"'kernels' must be an object keyed by kernel key, not {_json_type(kernels)}")
        return report
    if not kernels:
        report.add("error", "kernels-empty", "'kernels' is empty: submit at least one kernel")
    report.n_kernels = len(kernels)

    if use_guard and guard is None:
        guard = load_static_guard()
        if guard is None:
            report.guard_available = False
            report.add("warning", "guard-unavailable",
                       "static guard unavailable (kernelbench.evaluation.guards.static is not installed); "
                       "kernels were not screened")
    elif not use_guard:
        report.guard_available = False

    seen: set[tuple[int, int]] = set()
    for key in sorted(kernels, key=_natural):
        _check_kernel(report, key, kernels[key], problems, meta_backend, guard, seen)

    for lv in problems.levels():
        missing = [pid for pid in problems.ids(lv) if (lv, pid) not in seen]
        n = len(problems.ids(lv))
        if lv in separate:
            if len(missing) == n:
                report.add("info", "separate-board",
                           f"level {lv}: no kernel, so the entry is not on the level-{lv} board (a board of its own, "
                           "not in the overall score)")
                continue
            board = f" on the level-{lv} board (a board of its own, not in the overall score)"
        else:
            board = ""
        if missing:
            report.missing[str(lv)] = missing
            report.add("warning", "missing-problems",
                       f"level {lv}: {len(missing)} of {n} problems have no kernel and count as incorrect{board} "
                       f"({_ranges(missing)})")
    return report


def validate_files(paths: Iterable[str | Path], problems: ProblemSet, use_guard: bool = True,
                   progress: bool = False) -> ValidationReport:
    paths = list(paths)
    guard = load_static_guard() if use_guard else None
    separate = separate_board_levels(problems)
    report = ValidationReport(problem_source=problems.source, separate_levels=[str(lv) for lv in separate])
    iterator: Iterable = paths
    if progress and len(paths) > 1:
        from kernelbench.progress import progress_bar

        iterator = progress_bar(paths, desc="validating", unit="file")
    for p in iterator:
        report.files.append(validate_file(p, problems, guard=guard, use_guard=use_guard, separate_levels=separate))
    return report


# ---------------------------------------------------------------- rendering
def _json_type(v: object) -> str:
    return {dict: "an object", list: "an array", str: "a string", bool: "a boolean", int: "a number",
            float: "a number", type(None): "null"}.get(type(v), type(v).__name__)


def _natural(key: str) -> tuple:
    try:
        k = parse_kernel_key(key)
        return (0, k.level, k.problem_id, k.sample_id, "")
    except ValueError:
        return (1, 0, 0, 0, key)


