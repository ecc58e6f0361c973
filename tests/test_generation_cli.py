"""`kernelbench run` end to end on the CPU path against a local OpenAI-compatible server."""

from __future__ import annotations

import hashlib
import json
import os

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # before litellm is imported

import pytest
from kbtesting import files_containing
from llm_server import KERNELS, LLMServer, Reply, fenced, make_problem_dir, problem_id_in

from kernelbench.runs import RunDirectory

DOTENV_KEY = "sk-cli-dotenv-SECRET-7731"
ENVIRON_KEY = "sk-cli-environ-SECRET-5120"


def leak_check(code: str) -> str:
    """Make the candidate fail at import if an API key reached its environment.

    The candidate compares hashes, so the keys themselves never appear in the kernel file.
    """
    hashes = {hashlib.sha256(k.encode()).hexdigest() for k in (DOTENV_KEY, ENVIRON_KEY)}
    check = ("import hashlib\nimport os\n"
             f"_secret_hashes = {sorted(hashes)!r}\n"
             "_leaked = sorted(k for k, v in os.environ.items()\n"
             "                 if hashlib.sha256(v.encode()).hexdigest() in _secret_hashes)\n"
             "if _leaked:\n"
             "    raise RuntimeError(f'API keys leaked into the candidate environment: {_leaked}')\n")
    return check + code


@pytest.mark.slow
def test_run_end_to_end_then_resume(tmp_path, monkeypatch, capsys):
    from kernelbench.cli.main import main

    monkeypatch.chdir(tmp_path)
    make_problem_dir(tmp_path / "problems")
    (tmp_path / ".env").write_text(f"KERNELBENCH_LOCAL_API_KEY={DOTENV_KEY}\n")
    monkeypatch.setenv("OPENAI_API_KEY", ENVIRON_KEY)  # must be scrubbed from candidate processes

    def first_round(req):
        pid = problem_id_in(req.prompt)
        if pid == 1:
            return Reply(content=f"Sure:\n{fenced(leak_check(KERNELS[1]))}")
        return Reply(content="Sorry, I cannot do that one.")

    argv = ["run", "--model", "openai/kb-cli-model", "--level", "1", "--source", "directory", "--path",
            "problems", "--backend", "triton", "--run-name", "e2e", "--correctness-trials", "2",
            "--price-in", "1", "--price-out", "2"]
    with LLMServer(responder=first_round) as server:
        rc = main([*argv[:3], "--api-base", server.base_url, *argv[3:], "--json", str(tmp_path / "scores.json")])
        out = capsys.readouterr().out
        assert rc == 0
        assert {r.headers["authorization"] for r in server.chat_requests()} == {f"Bearer {DOTENV_KEY}"}
    scores = json.loads((tmp_path / "scores.json").read_text())  # the analysis step's --json
    assert scores["level"] == 1 and scores["run_dir"].endswith("e2e")

    run = tmp_path / "runs" / "e2e"
    rd = RunDirectory(run)
    results = rd.load_results()
    r1, r2 = results[(1, 0)], results[(2, 0)]
    assert r1.correct, r1.error
    assert not r2.correct and r2.error.stage.value == "load" and r2.error.type == "MissingKernel"
    assert "fast_p" in out and "correct                    1 (50.0%)" in out
    assert "no_code: no code in response" in out  # the generation failure is in the summary
    assert "$0.0004" in out  # 2 requests x (100 x 1 + 50 x 2) USD per million tokens
    assert files_containing(tmp_path / "runs", DOTENV_KEY) == []
    assert files_containing(tmp_path / "runs", ENVIRON_KEY) == []
    assert DOTENV_KEY not in out

    # Resume: only problem 2 is asked for again, and its recorded failure is replaced by a verdict.
    with LLMServer(default=Reply(content=fenced(KERNELS[2]))) as server:
        rc = main([*argv[:3], "--api-base", server.base_url, *argv[3:]])
        out = capsys.readouterr().out
        assert rc == 0
        assert [problem_id_in(r.prompt) for r in server.chat_requests()] == [2]
    results = RunDirectory(run).load_results()
    assert results[(1, 0)].correct and results[(2, 0)].correct
    assert "correct                    2 (100.0%)" in out
    info = json.loads((run / "run.json").read_text())
    assert info["backend"] == "triton" and info["source"] == "directory" and info["problem_ids"] == [1, 2]


def test_run_rejects_a_backend_without_prompts(tmp_path, monkeypatch, capsys):
    from kernelbench.cli.main import main

    monkeypatch.chdir(tmp_path)
    rc = main(["run", "--model", "openai/x", "--api-base", "http://127.0.0.1:9/v1", "--level", "1",
               "--backend", "torch"])
    assert rc == 2 and "torch" in capsys.readouterr().err


def test_evaluate_run_needs_an_existing_run(tmp_path, monkeypatch, capsys):
    from kernelbench.cli.main import main

    monkeypatch.chdir(tmp_path)
    assert main(["evaluate-run", "--run-dir", "nowhere"]) == 2
    assert "nowhere" in capsys.readouterr().err
    assert main(["evaluate-run"]) == 2
    assert "--run-dir" in capsys.readouterr().err


