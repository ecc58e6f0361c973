"""Markdown for validation reports, from their JSON form, with the Python standard library only.

The ``comment`` workflow posts the validation report on a pull request with a token that can write
comments, on a bare Python without the project's dependencies. It must not post Markdown that the
pull request's own code wrote, so it renders this module's Markdown from ``validate.json`` (data),
and ``leaderboard validate`` renders its ``--report-md`` with the same function. Every string
from the report is escaped; counts and verdicts are recomputed from the issues.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import PurePosixPath
from typing import Any

MARKDOWN_ISSUE_LIMIT = 60


def human_bytes(n: int) -> str:
    for unit in ("bytes", "KB", "MB", "GB"):
        if n < 1024 or unit == "GB":
            return f"{n} {unit}" if unit == "bytes" else f"{n:.1f} {unit}"
        n /= 1024  # type: ignore[assignment]
    return f"{n} bytes"


@dataclass
class _Issue:
    severity: str
    code: str
    message: str
    key: str | None = None
    line: int | None = None


@dataclass
class _File:
    path: str
    display_name: str | None
    n_kernels: int
    kernels_per_level: dict[str, int]
    problems_per_level: dict[str, int]
    missing: dict[str, list[int]]
    backends: dict[str, int]
    guard_checked: int
    guard_available: bool
    issues: list[_Issue] = field(default_factory=list)

    @property
    def n_errors(self) -> int:
        return sum(1 for i in self.issues if i.severity == "error")

    @property
    def n_warnings(self) -> int:
        return sum(1 for i in self.issues if i.severity == "warning")

    @property
    def passed(self) -> bool:
        return self.n_errors == 0


def _str(v: Any) -> str:
    return v if isinstance(v, str) else str(v)


def _int(v: Any) -> int:
    return v if isinstance(v, int) and not isinstance(v, bool) else 0


def _file_view(f: Any) -> _File:
    """A file entry of the JSON report as plain typed values (bad types become empty values)."""
    f = f if isinstance(f, dict) else {}

    def counts(v: Any) -> dict[str, int]:
        return {_str(k): _int(n) for k, n in v.items()} if isinstance(v, dict) else {}

    issues = []
    for i in f.get("issues") or []:
        if isinstance(i, dict):
            issues.append(_Issue(severity=_str(i.get("severity", "")), code=_str(i.get("code", "")),
                                 message=_str(i.get("message", "")),
                                 key=_str(i["key"]) if i.get("key") is not None else None,
                                 line=_int(i.get("line")) or None))
    missing = f.get("missing") if isinstance(f.get("missing"), dict) else {}
    return _File(path=_str(f.get("path", "?")), display_name=_str(f["display_name"]) if f.get("display_name") else None,
                 n_kernels=_int(f.get("n_kernels")), kernels_per_level=counts(f.get("kernels_per_level")),
                 problems_per_level=counts(f.get("problems_per_level")),
                 missing={_str(k): [x for x in v if isinstance(x, int)] for k, v in missing.items() if isinstance(v, list)},
                 backends=counts(f.get("backends")), guard_checked=_int(f.get("guard_checked")),
                 guard_available=f.get("guard_available") is True, issues=issues)


def _ranges(ids: list[int]) -> str:
    """[1, 2, 3, 5] -> '1-3, 5'."""
    if not ids:
        return "none"
    ids = sorted(ids)
    parts, start, prev = [], ids[0], ids[0]
    for i in ids[1:] + [None]:  # type: ignore[list-item]
        if i is not None and i == prev + 1:
            prev = i
            continue
        parts.append(f"{start}-{prev}" if prev != start else f"{start}")
        if i is not None:
            start = prev = i
    return ", ".join(parts)


_MD_SPECIAL = str.maketrans({c: f"\\{c}" for c in "\\`*_[]|~!"} | {"<": "&lt;", ">": "&gt;", "&": "&amp;",
                                                                   "\n": " ", "\r": " "})


def md_escape(text: str) -> str:
    """Make untrusted text inert in a GitHub comment (no markup, no HTML, no mentions that ping)."""
    return text.translate(_MD_SPECIAL).replace("@", "@\u200b")


def md_code(text: str) -> str:
    """A code span: backslash escapes do not work inside one, so backticks and newlines are replaced
    (``\\|`` is the table-level escape GitHub applies before code spans)."""
    clean = text.replace("`", "'").replace("\n", " ").replace("\r", " ").replace("|", "\\|")
    return "`" + clean + "`"


def render_markdown(report: dict[str, Any]) -> str:
    """The Markdown summary of a validation report, from its JSON form (``ValidationReport.model_dump``).

    Counts and verdicts are recomputed from the issues, never read from the data, so the comment
    job can render a report it did not write without trusting its totals.
    """
    files_in = report.get("files")
    files = [_file_view(f) for f in files_in] if isinstance(files_in, list) else []
    limits = report.get("limits") if isinstance(report.get("limits"), dict) else {}
    n_err = sum(f.n_errors for f in files)
    n_warn = sum(f.n_warnings for f in files)
    head = "passed" if all(f.passed for f in files) else f"failed with {n_err} error{'s' if n_err != 1 else ''}"
    mark = "✅" if all(f.passed for f in files) else "❌"
    lines = [f"## {mark} KernelBench submission check {head}", ""]
    lines.append(f"Problem set: {md_code(str(report.get('problem_source', '?')))} · {len(files)} file(s) · "
                 f"{n_err} error(s), {n_warn} warning(s). Limits: {human_bytes(_int(limits.get('max_kernel_bytes', 0)))} "
                 f"per kernel, {human_bytes(_int(limits.get('max_file_bytes', 0)))} per file.")
    lines.append("")
    levels = sorted({lv for f in files for lv in f.problems_per_level}, key=lambda lv: (not lv.isdigit(), int(lv) if lv.isdigit() else 0, lv))
    raw_separate = report.get("separate_levels")
    separate = {_str(lv) for lv in raw_separate} if isinstance(raw_separate, list) else set()
    header = ["File", "Display name", "Kernels",
              *[f"Level {md_escape(lv)}" + (" (own board)" if lv in separate else "") for lv in levels],
              "Errors", "Warnings"]
    lines.append("| " + " | ".join(header) + " |")
    lines.append("|" + "---|" * len(header))
    for f in files:
        cells = [md_code(PurePosixPath(f.path).name), md_escape(f.display_name or "—"), str(f.n_kernels)]
        for lv in levels:
            cells.append(f"{f.kernels_per_level.get(lv, 0)}/{f.problems_per_level.get(lv, 0)}")
        cells += [str(f.n_errors), str(f.n_warnings)]
        lines.append("| " + " | ".join(cells) + " |")
    for lv in sorted(separate & set(levels)):
        lines += ["", f"Level {md_escape(lv)} is a board of its own (its problems load Hugging Face models), not part "
                      f"of the overall score: a file without level-{md_escape(lv)} kernels is not on it, and one with "
                      "some has its other level-" + md_escape(lv) + " problems counted as incorrect there."]
    for f in files:
        lines += ["", f"### {'✅' if f.passed else '❌'} {md_code(f.path)}", ""]
        errors = [i for i in f.issues if i.severity == "error"]
        warnings = [i for i in f.issues if i.severity == "warning" and i.code != "missing-problems"]
        for title, items in (("Errors", errors), ("Warnings", warnings)):
            if not items:
                continue
            lines.append(f"**{title}** ({len(items)})")
            lines.append("")
            for i in items[:MARKDOWN_ISSUE_LIMIT]:
                where = md_code(i.key) if i.key else ""
                line = f" line {i.line}" if i.line else ""
                lines.append(f"- {where}{line}{': ' if where or line else ''}{md_escape(i.message)} "
                             f"<sub>{md_escape(i.code)}</sub>")
            if len(items) > MARKDOWN_ISSUE_LIMIT:
                lines.append(f"- … and {len(items) - MARKDOWN_ISSUE_LIMIT} more (see the JSON report)")
            lines.append("")
        if f.missing:
            lines.append("**Missing problems** (they count as incorrect):")
            lines.append("")
            for lv, ids in sorted(f.missing.items(), key=lambda kv: (not kv[0].isdigit(), int(kv[0]) if kv[0].isdigit() else 0, kv[0])):
                own = " (on its own board)" if lv in separate else ""
                lines.append(f"- level {md_escape(lv)}{own}: {len(ids)} of {f.problems_per_level.get(lv, '?')} — {_ranges(ids)}")
            lines.append("")
        if f.guard_available and f.guard_checked:
            n_guard = sum(1 for i in f.issues if i.code.startswith("guard:"))
            lines.append(f"Static guard: {f.guard_checked} kernel(s) screened, {n_guard} finding(s) reported above.")
        else:
            lines.append("Static guard: not run.")
        if f.backends:
            lines.append("Backends: " + ", ".join(f"{b} × {n}" for b, n in sorted(f.backends.items())) + ".")
    return "\n".join(lines).rstrip() + "\n"
