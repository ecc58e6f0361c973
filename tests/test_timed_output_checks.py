"""The checks on what a candidate produced and how evenly it ran while timed, from real fingerprints of real
tensors: the mean deviation of the weighted sums over a run (outputs less exact than the tolerance in every
timed call pass each call's bound but not the mean) and the flag for timed calls far more uneven than the
reference's."""

from __future__ import annotations

import pytest
import torch

from kernelbench.evaluation import compare
from kernelbench.evaluation.parent.candidate_timing import _pooled_deviation, _uneven_calls

TOL = (1e-4, 1e-4)  # fp32's default


def _tf32(x: torch.Tensor) -> torch.Tensor:
    """x with its float32 mantissa cut to TF32's 10 bits (what a tensor-core GEMM in TF32 reads)."""
    return (x.view(torch.int32) & ~0x1FFF).view(torch.float32)


def _run(candidate, calls: int = 12) -> tuple[int, list[float]]:
    """Fingerprint ``calls`` timed calls of a 64x512 @ 512x64 matmul, reference in float64 rounded to float32,
    each call with its own key; returns how many calls failed their own bound and the run's z2 values."""
    fp = compare.Fingerprinter()
    failed, z2 = 0, []
    for key in range(calls):
        g = torch.Generator().manual_seed(key)
        a, b = torch.randn(64, 512, generator=g), torch.randn(512, 64, generator=g)
        ref = (a.double() @ b.double()).float()
        ref_sums, bounds = fp.measure([ref], TOL, key=key)
        cand_sums = fp.measure([candidate(a, b)], key=key)[0]
        failed += not compare.fingerprints_match(cand_sums, ref_sums, bounds)
        z2 += compare.weighted_z2(cand_sums, ref_sums, bounds)
    return failed, z2


def test_a_tf32_matmul_passes_most_calls_alone_but_fails_on_the_mean():
    failed, z2 = _run(lambda a, b: _tf32(a) @ _tf32(b))
    assert failed < len(z2) / 2, "most calls pass their own bound: the per-call check alone lets it through"
    a, b = torch.randn(64, 512), torch.randn(512, 64)
    assert not torch.allclose(_tf32(a) @ _tf32(b), (a.double() @ b.double()).float(), *TOL), \
        "the elementwise check (last timed call, correctness trials) would fail it"
    message = _pooled_deviation(z2)
    assert message is not None and "less exactly when timed" in message


def test_honest_outputs_even_at_the_edge_of_tolerance_pass_the_mean():
    failed, z2 = _run(lambda a, b: a @ b)
    assert failed == 0 and _pooled_deviation(z2) is None
    assert max(z2) < 1e-3

    # errors as large as the tolerance allows, at every element, with random signs: the worst honest case
    def at_the_edge(a, b):
        exact = (a.double() @ b.double()).float()
        sign = torch.randint(0, 2, exact.shape, generator=torch.Generator().manual_seed(int(a[0, 0] * 1e6))) * 2 - 1
        return exact + sign * (TOL[0] + TOL[1] * exact.abs()) * 0.999

    failed, z2 = _run(at_the_edge, calls=24)
    assert failed == 0 and _pooled_deviation(z2) is None
    assert 0.3 < sum(z2) / len(z2) < 2.0, "about one unit of honest rounding, as the bound's unit says"


def test_too_few_outputs_are_not_judged_and_small_outputs_are_left_out():
    assert _pooled_deviation([100.0] * (compare.POOLED_MIN_COUNT - 1)) is None
    assert _pooled_deviation([100.0] * compare.POOLED_MIN_COUNT) is not None
    fp = compare.Fingerprinter()
    small = torch.randn(10)
    ref, bounds = fp.measure([small], TOL)
    assert bounds[1] == bounds[0], "a small output's weighted sum has the worst-case bound"
    assert compare.weighted_z2(fp.sums([small + 1.0]), ref, bounds) == []


