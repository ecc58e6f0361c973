"""The one-pass comparison kernels (kernelbench.evaluation.compare_kernel) on the CPU, in Triton's interpreter.

Each check runs in a child process (the interpreter needs TRITON_INTERPRET=1 before the kernels are defined). With
the kernels enabled, every comparison must come out exactly as the torch path's: the same verdict, the same message
(failures are the torch path's own), the same largest errors; tensors the kernels do not serve take the torch path.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from kbtesting import run_interpreted

pytest.importorskip("triton")

ROOT = Path(__file__).resolve().parents[1]

PRELUDE = """
import math
import torch
from kernelbench.evaluation import compare, compare_kernel as ck

CPU = torch.device("cpu")
ck.MIN_ELEMENTS = 1 << 12  # the interpreter runs a program at a time: small tensors, several programs still

def both(c, r, atol=1e-2, rtol=1e-2):
    ck.disable()
    plain = compare.compare_tensor(c, r, atol, rtol)
    assert ck.enable(CPU)
    fast = compare.compare_tensor(c, r, atol, rtol)
    return plain, fast

def same(plain, fast):
    assert plain.ok == fast.ok and plain.reason == fast.reason, (plain, fast)
    assert plain.max_abs_error == fast.max_abs_error, (plain, fast)
    assert math.isclose(plain.max_rel_error, fast.max_rel_error, rel_tol=1e-6), (plain, fast)
"""


def run_child(body: str) -> str:
    return run_interpreted(PRELUDE, body)


def test_passes_and_failures_come_out_as_the_torch_path_s():
    run_child("""
        torch.manual_seed(0)
        n = ck.MIN_ELEMENTS + 777
        r = torch.randn(n) * 5
        cases = {
            "identical": r.clone(),
            "close": r + torch.randn(n) * 1e-3,
            "one far": r.clone().index_put_((torch.tensor([n - 5]),), torch.tensor(1e3)),
            "nan moved": r.clone().index_put_((torch.tensor([n // 2 + 3]),), torch.tensor(float("nan"))),
            "inf moved": r.clone().index_put_((torch.tensor([7]),), torch.tensor(float("inf"))),
        }
        for name, c in cases.items():
            plain, fast = both(c, r)
            same(plain, fast)
            assert plain.ok == (name in ("identical", "close")), (name, plain)
        # NaN and Inf where the reference has them: equal placement passes, the wrong sign of an Inf fails.
        rs = r.clone()
        rs[3], rs[4], rs[5] = float("nan"), float("inf"), float("-inf")
        c = rs.clone()
        plain, fast = both(c, rs)
        same(plain, fast)
        assert plain.ok
        c[5] = float("inf")
        plain, fast = both(c, rs)
        same(plain, fast)
        assert not plain.ok
        # Right at the tolerance's edge, both sides of it: atol + rtol * |r| with one rounding each, as torch does.
        edge = torch.full((n,), 3.0)
        tol = torch.tensor(1e-2, dtype=torch.float32) + torch.tensor(1e-2, dtype=torch.float32) * edge
        for delta in (tol, torch.nextafter(tol, torch.tensor(10.0)), torch.nextafter(tol, torch.tensor(0.0))):
            plain, fast = both(edge + delta, edge)
            same(plain, fast)
    """)


def test_half_precision_complex_and_the_count_of_failing_elements():
    run_child("""
        torch.manual_seed(1)
        n = ck.MIN_ELEMENTS + 3
        assert ck.enable(CPU)
        for dtype in (torch.float16, torch.bfloat16, torch.float32):
            r = (torch.randn(n) * 4).to(dtype)
            c = r.clone()
            c[::1000] += 1.0
            c[17] = float("nan")
            count = ck.tally(c, r, 1e-2, 1e-2)[0]
            tally = compare._Tally()
            tally.add(c.float(), r.float(), 0, 1e-2, 1e-2, torch.float32)
            assert count > 0 and count == tally.bad_total + tally.nan_mismatch + tally.inf_mismatch, (dtype, count)
            plain, fast = both(c, r)
            same(plain, fast)
            plain, fast = both(r.clone(), r)
            same(plain, fast)
            assert fast.ok
        rc = torch.randn(n // 2 + 1, dtype=torch.complex64)
        plain, fast = both(rc + 1e-4, rc)
        same(plain, fast)
        assert fast.ok
    """)


def test_what_the_kernels_do_not_serve_takes_the_torch_path():
    run_child("""
        n = ck.MIN_ELEMENTS + 1
        assert ck.enable(CPU)
        r = torch.randn(n)
        assert ck.tally(r.clone(), r, 1e-2, 1e-2) == (0, 0.0, 0.0)
        assert ck.tally(r.double(), r.double(), 1e-2, 1e-2) is None  # float64: compared in float64 by torch
        assert ck.tally(r.clone(), r, 0.0, 1e-2) is None              # atol 0: flushed subnormals could differ
        assert ck.tally(r[:1000].clone(), r[:1000], 1e-2, 1e-2) is None  # small: torch's launches cost little
        wide = torch.randn(2 * n)
        assert ck.tally(wide[::2], wide[::2].clone(), 1e-2, 1e-2) is None  # a view with gaps
        assert ck.differs(r.double(), r.double()) is None
        # Off in a process that never enabled it: compare never imports it.
        ck.disable()
        assert compare._kernel() is None
        assert compare.compare_tensor(r.clone(), r, 1e-2, 1e-2).ok
    """)


def test_equality_tells_nan_from_nan_zero_from_minus_zero_and_one_changed_bit():
    run_child("""
        n = ck.MIN_ELEMENTS + 5
        assert ck.enable(CPU)
        for dtype in (torch.float32, torch.float16, torch.bfloat16):
            a = torch.randn(n).to(dtype)
            a[0], a[1] = float("nan"), 0.0
            b = a.clone()
            b[1] = -0.0
            assert ck.differs(a, b) == 0 and compare.tensors_equal(a, b)
            b = a.clone()
            b.view(torch.int16 if dtype != torch.float32 else torch.int32)[n - 1] ^= 1  # the lowest bit
            assert ck.differs(a, b) == 1 and not compare.tensors_equal(a, b)
            b = a.clone()
            b[0] = 1.0
            assert ck.differs(a, b) == 1 and not compare.tensors_equal(a, b)
        for dtype in (torch.int64, torch.int32, torch.uint8):
            a = torch.randint(0, 100, (n,)).to(dtype)
            b = a.clone()
            assert ck.differs(a, b) == 0
            b[n // 2] += 1
            assert ck.differs(a, b) == 1 and not compare.tensors_equal(a, b)
    """)


def test_only_a_reference_worker_s_warm_up_enables_it_and_the_switch_turns_it_off(monkeypatch):
    from kernelbench.evaluation import compare

    monkeypatch.delenv(compare.COMPARE_KERNEL_ENV, raising=False)
    assert compare.compare_kernel_wanted()
    for off in ("0", "off", "torch"):
        monkeypatch.setenv(compare.COMPARE_KERNEL_ENV, off)
        assert not compare.compare_kernel_wanted()
    src = (ROOT / "kernelbench/evaluation/worker/process.py").read_text()
    # The one place it is enabled is a piece of the warm-up that only a reference's list of pieces holds.
    assert src.count("compare_kernel.enable(") == 1
    assert src.index("compare_kernel.enable(") > src.index("def _warm_compare_kernel")
    pieces = src[src.index("def _warm_pieces"):src.index("def _warm_random")]
    assert 'if self.role == "reference" and self.is_cuda' in pieces and "self._warm_compare_kernel" in pieces
    assert pieces.count("_warm_compare_kernel") == 1
