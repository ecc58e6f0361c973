"""The OS sandbox on a real GPU: device nodes passed through, kernels built, timed and profiled inside it.

The CPU tests (tests/test_sandbox_exploits.py) prove what the sandbox keeps out; these prove what it must
let through: CUDA, Triton's JIT, torch's extension builder, CUPTI, CUDA IPC and the parent's build cache.
The GPU layout is opt-in (KB_SANDBOX_GPU=1) until the second test passes on a GPU machine: on an H100
(session 9) CUDA IPC failed from a PID namespace of the candidate's own, and CUDA's initialisation failed
(error 304) in the shared-namespace layout, most likely because the worker's /dev/shm folder had another uid
(fixed after the GPU time ran out).
"""

from __future__ import annotations

import json

import pytest

from kernelbench.evaluation import EvalJob, EvalSettings, compile_cache, evaluate_batch, isolation
from kernelbench.problems import load_builtin
from kernelbench.solutions import get_solution

pytestmark = pytest.mark.gpu


@pytest.fixture(autouse=True)
def _opt_in(monkeypatch):
    monkeypatch.setenv(isolation.GPU_OPT_IN_ENV, "1")
    isolation.probe.cache_clear()
    yield
    isolation.probe.cache_clear()


@pytest.fixture(scope="module")
def level1():
    return load_builtin([1])


def _solution(backend: str, problem_id: int) -> str:
    return get_solution(1, problem_id, backend).source


def test_sandbox_can_be_made_with_the_gpu_passed_through():
    support = isolation.probe(True)
    assert support.available, support.message()


@pytest.mark.xfail(reason="the GPU layout is unproven (session 9: CUDA error 304 at init, before a /dev/shm fix)",
                   strict=False)
def test_worked_solutions_pass_timed_inside_the_sandbox(level1, tmp_path, monkeypatch):
    monkeypatch.setenv(compile_cache.CACHE_ENV, str(tmp_path / "cache"))
    s = EvalSettings(sandbox="require", timing_budget_s=0.5)
    jobs = [EvalJob(level1.get(1, 8), _solution("triton", 8), s.with_(backend="triton"), 0),
            EvalJob(level1.get(1, 8), _solution("cuda", 8), s.with_(backend="cuda"), 1),
            EvalJob(level1.get(1, 10), _solution("cuda", 10), s.with_(backend="cuda"), 2),
            EvalJob(level1.get(1, 12), _solution("cuda", 12), s.with_(backend="cuda"), 3)]
    results = evaluate_batch(jobs, progress=False)
    for r in results:
        print(r.sample_id, r.verdict(), r.speedup, r.environment.isolation, r.stage_times_s,
              [(f.rule, f.severity) for f in r.guard_findings])
        assert r.correct and r.speedup is not None, r.error
        assert r.environment.isolation == "sandbox" and r.environment.network is False
        assert not [f for f in r.guard_findings if f.severity in ("warning", "error")], r.guard_findings
    # CUDA builds (the later ones built ahead by sandboxed compile workers) were published by the parent,
    # each under its source's scope with its hash.
    for job in jobs[1:]:
        metas = list((tmp_path / "cache" / f"src-{compile_cache.source_scope(job.candidate_source)}").glob("*/meta.json"))
        assert len(metas) == 1, job.problem.name
        meta = json.loads(metas[0].read_text())
        assert meta["sha256"] == compile_cache.sha256_file(metas[0].parent / f"{meta['name']}.so")
    again = evaluate_batch([jobs[1]], progress=False)[0]
    assert again.correct and again.stage_times_s["load"] < 2.0 < results[1].stage_times_s["load"]
