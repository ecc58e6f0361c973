"""Render ``data/`` into a static site with jinja2: every page readable without JavaScript.

The site only presents: it orders and formats numbers that aggregation computed with
``kernelbench.scoring`` and never recomputes a metric. It reads ``data/`` through the models of
``leaderboard.data_model`` and ranks each board with the same function aggregation ranks with. Links are relative, so the site works from
any folder, a GitHub Pages sub-path or ``file://``; nothing is loaded from another origin.
"""

from __future__ import annotations

import json
import logging
import shutil
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from leaderboard.chart import Series, fast_p_chart
from leaderboard.data_model import (
    OVERALL,
    BoardIndex,
    IndexEntry,
    KernelSources,
    ProblemFile,
    ResultsFile,
    rank_entries,
    read_data_file,
)
from leaderboard.errors import SiteError
from leaderboard.schema import MAX_FILE_BYTES, MAX_KERNEL_BYTES

log = logging.getLogger(__name__)

TEMPLATES = Path(__file__).parent / "templates"
STATIC = Path(__file__).parent / "static"
MARKER = ".kernelbench-site"
CHART_TOP_N = 6
PROBLEM_TOP_SOURCES = 3
#: How a separate level's board is named (the official level 4 loads Hugging Face models).
SEPARATE_LABELS = {"4": "Level 4 (Hugging Face models)"}
#: Said wherever a separate level's board or score is shown.
NOT_IN_OVERALL = "not in the overall score"


def separate_label(level: str) -> str:
    return SEPARATE_LABELS.get(level, f"Level {level}")


@dataclass
class SiteBuild:
    out_dir: Path
    pages: list[Path] = field(default_factory=list)


# ---------------------------------------------------------------- formatting filters
def _pct(v) -> str:
    return "–" if v is None else f"{v * 100:.1f}%"


def _speedup(v) -> str:
    return "–" if v is None else f"{v:.2f}×"


def _ms(v) -> str:
    if v is None:
        return "–"
    return f"{v:.3f}" if v < 100 else f"{v:.1f}"


#: Result verdicts are stage names when a candidate failed; say it the way a reader would.
VERDICT_LABELS = {"correctness": "incorrect", "run": "runtime error", "init": "init error", "timing": "timing error",
                  "guard": "guard failed", "load-failed": "load failed", "compile-failed": "compile failed",
                  "not-evaluated": "not evaluated"}


def _verdict_label(v: str) -> str:
    return VERDICT_LABELS.get(v, v)


def _environment():
    from jinja2 import Environment, FileSystemLoader, StrictUndefined

    env = Environment(loader=FileSystemLoader(str(TEMPLATES)), autoescape=True, undefined=StrictUndefined,
                      trim_blocks=True, lstrip_blocks=True, keep_trailing_newline=True)
    env.filters.update(pct=_pct, speedup=_speedup, ms=_ms, verdict_label=_verdict_label)
    return env


def _prepare_out(out: Path) -> None:
    """Refuse to wipe a folder this builder did not create; otherwise start from an empty one."""
    if out.exists():
        if not out.is_dir():
            raise SiteError(f"{out} exists and is not a folder")
        if any(out.iterdir()) and not (out / MARKER).exists():
            raise SiteError(f"{out} is not empty and was not built by 'leaderboard build'; choose another --out")
        shutil.rmtree(out)
    out.mkdir(parents=True)
    (out / MARKER).write_text("built by kernelbench leaderboard build; the folder is replaced on each build\n",
                              encoding="utf-8")


@dataclass(frozen=True)
class RankingRow:
    """One line of a ranking table (and of its JSON/CSV download)."""

    rank: int | None
    entry: str
    display_name: str
    organization: str | None
    backend: str
    status: str
    reasons: list[str]
    correct: float
    fast_1: float
    fast_15: float
    #: Beside KernelBench's fast_1: counted only when the speedup's 95% interval lies above 1 (None in
    #: older data).
    fast_1_sig: float | None
    fast_2: float
    geomean: float | None
    fulldeck: float
    #: The geomean's 95% interval (issue 23; None in older data).
    geomean_lo: float | None
    geomean_hi: float | None
    n_kernels: int
    href: str
    model: str | None
    date: str | None
    evaluated_on: str | None
    #: The entry's pull request or page when the submission names one, else its submitted file.
    link: str
    link_label: str


