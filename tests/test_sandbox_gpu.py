"""The OS sandbox on a real GPU: device nodes passed through, kernels built, timed and profiled inside it.

The CPU tests (tests/test_sandbox_exploits.py) prove what the sandbox keeps out; these prove what it must
let through: CUDA, Triton's JIT, torch's extension builder, CUPTI and the parent's build cache. History
(H100, sessions 9-10): CUDA IPC fails both from a PID namespace of the candidate's own and, in the host's,
between the candidate's uid and the reference's (the importer must be allowed to ptrace the exporter), so a
sandboxed candidate sends its outputs as host copies (transport.HOST_COPY_ENV).
"""

from __future__ import annotations

import json

import pytest

from kernelbench.evaluation import EvalJob, EvalSettings, compile_cache, evaluate_batch, isolation
from kernelbench.problems import load_builtin
from kernelbench.solutions import get_solution

pytestmark = pytest.mark.gpu


@pytest.fixture(scope="module")
def level1():
    return load_builtin([1])


def _solution(backend: str, problem_id: int) -> str:
    return get_solution(1, problem_id, backend).source


def test_host_copies_of_cuda_tensors_arrive_on_the_gpu_exact(tmp_path, monkeypatch):
    import os
    import shutil
    import tempfile
    from pathlib import Path

    import torch

    from kernelbench.evaluation import transport

    shm = tmp_path
    if os.path.isdir("/dev/shm"):  # where the arena lives in a sandbox (tmpfs, which can be page-locked)
        shm = Path(tempfile.mkdtemp(dir="/dev/shm"))
    monkeypatch.setattr(transport, "HOST_COPY_DIR", str(shm))
    monkeypatch.setattr(transport, "_arena", None)
    base = torch.randn(64, 48, device="cuda")
    ts = [base.t(), base[::2, 5:], torch.arange(10, device="cuda", dtype=torch.int64), torch.empty(0, 3, device="cuda")]
    for _ in range(2):  # the second export reuses the (page-locked) arena
        transport.begin_host_copies()
        descs, blobs = transport.encode_tensors(ts, host_copy=True)
        assert all("ipc" not in d for d in descs) and descs[0]["shm"] == transport.HOST_ARENA
        assert transport._arena is not None and transport._arena._pinned, "the arena is page-locked"
        # What the parent adds (WorkerProcess.relay_outputs), then the reference decodes.
        spec = {"path": str(shm / transport.HOST_ARENA), "uid": os.getuid()}
        descs = [{**d, "host_file": spec} if "shm" in d else d for d in descs]
        got = transport.decode_tensors(descs, blobs, torch.device("cuda:0")).tensors
        # The reader keeps one read-only mapping of the file, page-locked: each trial is one DMA, not page faults
        # and a pageable copy (scripts/bench_host_copies.py measures both).
        assert transport._reading is not None and transport._reading.pinned, "the reader's mapping is page-locked"
        for x, y in zip(ts, got):
            assert y.device.type == "cuda" and y.dtype == x.dtype and y.shape == x.shape
            assert torch.equal(x, y)
    transport._arena.close()
    transport.release_host_copy_mapping()
    shutil.rmtree(shm, ignore_errors=True)


def test_sandbox_can_be_made_with_the_gpu_passed_through():
    support = isolation.probe(True)
    assert support.available, support.message()


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
    # Loaded from the published cache: no build (the first evaluation's was built ahead by a compile worker).
    assert again.correct and again.stage_times_s["load"] < 2.0, again.stage_times_s