@pytest.mark.parametrize("cand, ref, flagged", [
    ([1.0] * 40, [2.0] * 40, False),                                   # even on both sides
    ([1.0] * 36 + [1.3] * 4, [2.0] * 40, False),                       # honest jitter
    ([0.01] * 39 + [1.0], [0.05] * 40, False),                         # one stray slow call of a fast kernel
    ([0.01] * 36 + [0.5] * 4, [0.05] * 40, True),                      # one heavy call in each of four blocks
    ([0.1] * 30 + [4.0] * 10, [2.0] * 40, True),                       # a quarter of the calls carry the work
    ([0.1] * 30 + [4.0] * 10, [1.0] * 30 + [40.0] * 10, False),        # the reference is as uneven
])
def test_timed_calls_far_more_uneven_than_the_reference_s_are_flagged(cand, ref, flagged):
    flag = _uneven_calls(cand, ref)
    assert (flag is not None) == flagged
    if flagged:
        assert flag.startswith("timed calls uneven") and "median speedup" in flag


@pytest.mark.parametrize("hook, forward", [
    ("mode", "(type('Passthrough', (torch.overrides.TorchFunctionMode,), {'__torch_function__': "
             "lambda self, f, types, args=(), kwargs=None: f(*args, **(kwargs or {}))})().__enter__(), "
             "torch.relu(x))[1]"),
    ("profile", "(__import__('sys').setprofile(lambda *a: None), torch.relu(x))[1]"),
    # An attacker's review (session 18): a collector callback runs at a collection inside the fingerprint.
    ("gc", "(__import__('gc').callbacks.append(lambda *a: None), torch.relu(x))[1]"),
    # The worker object itself (found through gc): an instance attribute shadows the check that would catch a hook.
    ("worker", "([o for o in __import__('gc').get_objects() if type(o).__name__ == 'Worker' and o.model is self][0]"
               ".__dict__.__setitem__('_check_fused_path', lambda: None), torch.relu(x))[1]"),
    # An attacker's review (session 19): a cache of the method names, filled at the first check, could be filled by
    # forward first with no names, and then a method shadowed unseen;
    ("cache", "([__import__('kernelbench.evaluation.worker.timing', fromlist=['_']).__dict__.setdefault('_METHODS', "
              "{}).__setitem__(type(o), frozenset()) or o.__dict__.__setitem__('_cushion', lambda: None) "
              "for o in __import__('gc').get_objects() if type(o).__name__ == 'Worker' and o.model is self], "
              "torch.relu(x))[1]"),
    # the event functions Init binds on the worker are instance attributes, not methods: one replaced reports any
    # time; and the role, read by the fused path's check.
    ("elapsed", "([o.__dict__.__setitem__('_elapsed', lambda a, b: 1e-6) for o in __import__('gc').get_objects() "
                "if type(o).__name__ == 'Worker' and o.model is self], torch.relu(x))[1]"),
    ("role", "([o.__dict__.__setitem__('role', 'compile') for o in __import__('gc').get_objects() "
             "if type(o).__name__ == 'Worker' and o.model is self], torch.relu(x))[1]"),
    # Session 24: the fingerprinter's own attributes, read after each call's end event: its method shadowed, an
    # engine set where the fused path never started, a buffer object of another class.
    ("fp-measure", "([o.fingerprinter.__dict__.__setitem__('measure', lambda *a, **k: ([], [])) "
                   "for o in __import__('gc').get_objects() if type(o).__name__ == 'Worker' and o.model is self], "
                   "torch.relu(x))[1]"),
    ("fp-fused", "([setattr(o.fingerprinter, 'fused', type('E', (), {'accepts': lambda s, f: True})()) "
                 "for o in __import__('gc').get_objects() if type(o).__name__ == 'Worker' and o.model is self], "
                 "torch.relu(x))[1]"),
    ("fp-buffers", "([setattr(o.fingerprinter, '_f32', type('S', (), {})()) "
                   "for o in __import__('gc').get_objects() if type(o).__name__ == 'Worker' and o.model is self], "
                   "torch.relu(x))[1]"),
    ("fp-number", "([setattr(o.fingerprinter, 'chunk', type('I', (int,), {})(1 << 24)) "
                  "for o in __import__('gc').get_objects() if type(o).__name__ == 'Worker' and o.model is self], "
                  "torch.relu(x))[1]"),
    # the worker's data attributes read between calls: the cushion's spin count as an int subclass (its __index__
    # would run before the next call's start event, with the block's seeds in reach)
    ("cushion", "([setattr(o, 'cushion_cycles', type('I', (int,), {})(1000)) "
                "for o in __import__('gc').get_objects() if type(o).__name__ == 'Worker' and o.model is self], "
                "torch.relu(x))[1]"),
    # a look-alike subclass swapped in: its methods replace the checks without any instance attribute.
    ("class", "([setattr(o, '__class__', type('Worker', (type(o),), {'_cushion': lambda s: None})) "
              "for o in __import__('gc').get_objects() if type(o).__name__ == 'Worker' and o.model is self], "
              "torch.relu(x))[1]"),
])
def test_a_forward_that_leaves_an_interception_hook_in_place_fails_its_timed_call(hook, forward):
    """A torch function mode (or a profile hook) left active by forward sees every torch call of the fingerprint
    and the output checks that follow the call's end event: it could finish the work there, untimed."""
    import sys

    from kbtesting import problem_source

    from kernelbench.evaluation import protocol
    from kernelbench.evaluation.seeds import INIT_SEED
    from kernelbench.evaluation.worker.process import Worker
    from kernelbench.evaluation.worker.timing import HookLeftActive

    def time_it(w, fingerprint):
        return w.cmd_time(protocol.Time(seeds=[1, 2], fwd_seeds=[3, 4], warmup=True, fingerprint=fingerprint,
                                        cushion_us=0), [])

    def worker(code):
        w = Worker("reference", "cpu")
        w.cmd_init(protocol.Init(), [])
        w.cmd_setup(protocol.Setup(code=code, precision="fp32", atol=1e-4, rtol=1e-4, init_seed=INIT_SEED,
                                   probe_seed=None, ieee_fp32=True, compile_mode=None), [])
        return w

    honest = worker(problem_source("torch.relu(x)"))
    assert time_it(honest, True)[0].calls > 0
    try:
        w = worker(problem_source(forward))
        with pytest.raises(HookLeftActive, match={"mode": "mode", "profile": "profile hook", "gc": "callbacks", "worker": "worker itself",
                                                  "cache": "worker._cushion", "elapsed": "worker._elapsed",
                                                  "role": "worker.role", "class": "the worker's class",
                                                  "fp-measure": "fingerprinter.measure", "fp-fused": "fingerprinter.fused",
                                                  "fp-buffers": "fingerprinter._f32",
                                                  "fp-number": "fingerprinter.chunk",
                                                  "cushion": "worker.cushion_cycles"}[hook]):
            time_it(w, True)
    finally:
        import gc

        gc.callbacks[:] = [c for c in gc.callbacks if getattr(c, "__name__", "") != "<lambda>"]
        while torch._C._len_torch_function_stack():
            torch._C._pop_torch_function_stack()
        sys.setprofile(None)
    assert torch._C._len_torch_function_stack() == 0


