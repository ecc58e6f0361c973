"""Render ``data/`` into a static site with jinja2: every page readable without JavaScript.

The site only presents: it orders and formats numbers that aggregation computed with
``kernelbench.scoring`` and never recomputes a metric. Links are relative, so the site works from
any folder, a GitHub Pages sub-path or ``file://``; nothing is loaded from another origin.
"""

from __future__ import annotations

import json
import logging
import shutil
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from leaderboard.chart import Series, fast_p_chart
from leaderboard.errors import SiteError
from leaderboard.schema import MAX_FILE_BYTES, MAX_KERNEL_BYTES

log = logging.getLogger(__name__)

TEMPLATES = Path(__file__).parent / "templates"
STATIC = Path(__file__).parent / "static"
MARKER = ".kernelbench-site"
CHART_TOP_N = 6
PROBLEM_TOP_SOURCES = 3


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


# ---------------------------------------------------------------- data loading
def _read_json(path: Path):
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise SiteError(f"{path} does not exist: run 'kernelbench leaderboard aggregate' first") from None
    except json.JSONDecodeError as e:
        raise SiteError(f"{path} is not valid JSON: {e}") from None


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


def _score(entry: dict, scope: str) -> dict:
    return entry["scores"]["overall"] if scope == "overall" else entry["scores"]["levels"][scope]


def _board_rows(entries: list[dict], scope: str, root: str) -> list[dict]:
    """Rows ordered as aggregation ranks (excluded last, full-deck geomean descending)."""
    ordered = sorted(entries, key=lambda e: (e["audit"]["status"] == "excluded",
                                             -_score(e, scope)["fulldeck_geomean"], e["entry"]))
    rows, rank, prev, seen = [], 0, None, 0
    for e in ordered:
        s = _score(e, scope)
        if e["audit"]["status"] == "excluded":
            r = None
        else:
            seen += 1
            if s["fulldeck_geomean"] != prev:
                rank, prev = seen, s["fulldeck_geomean"]
            r = rank
        rows.append({
            "rank": r, "entry": e["entry"], "display_name": e["display_name"], "organization": e["organization"],
            "backend": e["backend"], "status": e["audit"]["status"], "reasons": e["audit"]["reasons"],
            "correct": s["correctness_rate"], "fast_1": s["fast_p"]["fast_1"], "fast_15": s["fast_p"]["fast_1.5"],
            # Beside KernelBench's fast_1: counted only when the speedup's 95% interval lies above 1 (older
            # data has none: None).
            "fast_1_sig": (s.get("fast_p_significant") or {}).get("fast_1"),
            "fast_2": s["fast_p"]["fast_2"], "geomean": s["geomean_speedup"], "fulldeck": s["fulldeck_geomean"],
            # The geomean's 95% interval (issue 23; older data has none).
            "geomean_lo": (s.get("geomean_ci95") or (None, None))[0],
            "geomean_hi": (s.get("geomean_ci95") or (None, None))[1],
            "n_kernels": s["n_attempted"], "href": f"{root}entries/{e['entry']}__{e['gpu']}.html",
            "model": (e.get("model") or {}).get("name"), "date": e.get("date"), "evaluated_on": e.get("evaluated_on"),
            # The entry's pull request or page when the submission names one, else its submitted file.
            "link": e.get("url") or f"{root}files/{e['entry']}.json",
            "link_label": "PR / page" if e.get("url") else "file",
        })
    return rows


#: Columns of a board download, in order; one row per entry, the same figures as the table.
DOWNLOAD_COLUMNS = ("rank", "entry", "display_name", "organization", "model", "date", "evaluated_on", "backend",
                    "status", "correct", "fast_1", "fast_1_sig", "fast_15", "fast_2", "geomean", "geomean_lo",
                    "geomean_hi", "fulldeck", "n_kernels", "link")


