"""The Markdown of the pull-request comments: validation report, scores, and what went wrong.

Every piece of text that came from a submission (names, error lines) goes through the same
escaping as the validation report, so a display name cannot inject markup or ping anyone.
Importing this module needs only the standard library; the score table imports the leaderboard's
escaping when it is rendered.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

#: Rows of the per-kernel table before it is cut (the artifact has all of them).
MAX_KERNEL_ROWS = 120


@dataclass(frozen=True)
class RunContext:
    """Where a comment came from, for its footer."""

    pr: int | None = None
    head_sha: str | None = None
    run_url: str | None = None
    artifact: str | None = None

    @classmethod
    def from_env(cls, pr: int | None = None, head_sha: str | None = None, artifact: str | None = None,
                 env: dict[str, str] | None = None) -> RunContext:
        env = dict(os.environ if env is None else env)
        server, repo, run_id = (env.get("GITHUB_SERVER_URL", "https://github.com"), env.get("GITHUB_REPOSITORY"),
                                env.get("GITHUB_RUN_ID"))
        url = f"{server}/{repo}/actions/runs/{run_id}" if repo and run_id else None
        return cls(pr=pr, head_sha=head_sha, run_url=url, artifact=artifact)

    def footer(self) -> str:
        bits = []
        if self.head_sha:
            bits.append(f"commit `{self.head_sha[:12]}`")
        if self.run_url:
            bits.append(f"[workflow run]({self.run_url})")
        if self.artifact:
            bits.append(f"artifact `{self.artifact}`")
        return ("<sub>" + " · ".join(bits) + "</sub>") if bits else ""


def validation_comment(report_md: str, ctx: RunContext, n_deleted: int = 0) -> str:
    parts = [report_md.rstrip()]
    if n_deleted:
        parts.append(f"{n_deleted} submission file(s) removed by this pull request (not validated).")
    parts.append("Nothing in a submission is imported or executed by this check. A maintainer starts the GPU "
                 "evaluation by adding the `evaluate` label.")
    foot = ctx.footer()
    return "\n\n".join(parts + ([foot] if foot else [])) + "\n"


def no_submissions_comment(ctx: RunContext, n_deleted: int) -> str:
    head = "## ✅ KernelBench submission check: no submission file to check"
    body = (f"This pull request removes {n_deleted} submission file(s) and adds or changes none."
            if n_deleted else "This pull request adds or changes no submission file.")
    foot = ctx.footer()
    return "\n\n".join([head, body] + ([foot] if foot else [])) + "\n"


def failure_comment(ctx: RunContext, what: str, job_status: str, validation_md: str | None = None) -> str:
    """A comment for a run that stopped before it had scores to report."""
    status = job_status or "failure"
    lines = [f"## ❌ KernelBench {what} did not finish ({status})", ""]
    if validation_md:
        lines += ["The submission did not pass validation, so nothing was evaluated.", "", validation_md.rstrip(), ""]
    else:
        lines += ["No scores: the workflow run's log says why; the results that came back are in its artifact. "
                  "To try again, remove and re-add the `evaluate` label, or run the `evaluate` workflow by hand.", ""]
    foot = ctx.footer()
    if foot:
        lines.append(foot)
    return "\n".join(lines).rstrip() + "\n"


def _pct(v: float | None) -> str:
    return "n/a" if v is None else f"{100 * v:.1f}%"


def _x(v: float | None) -> str:
    return "n/a" if v is None else f"{v:.3f}"


def _score_row(label: str, s: dict) -> str:
    fp = s.get("fast_p", {})
    return (f"| {label} | {s['n_problems']} | {s['n_compiled']} | {s['n_correct']} ({_pct(s.get('correctness_rate'))}) | "
            f"{_pct(fp.get('fast_1'))} | {_pct(fp.get('fast_2'))} | {_x(s.get('geomean_speedup'))} | "
            f"{_x(s.get('fulldeck_geomean'))} |")


def evaluation_comment(scores: list, ctx: RunContext, problem_source: str) -> str:
    """Scores per entry (``ci_score.EntryScore``), as the board will show them after the merge."""
    from leaderboard.validate import md_code, md_escape

    out: list[str] = []
    for s in scores:
        mark = {"clean": "✅", "flagged": "⚠️", "excluded": "⛔"}.get(s.status, "ℹ️")
        out += [f"## {mark} KernelBench evaluation: {md_code(s.entry)} on {md_code(s.gpu)}", ""]
        out.append(f"**{md_escape(s.display_name)}** · problem set {md_code(problem_source)} · "
                   f"{s.n_kernels} kernel(s) evaluated · speedups against the {md_escape(s.speedup_basis)}")
        out += ["", "| scope | problems | compiled | correct | fast_1 | fast_2 | geomean (correct) | full-deck geomean |",
                "|---|---:|---:|---:|---:|---:|---:|---:|"]
        for lv, ls in sorted(s.levels.items(), key=lambda kv: int(kv[0])):
            out.append(_score_row(f"level {lv}", ls))
        out.append(_score_row("**overall**", s.overall))
        separate = s.separate
        for lv, board in sorted(separate.items()):
            out.append(_score_row(f"level {lv} (own board, not in overall)", board["score"]))
        out.append("")
        rank = f"**#{s.rank} of {s.n_ranked}**" if s.rank is not None else "not ranked"
        out.append(f"Rank on {md_code(s.gpu)} once merged: {rank} (by full-deck geomean) · audit: **{s.status}**")
        for lv, board in sorted(separate.items()):
            place = f"**#{board['rank']} of {board['n_ranked']}**" if board["rank"] is not None else "not ranked"
            out.append("")
            out.append(f"Level {lv} is a board of its own (Hugging Face models), not in the overall score: rank on "
                       f"{md_code(s.gpu)} there once merged: {place}; speedups against {md_escape(board['speedup_basis'])}.")
        if s.reasons:
            out += ["", "Audit notes (a maintainer should look before merging):", ""]
            out += [f"- {md_escape(r)}" for r in s.reasons[:30]]
            if len(s.reasons) > 30:
                out.append(f"- … and {len(s.reasons) - 30} more (see the artifact)")
        rows = s.problems
        verdicts: dict[str, int] = {}
        for r in rows:
            verdicts[r["verdict"]] = verdicts.get(r["verdict"], 0) + 1
        summary = ", ".join(f"{n} {md_escape(v)}" for v, n in sorted(verdicts.items()))
        out += ["", f"<details><summary>Per-kernel verdicts ({summary or 'none'})</summary>", "",
                "| kernel | verdict | speedup | kernel ms | note |", "|---|---|---:|---:|---|"]
        for r in rows[:MAX_KERNEL_ROWS]:
            ms = "n/a" if r.get("runtime_ms") is None else f"{r['runtime_ms']:.4g}"
            note = r.get("error") or "; ".join(r.get("flags") or [])
            out.append(f"| {md_code(r['kernel_key'] or r['key'])} | {md_escape(r['verdict'])} | {_x(r.get('speedup'))} | "
                       f"{ms} | {md_escape(note[:200]) if note else ''} |")
        if len(rows) > MAX_KERNEL_ROWS:
            out.append(f"| … | {len(rows) - MAX_KERNEL_ROWS} more in the artifact | | | |")
        out += ["", "</details>", ""]
        out.append(f"To publish after merging: copy `evaluations/{s.bundle_file}` from the artifact to "
                   f"`data/evaluations/` on `main` and commit it (see docs/leaderboard.md).")
        out.append("")
    foot = ctx.footer()
    if foot:
        out.append(foot)
    return "\n".join(out).rstrip() + "\n"
