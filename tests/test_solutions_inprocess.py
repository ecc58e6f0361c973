"""In-process sanity check of the worked solutions against their problems' references.

For each solution: exec the problem and import the solution as fresh modules, build ``Model`` and
``ModelNew`` under the same seed (their parameters must come out identical), run both on the same
inputs and compare with the evaluator's tolerance (fp32: |out - ref| <= 1e-4 + 1e-4 * |ref|).
This is not the evaluator (no isolation, no guards, no timing protocol); it makes sure the
fixtures the evaluator's own tests use are right.

Each check runs in a child process: Triton on the CPU needs TRITON_INTERPRET=1 in the environment
before ``triton.jit`` runs, and a crashing kernel must not take the test session with it. The child
is this file run as a script; it writes its results to a JSON file of its own, never to stdout.

- default: every Triton solution on small, irregular shapes (block tails, non-powers of two) on
  the CPU under the interpreter, in one child, plus fp16 inputs for a few; every CUDA solution's
  KERNELS block (device code and per-dtype launch functions) compiled by nvcc; static checks; and
  self-tests showing the harness fails wrong, input-writing and aliasing solutions.
- slow: a representative few Triton solutions compiled ahead of time for sm_90 with their GPU
  launch configuration (no spills, shared memory within the H100's).
- slow + KB_SOLUTIONS_EXHAUSTIVE=1: every Triton solution at full size on the CPU (what the
  evaluator's CPU path runs; about an hour), every Triton solution compiled for sm_90, and every
  CUDA extension compiled whole against the torch headers.
- gpu: every solution (Triton and CUDA) at full size on the GPU, with eager-vs-solution times
  (CUDA events, medians); run with ``pytest -m gpu -s tests/test_solutions_inprocess.py``.
"""

from __future__ import annotations

import ast
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SOLUTIONS = REPO / "kernelbench" / "solutions"

# Small shapes for the fast CPU checks: module constants of the problem file, overridden before
# get_init_inputs()/get_inputs() run. Odd sizes on purpose, so every masked tail is exercised.
SMALL_SHAPES: dict[tuple[int, int], dict[str, int]] = {
    (1, 1): {"N": 200},
    (1, 2): {"M": 130, "K": 300, "N": 70},
    (1, 3): {"BATCH": 3, "M": 70, "K": 90, "N": 50},
    (1, 4): {"M": 100, "K": 130, "N": 70},
    (1, 8): {"batch_size": 37, "dim": 1000},
    (1, 9): {"batch_size": 37, "dim": 1000},
    (1, 10): {"batch_size": 37, "dim": 1000},
    (1, 11): {"batch_size": 37, "dim": 1000},
    (1, 12): {"batch_size": 37, "dim": 1000},
    (1, 13): {"batch_size": 37, "dim": 1000},
    (1, 14): {"batch_size": 37, "hidden": 1000},
    (1, 15): {"batch_size": 37, "hidden": 1000},
    (1, 17): {"batch_size": 3, "dim1": 300, "dim2": 70},
    (1, 18): {"batch_size": 37, "dim": 1000},
    (1, 19): {"batch_size": 3, "dim1": 300, "dim2": 70},
    (1, 26): {"batch_size": 37, "dim": 1000},
    (1, 27): {"batch_size": 5, "dim": 70000},
    (1, 28): {"batch_size": 3, "dim1": 300, "dim2": 70},
    (2, 1): {"batch_size": 70, "in_features": 200, "out_features": 130},
    (2, 3): {"batch_size": 70, "in_features": 200, "out_features": 130},
    (2, 5): {"batch_size": 70, "in_features": 200, "out_features": 130},
    (2, 8): {"batch_size": 70, "in_features": 200, "out_features": 130},
    (2, 10): {"batch_size": 70, "in_features": 200, "out_features": 130},
    (2, 12): {"batch_size": 70, "hidden": 200},
}
# Solutions also checked with fp16 inputs and weights on the CPU (tolerance 1e-2).
FP16_CHECKS = [(1, 8), (1, 12), (1, 14), (1, 15), (2, 1)]
# CI runs `-m "not gpu"`, slow tests included, on 2 cores. The exhaustive checks (every solution at full
# size on the CPU interpreter: about an hour; every CUDA extension against the torch headers: minutes
# each) run only when asked for; otherwise the slow set compiles a representative few for the H100.
EXHAUSTIVE = os.environ.get("KB_SOLUTIONS_EXHAUSTIVE", "") not in ("", "0")
exhaustive_only = pytest.mark.skipif(not EXHAUSTIVE, reason="set KB_SOLUTIONS_EXHAUSTIVE=1 (takes long)")
AOT_REPRESENTATIVES = [(1, 1), (1, 12), (2, 10)]
# Known to miss the strict fp32 tolerance on the CPU through no fault of the kernel: with randn inputs and
# K >= 3072, the CPU reference itself is up to ~1.1x the tolerance away from the exact (fp64) product
# where the result is near zero, so any second fp32 GEMM disagrees with it somewhere (measured: worst
# error/tolerance 1.24, 1.24, 1.05 against solutions whose own error is below the reference's).
CPU_GEMM_TOLERANCE_ISSUE = {(1, 1), (1, 2), (1, 4)}
TOLERANCE = {"float32": 1e-4, "float16": 1e-2, "bfloat16": 1e-2}


