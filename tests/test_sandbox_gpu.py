"""The OS sandbox on a real GPU: device nodes passed through, kernels built, timed and profiled inside it.

The CPU tests (tests/test_sandbox_exploits.py) prove what the sandbox keeps out; these prove what it must
let through: CUDA, Triton's JIT, torch's extension builder, CUPTI and the parent's build cache. History
(H100, sessions 9-10): CUDA IPC fails both from a PID namespace of the candidate's own and, in the host's,
between the candidate's uid and the reference's (the importer must be allowed to ptrace the exporter), so a
sandboxed candidate sent its outputs as host copies (transport.HOST_COPY_ENV). Since session 15 they go through
a device buffer shared by file descriptor (shared_memory.py, parent/sharing.py), host copies where that fails.
"""

from __future__ import annotations

import json
import logging
import os

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


def test_a_shared_buffer_carries_cuda_tensors_exact_in_one_process():
    import torch

    from kernelbench.evaluation import transport
    from kernelbench.evaluation.worker.export import ExportArena

    dev = torch.device("cuda:0")
    base = torch.randn(64, 48, device=dev)
    ts = [base.t().contiguous(), base[::2, 5:].contiguous(), torch.arange(10, device=dev, dtype=torch.int64),
          torch.randn(3 << 20, device=dev)]  # 12 MiB: the buffer grows past its first 2 MiB
    arena = ExportArena(torch, dev)
    assert arena.share(True) is None, "the driver makes a shareable buffer"
    for _ in range(2):
        arena.begin(arena.span(ts))
        copies = [arena.copy(t) for t in ts]
        torch.cuda.synchronize()
        descs, blobs = transport.encode_tensors(copies, host_copy=True, shared=arena.shared)
        assert all("shared" in d for d in descs), descs
        imported = transport.open_shared(os.dup(arena.shared.fd), transport.shared_size(descs), dev)
        try:
            got = transport.decode_tensors(descs, blobs, dev, 0, imported).tensors
            torch.cuda.synchronize()
        finally:
            imported.close()
        for x, y in zip(ts, got):
            assert y.device.type == "cuda" and y.dtype == x.dtype and y.shape == x.shape and torch.equal(x, y)
            assert y.data_ptr() != x.data_ptr()  # the reference compares its own copy


def test_a_new_shared_buffer_takes_the_memory_pytorch_kept_cached():
    """A shared buffer is made by the driver (cuMemCreate), outside PyTorch's caching allocator: blocks the allocator
    keeps cached (a forward's temporaries) could never become it, and on the 80 GB H100 the candidate's export
    buffer was made beside 6 GiB of them. The arena gives the cache back before it makes a buffer."""
    import torch

    from kernelbench.evaluation.worker.export import ExportArena

    dev = torch.device("cuda:0")
    arena = ExportArena(torch, dev)
    assert arena.share(True) is None, "the driver makes a shareable buffer"
    t = torch.empty(256 << 20, dtype=torch.uint8, device=dev)
    del t
    assert torch.cuda.memory_reserved(dev) - torch.cuda.memory_allocated(dev) >= 256 << 20  # cached, not in use
    arena.begin(64 << 20)
    assert torch.cuda.memory_reserved(dev) - torch.cuda.memory_allocated(dev) < 256 << 20
    assert arena.shared is not None and arena.shared.size >= 64 << 20


