"""Unit tests of the evaluator's parts that need no worker process: channel, transport,
comparison, fingerprints, seeds, timing decisions, environment scrubbing, runtime guards."""

from __future__ import annotations

import math
import os
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import torch

from kernelbench.evaluation import compare, timing
from kernelbench.evaluation.channel import Channel, ChannelClosed, ChannelTimeout, ProtocolError
from kernelbench.evaluation.guards import runtime as rt
from kernelbench.evaluation.sandbox import is_secret_name, scrubbed_environment
from kernelbench.evaluation.seeds import derive_seed
from kernelbench.evaluation.transport import TransportError, decode_tensors, encode_tensors, flatten


def _pair():
    a, b = socket.socketpair()
    return Channel(a), Channel(b)


# ------------------------------------------------------------------ channel
def test_channel_round_trip_with_blobs():
    a, b = _pair()
    a.send({"cmd": "x", "n": 3}, [b"abc", bytearray(b"\x00" * 5)])
    msg, blobs = b.recv(timeout=5)
    assert msg == {"cmd": "x", "n": 3}
    assert [bytes(x) for x in blobs] == [b"abc", b"\x00" * 5]


def test_channel_timeout_and_close():
    a, b = _pair()
    with pytest.raises(ChannelTimeout):
        b.recv(timeout=0.2)
    a.close()
    with pytest.raises(ChannelClosed):
        b.recv(timeout=1)


def test_channel_rejects_oversized_and_malformed_frames():
    a, b = _pair()
    a.sock.sendall((1 << 40).to_bytes(8, "big"))
    with pytest.raises(ProtocolError):
        b.recv(timeout=1)
    a, b = _pair()
    a.sock.sendall((3).to_bytes(8, "big") + b"{{{")
    with pytest.raises(ProtocolError):
        b.recv(timeout=1)


def test_channel_large_blob_across_threads():
    a, b = _pair()
    payload = bytes(range(256)) * 40000
    t = threading.Thread(target=lambda: a.send({"k": 1}, [payload]))
    t.start()
    msg, blobs = b.recv(timeout=10)
    t.join()
    assert bytes(blobs[0]) == payload


# ------------------------------------------------------------------ transport (CPU path)
def test_transport_round_trip_preserves_values_and_dtypes():
    ts = [torch.randn(3, 4), torch.arange(6, dtype=torch.int64).reshape(2, 3), torch.randn(5).to(torch.bfloat16),
          torch.tensor(True), torch.empty(0, 3)]
    descs, blobs = encode_tensors(ts)
    got = decode_tensors(descs, blobs, torch.device("cpu")).tensors
    for x, y in zip(ts, got):
        assert x.dtype == y.dtype and x.shape == y.shape
        assert torch.equal(x, y)


@pytest.mark.parametrize("mutate, match", [
    (lambda d: d[0].update(dtype="float128"), "dtype"),
    (lambda d: d[0].update(shape=[-1, 2]), "negative"),
    (lambda d: d[0].update(shape=[1000, 1000]), "bytes"),
    (lambda d: d[0].update(blob=7), "blob index"),
])
def test_transport_rejects_lies(mutate, match):
    descs, blobs = encode_tensors([torch.randn(2, 2)])
    mutate(descs)
    with pytest.raises(TransportError, match=match):
        decode_tensors(descs, blobs, torch.device("cpu"))


def test_flatten_records_exact_class():
    class Sub(torch.Tensor):
        pass

    tree, leaves = flatten((torch.zeros(1), [torch.zeros(1).as_subclass(Sub), 3]))
    assert tree["t"] == "tuple"
    assert tree["items"][0]["cls"] == "torch.Tensor"
    assert tree["items"][1]["items"][0]["cls"].endswith("Sub")
    assert tree["items"][1]["items"][1] == {"t": "scalar", "v": 3}


# ------------------------------------------------------------------ comparison
def test_compare_tensor_tolerance_edges():
    r = torch.tensor([1.0, 100.0, 0.0])
    ok = r + torch.tensor([0.9e-4 + 0.9e-4, 0.9e-4 + 0.9e-2, 0.9e-4])
    assert compare.compare_tensor(ok, r, 1e-4, 1e-4).ok
    bad = r + torch.tensor([0.0, 0.0, 2e-4])
    res = compare.compare_tensor(bad, r, 1e-4, 1e-4)
    assert not res.ok and "1 of 3 elements" in res.reason and "(2,)" in res.reason


def test_compare_tensor_nan_placement_shape_dtype():
    r = torch.tensor([1.0, float("nan"), float("inf")])
    assert compare.compare_tensor(r.clone(), r, 1e-4, 1e-4).ok
    assert "NaN/Inf" in compare.compare_tensor(torch.tensor([1.0, 2.0, float("inf")]), r, 1e-4, 1e-4).reason
    assert "NaN/Inf" in compare.compare_tensor(torch.tensor([1.0, float("nan"), -float("inf")]), r, 1, 1).reason
    assert "shape" in compare.compare_tensor(torch.zeros(2), torch.zeros(3), 1, 1).reason
    assert "dtype" in compare.compare_tensor(torch.zeros(3, dtype=torch.float64), torch.zeros(3), 1, 1).reason
    assert "differ" in compare.compare_tensor(torch.tensor([1, 2]), torch.tensor([1, 3]), 1, 1).reason


def test_compare_outputs_structure():
    ref = (torch.ones(2), torch.zeros(3))
    tree, leaves = flatten((torch.ones(2), torch.zeros(3)))
    assert compare.compare_outputs(tree, leaves, ref, 1e-4, 1e-4).ok
    tree, leaves = flatten(torch.ones(2))
    res = compare.compare_outputs(tree, leaves, ref, 1e-4, 1e-4)
    assert not res.ok and "tuple(Tensor, Tensor)" in res.reason


