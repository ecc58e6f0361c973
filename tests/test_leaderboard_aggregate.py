"""Aggregation: metrics by hand arithmetic, baselines, audit statuses, determinism, the seed script."""

from __future__ import annotations

import hashlib
import json
import math
import subprocess
import sys
from pathlib import Path

import pytest
from fixtures.leaderboard import factory as F

from kernelbench.cli.main import main as kb_main
from kernelbench.results import GuardFinding
from kernelbench.runs import RunDirectory
from leaderboard.aggregate import CURVE_P, AggregateConfig, aggregate
from leaderboard.bundle import ResultsBundle, write_bundle
from leaderboard.errors import AggregationError
from leaderboard.schema import load_submission

REPO = Path(__file__).resolve().parent.parent
ALL_KEYS = ["level_1_problem_1_sample_0", "level_1_problem_2_sample_0", "level_1_problem_3_sample_0",
            "level_2_problem_1_sample_0"]


@pytest.fixture(scope="module")
def problems():
    return F.problems()


def add_entry(root: Path, entry: str, results, gpu: str = "H100", keys=ALL_KEYS, sha: str | None = None,
              **meta) -> None:
    sub_path = F.write_submission(root / "submissions" / f"{entry}.json", F.submission_dict(
        meta.pop("display_name", entry.title()), kernels={k: F.kernel("triton_relu") for k in keys}, **meta))
    sub = load_submission(sub_path)
    write_bundle(ResultsBundle(entry=entry, gpu=gpu, submission_sha256=sha or sub.sha256(),
                               problem_source="test", evaluated_on="2026-03-0" + str(len(entry) % 9 + 1),
                               results=results), root / "data" / "evaluations")


def config(root: Path, **kw) -> AggregateConfig:
    return AggregateConfig(submissions_dir=root / "submissions", evaluations_dir=root / "data" / "evaluations",
                           baselines_dir=root / "baselines", exclusions_path=kw.pop("exclusions", None),
                           out_dir=root / "data", **kw)


def alpha_results():
    # speedups 2.0, 0.5, incorrect, 4.0 (reference 1 ms in every session)
    return [F.result(1, 1, candidate_ms=0.5), F.result(1, 2, candidate_ms=2.0), F.result(1, 3, correct=False),
            F.result(2, 1, candidate_ms=0.25)]


def digest(root: Path) -> dict[str, str]:
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*.json")) if "evaluations" not in p.parts}


def test_metrics_match_hand_arithmetic(tmp_path, problems):
    add_entry(tmp_path, "alpha", alpha_results(), organization="Lab A", date="2026-01-02")
    result = aggregate(problems, config(tmp_path))
    index = json.loads((tmp_path / "data" / "index.json").read_text())
    (entry,) = index["entries"]
    o = entry["scores"]["overall"]
    assert o["n_problems"] == 6 and o["n_correct"] == 3 and o["n_attempted"] == 4
    assert o["correctness_rate"] == 0.5
    assert o["fast_p"]["fast_1"] == round(2 / 6, 6)
    assert o["fast_p"]["fast_1.5"] == round(2 / 6, 6)
    assert o["fast_p"]["fast_2"] == round(1 / 6, 6)  # 2.0 is not strictly above 2
    assert o["geomean_speedup"] == round(4 ** (1 / 3), 6)
    assert o["fulldeck_geomean"] == round(4 ** (1 / 6), 6)
    l1, l2 = entry["scores"]["levels"]["1"], entry["scores"]["levels"]["2"]
    assert (l1["correctness_rate"], l1["fast_p"]["fast_1"], l1["geomean_speedup"], l1["fulldeck_geomean"]) == \
        (0.5, 0.25, 1.0, 1.0)
    assert (l2["correctness_rate"], l2["fast_p"]["fast_2"], l2["geomean_speedup"], l2["fulldeck_geomean"]) == \
        (0.5, 0.5, 4.0, 2.0)
    assert entry["rank"] == 1 and entry["audit"] == {"status": "clean", "reasons": []}
    assert entry["organization"] == "Lab A" and entry["date"] == "2026-01-02"
    assert entry["speedup_basis"] == "in-session reference"
    assert index["default_gpu"] == "H100" and index["gpus"] == ["H100"]
    assert index["levels"] == {"1": 4, "2": 2}
    assert result.rows[0].score.n_correct == 3

    detail = json.loads((tmp_path / "data" / "results" / "alpha__H100.json").read_text())
    rows = {r["key"]: r for r in detail["problems"]}
    assert rows["level_1_problem_1"]["speedup"] == 2.0 and rows["level_1_problem_1"]["verdict"] == "correct"
    assert rows["level_1_problem_3"]["verdict"] == "correctness" and "max abs error" in rows["level_1_problem_3"]["error"]
    assert rows["level_1_problem_4"]["verdict"] == "missing" and rows["level_1_problem_4"]["kernel_key"] is None
    curve = detail["fast_p_curve"]
    assert curve["p"] == list(CURVE_P) and curve["p"][-1] == 3.0
    at = dict(zip(curve["p"], curve["overall"]))
    assert at[0.0] == 0.5 and at[0.45] == 0.5 and at[0.5] == round(2 / 6, 6) and at[2.0] == round(1 / 6, 6)
    assert at[3.0] == round(1 / 6, 6)
    assert dict(zip(curve["p"], curve["level2"]))[3.0] == 0.5

    kernels = json.loads((tmp_path / "data" / "kernels" / "alpha.json").read_text())
    assert sorted(kernels) == sorted(ALL_KEYS)
    prob = json.loads((tmp_path / "data" / "problems" / "level1_1.json").read_text())
    assert prob["best"]["H100"][0]["entry"] == "alpha" and prob["best"]["H100"][0]["speedup"] == 2.0
    assert "class Model" in prob["code"]