def _solution_files(backend: str) -> list[Path]:
    return sorted((SOLUTIONS / backend).glob("level*/*.py"), key=_sort_key)


def _sort_key(p: Path) -> tuple[int, int]:
    return int(p.parent.name.removeprefix("level")), int(p.name.split("_", 1)[0])


def _ident(p: Path) -> str:
    return f"{p.parent.name}/{p.stem}"


def _level_id(p: Path) -> tuple[int, int]:
    return _sort_key(p)


# --------------------------------------------------------------------------------------------
# The child: runs checks and writes one JSON result per check.
# --------------------------------------------------------------------------------------------

def _compare(out, ref, inputs, tol: float) -> dict:
    """Evaluator-style check: exact type, shape, dtype, device, no aliasing, NaN placement, tolerance."""
    import torch

    res: dict = {"ok": False}
    if type(out) is not torch.Tensor:
        res["why"] = f"output is {type(out).__name__}, not exactly torch.Tensor"
        return res
    if out.shape != ref.shape or out.dtype != ref.dtype or out.device != ref.device:
        res["why"] = f"output {tuple(out.shape)} {out.dtype} {out.device}, expected {tuple(ref.shape)} {ref.dtype} {ref.device}"
        return res
    for i, x in enumerate(inputs):
        if isinstance(x, torch.Tensor) and out.numel() and x.numel() and out.untyped_storage().data_ptr() == x.untyped_storage().data_ptr():
            res["why"] = f"output aliases input {i}"
            return res
    # In chunks: the large problems have 2**30 elements, too many to hold in float64 at once.
    flat_out, flat_ref = out.reshape(-1), ref.reshape(-1)
    max_err, worst, n_bad = 0.0, 0.0, 0
    for start in range(0, flat_ref.numel(), 1 << 24):
        o = flat_out[start:start + (1 << 24)].double()
        r = flat_ref[start:start + (1 << 24)].double()
        if not torch.equal(torch.isnan(o), torch.isnan(r)):
            res["why"] = "NaN in different places"
            return res
        keep = ~torch.isnan(r)
        err = (o - r).abs()[keep]
        bound = (tol + tol * r.abs())[keep]
        if err.numel():
            max_err = max(max_err, float(err.max()))
            worst = max(worst, float((err / bound).max()))
            n_bad += int((err > bound).sum())
    res.update(max_abs_err=max_err, worst_ratio=worst, n_bad=n_bad, ok=n_bad == 0)
    if n_bad:
        res["why"] = f"{n_bad} of {out.numel()} elements outside tolerance (max abs err {max_err:.3g}, worst error/tolerance {worst:.3g})"
    return res


def _fingerprint(x) -> tuple | None:
    """Sums that change if an input is written to; a clone of a 4 GiB input would not fit beside the rest."""
    import torch

    if not isinstance(x, torch.Tensor):
        return None
    flat = x.detach().reshape(-1)
    total, total_sq, total_pos = 0.0, 0.0, 0.0
    for start in range(0, flat.numel(), 1 << 24):
        chunk = flat[start:start + (1 << 24)].double()
        total += float(chunk.sum())
        total_sq += float((chunk * chunk).sum())
        total_pos += float((chunk * torch.arange(chunk.numel(), dtype=torch.float64, device=chunk.device)).sum())
    return total, total_sq, total_pos


def _time_pair(ref_fn, new_fn, inputs, reps: int = 30) -> dict:
    """Median CUDA-event times of eager and solution, interleaved so clock drift cancels."""
    import statistics

    import torch

    for _ in range(5):
        ref_fn(*inputs)
        new_fn(*inputs)
    torch.cuda.synchronize()
    times: dict[str, list[float]] = {"eager": [], "solution": []}
    for _ in range(reps):
        for name, fn in (("eager", ref_fn), ("solution", new_fn)):
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            fn(*inputs)
            end.record()
            torch.cuda.synchronize()
            times[name].append(start.elapsed_time(end))
    eager, sol = statistics.median(times["eager"]), statistics.median(times["solution"])
    return {"eager_ms": eager, "solution_ms": sol, "speedup": eager / sol if sol > 0 else None}