def test_an_export_through_the_shared_buffer_is_in_it_when_the_reply_is_sent():
    """The reference reads the buffer in another process, in a CUDA context whose copies nothing orders after the
    candidate's: the export must wait for its own copies before it answers. Found on an 80 GB H100 (official level
    1, identity candidates of 6-8 GiB tensors): the last timed output's check read the input region before the
    candidate's copy had landed and failed them with "input 0 was modified in place". Here the worker's stream is
    kept busy by a spin so that its copies are still queued when the export returns on the old code; a read on
    another stream (standing for the reference's context) must find exactly what was exported."""
    import torch

    from kernelbench.evaluation import protocol
    from kernelbench.evaluation.worker.process import Worker

    w = Worker("candidate", "cuda:0")
    w.cmd_init(protocol.Init(), [])
    reply, _ = w.cmd_share(protocol.Share(enable=True, fill=None), [])
    assert reply.shared, reply.detail
    dev = w.device
    g = torch.Generator(device=dev).manual_seed(5)
    x = torch.randn(32 << 20, device=dev, generator=g)  # 128 MiB each: the copies take a while, the spin longer
    out = torch.randn(32 << 20, device=dev, generator=g)
    w.last = ([x], out)
    w.arena.begin(w.arena.span([out, x]))  # sized already (as by the trials): the export below allocates nothing
    torch.cuda.synchronize()
    torch.cuda._sleep(1_000_000_000)  # about half a second of spin on the worker's stream, ahead of its copies
    payload, blobs = w.cmd_export_last(protocol.ExportLast(), [])
    side = torch.cuda.Stream(dev)
    with torch.cuda.stream(side):  # not ordered after the worker's stream, as the reference's context is not
        buf = w.arena.shared.tensor(torch, dev)
        got = [buf[d["shared"]["offset"]:d["shared"]["offset"] + x.numel() * 4].clone()
               for d in (payload.outputs[0], payload.inputs[0])]
    torch.cuda.synchronize()
    assert torch.equal(got[0].view(torch.float32), out), "the output was read before its copy landed"
    assert torch.equal(got[1].view(torch.float32), x), "the input was read before its copy landed"
    # Nothing is exported after the last timed output: its Release gives the shared buffer back to the driver (on
    # the H100 it held 12-16 GiB through the launch trace, whose forward then ran out of memory).
    import gc
    import weakref

    shared = weakref.ref(w.arena.shared)
    size = w.arena.shared.size
    del buf, got, payload, blobs, x, out
    free_before, _ = torch.cuda.mem_get_info(dev)
    w.cmd_release(protocol.Release(), [])
    gc.collect()
    free_after, _ = torch.cuda.mem_get_info(dev)
    assert w.arena.buf is None and w.arena.shared is None and w.last is None and shared() is None
    assert free_after - free_before >= size, (free_before, free_after, size)


def test_the_reference_reads_a_sandboxed_candidates_shared_buffer():
    """The point of the design: across the sandbox's PID namespace and uid, where CUDA IPC fails."""
    from kernelbench.evaluation import protocol
    from kernelbench.evaluation.parent.workers import call, reference_call, start_worker
    from kernelbench.evaluation.sandbox import Confinement
    from kernelbench.results import Stage

    support = isolation.probe(True)
    assert support.available, support.message()
    cand = start_worker("candidate", "cuda:0", "torch", None, confinement=Confinement(support.bwrap, False, None))
    ref = start_worker("reference", "cuda:0", "torch", None)
    try:
        reply, blobs = call(cand, protocol.Share(enable=True, fill=91), protocol.ShareReply, 60, Stage.LOAD, "share")
        assert reply.shared and reply.size >= protocol.PROBE_BYTES and len(blobs.fds) == 1, reply
        check, _ = reference_call(ref, protocol.CheckShared(fill=91, size=reply.size), protocol.ShareReply, 60,
                                  "check", blobs)
        assert check.shared, check.detail
        reply, blobs = call(cand, protocol.Share(enable=True, fill=92), protocol.ShareReply, 60, Stage.LOAD, "share")
        check, _ = reference_call(ref, protocol.CheckShared(fill=93, size=reply.size), protocol.ShareReply, 60,
                                  "check", blobs)
        assert not check.shared and "does not hold" in check.detail  # the probe can fail
    finally:
        cand.kill()
        ref.kill()


@pytest.mark.parametrize("transport_mode", ["shared", "host"])
def test_sandboxed_outputs_reach_the_reference_by_either_transport(level1, tmp_path, monkeypatch, caplog,
                                                                    transport_mode):
    from kernelbench.evaluation.parent import sharing

    monkeypatch.setenv(compile_cache.CACHE_ENV, str(tmp_path / "cache"))
    monkeypatch.setenv(sharing.TRANSPORT_ENV, transport_mode)
    sharing._warned.clear()
    caplog.set_level(logging.INFO)
    s = EvalSettings(sandbox="require", timing_budget_s=0.5, backend="triton")
    results = evaluate_batch([EvalJob(level1.get(1, 8), _solution("triton", 8), s, 0)], progress=False)
    r = results[0]
    print(transport_mode, r.verdict(), r.speedup, r.stage_times_s)
    assert r.correct and r.speedup is not None and r.environment.isolation == "sandbox", r.error
    fallbacks = [rec.getMessage() for rec in caplog.records if "travel as host copies" in rec.getMessage()]
    assert not fallbacks, fallbacks  # shared: the probe passed; host: never offered
