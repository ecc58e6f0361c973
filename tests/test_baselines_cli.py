"""``kernelbench baselines``, ``scripts/generate_baseline_time.py`` and ``kernelbench analyze`` with per-GPU baselines."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
from kbtesting import (
    BROKEN_INPUTS_PROBLEM,
    SCRIPTS,
    gpu_environment,
    load_script,
    problem_source,
    repo_env,
    run_cli,
    write_problems,
)

from kernelbench import TIMING_PROTOCOL_VERSION
from kernelbench.baselines import BaselineEntry, BaselineFile, load_baseline
from kernelbench.cli.main import main
from kernelbench.problems import load_directory
from kernelbench.results import EnvironmentInfo, KernelResult, TimingStats
from kernelbench.runs import RunDirectory

sys.path.insert(0, str(SCRIPTS))

import _kv  # noqa: E402


def has_cuda() -> bool:
    import torch

    return torch.cuda.is_available()


RELU = problem_source(shape="64, 32")
TANH = RELU.replace("torch.relu", "torch.tanh")


# ---------------------------------------------------------------- kernelbench baselines: options and refusals
def test_help_lists_the_options(capsys):
    with pytest.raises(SystemExit) as e:
        main(["baselines", "--help"])
    assert e.value.code == 0
    out = capsys.readouterr().out
    for option in ("--gpu-name", "--levels", "--modes", "--out", "--source", "--problem-id", "--timing-budget",
                   "--restart", "--runner", "--gpu", "--compile-timeout", "--deadline", "--skip-failed"):
        assert option in out


def test_unknown_mode_is_a_usage_error(capsys):
    with pytest.raises(SystemExit) as e:
        main(["baselines", "--modes", "eager", "turbo"])
    assert e.value.code == 2
    assert "unknown mode 'turbo'" in capsys.readouterr().err


@pytest.mark.skipif(has_cuda(), reason="checks the machine without a GPU")
def test_without_a_gpu_the_cpu_is_refused_unless_asked_for(tmp_path, capsys):
    d = write_problems(tmp_path / "p", {"1_ReLU.py": RELU})
    rc = main(["baselines", "--source", "directory", "--path", str(d), "--modes", "eager",
               "--out", str(tmp_path / "x.json")])
    err = capsys.readouterr().err
    assert rc == 2 and "no GPU is visible" in err and "--device cpu" in err
    assert not (tmp_path / "x.json").exists()


def test_a_file_of_another_gpu_is_refused_before_measuring(tmp_path, capsys):
    d = write_problems(tmp_path / "p", {"1_ReLU.py": RELU})
    out = tmp_path / "cpu.json"
    out.write_text(json.dumps({"level1": {"1_ReLU.py": {"mean": 0.1}},
                               "environment": {"gpu_name": "NVIDIA H100 80GB HBM3",
                                               "timing_protocol": TIMING_PROTOCOL_VERSION}}))
    rc = main(["baselines", "--source", "directory", "--path", str(d), "--device", "cpu", "--modes", "eager",
               "--out", str(out)])
    assert rc == 2 and "holds H100 times; measuring cpu into it would mix GPUs" in capsys.readouterr().err
    assert json.loads(out.read_text())["level1"] == {"1_ReLU.py": {"mean": 0.1}}  # untouched


def test_problem_ids_that_do_not_exist_are_named(tmp_path, capsys):
    d = write_problems(tmp_path / "p", {"1_ReLU.py": RELU})
    rc = main(["baselines", "--source", "directory", "--path", str(d), "--device", "cpu", "--problem-id", "7",
               "--out", str(tmp_path / "x.json")])
    assert rc == 2 and "problem id(s) 7 not found" in capsys.readouterr().err


# ---------------------------------------------------------------- generate_baseline_time.py: key=value translation
def test_script_keys_translate_to_kernelbench_baselines():
    script = load_script("generate_baseline_time")

    def argv(*kv):
        return script.build_argv(_kv.parse_kv(list(kv), script.KEYS))

    a = argv("level=[1,2]", "hardware_name=H100", "num_runs=100", "modes=eager,compile_inductor_default")
    assert a[:9] == ["baselines", "--levels", "1", "2", "--gpu-name", "H100", "--modes", "eager", "compile-default"]
    assert a[a.index("--min-trials") + 1] == "100" and a[a.index("--max-trials") + 1] == "100"
    assert a[a.index("--timing-budget") + 1] == "300.0"  # num_runs: enough budget for the calls asked for
    assert a[a.index("--source") + 1] == "builtin" and a[a.index("--runner") + 1] == "local"

    b = argv("level=4", "num_trials=20", "timing_budget=2", "dataset_src=huggingface", "subset=(3,5)",
             "eval_mode=modal", "gpu=L40S", "restart", "output_file=out.json", "verbose")
    assert b[0] == "-v" and b[1:4] == ["baselines", "--levels", "4"]
    assert b[b.index("--timing-budget") + 1] == "2.0" and b[b.index("--problem-id") + 1] == "3-5"
    assert b[b.index("--gpu") + 1] == "L40S" and "--restart" in b and b[b.index("--out") + 1] == "out.json"
    assert b[b.index("--source") + 1] == "huggingface"

    c = argv("problem_id=1,3")
    assert c[c.index("--problem-id") + 1] == "1,3" and "--min-trials" not in c and "--levels" not in c


def test_script_measures_the_checkouts_problems_like_kernelbench_and_never_builtin_silently(tmp_path, monkeypatch,
                                                                                          capsys):
    """KernelBench's script measures its checkout's KernelBench/ folder; so does ours when run from one."""
    script = load_script("generate_baseline_time")

    def argv(*kv):
        return script.build_argv(_kv.parse_kv(list(kv), script.KEYS))

    monkeypatch.chdir(tmp_path)
    a = argv("level=1")
    assert a[a.index("--source") + 1] == "builtin" and "--baselines-dir" not in a
    assert "no dataset_src= and no KernelBench/ folder here: measuring the built-in suite" in capsys.readouterr().err
    (tmp_path / "KernelBench" / "level1").mkdir(parents=True)
    b = argv("level=1")
    assert b[b.index("--source") + 1] == "directory" and b[b.index("--path") + 1] == "KernelBench"
    assert capsys.readouterr().err == ""
    c = argv("level=1", "dataset_src=builtin", "baselines_dir=elsewhere")
    assert c[c.index("--source") + 1] == "builtin" and c[c.index("--baselines-dir") + 1] == "elsewhere"


@pytest.mark.parametrize("kv, message", [
    (["level=one"], "level=['one']: expected a level number"),
    (["modes=eager,turbo"], "unknown mode 'turbo'"),
    (["num_runs=0"], "num_runs=0: expected a positive number"),
    (["num_runs=10", "num_trials=20"], "num_runs and num_trials disagree"),
    (["problem_id=1", "subset=(1,3)"], "give problem_id= or subset=, not both"),
    (["eval_mode=cloud"], "eval_mode=cloud: choose local or modal"),
])
def test_script_rejects_bad_values_in_one_line(kv, message):
    script = load_script("generate_baseline_time")
    with pytest.raises(_kv.KvError, match=re.escape(message)):
        script.build_argv(_kv.parse_kv(kv, script.KEYS))


def test_script_help_and_unknown_key(capsys):
    script = load_script("generate_baseline_time")
    with pytest.raises(SystemExit) as e:
        script.main(["--help"])
    assert e.value.code == 0 and "hardware_name" in capsys.readouterr().out
    with pytest.raises(SystemExit) as e:
        script.main(["hardware=H100"])
    assert e.value.code == 2 and "unknown key 'hardware'" in capsys.readouterr().err


# ---------------------------------------------------------------- end to end on the CPU (real workers)
@pytest.mark.slow
def test_script_measures_records_a_failure_and_the_cli_resumes(tmp_path):
    d = write_problems(tmp_path / "p", {"1_ReLU.py": RELU, "2_Broken.py": BROKEN_INPUTS_PROBLEM})
    out = tmp_path / "b" / "cpu.json"
    env = repo_env()
    proc = subprocess.run([sys.executable, str(SCRIPTS / "generate_baseline_time.py"), "level=1", "modes=eager",
                           "dataset_src=local", f"dataset_path={d}", "device=cpu", "timing_budget=0.1",
                           f"output_file={out}"], capture_output=True, text=True, env=env, timeout=600)
    assert proc.returncode == 0, proc.stderr
    assert "running: kernelbench baselines --levels 1 --modes eager" in proc.stderr
    assert "incomplete; 1 measured, 0 already there, 1 failed" in proc.stdout
    assert "2_Broken.py" in proc.stdout and "inputs cannot be made" in proc.stdout
    data = json.loads(out.read_text())
    assert data["level1"]["1_ReLU.py"]["num_trials"] >= 1 and data["level1"]["1_ReLU.py"]["device"] == "cpu"
    assert "inputs cannot be made" in data["failures"]["level1"]["2_Broken.py"]["eager"]
    assert data["environment"]["gpu_name"] == "cpu" and data["environment"]["timing_protocol"] == TIMING_PROTOCOL_VERSION

    again = run_cli("baselines", "--source", "directory", "--path", str(d), "--device", "cpu", "--modes", "eager",
                "--out", str(out), "--skip-failed", "--strict")
    assert again.returncode == 0, again.stderr
    assert "0 measured, 1 already there, 0 failed" in again.stdout
    assert json.loads(out.read_text())["level1"] == data["level1"]  # the time already there was kept


# ---------------------------------------------------------------- kernelbench analyze with baselines/<GPU>.json
H100 = "NVIDIA H100 80GB HBM3"


def _write_baseline(path: Path, gpu: str, problems, times: dict[int, float], mode_times: dict[int, float]) -> None:
    f = BaselineFile.open(path, gpu)
    for p in problems:
        for mode, table in (("eager", times), ("compile-default", mode_times)):
            e = BaselineEntry(mean=table[p.problem_id], median=table[p.problem_id], num_trials=50, hardware=gpu,
                              device="cuda:0")
            e._environment = gpu_environment(gpu)
            f.put(p, mode, e, precision="fp32")


@pytest.fixture
def scored_run(tmp_path):
    """A level-1 run measured on an H100 (candidate medians 0.5 ms), and baselines for H100 and H200."""
    d = write_problems(tmp_path / "problems", {"1_ReLU.py": RELU, "2_Tanh.py": TANH})
    problems = load_directory(d)
    run = RunDirectory(tmp_path / "runs" / "r1", level=1)
    run.path.mkdir(parents=True)
    run.write_info(level=1, source="directory", source_path=str(d))
    for p in problems:
        run.save_result(KernelResult(
            level=1, problem_id=p.problem_id, problem_name=p.name, backend="cuda", compiled=True, correct=True,
            runtime=TimingStats(samples_ms=[0.5, 0.5, 0.5]), ref_runtime=TimingStats(samples_ms=[0.75] * 3),
            environment=EnvironmentInfo.model_validate(gpu_environment(H100))))
    bdir = tmp_path / "baselines"
    _write_baseline(bdir / "H100.json", H100, problems, {1: 1.0, 2: 2.0}, {1: 0.5, 2: 0.25})
    _write_baseline(bdir / "H200.json", "NVIDIA H200", problems, {1: 0.8, 2: 1.6}, {1: 0.4, 2: 0.2})
    return tmp_path, run.path, bdir


def test_analyze_uses_the_baseline_of_the_gpu_named(scored_run):
    tmp, run_dir, bdir = scored_run
    out = tmp / "scores.json"
    proc = run_cli("analyze", "--run-dir", str(run_dir), "--gpu", "H100", "--baselines-dir", str(bdir),
               "--json", str(out))
    assert proc.returncode == 0, proc.stderr
    assert f"baseline {bdir / 'H100.json'} (eager)" in proc.stdout
    level = json.loads(out.read_text())["levels"]["1"]
    # Speedups 1.0/0.5 = 2 and 2.0/0.5 = 4 against the file, not the in-session 1.5x.
    assert level["geomean_speedup"] == pytest.approx(8 ** 0.5)
    assert level["fast_p"]["fast_1.5"] == 1.0 and level["fast_p"]["fast_2"] == 0.5  # 2.0x is not > 2

    proc = run_cli("analyze", "--run-dir", str(run_dir), "--gpu", "H100", "--baselines-dir", str(bdir),
               "--mode", "compile-default", "--json", str(out))
    assert proc.returncode == 0, proc.stderr
    level = json.loads(out.read_text())["levels"]["1"]
    assert level["geomean_speedup"] == pytest.approx((1.0 * 0.5) ** 0.5) and level["fast_p"]["fast_1"] == 0.0


def test_analyze_reports_problems_whose_baseline_drifted_from_the_in_session_reference(scored_run):
    """In-session reference 0.75 ms for both problems: a baseline of 0.78 ms agrees, one of 2.0 ms does not."""
    tmp, run_dir, bdir = scored_run
    problems = load_directory(tmp / "problems")
    _write_baseline(tmp / "mine" / "H100.json", H100, problems, {1: 0.78, 2: 2.0}, {1: 0.5, 2: 0.25})
    out = tmp / "drift.json"
    proc = run_cli("analyze", "--run-dir", str(run_dir), "--baseline", str(tmp / "mine" / "H100.json"),
               "--json", str(out))
    assert proc.returncode == 0, proc.stderr
    assert "On 1 problem(s) the baseline and the reference timed beside the candidates differ by more than 10%" \
        in proc.stdout
    row = next(line for line in proc.stdout.splitlines() if "2_Tanh.py" in line)
    assert row.split() == ["1", "2_Tanh.py", "2", "0.75", "2.67x"]
    assert "1_ReLU.py" not in proc.stdout
    drift = json.loads(out.read_text())["baseline_drift"]
    assert [(d["problem_id"], d["baseline_ms"], d["in_session_ms"]) for d in drift] == [(2, 2.0, 0.75)]

    proc = run_cli("analyze", "--run-dir", str(run_dir), "--baseline", str(tmp / "mine" / "H100.json"),
               "--mode", "compile-default", "--json", str(out))
    assert proc.returncode == 0 and "differ by more than" not in proc.stdout
    assert json.loads(out.read_text())["baseline_drift"] == []


def test_analyze_refuses_another_gpus_baseline_unless_forced(scored_run):
    tmp, run_dir, bdir = scored_run
    proc = run_cli("analyze", "--run-dir", str(run_dir), "--gpu", "H200", "--baselines-dir", str(bdir))
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines()[-1] == (
        f"error: results were measured on H100 but the baseline {bdir / 'H200.json'} is for H200; "
        "use the baseline for H100 or pass --force to compare anyway")
    forced = run_cli("analyze", "--run-dir", str(run_dir), "--gpu", "H200", "--baselines-dir", str(bdir), "--force",
                 "--json", str(tmp / "forced.json"))
    assert forced.returncode == 0, forced.stderr
    assert json.loads((tmp / "forced.json").read_text())["levels"]["1"]["geomean_speedup"] == pytest.approx(
        (1.6 * 3.2) ** 0.5)
    missing = run_cli("analyze", "--run-dir", str(run_dir), "--gpu", "B200", "--baselines-dir", str(bdir))
    assert missing.returncode == 2 and f"baseline file {bdir / 'B200.json'} does not exist" in missing.stderr
    assert load_baseline(bdir / "H200.json").gpu_name == "NVIDIA H200"


# ---------------------------------------------------------------- bench_baselines.py, smoke test on the CPU
@pytest.mark.slow
def test_bench_script_runs_end_to_end_on_the_cpu(tmp_path):
    d = write_problems(tmp_path / "p", {"1_ReLU.py": RELU})
    out, report = tmp_path / "cpu.json", tmp_path / "bench.json"
    env = repo_env()
    proc = subprocess.run([sys.executable, str(SCRIPTS / "bench_baselines.py"), "--source", "directory", "--path",
                           str(d), "--device", "cpu", "--modes", "eager", "--timing-budget", "0.05", "--out", str(out),
                           "--json", str(report)], capture_output=True, text=True, env=env, timeout=600)
    assert proc.returncode == 0, proc.stderr
    data = json.loads(report.read_text())
    s = data["summary"]
    assert s["complete"] and s["per_mode"]["eager"] == {"seconds": pytest.approx(s["per_mode"]["eager"]["seconds"]),
                                                        "times": 1, "measured_now": 1, "failed_now": 0, "pending": 0}
    assert s["per_mode"]["eager"]["seconds"] > 0 and s["wall_s_this_invocation"] >= s["wall_s_first_run"]
    first = load_baseline(out).levels[1]["1_ReLU.py"].headline_ms
    second = load_baseline(tmp_path / "cpu.eager-repeat.json").levels[1]["1_ReLU.py"].headline_ms
    assert s["agreement"]["n"] == 1 and s["agreement"]["median_ratio"] == pytest.approx(second / first)
    assert data["problems"][0]["median_ms"]["eager"] == pytest.approx(first)
    assert data["problems"][0]["fraction_of_sol"] is None  # no roofline for a CPU
    assert "eager run-to-run, median ratio" in proc.stdout
