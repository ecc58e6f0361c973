"""The timed-call fingerprint on the GPU, through torch operators and through the one-pass Triton kernel the workers
start (kernelbench.evaluation.fingerprint_kernel): the sums it claims, one read-back per call, no allocation that
grows from call to call; and for the kernel, nothing the patch detector sees changes with honest use (another Triton
kernel compiled and launched between calls included) while a replaced launcher or a recompiled kernel is caught."""

from __future__ import annotations

import warnings

import pytest
import torch

from kernelbench.evaluation import compare, fingerprint_kernel
from kernelbench.evaluation.guards import runtime as rt

pytestmark = [pytest.mark.gpu,
              pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")]


def _fingerprinter(path: str) -> compare.Fingerprinter:
    """``torch``: the default (float32 outputs summed in float32 segments); ``float64``: every output through the
    float64 buffer (``KB_FINGERPRINT=float64``); ``fused``: the one-pass kernel."""
    fp = compare.Fingerprinter(segment=0 if path == "float64" else None)
    if path == "fused":
        assert fp.enable_fused(torch.device("cuda"), force=True), "the one-pass kernel did not start"
    return fp


PATHS = pytest.mark.parametrize("path", ["torch", "float64", "fused"])
#: How far the float32 path's sums may be from the exact ones, per unit of the output's 1-norm.
GAMMA = (compare.SEGMENT - 1) * 2.0 ** -24


@PATHS
def test_sums_on_the_gpu_match_the_written_out_sums_across_chunks(path):
    torch.manual_seed(0)
    t = torch.randn(40_000_003, device="cuda")  # three chunks, the last partial
    fp = _fingerprinter(path)
    sums, bounds = fp.measure([t], (1e-2, 1e-2))
    x = t.double()
    pos = torch.arange(x.numel(), device="cuda")
    k = pos // compare.CHUNK
    offsets = torch.tensor([0] + [compare._hash32(i) % compare.CHUNK for i in range(1, 3)], device="cuda")
    first, second = compare._weights(0, compare.CHUNK, t.device), compare._weights(1 << 31, compare.CHUNK, t.device)
    for key in (0, 424242):
        a, c = compare.call_rotations(key, compare.CHUNK)
        w = first[(pos % compare.CHUNK + offsets[k] + a) % compare.CHUNK] * second[(pos % compare.CHUNK + c) % compare.CHUNK]
        got = fp.measure([t], key=key)[0]
        exact = [float(x.sum()), float((w * x).sum())]
        if path == "torch":
            err = GAMMA * float(x.abs().sum())
            assert abs(got[0] - exact[0]) <= err and abs(got[1] - exact[1]) <= err, (got, exact, err)
        else:
            assert got[:2] == pytest.approx(exact, rel=1e-9, abs=1e-6)
        del w
    assert sums[2] == compare.size_key(t)
    mag = float(x.abs().sum())
    if path == "torch":  # the float32 path's 1-norm taken 2 gammas high, and both sides' rounding of the plain sum
        mag *= 1 + 2 * GAMMA
        want = 1e-2 * x.numel() + 1e-2 * mag + GAMMA * (2 * mag + 1e-2 * x.numel() + 1e-2 * mag)
        assert bounds[0] == pytest.approx(want, rel=4 * GAMMA)
    else:
        assert bounds[0] == pytest.approx(1e-2 * x.numel() + 1e-2 * mag, rel=1e-7)
    assert bounds[1] < bounds[0] / 100, "the weighted sum's bound grows as the square root of the size"


@PATHS
def test_one_read_back_per_call_and_no_growth(path):
    torch.manual_seed(1)
    outs = [torch.randn(20_000_000, device="cuda"), torch.randn(1000, device="cuda").half()]
    fp = _fingerprinter(path)
    fp.measure(outs, (1e-2, 1e-2))  # the first call allocates the buffers
    torch.cuda.synchronize()
    before = torch.cuda.memory_allocated()
    torch.cuda.set_sync_debug_mode("warn")
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            fp.measure(outs, (1e-2, 1e-2))
    finally:
        torch.cuda.set_sync_debug_mode(0)
    syncs = [w for w in caught if "synchroniz" in str(w.message).lower()]
    assert len(syncs) == 1, [str(w.message) for w in syncs]
    torch.cuda.synchronize()
    assert torch.cuda.memory_allocated() == before


@PATHS
def test_an_honest_gpu_output_passes_and_a_stale_one_fails(path):
    torch.manual_seed(2)
    r = torch.randn(8_000_000, device="cuda")
    fp = _fingerprinter(path)
    ref, bounds = fp.measure([r], (1e-4, 1e-4))
    honest = r + (torch.rand_like(r) - 0.5) * 1e-4
    assert compare.fingerprints_match(fp.sums([honest]), ref, bounds)
    assert not compare.fingerprints_match(fp.sums([torch.randn_like(r)]), ref, bounds)


def test_fused_and_torch_paths_agree_on_many_sizes_and_keys():
    torch.manual_seed(3)
    plain, fused, segmented = _fingerprinter("float64"), _fingerprinter("fused"), _fingerprinter("torch")
    for n in (1, 7, 2048, 2049, 1 << 20, (1 << 24) + 5, 3 * (1 << 24)):
        t = torch.randn(n, device="cuda") * 2 + 0.5
        err = GAMMA * float(t.abs().double().sum())
        for key in (0, 11, 2**40 + 9):
            a, b = plain.measure([t], (1e-3, 1e-3), key), fused.measure([t], (1e-3, 1e-3), key)
            assert a[0] == pytest.approx(b[0], rel=1e-10, abs=1e-7), n
            assert a[1] == pytest.approx(b[1], rel=1e-10, abs=1e-7), n
            c = segmented.measure([t], (1e-3, 1e-3), key)
            assert abs(c[0][0] - a[0][0]) <= err and abs(c[0][1] - a[0][1]) <= err, n
            assert a[1][0] <= c[1][0] <= a[1][0] * 1.01, "bounds a little wider"
    assert fused.fused.launches >= 21


def test_fused_kernel_leaves_the_patch_snapshot_alone_and_is_caught_when_tampered():
    import triton
    import triton.language as tl

    fp = _fingerprinter("fused")
    before = rt.PatchSnapshot.take()
    assert any(k.startswith("fingerprint compiled") for k in before.entries)

    @triton.jit
    def scale(x_ptr, n, BLOCK: tl.constexpr):  # a candidate's own Triton kernel, compiled after ours
        i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        m = i < n
        tl.store(x_ptr + i, tl.load(x_ptr + i, mask=m) * 2, mask=m)

    for k in range(5):
        t = torch.randn(100_000 + k * 4, device="cuda")
        scale[(triton.cdiv(t.numel(), 1024),)](t, t.numel(), BLOCK=1024)
        fp.measure([t], (1e-2, 1e-2), key=k)
    torch.cuda.synchronize()
    assert before.changes(rt.PatchSnapshot.take()) == []

    engine = fp.fused
    # The launcher is an attribute in some Triton versions and a property over ``_run`` in others (3.6).
    name = "run" if "run" in vars(engine.compiled) else "_run"
    launcher = vars(engine.compiled)[name]
    setattr(engine.compiled, name, lambda *a, **k: launcher(*a, **k))
    try:
        assert any(k.startswith("fingerprint compiled") for k in before.changes(rt.PatchSnapshot.take()))
    finally:
        setattr(engine.compiled, name, launcher)
    assert before.changes(rt.PatchSnapshot.take()) == []
    assert fp.fused.accepts(torch.randn(4096, device="cuda")), "a device named without its index is the same device"

    # A kernel compiled anew after start (here: the JIT's caches emptied) is not the one made before candidate code.
    kernel = fingerprint_kernel._fingerprint_partials
    saved = {dev: (entry[0].copy(),) for dev, entry in kernel.device_caches.items()}
    for entry in kernel.device_caches.values():
        entry[0].clear()
    try:
        with pytest.raises(fingerprint_kernel.FusedTampered):
            fp.measure([torch.randn(5000, device="cuda")], key=1)
    finally:
        for dev, (cache,) in saved.items():
            kernel.device_caches[dev][0].clear()
            kernel.device_caches[dev][0].update(cache)


def test_a_self_removing_hook_in_the_launch_path_runs_inside_the_fingerprint_and_is_seen_only_before_it():
    """An attacker's review (session 18): each launch asks the active driver for its stream through an attribute of
    the driver object. Forward sets it to its own function; the fingerprint's launch calls it (candidate code after
    the timed call's end event: it could finish the output there), and it puts the original back. The patch check
    after the timed calls sees nothing; fingerprint_kernel.changed before the fingerprint does (timing.py)."""
    import triton.runtime as triton_runtime

    fp = _fingerprinter("fused")
    baseline = fingerprint_kernel.watched()
    before = rt.PatchSnapshot.take()
    active = triton_runtime.driver.active
    original = active.get_current_stream
    ran = []

    def hook(index):
        ran.append(index)
        active.get_current_stream = original  # gone before anything compares
        return original(index)

    active.get_current_stream = hook
    caught = fingerprint_kernel.changed(baseline)
    assert any(k.startswith("triton driver.active") for k in caught), caught
    fp.measure([torch.randn(100_000, device="cuda")], key=3)
    assert ran, "the launch did not ask the driver for its stream: the attack's premise no longer holds"
    assert before.changes(rt.PatchSnapshot.take()) == [] and fingerprint_kernel.changed(baseline) == []


def test_honest_candidates_pass_end_to_end_with_the_fused_path_on(monkeypatch):
    """Session 19: this file's in-process tests passed on an H200 while, through the evaluator, every candidate's
    timed call failed FusedTampered (the watch walked the kernel's module namespace, where the pinned list grows)
    and a worker's Init could take minutes. So: real workers, the fused path on, honest candidates of three backends
    (torch identity, the worked Triton and CUDA solutions): correct, timed, no error finding, and the watch's
    per-call check affordable."""
    import time

    from kernelbench.evaluation import EvalJob, EvalSettings, evaluate_batch
    from kernelbench.problems import load_builtin
    from kernelbench.problems.contract import identity_candidate
    from kernelbench.solutions import get_solution

    monkeypatch.setenv(compare.FINGERPRINT_ENV, "fused")  # read by the workers the batch starts
    relu = load_builtin([1]).get(1, 8)
    s = EvalSettings(backend="torch", timing_budget_s=0.5, stage_timeout_s=60.0)
    jobs = [EvalJob(relu, identity_candidate(relu.code), s, 0),
            EvalJob(relu, get_solution(1, 8, "triton").source, s.with_(backend="triton"), 1),
            EvalJob(relu, get_solution(1, 8, "cuda").source, s.with_(backend="cuda"), 2)]
    t0 = time.monotonic()
    results = evaluate_batch(jobs, progress=False)
    for r in results:
        print(r.backend, r.verdict(), r.error.one_line() if r.error else "", r.speedup,
              {k: round(v, 2) for k, v in r.stage_times_s.items()})
    for r in results:
        assert r.correct and r.speedup is not None, r.error.one_line() if r.error else r.timing_note
        assert not [f for f in r.guard_findings if f.severity == "error"], r.guard_findings
    assert time.monotonic() - t0 < 240  # (Init hung for 180 s per worker before the walk was bounded)

    fp = _fingerprinter("fused")
    fp.measure([torch.randn(1 << 20, device="cuda")], (1e-2, 1e-2), key=1)
    baseline = fingerprint_kernel.Baseline.take()
    t0 = time.perf_counter()
    for _ in range(20):
        assert baseline.changed() == []
    per_check_ms = (time.perf_counter() - t0) / 20 * 1e3
    print(f"watch: {len(baseline.entries)} entries, {per_check_ms:.3f} ms per check")
    assert per_check_ms < 5.0, per_check_ms  # 32 ms walked whole on an H200 (session 19)
