"""The one-pass fingerprint kernel (kernelbench.evaluation.fingerprint_kernel) on the CPU, in Triton's interpreter.

Each check runs in a child process: the interpreter needs TRITON_INTERPRET=1 before the kernel is defined. The
kernel must give the torch path's sums (the same weights, rotated per chunk and per call), leave what it cannot
serve to the torch path, and show the patch detector every object between the fingerprint and the launch.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from kbtesting import run_interpreted

pytest.importorskip("triton")

ROOT = Path(__file__).resolve().parents[1]

PRELUDE = """
import torch
from kernelbench.evaluation import compare, fingerprint_kernel as fk
from kernelbench.evaluation.guards import runtime as rt

def pair(chunk):  # the kernel sums in float64: the torch path it stands for is the float64 one
    plain = compare.Fingerprinter(chunk, segment=0)
    fused = compare.Fingerprinter(chunk, segment=0)
    fused.fused = fk.FusedSums.start(torch.device("cpu"), chunk)
    return plain, fused

def started_baseline():  # the fused path started and used once, the watch's baseline taken (as a worker's Init)
    fp = compare.Fingerprinter()
    assert fp.enable_fused(torch.device("cpu"), force=True)
    fp.measure([torch.randn(5000)], (1e-2, 1e-2), key=1)
    b = fk.Baseline.take()
    assert b.changed() == []
    return fp, b

def close(a, b, rel=1e-12):
    assert len(a) == len(b), (a, b)
    for x, y in zip(a, b):
        assert abs(x - y) <= rel * max(1.0, abs(x)), (a, b)
