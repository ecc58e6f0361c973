"""The generation pipeline against a real OpenAI-compatible server: files, failures, resume, cost, keys."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # before litellm is imported

import pytest
from kbtesting import files_containing
from llm_server import (
    KERNELS,
    TRITON_SCALE,
    TRITON_SCALE_WRONG,
    LLMServer,
    Reply,
    fenced,
    kernel_reply,
    make_problem_dir,
)

from kernelbench.generation.client import GenerationConfig, LLMClient
from kernelbench.generation.pipeline import PromptOptions, SpendTracker, generate_samples
from kernelbench.problems import load_directory
from kernelbench.prompts import build_prompt
from kernelbench.runs import RunDirectory

KEY = "sk-pipeline-SECRET-4242"
MODEL = "openai/kb-pipeline-model"
PRICE_IN, PRICE_OUT = 1e-6, 2e-6
OPTIONS = PromptOptions("triton", "fp32", "H100")


@pytest.fixture(scope="module", autouse=True)
def registered_price():
    from kernelbench.generation.client import import_litellm

    import_litellm().register_model({MODEL: {"input_cost_per_token": PRICE_IN, "output_cost_per_token": PRICE_OUT,
                                             "litellm_provider": "openai", "mode": "chat", "max_tokens": 8192}})


@pytest.fixture
def server():
    with LLMServer() as srv:
        yield srv


@pytest.fixture
def problems(tmp_path):
    return load_directory(make_problem_dir(tmp_path / "problems"))


def client_for(srv: LLMServer, **overrides) -> LLMClient:
    cfg = dict(model=MODEL, api_base=srv.base_url, backoff_base_s=0.01, max_retries=2)
    cfg.update(overrides)
    return LLMClient(GenerationConfig(**cfg), api_key=KEY)


def test_every_artefact_is_written(server, problems, tmp_path):
    server.responder = kernel_reply
    rd = RunDirectory(tmp_path / "run", level=1)
    summary = generate_samples(problems, rd, client_for(server), OPTIONS, samples=2, concurrency=3, progress=False)
    assert summary.count("generated") == 4 and not summary.failures
    for p in problems:
        for sid in (0, 1):
            stem = f"level_1_problem_{p.problem_id}_sample_{sid}"
            # The kernel is the answer block, not the draft inside <think>.
            assert (rd.path / f"{stem}_kernel.py").read_text() == KERNELS[p.problem_id]
            assert (rd.path / f"{stem}_prompt.txt").read_text() == build_prompt(p, "triton", "fp32", "H100")
            # litellm hands <think> sections over as separate reasoning; both are kept.
            assert "Here is the kernel" in (rd.path / f"{stem}_response.txt").read_text()
            assert "Draft" in (rd.path / f"{stem}_reasoning.txt").read_text()
            usage = json.loads((rd.path / f"{stem}_usage.json").read_text())
            assert usage["ok"] and usage["attempts"] == 1 and usage["model"] == MODEL
            assert (usage["prompt_tokens"], usage["completion_tokens"]) == (100, 50)
            assert usage["cost_usd"] == pytest.approx(100 * PRICE_IN + 50 * PRICE_OUT)
            assert usage["extraction"]["had_thinking"] and usage["latency_s"] > 0
    assert summary.prompt_tokens == 400 and summary.completion_tokens == 200
    assert summary.cost_usd == pytest.approx(4 * (100 * PRICE_IN + 50 * PRICE_OUT))
    sent = sorted(r.body["messages"][0]["content"] for r in server.chat_requests())
    assert sent == sorted(build_prompt(p, "triton", "fp32", "H100") for p in problems for _ in (0, 1))
    assert files_containing(rd.path, KEY) == []


def test_no_code_and_timeout_are_recorded_failures_and_retried_on_resume(server, problems, tmp_path):
    # concurrency 1: problem 1 gets the first reply, problem 2 the second.
    server.push(Reply(content="I would rather not write code today."), Reply(content="late", delay_s=2.0))
    rd = RunDirectory(tmp_path / "run", level=1)
    client = client_for(server, timeout_s=0.3, max_retries=0)
    summary = generate_samples(problems, rd, client, OPTIONS, concurrency=1, progress=False)
    by_id = {r.problem_id: r for r in summary.records}
    assert by_id[1].status == "failed" and by_id[1].reason == "no_code: no code in response"
    assert by_id[2].status == "failed" and by_id[2].reason.startswith("timeout:")
    assert rd.kernels() == []
    u1 = json.loads(rd.file_for(1, 1, 0, "usage.json").read_text())
    u2 = json.loads(rd.file_for(1, 2, 0, "usage.json").read_text())
    assert (u1["ok"], u1["error_type"], u2["ok"], u2["error_type"]) == (False, "no_code", False, "timeout")
    assert rd.file_for(1, 1, 0, "response.txt").read_text().startswith("I would rather")
    assert not rd.file_for(1, 2, 0, "response.txt").exists()

    server.responder = kernel_reply
    again = generate_samples(problems, rd, client_for(server), OPTIONS, concurrency=1, progress=False)
    assert again.count("generated") == 2
    assert [k.problem_id for k in rd.kernels()] == [1, 2]


def test_resume_skips_done_samples(server, problems, tmp_path):
    server.responder = kernel_reply
    rd = RunDirectory(tmp_path / "run", level=1)
    generate_samples(problems.select(ids=[1]), rd, client_for(server), OPTIONS, progress=False)
    first = rd.kernel_path(1, 1, 0)
    stamp = first.stat().st_mtime_ns
    assert len(server.chat_requests()) == 1
    summary = generate_samples(problems, rd, client_for(server), OPTIONS, samples=2, progress=False)
    assert summary.count("skipped") == 1 and summary.count("generated") == 3
    assert len(server.chat_requests()) == 4
    assert first.stat().st_mtime_ns == stamp


def test_spend_cap_stops_new_requests(server, problems, tmp_path):
    server.responder = kernel_reply
    rd = RunDirectory(tmp_path / "run", level=1)
    tracker = SpendTracker(cap_usd=0.0003)  # each request costs 0.0002
    summary = generate_samples(problems, rd, client_for(server), OPTIONS, samples=3, concurrency=1,
                               tracker=tracker, progress=False)
    assert summary.count("generated") == 2 and summary.count("not_run") == 4
    assert summary.cap_reached and tracker.spent_usd == pytest.approx(0.0004)
    assert len(server.chat_requests()) == 2
    assert all(r.reason == "spend cap reached" for r in summary.records if r.status == "not_run")


def test_unpriced_replies_are_counted(server, problems, tmp_path):
    server.responder = kernel_reply
    rd = RunDirectory(tmp_path / "run", level=1)
    tracker = SpendTracker(cap_usd=1.0)
    generate_samples(problems, rd, client_for(server, model="openai/kb-no-price-model"), OPTIONS,
                     tracker=tracker, progress=False)
    assert tracker.unpriced == 2 and tracker.spent_usd == 0.0


def test_cli_generate_reads_the_key_from_dotenv_and_never_writes_it(server, tmp_path, monkeypatch, capsys, caplog):
    from kernelbench.cli.main import main

    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("KERNELBENCH_LOCAL_API_KEY", raising=False)
    make_problem_dir(tmp_path / "problems")
    (tmp_path / ".env").write_text(f"# keys\nKERNELBENCH_LOCAL_API_KEY='{KEY}'\n")
    server.responder = kernel_reply
    caplog.set_level("DEBUG")
    rc = main(["-vv", "generate", "--model", MODEL, "--api-base", server.base_url, "--level", "1", "--backend",
               "triton", "--source", "directory", "--path", "problems", "--run-name", "keys", "--samples", "2"])
    out = capsys.readouterr()
    assert rc == 0
    assert {r.headers["authorization"] for r in server.chat_requests()} == {f"Bearer {KEY}"}
    assert KEY not in os.environ.values()
    run = tmp_path / "runs" / "keys"
    assert len(list(run.glob("*_kernel.py"))) == 4
    assert files_containing(tmp_path / "runs", KEY) == []
    assert KEY not in out.out and KEY not in out.err and KEY not in caplog.text
    assert "KERNELBENCH_LOCAL_API_KEY" in caplog.text  # the log names where the key came from
    info = json.loads((run / "run.json").read_text())
    assert info["model"] == MODEL and info["samples"] == 2 and info["backend"] == "triton"
    assert "generated" in out.out and "prompt tokens" in out.out and "$0.0008" in out.out


def test_cli_generate_without_a_key_is_a_one_line_error(tmp_path, monkeypatch, capsys):
    from kernelbench.cli.main import main

    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("DEEPSEEK_API_KEY", raising=False)
    rc = main(["generate", "--model", "deepseek/deepseek-chat", "--level", "1", "--problem-ids", "8"])
    err = capsys.readouterr().err
    assert rc == 2 and err.startswith("error: ") and err.count("\n") == 1 and "DEEPSEEK_API_KEY" in err


def test_cli_generate_refuses_to_mix_models_in_a_run(server, tmp_path, monkeypatch, capsys):
    from kernelbench.cli.main import main

    monkeypatch.chdir(tmp_path)
    make_problem_dir(tmp_path / "problems")
    server.responder = kernel_reply
    common = ["generate", "--api-base", server.base_url, "--level", "1", "--backend", "triton", "--source",
              "directory", "--path", "problems", "--run-name", "mixed", "--problem-ids", "1"]
    assert main([*common, "--model", MODEL]) == 0
    assert main([*common, "--model", "openai/another-model"]) == 2
    assert "was generated with model" in capsys.readouterr().err


@pytest.mark.slow
def test_interrupted_run_resumes(server, tmp_path):
    """Kill a real `kernelbench generate` mid-run; the rerun only asks for what is missing."""
    problems_dir = make_problem_dir(tmp_path / "problems")
    run_dir = tmp_path / "run"
    gate = {"n": 0}

    def slow_second(req):
        gate["n"] += 1
        reply = kernel_reply(req)
        if gate["n"] >= 2:
            reply.delay_s = 60  # the process is killed while waiting for this one
        return reply

    server.responder = slow_second
    argv = [sys.executable, "-m", "kernelbench.cli.main", "generate", "--model", MODEL, "--api-base",
            server.base_url, "--level", "1", "--backend", "triton", "--source", "directory", "--path",
            str(problems_dir), "--run-dir", str(run_dir), "--concurrency", "1"]
    env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    proc = subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 120
        while len(server.chat_requests()) < 2 and time.monotonic() < deadline:
            time.sleep(0.1)
        assert len(server.chat_requests()) == 2, "the first generate never reached its second request"
    finally:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
    done = [k.problem_id for k in RunDirectory(run_dir).kernels()]
    assert len(done) == 1
    assert not [p for p in run_dir.iterdir() if p.name.endswith(".tmp")]  # atomic writes left nothing half-done

    server.responder = kernel_reply
    before = len(server.chat_requests())
    rd = RunDirectory(run_dir, level=1)
    summary = generate_samples(load_directory(problems_dir), rd, client_for(server), OPTIONS, progress=False)
    assert summary.count("skipped") == 1 and summary.count("generated") == 1
    assert len(server.chat_requests()) == before + 1
    assert sorted(k.problem_id for k in rd.kernels()) == [1, 2]


@pytest.mark.slow
def test_refinement_feeds_the_verdict_back_and_keeps_the_best(server, problems, tmp_path):
    """Turn 1 is wrong, turn 2 is right: the verdict reaches the model and turn 2 is kept (CPU path)."""
    from kernelbench.evaluation.settings import EvalSettings
    from kernelbench.generation.pipeline import refine_samples
    from kernelbench.runners import get_runner

    def reply(req):
        code = TRITON_SCALE if "Your previous attempt" in req.prompt else TRITON_SCALE_WRONG
        return Reply(content=fenced(code))

    server.responder = reply
    rd = RunDirectory(tmp_path / "run", level=1)
    settings = EvalSettings(backend="triton", measure_timing=False, correctness_trials=2)
    summary = refine_samples(problems.select(ids=[2]), rd, client_for(server), OPTIONS, settings,
                             get_runner("local"), turns=2, progress=False)
    (chain,) = summary.chains
    assert [t.result.correct for t in chain.turns] == [False, True]
    second_prompt = rd.file_for(1, 2, 0, "turn2_prompt.txt").read_text()
    assert TRITON_SCALE_WRONG.strip() in second_prompt and "outputs were wrong" in second_prompt
    assert rd.kernel_path(1, 2, 0).read_text() == TRITON_SCALE
    turns = json.loads(rd.file_for(1, 2, 0, "turns.json").read_text())
    assert turns["best_turn"] == 2 and [t["correct"] for t in turns["turns"]] == [False, True]
    assert turns["turns"][0]["error"]  # the turn-1 failure is on record
    saved = rd.load_results()[(2, 0)]
    assert saved.correct
    for k in (1, 2):
        for suffix in ("kernel.py", "prompt.txt", "response.txt", "usage.json", "result.json"):
            assert rd.file_for(1, 2, 0, f"turn{k}_{suffix}").exists()
    assert summary.n_correct == 1

    # Resume: nothing is asked again and nothing is evaluated again.
    before = len(server.chat_requests())
    again = refine_samples(problems.select(ids=[2]), rd, client_for(server), OPTIONS, settings,
                           get_runner("local"), turns=2, progress=False)
    assert len(server.chat_requests()) == before and again.n_correct == 1
