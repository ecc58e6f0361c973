"""The data/ files as models: what aggregation writes reads back unchanged, one ranking for every board,
older data still builds, and a malformed file is a one-line error naming the file and the field."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kernelbench.problems import load_builtin
from leaderboard.aggregate import AggregateConfig, aggregate
from leaderboard.data_model import (
    Audit,
    BoardIndex,
    IndexEntry,
    KernelSources,
    ProblemFile,
    ResultsFile,
    ScoreData,
    Scores,
    rank_entries,
    read_data_file,
)
from leaderboard.errors import SiteError
from leaderboard.site import build_site

ROOT = Path(__file__).resolve().parents[1]
DEMO = ROOT / "examples" / "demo-board"


@pytest.fixture(scope="module")
def demo_data(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("demo") / "data"
    aggregate(load_builtin(), AggregateConfig(
        submissions_dir=DEMO / "submissions", evaluations_dir=DEMO / "data" / "evaluations",
        baselines_dir=ROOT / "baselines", exclusions_path=None, out_dir=out))
    return out


def _kind(path: Path, data: Path):
    if path == data / "index.json":
        return BoardIndex
    return {"results": ResultsFile, "problems": ProblemFile, "kernels": KernelSources}[path.parent.name]


def test_every_file_aggregate_writes_reads_back_as_its_model_unchanged(demo_data):
    files = sorted(demo_data.rglob("*.json"))
    assert {p.parent.name for p in files} == {"data", "results", "problems", "kernels"}
    for path in files:
        kind = _kind(path, demo_data)
        value = read_data_file(path, kind)
        dumped = value if kind is KernelSources else value.model_dump(mode="json")
        assert dumped == json.loads(path.read_text()), path.name


def _entry(name: str, overall: float, level1: float, status: str = "clean") -> IndexEntry:
    def score(fd: float) -> ScoreData:
        return ScoreData(n_problems=2, n_attempted=2, n_compiled=2, n_correct=2, fast_p={"fast_1": 1.0},
                         geomean_speedup=fd, fulldeck_geomean=fd, compile_rate=1.0, correctness_rate=1.0)

    return IndexEntry(entry=name, gpu="H100", display_name=name, backend="cuda",
                      audit=Audit(status=status, reasons=[]),
                      scores=Scores(overall=score(overall), levels={"1": score(level1)}),
                      speedup_basis="baseline eager", n_kernels=2, results_file="r", kernels_file="k")


def test_one_ranking_excluded_last_ties_share_a_rank_per_scope():
    entries = [_entry("d", 1.0, 3.0), _entry("b", 2.0, 1.0), _entry("x", 9.0, 9.0, "excluded"),
               _entry("c", 2.0, 2.0, "flagged"), _entry("a", 3.0, 0.5)]
    overall = [(e.entry, rank) for e, rank in rank_entries(entries)]
    assert overall == [("a", 1), ("b", 2), ("c", 2), ("d", 4), ("x", None)]
    level1 = [(e.entry, rank) for e, rank in rank_entries(entries, "1")]
    assert level1 == [("d", 1), ("c", 2), ("b", 3), ("a", 4), ("x", None)]


def test_a_separate_level_ranks_only_the_entries_on_its_board():
    """Official level 4: scored in ``scores.separate`` only for entries with a kernel there; the others are
    not on that board (not ranked last), and the overall is untouched by it."""
    entries = [_entry("a", 3.0, 1.0), _entry("b", 2.0, 1.0), _entry("c", 1.0, 1.0, "excluded"), _entry("d", 1.0, 1.0)]
    for e, l4 in (("a", 1.5), ("c", 9.0), ("d", 2.0)):
        entry = next(x for x in entries if x.entry == e)
        entry.scores.separate["4"] = entry.score("1").model_copy(update={"fulldeck_geomean": l4})
        entry.separate_speedup_basis["4"] = "in-session reference"
    assert [(e.entry, rank) for e, rank in rank_entries(entries, "4")] == [("d", 1), ("a", 2), ("c", None)]
    assert [(e.entry, rank) for e, rank in rank_entries(entries)] == [("a", 1), ("b", 2), ("d", 3), ("c", None)]
    b = entries[1]
    assert not b.on_board("4") and b.on_board("1") and b.on_board()
    with pytest.raises(KeyError):
        b.score("4")
    assert entries[0].speedup_basis_for("4") == "in-session reference" and b.speedup_basis_for("4") == "baseline eager"


def test_aggregate_stores_the_overall_rank_the_site_shows(demo_data):
    index = read_data_file(demo_data / "index.json", BoardIndex)
    for gpu in index.gpus:
        mine = [e for e in index.entries if e.gpu == gpu]
        assert [(e.entry, e.rank) for e in mine] == [(e.entry, rank) for e, rank in rank_entries(mine)]


def _strip_newer_fields(data: Path) -> None:
    """What an earlier aggregation wrote: no problem set, intervals, timing flags or infrastructure counts."""
    def scores(s: dict) -> None:
        for block in [s["overall"], *s["levels"].values()]:
            for key in ("fast_p_significant", "geomean_ci95", "n_infrastructure"):
                block.pop(key)

    index = json.loads((data / "index.json").read_text())
    index.pop("problem_set")
    for e in index["entries"]:
        scores(e["scores"])
    (data / "index.json").write_text(json.dumps(index))
    for path in (data / "results").glob("*.json"):
        res = json.loads(path.read_text())
        scores(res["scores"])
        for row in res["problems"]:
            for key in ("speedup_ci95", "timing_flags", "host_share", "own_kernel_share"):
                row.pop(key)
        path.write_text(json.dumps(res))


def test_data_aggregated_by_an_earlier_version_still_builds(demo_data, tmp_path):
    import shutil

    old = tmp_path / "data"
    shutil.copytree(demo_data, old)
    _strip_newer_fields(old)
    build_site(old, tmp_path / "site")
    front = (tmp_path / "site" / "index.html").read_text()
    assert "Worked solutions (CUDA)" in front and "builtin" in front
    board = json.loads((tmp_path / "site" / "index.json").read_text())
    assert [r["fast_1_sig"] for r in board["rows"]] == [None, None]
    assert [r["geomean_lo"] for r in board["rows"]] == [None, None]


def test_a_malformed_data_file_is_one_line_naming_the_file_and_the_field(demo_data, tmp_path):
    import shutil

    bad = tmp_path / "data"
    shutil.copytree(demo_data, bad)
    index = json.loads((bad / "index.json").read_text())
    index["entries"][1]["scores"]["overall"]["fulldeck_geomean"] = "fast"
    (bad / "index.json").write_text(json.dumps(index))
    with pytest.raises(SiteError, match=r"index\.json: entries\.1\.scores\.overall\.fulldeck_geomean: ") as e:
        build_site(bad, tmp_path / "site")
    assert "\n" not in str(e.value)
    (bad / "index.json").write_text("[]")
    with pytest.raises(SiteError, match=r"index\.json: \(top level\): "):
        build_site(bad, tmp_path / "site")
