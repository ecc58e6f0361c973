"""The static site: server-rendered ranking, links, escaping, no external requests, the SVG chart."""

from __future__ import annotations

import hashlib
import json
import re
from html.parser import HTMLParser
from pathlib import Path

import pytest
from fixtures.leaderboard import factory as F

from kernelbench.cli.main import main as kb_main
from leaderboard.chart import Series, fast_p_chart
from leaderboard.errors import SiteError
from leaderboard.site import build_site


class Page(HTMLParser):
    """Collects links, ids, script/style references and ranking-table rows of one page."""

    def __init__(self) -> None:
        super().__init__()
        self.links: list[str] = []
        self.ids: set[str] = set()
        self.rows: list[dict] = []
        self.scripts: list[str] = []
        self._in_ranking = False
        self._row: dict | None = None
        self._cell: list[str] | None = None
        self.polylines: list[dict] = []

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if "id" in a:
            self.ids.add(a["id"])
        for attr in ("href", "src"):
            if attr in a:
                self.links.append(a[attr])
        if tag == "script":
            self.scripts.append(a.get("src", "inline"))
        if tag == "table" and a.get("id") == "ranking":
            self._in_ranking = True
        if self._in_ranking and tag == "tr" and "data-entry" in a:
            self._row = {"entry": a["data-entry"], "class": a.get("class"), "cells": []}
        if self._row is not None and tag == "td":
            self._cell = []
        if tag == "polyline":
            self.polylines.append(a)

    def handle_endtag(self, tag):
        if tag == "td" and self._row is not None and self._cell is not None:
            self._row["cells"].append(" ".join("".join(self._cell).split()))
            self._cell = None
        if tag == "tr" and self._row is not None:
            self.rows.append(self._row)
            self._row = None
        if tag == "table":
            self._in_ranking = False

    def handle_data(self, data):
        if self._cell is not None:
            self._cell.append(data)


def parse(path: Path) -> Page:
    p = Page()
    p.feed(path.read_text(encoding="utf-8"))
    return p


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("board")
    data = F.build_board(root)
    build_site(data, root / "site")
    return root / "site"


def test_pages_exist(site):
    expected = ["index.html", "submit.html", "gpu/H100/index.html", "gpu/H100/level1.html", "gpu/H100/level2.html",
                "gpu/A100/index.html", "entries/alpha__H100.html", "entries/alpha__A100.html",
                "entries/beta__H100.html", "entries/gamma__H100.html", "problems/index.html",
                "problems/level1_1.html", "problems/level2_2.html", "static/style.css", "static/sort.js"]
    for rel in expected:
        assert (site / rel).is_file(), rel


def test_ranking_is_server_rendered_in_order(site):
    page = parse(site / "index.html")
    assert [r["entry"] for r in page.rows] == ["beta", "alpha", "gamma"]
    ranks = [r["cells"][0] for r in page.rows]
    assert ranks == ["1", "2", "–"]
    assert page.rows[2]["class"] == "excluded"
    cells = page.rows[1]["cells"]
    assert cells[1].startswith("Alpha Model") and "Org alpha" in cells[1]
    # model and date as submitted; an entry that names neither shows a dash
    assert "alpha-llm-7b" in cells[2] and "2026-01-15" in cells[2] and "date not given" in page.rows[0]["cells"][2]
    assert cells[3] == "clean" and page.rows[0]["cells"][3] == "flagged" and page.rows[2]["cells"][3] == "excluded"
    # alpha: correct 3/6, fast_1 2/6, fast_2 1/6, geomean 4^(1/3), full deck 4^(1/6)
    assert cells[4:12] == ["50.0%", "33.3%", "–", "33.3%", "16.7%", "1.59×", "1.26×", "4/6"]
    assert page.rows[0]["cells"][10] == f"{16 ** (1 / 6):.2f}×"
    # the source column links alpha's pull request, and beta's submitted file (which the site ships)
    assert cells[12] == "PR / page" and page.rows[0]["cells"][12] == "file"
    html = (site / "index.html").read_text()
    assert 'href="https://github.com/example/kernelbench-board/pull/7"' in html
    assert 'href="files/beta.json"' in html and json.loads((site / "files" / "beta.json").read_text())
    # the front page is the default GPU's overall ranking
    assert (site / "index.html").read_text().count("<tr class=") == \
        (site / "gpu" / "H100" / "index.html").read_text().count("<tr class=")
    pending = (site / "index.html").read_text()
    assert "Awaiting evaluation" in pending and "Pending One" in pending