def test_fingerprints_accept_tolerable_noise_and_reject_wrong_outputs():
    torch.manual_seed(0)
    r = torch.randn(10000)
    bounds = compare.fingerprint_bounds([r], 1e-4, 1e-4)
    noisy = r + (torch.rand(10000) - 0.5) * 1e-4  # every element within tolerance
    assert compare.fingerprints_match(compare.fingerprint([noisy]), compare.fingerprint([r]), bounds)
    stale = torch.randn(10000)  # e.g. an output cached from other inputs
    assert not compare.fingerprints_match(compare.fingerprint([stale]), compare.fingerprint([r]), bounds)
    flipped = r.clone()
    flipped[:50] = -flipped[:50]
    assert not compare.fingerprints_match(compare.fingerprint([flipped]), compare.fingerprint([r]), bounds)


def test_fingerprints_in_small_chunks_reuse_buffers_and_still_discriminate():
    torch.manual_seed(1)
    r = torch.randn(1000)
    fp = compare.Fingerprinter(chunk=64)
    bounds = fp.bounds([r], 1e-4, 1e-4)
    assert bounds == pytest.approx(compare.fingerprint_bounds([r], 1e-4, 1e-4))
    buf = fp._buf
    ok = fp.sums([r + 5e-5])
    assert buf is not None and fp._buf is buf, "no new allocation between calls"
    assert compare.fingerprints_match(ok, fp.sums([r]), bounds)
    assert not compare.fingerprints_match(fp.sums([torch.randn(1000)]), fp.sums([r]), bounds)
    assert fp.sums([torch.zeros(0)]) == [0.0, 0.0, compare.size_key(torch.zeros(0))]


def test_a_cpu_tensor_stays_on_the_cpu_when_decoded():
    descs, blobs = encode_tensors([torch.ones(3)])
    assert descs[0]["device"] == "cpu"
    (t,) = decode_tensors(descs, blobs, torch.device("cpu")).tensors
    assert t.device.type == "cpu"
    descs[0]["device"] = "cuda:0"
    with pytest.raises(TransportError, match="CPU evaluation"):
        decode_tensors(descs, blobs, torch.device("cpu"))


def test_tensors_equal_detects_in_place_changes():
    a = torch.randn(100)
    b = a.clone()
    assert compare.tensors_equal(a, b)
    b[3] = 0
    assert not compare.tensors_equal(a, b)


# ------------------------------------------------------------------ seeds, timing decisions
def test_seeds_depend_on_secret_and_trial():
    s1, s2 = b"a" * 32, b"b" * 32
    assert derive_seed(s1, "correct", 0) == derive_seed(s1, "correct", 0)
    assert derive_seed(s1, "correct", 0) != derive_seed(s1, "correct", 1)
    assert derive_seed(s1, "correct", 0) != derive_seed(s2, "correct", 0)
    assert 0 <= derive_seed(s1, "x") < 2**62


def test_warmup_waits_for_clocks_to_settle():
    ramp = [2.0, 1.8, 1.5, 1.3, 1.1, 1.0, 1.0, 1.0, 1.0, 1.0]
    mid = timing.WARMUP_MAX_S / 2
    assert not timing.warmup_settled(ramp, elapsed_s=mid)  # previous window still falling
    flat = ramp + [1.0] * 5
    assert timing.warmup_settled(flat, elapsed_s=mid)
    assert not timing.warmup_settled([1.0] * 12, elapsed_s=0.001)  # too short to trust
    assert timing.warmup_settled([5.0, 1.0] * 3, elapsed_s=timing.WARMUP_MAX_S)  # budget spent


def test_block_size_and_abba_order():
    assert timing.block_size(0.001) == int(timing.BLOCK_TARGET_S / 0.001)
    assert timing.block_size(10.0) == timing.BLOCK_MIN_CALLS
    assert timing.block_size(1e-9) == timing.BLOCK_MAX_CALLS
    assert timing.block_order(0) == ("reference", "candidate")
    assert timing.block_order(1) == ("candidate", "reference")


def test_stop_rule_on_seeded_samples():
    import random

    rnd = random.Random(1)
    rule = timing.StopRule(target_rse=0.005, min_trials=20, max_trials=2000, budget_s=10)
    tight = [1.0 + rnd.gauss(0, 0.005) for _ in range(40)]
    noisy = [1.0 + abs(rnd.gauss(0, 0.3)) for _ in range(40)]
    assert timing.should_stop(rule, tight, tight, 0.1, 0.1)[0]
    assert not timing.should_stop(rule, noisy, tight, 0.1, 0.1)[0]
    assert not timing.should_stop(rule, tight[:10], tight[:10], 0.1, 0.1)[0]
    stop, why = timing.should_stop(rule, noisy, noisy, 11, 0.1)
    assert stop and "budget" in why
    # precision alone stops only after min_rounds and a whole ABBA cycle
    cycles = timing.StopRule(target_rse=0.005, min_trials=20, max_trials=2000, budget_s=10, min_rounds=4)
    assert not timing.should_stop(cycles, tight, tight, 0.1, 0.1, rounds=2)[0]
    assert not timing.should_stop(cycles, tight, tight, 0.1, 0.1, rounds=5)[0]
    assert timing.should_stop(cycles, tight, tight, 0.1, 0.1, rounds=6)[0]
    assert timing.should_stop(cycles, noisy, noisy, 11, 0.1, rounds=1)[0]  # the budget still ends it


def test_precise_blocks_of_three_stop_after_the_minimum_rounds_by_default():
    """Session 25: the default minimum of timed calls is the protocol's own (four rounds of the smallest block), so
    problems timed in blocks of 3 stop after 4 rounds (12 calls) when precise, not 8; baselines keep 20."""
    from kernelbench.baselines.measure import BASELINE_MIN_TRIALS, baseline_settings
    from kernelbench.evaluation.parent.candidate_timing import stop_rule
    from kernelbench.evaluation.settings import EvalSettings

    s = EvalSettings()
    assert s.min_timing_trials == timing.MIN_ROUNDS * timing.BLOCK_MIN_CALLS == timing.MIN_TIMED_CALLS
    assert baseline_settings().min_timing_trials == BASELINE_MIN_TRIALS == 20
    assert baseline_settings(min_trials=7).min_timing_trials == 7
    rule = stop_rule(s)  # the evaluator's, as time_candidate builds it
    calls = [5.0, 5.001, 4.999] * 8  # 8 blocks of 3, precise
    block = timing.BLOCK_MIN_CALLS
    stops = [r for r in range(1, 9) if timing.should_stop(rule, calls[:r * block], calls[:r * block], 0.1, 0.1, r,
                                                          block_calls=block)[0]]
    assert stops[0] == timing.MIN_ROUNDS == 4
    old = stop_rule(s.with_(min_timing_trials=20))
    assert [r for r in range(1, 9) if timing.should_stop(old, calls[:r * block], calls[:r * block], 0.1, 0.1, r,
                                                         block_calls=block)[0]][0] == 8