"""


def run_child(body: str, env_extra: dict[str, str] | None = None) -> str:
    return run_interpreted(PRELUDE, body, env_extra)


def test_sums_and_bounds_equal_the_torch_path_across_chunks_sizes_and_keys():
    run_child("""
        torch.manual_seed(0)
        cases = [(5000, 1 << 24), (3 * 4096 + 123, 4096), (100, 4096), (2 * 4096, 4096), (70000, 1 << 24),
                 (5 * 2048 + 1, 2048), (1, 4096)]
        for n, chunk in cases:
            plain, fused = pair(chunk)
            x = torch.randn(n) * 3 + 1
            for key in (0, 7, 12345, 2**40 + 3):
                s1, b1 = plain.measure([x], (1e-2, 1e-3), key=key)
                s2, b2 = fused.measure([x], (1e-2, 1e-3), key=key)
                close(s1, s2)
                close(b1, b2)
                close(plain.measure([x], key=key)[0], fused.measure([x], key=key)[0])
            assert fused.fused.launches > 0
    """)


def test_a_weighted_sum_changes_with_the_key_and_a_changed_element_moves_it():
    run_child("""
        torch.manual_seed(1)
        _, fused = pair(4096)
        x = torch.randn(3 * 4096 + 5)
        w = [fused.measure([x], key=k)[0][1] for k in range(6)]
        assert len({round(v, 9) for v in w}) == 6, w
        y = x.clone()
        y[4096 * 2 + 17] += 0.5
        a, b = fused.measure([x], key=3)[0], fused.measure([y], key=3)[0]
        assert abs(a[0] + 0.5 - b[0]) < 1e-9 and abs(abs(a[1] - b[1]) - 0.5) < 1e-9, (a, b)
    """)


def test_what_the_kernel_cannot_serve_takes_the_torch_path_with_the_same_sums():
    run_child("""
        torch.manual_seed(2)
        plain, fused = pair(4096)
        base = torch.randn(9001)
        others = [base.double(), base.half(), (base * 100).to(torch.int32), torch.zeros(0),
                  base[1:],  # 4 bytes past an aligned start: not 16-byte aligned
                  torch.view_as_real(torch.randn(300, dtype=torch.complex64)).reshape(-1)]
        assert not any(fused.fused.accepts(t.reshape(-1)) for t in others[:5])
        before = fused.fused.launches
        close(plain.measure(others[:5], (1e-3, 1e-3), key=9)[0], fused.measure(others[:5], (1e-3, 1e-3), key=9)[0])
        assert fused.fused.launches == before, "none of these may reach the kernel"
        mixed = [base, base.half(), torch.randn(77, 3).t()]  # float32, float16 and a transposed view (copied flat)
        s1, b1 = plain.measure(mixed, (1e-3, 1e-3), key=4)
        s2, b2 = fused.measure(mixed, (1e-3, 1e-3), key=4)
        close(s1, s2)
        close(b1, b2)
        assert fused.fused.launches == before + 2
    """)


def test_the_patch_detector_sees_hooks_and_replaced_parts_of_the_launch_path_and_nothing_after_honest_use():
    run_child("""
        import triton
        from triton.runtime import jit
        _, fused = pair(4096)
        before = rt.PatchSnapshot.take()
        assert any(k.startswith("fingerprint kernel") for k in before.entries)
        assert any(k.startswith("triton.knobs.runtime.") for k in before.entries)
        for k in range(4):
            fused.measure([torch.randn(5000 + k)], (1e-2, 1e-2), key=k)
        assert before.changes(rt.PatchSnapshot.take()) == []

        def changed_by(patch, undo):
            patch()
            try:
                return before.changes(rt.PatchSnapshot.take())
            finally:
                undo()
                assert before.changes(rt.PatchSnapshot.take()) == []

        knobs = triton.knobs.runtime
        old_hook = knobs.launch_enter_hook
        got = changed_by(lambda: setattr(knobs, "launch_enter_hook", lambda *a: None),
                         lambda: setattr(knobs, "launch_enter_hook", old_hook))
        assert "triton.knobs.runtime.launch_enter_hook" in got, got
        kernel = fk._fingerprint_partials
        old_fn = kernel.fn
        got = changed_by(lambda: setattr(kernel, "fn", lambda *a: None), lambda: setattr(kernel, "fn", old_fn))
        assert "fingerprint kernel.fn" in got, got
        cls = type(kernel)
        name = "run" if "run" in vars(cls) else next(n for n, v in vars(cls).items() if callable(v))
        old_run = vars(cls)[name]
        got = changed_by(lambda: setattr(cls, name, lambda self, *a, **k: None), lambda: setattr(cls, name, old_run))
        assert any(f".{name}" in k for k in got), got
        old_watched = fk.watched
        got = changed_by(lambda: setattr(fk, "watched", lambda: {}), lambda: setattr(fk, "watched", old_watched))
        assert "kernelbench.evaluation.fingerprint_kernel.watched" in got, got
    """)


def test_off_unless_asked_for_and_unavailable_off_cuda():
    # Off by default (until its hardened watch has run on a GPU) and with KB_FINGERPRINT=torch; on with =fused.
    for value in ("", "torch"):
        run_child("""
            fp = compare.Fingerprinter()
            assert fp.enable_fused(torch.device("cpu")) is False and fp.fused is None
        """, {"KB_FINGERPRINT": value})
    run_child("""
        fp = compare.Fingerprinter(4096)
        assert fp.enable_fused(torch.device("cpu")) is True and fp.fused is not None
    """, {"KB_FINGERPRINT": "fused"})
    run_child("""
        import os
        os.environ.pop("TRITON_INTERPRET")
        try:
            fk.FusedSums.start(torch.device("cpu"), 1 << 24)
        except fk.FusedUnavailable as e:
            assert "CUDA" in str(e)
        else:
            raise AssertionError("started on the CPU without the interpreter")
        for bad in (1000, 3 << 20, 1024):
            try:
                os.environ["TRITON_INTERPRET"] = "1"
                fk.FusedSums.start(torch.device("cpu"), bad)
            except fk.FusedUnavailable as e:
                assert "power of two" in str(e)
            else:
                raise AssertionError(f"accepted chunks of {bad}")
    """)


def test_candidate_caches_are_seeded_from_the_trusted_cache_only_with_whole_entries(tmp_path, monkeypatch):
    from kernelbench.evaluation import fingerprint_kernel as fk

    monkeypatch.setenv("KERNELBENCH_CACHE_DIR", str(tmp_path / "kb" / "extensions"))
    trusted = fk.trusted_cache_dir()
    assert trusted == tmp_path / "kb" / "triton-fingerprint"
    dest = tmp_path / "scratch" / ".triton" / "cache"
    assert fk.seed_cache(dest) == 0 and not dest.exists(), "nothing to copy before a reference worker compiled"
    entry = trusted / ("A" * 43)
    entry.mkdir(parents=True)
    (entry / "_fingerprint_partials.cubin").write_bytes(b"\x7fELF cubin")
    (entry / "tmp.pid_12_abc").write_bytes(b"half written")
    (trusted / "not-an-entry.txt").write_text("x")
    (trusted / "..odd").mkdir()
    assert fk.seed_cache(dest) == 1
    assert (dest / entry.name / "_fingerprint_partials.cubin").read_bytes() == b"\x7fELF cubin"
    assert not (dest / entry.name / "tmp.pid_12_abc").exists()
    assert sorted(p.name for p in dest.iterdir()) == [entry.name]


def test_the_trusted_cache_applies_only_inside_the_block(monkeypatch, tmp_path):
    from kernelbench.evaluation import fingerprint_kernel as fk

    monkeypatch.setenv("TRITON_CACHE_DIR", "/private/one")
    with fk.triton_cache(tmp_path):
        assert os.environ["TRITON_CACHE_DIR"] == str(tmp_path)
    assert os.environ["TRITON_CACHE_DIR"] == "/private/one"
    monkeypatch.delenv("TRITON_CACHE_DIR")
    with fk.triton_cache(tmp_path):
        assert os.environ["TRITON_CACHE_DIR"] == str(tmp_path)
    assert "TRITON_CACHE_DIR" not in os.environ
    with fk.triton_cache(None):
        assert "TRITON_CACHE_DIR" not in os.environ


def test_the_patch_detector_sees_the_driver_the_engine_its_owner_and_what_the_launch_path_reads_by_name():
    """An attacker's review (session 18): each of these put candidate code inside the fingerprint, after the timed
    call, with no change the detector saw. ``triton.runtime.driver`` is the DriverConfig, not the module, so the
    driver's watch held ``id(None)``; the engine's and its Fingerprinter's own attributes (``engine.sums = ...``
    shadows the method) were not compared; nor were the globals the launch path reads by name, nor the knobs'
    class descriptors."""
    run_child("""
        import types
        import triton
        import triton.runtime as triton_runtime
        from triton.runtime import interpreter

        class Driver:  # the real CudaDriver needs a GPU; what matters is its attributes, as CudaDriver keeps them
            def __init__(self):
                self.get_current_stream = lambda index: 0
                self.get_current_device = lambda: 0

        triton_runtime.driver.set_active(Driver())
        fp = compare.Fingerprinter(4096)
        assert fp.enable_fused(torch.device("cpu"), force=True)
        engine = fp.fused
        before = rt.PatchSnapshot.take()
        for k in range(3):
            fp.measure([torch.randn(5000 + k)], (1e-2, 1e-2), key=k)
        assert before.changes(rt.PatchSnapshot.take()) == []

        def changed_by(target, name, value):
            had = name in vars(target) or name == "__class__"
            old = vars(target)[name] if name in vars(target) else getattr(target, name, None)
            setattr(target, name, value)
            try:
                return before.changes(rt.PatchSnapshot.take())
            finally:
                if had:
                    setattr(target, name, old)
                else:
                    delattr(target, name)
                assert before.changes(rt.PatchSnapshot.take()) == []

        def hook(*a, **k):
            return None

        active = triton_runtime.driver._active
        assert any(k.startswith("triton driver.active") for k in changed_by(active, "get_current_stream", hook))
        assert any(k.startswith("triton driver") for k in changed_by(triton_runtime.driver, "_active", Driver()))
        got = changed_by(engine, "sums", hook)
        assert any(k.startswith("fingerprint engine[0].__dict__") for k in got), got
        assert any("engine[0]" in k for k in changed_by(engine, "__class__", type("Sub", (fk.FusedSums,), {}))), got
        assert any(k.startswith("fingerprinter[0]") for k in changed_by(fp, "measure", hook))
        assert any(k.startswith("fingerprinter[0]") for k in changed_by(fp, "fused", types.SimpleNamespace()))
        got = changed_by(interpreter, "GridExecutor", hook)  # a global the kernel's run reads by name
        assert any(k.endswith("run global GridExecutor") for k in got), got
        got = changed_by(torch.cuda, "device", hook)  # FusedSums.sums enters torch.cuda.device: two names deep
        assert any(k.endswith("sums global torch.cuda.device") for k in got), got
        knobs_cls = type(triton.knobs.runtime)
        got = changed_by(knobs_cls, "launch_enter_hook", property(lambda self: None))
        assert any("launch_enter_hook" in k and "<" in k for k in got), got
    """)


def test_changed_is_empty_after_honest_use_and_names_what_forward_replaced():
    """What each timed call checks before its fingerprint (worker/timing.py): the watch against its state at start."""
    run_child("""
        import triton.runtime as triton_runtime

        class Driver:  # the real CudaDriver needs a GPU
            def __init__(self):
                self.get_current_stream = lambda index: 0

        triton_runtime.driver.set_active(Driver())
        fp = compare.Fingerprinter(4096)
        assert fp.enable_fused(torch.device("cpu"), force=True)
        baseline = fk.watched()
        for k in range(3):
            fp.measure([torch.randn(5000 + k)], (1e-2, 1e-2), key=k)
        assert fk.changed(baseline) == []
        active = triton_runtime.driver._active
        original = active.get_current_stream
        active.get_current_stream = lambda index: original(index)
        assert any(k.startswith("triton driver.active") for k in fk.changed(baseline))
        active.get_current_stream = original
        fp.fused = None  # the torch path instead: a change too
        assert any(k.startswith("fingerprinter[0]") for k in fk.changed(baseline))
    """)


def test_a_baseline_keeps_what_it_watched_alive_so_a_replacement_cannot_reuse_its_id():
    """CPython reuses a freed object's address: a watched object replaced and freed can leave its id to its
    replacement, and the watch compared ids only. A baseline pins every object it took an id of."""
    run_child("""
        import gc
        import weakref

        fp = compare.Fingerprinter(4096)
        assert fp.enable_fused(torch.device("cpu"), force=True)

        def swap_and_free(pin):
            class Hook:
                def __call__(self, *a):
                    return None

            fp.fused.hook = Hook()  # an attribute of the engine, watched by id
            fk.watched(pin=pin)
            ref = weakref.ref(fp.fused.hook)
            fp.fused.hook = Hook()
            gc.collect()
            alive = ref() is not None
            del fp.fused.hook
            return alive

        assert not swap_and_free(False), "without a pin the replaced object is freed (its id free for reuse)"
        assert swap_and_free(True)
    """)


def test_the_watch_is_bounded_and_stable_on_what_made_it_slow_or_false_on_the_gpu():
    """Session 19, Triton 3.6 on H200s: the watch walked every item of a long list (a reference worker's Init took
    minutes, killed at 180 s), and ``JITFunction.__init__``'s ``super().__init__`` made it look ``__init__`` up on
    ``builtins``: a bound method made anew at each lookup, so the pinned baseline never matched (every timed call
    of a candidate would have failed with FusedTampered)."""
    run_child("""
        import time
        out = {}
        t0 = time.perf_counter()
        fk._walk({"long": list(range(2_000_000)), "wide": {i: [i] for i in range(100_000)}}, "x", out, 4, set(),
                 lambda: ())
        assert len(out) <= fk.WATCH_LIMIT + 2, len(out)
        assert time.perf_counter() - t0 < 2.0
        assert out["x['long']"][3] == 2_000_000  # the size is kept: an item added past the bound shows

        class Base:
            def __init__(self):
                pass

        class Child(Base):
            def __init__(self):
                super().__init__()

        assert "__init__" in Child.__init__.__code__.co_names
        fk._pinning = []
        try:
            first = {}
            fk._globals_of(Child.__init__, "c", first)
        finally:
            fk._PINNED.extend(fk._pinning)
            fk._pinning = None
        again = {}
        fk._globals_of(Child.__init__, "c", again)
        assert again == first, sorted(set(again.items()) ^ set(first.items()))
    """)


def test_a_baseline_s_readers_see_what_the_walk_sees_at_a_fraction_of_its_cost():
    """Each timed call asks Baseline.changed before its fingerprint (the walk cost 32 ms per call on an H200): its
    readers must report nothing in honest use, even after more baselines were pinned (a module's namespace, where
    the pinned list lives, is not walked: Triton 3.6's JITFunction keeps its module's as ``__globals__``), and
    must catch what the walk catches: a method replaced on the JIT function's class, an attribute added to the
    engine, a replaced ``__dict__``, a shadowing global, a launch hook."""
    run_child("""
        import triton
        fp = compare.Fingerprinter()
        assert fp.enable_fused(torch.device("cpu"), force=True)
        fp.measure([torch.randn(5000)], (1e-2, 1e-2), key=1)
        kernel = fk._fingerprint_partials
        kernel.__dict__["__globals__"] = vars(fk)  # as Triton 3.6 keeps it
        b1 = fk.Baseline.take()
        b2 = fk.Baseline.take()  # pins more: the pinned list grows
        fp.measure([torch.randn(7000)], (1e-2, 1e-2), key=2)
        assert b1.changed() == [] and b2.changed() == [] and fk.changed(b1.entries) == []
        assert len(b1.probes) >= len(b1.entries) > 50

        def caught(change, undo):
            change()
            try:
                return b1.changed()
            finally:
                undo()

        cls = type(kernel)
        name = "run" if "run" in vars(cls) else next(k for k, v in vars(cls).items() if callable(v))
        old = vars(cls)[name]
        assert caught(lambda: setattr(cls, name, lambda *a, **k: old(*a, **k)), lambda: setattr(cls, name, old))
        engine = fk._ENGINES[0]
        assert caught(lambda: setattr(engine, "sums", lambda *a: None), lambda: delattr(engine, "sums"))
        saved = kernel.__dict__
        assert caught(lambda: setattr(kernel, "__dict__", dict(saved)), lambda: setattr(kernel, "__dict__", saved))
        glb = fk._launch.__globals__
        assert caught(lambda: glb.__setitem__("len", lambda x: 0), lambda: glb.pop("len"))
        knobs = triton.knobs.runtime
        old_hook = knobs.launch_enter_hook
        assert caught(lambda: setattr(knobs, "launch_enter_hook", lambda *a: None),
                      lambda: setattr(knobs, "launch_enter_hook", old_hook))
        assert b1.changed() == [], b1.changed()
    """)


def test_a_baseline_s_readers_see_what_the_full_walk_sees_and_no_more():
    """An attacker's review of the readers (session 19): each of these runs candidate code inside the fingerprint's
    launch while every reader read what it read at Init (the full walk saw the first three): an attribute added to
    the JIT function shadows its class's ``run``; the JIT function's class swapped for a look-alike subclass; a
    method added to a watched class in place of a removed non-method (the namespace's size unchanged); a module on
    the launch path given a class whose ``__getattribute__`` runs; Triton's hook object's class's ``__call__``
    (Triton's launcher calls the hook object at every launch). And honest code that copies a watched object (copy
    caches ``__slotnames__`` on its class) or reads a class's ``__annotations__`` (which creates it) is no change."""
    run_child("""
        import copy, sys, types
        import triton
        fp = compare.Fingerprinter()
        assert fp.enable_fused(torch.device("cpu"), force=True)
        fp.measure([torch.randn(5000)], (1e-2, 1e-2), key=1)
        kernel = fk._fingerprint_partials
        b = fk.Baseline.take()
        ran = []

        def caught(change, undo):
            change()
            try:
                fp.measure([torch.randn(3000)], (1e-2, 1e-2), key=2)  # the hooks below do run in a fingerprint
                return b.changed()
            finally:
                undo()

        Cls = type(kernel)
        run = Cls.run

        def hook(self, *a, **k):
            ran.append(1)
            return run(self, *a, **k)

        assert caught(lambda: setattr(kernel, "run", types.MethodType(hook, kernel)), lambda: delattr(kernel, "run"))
        assert ran
        Evil = type(Cls.__name__, (Cls,), {"run": hook, "__module__": Cls.__module__, "__qualname__": Cls.__qualname__})
        ran.clear()
        assert caught(lambda: setattr(kernel, "__class__", Evil), lambda: setattr(kernel, "__class__", Cls))
        assert ran
        lookalike = next(k for k, v in vars(Cls).items() if k == "__annotations__")
        saved = vars(Cls)[lookalike]

        def swap():
            delattr(Cls, lookalike)
            Cls.__getitem__ = lambda self, grid: (ran.append(3), lambda *a, **k: run(self, *a, grid=grid,
                                                                                    warmup=False, **k))[1]

        def unswap():
            del Cls.__getitem__
            setattr(Cls, lookalike, saved)

        ran.clear()
        assert caught(swap, unswap)
        assert ran
        assert fk._launch.__globals__["torch"] is torch  # (torch.cuda.device, read through it on a GPU)
        Spy = type("Spy", (types.ModuleType,), {"__getattribute__": lambda self, n: types.ModuleType.__getattribute__(
            self, n)})
        plain = type(torch)
        assert caught(lambda: setattr(torch, "__class__", Spy), lambda: setattr(torch, "__class__", plain))
        chain = triton.knobs.runtime.launch_enter_hook
        if chain is not None and type(chain).__module__.startswith("triton"):  # a HookChain (Triton 3.9)
            HookChain = type(chain)
            call = HookChain.__call__
            assert caught(lambda: setattr(HookChain, "__call__", lambda self, *a: call(self, *a)),
                          lambda: setattr(HookChain, "__call__", call))
        assert b.changed() == [], b.changed()
        copy.copy(kernel)
        copy.copy(fk._ENGINES[0])
        type(fk._ENGINES[0]).__annotations__
        assert "__slotnames__" in vars(Cls)
        assert b.changed() == [] and fk.changed(b.entries) == [], b.changed()
    """)


def test_the_device_switch_around_the_launch_is_watched():
    """``_launch`` enters ``torch.cuda.device(...)`` around every GPU launch: a hook in its ``__enter__`` (the class
    keeps its id) or in ``torch.cuda._exchange_device``, which ``__enter__`` calls, would run inside the
    fingerprint (attacker's review, session 19)."""
    run_child("""
        fp, b = started_baseline()
        dev = torch.cuda.device
        enter = dev.__enter__
        dev.__enter__ = lambda self: enter(self)
        try:
            assert any("__enter__" in k for k in b.changed()), b.changed()
        finally:
            dev.__enter__ = enter
        assert b.changed() == []
        swap = torch.cuda._exchange_device
        torch.cuda._exchange_device = lambda i: swap(i)
        try:
            assert any("_exchange_device" in k for k in b.changed()), b.changed()
        finally:
            torch.cuda._exchange_device = swap
        assert b.changed() == []
    """)


def test_a_launch_path_function_s_defaults_are_watched():
    """``fn.__defaults__`` can be assigned with the function, its code and its class unchanged: a default the function
    calls (or passes on) would run candidate code inside the fingerprint (attacker's review, session 19)."""
    run_child("""
        fp, b = started_baseline()
        fn = fk._launch
        before = fn.__defaults__
        fn.__defaults__ = (None,)
        try:
            assert b.changed(), "a replaced __defaults__ went unseen"
        finally:
            fn.__defaults__ = before
        assert b.changed() == []
    """)


def test_a_triton_candidate_s_worker_retakes_the_baseline_after_our_launch_recorder_wraps_the_launch():
    """Session 20 on the H200: with the fused path on, every Triton candidate's timed call failed FusedTampered. The
    launch recorder (ours, installed at Load for backends whose launches are recorded) wraps ``JITFunction.run``,
    which the watch follows, after Init had taken the baseline. The worker takes it again at Load, after the wrapping
    and before the candidate's code; a Triton candidate's own launches then change nothing the watch sees. (In the
    interpreter the kernel is not a JITFunction, so the CPU cannot show the false finding itself; the GPU test
    ``test_honest_candidates_pass_end_to_end_with_the_fused_path_on`` does.)"""
    run_child(f'''
from kernelbench.evaluation import protocol
from kernelbench.evaluation.seeds import INIT_SEED
from kernelbench.evaluation.worker.process import Worker
from kernelbench.evaluation.worker.timing import worker_changes
from kernelbench.evaluation import compile_cache
from kernelbench.problems import load_builtin
from kernelbench.problems.model import at_reduced_sizes
w = Worker("candidate", "cpu")
w.cmd_init(protocol.Init(), [])
# What Init does on a GPU (on the CPU the fused path starts only when forced, in the interpreter):
assert w.fingerprinter.enable_fused(torch.device("cpu"), force=True)
w.fused_baseline = fk.Baseline.take()
w.bound_at_start["fused_baseline"] = id(w.fused_baseline)
at_init = w.fused_baseline
problem = [p for p in at_reduced_sizes(load_builtin()) if p.level == 1 and p.name == "8_ReLU"][0]
source = open(r"{ROOT}/kernelbench/solutions/triton/level1/8_ReLU.py").read()
reply, _ = w.cmd_load(protocol.Load(problem_code=problem.code, source=source, backend="triton", record_launches=True,
                                    precision="fp32", init_seed=INIT_SEED, eval_mode=False, cache_namespace=None,
                                    cache_scope=compile_cache.source_scope(source), ieee_fp32=True), [])
assert type(reply).__name__ == "LoadReply", reply
assert w.fused_baseline is not at_init, "the baseline was not taken again after the recorder's wrapping"
x = w._make_inputs(5)
with torch.no_grad():
    out = w.model(*x)  # the candidate's own Triton launch, through the recorder's wrapper
assert fk.Baseline.changed(w.fused_baseline) == [], fk.Baseline.changed(w.fused_baseline)
assert worker_changes(w) == []
''')


def test_a_long_string_s_entry_sees_a_change_past_its_first_characters():
    """A compiled kernel's PTX and cubin (hundreds of KB) are among the watched values; their entry was the first 200
    characters of their repr, built whole at every check (slow, and blind to a change further on)."""
    from kernelbench.evaluation import fingerprint_kernel as fk

    a, b = "a" * 1000 + "b", "a" * 1000 + "c"
    assert fk._held(a) != fk._held(b)
    assert fk._held(a.encode()) != fk._held(b.encode())
    assert fk._held(a) == fk._held("a" * 1000 + "b")
    assert fk._held("short") == fk._held("short") != fk._held("shorT")


def test_a_value_of_a_subclass_enters_the_watch_by_identity_without_running_its_methods():
    from kernelbench.evaluation import fingerprint_kernel as fk

    ran = []

    class Loud(str):
        def __repr__(self):
            ran.append("repr")
            return "quiet"

        def __len__(self):
            ran.append("len")
            return 0

        def __hash__(self):
            ran.append("hash")
            return 0

    a, b = Loud("x" * 300), Loud("x" * 300)
    assert fk._held(a) != fk._held(b) and fk._held(a) == fk._held(a)
    assert ran == []