def test_level_pages_rank_by_that_level(site):
    l2 = parse(site / "gpu" / "H100" / "level2.html")
    # level 2: alpha 4x on problem 1 (full deck 2.0), beta 2x (sqrt 2), gamma excluded
    assert [r["entry"] for r in l2.rows] == ["alpha", "beta", "gamma"]
    assert l2.rows[0]["cells"][10] == "2.00×"
    a100 = parse(site / "gpu" / "A100" / "index.html")
    assert [r["entry"] for r in a100.rows] == ["alpha"]


def test_gpu_selector_and_level_tabs_are_plain_links(site):
    text = (site / "gpu" / "H100" / "level1.html").read_text()
    assert 'href="../../gpu/A100/level1.html"' in text
    assert 'href="../../gpu/H100/level2.html"' in text
    assert 'aria-current="page">H100<' in text


ALPHA_PR = "https://github.com/example/kernelbench-board/pull/7"


def test_every_local_link_resolves_and_nothing_is_external(site):
    pages = sorted(site.rglob("*.html"))
    assert len(pages) >= 15
    for path in pages:
        page = parse(path)
        for link in page.links:
            if link == ALPHA_PR:
                continue  # the one navigation link out: the pull request alpha's submission names
            assert not re.match(r"^(https?:)?//", link), f"{path}: external reference {link}"
            if link.startswith("data:"):
                continue
            target, _, frag = link.partition("#")
            dest = (path.parent / target).resolve() if target else path
            assert dest.is_file(), f"{path.relative_to(site)}: broken link {link}"
            if frag:
                assert frag in parse(dest).ids, f"{path.relative_to(site)}: missing anchor {link}"
        assert page.scripts == ["../" * (len(path.relative_to(site).parts) - 1) + "static/sort.js"]
    css = (site / "static" / "style.css").read_text()
    assert "@import" not in css and "url(" not in css
    assert "http" not in (site / "static" / "sort.js").read_text()


def test_untrusted_text_is_escaped(site):
    for rel in ("index.html", "entries/beta__H100.html", "problems/level1_1.html"):
        text = (site / rel).read_text()
        assert "<script>alert" not in text, rel
        assert "&lt;script&gt;alert" in text, rel
    entry = (site / "entries" / "beta__H100.html").read_text()
    assert "# &lt;/code&gt;&lt;/pre&gt;&lt;script&gt;" in entry
    assert entry.count("<script") == 1  # only the local sort.js


def test_entry_page_shows_verdicts_speedups_and_sources(site):
    text = (site / "entries" / "alpha__H100.html").read_text()
    page = parse(site / "entries" / "alpha__H100.html")
    for key in ("level_1_problem_1_sample_0", "level_2_problem_1_sample_0"):
        assert f"src-{key}" in page.ids
    assert ">incorrect<" in text and ">missing<" in text and ">correct<" in text
    assert "2.00×" in text and "0.50×" in text and "4.00×" in text
    assert "max abs error 0.5" in text
    assert "tl.store(out_ptr + offs" in text
    assert 'href="alpha__A100.html"' in text  # the same entry on the other GPU
    gamma = (site / "entries" / "gamma__H100.html").read_text()
    assert "excluded: caches outputs" in gamma
    beta = (site / "entries" / "beta__H100.html").read_text()
    assert "speedup above 10x" in beta


def test_problem_pages_rank_best_kernels(site):
    text = (site / "problems" / "level1_1.html").read_text()
    h100 = text[text.index("Best kernels on H100"):]
    order = [m.group(1) for m in re.finditer(r'<tr class="\w+" data-entry="(\w+)"', h100)]
    assert order == ["beta", "alpha", "gamma"]  # 4x, 2x, then the excluded one
    assert "class Model(nn.Module)" in text
    assert "Best kernels on A100" in text and "Best kernels on H100" in text
    listing = (site / "problems" / "index.html").read_text()
    assert listing.count('href="../problems/level') == 6
    empty = (site / "problems" / "level2_2.html").read_text()
    assert "No entry has a correct kernel" in empty


def test_fast_p_chart_svg():
    svg = str(fast_p_chart([Series("A <b>", [1.0, 0.5, 0.5, 0.0]), Series("B", [0.5, 0.5, 0.25, 0.25])],
                           [0.0, 1.0, 2.0, 3.0], width=400, height=200))
    assert svg.startswith("<svg") and svg.endswith("</svg>")
    assert "A &lt;b&gt;" in svg and "<b>" not in svg
    lines = re.findall(r'<polyline[^>]*points="([^"]+)"', svg)
    assert len(lines) == 2
    for pts in lines:
        for pair in pts.split():
            x, y = map(float, pair.split(","))
            assert 0 <= x <= 400 and 0 <= y <= 200
    # series A: 100% at p=0 (top of plot), a step down at p=1 drawn as two points at the same x
    first = [tuple(map(float, p.split(","))) for p in lines[0].split()]
    assert first[0][1] < first[-1][1]
    assert first[1][0] == first[2][0] and first[1][1] != first[2][1]


