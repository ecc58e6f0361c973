"""The CuTe DSL and TileLang backends on the CPU: detection, static-guard conformity on good and bad sources,
the kernel names the runtime guard looks for, the worker environment and the missing-package result.

Nothing here imports ``cutlass`` or ``tilelang`` (CI installs neither): the guard reads sources only. The
GPU side (worked solutions correct and timed, the corpus at run time) is in test_solutions_inprocess.py and
test_adversarial_runtime.py, marked ``gpu`` and skipped where the packages are missing.
"""

from __future__ import annotations

import subprocess
import textwrap
from pathlib import Path

import pytest

from kernelbench.backends import BackendSpec, backend_registered, detect_backend, get_backend
from kernelbench.evaluation.guards import analyze_source
from kernelbench.evaluation.guards.runtime import classify_launches, launch_findings, own_kernel_names

ROOT = Path(__file__).resolve().parents[1]
SOLUTIONS = ROOT / "kernelbench" / "solutions"
CORPUS = ROOT / "tests" / "adversarial"

CUTE_HEAD = '''
import cuda.bindings.driver as cuda
import cutlass
import cutlass.cute as cute
import torch
import torch.nn as nn
from cutlass.cute.runtime import from_dlpack


@cute.kernel
def relu_kernel(gX: cute.Tensor, gY: cute.Tensor, n: cutlass.Int32):
    tidx, _, _ = cute.arch.thread_idx()
    bidx, _, _ = cute.arch.block_idx()
    i = bidx * 256 + tidx
    if i < n:
        v = gX[i]
        gY[i] = cutlass.max(v, v.dtype(0))


@cute.jit
def relu_host(mX: cute.Tensor, mY: cute.Tensor, n: cutlass.Int32, stream: cuda.CUstream):
    relu_kernel(mX, mY, n).launch(grid=(cute.ceil_div(n, 256), 1, 1), block=(256, 1, 1), stream=stream)


def views(x, out):
    stream = cuda.CUstream(torch.cuda.current_stream().cuda_stream)
    return from_dlpack(x.view(-1)), from_dlpack(out.view(-1)), stream
'''


def cute_src(forward: str, extra: str = "", init: str = "        super().__init__()\n") -> str:
    return CUTE_HEAD + extra + "\n\nclass ModelNew(nn.Module):\n    def __init__(self):\n" + init + \
        "\n    def forward(self, x):\n" + textwrap.indent(textwrap.dedent(forward), "        ")


TL_HEAD = '''
import tilelang
import tilelang.language as T
import torch
import torch.nn as nn


def build(rows, cols):
    @T.prim_func
    def relu_tile(X: T.Tensor((rows, cols), "float32"), Y: T.Tensor((rows, cols), "float32")):
        with T.Kernel(T.ceildiv(cols, 1024), T.ceildiv(rows, 16), threads=256) as (bx, by):
            for i, j in T.Parallel(16, 1024):
                Y[by * 16 + i, bx * 1024 + j] = T.max(X[by * 16 + i, bx * 1024 + j], 0.0)

    return tilelang.compile(relu_tile, out_idx=[1])
'''


def tl_src(forward: str, head: str = TL_HEAD, init: str = "        super().__init__()\n") -> str:
    return head + "\n\nclass ModelNew(nn.Module):\n    def __init__(self):\n" + init + \
        "\n    def forward(self, x):\n" + textwrap.indent(textwrap.dedent(forward), "        ")


def findings(source: str, backend: str) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for f in analyze_source(source, backend).findings:
        out.setdefault(f.rule, []).append(f.message)
    return out


def passes_cleanly(source: str, backend: str) -> bool:
    report = analyze_source(source, backend)
    assert report.passed and not report.warnings, report.to_text()
    assert "kernel-launch" in report.rules("info"), report.to_text()
    return True


# --- CuTe: conforming sources ----------------------------------------------------------------------