def aggregate_with_full_baseline(root: Path, problems, precision: str | None = None) -> tuple[dict, dict]:
    """Aggregate against an H100 baseline with every problem (ReLU 1.5 ms, the rest 1 ms): alpha's detail."""
    times = {(1, "1_ReLU.py"): 1.5, (1, "2_Sigmoid.py"): 1.0, (1, "3_Sum_rows.py"): 1.0,
             (1, "4_Matmul_small.py"): 1.0, (2, "1_Linear_ReLU.py"): 1.0, (2, "2_Add_Tanh.py"): 1.0}
    body = F.baseline(times)
    if precision is not None:
        body["environment"]["precision"] = precision
    (root / "baselines").mkdir(exist_ok=True)
    (root / "baselines" / "H100.json").write_text(json.dumps(body))
    aggregate(problems, config(root))
    detail = json.loads((root / "data" / "results" / "alpha__H100.json").read_text())
    return detail, {r["key"]: r for r in detail["problems"]}


def test_baseline_times_replace_in_session_reference(tmp_path, problems):
    add_entry(tmp_path, "alpha", alpha_results())
    detail, rows = aggregate_with_full_baseline(tmp_path, problems)
    assert rows["level_1_problem_1"]["speedup"] == 3.0  # 1.5 ms baseline / 0.5 ms
    assert rows["level_1_problem_1"]["baseline_ms"] == 1.5
    assert detail["speedup_basis"] == "baseline eager"


def test_results_from_another_gpu_than_the_baseline_are_refused(tmp_path, problems):
    add_entry(tmp_path, "alpha", [F.result(1, 1, gpu="NVIDIA A100-SXM4-80GB")])
    (tmp_path / "baselines").mkdir()
    (tmp_path / "baselines" / "H100.json").write_text(json.dumps(F.baseline({(1, "1_ReLU.py"): 1.0})))
    with pytest.raises(Exception, match="measured on A100"):
        aggregate(problems, config(tmp_path))


