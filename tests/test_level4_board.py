"""Official level 4 as a board of its own: loaded but never run, validated, evaluated, scored, shown.

The official set is stood in for by the leaderboard fixture problems (levels 1 and 2, written for the
tests) plus a level 4 of two problems: one shaped like the official ones (a tiny GPT-2 loaded with
``from_pretrained`` at import, and a trace left whenever its module body runs) and one plain module.
A manifest written here pins them as the official set (``KERNELBENCH_MANIFEST``). Numbers follow from
the results' raw samples by hand arithmetic. Nothing reaches the network.
"""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import pytest
from fixtures.hub_models import (
    IMPORT_MARKER_ENV,
    MARKED_HUB_PROBLEM,
    MODEL_ID,
    TRITON_HUB_KERNEL,
    hub_cache_with_tiny_model,
)
from fixtures.leaderboard import factory as F
from fixtures.level4 import (
    HUB_NAME,
    PLAIN_L4,
    TRITON_SCALE,
    board,
    config,
    entry,
    l4,
    pin_official,
    write_official,
)

from kernelbench.cli.main import main as kb_main
from kernelbench.evaluation.settings import EvalJob, EvalSettings
from kernelbench.problems import load_board_problems, load_builtin, load_directory, separate_board_levels
from kernelbench.problems.contract import identity_candidate
from kernelbench.problems.identity import MANIFEST_ENV, identify
from leaderboard.aggregate import aggregate
from leaderboard.data_model import BoardIndex, read_data_file
from leaderboard.site import build_site
from leaderboard.validate import validate_files

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture
def official(tmp_path, monkeypatch) -> Path:
    """The stand-in official set, pinned; runs of its level-4 hub problem are traced to ``marker``."""
    folder = write_official(tmp_path)
    monkeypatch.setenv(MANIFEST_ENV, str(pin_official(folder, tmp_path / "manifest.json")))
    monkeypatch.setenv(IMPORT_MARKER_ENV, str(tmp_path / "marker"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.delenv("HF_HUB_CACHE", raising=False)
    return folder


def ran(folder: Path) -> bool:
    """Whether the level-4 hub problem's module body has run (its trace file exists)."""
    return (folder.parent / "marker").exists()


# ---------------------------------------------------------------------------------------- the problems
def test_the_official_board_loads_level_4_for_a_board_of_its_own_and_never_runs_it(official, tmp_path):
    problems = load_board_problems("kernelbench", official)
    assert problems.count_by_level() == {1: 4, 2: 2, 4: 2}
    assert separate_board_levels(problems) == (4,)
    assert problems.get(4, 1).requirements == ("transformers",)
    # The built-in suite's level 4 builds its models offline from a config: in the demo's overall.
    assert separate_board_levels(load_builtin()) == ()
    # Problems that do not hash as the pinned set are no official board, level 4 or not.
    other = tmp_path / "other"
    shutil.copytree(official, other)
    (other / "level4" / "2_Scale_test.py").write_text(PLAIN_L4.replace("3.0", "4.0"))
    assert separate_board_levels(load_directory(other)) == ()
    assert separate_board_levels(F.problems()) == ()
    assert not ran(official)
    # ... and the trace works: running the problem's module body leaves it (here only its first lines).
    exec(MARKED_HUB_PROBLEM.split("\nimport torch")[0], {})
    assert ran(official)


def test_the_ci_problem_check_counts_level_4_on_its_own_board_without_running_it(official, capsys):
    sys.path.insert(0, str(ROOT / "scripts" / "ci"))
    try:
        import kb_ci
    finally:
        sys.path.remove(str(ROOT / "scripts" / "ci"))
    assert kb_ci.main(["problems", "--source", "kernelbench", "--path", str(official)]) == 0
    out = capsys.readouterr().out
    assert "problem set kernelbench@test-rev-l4: 8 problems (level 1: 4, level 2: 2, level 4: 2 (own board))" in out
    assert not ran(official)


def test_the_shipped_manifest_pins_official_level_4_beside_levels_1_to_3(monkeypatch):
    from kernelbench.problems.identity import KERNELBENCH_REVISION, official_manifest

    monkeypatch.delenv(MANIFEST_ENV, raising=False)
    pinned = official_manifest()
    assert pinned.revision == KERNELBENCH_REVISION
    level4 = sorted(ref for ref in pinned.hashes if ref.startswith("level4/"))
    assert sorted(int(ref.split("/")[1].split("_")[0]) for ref in level4) == list(range(1, 21))
    assert "level4/16_gpt2_bs1_seq1023.py" in level4 and len(pinned.restricted([1, 2, 3]).hashes) == 250


def _official_checkout() -> Path | None:
    """A local copy of KernelBench's KernelBench/ folder at the pinned revision (never committed), if any."""
    import os

    for candidate in (os.environ.get("KB_OFFICIAL"), str(ROOT / "kb_official" / "KernelBench")):
        if candidate and (Path(candidate) / "level4").is_dir():
            return Path(candidate)
    return None


@pytest.mark.skipif(_official_checkout() is None,
                    reason="needs KernelBench's problems at the pinned revision (KB_OFFICIAL or kb_official/KernelBench)")
def test_the_real_level_4_hashes_as_pinned_and_every_problem_names_the_model_it_loads(monkeypatch, tmp_path):
    from kernelbench.problems.hub import hub_needs

    monkeypatch.delenv(MANIFEST_ENV, raising=False)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    problems = load_board_problems("kernelbench", _official_checkout())  # refused unless every hash is pinned
    assert problems.count_by_level() == {1: 100, 2: 100, 3: 50, 4: 20}
    assert separate_board_levels(problems) == (4,)
    for p in problems.select(levels=[4]):
        needs = hub_needs(p.code)
        assert needs.models and not needs.unresolved, p.name  # the trusted fetch knows what to fetch


# ---------------------------------------------------------------------------------------- validation
def test_validation_accepts_level_4_kernels_notes_the_hub_and_reports_no_missing_board(official, tmp_path, capsys):
    problems = load_board_problems("kernelbench", official)
    with_l4 = F.write_submission(tmp_path / "with_l4.json", F.submission_dict("With L4", kernels={
        "level_1_problem_1_sample_0": F.kernel("triton_relu"),
        "level_4_problem_1_sample_0": F.kernel("triton_relu")}))
    without = F.write_submission(tmp_path / "without.json", F.submission_dict("Without L4", kernels={
        "level_1_problem_1_sample_0": F.kernel("triton_relu")}))
    report = validate_files([with_l4, without], problems, use_guard=False)
    assert report.passed and report.separate_levels == ["4"]
    a, b = report.files
    notes = {i.code: i for i in a.issues if i.key == "level_4_problem_1_sample_0"}
    assert MODEL_ID in notes["needs-hub"].message and "HF_HUB_CACHE" in notes["needs-hub"].message
    # an entrant's missing level-4 kernel counts as incorrect there; no level-4 kernel at all: not on that board
    assert a.missing == {"1": [2, 3, 4], "2": [1, 2], "4": [2]}
    assert any(i.code == "missing-problems" and "on the level-4 board" in i.message for i in a.issues)
    assert "4" not in b.missing and b.missing["1"] == [2, 3, 4]
    (info,) = [i for i in b.issues if i.code == "separate-board"]
    assert info.severity == "info" and "not on the level-4 board" in info.message

    md = report.to_markdown()
    assert "| Level 1 | Level 2 | Level 4 (own board) |" in md
    assert "| `with_l4.json` | With L4 | 2 | 1/4 | 0/2 | 1/2 |" in md
    assert "Level 4 is a board of its own" in md and "not part of the overall score" in md
    assert "- level 4 (on its own board): 1 of 2 — 2" in md

    # the CLI, on the official board by default
    assert kb_main(["leaderboard", "validate", str(with_l4), "--no-guard", "--path", str(official)]) == 0
    out = capsys.readouterr().out
    assert "level_4_problem_1_sample_0: info:" in out and "[needs-hub]" in out
    assert "L1 1/4, L2 0/2, L4 1/2 (own board)" in out
    assert not ran(official)


# ---------------------------------------------------------------------------------------- aggregation
def test_level_4_is_scored_and_ranked_apart_from_the_overall(official, tmp_path):
    baseline_file = board(tmp_path, official)
    problems = load_board_problems("kernelbench", official)
    result = aggregate(problems, config(tmp_path))
    index = read_data_file(tmp_path / "data" / "index.json", BoardIndex)
    assert index.levels == {"1": 4, "2": 2} and index.separate_levels == {"4": 2}
    assert len(index.problems) == 8  # level-4 problems have their pages too
    e = {x.entry: x for x in index.entries}

    # The overall is levels 1-2 only (6 problems), against the baseline (1 ms everywhere).
    assert e["alpha"].scores.overall.n_problems == 6 and e["alpha"].scores.overall.n_correct == 1
    assert e["alpha"].scores.overall.fulldeck_geomean == round(2 ** (1 / 6), 6)
    assert e["beta"].scores.overall.fulldeck_geomean == round(4 ** (1 / 6), 6)
    assert e["gamma"].scores.overall.n_correct == 0 and e["gamma"].scores.overall.fulldeck_geomean == 1.0
    assert set(e["alpha"].scores.levels) == {"1", "2"}
    assert [(x.entry, x.rank) for x in index.entries] == [("beta", 1), ("alpha", 2), ("gamma", 3)]
    assert e["alpha"].speedup_basis == "baseline eager"

    # Level 4: only entrants; a missing kernel among them is incorrect; in-session reference (no baseline times).
    assert not e["beta"].on_board("4") and e["beta"].scores.separate == {}
    a4, g4 = e["alpha"].score("4"), e["gamma"].score("4")
    assert (a4.n_problems, a4.n_attempted, a4.n_correct) == (2, 1, 1)
    assert a4.fulldeck_geomean == round(2 ** (1 / 2), 6) and a4.fast_p["fast_1"] == 0.5
    assert (g4.n_problems, g4.n_attempted, g4.n_correct) == (2, 2, 1) and g4.fulldeck_geomean == 2.0
    assert e["alpha"].separate_speedup_basis == {"4": "in-session reference"}
    assert e["alpha"].speedup_basis_for("4") == "in-session reference"
    assert [(r.entry, r.rank, r.speedup_basis) for r in result.separate[4]] == [
        ("gamma", 1, "in-session reference"), ("alpha", 2, "in-session reference")]
    assert [(r.entry, r.rank) for r in result.rows] == [("beta", 1), ("alpha", 2), ("gamma", 3)]

    detail = json.loads((tmp_path / "data" / "results" / "alpha__H100.json").read_text())
    rows = {r["key"]: r for r in detail["problems"]}
    assert rows["level_4_problem_1"]["verdict"] == "correct" and rows["level_4_problem_1"]["speedup"] == 2.0
    assert rows["level_4_problem_2"]["verdict"] == "missing" and rows["level_4_problem_1"]["baseline_ms"] is None
    assert rows["level_1_problem_1"]["baseline_ms"] == 1.0
    assert dict(zip(detail["fast_p_curve"]["p"], detail["fast_p_curve"]["level4"]))[1.5] == 0.5
    beta = json.loads((tmp_path / "data" / "results" / "beta__H100.json").read_text())
    assert not any(r["level"] == 4 for r in beta["problems"]) and "level4" not in beta["fast_p_curve"]
    best = json.loads((tmp_path / "data" / "problems" / "level4_1.json").read_text())["best"]["H100"]
    assert [(b["entry"], b["speedup"]) for b in best] == [("gamma", 4.0), ("alpha", 2.0)]

    # A baseline that does have level-4 times serves the level-4 board too (2 ms: alpha 4x, gamma 8x).
    body = json.loads(baseline_file.read_text())
    body["level4"] = {f"{HUB_NAME}.py": {"mean": 2.0, "median": 2.0, "num_trials": 3},
                      "2_Scale_test.py": {"mean": 2.0, "median": 2.0, "num_trials": 3}}
    baseline_file.write_text(json.dumps(body))
    aggregate(problems, config(tmp_path))
    e = {x.entry: x for x in read_data_file(tmp_path / "data" / "index.json", BoardIndex).entries}
    assert e["alpha"].separate_speedup_basis == {"4": "baseline eager"}
    assert e["alpha"].score("4").fulldeck_geomean == round(4 ** (1 / 2), 6)
    assert e["alpha"].scores.overall.fulldeck_geomean == round(2 ** (1 / 6), 6)  # the overall did not move
    assert not ran(official)


def test_the_cli_prints_the_level_4_board_apart(official, tmp_path, monkeypatch, capsys):
    board(tmp_path, official)
    monkeypatch.chdir(tmp_path)
    assert kb_main(["leaderboard", "aggregate", "--path", str(official), "--baselines-dir", "baselines",
                    "--exclusions", "none.json"]) == 0
    out = capsys.readouterr().out
    overall, level4 = out.split("level 4, a board of its own (not in the overall)")
    assert "beta" in overall and "gamma" in overall
    assert "against in-session reference" in level4 and "beta" not in level4.split("wrote")[0]
    assert level4.index("gamma") < level4.index("alpha")


# ---------------------------------------------------------------------------------------- the site
@pytest.fixture
def site(official, tmp_path) -> Path:
    board(tmp_path, official)
    aggregate(load_board_problems("kernelbench", official), config(tmp_path))
    build_site(tmp_path / "data", tmp_path / "site")
    return tmp_path / "site"


def test_the_level_4_page_is_its_own_board_with_its_own_downloads(site):
    page = (site / "gpu" / "H100" / "level4.html").read_text()
    assert "<title>Level 4 (Hugging Face models), not in the overall score · H100" in page
    assert "A board of its own, not in the overall score." in page
    assert 'data-entry="gamma"' in page and 'data-entry="alpha"' in page and 'data-entry="beta"' not in page
    assert page.index('data-entry="gamma"') < page.index('data-entry="alpha"')
    assert "Not attempted (no level-4 kernel, so not listed): Beta." in page
    assert "No baseline file has level-4 times" in page and "speedups against in-session reference" in page
    assert "2 problems" in page and ">1/2<" in page
    assert "Level 4 (Hugging Face models) · own board</a>" in page

    board = json.loads((site / "gpu" / "H100" / "level4.json").read_text())
    assert board["board"] == "Level 4 (Hugging Face models), not in the overall score"
    assert board["in_overall"] is False and board["n_problems"] == 2
    assert board["speedup_basis"] == "in-session reference"
    assert [(r["entry"], r["rank"], r["fulldeck"]) for r in board["rows"]] == [
        ("gamma", 1, 2.0), ("alpha", 2, round(2 ** 0.5, 6))]
    csv_lines = (site / "gpu" / "H100" / "level4.csv").read_text().splitlines()
    assert csv_lines[0].startswith("rank,entry,") and [ln.split(",")[1] for ln in csv_lines[1:]] == ["gamma", "alpha"]

    overall = json.loads((site / "gpu" / "H100" / "index.json").read_text())
    assert overall["in_overall"] is True and overall["n_problems"] == 6
    assert [r["entry"] for r in overall["rows"]] == ["beta", "alpha", "gamma"]


def test_the_overall_links_the_level_4_board_and_says_it_is_apart(site):
    front = (site / "index.html").read_text()
    assert "6 problems" in front and "speedups against baseline eager" in front
    assert 'Also ranked on a board of its own, not in the overall score: <a href="gpu/H100/level4.html">' \
           "Level 4 (Hugging Face models)</a>." in front
    for name in ("alpha", "beta", "gamma"):
        assert f'data-entry="{name}"' in front
    assert "A board of its own" not in (site / "gpu" / "H100" / "level1.html").read_text()
    alpha = (site / "entries" / "alpha__H100.html").read_text()
    assert "<td>Level 4 · own board</td>" in alpha
    assert "Level 4 (Hugging Face models) is a board of its own, not in the overall score: rank\n2 of 2" in alpha and "speedups against in-session reference." in alpha
    beta = (site / "entries" / "beta__H100.html").read_text()
    assert "Level 4 (Hugging Face models)" not in beta
    problem = (site / "problems" / "level4_1.html").read_text()
    assert "Level 4 (Hugging Face models): own board, not in the overall score" in problem
    assert "Level 4 (Hugging Face models): a board of its own" in (site / "problems" / "index.html").read_text()


def test_an_empty_level_4_board_says_so(official, tmp_path):
    problems = load_board_problems("kernelbench", official)
    entry(tmp_path, "beta", ["level_1_problem_1_sample_0"], [F.result(1, 1, candidate_ms=0.25)],
          problem_set=identify(problems).to_dict())
    aggregate(problems, config(tmp_path))
    build_site(tmp_path / "data", tmp_path / "site")
    page = (tmp_path / "site" / "gpu" / "H100" / "level4.html").read_text()
    assert "No entry evaluated on H100 has submitted level-4 kernels yet." in page
    assert 'data-entry="beta"' not in page
    assert json.loads((tmp_path / "site" / "gpu" / "H100" / "level4.json").read_text())["rows"] == []


# ---------------------------------------------------------------------------------------- the CI comment
def test_the_evaluation_comment_shows_level_4_apart_with_its_own_rank(official, tmp_path):
    sys.path.insert(0, str(ROOT / "scripts" / "ci"))
    try:
        from ci_comments import RunContext, evaluation_comment
        from ci_score import score_new_bundles
    finally:
        sys.path.remove(str(ROOT / "scripts" / "ci"))
    base = tmp_path / "base"
    board(base, official)
    (base / "baselines").rename(base / "baselines-kernelbench")
    (base / "baselines").mkdir()
    (base / "baselines-kernelbench").rename(base / "baselines" / "kernelbench")
    new = tmp_path / "pr"
    problems = load_board_problems("kernelbench", official)
    entry(new, "delta", ["level_1_problem_2_sample_0", "level_4_problem_2_sample_0"],
          [F.result(1, 2, candidate_ms=0.5), l4(2, candidate_ms=0.125)], problem_set=identify(problems).to_dict())
    (score,) = score_new_bundles(problems, base, new / "submissions", new / "data" / "evaluations")
    assert score.entry == "delta" and score.overall["n_problems"] == 6 and set(score.levels) == {"1", "2"}
    four = score.separate["4"]
    assert (four["rank"], four["n_ranked"], four["speedup_basis"]) == (1, 3, "in-session reference")
    assert four["score"]["fulldeck_geomean"] == round(8 ** 0.5, 6)
    body = evaluation_comment([score], RunContext(), problems.source)
    assert "| level 4 (own board, not in overall) | 2 | 1 | 1 (50.0%) |" in body
    assert ("Level 4 is a board of its own (Hugging Face models), not in the overall score: rank on `H100` there "
            "once merged: **#1 of 3**; speedups against in-session reference.") in body
    assert "| `level_4_problem_2_sample_0` | correct |" in body


# ---------------------------------------------------------------------------------------- evaluation
def test_the_local_runner_gives_a_level_4_kernel_a_clear_result_when_the_cache_lacks_its_model(official, tmp_path,
                                                                                              monkeypatch):
    from kernelbench.runners.local import HUB_MISSING_TYPE, LocalRunner

    problem = load_board_problems("kernelbench", official).get(4, 1)
    job = EvalJob(problem=problem, candidate_source=identity_candidate(problem.code),
                  settings=EvalSettings(backend="torch", correctness_trials=1, measure_timing=False, device="cpu"))
    seen: list[int] = []
    (r,) = LocalRunner().run([job], on_result=lambda i, res: seen.append(i), progress=False)
    assert seen == [0] and r.infrastructure_failure and not r.correct
    assert r.error.type == HUB_MISSING_TYPE and r.key == "level_4_problem_1_sample_0"
    assert r.error.message.startswith(f"level 4 problem 1 ({HUB_NAME}) loads {MODEL_ID} from the Hugging Face hub")
    assert "set HF_HUB_CACHE to a hub cache holding them" in r.error.message and "--runner modal" in r.error.message

    empty = tmp_path / "empty-cache"
    empty.mkdir()
    monkeypatch.setenv("HF_HUB_CACHE", str(empty))
    (r,) = LocalRunner().run([job], progress=False)
    assert r.infrastructure_failure and f"which the hub cache HF_HUB_CACHE={empty} lacks" in r.error.message
    assert f"fetch_models(['{MODEL_ID}'], '{empty}')" in r.error.message
    assert not ran(official)  # nothing was started


@pytest.mark.slow
def test_leaderboard_evaluate_runs_level_4_from_the_local_hub_cache_and_it_lands_on_its_board(official, tmp_path,
                                                                                             monkeypatch, capsys):
    """The real evaluator on the CPU: without the model in HF_HUB_CACHE the level-4 kernel gets a per-kernel
    result saying so and no bundle is written; with it, the same command resumes and evaluates it."""
    pytest.importorskip("transformers")
    # The evaluation does run the problem, in workers whose file system is read-only: no trace file here.
    monkeypatch.delenv(IMPORT_MARKER_ENV)
    problems = load_board_problems("kernelbench", official)
    sub = F.write_submission(tmp_path / "submissions" / "alpha.json", F.submission_dict("Alpha", kernels={
        "level_1_problem_1_sample_0": F.kernel("triton_relu"),
        "level_4_problem_1_sample_0": TRITON_HUB_KERNEL, "level_4_problem_2_sample_0": TRITON_SCALE}))
    evaluations = tmp_path / "data" / "evaluations"
    args = ["leaderboard", "evaluate", str(sub), "--runs-dir", str(tmp_path / "runs"), "--results-dir",
            str(evaluations), "--correctness-trials", "1", "--path", str(official)]
    assert kb_main(args) == 1
    err = capsys.readouterr().err
    assert (f"no verdict for level_4_problem_1_sample_0: infrastructure: HubModelMissing: level 4 problem 1 "
            f"({HUB_NAME}) loads {MODEL_ID} from the Hugging Face hub") in err
    assert "run the same command again to resume" in err and not evaluations.exists()

    monkeypatch.setenv("HF_HUB_CACHE", str(hub_cache_with_tiny_model(tmp_path / "hf")))
    assert kb_main(args) == 0
    assert "alpha on CPU: 1 evaluated now, 2 reused from earlier runs" in capsys.readouterr().out
    bundle = json.loads((evaluations / "alpha__CPU.json").read_text())
    assert sorted((r["level"], r["problem_id"], r["correct"]) for r in bundle["results"]) == [
        (1, 1, True), (4, 1, True), (4, 2, True)]
    assert bundle["problem_set"]["name"] == "kernelbench"
    assert f"level4/{HUB_NAME}.py" in bundle["problem_set"]["hashes"]

    aggregate(problems, config(tmp_path))
    (e,) = read_data_file(tmp_path / "data" / "index.json", BoardIndex).entries
    assert e.scores.overall.n_problems == 6 and e.scores.overall.n_correct == 1
    assert e.score("4").n_correct == 2 and e.score("4").n_problems == 2


def test_the_comment_renderer_escapes_level_names_from_an_untrusted_report():
    """The comment job renders validate.json from the pull request's own run: its level keys are data."""
    from leaderboard.markdown import render_markdown

    bad = "4<img src=x onerror=alert(1)>|"
    md = render_markdown({"problem_source": "x", "separate_levels": [bad, 7], "files": [{
        "path": "submissions/a.json", "n_kernels": 1, "kernels_per_level": {bad: 1},
        "problems_per_level": {bad: 2}, "missing": {bad: [2]}, "issues": []}]})
    assert "<img" not in md and "&lt;img" in md
    assert "| Level 4&lt;img src=x onerror=alert(1)&gt;\\| (own board) |" in md
    assert "- level 4&lt;img src=x onerror=alert(1)&gt;\\| (on its own board): 1 of 2 — 2" in md
    assert render_markdown({"files": [], "separate_levels": "4"}).startswith("## ✅")  # not a list: ignored