class _NoRecorder:
    """Stands in until the child installs the real recorder (the parent process never records)."""

    installed = False

    def recording(self):
        import contextlib

        return contextlib.nullcontext([])

    def install(self) -> None:
        global _RECORDER
        from kernelbench.evaluation.provenance import LaunchRecorder

        _RECORDER = LaunchRecorder()
        _RECORDER.install()


_RECORDER = _NoRecorder()


def _check_one(spec: dict) -> dict:
    import time
    import types

    import torch

    from kernelbench.problems import load_builtin

    level, pid = spec["level"], spec["problem_id"]
    problem = load_builtin([level]).get(level, pid)
    prob = types.ModuleType(f"kb_problem_l{level}_p{pid}")
    exec(compile(problem.code, f"<problem {problem.name}>", "exec"), prob.__dict__)
    for name, value in spec.get("overrides", {}).items():
        if not hasattr(prob, name):
            raise AttributeError(f"problem {problem.name} has no constant {name!r} to override")
        setattr(prob, name, value)

    sol = _import_solution(spec)

    device = torch.device(spec["device"])
    dtype = getattr(torch, spec.get("dtype", "float32"))
    torch.manual_seed(1234)
    init = prob.get_init_inputs()
    torch.manual_seed(42)
    ref_model = prob.Model(*init)
    torch.manual_seed(42)
    new_model = sol.ModelNew(*init)
    ref_sd, new_sd = ref_model.state_dict(), new_model.state_dict()
    if list(ref_sd) != list(new_sd) or any(not torch.equal(ref_sd[k], new_sd[k]) for k in ref_sd):
        return {"ok": False, "why": f"parameters differ from the reference's: {list(ref_sd)} vs {list(new_sd)}"}
    ref_model.to(device=device, dtype=dtype)
    new_model.to(device=device, dtype=dtype)

    with torch.device(device):
        torch.manual_seed(7)
        inputs = prob.get_inputs()
    inputs = [x.to(dtype) if isinstance(x, torch.Tensor) and x.is_floating_point() else x for x in inputs]
    before = [_fingerprint(x) for x in inputs]
    from kernelbench.evaluation import provenance

    with torch.no_grad():
        t0 = time.perf_counter()
        ref = ref_model(*inputs)  # trusted code: it does not write to its inputs
        t1 = time.perf_counter()
        with _RECORDER.recording() as launched:
            out = new_model(*inputs)
        if device.type == "cuda":
            torch.cuda.synchronize()
        t2 = time.perf_counter()
        res = _compare(out, ref, inputs, TOLERANCE[spec.get("dtype", "float32")])
        res.update(reference_s=round(t1 - t0, 2), solution_s=round(t2 - t1, 2))
        if spec["backend"] == "triton":
            # The evaluator's decoy check (issue 23): every output must have been handed to an own kernel.
            res["unowned_outputs"] = provenance.unowned_outputs([provenance.storage_range(out)], list(launched))
            if res["unowned_outputs"]:
                why = "the output was never handed to one of the solution's own kernels (library-output warning)"
                res.update(ok=False, why=f"{res['why']}; {why}" if res.get("why") else why)
        for i, (x, fp) in enumerate(zip(inputs, before)):
            if _fingerprint(x) != fp:
                why = f"the solution modified input {i}"
                res.update(ok=False, why=f"{res['why']}; {why}" if res.get("why") else why)
        if res["ok"] and spec.get("timing"):
            res.update(_time_pair(ref_model, new_model, inputs))
    return res