def test_side_stream_gap():
    ev = [1.0] * 20
    honest = [1.015] * 20
    assert not timing.side_stream_gap_suspicious(ev, honest, ev, honest)[0]
    hidden_ev = [0.01] * 20  # the timed stream did nothing...
    assert timing.side_stream_gap_suspicious(hidden_ev, honest, ev, honest)[0]  # ...the work ran elsewhere


# ------------------------------------------------------------------ environment scrubbing
def test_scrubbed_environment_drops_secrets():
    base = {"OPENAI_API_KEY": "x", "HF_TOKEN": "y", "MODAL_TOKEN_ID": "z", "AWS_SECRET_ACCESS_KEY": "w",
            "MY_PASSWORD": "p", "PATH": "/bin", "CUDA_VISIBLE_DEVICES": "0", "TOKENIZERS_PARALLELISM": "false"}
    env = scrubbed_environment(base, extra={"TRITON_INTERPRET": "1"})
    assert env == {"PATH": "/bin", "CUDA_VISIBLE_DEVICES": "0", "TOKENIZERS_PARALLELISM": "false",
                   "TRITON_INTERPRET": "1"}
    assert is_secret_name("anthropic_api_key") and not is_secret_name("HOME")


# ------------------------------------------------------------------ runtime guard helpers
def test_own_kernel_names_from_cuda_and_triton_sources():
    src = '''
import triton
import triton.language as tl
cuda_src = """
__global__ void __launch_bounds__(256) fused_relu(const float* x) {}
template <typename T> __global__ void softmax_rows(T* y) {}
"""
@triton.jit
def add_kernel(x_ptr):
    pass
@triton.autotune(configs=[], key=[])
@triton.jit
def mm_kernel(a):
    pass
def helper():
    pass
'''
    assert rt.own_kernel_names(src) == {"fused_relu", "softmax_rows", "add_kernel", "mm_kernel"}


def test_classify_launches_and_findings():
    kernels = [{"name": "spin_kernel", "stream": 7, "dur_us": 1000},
               {"name": "void fused_relu<float>(float const*)", "stream": 7, "dur_us": 30},
               {"name": "void at::native::vectorized_elementwise_kernel<4, at::native::AddFunctor>", "stream": 7,
                "dur_us": 10}]
    rep = rt.classify_launches(kernels, {"fused_relu"}, 7)
    assert rep.own_kernels == ["void fused_relu<float>(float const*)"]
    assert math.isclose(rep.own_share, 0.75)
    assert [f.severity for f in rt.launch_findings(rep, "cuda")] == ["info"]
    none = rt.classify_launches(kernels[2:], {"fused_relu"}, 7)
    assert [f.rule for f in rt.launch_findings(none, "cuda")] == ["no-own-kernel"]
    side = rt.classify_launches([{"name": "fused_relu", "stream": 9, "dur_us": 5}], {"fused_relu"}, 7)
    assert [(f.rule, f.severity) for f in rt.launch_findings(side, "triton") if f.rule == "side-stream"] == \
        [("side-stream", "error")]
    # A library's internal stream (cuDNN joins it back by events) is reported, not failed.
    lib = rt.classify_launches([{"name": "fused_relu", "stream": 7, "dur_us": 5},
                                {"name": "cudnn::bn_fw_tr_1C11_kernel_NCHW", "stream": 13, "dur_us": 9}],
                               {"fused_relu"}, 7)
    assert [(f.rule, f.severity) for f in rt.launch_findings(lib, "cuda") if f.rule == "side-stream"] == \
        [("side-stream", "warning")]


def test_patch_snapshot_sees_replaced_functions_and_code():
    import time as _time

    before = rt.PatchSnapshot.take()
    original = _time.perf_counter
    try:
        _time.perf_counter = lambda: 0.0
        assert "time.perf_counter" in before.changes(rt.PatchSnapshot.take())
    finally:
        _time.perf_counter = original
    assert before.changes(rt.PatchSnapshot.take()) == []
    target = torch.cuda.Event.record
    saved = target.__code__
    try:
        target.__code__ = saved.replace(co_consts=saved.co_consts + ("patched",))
        assert "torch.cuda.Event.record" in before.changes(rt.PatchSnapshot.take())
    finally:
        target.__code__ = saved


def test_patch_snapshot_sees_the_launch_traces_profiler_replaced():
    """The launch trace runs under torch.autograd.profiler.profile (worker/trace.py: kineto_profile), after candidate
    code: a fake profiler there would report a clean trace."""
    from torch.autograd import profiler

    before = rt.PatchSnapshot.take()
    cls, exporter = profiler.profile, profiler.profile.export_chrome_trace
    try:
        profiler.profile = type("profile", (), {})
        assert "torch.autograd.profiler.profile" in before.changes(rt.PatchSnapshot.take())
        profiler.profile = cls
        cls.export_chrome_trace = lambda self, path: None
        assert "torch.autograd.profiler.profile.export_chrome_trace" in before.changes(rt.PatchSnapshot.take())
    finally:
        profiler.profile, cls.export_chrome_trace = cls, exporter
    assert before.changes(rt.PatchSnapshot.take()) == []


def test_the_launch_traces_profiler_imports_neither_inductor_nor_dynamo(tmp_path):
    """torch.profiler.profile's start asks hasattr(torch, "_inductor"), which imports torch._inductor and torch._dynamo:
    4-5 s of every worker's start on the GPU machines (session 22), where each worker runs the profiler once as it
    starts. The trace's profiler must not; in a fresh interpreter, so nothing imported them before."""
    code = ("import sys, torch\n"
            "from kernelbench.evaluation.worker.trace import kineto_profile\n"
            "with kineto_profile(torch, cuda=False) as prof:\n"
            "    torch.ones(8).add_(1)\n"
            f"prof.export_chrome_trace({str(tmp_path / 'trace.json')!r})\n"
            "print(sorted(m for m in ('torch._inductor', 'torch._dynamo') if m in sys.modules))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300,
                         cwd=str(Path(__file__).resolve().parents[1]))
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip().splitlines()[-1] == "[]"
    assert "traceEvents" in (tmp_path / "trace.json").read_text()