CUTE_GOOD = {
    "host-called-directly": cute_src("""
        out = torch.empty_like(x)
        mX, mY, stream = views(x, out)
        relu_host(mX, mY, x.numel(), stream)
        return out
    """),
    "compiled-then-called": cute_src("""
        out = torch.empty_like(x)
        mX, mY, stream = views(x, out)
        fn = cute.compile(relu_host, mX, mY, x.numel(), stream)
        fn(mX, mY, x.numel(), stream)
        return out
    """),
    "compiled-and-called-at-once": cute_src("""
        out = torch.empty_like(x)
        mX, mY, stream = views(x, out)
        cute.compile(relu_host, mX, mY, x.numel(), stream)(mX, mY, x.numel(), stream)
        return out
    """),
    "compiled-once-kept-in-a-dict": cute_src("""
        out = torch.empty_like(x)
        mX, mY, stream = views(x, out)
        fn = self.cache.get(x.dtype)
        if fn is None:
            fn = cute.compile(relu_host, mX, mY, x.numel(), stream)
            self.cache[x.dtype] = fn
        fn(mX, mY, x.numel(), stream)
        return out
    """, init="        super().__init__()\n        self.cache = {}\n"),
    "compiled-in-a-getter": cute_src("""
        out = torch.empty_like(x)
        mX, mY, stream = views(x, out)
        get_fn(mX, mY, x.numel(), stream)(mX, mY, x.numel(), stream)
        return out
    """, extra="\n\ndef get_fn(*args):\n    return cute.compile(relu_host, *args)\n"),
}

CUTE_CLASS = '''
import cuda.bindings.driver as cuda
import cutlass
import cutlass.cute as cute
import torch
import torch.nn as nn
from cutlass.cute.runtime import from_dlpack


class Relu:
    @cute.kernel
    def kernel(self, gX: cute.Tensor, gY: cute.Tensor, n: cutlass.Int32):
        tidx, _, _ = cute.arch.thread_idx()
        bidx, _, _ = cute.arch.block_idx()
        i = bidx * 256 + tidx
        if i < n:
            gY[i] = cutlass.max(gX[i], gX[i].dtype(0))

    @cute.jit
    def __call__(self, mX: cute.Tensor, mY: cute.Tensor, n: cutlass.Int32, stream: cuda.CUstream):
        k = self.kernel(mX, mY, n)
        k.launch(grid=(cute.ceil_div(n, 256), 1, 1), block=(256, 1, 1), stream=stream)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.op = Relu()
        self.fn = None

    def forward(self, x):
        out = torch.empty_like(x)
        mX, mY = from_dlpack(x.view(-1)), from_dlpack(out.view(-1))
        stream = cuda.CUstream(torch.cuda.current_stream().cuda_stream)
        if self.fn is None:
            self.fn = cute.compile(self.op, mX, mY, x.numel(), stream)
        self.fn(mX, mY, x.numel(), stream)
        return out
'''


@pytest.mark.parametrize("name", list(CUTE_GOOD))
def test_cute_candidates_that_launch_their_kernel_pass(name):
    assert passes_cleanly(CUTE_GOOD[name], "cute")


def test_cute_kernel_as_a_method_launched_through_a_local_name_passes():
    assert passes_cleanly(CUTE_CLASS, "cute")
    assert own_kernel_names(CUTE_CLASS) == {"kernel"}


def test_kernelbench_own_cute_and_tilelang_examples_pass():
    """KernelBench's worked examples (read from its repository when a mirror is here; never committed)."""
    mirror = Path("/work/.mirror/ScalingIntelligence+KernelBench/repo")
    if not mirror.is_dir():
        pytest.skip("no KernelBench mirror on this machine")
    for backend, name in (("cute", "model_new_ex_add_cute.py"), ("tilelang", "model_new_ex_add_tilelang.py")):
        out = subprocess.run(["git", "-C", str(mirror), "show", f"HEAD:src/kernelbench/prompts/{name}"],
                             capture_output=True, text=True)
        if out.returncode != 0:
            pytest.skip(f"{name} is not in this KernelBench revision")
        report = analyze_source(out.stdout, backend)
        assert detect_backend(out.stdout) == backend
        assert report.passed and "kernel-launch" in report.rules("info"), report.to_text()


# --- CuTe: refused sources -------------------------------------------------------------------------

CUTE_IMPORT_ONLY = '''
import cutlass
import cutlass.cute as cute
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x):
        return torch.relu(x)
'''
CUTE_KERNEL_NEVER_LAUNCHED = CUTE_IMPORT_ONLY.replace("class ModelNew", '''@cute.kernel
def relu_kernel(gX: cute.Tensor, gY: cute.Tensor):
    tidx, _, _ = cute.arch.thread_idx()
    gY[tidx] = gX[tidx]


@cute.jit
def relu_host(mX: cute.Tensor, mY: cute.Tensor):
    pass


class ModelNew''')