def _board_rows(entries: list[IndexEntry], scope: str, root: str) -> list[RankingRow]:
    """Rows ranked as aggregation ranks (``rank_entries``), on the overall board or one level's."""
    rows = []
    for e, rank in rank_entries(entries, scope):
        s = e.score(scope)
        lo, hi = s.geomean_ci95 or (None, None)
        rows.append(RankingRow(
            rank=rank, entry=e.entry, display_name=e.display_name, organization=e.organization,
            backend=e.backend, status=e.audit.status, reasons=e.audit.reasons,
            correct=s.correctness_rate, fast_1=s.fast_p["fast_1"], fast_15=s.fast_p["fast_1.5"],
            fast_1_sig=s.fast_p_significant.get("fast_1"), fast_2=s.fast_p["fast_2"], geomean=s.geomean_speedup,
            fulldeck=s.fulldeck_geomean, geomean_lo=lo, geomean_hi=hi, n_kernels=s.n_attempted,
            href=f"{root}entries/{e.entry}__{e.gpu}.html", model=(e.model or {}).get("name"), date=e.date,
            evaluated_on=e.evaluated_on, link=e.url or f"{root}files/{e.entry}.json",
            link_label="PR / page" if e.url else "file",
        ))
    return rows


#: Columns of a board download, in order; one row per entry, the same figures as the table.
DOWNLOAD_COLUMNS = ("rank", "entry", "display_name", "organization", "model", "date", "evaluated_on", "backend",
                    "status", "correct", "fast_1", "fast_1_sig", "fast_15", "fast_2", "geomean", "geomean_lo",
                    "geomean_hi", "fulldeck", "n_kernels", "link")


def _board_download(rows: list[RankingRow], gpu: str | None, scope: str, n_problems: int,
                    problem_source: str, board: str, in_overall: bool, speedup_basis: str) -> dict[str, Any]:
    """The board as data: what the table shows, with the figures unrounded, and which board it is."""
    out_rows = []
    for r in rows:
        values = asdict(r)
        if r.link_label == "file":
            values["link"] = f"files/{r.entry}.json"  # relative to the download, wherever the page is
        out_rows.append({c: values[c] for c in DOWNLOAD_COLUMNS})
    return {"gpu": gpu, "scope": scope, "board": board, "in_overall": in_overall, "n_problems": n_problems,
            "problem_source": problem_source, "speedup_basis": speedup_basis,
            "columns": list(DOWNLOAD_COLUMNS), "rows": out_rows}


def _board_csv(board: dict) -> str:
    import csv
    import io

    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(board["columns"])
    for row in board["rows"]:
        w.writerow(["" if row[c] is None else row[c] for c in board["columns"]])
    return buf.getvalue()


