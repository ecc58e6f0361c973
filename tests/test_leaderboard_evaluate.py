"""Evaluating a submission: jobs, the gate, GPU labels, and the whole path on the CPU (Triton interpreter)."""

from __future__ import annotations

import json

import pytest
from fixtures.leaderboard import factory as F

from kernelbench.cli.main import main as kb_main
from kernelbench.evaluation.settings import EvalSettings
from kernelbench.problems.identity import kernelbench_code_hash
from kernelbench.results import EnvironmentInfo, Stage, StageError
from kernelbench.runners.modal_runner import REMOTE_ERROR_TYPE
from kernelbench.runs import RunDirectory
from leaderboard.aggregate import AggregateConfig, aggregate
from leaderboard.errors import SubmissionError
from leaderboard.evaluate import build_jobs, evaluate_submission, measured_gpu
from leaderboard.schema import load_submission
from leaderboard.site import build_site


@pytest.fixture(scope="module")
def problems():
    return F.problems()


def test_build_jobs_one_per_ranked_kernel_with_its_backend(tmp_path, problems):
    path = F.write_submission(tmp_path / "s.json", F.submission_dict(kernels={
        "level_1_problem_1_sample_0": F.kernel("triton_relu"),
        "level_1_problem_1_sample_1": F.kernel("triton_relu"),
        "level_2_problem_2_sample_0": F.kernel("cuda_relu"),
    }))
    jobs = build_jobs(load_submission(path), problems, EvalSettings(correctness_trials=2))
    assert [(j.key, j.settings.backend, j.problem.name) for j in jobs] == [
        ("level_1_problem_1_sample_0", "triton", "1_ReLU"), ("level_2_problem_2_sample_0", "cuda", "2_Add_Tanh")]
    assert all(j.settings.correctness_trials == 2 for j in jobs)
    unknown = F.write_submission(tmp_path / "u.json", F.submission_dict(kernels={
        "level_1_problem_42_sample_0": F.kernel("triton_relu")}))
    with pytest.raises(SubmissionError, match="level_1_problem_42_sample_0"):
        build_jobs(load_submission(unknown), problems, EvalSettings())


def test_invalid_submissions_are_refused_before_any_evaluation(tmp_path, problems):
    path = F.write_submission(tmp_path / "bad.json", F.submission_dict(kernels={
        "level_1_problem_1_sample_0": "def (", "level_1_problem_9_sample_0": F.kernel("triton_relu")}))
    with pytest.raises(SubmissionError, match="2 validation error"):
        evaluate_submission(path, problems, EvalSettings(), runs_dir=tmp_path / "runs")
    assert not (tmp_path / "runs").exists()


def test_measured_gpu_labels():
    def r(gpu, device="cuda:0"):
        res = F.result(1, 1)
        return res.model_copy(update={"environment": EnvironmentInfo(device=device, gpu_name=gpu)})

    assert measured_gpu([r("NVIDIA H100 80GB HBM3"), r("NVIDIA H100 PCIe")], "X") == "H100"
    assert measured_gpu([r("NVIDIA H200"), r("NVIDIA H200"), r("NVIDIA H100 80GB HBM3")], "X") == "H200"
    assert measured_gpu([r(None, "cpu")], "X") == "CPU"
    assert measured_gpu([], "B200") == "B200"


