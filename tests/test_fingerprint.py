"""The timed-call fingerprint: what it sums, that its bounds hold for honest outputs, and what it rejects.

Real torch on the CPU; the GPU case (one read-back per call, no memory growth) is in test_fingerprint_gpu.py.
The forgeries here are the ones an attacker reading the code would try (docs/threat-model.md).
"""

from __future__ import annotations

import math

import pytest
import torch

from kernelbench.evaluation import compare

CPU = torch.device("cpu")
#: The verdicts must hold on both of the float32 outputs' paths: the float64 buffer (outputs below
#: SEGMENTED_MIN_ELEMENTS) and the float32 groups (from 0 elements on, here).
BOTH_PATHS = pytest.mark.parametrize("segmented_from", [compare.SEGMENTED_MIN_ELEMENTS, 0])


def written_out_weights(n: int, chunk: int, key: int = 0) -> torch.Tensor:
    """Each position's weight, written out: the product of two sign patterns over a period of min(chunk, n)
    positions (hashes of positions 0.. and 2**31..), the first rotated by the chunk's offset and the call's first
    rotation, the second by the call's second rotation."""
    if n == 0:
        return torch.zeros(0, dtype=torch.float64)
    period = min(chunk, n)
    a, c = compare.call_rotations(key, period)
    first, second = compare._weights(0, period, CPU), compare._weights(1 << 31, period, CPU)
    pos = torch.arange(n)
    k = pos // chunk
    offset = torch.tensor([0 if i == 0 else compare._hash32(i) % chunk for i in range(int(k.max()) + 1)])[k]
    return first[(pos % chunk + offset + a) % period] * second[(pos % chunk + c) % period]


def direct(t: torch.Tensor, chunk: int, key: int = 0) -> tuple[float, float, float, float]:
    """The sums written out element by element: plain; weighted (:func:`written_out_weights`); |x|; x**2."""
    f = t.resolve_conj().reshape(-1)
    if f.is_complex():
        f = torch.view_as_real(f).reshape(-1)
    x = f.to(torch.float64)
    w = written_out_weights(x.numel(), chunk, key)
    return float(x.sum()), float((w * x).sum()), float(x.abs().sum()), float((x * x).sum())


@pytest.mark.parametrize("shape, dtype", [
    ((1000,), torch.float32),        # several chunks, the last partial
    ((7, 9, 11), torch.float16),
    ((3, 64), torch.float64),
    ((513,), torch.bfloat16),
    ((40,), torch.complex64),
    ((300,), torch.int32),
    ((129,), torch.bool),
])
def test_sums_are_the_weighted_sums_they_claim_to_be(shape, dtype):
    torch.manual_seed(3)
    if dtype == torch.bool:
        t = torch.rand(shape) > 0.5
    elif dtype == torch.int32:
        t = torch.randint(-1000, 1000, shape, dtype=dtype)
    else:
        t = torch.randn(shape, dtype=dtype)
    fp = compare.Fingerprinter(chunk=256, segmented_from=0)
    sums, bounds = fp.measure([t], (1e-3, 1e-2))
    s0, s1, mag, sq = direct(t, 256)
    # Float32 outputs (complex64 ones too) are summed in float32 segments: each segment's sum is off by at most
    # (SEGMENT - 1) float32 roundings of its absolute sum; every other dtype through float64, exactly.
    segmented = t.dtype in (torch.float32, torch.complex64)
    gamma = (compare.SEGMENT - 1) * 2.0 ** -24 if segmented else 0.0
    err = gamma * mag + 1e-9
    assert abs(sums[0] - s0) <= err and abs(sums[1] - s1) <= err
    if not segmented:
        assert sums[:2] == pytest.approx([s0, s1], rel=1e-12, abs=1e-9)
    for key in (1, 2**40 + 3, 987654321):
        got, want = fp.measure([t], key=key)[0][:2], direct(t, 256, key)[:2]
        assert abs(got[0] - want[0]) <= err and abs(got[1] - want[1]) <= err
    assert sums[2] == compare.size_key(t)
    if t.is_floating_point() or t.is_complex():
        n = t.numel() * (2 if t.is_complex() else 1)
        values = direct_values(t)
        if segmented:  # the 1-norm and squares as the float32 path bounds them from above
            mag, sq = mag * (1 + 2 * gamma), sq * (1 + 4 * gamma)
        worst = 1e-3 * n + 1e-2 * mag + 1e-9 * mag
        spread2 = sum((1e-3 + 1e-2 * abs(v)) ** 2 for v in values)
        if segmented:
            # both sides' plain-sum rounding, the candidate's 1-norm at most ours plus the tolerance; the weighted
            # sums' rounding in quadrature, the candidate's squares at most (sqrt(ours) + sqrt(spread2))**2
            worst += gamma * (2 * mag + 1e-3 * n + 1e-2 * mag)
            spread2 += gamma ** 2 * compare.SEGMENT * (sq + (math.sqrt(sq) + math.sqrt(spread2)) ** 2)
        # (rel: the 1-norm and squares the float32 path summed are themselves within a few gammas)
        assert bounds[0] == pytest.approx(worst, rel=1e-9 + 8 * gamma)
        assert bounds[1] == pytest.approx(min(worst, compare.WEIGHTED_Z * math.sqrt(spread2) + 1e-9 * mag),
                                          rel=1e-9 + 8 * gamma)
        assert bounds[2] == 0.0
    else:
        assert bounds == [0.5, 0.5, 0.0]
    assert fp.sums([t]) == sums and fp.bounds([t], 1e-3, 1e-2) == bounds