def build_site(data_dir: str | Path, out_dir: str | Path, title: str = "KernelBench Leaderboard",
               progress: bool = False) -> SiteBuild:
    data_dir, out = Path(data_dir), Path(out_dir)
    index = read_data_file(data_dir / "index.json", BoardIndex)
    results = {(e.entry, e.gpu): read_data_file(data_dir / e.results_file, ResultsFile) for e in index.entries}
    kernels = {e.entry: read_data_file(data_dir / e.kernels_file, KernelSources) for e in index.entries}
    problems = [read_data_file(data_dir / p.file, ProblemFile) for p in index.problems]

    env = _environment()
    _prepare_out(out)
    shutil.copytree(STATIC, out / "static")
    build = SiteBuild(out_dir=out)
    gpus = index.gpus
    levels = index.levels
    pset = index.problem_set  # absent in data/ aggregated before sets had an identity
    label = f"{pset.name}@{pset.revision[:12]}" if pset else index.problem_source
    common = {"title": title, "problem_source": label, "last_evaluated": index.last_evaluated}
    pages: list[tuple[Path, str, dict]] = []
    downloads: list[tuple[Path, str]] = []
    # Each entry's submitted kernels, linked from the table when the submission names no pull request.
    (out / "files").mkdir(parents=True, exist_ok=True)
    for entry, src in kernels.items():
        (out / "files" / f"{entry}.json").write_text(json.dumps(src, indent=1) + "\n", encoding="utf-8")

    def page(rel: str, template: str, **ctx) -> None:
        depth = rel.count("/")
        pages.append((out / rel, template, {**common, "root": "../" * depth, **ctx}))

    # ranking pages: one per GPU and scope, plus the front page (default GPU, overall). A separate level
    # (official level 4) gets a page like a level's, but is its own board: never part of the overall.
    default_gpu = index.default_gpu
    separate = index.separate_levels
    scopes = ([(OVERALL, "Overall", "index.html")] + [(lv, f"Level {lv}", f"level{lv}.html") for lv in levels]
              + [(lv, f"{separate_label(lv)} · own board", f"level{lv}.html") for lv in separate])
    for gpu in gpus or [None]:
        entries = [e for e in index.entries if e.gpu == gpu]
        for scope, tab, fname in scopes:
            targets = [f"gpu/{gpu}/{fname}"] if gpu else []
            if (gpu == default_gpu or gpu is None) and scope == OVERALL:
                targets.append("index.html")
            is_separate = scope in separate
            scope_title = (f"{separate_label(scope)}, {NOT_IN_OVERALL}" if is_separate
                           else "Overall" if scope == OVERALL else f"Level {scope}")
            on_board = [e for e in entries if e.on_board(scope)]
            for rel in targets:
                root = "../" * rel.count("/")
                rows = _board_rows(entries, scope, root)
                n = (sum(levels.values()) if scope == OVERALL else separate[scope] if is_separate
                     else levels[scope])
                curve_key = OVERALL if scope == OVERALL else f"level{scope}"
                top = [r for r in rows if r.status != "excluded"][:CHART_TOP_N]
                series = [Series(r.display_name, results[(r.entry, gpu)].fast_p_curve[curve_key]) for r in top]
                ps = results[(top[0].entry, gpu)].fast_p_curve["p"] if top else []
                chart = fast_p_chart(series, ps, title=f"fast_p curve, {tab}, {gpu}") if series else None
                basis = sorted({e.speedup_basis_for(scope) for e in on_board}) or ["the baseline"]
                stem = rel[:-len(".html")]
                board = _board_download(rows, gpu, scope, n, index.problem_source, scope_title,
                                        in_overall=not is_separate, speedup_basis=" / ".join(basis))
                downloads.append((out / f"{stem}.json", json.dumps(board, indent=1) + "\n"))
                downloads.append((out / f"{stem}.csv", _board_csv(board)))
                page(rel, "ranking.html.j2", download_stem=stem.rsplit("/", 1)[-1], nav="ranking", gpu=gpu or "–", gpus=gpus,
                     gpu_hrefs={g: f"{root}gpu/{g}/{fname}" for g in gpus},
                     scopes=[{"label": lab, "href": f"{root}gpu/{gpu}/{fn}" if gpu else f"{root}index.html",
                              "active": s == scope} for s, lab, fn in scopes],
                     scope_title=scope_title, scope_noun="overall" if scope == OVERALL else f"level {scope}",
                     rows=rows, n_problems=n, chart=chart,
                     speedup_basis=" / ".join(basis), pending=index.pending if scope == OVERALL else [],
                     separate=_separate_context(scope, entries, is_separate, basis, index),
                     separate_boards=[{"label": separate_label(lv), "href": f"{root}gpu/{gpu}/level{lv}.html"
                                       if gpu else None} for lv in separate] if scope == OVERALL else [])

    # entry pages
    by_entry: dict[str, list[str]] = {}
    for e in index.entries:
        by_entry.setdefault(e.entry, []).append(e.gpu)
    for e in index.entries:
        res = results[(e.entry, e.gpu)]
        curve = res.fast_p_curve
        series = [Series("overall", curve["overall"])] + [
            Series(f"level {lv}", curve[f"level{lv}"]) for lv in levels if f"level{lv}" in curve] + [
            Series(f"level {lv} (own board)", curve[f"level{lv}"]) for lv in index.separate_levels
            if f"level{lv}" in curve]
        rel = f"entries/{e.entry}__{e.gpu}.html"
        src = kernels[e.entry]
        same_gpu = [x for x in index.entries if x.gpu == e.gpu]
        page(rel, "entry.html.j2", nav="ranking", e=e,
             level_scores=[(f"Level {lv}", e.score(lv)) for lv in levels] + [("Overall", e.score(OVERALL))] + [
                 (f"Level {lv} · own board", e.score(lv))
                 for lv in index.separate_levels if e.on_board(lv)],
             separate_places=_separate_places(e, same_gpu, index.separate_levels),
             chart=fast_p_chart(series, curve["p"], title=f"fast_p curve of {e.display_name} on {e.gpu}"),
             problems=res.problems, kernels=src, kernel_list=sorted(src.items(), key=lambda kv: _key_order(kv[0])),
             entry_gpus=sorted(by_entry[e.entry]),
             other_gpus={g: f"{e.entry}__{g}.html" for g in by_entry[e.entry]}
             if len(by_entry[e.entry]) > 1 else {})

    # problem pages and list
    listing = []
    for p in problems:
        best = []
        for gpu in sorted(p.best):
            items = [{**it.model_dump(), "source": kernels.get(it.entry, {}).get(it.kernel_key or "")}
                     for it in p.best[gpu]]
            best.append((gpu, items))
        own_board = separate_label(str(p.level)) if str(p.level) in index.separate_levels else None
        page(f"problems/level{p.level}_{p.problem_id}.html", "problem.html.j2", nav="problems", p=p,
             best=best, top_sources=PROBLEM_TOP_SOURCES, own_board=own_board)
        listing.append({**p.model_dump(), "best": {g: items[0] for g, items in best if items},
                        "solved": {g: sum(1 for it in items if it["status"] != "excluded") for g, items in best}})
    page("problems/index.html", "problems.html.j2", nav="problems", problems=listing, gpus=gpus,
         own_boards=[separate_label(lv) for lv in index.separate_levels])
    page("submit.html", "submit.html.j2", nav="submit", max_kernel_kb=MAX_KERNEL_BYTES // 1024,
         max_file_mb=MAX_FILE_BYTES // (1024 * 1024))

    iterator: Iterable = pages
    if progress:
        from kernelbench.progress import progress_bar

        iterator = progress_bar(pages, desc="rendering", unit="page")
    for path, template, ctx in iterator:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(env.get_template(template).render(**ctx), encoding="utf-8")
        build.pages.append(path)
    for path, text in downloads:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return build


def _separate_places(e: IndexEntry, same_gpu: list[IndexEntry], separate: Iterable[str]) -> list[dict[str, Any]]:
    """The entry's rank on each separate level's board it is on (its entry page links them)."""
    out = []
    for lv in separate:
        if not e.on_board(lv):
            continue
        ranked = rank_entries(same_gpu, lv)
        out.append({"label": separate_label(lv), "rank": next(r for x, r in ranked if x.entry == e.entry),
                    "n": sum(1 for _, r in ranked if r is not None), "basis": e.speedup_basis_for(lv),
                    "href": f"../gpu/{e.gpu}/level{lv}.html"})
    return out


def _separate_context(scope: str, entries: list[IndexEntry], is_separate: bool, basis: list[str],
                      index: BoardIndex) -> dict[str, Any] | None:
    """What a separate level's page says about itself: not in the overall, who is not on it, what speedups divide by."""
    if not is_separate:
        return None
    absent = [e for e in entries if not e.on_board(scope)]
    return {"level": scope, "label": separate_label(scope),
            "absent": [e.display_name for e in sorted(absent, key=lambda e: e.display_name.lower())],
            "in_session": "in-session reference" in basis,
            "overall_levels": ", ".join(index.levels)}


def _key_order(key: str) -> tuple:
    parts = key.split("_")
    try:
        return (int(parts[1]), int(parts[3]), int(parts[5]))
    except (IndexError, ValueError):
        return (10**9, 0, 0)