@pytest.mark.parametrize("source,rule,words", [
    pytest.param(CUTE_IMPORT_ONLY, "no-custom-kernel", "no @cute.kernel", id="imports-cutlass-computes-with-torch"),
    pytest.param(CUTE_KERNEL_NEVER_LAUNCHED, "kernel-not-launched", "relu_kernel is never launched",
                 id="kernel-no-host-launches-it"),
    pytest.param(cute_src("""
        out = torch.empty_like(x)
        mX, mY, stream = views(x, out)
        self.fn = cute.compile(relu_host, mX, mY, x.numel(), stream)
        return torch.relu(x)
    """), "kernel-not-launched", "forward never runs it", id="compiled-never-called"),
    pytest.param(cute_src("return torch.relu(x)\n", extra="\n\ndef unused(x):\n    relu_host(x, x, 1, None)\n"),
                 "kernel-not-launched", "never runs it", id="host-called-only-from-dead-code"),
])
def test_cute_candidates_that_do_not_launch_their_kernel_are_refused(source, rule, words):
    report = analyze_source(source, "cute")
    assert not report.passed
    errors = [f for f in report.findings if f.severity == "error"]
    assert [f.rule for f in errors] == [rule], report.to_text()
    assert words in errors[0].message
    assert "torch-compute" in report.rules("warning")


def test_cute_launch_in_try_with_a_pytorch_fallback_is_refused():
    source = cute_src("""
        out = torch.empty_like(x)
        mX, mY, stream = views(x, out)
        try:
            relu_host(mX, mY, x.numel(), stream)
        except Exception:
            return torch.relu(x)
        return out
    """)
    assert "try-fallback" in findings(source, "cute")
    assert not analyze_source(source, "cute").passed


# --- TileLang ----------------------------------------------------------------------------------------

TL_JIT_FACTORY = '''
import tilelang
import tilelang.language as T
import torch
import torch.nn as nn


@tilelang.jit(out_idx=[-1])
def relu(rows, cols):
    @T.prim_func
    def main(X: T.Tensor((rows, cols), "float32"), Y: T.Tensor((rows, cols), "float32")):
        with T.Kernel(T.ceildiv(cols, 1024), rows, threads=256) as (bx, by):
            for j in T.Parallel(1024):
                Y[by, bx * 1024 + j] = T.max(X[by, bx * 1024 + j], 0.0)

    return main
'''
TL_EAGER_JIT = '''
import tilelang
import tilelang.language as T
import torch
import torch.nn as nn


@tilelang.jit
def relu_eager(X: T.Tensor, Y: T.Tensor):
    rows, cols = X.shape
    with T.Kernel(T.ceildiv(cols, 1024), rows, threads=256) as (bx, by):
        for j in T.Parallel(1024):
            Y[by, bx * 1024 + j] = T.max(X[by, bx * 1024 + j], 0.0)
'''

TL_GOOD = {
    "compiled-in-init-called-in-forward": tl_src("return self.kernel(x)\n",
                                                  init="        super().__init__()\n        self.kernel = build(8, 1024)\n"),
    "compiled-lazily-per-shape": tl_src("""
        key = tuple(x.shape)
        if key not in self.kernels:
            self.kernels[key] = build(*x.shape)
        return self.kernels[key](x)
    """, init="        super().__init__()\n        self.kernels = {}\n"),
    "jit-factory": tl_src("kernel = relu(*x.shape)\nreturn kernel(x)\n", head=TL_JIT_FACTORY),
    "jit-factory-called-at-once": tl_src("return relu(*x.shape)(x)\n", head=TL_JIT_FACTORY),
    "eager-jit-kernel": tl_src("y = torch.empty_like(x)\nrelu_eager(x, y)\nreturn y\n", head=TL_EAGER_JIT),
    "par-compile": tl_src("""
        kernels = tilelang.par_compile([self.f])
        return kernels[0](x)
    """, init="        super().__init__()\n        self.f = None\n"),
}


@pytest.mark.parametrize("name", list(TL_GOOD))
def test_tilelang_candidates_that_call_their_kernel_pass(name):
    source = TL_GOOD[name]
    if name == "par-compile":  # a prim_func must exist for the candidate to have a kernel of its own
        source = source.replace("self.f = None", "self.f = build(8, 1024)")
    assert passes_cleanly(source, "tilelang")