@pytest.mark.parametrize("owner, name", [("torch.Tensor", "__getitem__"), ("torch.Tensor", "is_complex"),
                                         ("torch._C", "_len_torch_function_stack"), ("sys", "gettrace")])
def test_replacing_what_the_checks_after_a_timed_call_use_is_caught(owner, name):
    import sys

    from kernelbench.evaluation.guards import runtime as rt

    target = {"torch.Tensor": torch.Tensor, "torch._C": torch._C, "sys": sys}[owner]
    before = rt.PatchSnapshot.take()
    original = getattr(target, name)
    setattr(target, name, lambda *a, **k: 0)
    try:
        assert f"{owner}.{name}" in before.changes(rt.PatchSnapshot.take())
    finally:
        setattr(target, name, original)
    assert before.changes(rt.PatchSnapshot.take()) == []


def test_an_output_s_container_and_numbers_are_read_without_running_its_own_methods():
    """A timed call's outputs are walked after its end event: a tuple subclass's __iter__ (or a number's __float__)
    would run candidate code there, untimed."""
    from kernelbench.evaluation import transport

    ran = []

    class Lazy(tuple):
        def __iter__(self):
            ran.append("iter")
            return super().__iter__()

    class Num(float):
        def __float__(self):
            ran.append("float")
            return 0.0

    class Whole(int):
        def __int__(self):
            ran.append("int")
            return 0

    tree, leaves = transport.flatten(Lazy((torch.ones(2), Num(1.5), Whole(3), [torch.zeros(1)])))
    assert ran == []
    assert tree["t"] == "tuple" and [x["t"] for x in tree["items"]] == ["tensor", "scalar", "scalar", "list"]
    assert [tree["items"][1]["v"], tree["items"][2]["v"]] == [1.5, 3] and len(leaves) == 2


