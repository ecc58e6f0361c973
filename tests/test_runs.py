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


# ---- run.json ----

#: run.json as each writer has written it over time (fields and values copied from those versions' writers).
GENERATE_BEFORE_PROMPT_GPU = {  # generate before prompt_gpu existed: the prompt's GPU was "gpu"; no problem set
    "model": "openai/gpt-4o", "api_base": "http://127.0.0.1:9/v1", "backend": "triton", "precision": "fp32",
    "gpu": "H100", "tolerance_mode": "default", "source": "builtin", "level": 1, "problem_ids": [1, 2],
    "samples": 2, "turns": 1, "temperature": 0.0, "max_tokens": 4096, "created_at": "2025-01-01T00:00:00+00:00",
    "kernelbench_version": "0.1.0",
}
GENERATE_NOW = {
    "problem_set": {"name": "builtin", "revision": "0.1.0", "hashes": {"level1/1_A.py": "11", "level1/2_B.py": "22"}},
    "model": "openai/gpt-4o", "backend": "cuda", "precision": "bf16", "prompt_gpu": "L40S",
    "tolerance_mode": "kernelbench-v0.1", "source": "directory", "source_path": "KernelBench", "level": 2,
    "problem_ids": [3], "samples": 1, "turns": 3, "temperature": 0.7, "max_tokens": 8192, "reasoning_effort": "high",
    "created_at": "2025-06-01T00:00:00+00:00", "kernelbench_version": "0.2.0",
}
LEADERBOARD_FIRST = {  # the leaderboard's evaluation before it recorded the problem set
    "level": 1, "submission": "entry_H100", "display_name": "Entry", "source": "builtin", "source_path": None,
    "gpu": "H100", "runner": "modal",
}


@pytest.mark.parametrize("written", [GENERATE_BEFORE_PROMPT_GPU, GENERATE_NOW, LEADERBOARD_FIRST],
                         ids=["generate-old", "generate", "leaderboard-old"])
def test_run_json_of_earlier_versions_reads_and_updates_without_loss(tmp_path, written):
    (tmp_path / "run.json").write_text(json.dumps(written))
    rd = RunDirectory(tmp_path)
    info = rd.info()
    assert rd.level == written["level"] == info.level
    assert info.backend == written.get("backend") and info.gpu == written.get("gpu")
    assert info.samples == written.get("samples") and info.problem_ids == written.get("problem_ids")
    if "problem_set" in written:
        assert info.problem_set.name == "builtin" and info.problem_set.hashes["level1/2_B.py"] == "22"
    else:
        assert info.problem_set is None
    rd.write_info(runner="local")
    again = json.loads((tmp_path / "run.json").read_text())
    assert again == {**{k: v for k, v in written.items() if v is not None}, "runner": "local"}


def test_run_json_keeps_keys_it_does_not_know(tmp_path):
    (tmp_path / "run.json").write_text(json.dumps({"level": 1, "future_field": {"x": [1, 2]}}))
    rd = RunDirectory(tmp_path)
    assert rd.info().model_extra == {"future_field": {"x": [1, 2]}}
    rd.write_info(samples=3)
    assert json.loads((tmp_path / "run.json").read_text()) == {"level": 1, "samples": 3,
                                                               "future_field": {"x": [1, 2]}}


def test_no_run_json_is_an_empty_record_and_writing_adds_the_level(tmp_path):
    rd = RunDirectory(tmp_path, level=2)
    assert rd.info().recorded() == {} and not (tmp_path / "run.json").exists()
    rd.write_info(source="builtin", source_path=None)
    assert json.loads((tmp_path / "run.json").read_text()) == {"level": 2, "source": "builtin"}


@pytest.mark.parametrize(("text", "message"), [
    ("{not json", r"run\.json is not valid JSON"),
    ("[1, 2]", r"run\.json: expected a JSON object, got list"),
    (json.dumps({"samples": "many"}), r"run\.json: field 'samples': .*integer.* \(got 'many'\)"),
    (json.dumps({"problem_ids": [1, "b"]}), r"run\.json: field 'problem_ids\.1': "),
    (json.dumps({"backend": 3}), r"run\.json: field 'backend': .*string"),
    (json.dumps({"problem_set": {"name": "builtin"}}), r"run\.json: field 'problem_set': malformed problem_set block"),
    (json.dumps({"problem_set": "builtin"}), r"run\.json: field 'problem_set': expected an object"),
    (json.dumps({"level": "one", "samples": "x"}), r"run\.json: field 'level': .* \(and 1 more\)"),
])
def test_malformed_run_json_is_one_line_naming_the_file_and_field(tmp_path, text, message):
    (tmp_path / "run.json").write_text(text)
    with pytest.raises(RunDirectoryError, match=message) as e:
        RunDirectory(tmp_path)
    assert str(tmp_path / "run.json") in str(e.value) and "\n" not in str(e.value)


def test_a_bad_value_is_refused_before_run_json_is_written(tmp_path):
    rd = RunDirectory(tmp_path, level=1)
    rd.write_info(samples=2)
    before = (tmp_path / "run.json").read_text()
    with pytest.raises(RunDirectoryError, match=r"run\.json: field 'problem_ids\.0'"):
        rd.write_info(problem_ids=["x"])
    assert (tmp_path / "run.json").read_text() == before
