"""The timed-call fingerprint on the GPU: the sums it claims, one read-back per call, no allocation that grows
from call to call."""

from __future__ import annotations

import warnings

import pytest
import torch

from kernelbench.evaluation import compare

pytestmark = [pytest.mark.gpu,
              pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")]


def test_sums_on_the_gpu_match_the_written_out_sums_across_chunks():
    torch.manual_seed(0)
    t = torch.randn(40_000_003, device="cuda")  # three chunks, the last partial
    fp = compare.Fingerprinter()
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
        assert got[:2] == pytest.approx([float(x.sum()), float((w * x).sum())], rel=1e-9, abs=1e-6)
        del w
    assert sums[2] == compare.size_key(t)
    mag = float(x.abs().sum())
    assert bounds[0] == pytest.approx(1e-2 * x.numel() + 1e-2 * mag, rel=1e-7)
    assert bounds[1] < bounds[0] / 100, "the weighted sum's bound grows as the square root of the size"


def test_one_read_back_per_call_and_no_growth():
    torch.manual_seed(1)
    outs = [torch.randn(20_000_000, device="cuda"), torch.randn(1000, device="cuda").half()]
    fp = compare.Fingerprinter()
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


def test_an_honest_gpu_output_passes_and_a_stale_one_fails():
    torch.manual_seed(2)
    r = torch.randn(8_000_000, device="cuda")
    fp = compare.Fingerprinter()
    ref, bounds = fp.measure([r], (1e-4, 1e-4))
    honest = r + (torch.rand_like(r) - 0.5) * 1e-4
    assert compare.fingerprints_match(fp.sums([honest]), ref, bounds)
    assert not compare.fingerprints_match(fp.sums([torch.randn_like(r)]), ref, bounds)