def _compile_for_h100(spec: dict) -> dict:
    """Compile every Triton kernel a solution launches, with its GPU launch configuration, for sm_90.

    No GPU is needed: launches are captured instead of run, from a forward pass over meta-device
    inputs that claim to be CUDA tensors (so the solution picks its GPU block sizes, at full size),
    then each kernel is compiled ahead of time and its cubin's resource usage is read back.
    """
    import re
    import types

    import torch
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    from kernelbench.problems import load_builtin

    class PretendCuda(torch.Tensor):
        @property
        def is_cuda(self) -> bool:
            return True

    launches = []

    def capture(self, *args, grid, warmup, **kwargs):
        launches.append((self, args, kwargs))

    triton.runtime.jit.JITFunction.run = capture
    level, pid = spec["level"], spec["problem_id"]
    prob = types.ModuleType(f"kb_problem_l{level}_p{pid}")
    exec(compile(load_builtin([level]).get(level, pid).code, "<problem>", "exec"), prob.__dict__)
    sol = _import_solution(spec)
    with torch.device("meta"):
        init = prob.get_init_inputs()
        model = sol.ModelNew(*init)
        inputs = prob.get_inputs()
    inputs = [x.as_subclass(PretendCuda) if isinstance(x, torch.Tensor) else x for x in inputs]
    with torch.no_grad():
        model(*inputs)
    if not launches:
        return {"ok": False, "why": "the forward launched no Triton kernel"}

    type_names = {torch.float32: "fp32", torch.float16: "fp16", torch.bfloat16: "bf16", torch.int64: "i64",
                  torch.int32: "i32"}
    cuobjdump = Path(triton.__file__).parent / "backends" / "nvidia" / "bin" / "cuobjdump"
    kernels, problems = [], []
    for fn, args, kwargs in launches:
        values = dict(zip(fn.arg_names, args))
        values.update({k: v for k, v in kwargs.items() if k in fn.arg_names})
        signature, constexprs = {}, {}
        for p in fn.params:
            v = values[p.name]
            if p.is_constexpr:
                signature[p.name], constexprs[p.name] = "constexpr", v
            elif isinstance(v, torch.Tensor):
                signature[p.name] = "*" + type_names[v.dtype]
            elif isinstance(v, bool):
                signature[p.name] = "i1"
            elif isinstance(v, int):
                signature[p.name] = "i32" if -2**31 <= v < 2**31 else "i64"
            else:
                signature[p.name] = "fp32"
        options = {k: kwargs[k] for k in ("num_warps", "num_stages") if k in kwargs}
        compiled = triton.compile(ASTSource(fn=fn, signature=signature, constexprs=constexprs),
                                  target=GPUTarget("cuda", 90, 32), options=options)
        with tempfile.NamedTemporaryFile(suffix=".cubin") as f:
            f.write(compiled.asm["cubin"])
            f.flush()
            usage = subprocess.run([str(cuobjdump), "--dump-resource-usage", f.name], capture_output=True, text=True).stdout
        regs = int(re.search(r"REG:(\d+)", usage).group(1))
        local = int(re.search(r"LOCAL:(\d+)", usage).group(1))
        shared = int(compiled.metadata.shared)
        threads = 32 * options.get("num_warps", 4)
        kernels.append({"kernel": fn.__name__, "constexprs": constexprs, **options, "registers": regs,
                        "local_bytes": local, "shared_bytes": shared})
        if local:
            problems.append(f"{fn.__name__} spills to local memory ({local} bytes, {regs} registers)")
        if shared > 227 * 1024:
            problems.append(f"{fn.__name__} needs {shared} bytes of shared memory (H100: 227 KiB per block)")
        if regs * threads > 65536:
            problems.append(f"{fn.__name__}: {regs} registers x {threads} threads exceed the 64K register file")
    return {"ok": not problems, "why": "; ".join(problems), "kernels": kernels}


def _import_solution(spec: dict):
    """Imported from its file (not exec'd from a string): triton.jit needs the source of its kernels."""
    import importlib.util

    mod_name = f"kb_solution_{spec['backend']}_l{spec['level']}_p{spec['problem_id']}"
    loader_spec = importlib.util.spec_from_file_location(mod_name, spec["path"])
    sol = importlib.util.module_from_spec(loader_spec)
    sys.modules[mod_name] = sol
    loader_spec.loader.exec_module(sol)
    return sol


def _child_main(spec_path: str, out_path: str) -> None:
    import time
    import traceback

    _RECORDER.install()  # before any solution defines a kernel, as the evaluator's worker does

    specs = json.loads(Path(spec_path).read_text())
    results = []
    for spec in specs:
        t0 = time.perf_counter()
        try:
            res = _compile_for_h100(spec) if spec.get("mode") == "compile" else _check_one(spec)
        except Exception as e:  # reported to the parent, which fails the test with it
            res = {"ok": False, "why": f"{type(e).__name__}: {e}", "traceback": traceback.format_exc()[-3000:]}
        res["seconds"] = round(time.perf_counter() - t0, 2)
        res["spec"] = spec
        results.append(res)
        tmp = out_path + ".tmp"
        Path(tmp).write_text(json.dumps(results))
        os.replace(tmp, out_path)


def _run_child(specs: list[dict], device: str, timeout_s: float) -> list[dict]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(REPO), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    if device == "cpu":
        env["TRITON_INTERPRET"] = "1"
    else:  # "cuda", or "compile": ahead-of-time compilation for the GPU, which must not interpret
        env.pop("TRITON_INTERPRET", None)
        env.setdefault("TRITON_DEFAULT_FP_FUSION", "1")
    with tempfile.TemporaryDirectory() as td:
        spec_path, out_path = Path(td) / "specs.json", Path(td) / "results.json"
        spec_path.write_text(json.dumps(specs))
        proc = subprocess.run([sys.executable, str(Path(__file__).resolve()), str(spec_path), str(out_path)],
                              env=env, capture_output=True, text=True, timeout=timeout_s)
        results = json.loads(out_path.read_text()) if out_path.exists() else []
    if len(results) < len(specs):
        missing = specs[len(results)]
        results.append({"ok": False, "spec": missing,
                        "why": f"child exited with {proc.returncode} during this check: {proc.stderr[-3000:]}"})
    return results