def _board_download(rows: list[dict], gpu: str | None, scope: str, n_problems: int, problem_source: str) -> dict:
    """The board as data: what the table shows, with the figures unrounded."""
    return {"gpu": gpu, "scope": scope, "n_problems": n_problems, "problem_source": problem_source,
            "columns": list(DOWNLOAD_COLUMNS),
            "rows": [{c: r[c] if c != "link" or r["link_label"] != "file" else f"files/{r['entry']}.json"
                      for c in DOWNLOAD_COLUMNS} for r in rows]}


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
    index = _read_json(data_dir / "index.json")
    results = {(e["entry"], e["gpu"]): _read_json(data_dir / e["results_file"]) for e in index["entries"]}
    kernels = {e["entry"]: _read_json(data_dir / e["kernels_file"]) for e in index["entries"]}
    problems = [_read_json(data_dir / "problems" / f"level{p['level']}_{p['problem_id']}.json")
                for p in index["problems"]]

    env = _environment()
    _prepare_out(out)
    shutil.copytree(STATIC, out / "static")
    build = SiteBuild(out_dir=out)
    gpus: list[str] = index["gpus"]
    levels: dict[str, int] = index["levels"]
    pset = index.get("problem_set")  # absent in data/ aggregated before sets had an identity
    label = f"{pset['name']}@{pset['revision'][:12]}" if pset else index["problem_source"]
    common = {"title": title, "problem_source": label, "last_evaluated": index["last_evaluated"]}
    pages: list[tuple[Path, str, dict]] = []
    downloads: list[tuple[Path, str]] = []
    # Each entry's submitted kernels, linked from the table when the submission names no pull request.
    (out / "files").mkdir(parents=True, exist_ok=True)
    for entry, src in kernels.items():
        (out / "files" / f"{entry}.json").write_text(json.dumps(src, indent=1) + "\n", encoding="utf-8")

    def page(rel: str, template: str, **ctx) -> None:
        depth = rel.count("/")
        pages.append((out / rel, template, {**common, "root": "../" * depth, **ctx}))

    # ranking pages: one per GPU and scope, plus the front page (default GPU, overall)
    default_gpu = index["default_gpu"]
    scopes = [("overall", "Overall", "index.html")] + [(lv, f"Level {lv}", f"level{lv}.html") for lv in levels]
    for gpu in gpus or [None]:
        entries = [e for e in index["entries"] if e["gpu"] == gpu]
        for scope, label, fname in scopes:
            targets = [f"gpu/{gpu}/{fname}"] if gpu else []
            if (gpu == default_gpu or gpu is None) and scope == "overall":
                targets.append("index.html")
            for rel in targets:
                root = "../" * rel.count("/")
                rows = _board_rows(entries, scope, root)
                n = sum(levels.values()) if scope == "overall" else levels[scope]
                curve_key = "overall" if scope == "overall" else f"level{scope}"
                top = [r for r in rows if r["status"] != "excluded"][:CHART_TOP_N]
                series = [Series(r["display_name"], results[(r["entry"], gpu)]["fast_p_curve"][curve_key])
                          for r in top]
                ps = results[(top[0]["entry"], gpu)]["fast_p_curve"]["p"] if top else []
                chart = fast_p_chart(series, ps, title=f"fast_p curve, {label}, {gpu}") if series else None
                basis = sorted({e["speedup_basis"] for e in entries}) or ["the baseline"]
                stem = rel[:-len(".html")]
                board = _board_download(rows, gpu, scope, n, index["problem_source"])
                downloads.append((out / f"{stem}.json", json.dumps(board, indent=1) + "\n"))
                downloads.append((out / f"{stem}.csv", _board_csv(board)))
                page(rel, "ranking.html.j2", download_stem=stem.rsplit("/", 1)[-1], nav="ranking", gpu=gpu or "–", gpus=gpus,
                     gpu_hrefs={g: f"{root}gpu/{g}/{fname}" for g in gpus},
                     scopes=[{"label": lab, "href": f"{root}gpu/{gpu}/{fn}" if gpu else f"{root}index.html",
                              "active": s == scope} for s, lab, fn in scopes],
                     scope_title=label, rows=rows, n_problems=n, chart=chart,
                     speedup_basis=" / ".join(basis), pending=index["pending"] if scope == "overall" else [])

    # entry pages
    by_entry: dict[str, list[str]] = {}
    for e in index["entries"]:
        by_entry.setdefault(e["entry"], []).append(e["gpu"])
    for e in index["entries"]:
        res = results[(e["entry"], e["gpu"])]
        curve = res["fast_p_curve"]
        series = [Series("overall", curve["overall"])] + [
            Series(f"level {lv}", curve[f"level{lv}"]) for lv in levels if f"level{lv}" in curve]
        rel = f"entries/{e['entry']}__{e['gpu']}.html"
        src = kernels[e["entry"]]
        page(rel, "entry.html.j2", nav="ranking", e={**e, "rank": e.get("rank")},
             level_scores=[(f"Level {lv}", e["scores"]["levels"][lv]) for lv in levels]
             + [("Overall", e["scores"]["overall"])],
             chart=fast_p_chart(series, curve["p"], title=f"fast_p curve of {e['display_name']} on {e['gpu']}"),
             problems=res["problems"], kernels=src, kernel_list=sorted(src.items(), key=lambda kv: _key_order(kv[0])),
             entry_gpus=sorted(by_entry[e["entry"]]),
             other_gpus={g: f"{e['entry']}__{g}.html" for g in by_entry[e["entry"]]}
             if len(by_entry[e["entry"]]) > 1 else {})

    # problem pages and list
    listing = []
    for p in problems:
        best = []
        for gpu in sorted(p["best"]):
            items = [{**it, "source": kernels.get(it["entry"], {}).get(it["kernel_key"])} for it in p["best"][gpu]]
            best.append((gpu, items))
        page(f"problems/level{p['level']}_{p['problem_id']}.html", "problem.html.j2", nav="problems", p=p,
             best=best, top_sources=PROBLEM_TOP_SOURCES)
        listing.append({**p, "best": {g: items[0] for g, items in best if items},
                        "solved": {g: sum(1 for it in items if it["status"] != "excluded") for g, items in best}})
    page("problems/index.html", "problems.html.j2", nav="problems", problems=listing, gpus=gpus)
    page("submit.html", "submit.html.j2", nav="submit", max_kernel_kb=MAX_KERNEL_BYTES // 1024,
         max_file_mb=MAX_FILE_BYTES // (1024 * 1024))

    iterator: Iterable = pages
    if progress:
        from tqdm import tqdm

        iterator = tqdm(pages, desc="rendering", unit="page")
    for path, template, ctx in iterator:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(env.get_template(template).render(**ctx), encoding="utf-8")
        build.pages.append(path)
    for path, text in downloads:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return build


def _key_order(key: str) -> tuple:
    parts = key.split("_")
    try:
        return (int(parts[1]), int(parts[3]), int(parts[5]))
    except (IndexError, ValueError):
        return (10**9, 0, 0)