def test_export_arena_packs_copies_aligned_and_falls_back_to_clones():
    from kernelbench.evaluation.worker import ExportArena

    arena = ExportArena(torch, torch.device("cpu"))
    a, b = torch.randn(3, 5), torch.arange(7, dtype=torch.int64)
    arena.begin(ExportArena.span([a, b]))
    first = arena.buf
    ca, cb = arena.copy(a), arena.copy(b)
    assert torch.equal(ca, a) and torch.equal(cb, b) and cb.dtype == torch.int64
    # both live in the one buffer, each start aligned
    base = first.data_ptr()
    assert ca.data_ptr() == base and (cb.data_ptr() - base) % ExportArena.ALIGN == 0
    # no room left: a clone outside the buffer, still equal
    c = torch.ones(4)
    cc = arena.copy(c)
    assert torch.equal(cc, c) and not (base <= cc.data_ptr() < base + first.numel())
    # the next export reuses the same buffer
    arena.begin(ExportArena.span([a]))
    assert arena.buf is first and arena.copy(a).data_ptr() == base
    # a larger export replaces it
    big = torch.randn(1000)
    arena.begin(ExportArena.span([big]))
    assert arena.buf is not first and torch.equal(arena.copy(big), big)


def test_flatten_keeps_no_reference_cycle_to_the_outputs():
    """Outputs must die with their last reference, not when the cyclic collector next runs."""
    import gc
    import weakref

    from kernelbench.evaluation import transport

    gc.disable()
    try:
        out = (torch.ones(3), [torch.zeros(2), 1.5])
        tree, leaves = transport.flatten(out)
        assert len(leaves) == 2 and tree["t"] == "tuple"
        probe = weakref.ref(leaves[0])
        del out, leaves, tree
        assert probe() is None
    finally:
        gc.enable()


def test_comparing_outputs_keeps_no_reference_cycle_to_either_sides_tensors():
    """The reference compares multi-gigabyte outputs five times per job: a cycle holding them (the comparison's
    walker was a closure calling itself, holding both sides' tensors) kept each trial's copies alive until the
    cyclic collector ran, and official level-1 problems of 7.5 GB tensors ran out of memory on an 80 GB H100."""
    import gc
    import weakref

    from kernelbench.evaluation import compare, transport

    gc.disable()
    try:
        ref_out = (torch.ones(3), [torch.zeros(2), 1.5])
        cand = (torch.ones(3), [torch.zeros(2), 1.5])
        tree, leaves = transport.flatten(cand)
        probes = [weakref.ref(t) for t in leaves] + [weakref.ref(ref_out[0]), weakref.ref(ref_out[1][0])]
        assert compare.compare_outputs(tree, leaves, ref_out, 1e-5, 1e-5).ok
        bad = [torch.ones(3), torch.ones(2)]
        assert not compare.compare_outputs(tree, bad, ref_out, 1e-5, 1e-5).ok
        probes.append(weakref.ref(bad[1]))
        del cand, leaves, ref_out, bad
        assert [p() is None for p in probes] == [True] * len(probes)
    finally:
        gc.enable()


def test_launch_cushion_default_override_and_bad_values():
    assert timing.launch_cushion_us({}) == timing.LAUNCH_CUSHION_US > 0
    assert timing.launch_cushion_us({timing.LAUNCH_CUSHION_ENV: " "}) == timing.LAUNCH_CUSHION_US
    assert timing.launch_cushion_us({timing.LAUNCH_CUSHION_ENV: "0"}) == 0
    assert timing.launch_cushion_us({timing.LAUNCH_CUSHION_ENV: "350"}) == 350
    for bad in ("-5", "1.5", "lots"):
        with pytest.raises(ValueError, match=timing.LAUNCH_CUSHION_ENV):
            timing.launch_cushion_us({timing.LAUNCH_CUSHION_ENV: bad})


def test_cushion_cycles_scale_from_the_calibration_spin():
    # 200 000 cycles took 0.1 ms (2 GHz): 200 us needs 400 000 cycles, 50 us 100 000.
    assert timing.cushion_cycles(200, 200_000, 0.1) == 400_000
    assert timing.cushion_cycles(50, 200_000, 0.1) == 100_000
    assert timing.cushion_cycles(0, 200_000, 0.1) == 0  # off
    assert timing.cushion_cycles(200, 200_000, 0.0) == 0  # no usable calibration: no spin rather than a wild one
    assert timing.cushion_cycles(1, 10, 1000.0) == 1  # never rounds a requested cushion down to nothing