def _spec(path: Path, backend: str, device: str, **extra) -> dict:
    level, pid = _level_id(path)
    return {"level": level, "problem_id": pid, "backend": backend, "path": str(path), "device": device, **extra}


def _explain(res: dict) -> str:
    return f"{res.get('why', '')}\n{res.get('traceback', '')}"


if __name__ == "__main__":
    _child_main(sys.argv[1], sys.argv[2])
    sys.exit(0)


# --------------------------------------------------------------------------------------------
# The tests.
# --------------------------------------------------------------------------------------------

TRITON_FILES = _solution_files("triton")
CUDA_FILES = _solution_files("cuda")
#: CuTe DSL and TileLang: GPU only (no interpreter), and only where their packages are installed. Written and
#: compiled (PTX / cubin for sm_90a) without a GPU; their GPU test below is their first run.
DSL_FILES = _solution_files("cute") + _solution_files("tilelang")
_DSL_MARKERS = {"cute": "@cute.kernel", "tilelang": "@T.prim_func"}


def test_every_triton_solution_has_small_shapes():
    missing = [_ident(p) for p in TRITON_FILES if _level_id(p) not in SMALL_SHAPES]
    assert not missing, f"add small shapes for {missing}"
    assert len(TRITON_FILES) >= 12 and len(CUDA_FILES) >= 5


# PyTorch compute a solution must not call for the work it claims (kernel code under tl/triton is fine).
_TORCH_COMPUTE = {"relu", "gelu", "sigmoid", "tanh", "softmax", "log_softmax", "layer_norm", "rms_norm", "silu",
                  "matmul", "mm", "bmm", "addmm", "baddbmm", "linear", "einsum", "sum", "mean", "max", "amax",
                  "erf", "exp", "rsqrt", "sqrt", "logsumexp", "norm", "cumsum", "argmax", "conv2d", "dropout"}
_KERNEL_NAMESPACES = {"tl", "triton", "libdevice", "math", "cute", "cutlass", "T"}