def test_every_verb_has_help(capsys):
    from kernelbench.cli.main import main

    for verb in ("prompt", "generate", "evaluate-run", "run", "single"):
        with pytest.raises(SystemExit) as e:
            main([verb, "--help"])
        assert e.value.code == 0
        assert verb in capsys.readouterr().out


RELU_TRITON = '''import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def relu_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, tl.maximum(tl.load(x_ptr + offs, mask=mask), 0.0), mask=mask)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        x = x.contiguous()
        out = torch.empty_like(x)
        n = x.numel()
        relu_kernel[(triton.cdiv(n, 4096),)](x, out, n, BLOCK=4096)
        return out
'''


@pytest.mark.gpu
def test_run_with_refinement_on_the_gpu(tmp_path, monkeypatch, capsys):
    """On a GPU: built-in 8_ReLU, two turns; the second prompt carries the measured timing of the first."""
    pytest.importorskip("litellm")
    from kernelbench.cli.main import main

    monkeypatch.chdir(tmp_path)
    with LLMServer(default=Reply(content=fenced(RELU_TRITON))) as server:
        rc = main(["run", "--model", "openai/kb-gpu-model", "--api-base", server.base_url, "--level", "1",
                   "--source", "builtin", "--problem-ids", "8", "--backend", "triton", "--turns", "2",
                   "--run-name", "gpu"])
        out = capsys.readouterr().out
        assert rc == 0
        second = server.chat_requests()[1].prompt
    run = tmp_path / "runs" / "gpu"
    result = RunDirectory(run).load_results()[(8, 0)]
    assert result.correct and result.speedup is not None and result.runtime_ms > 0
    assert "It was correct. It ran in" in second and "for the PyTorch reference" in second
    assert "Make it faster" in second
    turns = json.loads((run / "level_1_problem_8_sample_0_turns.json").read_text())
    assert all(t["correct"] and t["speedup"] for t in turns["turns"])
    assert "fast_p" in out


def test_evaluate_run_records_missing_and_empty_kernels_without_evaluating(tmp_path, monkeypatch, capsys):
    from kernelbench.cli.main import main

    monkeypatch.chdir(tmp_path)
    make_problem_dir(tmp_path / "problems")
    rd = RunDirectory(tmp_path / "runs" / "holes", level=1)
    rd.write_info(source="directory", source_path="problems", backend="triton", precision="fp32", samples=1,
                  problem_ids=[1, 2])
    rd.write_kernel(1, 1, 0, "   \n")  # generation wrote nothing useful
    assert main(["evaluate-run", "--run-name", "holes"]) == 0
    out = capsys.readouterr().out
    results = RunDirectory(rd.path).load_results()
    assert results[(1, 0)].error.type == "EmptyKernel" and results[(2, 0)].error.type == "MissingKernel"
    assert all(r.backend == "triton" and r.error.stage.value == "load" for r in results.values())
    assert "no kernel (generation failed)  2" in out
    # Already recorded: a second pass changes nothing.
    before = (rd.path / "eval_results.json").read_text()
    assert main(["evaluate-run", "--run-dir", str(rd.path)]) == 0
    assert (rd.path / "eval_results.json").read_text() == before


def test_evaluate_run_reads_run_json_written_before_prompt_gpu_and_problem_set(tmp_path, monkeypatch, capsys):
    """A run generated by an earlier version: ``gpu`` held the prompt's GPU and no problem set was recorded."""
    from kernelbench.cli.main import main

    monkeypatch.chdir(tmp_path)
    make_problem_dir(tmp_path / "problems")
    run = tmp_path / "runs" / "old"
    run.mkdir(parents=True)
    old = {"model": "openai/m", "backend": "triton", "precision": "fp32", "gpu": "H100",
           "tolerance_mode": "default", "source": "directory", "source_path": "problems", "level": 1,
           "problem_ids": [1, 2], "samples": 1, "turns": 1, "created_at": "2025-01-01T00:00:00+00:00"}
    (run / "run.json").write_text(json.dumps(old))
    assert main(["evaluate-run", "--run-name", "old"]) == 0
    results = RunDirectory(run).load_results()
    assert sorted(results) == [(1, 0), (2, 0)] and all(r.backend == "triton" for r in results.values())
    info = json.loads((run / "run.json").read_text())
    assert {k: info[k] for k in old} == old and info["problem_set"]["name"] == "custom"


def test_evaluate_run_refuses_a_malformed_run_json_in_one_line(tmp_path, monkeypatch, capsys):
    from kernelbench.cli.main import main

    run = tmp_path / "runs" / "bad"
    run.mkdir(parents=True)
    (run / "run.json").write_text(json.dumps({"level": 1, "samples": "two"}))
    assert main(["evaluate-run", "--run-dir", str(run)]) == 2
    err = capsys.readouterr().err.strip()
    assert err == f"error: {run / 'run.json'}: field 'samples': Input should be a valid integer, unable to parse " \
                  "string as an integer (got 'two')"
