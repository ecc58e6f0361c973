"""The committed boards: the demo board's data is what aggregation writes today; the official board
holds only its inputs, and only entries of the official set.

The demo board (examples/demo-board, built-in suite) is committed with its aggregated ``data/`` so the
site can be built offline; if the code that aggregates changes, or a problem changes, the committed
files must be regenerated, and this test says so.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from kbtesting import load_script

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
        assert bundle.problem_set is not None and bundle.problem_set.name == "kernelbench", path.name
        assert (ROOT / "submissions" / f"{bundle.entry}.json").is_file(), path.name
    demo_sets = {read_bundle(p).problem_source for p in (DEMO / "data" / "evaluations").glob("*.json")}
    assert demo_sets == {BUILTIN}


# ---------------------------------------------------------------- bundles from a recorded GPU run
MEASUREMENT = ROOT / "docs" / "measurements" / "eval_solutions_H100_kb-timing-3.json"


def _script():
    return load_script("solutions_bundle")


def test_the_committed_demo_bundles_are_the_recorded_gpu_run(tmp_path, monkeypatch):
    """Each committed bundle is what scripts/solutions_bundle.py writes from the recorded H100 run."""
    monkeypatch.chdir(ROOT)  # the bundle names the record by its path in the repository
    for backend in ("triton", "cuda"):
        sub = DEMO / "submissions" / f"worked_solutions_{backend}.json"
        assert _script().main(["--measurement", str(MEASUREMENT.relative_to(ROOT)), "--submission", str(sub),
                               "--out", str(tmp_path), "--evaluated-on", "2026-11-22"]) == 0
        name = f"worked_solutions_{backend}__H100.json"
        assert (tmp_path / name).read_text() == (DEMO / "data" / "evaluations" / name).read_text()


def _record(tmp_path: Path, edit) -> Path:
    data = json.loads(MEASUREMENT.read_text())
    edit(data)
    path = tmp_path / "record.json"
    path.write_text(json.dumps(data))
    return path


def _first_cuda(data: dict) -> dict:
    return next(s for s in data["solutions"] if s["backend"] == "cuda")


@pytest.mark.parametrize("case, message", [
    ("missing", "has no cuda result for level 1 problem 8"),
    ("stale-problem", "measured on an earlier version of 8_ReLU"),
    ("old-protocol", "timed under protocol 'kb-timing-2'"),
    ("other-source", "the measured source is not this kernel"),
])
def test_a_record_that_cannot_stand_for_the_entry_writes_nothing(tmp_path, monkeypatch, capsys, case, message):
    def edit(data):
        first = _first_cuda(data)
        if case == "missing":
            data["solutions"].remove(first)
        elif case == "stale-problem":
            first["result"]["problem_hash"] = "0" * 32
        elif case == "old-protocol":
            first["result"]["environment"]["timing_protocol"] = "kb-timing-2"
        else:
            first["source_sha256"] = "0" * 64

    record = _record(tmp_path, edit)
    sub = tmp_path / "worked_solutions_cuda.json"
    sub.write_text((DEMO / "submissions" / "worked_solutions_cuda.json").read_text())
    before = sub.read_text()
    rc = _script().main(["--measurement", str(record), "--submission", str(sub), "--out", str(tmp_path / "out"),
                         "--refresh-submission", "cuda"])
    err = capsys.readouterr().err
    assert rc == 2 and message in err and len(err.strip().splitlines()) == 1, err
    assert not (tmp_path / "out").exists() and sub.read_text() == before


def test_a_kernel_other_than_the_packages_solution_needs_the_refresh(tmp_path, capsys):
    sub = tmp_path / "worked_solutions_cuda.json"
    data = json.loads((DEMO / "submissions" / "worked_solutions_cuda.json").read_text())
    data["kernels"]["level_1_problem_8_sample_0"] += "\n# edited\n"
    sub.write_text(json.dumps(data))
    args = ["--measurement", str(MEASUREMENT), "--submission", str(sub), "--out", str(tmp_path / "out")]
    assert _script().main(args) == 2
    assert "not the package's worked solution" in capsys.readouterr().err
    assert _script().main([*args, "--refresh-submission", "cuda"]) == 0
    assert "# edited" not in sub.read_text() and (tmp_path / "out" / "worked_solutions_cuda__H100.json").exists()