def direct_values(t: torch.Tensor) -> list[float]:
    f = t.reshape(-1)
    if f.is_complex():
        f = torch.view_as_real(f).reshape(-1)
    return f.to(torch.float64).tolist()


def effective_weights(fp: compare.Fingerprinter, n: int, key: int = 0) -> torch.Tensor:
    """The weight the fingerprint gives each position, read back through its weighted sum of unit vectors."""
    out = []
    for k in range(n):
        e = torch.zeros(n, dtype=torch.float64)
        e[k] = 1.0
        out.append(fp.measure([e], key=key)[0][1])
    return torch.tensor(out)


def test_the_weights_are_signs_without_structure_a_forger_could_use():
    fp = compare.Fingerprinter(chunk=4096)
    w = effective_weights(fp, 4096)
    assert set(w.tolist()) == {1.0, -1.0}
    assert abs(float(w.sum())) < 4096 * 0.1, "about as many -1 as +1"
    # Seen as the weights of a 64x64 output (a matrix product's), they must have full rank: weights of
    # rank r make the weighted sum of A @ B cost r matrix-vector products.
    assert int(torch.linalg.matrix_rank(w.view(64, 64))) == 64


@pytest.mark.parametrize("width", [64, 128, 1000, 4096])
def test_the_weight_pattern_has_full_rank_at_every_output_width(width):
    """The pattern before session 16 (bit 13 of position * 2654435761) had rank 2 as a 256 x 4096 matrix and 64
    as 256 x 128: forging the sums of a 4096-wide matrix product took two matrix-vector products."""
    w = compare._weights(0, 256 * width, CPU).view(256, width)
    assert int(torch.linalg.matrix_rank(w)) == min(256, width)
    assert abs(float(w.mean())) < 0.05


