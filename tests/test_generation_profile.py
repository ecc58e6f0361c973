"""Refinement with profiles (``--feedback profile``) on the CPU path, against the real local LLM stand-in.

On this machine no profile can be taken (no GPU, no ncu): the real profiler says why, that line reaches
the next prompt and the run goes on. A second profile source, built from a real ncu capture of the
Triton ReLU on an H100 (tests/fixtures/ncu), shows how a real profile sits in the prompt and in the generation record.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # before litellm is imported

import pytest
from llm_server import TRITON_SCALE, LLMServer, Reply, fenced, make_problem_dir

from kernelbench.generation.pipeline import ProfileNote, PromptOptions, refine_samples
from kernelbench.runs import RunDirectory

OPTIONS = PromptOptions("triton", "fp32", "H100")
FIXTURE = Path(__file__).parent / "fixtures" / "ncu" / "real_triton_8_ReLU.csv"
no_gpu_here = pytest.mark.skipif(bool(shutil.which("nvidia-smi")), reason="this machine has a GPU")


def _client(server: LLMServer):
    from kernelbench.generation.client import GenerationConfig, LLMClient

    return LLMClient(GenerationConfig(model="openai/kb-profile-model", api_base=server.base_url, max_retries=0),
                     api_key="sk-test")


@pytest.fixture
def problems(tmp_path):
    from kernelbench.problems import load_directory

    return load_directory(make_problem_dir(tmp_path / "problems")).select(ids=[2])


def fixture_profiler(calls: list):
    """A profile source that reads a real ncu capture (the same parser and report as a real run)."""
    from kernelbench.evaluation.guards.runtime import own_kernel_names
    from kernelbench.profiling import parse_ncu_csv
    from kernelbench.profiling.run import _report

    def profile(problem, source):
        calls.append(problem.key)
        report = _report(problem, source, "triton", "fp32", "NVIDIA H100 80GB HBM3",
                         parse_ncu_csv(FIXTURE.read_text()), own_kernel_names(source), ["ncu"], "sandbox")
        return ProfileNote(report.to_text(), report.model_dump_json())

    return profile


@pytest.mark.slow
def test_the_last_correct_kernels_profile_reaches_the_next_prompt_and_the_record(problems, tmp_path):
    from kernelbench.evaluation.settings import EvalSettings
    from kernelbench.runners import get_runner

    calls: list[str] = []
    rd = RunDirectory(tmp_path / "run", level=1)
    settings = EvalSettings(backend="triton", measure_timing=False, correctness_trials=1)
    with LLMServer(default=Reply(content=fenced(TRITON_SCALE))) as server:
        summary = refine_samples(problems, rd, _client(server), OPTIONS, settings, get_runner("local"), turns=3,
                                 progress=False, feedback="profile", profiler=fixture_profiler(calls))
        prompts = [r.prompt for r in server.chat_requests()]
    (chain,) = summary.chains
    assert [t.result.correct for t in chain.turns] == [True, True, True]
    assert calls == ["level_1_problem_2", "level_1_problem_2"]  # turns 1 and 2; the last turn feeds nothing
    assert "## Profile of your last correct kernel" not in prompts[0]
    for prompt in prompts[1:]:
        assert "## Profile of your last correct kernel (the attempt above)" in prompt
        assert "Nsight Compute profile of one forward of level 1 problem 2 (2_Scale)" in prompt
        assert "-> memory-bound (88% of peak memory throughput)" in prompt
        assert "the profile shows where its time goes" in prompt
    text = rd.file_for(1, 2, 0, "turn1_profile.txt").read_text()
    assert text in prompts[1]
    report = json.loads(rd.file_for(1, 2, 0, "turn1_profile.json").read_text())
    assert report["problem_id"] == 2 and len(report["kernels"]) == 1
    turns = json.loads(rd.file_for(1, 2, 0, "turns.json").read_text())
    assert [("profile" in t) for t in turns["turns"]] == [True, True, False]
    assert turns["turns"][0]["profile"] == text

    # Resume: profiles on disk are reused, not taken again.
    with LLMServer(default=Reply(content=fenced(TRITON_SCALE))) as server:
        refine_samples(problems, rd, _client(server), OPTIONS, settings, get_runner("local"), turns=3,
                       progress=False, feedback="profile", profiler=fixture_profiler(calls))
        assert server.chat_requests() == []
    assert len(calls) == 2


@no_gpu_here
@pytest.mark.slow
def test_single_with_profile_feedback_on_the_cpu_says_why_there_is_no_profile(tmp_path, monkeypatch, capsys):
    from kernelbench.cli.main import main

    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    make_problem_dir(tmp_path / "problems")
    with LLMServer(default=Reply(content=fenced(TRITON_SCALE))) as server:
        rc = main(["single", "--level", "1", "--problem-id", "2", "--source", "directory", "--path", "problems",
                   "--backend", "triton", "--turns", "2", "--feedback", "profile", "--model", "openai/kb-model",
                   "--api-base", server.base_url, "--run-dir", "runs/p", "--no-timing",
                   "--correctness-trials", "1"])
        prompts = [r.prompt for r in server.chat_requests()]
    out = capsys.readouterr().out
    assert rc == 0, out
    why = "profile unavailable: no NVIDIA GPU on this machine (nvidia-smi lists none): Nsight Compute profiles " \
          "kernels on a local GPU"
    assert len(prompts) == 2 and why in prompts[1]
    assert "## Profile of your last correct kernel (the attempt above)" in prompts[1]
    rd = RunDirectory(tmp_path / "runs" / "p", level=1)
    assert rd.file_for(1, 2, 0, "turn1_profile.txt").read_text() == why
    assert not rd.file_for(1, 2, 0, "turn1_profile.json").exists()
    assert json.loads((tmp_path / "runs" / "p" / "run.json").read_text())["feedback"] == "profile"
    assert "turn 1: correct; profile unavailable: no NVIDIA GPU" in out


def test_profile_feedback_needs_more_than_one_turn(tmp_path, monkeypatch, capsys):
    from kernelbench.cli.main import main

    monkeypatch.chdir(tmp_path)
    rc = main(["single", "--level", "1", "--problem-id", "8", "--backend", "triton", "--feedback", "profile",
               "--model", "openai/x", "--api-base", "http://127.0.0.1:9/v1"])
    assert rc == 2
    assert capsys.readouterr().err.strip() == ("error: --feedback profile needs --turns 2 or more (the profile goes "
                                               "into the next turn's prompt)")


def test_modal_runs_say_profiles_are_local():
    import argparse

    from kernelbench.cli.run_cmd import make_profiler

    args = argparse.Namespace(feedback="profile", turns=2, runner="modal", device=None, sandbox="auto")
    note = make_profiler(args, "triton", "fp32")(None, "src")
    assert note.text == "profile unavailable: profiles are taken with ncu on a local GPU; this run evaluates on modal"
    assert make_profiler(argparse.Namespace(feedback="verdict", turns=3), "triton", "fp32") is None


def test_the_pipeline_refuses_a_profile_mode_without_a_profiler(tmp_path):
    with pytest.raises(ValueError, match="needs a profiler"):
        refine_samples([], RunDirectory(tmp_path / "r"), None, OPTIONS, None, None, turns=2, feedback="profile")
    with pytest.raises(ValueError, match="unknown feedback 'sass'"):
        refine_samples([], RunDirectory(tmp_path / "r"), None, OPTIONS, None, None, turns=2, feedback="sass")