def test_audit_statuses_and_ranking(tmp_path, problems):
    add_entry(tmp_path, "clean", alpha_results())
    add_entry(tmp_path, "flagged", [F.result(1, 1, candidate_ms=0.1, flags=["speedup 10.0x above review threshold"]),
                                    F.result(1, 2, candidate_ms=0.5, findings=[GuardFinding(
                                        rule="side-stream", severity="warning", message="m", origin="runtime")])])
    add_entry(tmp_path, "cheater", [F.result(1, 1, candidate_ms=0.01)])
    add_entry(tmp_path, "stale", [F.result(1, 1, candidate_ms=0.5)], sha="0" * 64)
    add_entry(tmp_path, "info_only", [F.result(1, 1, candidate_ms=0.5, findings=[GuardFinding(
        rule="launch-report", severity="info", message="own kernels", origin="runtime")])])
    excl = tmp_path / "exclusions.json"
    excl.write_text(json.dumps({"exclusions": [{"entry": "cheater", "reason": "reads the reference output"}]}))
    F.write_submission(tmp_path / "submissions" / "waiting.json", F.submission_dict("Waiting"))
    result = aggregate(problems, config(tmp_path, exclusions=excl))
    index = json.loads((tmp_path / "data" / "index.json").read_text())
    by = {e["entry"]: e for e in index["entries"]}
    assert by["clean"]["audit"]["status"] == "clean"
    assert by["info_only"]["audit"]["status"] == "clean"
    assert by["flagged"]["audit"]["status"] == "flagged"
    assert by["flagged"]["audit"]["reasons"] == [
        "level_1_problem_1_sample_0: speedup 10.0x above review threshold",
        "level_1_problem_2_sample_0: runtime guard warning side-stream"]
    assert by["stale"]["audit"]["status"] == "flagged"
    assert "earlier version of the submission" in by["stale"]["audit"]["reasons"][0]
    assert by["cheater"]["audit"] == {"status": "excluded", "reasons": ["excluded: reads the reference output"]}
    # the excluded entry has the best score but no rank, and is listed last
    assert [e["entry"] for e in index["entries"]][-1] == "cheater" and by["cheater"]["rank"] is None
    ranked = [(e["entry"], e["rank"]) for e in index["entries"] if e["rank"] is not None]
    values = [by[e]["scores"]["overall"]["fulldeck_geomean"] for e, _ in ranked]
    assert values == sorted(values, reverse=True)
    assert ranked[0] == ("flagged", 1)
    # equal scores share a rank
    assert by["stale"]["scores"] == by["info_only"]["scores"] and by["stale"]["rank"] == by["info_only"]["rank"]
    assert [p["entry"] for p in index["pending"]] == ["waiting"] and result.pending == ["waiting"]
    best = json.loads((tmp_path / "data" / "problems" / "level1_1.json").read_text())["best"]["H100"]
    assert [b["entry"] for b in best][-1] == "cheater", "excluded kernels are listed after the others"
    assert best[0]["entry"] == "flagged"


def test_cpu_results_count_as_correct_without_speedups(tmp_path, problems):
    cpu = [F.result(1, 1, candidate_ms=None, ref_ms=None, gpu=""), F.result(1, 2, correct=False)]
    add_entry(tmp_path, "cpu_entry", cpu, gpu="CPU")
    aggregate(problems, config(tmp_path))
    e = json.loads((tmp_path / "data" / "index.json").read_text())["entries"][0]
    o = e["scores"]["overall"]
    assert e["gpu"] == "CPU"
    assert o["fast_p"]["fast_0"] == round(1 / 6, 6) and o["fast_p"]["fast_1"] == 0.0
    assert o["geomean_speedup"] is None and o["fulldeck_geomean"] == 1.0


def test_aggregation_is_byte_identical_and_removes_stale_files(tmp_path, problems):
    add_entry(tmp_path, "alpha", alpha_results())
    add_entry(tmp_path, "beta", [F.result(1, 1, candidate_ms=0.25)], gpu="A100")
    aggregate(problems, config(tmp_path))
    first = digest(tmp_path / "data")
    aggregate(problems, config(tmp_path))
    assert digest(tmp_path / "data") == first
    text = (tmp_path / "data" / "index.json").read_text()
    assert all(math.isfinite(float(x)) for x in __import__("re").findall(r"\d+\.\d+", text))
    (tmp_path / "submissions" / "beta.json").unlink()
    (tmp_path / "data" / "evaluations" / "beta__A100.json").unlink()
    result = aggregate(problems, config(tmp_path))
    assert {p.name for p in result.removed} == {"beta__A100.json", "beta.json"}
    assert not (tmp_path / "data" / "results" / "beta__A100.json").exists()
    assert (tmp_path / "data" / "evaluations" / "alpha__H100.json").exists(), "inputs are never removed"


def test_inconsistent_inputs_are_errors(tmp_path, problems):
    add_entry(tmp_path, "alpha", alpha_results())
    orphan = ResultsBundle(entry="ghost", gpu="H100", submission_sha256="x", problem_source="t")
    write_bundle(orphan, tmp_path / "data" / "evaluations")
    with pytest.raises(AggregationError, match="entry 'ghost', which has no submissions/ghost.json"):
        aggregate(problems, config(tmp_path))
    (tmp_path / "data" / "evaluations" / "ghost__H100.json").rename(tmp_path / "data" / "evaluations" / "x.json")
    with pytest.raises(AggregationError, match="name it ghost__H100.json"):
        aggregate(problems, config(tmp_path))
    (tmp_path / "data" / "evaluations" / "x.json").unlink()
    bad = tmp_path / "excl.json"
    bad.write_text(json.dumps({"exclusions": [{"entry": "alpha"}]}))
    with pytest.raises(AggregationError, match="exclusions file .*reason"):
        aggregate(problems, config(tmp_path, exclusions=bad))