def test_the_weights_of_a_position_do_not_depend_on_how_many_are_made():
    """Both workers size their buffers to the outputs they have seen: a prefix must be the same pattern."""
    long = compare._weights(0, 10_000, CPU)
    assert torch.equal(compare._weights(0, 300, CPU), long[:300])
    assert torch.equal(compare._weights(5000, 100, CPU), long[5000:5100])
    assert set(compare._weights((1 << 32) + 7, 3, CPU).tolist()) <= {1.0, -1.0}
    assert [compare._hash32(i) for i in range(5000, 5100)] == [
        (1 - int(v)) // 2 << 31 | (compare._hash32(i) & 0x7FFFFFFF) for i, v in zip(range(5000, 5100), long[5000:5100])]


def test_chunks_are_weighted_differently_so_summed_blocks_do_not_forge_them():
    """With one pattern for every chunk, the weighted sum of an output of m chunks is the pattern's sum of the
    chunks added up: for A @ B that is one chunk's product of summed row blocks, 1/m of the work."""
    fp = compare.Fingerprinter(chunk=4096)
    for seed in range(5):
        torch.manual_seed(seed)
        x, y = torch.randn(4096, dtype=torch.float64), torch.randn(4096, dtype=torch.float64)
        ref, bounds = fp.measure([torch.cat([x, y])], (1e-4, 1e-4))
        folded = fp.sums([torch.cat([x + y, torch.zeros(4096, dtype=torch.float64)])])
        assert folded[0] == pytest.approx(ref[0])  # the plain sum cannot tell them apart
        assert not compare.fingerprints_match(folded, ref, bounds)
    # and without the rotation it would pass: the same weights for both chunks fold exactly
    w = compare._weights(0, 4096, CPU)
    assert float((w * (x + y)).sum()) == pytest.approx(float((w * x).sum() + (w * y).sum()))


def test_a_small_tensor_tuned_to_two_sums_fails_on_its_shape():
    torch.manual_seed(6)
    r = torch.randn(1000)
    fp = compare.Fingerprinter(chunk=256)
    ref, bounds = fp.measure([r], (1e-4, 1e-4))
    w = written_out_weights(64, 256).tolist()  # a 64-element tensor's weights (key 0, as measured here)
    j = next(i for i in range(1, 64) if w[i] != w[0])
    # a*w[0] + b*w[j] = s1 and a + b = s0: two numbers reproduce both sums of any output
    s0, s1 = ref[0], ref[1]
    b = (s1 - w[0] * s0) / (w[j] - w[0])
    forged = torch.zeros(64)
    forged[0], forged[j] = s0 - b, b
    cand = fp.sums([forged])
    assert cand[:2] == pytest.approx(ref[:2], abs=1e-3)
    assert compare.fingerprints_match(cand[:2], ref[:2], bounds[:2]), "the sums alone would pass it"
    assert not compare.fingerprints_match(cand, ref, bounds)
    other_dtype = fp.sums([r.double()])
    assert not compare.fingerprints_match(other_dtype, ref, bounds)


@BOTH_PATHS
def test_honest_outputs_at_the_edge_of_tolerance_pass(segmented_from):
    torch.manual_seed(0)
    r = torch.randn(20000)
    fp = compare.Fingerprinter(chunk=4096, segmented_from=segmented_from)
    ref, bounds = fp.measure([r], (1e-4, 1e-4))
    tol = 1e-4 + 1e-4 * r.abs()
    for _ in range(20):  # every element at the edge of its tolerance, signs at random
        edge = r + torch.sign(torch.randn(20000)) * tol * 0.999
        assert compare.fingerprints_match(fp.sums([edge]), ref, bounds)
    # a systematic error, every element off the same way by its whole tolerance
    assert compare.fingerprints_match(fp.sums([r + tol * 0.999]), ref, bounds)
    assert compare.fingerprints_match(fp.sums([r - tol * 0.999]), ref, bounds)


@BOTH_PATHS
def test_wrong_and_approximate_outputs_fail(segmented_from):
    torch.manual_seed(0)
    r = torch.randn(5000)
    fp = compare.Fingerprinter(chunk=1024, segmented_from=segmented_from)
    ref, bounds = fp.measure([r], (1e-4, 1e-4))
    assert not compare.fingerprints_match(fp.sums([torch.randn(5000)]), ref, bounds)
    flipped = r.clone()
    flipped[4000:4050] = -flipped[4000:4050]  # in the last chunk
    assert not compare.fingerprints_match(fp.sums([flipped]), ref, bounds)
    swapped = r.clone()
    swapped[:2500], swapped[2500:] = r[2500:].clone(), r[:2500].clone()  # same plain sum, other places
    assert not compare.fingerprints_match(fp.sums([swapped]), ref, bounds)


@BOTH_PATHS
def test_a_matmul_from_low_precision_inputs_fails_the_weighted_bound_the_worst_case_would_pass(segmented_from):
    """Computing timed calls from bfloat16-rounded inputs is faster and wrong by far more than the tolerance
    per element, yet it used 2.4% of the worst-case bound (the review's finding); the statistical bound on the
    weighted sum, which grows with the square root of the size, does not let it through."""
    torch.manual_seed(7)
    a, b = torch.randn(256, 512), torch.randn(512, 256)
    exact = a @ b
    approx = a.bfloat16().float() @ b.bfloat16().float()
    fp = compare.Fingerprinter(segmented_from=segmented_from)
    ref, bounds = fp.measure([exact], (1e-4, 1e-4))
    cand = fp.sums([approx])
    worst = bounds[0]
    assert abs(cand[1] - ref[1]) <= worst, "within the worst-case bound"
    assert not compare.fingerprints_match(cand, ref, bounds)
    assert not torch.allclose(approx, exact, atol=1e-4, rtol=1e-4)


def test_buffers_are_sized_to_the_outputs_and_made_once():
    fp = compare.Fingerprinter(chunk=1 << 20, segmented_from=0)
    fp.prepare([torch.randn(300), torch.randn(10), torch.zeros(0), torch.randn(40).double()])
    f32, buf = fp._f32, fp._buf
    assert f32.size == 300 and f32.w.numel() == 300 and f32.weighted.numel() == 300, \
        "float32 outputs: sized to the largest, not a whole chunk"
    assert buf.numel() == 40 and fp._w.numel() == 40, "the float64 buffer only for the outputs of other dtypes"
    for _ in range(3):
        fp.measure([torch.randn(300), torch.randn(10), torch.randn(40).double()], (1e-2, 1e-2))
    assert fp._f32 is f32 and fp._buf is buf, "no new allocation between calls of the same shapes"
    fp.measure([torch.randn(3 << 20)])
    assert fp._f32.size == 3 << 20 and fp._f32.w.numel() == 1 << 20, "a step of chunks, a chunk of pattern"
    fp.measure([torch.randn(9 << 20)])
    steps = compare.STEP_CHUNKS << 20
    assert fp._f32.size == steps and fp._f32.partial.shape[1] == steps // compare.SEGMENT + 1, \
        "at most a step, however large the output"
    f32 = fp._f32
    for n in (9 << 20, 300, 1 << 20, 5):  # smaller outputs after it: the same buffers
        fp.measure([torch.randn(n)], (1e-2, 1e-2))
    assert fp._f32 is f32
    fp.measure([torch.randn(3 << 20).double()])
    assert fp._buf.numel() == 1 << 20 and fp._w.numel() == 1 << 20
    fp.forget()
    assert fp._f32 is None and fp._buf is None


def test_empty_several_and_conjugated_outputs():
    fp = compare.Fingerprinter(chunk=256, segmented_from=0)
    a, b = torch.arange(10.0), torch.full((3,), 2.0)
    sums, bounds = fp.measure([a, torch.zeros(0), b], (0.0, 0.5))
    assert sums[0] == 45.0 and sums[3:5] == [0.0, 0.0] and sums[6] == 6.0
    assert [sums[2], sums[5], sums[8]] == [compare.size_key(a), compare.size_key(torch.zeros(0)),
                                           compare.size_key(b)]
    # rtol's 0.5 of the 1-norm (45 and 6; the 1-norm taken 2 gammas high), plus the float32 path's rounding of both
    # sides' plain sums, gamma times (ours + the candidate's, up to 1.5 times ours): 22.5 and 3.0 times 1 + 7 gammas
    gamma = (compare.SEGMENT - 1) * 2.0 ** -24
    assert bounds[0] == pytest.approx(22.5 * (1 + 7 * gamma), rel=gamma / 10) and bounds[3:6] == [0.0, 0.0, 0.0] \
        and bounds[6] == pytest.approx(3.0 * (1 + 7 * gamma), rel=gamma / 10)
    assert fp.measure([]) == ([], [])
    z = torch.complex(torch.randn(20), torch.randn(20))
    assert fp.sums([z.conj()]) == fp.sums([z.conj().resolve_conj()])


def test_a_worker_makes_its_fingerprint_buffers_in_the_warm_up_when_the_blocks_will_be_fingerprinted():
    """The first timed block must not allocate them (a large allocation between timed calls moves memory)."""
    from kernelbench.evaluation import protocol
    from kernelbench.evaluation.seeds import INIT_SEED
    from kernelbench.evaluation.worker.process import Worker
    from kernelbench.problems import load_problems
    from kernelbench.problems.model import at_reduced_sizes

    (problem,) = at_reduced_sizes(load_problems("builtin", levels=[1]).select(levels=[1], ids=[8]))
    made = {}
    for fingerprint in (False, True):
        w = Worker("reference", "cpu")
        w.cmd_init(protocol.Init(), [])
        w.cmd_setup(protocol.Setup(code=problem.code, precision="fp32", atol=1e-2, rtol=1e-2, init_seed=INIT_SEED,
                                   probe_seed=None, ieee_fp32=True, compile_mode=None), [])
        w.cmd_time(protocol.Time(seeds=[1, 2], fwd_seeds=[3, 4], warmup=True, fingerprint=fingerprint, cushion_us=0),
                   [])
        made[fingerprint] = w.fingerprinter._buf  # (a small output: the float64 path's buffer)
        if fingerprint:
            buf = w.fingerprinter._buf
            reply, _ = w.cmd_time(protocol.Time(seeds=[5, 6], fwd_seeds=[7, 8], warmup=False, fingerprint=True,
                                                cushion_us=0), [])
            assert w.fingerprinter._buf is buf and len(reply.fingerprints) == 2
    assert made[False] is None, "a warm-up for unfingerprinted timing (baselines) makes nothing"
    assert made[True] is not None and made[True].numel() > 0


def test_a_complex_output_with_a_wrong_imaginary_part_fails_the_elementwise_check():
    r = torch.complex(torch.randn(50), torch.randn(50))
    assert compare.compare_tensor(r.clone(), r, 1e-5, 1e-5).ok
    wrong = torch.complex(r.real, -r.imag)
    res = compare.compare_tensor(wrong, r, 1e-5, 1e-5)
    assert not res.ok and "output" in res.reason
    assert compare.compare_tensor(r.conj(), r.conj().resolve_conj(), 1e-5, 1e-5).ok


def test_the_size_key_is_exact_in_size_and_dtype():
    keys = {compare.size_key(torch.zeros(shape, dtype=dt))
            for shape in [(6,), (2, 3), (7,), (1 << 40 >> 20,)] for dt in (torch.float32, torch.float16, torch.int64)}
    assert len(keys) == 9, "(6,) and (2, 3) share a key: a reshape gains nothing; other sizes and dtypes do not"
    assert compare.size_key(torch.zeros(1 << 20)) == float((1 << 20) * 64)


@pytest.mark.parametrize("owner, name", [("torch.Tensor", "tolist"), ("torch", "dot"), ("torch.Tensor", "dtype"),
                                         ("torch.linalg", "vector_norm"), ("torch.Tensor", "mul_"),
                                         ("torch.Tensor", "sum")])
def test_replacing_what_the_fingerprint_calls_is_caught_by_the_patch_detector(owner, name):
    from kernelbench.evaluation.guards import runtime as rt

    target = {"torch": torch, "torch.Tensor": torch.Tensor, "torch.linalg": torch.linalg}[owner]
    before = rt.PatchSnapshot.take()
    original = target.__dict__[name] if name in target.__dict__ else None
    setattr(target, name, property(lambda self: None) if name == "dtype" else (lambda *a, **k: [0.0]))
    try:
        assert f"{owner}.{name}" in before.changes(rt.PatchSnapshot.take())
    finally:
        if original is None:
            delattr(target, name)
        else:
            setattr(target, name, original)
    assert before.changes(rt.PatchSnapshot.take()) == []


# ------------------------------------------------------------------ weights that change from call to call
def test_each_call_weighs_the_positions_differently_and_every_call_s_weights_have_full_rank():
    fp = compare.Fingerprinter(chunk=4096)
    ws = {key: effective_weights(fp, 4096, key) for key in (0, 1, 2**33 + 5)}
    for key, w in ws.items():
        assert torch.equal(w, written_out_weights(4096, 4096, key))
        assert set(w.tolist()) == {1.0, -1.0}
        assert int(torch.linalg.matrix_rank(w.view(64, 64))) == 64
    for a, b in ((0, 1), (0, 2**33 + 5), (1, 2**33 + 5)):
        differ = int((ws[a] != ws[b]).sum())
        assert 1700 < differ < 2400, f"keys {a} and {b}: about half the signs differ, not {differ}"


def _conv_sums_forger(conv: torch.nn.Conv2d, x_shape: tuple[int, ...], key: int
                      ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """What a forger computes once, before any timed call: the output's weights for ``key`` and, by one backward
    pass each, the vectors whose dot products with an input give the output's plain and weighted sums."""
    out_shape = conv(torch.zeros(x_shape, dtype=torch.float64)).shape
    w = written_out_weights(math.prod(out_shape), 1 << 24, key).view(out_shape)
    x = torch.zeros(x_shape, dtype=torch.float64, requires_grad=True)
    plain = torch.autograd.grad(conv(x).sum(), x)[0]
    weighted = torch.autograd.grad((conv(x) * w).sum(), x)[0]
    return w, plain, weighted


def test_a_fixed_linear_map_forged_from_a_vector_computed_once_fails_the_next_call():
    """A convolution with fixed weights is a linear map of its input. With the same fingerprint weights in every
    call, one backward pass gives a vector whose dot product with each call's input is the output's weighted sum:
    an output of zeros with two numbers set then matches both sums for the cost of reading the input. Each call
    now weighs differently, so the vector is only good for the call it was computed for."""
    torch.manual_seed(11)
    conv = torch.nn.Conv2d(3, 8, 3, bias=False).double()
    x_shape = (2, 3, 12, 12)
    first_key = 1234
    _, plain_v, weighted_v = _conv_sums_forger(conv, x_shape, first_key)
    fp = compare.Fingerprinter()
    caught = []
    for key in (first_key, 99, 100, 2**35 + 1):
        x = torch.randn(x_shape, dtype=torch.float64)
        with torch.no_grad():
            honest = conv(x)
        ref, bounds = fp.measure([honest], (1e-4, 1e-4), key=key)
        assert compare.fingerprints_match(fp.measure([honest], key=key)[0], ref, bounds)
        # the forgery: two dot products with the input, then two numbers placed where this call's weights differ
        s0, s1 = float((plain_v * x).sum()), float((weighted_v * x).sum())
        w = written_out_weights(honest.numel(), 1 << 24, key)
        j = next(i for i in range(1, w.numel()) if w[i] != w[0])
        b = (s1 - float(w[0]) * s0) / float(w[j] - w[0])
        forged = torch.zeros_like(honest).reshape(-1)
        forged[0], forged[j] = s0 - b, b
        caught.append(not compare.fingerprints_match(fp.measure([forged.view_as(honest)], key=key)[0], ref, bounds))
    assert caught == [False, True, True, True], "forged for its own call's weights it passes; for no other call"


def test_a_worker_weighs_each_timed_call_by_its_input_seed():
    """Both sides of a timed call are given the same seeds: the worker must fingerprint a call with its seed's
    weights (the reference's and the candidate's then agree call by call, and differ from call to call)."""
    from kernelbench.evaluation import protocol
    from kernelbench.evaluation.seeds import INIT_SEED
    from kernelbench.evaluation.worker.process import Worker
    from kernelbench.problems import load_problems
    from kernelbench.problems.model import at_reduced_sizes

    (problem,) = at_reduced_sizes(load_problems("builtin", levels=[1]).select(levels=[1], ids=[8]))
    w = Worker("reference", "cpu")
    w.cmd_init(protocol.Init(), [])
    w.cmd_setup(protocol.Setup(code=problem.code, precision="fp32", atol=1e-2, rtol=1e-2, init_seed=INIT_SEED,
                               probe_seed=None, ieee_fp32=True, compile_mode=None), [])
    w.cmd_time(protocol.Time(seeds=[1, 2], fwd_seeds=[3, 4], warmup=True, fingerprint=True, cushion_us=0), [])
    reply, _ = w.cmd_time(protocol.Time(seeds=[5, 7_000_000_001], fwd_seeds=[8, 9], warmup=False, fingerprint=True,
                                        cushion_us=0), [])
    outputs = w._fingerprinted(w.last[1])  # the block's last call: seed 7_000_000_001
    fp = compare.Fingerprinter()
    assert reply.fingerprints[1] == pytest.approx(fp.measure(outputs, key=7_000_000_001)[0], rel=1e-12)
    assert reply.fingerprints[1][1] != pytest.approx(fp.measure(outputs, key=5)[0][1], rel=1e-6)


# ------------------------------------------------------------------ the float32 path (session 24)
def test_float32_outputs_take_the_float32_path_and_kb_fingerprint_float64_turns_it_off(monkeypatch):
    t = torch.randn(5000)
    fp = compare.Fingerprinter(chunk=1024, segmented_from=0)
    assert fp.segment == compare.SEGMENT
    fp.measure([t], (1e-4, 1e-4))
    assert fp._f32 is not None and fp._buf is None
    monkeypatch.setenv(compare.FINGERPRINT_ENV, "float64")
    old = compare.Fingerprinter(chunk=1024, segmented_from=0)
    assert old.segment == 0
    old.measure([t], (1e-4, 1e-4))
    assert old._f32 is None and old._buf is not None
    # the same sums within the float32 path's rounding, the same verdicts
    a, b = fp.sums([t]), old.sums([t])
    gamma = (compare.SEGMENT - 1) * 2.0 ** -24
    assert abs(a[0] - b[0]) <= gamma * float(t.abs().sum()) and a[2] == b[2]
    with pytest.raises(ValueError, match="segments"):
        compare.Fingerprinter(segment=-1)


def test_a_float32_sum_that_overflows_is_taken_again_in_float64():
    """A float32 segment's sum (or its squares, past 1.8e19) can overflow where the float64 path's does not: the
    tensor is measured again through the float64 buffer, so the sums and bounds are finite and the same."""
    big = torch.full((100,), 3e38)
    big[1::2] = -3e38  # float64 sum 0; a float32 segment of these overflows as it goes
    squares = torch.randn(1000) * 1e20  # finite in float32, its squares are not
    fp, old = compare.Fingerprinter(chunk=256, segmented_from=0), compare.Fingerprinter(chunk=256, segment=0)
    for t in (big, squares):
        for key in (0, 5):
            s1, b1 = fp.measure([t], (1e-4, 1e-4), key=key)
            s2, b2 = old.measure([t], (1e-4, 1e-4), key=key)
            assert all(map(math.isfinite, s1 + b1)) and s1 == s2
            # the float32 path's rounding stays in the bounds (a like output on the other side may not overflow):
            # wider by both sides' 31 roundings of the 1-norm, under 4% of rtol's 1e-4 share
            assert b1[0] > b2[0] and all(a >= b for a, b in zip(b1, b2)) and b1 == pytest.approx(b2, rel=0.04)
    nan = torch.randn(1000)
    nan[500] = float("nan")
    s, b = fp.measure([nan], (1e-4, 1e-4))
    assert math.isnan(s[0]) and math.isnan(s[1]), "a NaN output's sums stay NaN"
    r = torch.randn(1000)
    ref, bounds = fp.measure([r], (1e-4, 1e-4))
    assert not compare.fingerprints_match(fp.sums([torch.where(r > 2, float("inf"), r)]), ref, bounds)


@pytest.mark.parametrize("scale", ["wide", "constant", "tiny"])
def test_honest_float32_outputs_of_awkward_magnitudes_pass_and_a_stale_one_fails(scale):
    """Where float32 sums round worst: values of very different sizes in one segment, one value repeated (the same
    rounding in every segment), values near the bottom of the range. Honest outputs, every element at its tolerance's
    edge, pass every call's check and the run's pooled one; an output for other inputs fails."""
    torch.manual_seed(11)
    n = 50_000
    if scale == "wide":
        r = torch.randn(n) * torch.where(torch.rand(n) < 0.1, 1e6, 1e-3)
    elif scale == "constant":
        r = torch.full((n,), 0.1)
    else:
        r = torch.randn(n) * 1e-30
    fp = compare.Fingerprinter(chunk=4096, segmented_from=0)
    z2 = []
    for key in range(12):
        ref, bounds = fp.measure([r], (1e-4, 1e-4), key=key)
        tol = 1e-4 + 1e-4 * r.abs()
        edge = r + torch.sign(torch.randn(n)) * tol * 0.999
        cand = fp.measure([edge], key=key)[0]
        assert compare.fingerprints_match(cand, ref, bounds), (scale, key)
        z2 += compare.weighted_z2(cand, ref, bounds)
        assert compare.fingerprints_match(fp.measure([r], key=key)[0], ref, bounds)
        # (outputs of 1e-30 are all within atol of each other: there, one of another size is the wrong one)
        stale = {"wide": r[torch.randperm(n)], "constant": r + 0.01, "tiny": torch.randn(n)}[scale]
        assert not compare.fingerprints_match(fp.measure([stale], key=key)[0], ref, bounds), (scale, key)
    assert sum(z2) / len(z2) < compare.POOLED_Z2_LIMIT
