"""The committed boards: the demo board's data is what aggregation writes today; the official board
holds only its inputs, and only entries of the official set.

The demo board (examples/demo-board, built-in suite) is committed with its aggregated ``data/`` so the
site can be built offline; if the code that aggregates changes, or a problem changes, the committed
files must be regenerated, and this test says so.
"""

from __future__ import annotations

import json
from pathlib import Path

from kernelbench.problems import load_builtin
from kernelbench.problems.identity import BUILTIN
from leaderboard.aggregate import AggregateConfig, aggregate
from leaderboard.bundle import read_bundle

ROOT = Path(__file__).resolve().parents[1]
DEMO = ROOT / "examples" / "demo-board"


def _files(root: Path) -> dict[str, str]:
    return {str(p.relative_to(root)): p.read_text(encoding="utf-8") for p in sorted(root.rglob("*.json"))
            if "evaluations" not in p.parts}


def test_the_committed_demo_data_is_what_aggregate_writes(tmp_path):
    aggregate(load_builtin(), AggregateConfig(
        submissions_dir=DEMO / "submissions", evaluations_dir=DEMO / "data" / "evaluations",
        baselines_dir=ROOT / "baselines", exclusions_path=ROOT / "leaderboard" / "exclusions.json",
        out_dir=tmp_path / "data"))
    fresh, committed = _files(tmp_path / "data"), _files(DEMO / "data")
    assert sorted(fresh) == sorted(committed)
    stale = [name for name in fresh if fresh[name] != committed[name]]
    assert stale == [], (f"{stale[:3]} differ from what 'kernelbench leaderboard aggregate' writes: regenerate them "
                         "(examples/demo-board/README.md)")


def test_a_stale_flag_on_the_demo_board_is_a_result_for_another_version_of_its_problem():
    """The board says 'problem changed since evaluation' exactly where a result's recorded hash is not the
    problem's today, so the label is honest and disappears once the entry is evaluated again."""
    problems = {(p.level, p.problem_id): p for p in load_builtin()}
    index = json.loads((DEMO / "data" / "index.json").read_text())
    for entry in index["entries"]:
        bundle = read_bundle(DEMO / "data" / "evaluations" / f"{entry['entry']}__{entry['gpu']}.json")
        changed = sorted(f"level_{r.level}_problem_{r.problem_id}" for r in bundle.results
                         if r.problem_hash and not problems[(r.level, r.problem_id)].matches_hash(r.problem_hash))
        reasons = [r for r in entry["audit"]["reasons"] if r.startswith("problem(s) changed since evaluation")]
        if changed:
            assert reasons == [f"problem(s) changed since evaluation: {', '.join(changed)}"]
        else:
            assert reasons == []


def test_the_official_board_holds_no_bundle_of_another_set():
    """data/evaluations/ feeds the official board; the built-in worked solutions' bundle is the demo's."""
    for path in sorted((ROOT / "data" / "evaluations").glob("*.json")):
        bundle = read_bundle(path)
        assert bundle.problem_set is not None and bundle.problem_set["name"] == "kernelbench", path.name
        assert (ROOT / "submissions" / f"{bundle.entry}.json").is_file(), path.name
    demo_sets = {read_bundle(p).problem_source for p in (DEMO / "data" / "evaluations").glob("*.json")}
    assert demo_sets == {BUILTIN}