def test_chart_on_ranking_page_has_one_line_per_ranked_entry(site):
    page = parse(site / "index.html")
    assert [p["data-label"] for p in page.polylines] == [F.HOSTILE_NAME, "Alpha Model"]


def test_build_is_deterministic_and_guards_its_output_folder(tmp_path, site):
    data = site.parent / "data"
    build_site(data, tmp_path / "a")
    build_site(data, tmp_path / "b")

    def digest(root: Path) -> dict[str, str]:
        return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
                for p in sorted(root.rglob("*")) if p.is_file()}

    assert digest(tmp_path / "a") == digest(tmp_path / "b")
    build_site(data, tmp_path / "a")  # rebuilding its own folder is fine
    foreign = tmp_path / "mine"
    foreign.mkdir()
    (foreign / "notes.txt").write_text("keep me")
    with pytest.raises(SiteError, match="was not built by"):
        build_site(data, foreign)
    assert (foreign / "notes.txt").read_text() == "keep me"
    with pytest.raises(SiteError, match="index.json does not exist"):
        build_site(tmp_path / "nothing", tmp_path / "c")


def test_cli_build(tmp_path, site, capsys):
    code = kb_main(["leaderboard", "build", "--data", str(site.parent / "data"), "--out", str(tmp_path / "out")])
    assert code == 0
    out = capsys.readouterr().out
    assert "entries" in out and "site written to" in out
    assert (tmp_path / "out" / "index.html").exists()
    assert kb_main(["leaderboard", "build", "--data", str(tmp_path / "none"), "--out", str(tmp_path / "o2")]) == 2
    assert "run 'kernelbench leaderboard aggregate' first" in capsys.readouterr().err


def test_empty_board_builds(tmp_path):
    from leaderboard.aggregate import AggregateConfig, aggregate

    (tmp_path / "submissions").mkdir()
    F.write_submission(tmp_path / "submissions" / "waiting.json", F.submission_dict("Waiting Model"))
    aggregate(F.problems(), AggregateConfig(submissions_dir=tmp_path / "submissions",
                                            evaluations_dir=tmp_path / "evaluations", baselines_dir=tmp_path,
                                            exclusions_path=None, out_dir=tmp_path / "data"))
    build_site(tmp_path / "data", tmp_path / "site")
    text = (tmp_path / "site" / "index.html").read_text()
    assert "No entry has been evaluated yet (6 problems in the set)" in text
    assert "Waiting Model" in text and 'id="ranking"' not in text
    assert not (tmp_path / "site" / "gpu").exists()
    assert (tmp_path / "site" / "problems" / "level2_2.html").exists()


def test_every_board_is_downloadable_as_csv_and_json_with_the_tables_figures(site):
    import csv
    import io

    for gpu, scope in (("H100", "index"), ("H100", "level1"), ("H100", "level2"), ("A100", "index")):
        html = (site / "gpu" / gpu / f"{scope}.html").read_text()
        assert f'href="{scope}.csv" download' in html and f'href="{scope}.json" download' in html
        board = json.loads((site / "gpu" / gpu / f"{scope}.json").read_text())
        rows = list(csv.DictReader(io.StringIO((site / "gpu" / gpu / f"{scope}.csv").read_text())))
        table = [r["entry"] for r in parse(site / "gpu" / gpu / f"{scope}.html").rows]
        assert [r["entry"] for r in board["rows"]] == table == [r["entry"] for r in rows]
        assert board["gpu"] == gpu and list(rows[0]) == board["columns"]
    board = json.loads((site / "gpu" / "H100" / "index.json").read_text())
    alpha = next(r for r in board["rows"] if r["entry"] == "alpha")
    # unrounded figures: alpha's full-deck geomean is 4^(1/6) over 6 problems, fast_1 2/6
    assert alpha["fulldeck"] == pytest.approx(4 ** (1 / 6), abs=1e-6) and alpha["fast_1"] == pytest.approx(2 / 6,
                                                                                                           abs=1e-6)
    assert (alpha["model"], alpha["date"], alpha["rank"]) == ("alpha-llm-7b", "2026-01-15", 2)
    assert alpha["link"] == "https://github.com/example/kernelbench-board/pull/7"
    beta = next(r for r in board["rows"] if r["entry"] == "beta")
    assert beta["link"] == "files/beta.json" and (site / beta["link"]).is_file()
