"""Submission JSON <-> KernelBench run directories, through the library, the CLI and the seed scripts."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from fixtures.leaderboard import factory as F

from kernelbench.cli.main import main as kb_main
from kernelbench.errors import RunDirectoryError
from kernelbench.runs import RunDirectory
from leaderboard.convert import runs_to_submission, submission_to_runs, write_submission
from leaderboard.schema import Metadata, load_submission

REPO = Path(__file__).resolve().parent.parent


def three_level_submission(tmp_path: Path) -> Path:
    return F.write_submission(tmp_path / "my_model.json", F.submission_dict("My Model", kernels={
        "level_1_problem_1_sample_0": F.kernel("triton_relu"),
        "level_1_problem_2_sample_0": F.kernel("triton_sigmoid"),
        "level_1_problem_2_sample_1": F.kernel("triton_relu"),
        "level_2_problem_2_sample_0": F.kernel("cuda_relu"),
    }))


def test_submission_to_runs_layout(tmp_path):
    sub = load_submission(three_level_submission(tmp_path))
    runs = submission_to_runs(sub, tmp_path / "runs", "my_model", ranked_only=True)
    assert [(lr.level, lr.path.name, lr.n_kernels) for lr in runs] == [
        (1, "my_model_level1", 2), (2, "my_model_level2", 1)]
    l1 = tmp_path / "runs" / "my_model_level1"
    assert sorted(p.name for p in l1.glob("*_kernel.py")) == [
        "level_1_problem_1_sample_0_kernel.py", "level_1_problem_2_sample_0_kernel.py"]
    assert (l1 / "level_1_problem_2_sample_0_kernel.py").read_text() == F.kernel("triton_sigmoid")
    info = json.loads((l1 / "run.json").read_text())
    assert info["level"] == 1 and info["submission"] == "my_model" and info["display_name"] == "My Model"
    assert RunDirectory(l1).level == 1

    everything = submission_to_runs(sub, tmp_path / "all", "x", ranked_only=False)
    assert everything[0].n_kernels == 3


def test_rewriting_keeps_unchanged_results_and_drops_changed_ones(tmp_path):
    sub = load_submission(three_level_submission(tmp_path))
    runs_dir = tmp_path / "runs"
    submission_to_runs(sub, runs_dir, "m", ranked_only=True)
    rd = RunDirectory(runs_dir / "m_level1", level=1)
    rd.save_result(F.result(1, 1))
    rd.save_result(F.result(1, 2))
    (runs_dir / "m_level1" / "level_1_problem_3_sample_0_kernel.py").write_text("stale")

    again = submission_to_runs(sub, runs_dir, "m", ranked_only=True)
    assert again[0].written == [] and len(again[0].unchanged) == 2
    assert [p.name for p in again[0].stale] == ["level_1_problem_3_sample_0_kernel.py"]
    assert set(rd.load_results()) == {(1, 0), (2, 0)}

    data = json.loads(sub.to_json())
    data["kernels"]["level_1_problem_2_sample_0"] += "\n# tuned\n"
    changed = load_submission(F.write_submission(tmp_path / "m2.json", data))
    third = submission_to_runs(changed, runs_dir, "m", ranked_only=True)
    assert [str(k) for k in third[0].written] == ["level_1_problem_2_sample_0"]
    assert set(rd.load_results()) == {(1, 0)}, "the changed kernel's old result must not survive"


def test_runs_to_submission_roundtrip(tmp_path):
    sub = load_submission(three_level_submission(tmp_path))
    submission_to_runs(sub, tmp_path / "runs", "m", ranked_only=False)
    meta = Metadata(display_name="Again", organization="Lab")
    combined = runs_to_submission({1: tmp_path / "runs" / "m_level1", 2: tmp_path / "runs" / "m_level2"}, meta)
    assert combined.kernels == {k: v for k, v in sub.kernels.items() if not k.endswith("sample_1")}
    assert combined.metadata.organization == "Lab"
    with_all = runs_to_submission({1: tmp_path / "runs" / "m_level1"}, meta, all_samples=True)
    assert "level_1_problem_2_sample_1" in with_all.kernels
    out = write_submission(combined, tmp_path / "out" / "again.json")
    assert load_submission(out) == combined


def test_runs_to_submission_errors(tmp_path):
    meta = Metadata(display_name="x")
    with pytest.raises(RunDirectoryError, match="does not exist"):
        runs_to_submission({1: tmp_path / "nope"}, meta)
    (tmp_path / "empty").mkdir()
    with pytest.raises(RunDirectoryError, match="has no level_1_problem"):
        runs_to_submission({1: tmp_path / "empty"}, meta)
    wrong = tmp_path / "wrong"
    RunDirectory(wrong, level=2).write_kernel(2, 1, 0, "class ModelNew: pass")
    with pytest.raises(RunDirectoryError, match="holds level 2, not level 1|is a level 2 kernel in the level 1 run"):
        runs_to_submission({1: wrong}, meta)


def test_cli_to_run(tmp_path, capsys):
    path = three_level_submission(tmp_path)
    assert kb_main(["leaderboard", "to-run", str(path), "--runs-dir", str(tmp_path / "r"), "--name", "abc"]) == 0
    out = capsys.readouterr().out
    assert "abc_level1" in out and "kernelbench evaluate-run --run-dir" in out
    assert (tmp_path / "r" / "abc_level2" / "level_2_problem_2_sample_0_kernel.py").exists()
    bad = tmp_path / "bad.json"
    bad.write_text("{")
    assert kb_main(["leaderboard", "to-run", str(bad)]) == 2
    assert "not valid JSON" in capsys.readouterr().err


def test_seed_scripts_roundtrip(tmp_path):
    path = three_level_submission(tmp_path)
    to_run = subprocess.run([sys.executable, str(REPO / "scripts" / "submission_to_run.py"), "--submission", str(path),
                             "--output_dir", str(tmp_path / "runs")], capture_output=True, text=True, timeout=120)
    assert to_run.returncode == 0, to_run.stderr
    assert "level 1: 2 kernel(s)" in to_run.stdout
    out = tmp_path / "submissions" / "combined.json"
    combine = subprocess.run(
        [sys.executable, str(REPO / "scripts" / "combine_runs_to_submission.py"),
         "--level1_run", "my_model_level1", "--level2_run", str(tmp_path / "runs" / "my_model_level2"),
         "--runs_dir", str(tmp_path / "runs"), "--output", str(out), "--display_name", "My Model",
         "--organization", "My Lab", "--model", "m-1", "--date", "2026-02-03"],
        capture_output=True, text=True, timeout=120)
    assert combine.returncode == 0, combine.stderr
    combined = load_submission(out)
    original = load_submission(path)
    assert combined.kernels == {k: v for k, v in original.kernels.items() if k.endswith("sample_0")}
    assert combined.metadata.model.name == "m-1" and str(combined.metadata.date) == "2026-02-03"
    bad = subprocess.run([sys.executable, str(REPO / "scripts" / "combine_runs_to_submission.py"),
                          "--level1_run", "missing_run", "--runs_dir", str(tmp_path / "runs"),
                          "--output", str(tmp_path / "x.json"), "--display_name", "X"],
                         capture_output=True, text=True, timeout=120)
    assert bad.returncode == 2 and bad.stderr.startswith("error:") and "missing_run" in bad.stderr
    assert not (tmp_path / "x.json").exists()


def test_solutions_folder_to_submission(tmp_path):
    from leaderboard.convert import solutions_to_submission
    from leaderboard.errors import SubmissionError

    problems = F.problems()
    root = tmp_path / "solutions"
    (root / "level1").mkdir(parents=True)
    (root / "level1" / "1_ReLU.py").write_text(F.kernel("triton_relu"))
    (root / "level1" / "README.md").write_text("not a kernel")
    (root / "level2").mkdir()
    (root / "level2" / "2_Add_Tanh.py").write_text(F.kernel("cuda_relu"))
    sub = solutions_to_submission(root, Metadata(display_name="Worked"), problems)
    assert sorted(sub.kernels) == ["level_1_problem_1_sample_0", "level_2_problem_2_sample_0"]
    (root / "level1" / "2_Tanh.py").write_text(F.kernel("triton_relu"))
    with pytest.raises(SubmissionError, match="named after '2_Tanh' but level 1 problem 2 is '2_Sigmoid'"):
        solutions_to_submission(root, Metadata(display_name="Worked"), problems)
    (root / "level1" / "2_Tanh.py").unlink()
    (root / "level1" / "9_Nothing.py").write_text(F.kernel("triton_relu"))
    with pytest.raises(SubmissionError, match="no problem with id 9"):
        solutions_to_submission(root, Metadata(display_name="Worked"), problems)
    with pytest.raises(SubmissionError, match="does not exist"):
        solutions_to_submission(tmp_path / "none", Metadata(display_name="Worked"))