def test_cli_aggregate(tmp_path, capsys, problems):
    add_entry(tmp_path, "alpha", alpha_results())
    code = kb_main(["leaderboard", "aggregate", "--submissions-dir", str(tmp_path / "submissions"),
                    "--evaluations-dir", str(tmp_path / "data" / "evaluations"), "--out", str(tmp_path / "data"),
                    "--baselines-dir", str(tmp_path / "baselines"), "--exclusions", str(tmp_path / "none.json"),
                    "--source", "directory", "--path", str(F.PROBLEMS_DIR)])
    out = capsys.readouterr().out
    assert code == 0
    assert "alpha" in out and "1.260" in out and "50.0%" in out


def test_update_leaderboard_script_imports_run_directories(tmp_path):
    root = tmp_path
    sub_path = F.write_submission(root / "submissions" / "runs_entry.json", F.submission_dict("From Runs", kernels={
        "level_1_problem_1_sample_0": F.kernel("triton_relu"), "level_2_problem_1_sample_0": F.kernel("triton_relu")}))
    l1 = RunDirectory(root / "runs" / "runs_entry_level1", level=1)
    l1.save_result(F.result(1, 1, candidate_ms=0.5))
    l1.save_result(F.result(1, 2, candidate_ms=0.5))  # not in the submission: ignored
    l2 = RunDirectory(root / "runs" / "runs_entry_level2", level=2)
    l2.save_result(F.result(2, 1, correct=False))
    cmd = [sys.executable, str(REPO / "scripts" / "update_leaderboard.py"), "--level1", str(l1.path),
           "--level2", str(l2.path / "eval_results.json"), "--submission", str(sub_path), "--hardware",
           "NVIDIA H100 80GB HBM3", "--data_dir", str(root / "data"), "--baselines_dir", str(root / "baselines"),
           "--source", "directory", "--path", str(F.PROBLEMS_DIR)]
    run = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    assert "From Runs on H100: rank 1 (clean)" in run.stdout
    bundle = json.loads((root / "data" / "evaluations" / "runs_entry__H100.json").read_text())
    assert [(r["level"], r["problem_id"]) for r in bundle["results"]] == [(1, 1), (2, 1)]
    index = json.loads((root / "data" / "index.json").read_text())
    assert index["entries"][0]["scores"]["overall"]["n_correct"] == 1

    summary = root / "level1_results.json"
    summary.write_text(json.dumps({"level": 1, "total_count": 100, "fast_p": {"1.0": 0.1}}))
    cmd[3] = str(summary)
    refused = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert refused.returncode == 2 and "score summary" in refused.stderr


def test_results_timed_under_an_older_protocol_use_their_in_session_reference(tmp_path, problems):
    old = alpha_results()
    for r in old:
        r.environment.timing_protocol = "kb-timing-1"
    add_entry(tmp_path, "alpha", old)
    detail, rows = aggregate_with_full_baseline(tmp_path, problems)
    # 1 ms in-session reference / 0.5 ms, not the 1.5 ms baseline measured under the current protocol
    assert rows["level_1_problem_1"]["speedup"] == 2.0
    assert rows["level_1_problem_1"]["baseline_ms"] is None
    assert detail["speedup_basis"] == "in-session reference"


def test_results_in_another_precision_than_the_baseline_use_their_in_session_reference(tmp_path, problems):
    add_entry(tmp_path / "fp32", "alpha", alpha_results())
    detail, rows = aggregate_with_full_baseline(tmp_path / "fp32", problems, precision="fp32")
    assert rows["level_1_problem_1"]["speedup"] == 3.0 and detail["speedup_basis"] != "in-session reference"
    half = alpha_results()
    for r in half:
        r.precision = "fp16"
    add_entry(tmp_path / "fp16", "alpha", half)
    detail, rows = aggregate_with_full_baseline(tmp_path / "fp16", problems, precision="fp32")
    # 1 ms in-session fp16 reference / 0.5 ms, not the 1.5 ms fp32 baseline
    assert rows["level_1_problem_1"]["speedup"] == 2.0 and rows["level_1_problem_1"]["baseline_ms"] is None
    assert detail["speedup_basis"] == "in-session reference"


def test_an_incomplete_baseline_falls_back_to_in_session_timings(tmp_path, problems):
    add_entry(tmp_path, "alpha", [F.result(1, 1, gpu="NVIDIA H100 80GB HBM3")])
    (tmp_path / "baselines").mkdir()
    (tmp_path / "baselines" / "H100.json").write_text(json.dumps(F.baseline({(1, "1_ReLU.py"): 1.0})))
    aggregate(problems, config(tmp_path))
    text = (tmp_path / "data" / "index.json").read_text()
    assert "in-session reference" in text
