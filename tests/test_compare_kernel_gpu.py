"""The one-pass comparison kernels (kernelbench.evaluation.compare_kernel) on the GPU: every verdict, message and
largest error as the torch path's, on values that tell compiled arithmetic apart (the tolerance's edge, where one
fused multiply-add would round once instead of twice; subnormals; NaN and Inf; half precision), and a reference
worker that turns them on at its warm-up while a candidate's never does."""

from __future__ import annotations

import math

import pytest
import torch

from kernelbench.evaluation import compare
from kernelbench.evaluation import compare_kernel as ck

pytestmark = [pytest.mark.gpu,
              pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")]

DEV = torch.device("cuda")


@pytest.fixture
def kernel():
    assert ck.enable(DEV), "the comparison kernels did not start"
    yield ck
    ck.disable()


def _both(c, r, atol=1e-2, rtol=1e-2):
    ck.disable()
    plain = compare.compare_tensor(c, r, atol, rtol)
    assert ck.enable(DEV)
    fast = compare.compare_tensor(c, r, atol, rtol)
    assert plain.ok == fast.ok and plain.reason == fast.reason, (plain, fast)
    assert plain.max_abs_error == fast.max_abs_error, (plain, fast)
    assert math.isclose(plain.max_rel_error, fast.max_rel_error, rel_tol=1e-6), (plain, fast)
    return fast


def test_at_the_tolerance_s_edge_each_element_is_judged_as_torch_judges_it(kernel):
    torch.manual_seed(0)
    n = 3 * ck.MIN_ELEMENTS + 11
    for atol, rtol in ((1e-2, 1e-2), (1e-4, 1e-4), (3e-3, 7e-5)):
        r = torch.randn(n, device=DEV) * 10
        tol = torch.tensor(atol, dtype=torch.float32, device=DEV) + torch.tensor(rtol, dtype=torch.float32,
                                                                                 device=DEV) * r.abs()
        for delta in (tol, torch.nextafter(tol, tol * 2), torch.nextafter(tol, tol * 0)):
            c = r + torch.where(torch.rand(n, device=DEV) < 0.5, delta, -delta)
            # Where the fast path passes, the kernel's own count agrees with the torch path's
            res = kernel.tally(c, r, atol, rtol)
            t = compare._Tally()
            t.add(c, r, 0, atol, rtol, torch.float32)
            assert res[0] == t.bad_total + t.nan_mismatch + t.inf_mismatch, (atol, rtol, res[0], t.bad_total)
            _both(c, r, atol, rtol)


def test_subnormals_nan_inf_and_half_precision_as_the_torch_path(kernel):
    n = ck.MIN_ELEMENTS + 5
    tiny = torch.full((n,), 1e-40, device=DEV)  # subnormal float32
    _both(tiny * 3, tiny, 1e-45, 0.0)
    _both(torch.zeros(n, device=DEV), tiny, 1e-45, 0.0)
    r = torch.randn(n, device=DEV)
    r[::1000] = float("nan")
    r[5::1000] = float("inf")
    r[6::1000] = float("-inf")
    assert _both(r.clone(), r).ok
    c = r.clone()
    c[6] = float("inf")
    assert not _both(c, r).ok
    c = r.clone()
    c[7] = float("nan")
    assert not _both(c, r).ok
    for dtype in (torch.float16, torch.bfloat16):
        rh = (torch.randn(n, device=DEV) * 4).to(dtype)
        assert _both(rh.clone(), rh).ok
        ch = rh.clone()
        ch[123] += 1
        assert not _both(ch, rh).ok


def test_equality_is_the_torch_path_s(kernel):
    n = ck.MIN_ELEMENTS + 9
    a = torch.randn(n, device=DEV)
    a[0], a[1] = float("nan"), 0.0
    b = a.clone()
    b[1] = -0.0
    assert kernel.differs(a, b) == 0 and compare.tensors_equal(a, b)
    b.view(torch.int32)[n - 1] ^= 1
    assert kernel.differs(a, b) == 1 and not compare.tensors_equal(a, b)
    i = torch.randint(0, 7, (n,), device=DEV)
    j = i.clone()
    j[9] += 1
    assert kernel.differs(i, i.clone()) == 0 and kernel.differs(i, j) == 1


def test_a_reference_worker_enables_it_and_a_candidate_worker_does_not():
    from kernelbench.evaluation import protocol
    from kernelbench.evaluation.worker.process import Worker

    for role, expected in (("reference", True), ("candidate", False)):
        ck.disable()
        w = Worker(role, "cuda:0")
        w.cmd_init(protocol.Init(warm=True), [])
        assert bool(ck._enabled_on) is expected, role
    ck.disable()