@pytest.mark.slow
def test_evaluate_resume_aggregate_build_on_cpu(tmp_path, problems, capsys):
    """The whole path with the real evaluator: Triton kernels run under the interpreter on the CPU."""
    sub = F.write_submission(tmp_path / "submissions" / "cpu_entry.json", F.submission_dict("CPU Entry", kernels={
        "level_1_problem_1_sample_0": F.kernel("triton_relu"),
        "level_1_problem_3_sample_0": F.kernel("triton_sum_wrong"),
    }))
    args = ["leaderboard", "evaluate", str(sub), "--runs-dir", str(tmp_path / "runs"),
            "--results-dir", str(tmp_path / "data" / "evaluations"), "--correctness-trials", "2",
            "--source", "directory", "--path", str(F.PROBLEMS_DIR)]
    assert kb_main(args) == 0
    out = capsys.readouterr().out
    assert "cpu_entry on CPU: 2 evaluated now, 0 reused" in out
    bundle_path = tmp_path / "data" / "evaluations" / "cpu_entry__CPU.json"
    bundle = json.loads(bundle_path.read_text())
    verdicts = {(r["level"], r["problem_id"]): (r["correct"], r["backend"]) for r in bundle["results"]}
    assert verdicts == {(1, 1): (True, "triton"), (1, 3): (False, "triton")}
    assert bundle["submission_sha256"] == load_submission(sub).sha256()
    eval_results = json.loads((tmp_path / "runs" / "cpu_entry_CPU_level1" / "eval_results.json").read_text())
    assert sorted(eval_results) == ["1", "3"]
    # the bundle and the run record the problem set: these test problems are a custom set, hashed
    info = json.loads((tmp_path / "runs" / "cpu_entry_CPU_level1" / "run.json").read_text())
    assert bundle["problem_set"]["name"] == info["problem_set"]["name"] == "custom"
    assert bundle["problem_set"]["hashes"]["level1/1_ReLU.py"] == kernelbench_code_hash(problems.get(1, 1).code)

    # resume: nothing left to do, the results are reused as they are
    again = evaluate_submission(sub, problems, EvalSettings(correctness_trials=2), runs_dir=tmp_path / "runs",
                                results_dir=tmp_path / "data" / "evaluations", progress=False)
    assert (again.n_evaluated, again.n_reused, again.gpu) == (0, 2, "CPU")

    # a changed kernel is evaluated again, and so is one whose result was an infrastructure failure
    data = json.loads(sub.read_text())
    data["kernels"]["level_1_problem_3_sample_0"] = F.kernel("triton_sigmoid").replace("sigmoid", "wrong")
    sub.write_text(json.dumps(data))
    run1 = RunDirectory(tmp_path / "runs" / "cpu_entry_CPU_level1", level=1)
    lost = F.result(1, 1, correct=False).model_copy(update={"error": StageError.make(
        Stage.CRASH, REMOTE_ERROR_TYPE, "container lost")})
    run1.save_result(lost)
    third = evaluate_submission(sub, problems, EvalSettings(correctness_trials=2), runs_dir=tmp_path / "runs",
                                results_dir=tmp_path / "data" / "evaluations", progress=False)
    assert (third.n_evaluated, third.n_reused) == (2, 0)
    assert run1.load_results()[(1, 0)].correct

    aggregate(problems, AggregateConfig(submissions_dir=tmp_path / "submissions",
                                        evaluations_dir=tmp_path / "data" / "evaluations",
                                        baselines_dir=tmp_path / "baselines", exclusions_path=None,
                                        out_dir=tmp_path / "data"))
    index = json.loads((tmp_path / "data" / "index.json").read_text())
    (entry,) = index["entries"]
    assert entry["gpu"] == "CPU" and entry["audit"]["status"] == "clean"
    assert entry["scores"]["levels"]["1"]["n_correct"] == 1
    assert entry["scores"]["overall"]["geomean_speedup"] is None  # the CPU path measures no speedups
    build_site(tmp_path / "data", tmp_path / "site")
    page = (tmp_path / "site" / "entries" / "cpu_entry__CPU.html").read_text()
    assert ">correct<" in page and ">incorrect<" in page


@pytest.mark.gpu
def test_worked_solutions_as_an_entry_on_the_gpu(tmp_path):
    """The real-entry path on a GPU: worked Triton solutions -> submission -> evaluate -> data/ -> site."""
    from pathlib import Path

    import kernelbench.solutions
    from kernelbench.problems import load_builtin
    from leaderboard.convert import solutions_to_submission, write_submission
    from leaderboard.schema import Metadata

    problems = load_builtin(levels=[1, 2])
    root = Path(kernelbench.solutions.__file__).parent / "triton"
    full = solutions_to_submission(root, Metadata(display_name="Worked solutions (Triton)", backend="triton"),
                                   problems)
    keep = {"level_1_problem_8_sample_0", "level_1_problem_17_sample_0", "level_1_problem_12_sample_0",
            "level_2_problem_1_sample_0"}
    sub = full.model_copy(update={"kernels": {k: v for k, v in full.kernels.items() if k in keep}})
    path = write_submission(sub, tmp_path / "submissions" / "worked_triton.json")
    ev = evaluate_submission(path, problems, EvalSettings(timing_budget_s=0.5), runs_dir=tmp_path / "runs",
                             results_dir=tmp_path / "data" / "evaluations", progress=False)
    assert ev.gpu not in ("CPU", "GPU") and ev.bundle_path is not None
    for r in ev.results:
        assert r.correct, f"{r.key}: {r.error.one_line() if r.error else r.verdict()}"
        assert r.speedup is not None and r.speedup > 0, r.key
        print(f"{r.key}: {r.speedup:.2f}x ({r.runtime_ms:.3f} ms vs {r.ref_runtime_ms:.3f} ms)")
    aggregate(problems, AggregateConfig(submissions_dir=tmp_path / "submissions",
                                        evaluations_dir=tmp_path / "data" / "evaluations",
                                        baselines_dir=tmp_path / "baselines", exclusions_path=None,
                                        out_dir=tmp_path / "data"))
    (entry,) = json.loads((tmp_path / "data" / "index.json").read_text())["entries"]
    assert entry["gpu"] == ev.gpu and entry["scores"]["overall"]["n_correct"] == len(keep)
    assert entry["scores"]["overall"]["geomean_speedup"] is not None
    build_site(tmp_path / "data", tmp_path / "site")
    assert (tmp_path / "site" / "entries" / f"worked_triton__{ev.gpu}.html").exists()