TL_IMPORT_ONLY = "import tilelang\nimport torch\nimport torch.nn as nn\n\n\nclass ModelNew(nn.Module):\n" \
                 "    def forward(self, x):\n        return torch.clamp_min(x, 0.0)\n"


@pytest.mark.parametrize("source,rule,words", [
    pytest.param(TL_IMPORT_ONLY, "no-custom-kernel", "no TileLang kernel", id="imports-tilelang-computes-with-torch"),
    pytest.param(tl_src("return torch.relu(x)\n", head=TL_HEAD.replace(
        "return tilelang.compile(relu_tile, out_idx=[1])", "return relu_tile")),
        "kernel-not-launched", "never compiled", id="prim-func-never-compiled"),
    pytest.param(tl_src("return torch.relu(x)\n", init="        super().__init__()\n        self.kernel = build(8, 1024)\n"),
                 "kernel-not-launched", "never calls the compiled kernel", id="compiled-never-called"),
    pytest.param(tl_src("kernel = relu(*x.shape)\nreturn torch.relu(x)\n", head=TL_JIT_FACTORY),
                 "kernel-not-launched", "never calls the compiled kernel", id="jit-factory-result-unused"),
])
def test_tilelang_candidates_that_do_not_call_their_kernel_are_refused(source, rule, words):
    report = analyze_source(source, "tilelang")
    assert not report.passed
    errors = [f for f in report.findings if f.severity == "error"]
    assert [f.rule for f in errors] == [rule], report.to_text()
    assert words in errors[0].message
    assert "torch-compute" in report.rules("warning")


def test_a_kernel_of_another_backend_does_not_satisfy_the_claim():
    """Claiming cute for a TileLang source (or the reverse, or triton) fails: each backend wants its own kernel."""
    tl_ok = TL_GOOD["jit-factory"]
    cute_ok = CUTE_GOOD["host-called-directly"]
    for source, claim in ((tl_ok, "cute"), (cute_ok, "tilelang"), (cute_ok, "triton"), (tl_ok, "cuda")):
        report = analyze_source(source, claim)
        assert "no-custom-kernel" in report.rules("error"), (claim, report.to_text())
    # and the right claim reports the launch even when another backend's check runs too
    assert analyze_source(cute_ok, "cute").passed and analyze_source(tl_ok, "tilelang").passed


# --- detection and the corpus --------------------------------------------------------------------------

@pytest.mark.parametrize("source,expected", [
    pytest.param(CUTE_IMPORT_ONLY, "cute", id="cutlass"),
    pytest.param("from cutlass import cute\n", "cute", id="from-cutlass-import-cute"),
    pytest.param(TL_IMPORT_ONLY, "tilelang", id="tilelang"),
    pytest.param("import tilelang\nimport triton\n", "tilelang", id="tilelang-over-triton"),
    pytest.param("import cutlass\nfrom torch.utils.cpp_extension import load_inline\n", "cuda", id="extension-wins"),
    pytest.param("import cutlass_library\n", None, id="another-package"),
])
def test_detection(source, expected):
    assert detect_backend(source) == expected


@pytest.mark.parametrize("path", sorted(SOLUTIONS.glob("cute/level*/*.py")) + sorted(SOLUTIONS.glob("tilelang/level*/*.py")),
                         ids=lambda p: f"{p.parts[-3]}/{p.stem}")
def test_worked_solutions_are_detected_conform_and_name_their_kernels(path):
    backend = path.parts[-3]
    source = path.read_text()
    assert detect_backend(source) == backend
    assert passes_cleanly(source, backend)
    names = own_kernel_names(source)
    assert names and all(n.endswith("_kernel") for n in names), names
    if backend == "cute":  # host functions (@cute.jit) are not kernels: they never appear in a trace
        assert not any(n.endswith("_host") for n in names)


def test_the_corpus_has_a_refused_and_an_honest_file_per_dsl():
    for backend in ("cute", "tilelang"):
        files = [p for p in CORPUS.glob("*.py") if f"# backend: {backend}\n" in p.read_text()]
        exploits = [p for p in files if p.name.startswith("e")]
        controls = [p for p in files if p.name.startswith("ok_")]
        assert exploits and controls, backend
        for p in exploits:
            assert "kernel-not-launched" in analyze_source(p.read_text(), backend).rules("error"), p.name