# ------------------------------------------------------------------ transport (host copies of a sandboxed candidate)
def test_host_copies_round_trip_and_refuse_links_other_owners_short_files_and_fifos(tmp_path):
    from kernelbench.evaluation import transport

    arena = transport.HostArena(str(tmp_path / "kbx-arena"))
    x = torch.randn(6, 5)[:, 1:]  # not contiguous: the copy is
    y = torch.arange(7, dtype=torch.int64)
    ox, oy = arena.append(x), arena.append(y)
    assert ox == 0 and oy % 4096 == 0 and oy >= x.numel() * 4
    path, me, cpu = str(tmp_path / "kbx-arena"), os.getuid(), torch.device("cpu")
    spec = {"path": path, "uid": me}
    assert torch.equal(transport._read_host_copy(spec, ox, 96, cpu).view(torch.float32).reshape(6, 4), x)
    assert torch.equal(transport._read_host_copy(spec, oy, 56, cpu).view(torch.int64), y)
    arena.reset()  # the next export starts again at the beginning of the same file
    assert arena.append(y) == 0 and torch.equal(transport._read_host_copy(spec, 0, 56, cpu).view(torch.int64), y)
    got = transport._read_host_copy(spec, 0, 56, cpu)
    arena.reset()
    arena.append(torch.zeros(7, dtype=torch.int64))
    assert torch.equal(got.view(torch.int64), y)  # what was read is the reference's own copy
    big = torch.ones(1 << 19, dtype=torch.float64)  # 4 MiB: the arena grows
    assert arena.append(big) == 4096 and arena.size >= 4096 + big.numel() * 8
    assert torch.equal(transport._read_host_copy(spec, 4096, big.numel() * 8, cpu).view(torch.float64), big)
    assert transport._reading is None  # without a GPU nothing is mapped: the bytes are read
    arena.close()
    with pytest.raises(transport.TransportError, match="empty tensor"):
        transport._read_host_copy(spec, 0, 0, cpu)
    with pytest.raises(transport.TransportError, match="holds"):
        transport._read_host_copy(spec, os.path.getsize(path) - 4, 8, cpu)
    with pytest.raises(transport.TransportError, match="offset"):
        transport._read_host_copy(spec, -1, 8, cpu)
    with pytest.raises(transport.TransportError, match="regular file of the candidate"):
        transport._read_host_copy({"path": path, "uid": me + 1}, 0, 8, cpu)
    secret = tmp_path / "secret"
    secret.write_bytes(b"CANARY!!")
    (tmp_path / "link").symlink_to(secret)
    with pytest.raises(transport.TransportError, match="cannot be opened"):
        transport._read_host_copy({"path": str(tmp_path / "link"), "uid": me}, 0, 8, cpu)
    with pytest.raises(transport.TransportError, match="bad host copy"):
        transport._read_host_copy({"path": 3}, 0, 8, cpu)
    os.mkfifo(tmp_path / "fifo")  # a FIFO in the arena's place: refused at once, it does not hang the reference
    t0 = time.monotonic()
    with pytest.raises(transport.TransportError, match="regular file of the candidate"):
        transport._read_host_copy({"path": str(tmp_path / "fifo"), "uid": me}, 0, 8, cpu)
    assert time.monotonic() - t0 < 5
    # A description naming a host file is for a CUDA tensor on a CUDA evaluation only.
    with pytest.raises(transport.TransportError, match="CUDA evaluation"):
        decode_tensors([{"dtype": "float32", "shape": [2], "device": "cuda:0", "offset": 0,
                         "host_file": {"path": str(secret), "uid": me}}], [], cpu)


def test_a_file_that_ends_while_it_is_read_is_an_error_not_a_crash(tmp_path):
    from kernelbench.evaluation import transport

    f = tmp_path / "kbx-arena"
    f.write_bytes(b"x" * 100)
    fd = os.open(f, os.O_RDONLY)
    try:
        assert bytes(transport._pread(fd, 10, 50).numpy()) == b"x" * 50
        os.truncate(f, 30)  # shrunk after the size was checked
        with pytest.raises(transport.TransportError, match="ended after 30 bytes"):
            transport._pread(fd, 10, 50)
    finally:
        os.close(fd)


def test_the_kept_mapping_is_reused_remapped_and_never_taken_for_another_file(tmp_path):
    """What a GPU reference keeps (tested unpinned here): one mapping per file, of the part a comparison reads."""
    from kernelbench.evaluation import transport

    cpu = torch.device("cpu")

    def write(path, t):
        arena = transport.HostArena(str(path))
        arena.reset()
        arena.append(t)
        arena.close()

    def kept(path, extent):
        fd = os.open(path, os.O_RDONLY)
        try:
            return transport.kept_mapping(fd, os.fstat(fd), str(path), extent, cpu, pin=False)
        finally:
            os.close(fd)

    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    a, b = tmp_path / "a" / "kbx-arena", tmp_path / "b" / "kbx-arena"
    first, second = torch.full((16,), 1.0), torch.full((16,), 2.0)
    write(a, first)
    write(b, second)
    m = kept(a, 64)
    assert m.length == 4096 and torch.equal(m.read(0, 64, cpu).view(torch.float32), first)  # only what is read
    assert kept(a, 100) is m  # reused while the file and the extent fit
    with pytest.raises(transport.TransportError, match="outside its mapping"):
        m.read(4000, 200, cpu)
    m2 = kept(a, 8192)  # a comparison that reads further maps again
    assert m2 is not m and m.buf is None and m2.length == 8192 and transport._reading is m2
    write(a, second)  # rewritten in place (same file, same size): the shared mapping shows the new bytes
    assert kept(a, 64) is m2 and torch.equal(m2.read(0, 64, cpu).view(torch.float32), second)
    mb = kept(b, 64)  # another worker's file of the same size
    assert mb is not m2 and m2.buf is None
    write(a, first)
    assert kept(a, 64) is not mb  # back to a: mapped afresh
    os.unlink(a)  # a new file where the mapped one was (its inode is still held by the mapping)
    write(a, second)
    assert torch.equal(kept(a, 64).read(0, 64, cpu).view(torch.float32), second)
    big = torch.zeros(1 << 20)  # the arena grows: a new size is a new mapping
    old = transport._reading
    arena = transport.HostArena(str(a))
    arena.append(big)
    arena.close()
    assert kept(a, 64) is not old
    transport.release_host_copy_mapping()
    assert transport._reading is None


@pytest.mark.parametrize("field, value", [("timing_budget_s", -1.0), ("timing_budget_s", 0.0),
                                          ("timing_budget_s", float("nan")), ("stage_timeout_s", -5.0)])
def test_settings_refuse_a_budget_or_timeout_that_is_not_positive(field, value):
    from kernelbench.evaluation.settings import EvalSettings

    with pytest.raises(ValueError, match=field):
        EvalSettings(**{field: value})


@pytest.mark.parametrize("value", ["-1", "0", "nan", "soon"])
def test_cli_refuses_a_timing_budget_that_is_not_positive(value, tmp_path):
    import subprocess
    import sys

    kernel = tmp_path / "k.py"
    kernel.write_text("pass\n")
    out = subprocess.run([sys.executable, "-m", "kernelbench.cli.main", "eval", "--level", "1", "--problem-id", "1",
                          "--kernel", str(kernel), "--timing-budget", value], capture_output=True, text=True)
    assert out.returncode == 2 and "--timing-budget" in out.stderr and "expected a number" in out.stderr, out.stderr