def _reference_ops_called(source: str) -> list[str]:
    """Calls to PyTorch compute (or to the reference's own submodules) in a solution's Python code."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.MatMult):
            found.append((node.lineno, "the @ operator"))
        if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Attribute):
            continue
        root = node.func.value
        while isinstance(root, ast.Attribute):
            root = root.value
        root_name = root.id if isinstance(root, ast.Name) else ""
        attr = node.func.attr
        if root_name in _KERNEL_NAMESPACES:
            continue
        if attr in _TORCH_COMPUTE or root_name == "F":
            found.append((node.lineno, f"{ast.unparse(node.func)}()"))
        elif root_name == "self" and isinstance(node.func.value, ast.Name) and attr in ("gemm", "norm", "forward"):
            found.append((node.lineno, f"the reference submodule self.{attr}()"))
    return [f"line {line}: {what}" for line, what in sorted(found)]


def test_solutions_define_modelnew_and_call_no_reference_op():
    assert len(_solution_files("cute")) >= 2 and len(_solution_files("tilelang")) >= 2
    for p in TRITON_FILES + CUDA_FILES + DSL_FILES:
        src = p.read_text()
        tree = ast.parse(src, filename=str(p))
        classes = {n.name for n in tree.body if isinstance(n, ast.ClassDef)}
        assert "ModelNew" in classes, f"{_ident(p)} defines no ModelNew"
        backend = p.parents[1].name
        marker = {"triton": "@triton.jit", "cuda": "__global__"}.get(backend) or _DSL_MARKERS[backend]
        assert marker in src, f"{_ident(p)} has no {marker} kernel"
        assert not _reference_ops_called(src), f"{_ident(p)} calls PyTorch compute: {_reference_ops_called(src)}"


def test_reference_op_check_can_fail():
    src = (SOLUTIONS / "triton" / "level1" / "8_ReLU.py").read_text()
    cheat = src.replace("        return out\n", "        return torch.relu(x)\n")
    assert cheat != src and {f.split(": ", 1)[1] for f in _reference_ops_called(cheat)} == {"torch.relu()"}
    assert _reference_ops_called("y = self.gemm(x) @ w\nz = F.gelu(y)\nq = tl.sum(z)\n") == [
        "line 1: the @ operator", "line 1: the reference submodule self.gemm()", "line 2: F.gelu()"]


def test_solutions_api_lists_every_file():
    from kernelbench.problems import load_builtin
    from kernelbench.solutions import get_solution, list_solutions, submission_kernels

    listed = list_solutions()
    assert {s.path for s in listed} == set(TRITON_FILES + CUDA_FILES + DSL_FILES)
    suite = load_builtin()
    for s in listed:  # every solution answers a real problem, under the problem's own file name
        assert suite.get(s.level, s.problem_id).name == s.name, s
    relu = get_solution(1, 8, "cuda")
    assert relu.path == SOLUTIONS / "cuda" / "level1" / "8_ReLU.py" and "ModelNew" in relu.source
    kernels = submission_kernels("triton")
    assert len(kernels) == len(TRITON_FILES) and "level_2_problem_1_sample_0" in kernels
    with pytest.raises(LookupError, match="level 1 problem 99"):
        get_solution(1, 99, "triton")
    with pytest.raises(ValueError, match="backend 'cutlass'"):
        list_solutions("cutlass")


@pytest.fixture(scope="module")
def small_results() -> dict[str, dict]:
    specs = [_spec(p, "triton", "cpu", overrides=SMALL_SHAPES.get(_level_id(p), {})) for p in TRITON_FILES]
    specs += [_spec(p, "triton", "cpu", overrides=SMALL_SHAPES[_level_id(p)], dtype="float16")
              for p in TRITON_FILES if _level_id(p) in FP16_CHECKS]
    results = _run_child(specs, "cpu", timeout_s=900)
    return {f"{Path(r['spec']['path']).parent.name}/{Path(r['spec']['path']).stem}/{r['spec'].get('dtype', 'float32')}": r
            for r in results}


@pytest.mark.parametrize("path", TRITON_FILES, ids=_ident)
def test_triton_solution_small_cpu(path: Path, small_results: dict[str, dict]):
    res = small_results.get(f"{_ident(path)}/float32")
    assert res is not None, "the child did not get to this check"
    assert res["ok"], _explain(res)


@pytest.mark.parametrize("path", [p for p in TRITON_FILES if _level_id(p) in FP16_CHECKS], ids=_ident)
def test_triton_solution_small_cpu_fp16(path: Path, small_results: dict[str, dict]):
    res = small_results.get(f"{_ident(path)}/float16")
    assert res is not None, "the child did not get to this check"
    assert res["ok"], _explain(res)


_RELU_LAUNCH = "relu_kernel[(triton.cdiv(n, block),)](x, out, n,"
_RELU_TAMPERING = {
    # forgets the negative inputs
    "wrong values": ({"tl.where(x < 0, 0.0, x)": "x"}, "outside tolerance"),
    # writes the result into its input and returns a copy: right values, input destroyed
    "writes its input": ({_RELU_LAUNCH: _RELU_LAUNCH.replace("x, out,", "x, x,"),
                          "        return out\n": "        return x.clone()\n"}, "modified input 0"),
    # in-place, returning the input itself
    "aliases its input": ({_RELU_LAUNCH: _RELU_LAUNCH.replace("x, out,", "x, x,"),
                           "        return out\n": "        return x\n"}, "aliases input 0"),
    # the decoy of issue 23: its kernel runs on a scratch buffer, PyTorch's result is returned
    "decoy": ({"        return out\n": "        return getattr(torch, 'relu')(x)\n"}, "library-output"),
}


@pytest.mark.parametrize("case", list(_RELU_TAMPERING))
def test_harness_catches_a_bad_solution(case: str, tmp_path: Path):
    """The harness must be able to fail: tampered copies of the ReLU solution are caught, each for its reason."""
    src = (SOLUTIONS / "triton" / "level1" / "8_ReLU.py").read_text()
    edits, expected = _RELU_TAMPERING[case]
    for old, new in edits.items():
        assert old in src
        head, _, tail = src.rpartition(old)  # the last occurrence: the launch path, not the empty-input path
        src = head + new + tail
    bad_path = tmp_path / "level1" / "8_ReLU.py"
    bad_path.parent.mkdir()
    bad_path.write_text(src)
    (res,) = _run_child([_spec(bad_path, "triton", "cpu", overrides=SMALL_SHAPES[(1, 8)])], "cpu", 300)
    assert not res["ok"] and expected in res["why"], res


@pytest.mark.slow
@exhaustive_only
@pytest.mark.parametrize("path", [
    pytest.param(p, marks=pytest.mark.xfail(reason="randn GEMM with K >= 3072 vs the strict fp32 tolerance: the "
                                                   "CPU reference's own rounding error reaches it", strict=False))
    if _level_id(p) in CPU_GEMM_TOLERANCE_ISSUE else p for p in TRITON_FILES], ids=_ident)
def test_triton_solution_full_size_cpu(path: Path):
    (res,) = _run_child([_spec(path, "triton", "cpu")], "cpu", timeout_s=1800)
    print(f"{_ident(path)}: solution forward {res.get('solution_s')} s on the CPU (check {res.get('seconds')} s), "
          f"worst error/tolerance {res.get('worst_ratio')}")
    assert res["ok"], _explain(res)


@pytest.mark.slow
@pytest.mark.parametrize("path", [p for p in TRITON_FILES if EXHAUSTIVE or _level_id(p) in AOT_REPRESENTATIVES],
                         ids=_ident)
def test_triton_solution_compiles_for_h100(path: Path):
    """Each kernel, with the block sizes the solution picks on a GPU at full size, compiles for sm_90
    without spilling registers and within the H100's shared memory (no GPU needed)."""
    (res,) = _run_child([_spec(path, "triton", "cuda", mode="compile")], "compile", timeout_s=1800)
    for k in res.get("kernels", []):
        print(f"{_ident(path)} {k['kernel']}: {k['registers']} registers, {k['shared_bytes']} B shared, "
              f"{k['local_bytes']} B local, warps {k.get('num_warps')}, stages {k.get('num_stages')}")
    assert res["ok"], _explain(res)