# --- runtime names ---------------------------------------------------------------------------------------

def test_runtime_recognises_the_dsls_kernel_names():
    """The names as the DSLs generate them: ``kernel_cutlass_<function>_<types>_<n>`` (CUTLASS DSL 4.8.1's PTX)
    and ``<prim_func>_kernel`` (TileLang 0.1.15's CUDA source); both read on this machine without a GPU."""
    cute = (SOLUTIONS / "cute" / "level1" / "8_ReLU.py").read_text()
    tl = (SOLUTIONS / "tilelang" / "level1" / "8_ReLU.py").read_text()
    trace = [{"name": "kernel_cutlass_relu_kernel_tensorptrf32gmemo1_tensorptrf32gmemo1__0", "dur_us": 900.0,
              "stream": 7},
             {"name": "relu_tile_kernel", "dur_us": 800.0, "stream": 7},
             {"name": "void at::native::vectorized_elementwise_kernel<4, at::native::clamp_min_scalar_kernel>",
              "dur_us": 50.0, "stream": 7}]
    for source, own in ((cute, "kernel_cutlass_relu_kernel"), (tl, "relu_tile_kernel")):
        report = classify_launches(trace, own_kernel_names(source), marker_stream=7)
        assert [k for k in report.own_kernels if own in k] and len(report.own_kernels) == 1, report
    torch_only = classify_launches(trace[2:], own_kernel_names(cute), marker_stream=7)
    assert [f.rule for f in launch_findings(torch_only, "cute")] == ["no-own-kernel"]
    assert [f.rule for f in launch_findings(classify_launches(trace[2:], own_kernel_names(tl), 7), "tilelang")] == \
        ["no-own-kernel"]


# --- worker environment and the missing package --------------------------------------------------------

def test_specs_need_a_gpu_and_keep_their_compile_caches_private(tmp_path):
    from kernelbench.evaluation.isolation import WorkerDirs
    from kernelbench.evaluation.sandbox import private_environment

    for name, var in (("cute", "CUTE_DSL_CACHE_DIR"), ("tilelang", "TILELANG_CACHE_DIR")):
        spec = get_backend(name)
        assert spec.needs_gpu and spec.extra == name and spec.requires
        assert var in spec.private_dirs_env
    dirs = WorkerDirs.create("candidate", None)
    try:
        env = private_environment(dirs, None)
        for var in ("CUTE_DSL_CACHE_DIR", "TILELANG_CACHE_DIR"):
            assert env[var].startswith(str(dirs.scratch) + "/"), env[var]
    finally:
        dirs.cleanup()
    with pytest.raises(ValueError, match="relative"):
        BackendSpec(name="bad", display_name="Bad", summary="x", private_dirs_env={"X": "/tmp/shared"})


def test_missing_message_names_the_extra():
    msg = get_backend("cute").missing_message(["cutlass"])
    assert msg == ("CuTe DSL candidates need the Python package(s) cutlass, which are not installed where this "
                   "evaluation runs: pip install 'kernelbench[cute]'")
    assert "pip install 'kernelbench[tilelang]'" in get_backend("tilelang").missing_message(["tilelang"])
    assert "\n" not in msg


PROBLEM = '''
import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        return torch.relu(x)


def get_inputs():
    return [torch.randn(4, 8)]


def get_init_inputs():
    return []
'''


@pytest.fixture(scope="module")
def relu_problem(tmp_path_factory):
    from kernelbench.problems import load_directory

    root = tmp_path_factory.mktemp("dsl-problems")
    (root / "level1").mkdir()
    (root / "level1" / "1_Relu.py").write_text(PROBLEM)
    return load_directory(root).get(1, 1)


def _toy_conformity(ctx, sink, required, anchor):
    sink.add("kernel-launch", "toy", anchor)