def test_the_reference_refuses_descriptions_that_claim_far_more_than_its_own_outputs_unread():
    """Claims beyond CLAIM_FACTOR times the reference's bytes are refused before anything is read (the candidate
    cannot make the trusted reference allocate, read or page-lock memory at will); a wrong dtype within it is still
    read and named."""
    from kernelbench.evaluation import protocol
    from kernelbench.evaluation.seeds import INIT_SEED
    from kernelbench.evaluation.worker.process import CLAIM_FACTOR, CLAIM_SLACK, Worker

    code = ("import torch\nimport torch.nn as nn\n\nclass Model(nn.Module):\n    def forward(self, x):\n"
            "        return torch.relu(x)\n\ndef get_inputs():\n    return [torch.randn(64, 32)]\n\n"
            "def get_init_inputs():\n    return []\n")
    w = Worker("reference", "cpu")
    w.cmd_init(protocol.Init(), [])
    w.cmd_setup(protocol.Setup(code=code, precision="fp32", atol=1e-4, rtol=1e-4, init_seed=INIT_SEED, probe_seed=None,
                               ieee_fp32=True, compile_mode=None), [])

    def compare(out_desc, blob, in_shape=(64, 32)):
        w.cmd_run(protocol.Run(seed=1, fwd_seed=2, slot=0, poison=False), [])
        x, _ = w.slots["0"]
        ins, in_blobs = encode_tensors(list(x))
        ins[0]["blob"] = 1
        ins[0]["shape"] = list(in_shape)
        reply, _ = w.cmd_compare(protocol.Compare(slot=0, tree={"t": "tensor", "i": 0, "cls": "torch.Tensor"},
                                                  outputs=[out_desc], inputs=ins), [blob, *in_blobs])
        return reply

    huge = (CLAIM_FACTOR * 64 * 32 * 4 + CLAIM_SLACK) // 4 + 1
    reply = compare({"dtype": "float32", "shape": [huge], "device": "cpu", "blob": 0}, b"")
    assert not reply.passed and "far more than the reference's 8192" in reply.reason
    reply = compare({"dtype": "float32", "shape": [64, 32], "device": "cpu", "blob": 0}, bytes(8192), in_shape=(huge,))
    assert not reply.passed and "inputs claim" in reply.reason
    # Twice the bytes (float64 for float32): read, and the comparison says what is wrong.
    reply = compare({"dtype": "float64", "shape": [64, 32], "device": "cpu", "blob": 0}, bytes(16384))
    assert not reply.passed and "dtype torch.float64, expected torch.float32" in reply.reason
    # Host copies placed far beyond what the outputs and inputs can fill are refused too.
    far = {"dtype": "float32", "shape": [64, 32], "device": "cuda:0", "offset": 1 << 40,
           "host_file": {"path": "/nonexistent", "uid": 0}}
    reply = compare(far, b"")
    assert not reply.passed and "beyond what its outputs and inputs can fill" in reply.reason


def test_the_reference_lets_go_of_the_kept_mapping_after_the_last_comparison_and_at_a_new_problem(tmp_path):
    from kernelbench.evaluation import protocol, transport
    from kernelbench.evaluation.seeds import INIT_SEED
    from kernelbench.evaluation.worker.process import Worker

    f = tmp_path / "kbx-arena"
    f.write_bytes(bytes(8192))

    def keep():
        fd = os.open(f, os.O_RDONLY)
        try:
            assert transport.kept_mapping(fd, os.fstat(fd), str(f), 64, torch.device("cpu"), pin=False) is not None
        finally:
            os.close(fd)
        assert transport._reading is not None

    code = ("import torch\nimport torch.nn as nn\n\nclass Model(nn.Module):\n    def forward(self, x):\n"
            "        return x * 2\n\ndef get_inputs():\n    return [torch.randn(4)]\n\ndef get_init_inputs():\n"
            "    return []\n")
    setup = protocol.Setup(code=code, precision="fp32", atol=1e-4, rtol=1e-4, init_seed=INIT_SEED, probe_seed=None,
                           ieee_fp32=True, compile_mode=None)
    w = Worker("reference", "cpu")
    w.cmd_init(protocol.Init(), [])
    keep()
    w.cmd_setup(setup, [])
    assert transport._reading is None  # a new problem: the last problem's candidate is gone
    w.cmd_run(protocol.Run(seed=1, fwd_seed=2, slot=0, poison=False), [])
    w.last = w.slots["0"]
    keep()
    w.cmd_compare(protocol.Compare(slot=0, tree={"t": "scalar", "v": None}, outputs=[], inputs=[]), [])
    assert transport._reading is not None  # a trial: kept for the next one
    w.cmd_compare(protocol.Compare(slot="last", tree={"t": "scalar", "v": None}, outputs=[], inputs=[]), [])
    assert transport._reading is None  # the candidate's last comparison



# ------------------------------------------------------------------ allocation failures are ours, never verdicts
_RELU_PROBLEM = ("import torch\nimport torch.nn as nn\n\nclass Model(nn.Module):\n    def forward(self, x):\n"
                 "        return torch.relu(x)\n\ndef get_inputs():\n    return [torch.randn(64, 32)]\n\n"
                 "def get_init_inputs():\n    return []\n")


def _cpu_worker(role: str):
    from kernelbench.evaluation import protocol
    from kernelbench.evaluation.seeds import INIT_SEED
    from kernelbench.evaluation.worker.process import Worker

    w = Worker(role, "cpu")
    w.cmd_init(protocol.Init(), [])
    if role == "reference":
        w.cmd_setup(protocol.Setup(code=_RELU_PROBLEM, precision="fp32", atol=1e-4, rtol=1e-4, init_seed=INIT_SEED,
                                   probe_seed=None, ieee_fp32=True, compile_mode=None), [])
    else:  # what cmd_load leaves, without installing the build cache's import hooks in the test process
        w.problem = w.inputs.load_module(_RELU_PROBLEM, "kb_problem", "<problem>")
        w.model = w.inputs.build_model(w.problem.Model, w.problem.get_init_inputs, INIT_SEED, w.device, "fp32")
    return w


def _simulated_oom(*args, **kwargs):
    raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 6.00 GiB (simulated)")


