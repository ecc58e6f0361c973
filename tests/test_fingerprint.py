"""The timed-call fingerprint: what it sums, that its bound holds for honest outputs, and what it rejects.

Real torch on the CPU; the GPU case (cuBLAS's float64 product, one read-back) is in test_fingerprint_gpu.py.
"""

from __future__ import annotations

import pytest
import torch

from kernelbench.evaluation import compare


def direct(t: torch.Tensor, chunk: int) -> tuple[float, float, float]:
    """The sums written out element by element: plain, weighted by the position's weight within its chunk, |x|."""
    f = t.reshape(-1)
    if f.is_complex():
        f = torch.view_as_real(f).reshape(-1)
    x = f.to(torch.float64)
    w = compare._weights(0, chunk, torch.device("cpu"))[torch.arange(x.numel()) % chunk]
    return float(x.sum()), float((w * x).sum()), float(x.abs().sum())


@pytest.mark.parametrize("shape, dtype", [
    ((1000,), torch.float32),        # not a multiple of a row, several chunks
    ((7, 9, 11), torch.float16),
    ((3, 64), torch.float64),        # exactly three rows
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
    fp = compare.Fingerprinter(chunk=256)
    sums, bounds = fp.measure([t], (1e-3, 1e-2))
    s0, s1, mag = direct(t, 256)
    assert sums == pytest.approx([s0, s1], rel=1e-12, abs=1e-9)
    if t.is_floating_point() or t.is_complex():
        n = t.numel() * (2 if t.is_complex() else 1)
        assert bounds == pytest.approx([1e-3 * n + 1e-2 * mag * (1 + 1e-7)] * 2, rel=1e-9)
    else:
        assert bounds == [0.5, 0.5]
    assert fp.sums([t]) == sums and fp.bounds([t], 1e-3, 1e-2) == bounds


def effective_weights(fp: compare.Fingerprinter, n: int) -> torch.Tensor:
    """The weight the fingerprint gives each position, read back through its weighted sum of unit vectors."""
    out = []
    for k in range(n):
        e = torch.zeros(n, dtype=torch.float64)
        e[k] = 1.0
        out.append(fp.sums([e])[1])
    return torch.tensor(out)


def test_the_weights_are_signs_without_structure_a_forger_could_use():
    fp = compare.Fingerprinter(chunk=4096)
    w = effective_weights(fp, 4096)
    assert set(w.tolist()) == {1.0, -1.0}
    assert abs(float(w.sum())) < 4096 * 0.1, "about as many -1 as +1"
    # Seen as the weights of a 64x64 output (a matrix product's), they must have full rank: weights of
    # rank r make the weighted sum of A @ B cost r matrix-vector products, so a forged output matching both
    # sums would be cheap.
    assert int(torch.linalg.matrix_rank(w.view(64, 64))) == 64


def test_honest_noise_passes_and_wrong_outputs_fail_across_chunks():
    torch.manual_seed(0)
    r = torch.randn(5000)
    fp = compare.Fingerprinter(chunk=1024)
    ref_sums, bounds = fp.measure([r], (1e-4, 1e-4))
    for _ in range(20):  # every element at the edge of its tolerance, signs at random
        edge = r + torch.sign(torch.randn(5000)) * (1e-4 + 1e-4 * r.abs()) * 0.999
        assert compare.fingerprints_match(fp.sums([edge]), ref_sums, bounds)
    stale = torch.randn(5000)
    assert not compare.fingerprints_match(fp.sums([stale]), ref_sums, bounds)
    flipped = r.clone()
    flipped[4000:4050] = -flipped[4000:4050]  # in the last chunk
    assert not compare.fingerprints_match(fp.sums([flipped]), ref_sums, bounds)
    swapped = r.clone()
    swapped[:2500], swapped[2500:] = r[2500:].clone(), r[:2500].clone()  # same plain sum, other places
    assert not compare.fingerprints_match(fp.sums([swapped]), ref_sums, bounds)


def test_buffers_are_sized_to_the_outputs_and_kept_between_calls():
    fp = compare.Fingerprinter(chunk=1 << 20)
    small = [torch.randn(300), torch.randn(10)]
    fp.measure(small, (1e-2, 1e-2))
    buf = fp._buf
    assert buf.numel() == 300 and fp._w.numel() == 300, "sized to the largest output, not a whole chunk"
    for _ in range(3):
        fp.measure([torch.randn(300), torch.randn(10)], (1e-2, 1e-2))
    assert fp._buf is buf, "no new allocation between calls of the same shapes"
    fp.measure([torch.randn(3 << 20)])
    assert fp._buf.numel() == 1 << 20, "at most a chunk, however large the output"


def test_empty_and_several_outputs_keep_their_order():
    fp = compare.Fingerprinter(chunk=256)
    a, b = torch.arange(10.0), torch.full((3,), 2.0)
    sums, bounds = fp.measure([a, torch.zeros(0), b], (0.0, 0.5))
    assert sums[0] == 45.0 and sums[2:4] == [0.0, 0.0] and sums[4] == 6.0
    assert bounds == pytest.approx([22.5, 22.5, 0.0, 0.0, 3.0, 3.0], rel=1e-8)
    assert fp.measure([]) == ([], [])


@pytest.mark.parametrize("width", [64, 128, 1000, 4096])
def test_the_weight_pattern_has_full_rank_at_every_output_width(width):
    """The pattern before session 16 (bit 13 of position * 2654435761) had rank 2 as a 256 x 4096 matrix and 64
    as 256 x 128: forging the sums of a 4096-wide matrix product took two matrix-vector products."""
    w = compare._weights(0, 256 * width, torch.device("cpu")).view(256, width)
    assert int(torch.linalg.matrix_rank(w)) == min(256, width)
    assert abs(float(w.mean())) < 0.05


def test_the_weights_of_a_position_do_not_depend_on_how_many_are_made():
    """Both workers size their buffers to the outputs they have seen: a prefix must be the same pattern."""
    long = compare._weights(0, 10_000, torch.device("cpu"))
    assert torch.equal(compare._weights(0, 300, torch.device("cpu")), long[:300])
    assert torch.equal(compare._weights(5000, 100, torch.device("cpu")), long[5000:5100])
    big = compare._weights((1 << 32) + 7, 3, torch.device("cpu"))  # positions wrap at 2**32 without overflow
    assert set(big.tolist()) <= {1.0, -1.0}