def test_a_candidate_whose_backend_package_is_missing_gets_a_one_line_result(relu_problem):
    """The real evaluator on the CPU: a backend whose package is absent gives an infrastructure result naming
    the extra (no traceback, evaluated again on resume); a cute candidate on the CPU is refused for the GPU."""
    from kernelbench.evaluation import EvalJob, EvalSettings, evaluate_batch
    from kernelbench.results import Stage

    toy = BackendSpec(name="dsltoy", display_name="DslToy", summary="a backend whose package is absent",
                      conformity=_toy_conformity, requires=("kb_no_such_module_26",), extra="dsltoy")
    source = "import torch\nimport torch.nn as nn\nclass ModelNew(nn.Module):\n    def forward(self, x):\n" \
             "        return x.clamp_min(0)\n"
    with backend_registered(toy):
        settings = EvalSettings(backend="dsltoy", device="cpu", stage_timeout_s=20.0)
        cute_settings = settings.with_(backend="cute")
        missing, cute_on_cpu = evaluate_batch([EvalJob(relu_problem, source, settings, 0),
                                               EvalJob(relu_problem, CUTE_GOOD["host-called-directly"],
                                                       cute_settings, 1)], progress=False)
    assert not missing.correct and missing.error.stage == Stage.INFRASTRUCTURE
    assert missing.error.type == "MissingBackendPackage" and missing.error.traceback is None
    assert missing.error.message == toy.missing_message(["kb_no_such_module_26"])
    assert "pip install 'kernelbench[dsltoy]'" in missing.error.one_line()
    assert cute_on_cpu.error.type == "NoGPU" and "CuTe DSL candidates need an NVIDIA GPU" in cute_on_cpu.error.message


# --- generation ----------------------------------------------------------------------------------------------

@pytest.mark.slow
def test_generate_and_single_take_the_dsl_backends(tmp_path, monkeypatch, capsys):
    """``generate``/``single --backend cute|tilelang`` against the local LLM stand-in: the prompt teaches the DSL,
    the reply is kept, and on the CPU the verdict is the one-line GPU refusal (a result, not a traceback)."""
    import os

    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    from llm_server import LLMServer, Reply, fenced

    from kernelbench.cli.main import main
    from kernelbench.runs import RunDirectory

    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    cute = (SOLUTIONS / "cute" / "level1" / "8_ReLU.py").read_text()
    tl = (SOLUTIONS / "tilelang" / "level1" / "8_ReLU.py").read_text()
    with LLMServer(default=Reply(content=fenced(cute))) as server:
        rc = main(["generate", "--backend", "cute", "--level", "1", "--problem-ids", "8", "--model", "openai/m",
                   "--api-base", server.base_url, "--run-dir", "runs/c"])
        (prompt,) = [r.prompt for r in server.chat_requests()]
    assert rc == 0 and "## CuTe DSL notes" in prompt and "@cute.kernel" in prompt
    assert RunDirectory(tmp_path / "runs" / "c").kernel_path(1, 8, 0).read_text().strip() == cute.strip()
    capsys.readouterr()
    with LLMServer(default=Reply(content=fenced(tl))) as server:
        rc = main(["single", "--backend", "tilelang", "--level", "1", "--problem-id", "8", "--model", "openai/m",
                   "--api-base", server.base_url, "--run-dir", "runs/t", "--device", "cpu", "--quiet-kernel"])
        (prompt,) = [r.prompt for r in server.chat_requests()]
    out = capsys.readouterr().out
    assert rc == 0 and "## TileLang notes" in prompt
    assert "TileLang candidates need an NVIDIA GPU" in out
    result = RunDirectory(tmp_path / "runs" / "t").load_results()[(8, 0)]
    assert result.backend == "tilelang" and result.error.type == "NoGPU" and result.error.traceback is None


def test_every_backend_extra_is_in_pyproject_and_in_the_modal_image():
    """``kernelbench[cute]``/``[tilelang]`` exist (the missing-package message names them) and the Modal image pins
    their packages, so a leaderboard submission in either DSL can be evaluated there."""
    try:
        import tomllib
    except ModuleNotFoundError:  # Python 3.10
        pytest.skip("tomllib needs Python 3.11")
    from packaging.requirements import Requirement

    from kernelbench.backends import all_backends
    from modal_app.versions import pip_pins

    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    pinned = {Requirement(p).name.lower() for p in pip_pins()}
    with_extras = [s for s in all_backends() if s.extra]
    assert {s.name for s in with_extras} == {"cute", "tilelang"}
    for spec in with_extras:
        names = {Requirement(r).name.lower() for r in extras[spec.extra]}
        assert names and names <= pinned, (spec.name, names - pinned)
    for group in ("all", "dev"):  # CI installs dev: the DSLs stay out of it (sizes in pyproject)
        assert not any("cute" in r or "tilelang" in r for r in extras[group]), group