def _error_stage(e: BaseException, where: str):
    """The stage the parent gives the error reply the worker's command loop makes of ``e``."""
    from kernelbench.evaluation.parent.verdict import stage_of
    from kernelbench.evaluation.worker.process import _error_reply
    from kernelbench.results import Stage

    reply = _error_reply(e, where)
    return reply, stage_of(reply, Stage.RUN)


def test_memory_the_reference_cannot_get_for_its_copies_is_ours_not_a_wrong_output(monkeypatch):
    """On an 80 GB H100 the reference's copies of a candidate's 6-8 GiB outputs could not be allocated, and the
    comparison answered "could not read the candidate's outputs: CUDA out of memory": a wrong-output verdict on
    identity candidates. An allocation failure while reading is the evaluator's (EvaluatorOutOfMemory, which the
    parent records as an infrastructure failure); a description the candidate got wrong still fails it."""
    from kernelbench.evaluation import protocol, transport
    from kernelbench.evaluation.worker.memory import EvaluatorOutOfMemory

    w = _cpu_worker("reference")
    w.cmd_run(protocol.Run(seed=1, fwd_seed=2, slot=0, poison=False), [])
    x, out = w.slots["0"]
    outs, out_blobs = encode_tensors([out])
    ins, in_blobs = encode_tensors(list(x))
    ins[0]["blob"] = 1
    tree = {"t": "tensor", "i": 0, "cls": "torch.Tensor"}
    compare = protocol.Compare(slot=0, tree=tree, outputs=outs, inputs=ins)
    monkeypatch.setattr(transport, "decode_tensors", _simulated_oom)  # the reference's copies cannot be allocated
    with pytest.raises(EvaluatorOutOfMemory, match="ran out of memory copying the candidate's outputs") as info:
        w.cmd_compare(compare, [*out_blobs, *in_blobs])
    reply, stage = _error_stage(info.value, "compare")
    # The reference's error reply (the parent makes it a ReferenceBroken, out of memory: tests/test_infrastructure_*).
    assert reply.type == "EvaluatorOutOfMemory" and "Tried to allocate 6.00 GiB" in reply.message
    monkeypatch.undo()
    # The same comparison with the memory there passes; a lie in the description still fails the candidate.
    reply, _ = w.cmd_compare(compare, [*out_blobs, *in_blobs])
    assert reply.passed, reply.reason
    w.cmd_run(protocol.Run(seed=1, fwd_seed=2, slot=0, poison=False), [])
    bad = protocol.Compare(slot=0, tree=tree, outputs=[{**outs[0], "blob": 7}], inputs=ins)
    reply, _ = w.cmd_compare(bad, [*out_blobs, *in_blobs])
    assert not reply.passed and "could not read the candidate's outputs: bad blob index" in reply.reason


def test_memory_a_candidates_export_cannot_get_is_named_as_ours_but_stays_a_verdict(monkeypatch):
    """The copies a candidate worker makes of its outputs for the reference are our code's allocations: when they
    fail, the reply names EvaluatorOutOfMemory and says what could not be copied. It stays a verdict on the candidate
    (stage run, flagged out of memory by the parent): the reply comes from the candidate's process, where candidate
    code could raise an exception of that name itself, and an infrastructure result would be left out of the scores."""
    from kernelbench.evaluation import protocol
    from kernelbench.evaluation.worker.memory import EvaluatorOutOfMemory
    from kernelbench.results import Stage

    w = _cpu_worker("candidate")
    run = protocol.Run(seed=1, fwd_seed=2, slot=None, poison=False)
    reply, blobs = w.cmd_run(run, [])
    assert isinstance(reply, protocol.ExportReply) and len(reply.outputs) == 1
    w.cmd_release(protocol.Release(), [])
    monkeypatch.setattr(torch.Tensor, "clone", _simulated_oom)  # the snapshot of the outputs cannot be allocated
    with pytest.raises(EvaluatorOutOfMemory, match="copying the candidate's outputs for the reference") as info:
        w.cmd_run(run, [])
    monkeypatch.undo()
    reply, stage = _error_stage(info.value, "run")
    assert stage == Stage.RUN and reply.type == "EvaluatorOutOfMemory" and "Tried to allocate 6.00 GiB" in reply.message
    from kernelbench.evaluation.parent.verdict import OUT_OF_MEMORY_FLAG, Verdict

    v = Verdict()
    v.fail_with(reply, stage)
    assert v.error.stage == Stage.RUN and OUT_OF_MEMORY_FLAG in v.flags
    w.last = ([torch.ones(3)], torch.ones(3))
    monkeypatch.setattr(torch.Tensor, "clone", _simulated_oom)
    with pytest.raises(EvaluatorOutOfMemory, match="copying the last timed output"):
        w.cmd_export_last(protocol.ExportLast(), [])
    monkeypatch.undo()
    # The candidate's own forward running out of memory is its failure, as before.
    monkeypatch.setattr(w.model, "forward", _simulated_oom)
    with pytest.raises(torch.OutOfMemoryError) as info:
        w.cmd_run(run, [])
    assert _error_stage(info.value, "run")[1] == Stage.RUN


def test_the_export_arena_falls_back_from_a_shared_buffer_it_cannot_get_and_keeps_nothing_half_made(monkeypatch):
    """Where a larger shared buffer cannot be made (out of device memory), the arena falls back to an ordinary
    buffer (the export then travels as host copies); where that cannot be allocated either, the failure is an
    allocation failure the worker reports as ours, and the arena holds no buffer, shared or not."""
    from kernelbench.evaluation import shared_memory
    from kernelbench.evaluation.worker.export import ExportArena
    from kernelbench.evaluation.worker.memory import is_out_of_memory

    def no_shared(size, device):
        raise shared_memory.SharedMemoryError("cuMemCreate failed: CUDA driver error 2 (out of memory)")

    arena = ExportArena(torch, torch.device("cpu"))
    arena.sharing = True  # as after a successful share(True) on a GPU
    monkeypatch.setattr(shared_memory, "SharedBuffer", no_shared)
    a = torch.randn(100)
    arena.begin(ExportArena.span([a]))
    assert not arena.sharing and arena.shared is None and arena.buf is not None
    assert torch.equal(arena.copy(a), a)
    arena.sharing = True
    monkeypatch.setattr(torch, "empty", _simulated_oom)
    with pytest.raises(torch.OutOfMemoryError) as info:
        arena.begin(ExportArena.span([torch.randn(1000)]))
    monkeypatch.undo()
    assert is_out_of_memory(torch, info.value)
    assert arena.buf is None and arena.shared is None and arena.used == 0
    assert not arena.sharing, "a failed shared buffer is not tried again for every export"
    big = torch.randn(1000)
    assert torch.equal(arena.copy(big), big)  # no buffer: a clone