# --------------------------------------------------------------------------------------------
# CUDA sources: compile the kernels for real with nvcc (no GPU needed, no torch CUDA build).
# --------------------------------------------------------------------------------------------

def _string_constants(path: Path) -> dict[str, str]:
    """Module-level string constants of a solution, read without running it."""
    out = {}
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            try:
                value = ast.literal_eval(node.value)
            except ValueError:
                continue
            if isinstance(value, str):
                out[node.targets[0].id] = value
    return out


NVCC = shutil.which("nvcc")
NVCC_FLAGS = ["-std=c++17", "-O3", "-arch=sm_90", "--expt-relaxed-constexpr",
              "-D__CUDA_NO_HALF_OPERATORS__", "-D__CUDA_NO_HALF_CONVERSIONS__",
              "-D__CUDA_NO_BFLOAT16_CONVERSIONS__", "-D__CUDA_NO_HALF2_OPERATORS__"]


def test_cuda_solutions_keep_kernels_apart_from_launchers():
    """The compile checks below rely on this layout: KERNELS (device code only), LAUNCHER, CPP_DECL."""
    for p in CUDA_FILES:
        consts = _string_constants(p)
        for name in ("KERNELS", "LAUNCHER", "CPP_DECL"):
            assert name in consts, f"{_ident(p)} lacks the string constant {name}"
        kernels = consts["KERNELS"]
        assert "__global__" in kernels, f"{_ident(p)}: KERNELS has no __global__ kernel"
        for torch_only in ("<torch/", "<ATen/", "<c10/", "at::", "torch::", "c10::"):
            assert torch_only not in kernels, f"{_ident(p)}: KERNELS must compile without torch ({torch_only})"
        assert "getCurrentCUDAStream" in consts["LAUNCHER"] and "C10_CUDA_KERNEL_LAUNCH_CHECK" in consts["LAUNCHER"]


@pytest.mark.skipif(NVCC is None, reason="nvcc is not installed")
@pytest.mark.parametrize("path", CUDA_FILES, ids=_ident)
def test_cuda_kernels_compile_with_nvcc(path: Path, tmp_path: Path):
    """Device code and its plain-CUDA launch functions, without torch headers: seconds per file.

    The launch functions instantiate every kernel template for every dtype, so this compiles the
    kernels for real (types, half conversions, intrinsics), not just their template syntax.
    """
    src = tmp_path / "kernels.cu"
    src.write_text(_string_constants(path)["KERNELS"])
    proc = subprocess.run([NVCC, "-c", str(src), "-o", str(tmp_path / "kernels.o"), *NVCC_FLAGS],
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-4000:]


# Headers the CPU build of torch references but this machine's CUDA toolkit lacks (cuBLAS etc.):
# opaque declarations are enough, since the solutions use none of these libraries.
_SHIMS = {
    "cublas_v2.h": "typedef struct cublasContext* cublasHandle_t;\n"
                   "typedef enum { CUBLAS_STATUS_SUCCESS = 0 } cublasStatus_t;\n",
    "cublasLt.h": "typedef struct cublasLtContext* cublasLtHandle_t;\n",
    "cusparse.h": "typedef struct cusparseContext* cusparseHandle_t;\n"
                  "typedef enum { CUSPARSE_STATUS_SUCCESS = 0 } cusparseStatus_t;\n",
    "cusolver_common.h": "typedef enum { CUSOLVER_STATUS_SUCCESS = 0, CUSOLVER_STATUS_INVALID_VALUE = 3 } cusolverStatus_t;\n",
    "cusolverDn.h": "#include <cusolver_common.h>\ntypedef struct cusolverDnContext* cusolverDnHandle_t;\n",
    "c10/cuda/impl/cuda_cmake_macros.h": "",
}


