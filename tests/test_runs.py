"""Run directories: KernelBench file names, atomic result writes, resume, and KernelBench's own files."""

from __future__ import annotations

import json
import threading

import pytest

from kernelbench.errors import RunDirectoryError
from kernelbench.results import KernelResult, Stage, StageError, TimingStats
from kernelbench.runs import RunDirectory, read_eval_results


def result(pid: int, sample: int = 0, correct: bool = True, level: int = 1) -> KernelResult:
    return KernelResult(level=level, problem_id=pid, problem_name=f"{pid}_P", sample_id=sample, backend="triton",
                        compiled=True, correct=correct, runtime=TimingStats(samples_ms=[0.5, 0.6, 0.7]),
                        ref_runtime=TimingStats(samples_ms=[1.0, 1.1, 1.2]),
                        error=None if correct else StageError.make(Stage.CORRECTNESS, "WrongOutput", "bad"))


def test_kernel_files_use_kernelbench_names_and_results_round_trip(tmp_path):
    rd = RunDirectory(tmp_path / "run")
    p = rd.write_kernel(1, 19, 0, "class ModelNew: pass\n")
    assert p.name == "level_1_problem_19_sample_0_kernel.py"
    rd.write_text(1, 19, 0, "prompt.txt", "the prompt")
    assert [(k.level, k.problem_id, k.sample_id) for k in rd.kernels()] == [(1, 19, 0)]
    r = result(19)
    rd.save_result(r)
    assert rd.load_results()[(19, 0)] == r
    raw = json.loads(rd.results_path.read_text())
    entry = raw["19"][0]
    # KernelBench's own fields stay at the top so its analysis scripts read our files.
    assert entry["sample_id"] == 0 and entry["correctness"] is True and entry["runtime"] == pytest.approx(0.6)
    assert RunDirectory(tmp_path / "run").level == 1  # inferred on reopen


def test_saving_replaces_one_sample_and_keeps_the_rest(tmp_path):
    rd = RunDirectory(tmp_path / "run")
    rd.save_result(result(1, 0, correct=False))
    rd.save_result(result(1, 1))
    rd.save_result(result(2, 0))
    rd.save_result(result(1, 0, correct=True))
    got = rd.load_results()
    assert sorted(got) == [(1, 0), (1, 1), (2, 0)] and got[(1, 0)].correct
    assert rd.has_result(2, 0) and not rd.has_result(3, 0)


def test_concurrent_writers_lose_nothing(tmp_path):
    rd = RunDirectory(tmp_path / "run", level=1)
    threads = [threading.Thread(target=rd.save_result, args=(result(i),)) for i in range(1, 21)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(p for p, _ in rd.load_results()) == list(range(1, 21))
    assert not [f for f in (tmp_path / "run").iterdir() if f.name.endswith(".tmp")]


def test_one_level_per_run_directory(tmp_path):
    rd = RunDirectory(tmp_path / "run")
    rd.save_result(result(1, level=1))
    with pytest.raises(RunDirectoryError, match="holds level 1"):
        rd.save_result(result(1, level=2))
    with pytest.raises(RunDirectoryError, match="holds level 1, not level 3"):
        RunDirectory(tmp_path / "run", level=3)


def test_reads_kernelbench_eval_results_both_shapes(tmp_path):
    f = tmp_path / "eval_results.json"
    f.write_text(json.dumps({
        "1": [{"sample_id": 0, "compiled": True, "correctness": True, "runtime": 2.5, "metadata": {},
               "runtime_stats": {"mean": 2.5}}],
        "2": {"sample_id": 0, "compiled": False, "correctness": False, "runtime": -1.0,
              "metadata": {"compilation_error": "nvcc exploded"}},
    }))
    got = read_eval_results(f, level=1)
    assert got[(1, 0)].correct and got[(1, 0)].runtime_ms == 2.5
    assert got[(2, 0)].runtime is None and got[(2, 0)].error.stage == Stage.COMPILE
    assert "nvcc exploded" in got[(2, 0)].error.message


def test_malformed_results_are_clear_errors(tmp_path):
    f = tmp_path / "eval_results.json"
    f.write_text("{not json")
    with pytest.raises(RunDirectoryError, match="not valid JSON"):
        read_eval_results(f, 1)
    f.write_text(json.dumps({"abc": []}))
    with pytest.raises(RunDirectoryError, match="'abc' is not a problem id"):
        read_eval_results(f, 1)
    with pytest.raises(RunDirectoryError, match="does not exist"):
        read_eval_results(tmp_path / "missing.json", 1)