def test_allocation_failures_are_told_from_other_errors():
    from kernelbench.evaluation import protocol
    from kernelbench.evaluation.worker.memory import EvaluatorOutOfMemory, as_evaluator_oom, is_out_of_memory

    assert EvaluatorOutOfMemory.__name__ == protocol.EVALUATOR_OUT_OF_MEMORY  # the name the parent goes by

    for e in (torch.OutOfMemoryError("CUDA out of memory."), MemoryError(),
              RuntimeError("[enforce fail at alloc_cpu.cpp:127] DefaultCPUAllocator: can't allocate memory"),
              RuntimeError("CUDA error: out of memory"), EvaluatorOutOfMemory("x")):
        assert is_out_of_memory(torch, e), e
    for e in (RuntimeError("shape mismatch"), ValueError("out of memory"), KeyError("x")):
        assert not is_out_of_memory(torch, e) and as_evaluator_oom(torch, e, "x") is None
    ours = EvaluatorOutOfMemory("already ours")
    assert as_evaluator_oom(torch, ours, "x") is ours
    wrapped = as_evaluator_oom(torch, MemoryError(), "making the inputs")
    assert isinstance(wrapped, EvaluatorOutOfMemory) and "making the inputs: MemoryError" in str(wrapped)


# ------------------------------------------------------------------ what an evaluation holds, and for how long
def _alive(*tensors):
    import weakref

    probes = [weakref.ref(t) for t in tensors]
    return lambda: [p() is not None for p in probes]


def test_the_last_timed_output_and_the_arena_are_let_go_once_the_reference_has_read_them():
    """On the H100 the candidate held the last timed call's inputs and outputs and its export arena (both 12 GiB for
    official level-1 problems) through the launch trace, whose forward then ran out of memory. The export keeps them
    only until its Release; the arena is made again if anything is exported later."""
    import gc

    from kernelbench.evaluation import protocol

    w = _cpu_worker("candidate")
    w.arena.begin(1 << 16)  # the buffer a correctness trial's export left (CPU workers copy without it)
    x, out = torch.randn(64, 32), torch.randn(64, 32)
    w.last = ([x], out)
    alive = _alive(x, out)
    del x, out
    reply, blobs = w.cmd_export_last(protocol.ExportLast(), [])
    assert isinstance(reply, protocol.ExportReply) and w.last is None
    del blobs
    assert alive() == [True, True], "the export holds them until the reference has read it"
    w.cmd_release(protocol.Release(), [])
    gc.collect()
    assert alive() == [False, False] and w.arena.buf is None
    # A later export makes the arena again; a trial's Release keeps it for the next trial.
    w.arena.begin(1 << 16)
    w.cmd_run(protocol.Run(seed=1, fwd_seed=2, slot=None, poison=False), [])
    w.cmd_release(protocol.Release(), [])
    assert w.arena.buf is not None


def test_the_reference_lets_go_of_the_last_timed_call_after_its_check_and_of_stale_slots():
    """The reference kept the last timed call (two 6 GiB tensors on the H100) and its copies of the candidate's for
    the rest of the job; a trial whose comparison never came left its slot for the next job of the problem."""
    from kernelbench.evaluation import protocol

    w = _cpu_worker("reference")
    w.cmd_run(protocol.Run(seed=1, fwd_seed=2, slot=0, poison=False), [])
    w.last = w.slots.pop("0")
    alive = _alive(w.last[0][0], w.last[1])
    outs, out_blobs = encode_tensors([w.last[1]])
    ins, in_blobs = encode_tensors(list(w.last[0]))
    ins[0]["blob"] = 1
    reply, _ = w.cmd_compare(protocol.Compare(slot="last", tree={"t": "tensor", "i": 0, "cls": "torch.Tensor"},
                                              outputs=outs, inputs=ins), [*out_blobs, *in_blobs])
    assert reply.passed, reply.reason
    assert w.last is None and alive() == [False, False]
    # A stale slot is freed before the trial that reuses it computes, and at a new problem.
    w.cmd_run(protocol.Run(seed=1, fwd_seed=2, slot=0, poison=False), [])
    stale = _alive(*w.slots["0"][0], w.slots["0"][1])
    seen = []
    forward = w.model.forward

    def watched(*args):
        seen.append(stale())
        return forward(*args)

    w.model.forward = watched
    w.cmd_run(protocol.Run(seed=3, fwd_seed=4, slot=0, poison=False), [])
    assert seen == [[False, False]], "the former trial's tensors were still held while the new one computed"
    w.cmd_setup(protocol.Setup(code=_RELU_PROBLEM, precision="fp32", atol=1e-4, rtol=1e-4, init_seed=1,
                               probe_seed=None, ieee_fp32=True, compile_mode=None), [])
    assert w.slots == {} and w.last is None


def test_the_timing_warm_up_starts_without_the_arena_and_the_slots_of_the_correctness_stage():
    from kernelbench.evaluation import protocol

    warm = protocol.Time(seeds=[1, 2], fwd_seeds=[3, 4], warmup=True, fingerprint=False, cushion_us=0)
    ref = _cpu_worker("reference")
    ref.cmd_run(protocol.Run(seed=1, fwd_seed=2, slot=4, poison=False), [])  # its comparison never came
    stale = _alive(*ref.slots["4"][0])
    ref.cmd_time(warm, [])
    assert ref.slots == {} and stale() == [False]
    cand = _cpu_worker("candidate")
    cand.arena.begin(1 << 16)
    cand.cmd_time(warm, [])
    assert cand.arena.buf is None and cand.last is not None
