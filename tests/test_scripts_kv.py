"""The KernelBench-compatible scripts: key=value parsing, translation, and the scripts end to end."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # before litellm is imported

import pytest
from kbtesting import load_script
from llm_server import KERNELS, TRITON_SCALE, LLMServer, Reply, kernel_reply, make_problem_dir

REPO = Path(__file__).resolve().parents[1]
SCRIPTS = REPO / "scripts"
sys.path.insert(0, str(SCRIPTS))

import _kv  # noqa: E402

SCRIPT_NAMES = ("generate_samples", "eval_from_generations", "benchmark_eval_analysis",
                "generate_and_eval_single_sample", "run_and_check")


# ---------------------------------------------------------------- parsing
KEYS = [_kv.Key("run_name", "str", _kv.REQUIRED), _kv.Key("level", "int", 1), _kv.Key("temperature", "float", None),
        _kv.Key("verbose", "bool", False), _kv.Key("subset", "list", None),
        _kv.Key("old", "int", None, ignored="no longer used")]


def test_parse_types_quotes_and_flags():
    a = _kv.parse_kv(["run_name='my run'", "level=2", "temperature=0.7", "verbose", "subset=(1,10)"], KEYS)
    assert (a.run_name, a.level, a.temperature, a.verbose, a.subset) == ("my run", 2, 0.7, True, [1, 10])
    assert a.given == {"run_name", "level", "temperature", "verbose", "subset"}
    b = _kv.parse_kv(["--run_name=x", "verbose=False", "temperature=None", "subset=3,5"], KEYS)
    assert (b.run_name, b.verbose, b.temperature, b.subset, b.level) == ("x", False, None, ["3", "5"], 1)


@pytest.mark.parametrize("argv, message", [
    (["run_name=x", "colour=red"], "unknown key 'colour'; accepted keys: level, old, run_name, subset, temperature"),
    (["level=2"], "missing required key(s): run_name=..."),
    (["run_name=x", "level=two"], "level='two': expected an integer"),
    (["run_name=x", "verbose=maybe"], "verbose='maybe': expected true or false"),
    (["run_name"], "run_name needs a value"),
])
def test_parse_errors(argv, message):
    with pytest.raises(_kv.KvError) as e:
        _kv.parse_kv(argv, KEYS)
    assert message in str(e.value)


def test_parse_or_exit_reports_and_exits(capsys):
    with pytest.raises(SystemExit) as e:
        _kv.parse_or_exit("x.py", "demo", KEYS, ["run_name=a", "bogus=1"])
    assert e.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith("x.py: error: unknown key 'bogus'") and err.count("\n") == 1
    _kv.parse_or_exit("x.py", "demo", KEYS, ["run_name=a", "old=3"])
    assert "old is accepted for compatibility and ignored: no longer used" in capsys.readouterr().err


@pytest.mark.parametrize("server_type, model_name, api_base, expected", [
    ("deepseek", "deepseek-chat", None, ("deepseek/deepseek-chat", None)),
    ("google", "gemini-2.5-flash", None, ("gemini/gemini-2.5-flash", None)),
    ("google", "gemini/gemini-2.5-flash", None, ("gemini/gemini-2.5-flash", None)),
    ("together", "meta-llama/Llama-3-70b", None, ("together_ai/meta-llama/Llama-3-70b", None)),
    ("fireworks", "accounts/fireworks/models/x", None, ("fireworks_ai/accounts/fireworks/models/x", None)),
    ("anthropic", "claude-sonnet-4-5", None, ("anthropic/claude-sonnet-4-5", None)),
    ("openai", "gpt-5", None, ("openai/gpt-5", None)),
    ("sglang", "Qwen3-8B", None, ("openai/Qwen3-8B", "http://localhost:30000/v1")),
    ("vllm", "qwen", "http://gpu-box:8000/v1", ("openai/qwen", "http://gpu-box:8000/v1")),
    ("litellm", "bedrock/anthropic.claude", None, ("bedrock/anthropic.claude", None)),
    (None, "openai/gpt-5", None, ("openai/gpt-5", None)),
])
def test_server_type_mapping(server_type, model_name, api_base, expected):
    assert _kv.litellm_model(server_type, model_name, api_base) == expected


def test_server_type_errors():
    with pytest.raises(_kv.KvError, match="unknown server_type 'skynet'"):
        _kv.litellm_model("skynet", "m", None)
    with pytest.raises(_kv.KvError, match="model_name= is required"):
        _kv.litellm_model("openai", None, None)


def test_subset_and_source_mapping(tmp_path, monkeypatch):
    assert _kv.subset_to_ids([1, 10]) == "1-10"
    assert _kv.subset_to_ids([None, None]) is None and _kv.subset_to_ids(None) is None
    assert _kv.subset_to_ids([3, 1, 7]) == "3,1,7"
    assert _kv.source_options("builtin", None, None) == ["--source", "builtin"]
    assert _kv.source_options("huggingface", "ScalingIntelligence/KernelBench", None) == ["--source", "huggingface"]
    assert _kv.source_options("huggingface", "/data/kb", None) == ["--source", "huggingface", "--path", "/data/kb"]
    monkeypatch.chdir(tmp_path)
    with pytest.raises(_kv.KvError, match="dataset_src=local needs"):
        _kv.source_options("local", None, None)
    (tmp_path / "KernelBench" / "level1").mkdir(parents=True)
    assert _kv.source_options("local", None, None) == ["--source", "directory", "--path", "KernelBench"]
    with pytest.raises(_kv.KvError, match="unknown dataset_src"):
        _kv.source_options("s3", None, None)


# ---------------------------------------------------------------- translation
def kv(keys, argv):
    return _kv.parse_kv(argv, keys)


def test_generate_samples_translation():
    m = load_script("generate_samples")
    argv = m.build_argv(kv(m.KEYS, [
        "run_name=r1", "dataset_src=builtin", "level=1", "subset=(3,5)", "num_workers=8", "server_type=sglang",
        "model_name=Qwen3-8B", "temperature=0.5", "max_tokens=4096", "num_samples=3", "backend=triton",
        "include_hardware_info=true", "hardware_gpu_name=L40S", "is_reasoning_model=true", "reasoning_effort=high",
        "verbose=true"]))
    assert argv == ["-v", "generate", "--level", "1", "--run-dir", str(Path("runs") / "r1"), "--source", "builtin",
                    "--problem-ids", "3-5", "--concurrency", "8", "--model", "openai/Qwen3-8B", "--api-base",
                    "http://localhost:30000/v1", "--max-tokens", "4096", "--temperature", "0.5",
                    "--reasoning-effort", "high", "--samples", "3", "--backend", "triton", "--precision", "fp32",
                    "--gpu", "L40S"]
    plain = m.build_argv(kv(m.KEYS, ["run_name=r", "dataset_src=builtin", "level=2", "server_type=deepseek",
                                     "model_name=deepseek-chat"]))
    assert plain[-2:] == ["--gpu", "none"]  # KernelBench leaves hardware out unless asked
    with pytest.raises(_kv.KvError, match="custom_prompt_key"):
        m.build_argv(kv(m.KEYS, ["run_name=r", "dataset_src=builtin", "level=1", "model_name=x",
                                 "custom_prompt_key=mine"]))


def test_eval_from_generations_translation():
    m = load_script("eval_from_generations")
    argv = m.build_argv(kv(m.KEYS, ["run_name=r", "dataset_src=builtin", "level=1", "eval_mode=modal", "gpu=H100",
                                    "num_correct_trials=3", "timeout=300", "num_gpu_devices=8", "build_cache=True"]))
    assert argv == ["evaluate-run", "--run-dir", str(Path("runs") / "r"), "--level", "1", "--source", "builtin",
                    "--runner", "modal", "--gpu", "H100", "--correctness-trials", "3", "--timeout", "300.0"]
    local = m.build_argv(kv(m.KEYS, ["run_name=r", "dataset_src=builtin", "level=1", "num_gpu_devices=2",
                                     "measure_performance=false", "backend=triton"]))
    assert local[-7:] == ["--runner", "local", "--no-timing", "--num-gpus", "2", "--backend", "triton"]


def test_analysis_baseline_resolution(tmp_path, monkeypatch):
    m = load_script("benchmark_eval_analysis")
    monkeypatch.chdir(tmp_path)
    args = kv(m.KEYS, ["run_name=r", "level=1", "hardware=H100", "baseline=baseline_time_torch"])
    with pytest.raises(_kv.KvError, match="results/timing/H100/baseline_time_torch.json"):
        m.build_argv(args)
    (tmp_path / "baselines").mkdir()
    (tmp_path / "baselines" / "H100.json").write_text("{}")
    # Our baselines folder: analyze picks the run's set's file in it (kernelbench/H100.json or H100.json).
    assert m.build_argv(args)[-4:] == ["--gpu", "H100", "--baselines-dir", "baselines"]
    kb_layout = tmp_path / "results" / "timing" / "H100"
    kb_layout.mkdir(parents=True)
    (kb_layout / "baseline_time_torch.json").write_text("{}")
    assert m.build_argv(args)[-1] == str(Path("results/timing/H100/baseline_time_torch.json"))
    none = m.build_argv(kv(m.KEYS, ["run_name=r", "level=1"]))
    assert "--baseline" not in none and none[-2:] == ["--json", str(Path("runs/r/analysis_results.json"))]
    with pytest.raises(_kv.KvError, match="subset"):
        m.build_argv(kv(m.KEYS, ["run_name=r", "level=1", "subset=[1,5]"]))


@pytest.mark.parametrize("name", SCRIPT_NAMES)
def test_every_script_has_help_and_rejects_unknown_keys(name):
    help_out = subprocess.run([sys.executable, str(SCRIPTS / f"{name}.py"), "--help"], capture_output=True,
                              text=True, timeout=60)
    assert help_out.returncode == 0
    assert "keys:" in help_out.stdout and "  level " in help_out.stdout
    bad = subprocess.run([sys.executable, str(SCRIPTS / f"{name}.py"), "not_a_key=1"], capture_output=True,
                         text=True, timeout=60)
    assert bad.returncode == 2
    assert f"{name}.py: error: unknown key 'not_a_key'; accepted keys:" in bad.stderr
    assert "Traceback" not in bad.stderr


# ---------------------------------------------------------------- end to end
@pytest.fixture
def server():
    with LLMServer(responder=kernel_reply) as srv:
        yield srv


@pytest.mark.slow
def test_generate_samples_on_the_builtin_suite(server, tmp_path):
    """The real script in its own process, on the built-in suite (generation only: it is H100-sized)."""
    out = subprocess.run(
        [sys.executable, str(SCRIPTS / "generate_samples.py"), "run_name=builtin_run", "dataset_src=builtin",
         "level=1", "subset=(8,9)", "server_type=sglang", "model_name=kb-served", f"api_base={server.base_url}",
         "num_workers=2", "temperature=0", "backend=triton", "api_query_interval=0.5"],
        cwd=tmp_path, capture_output=True, text=True, timeout=300,
        env={**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"})
    assert out.returncode == 0, out.stderr[-3000:]
    assert "api_query_interval is accepted for compatibility and ignored" in out.stderr
    assert "running: kernelbench generate --level 1" in out.stderr
    run = tmp_path / "runs" / "builtin_run"
    prompts = sorted(run.glob("*_prompt.txt"))
    assert [p.name for p in prompts] == ["level_1_problem_8_sample_0_prompt.txt",
                                         "level_1_problem_9_sample_0_prompt.txt"]
    assert "8_ReLU" in prompts[0].read_text() and "Not specified" in prompts[0].read_text()
    assert {r.body["model"] for r in server.chat_requests()} == {"kb-served"}
    info = json.loads((run / "run.json").read_text())
    assert info["source"] == "builtin" and info["model"] == "openai/kb-served"


@pytest.mark.slow
def test_generate_eval_analyse_chain(server, tmp_path, monkeypatch, capsys):
    """generate_samples -> eval_from_generations -> benchmark_eval_analysis, CPU path, tiny problems."""
    monkeypatch.chdir(tmp_path)
    make_problem_dir(tmp_path / "KernelBench")
    common = ["run_name=chain", "level=1"]
    gen = load_script("generate_samples").main(
        [*common, "dataset_src=local", "server_type=vllm", "model_name=kb-served", f"api_base={server.base_url}",
         "backend=triton", "num_samples=1"])
    assert gen == 0
    ev = load_script("eval_from_generations").main(
        [*common, "dataset_src=local", "num_correct_trials=2", "timeout=120", "gpu_arch=['Hopper']"])
    assert ev == 0
    an = load_script("benchmark_eval_analysis").main(common)
    assert an == 0
    out = capsys.readouterr()
    assert "gpu_arch is accepted for compatibility and ignored" in out.err
    run = tmp_path / "runs" / "chain"
    results = json.loads((run / "eval_results.json").read_text())
    assert sorted(results) == ["1", "2"] and all(results[k][0]["correctness"] for k in results)
    analysis = json.loads((run / "analysis_results.json").read_text())
    assert analysis["levels"]["1"]["n_correct"] == 2 and analysis["levels"]["1"]["fast_p"]["fast_0"] == 1.0
    assert "fast_p" in out.out


@pytest.mark.slow
def test_single_sample_and_run_and_check(server, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    problems = make_problem_dir(tmp_path / "problems")
    rc = load_script("generate_and_eval_single_sample").main(
        ["dataset_src=local", f"dataset_path={problems}", "level=1", "problem_id=2", "server_type=sglang",
         "model_name=kb-served", f"api_base={server.base_url}", "backend=triton", "num_correct_trials=2",
         "logdir=single_out", "verbose_logging=true"])
    out = capsys.readouterr().out
    assert rc == 0
    assert TRITON_SCALE.strip() in out and "CORRECT" in out
    assert (tmp_path / "single_out" / "level_1_problem_2_sample_0_kernel.py").read_text() == KERNELS[2]

    kernel = tmp_path / "my_kernel.py"
    kernel.write_text(KERNELS[1])
    rc = load_script("run_and_check").main(
        ["ref_origin=local", f"ref_arch_src_path={problems / 'level1' / '1_Add_ReLU.py'}",
         f"kernel_src_path={kernel}", "backend=triton", "num_correct_trials=2", "num_perf_trials=100"])
    out = capsys.readouterr()
    assert rc == 0 and "CORRECT" in out.out and "1_Add_ReLU" in out.out
    assert "num_perf_trials is accepted for compatibility and ignored" in out.err


def test_run_and_check_bad_paths(tmp_path, capsys):
    m = load_script("run_and_check")
    assert m.main(["ref_origin=local", "kernel_src_path=/nonexistent.py"]) == 2
    assert "kernel_src_path=/nonexistent.py: no such file" in capsys.readouterr().err
    k = tmp_path / "k.py"
    k.write_text("x = 1\n")
    assert m.main(["ref_origin=elsewhere", f"kernel_src_path={k}"]) == 2
    assert "ref_origin=elsewhere" in capsys.readouterr().err


def test_single_sample_replies_without_code(tmp_path, monkeypatch, capsys):
    """A reply with no code is a reported failure, not a crash (and nothing is evaluated)."""
    monkeypatch.chdir(tmp_path)
    problems = make_problem_dir(tmp_path / "problems")
    with LLMServer(default=Reply(content="No.")) as srv:
        rc = load_script("generate_and_eval_single_sample").main(
            ["dataset_src=local", f"dataset_path={problems}", "level=1", "problem_id=1", "server_type=local",
             "model_name=m", f"api_base={srv.base_url}", "backend=triton", "logdir=out"])
    assert rc == 0
    assert "FAILED: the model produced no kernel (no_code: no code in response)" in capsys.readouterr().out
    assert json.loads((tmp_path / "out" / "level_1_problem_1_sample_0_usage.json").read_text())["error_type"] \
        == "no_code"