@pytest.mark.slow
@exhaustive_only
@pytest.mark.skipif(NVCC is None, reason="nvcc is not installed")
@pytest.mark.parametrize("path", CUDA_FILES, ids=_ident)
def test_cuda_solution_compiles_with_torch_headers(path: Path, tmp_path: Path):
    """The whole extension as load_inline builds it (declarations, kernels, launcher, bindings), one unit."""
    import torch.utils.cpp_extension as ext

    consts = _string_constants(path)
    functions = _load_inline_functions(path)
    shim = tmp_path / "shim"
    for name, body in _SHIMS.items():
        (shim / name).parent.mkdir(parents=True, exist_ok=True)
        (shim / name).write_text("#pragma once\n" + body)
    bindings = "".join(f'  m.def("{f}", &{f});\n' for f in functions)
    src = tmp_path / "ext.cu"
    src.write_text("#include <torch/extension.h>\n" + consts["CPP_DECL"] + "\n" + consts["KERNELS"] + "\n"
                   + consts["LAUNCHER"] + "\nPYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {\n" + bindings + "}\n")
    includes = [f"-I{shim}"] + [f"-I{p}" for p in ext.include_paths()]
    import sysconfig

    includes.append(f"-I{sysconfig.get_paths()['include']}")
    obj = tmp_path / "ext.o"
    proc = subprocess.run([NVCC, "-c", str(src), "-o", str(obj), *NVCC_FLAGS, "-DTORCH_EXTENSION_NAME=kb_check",
                           "-DTORCH_API_INCLUDE_EXTENSION_H", "--compiler-options", "-fPIC", *includes],
                          capture_output=True, text=True, timeout=1200)
    assert proc.returncode == 0, proc.stderr[-6000:]
    symbols = subprocess.run(["nm", "-C", str(obj)], capture_output=True, text=True).stdout
    for f in functions:
        assert any(line.split(" ", 2)[1:2] == ["T"] and f"{f}(" in line for line in symbols.splitlines()), \
            f"{f} is declared and bound but not defined"


def _load_inline_functions(path: Path) -> list[str]:
    """The ``functions=[...]`` a solution passes to load_inline."""
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Call) and getattr(node.func, "id", getattr(node.func, "attr", "")) == "load_inline":
            for kw in node.keywords:
                if kw.arg == "functions":
                    return list(ast.literal_eval(kw.value))
    raise AssertionError(f"{_ident(path)} does not call load_inline(..., functions=[...])")


def test_cuda_solutions_name_their_functions():
    for p in CUDA_FILES:
        assert _load_inline_functions(p), _ident(p)


# --------------------------------------------------------------------------------------------
# GPU: every solution at full size, correctness and eager-vs-solution time.
# --------------------------------------------------------------------------------------------

def _cuda_available() -> bool:
    try:
        import torch
    except ImportError:
        return False
    return torch.cuda.is_available()


@pytest.fixture(scope="module")
def gpu_times():
    """Collects one row per GPU check and prints them as one table at the end (visible with -s)."""
    rows: list[list] = []
    yield rows
    if rows:
        from tabulate import tabulate

        print("\n" + tabulate(rows, headers=["backend", "solution", "eager ms", "solution ms", "speedup",
                                             "error/tolerance"], floatfmt=".3f"))


@pytest.mark.gpu
@pytest.mark.skipif(not _cuda_available(), reason="needs an NVIDIA GPU")
@pytest.mark.parametrize("path", TRITON_FILES + CUDA_FILES + DSL_FILES,
                         ids=lambda p: f"{p.parents[1].name}/{_ident(p)}")
def test_solution_on_gpu(path: Path, gpu_times: list):
    from kernelbench.backends import get_backend

    backend = path.parents[1].name
    if get_backend(backend).missing_packages():
        pytest.skip(get_backend(backend).missing_message())
    (res,) = _run_child([_spec(path, backend, "cuda", timing=True)], "cuda", timeout_s=1800)
    if res["ok"]:
        gpu_times.append([backend, _ident(path), res["eager_ms"], res["solution_ms"], res["speedup"], res["worst_ratio"]])
        print(f"\n{backend:6s} {_ident(path):40s} eager {res['eager_ms']:8.3f} ms  solution {res['solution_ms']:8.3f} ms"
              f"  speedup {res['speedup']:.2f}x  worst error/tolerance {res['worst_ratio']:.3f}")
    else:
        gpu_times.append([backend, _ident(path), None, None, None, f"FAILED: {res.get('why', '')[:60]}"])
    assert res["ok"], _explain(res)