def test_a_kernel_registered_for_an_operator_the_checks_use_is_caught():
    """torch.library can replace what aten::dot does on a device without touching any attribute: the patch
    detector compares the dispatcher's table for the operators the fingerprint and the checks run through."""
    import warnings

    from kernelbench.evaluation.guards import runtime as rt

    before = rt.PatchSnapshot.take()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # torch warns that an aten kernel is being overridden
        lib = torch.library.Library("aten", "IMPL")
        lib.impl("dot", lambda a, b: torch.zeros((), dtype=a.dtype), "CPU")
    try:
        assert float(torch.dot(torch.ones(3), torch.ones(3))) == 0.0, "the override is in force"
        assert "dispatcher aten::dot" in before.changes(rt.PatchSnapshot.take())
    finally:
        lib._destroy()
    assert float(torch.dot(torch.ones(3), torch.ones(3))) == 3.0
    assert before.changes(rt.PatchSnapshot.take()) == []


def test_the_worker_checks_compare_classes_by_identity_and_refuse_odd_attribute_names():
    """The checks read what candidate code may have left on the worker without running any of it: a class whose
    metaclass answers ``==`` (``type(v) in (...)`` would call it) and an attribute named by a str subclass (whose hash
    and equality every lookup calls) are both refused, and neither object's code runs."""
    from kernelbench.evaluation import protocol
    from kernelbench.evaluation.worker.process import Worker
    from kernelbench.evaluation.worker.timing import worker_changes

    ran = []

    class Meta(type):
        def __eq__(cls, other):
            ran.append("eq")
            return True

        __hash__ = type.__hash__

    class Sly(str):
        def __hash__(self):
            ran.append("hash")
            return str.__hash__(self)

        def __eq__(self, other):
            ran.append("eq")
            return str.__eq__(self, other)

    w = Worker("reference", "cpu")
    w.cmd_init(protocol.Init(), [])
    assert worker_changes(w) == []
    w.cushion_cycles = Meta("I", (), {})()
    assert worker_changes(w) == ["worker.cushion_cycles (of another class)"] and ran == []
    w.cushion_cycles = None
    w.fingerprinter.chunk = Meta("J", (), {})()
    assert worker_changes(w) == ["fingerprinter.chunk"] and ran == []
    w.fingerprinter.chunk = 1 << 24
    assert worker_changes(w) == []
    vars(w.fingerprinter)[Sly("measure")] = lambda *a, **k: ([], [])
    ran.clear()  # (the insertion above hashed the key: the test's doing, not the check's)
    assert worker_changes(w) == ["fingerprinter attributes named by something other than a string"]
    vars(w)[Sly("_cushion")] = lambda: None
    ran.clear()
    assert worker_changes(w) == ["worker attributes named by something other than a string"]
    assert ran == [], "a check ran candidate code"
