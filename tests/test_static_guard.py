"""The static guard: the adversarial corpus, honest sources, rule unit cases and the CLI verb.

Everything here reads sources only (the guard never executes them), so the whole file runs in a
few seconds on the CPU. The corpus files carry their expected findings as ``# static: <rule>``
markers on the offending lines; see tests/adversarial/README.md.
"""

from __future__ import annotations

import json
import re
import subprocess
import textwrap
from pathlib import Path

import pytest
from kbtesting import run_cli

from kernelbench.backends import backend_names
from kernelbench.errors import KernelBenchError
from kernelbench.evaluation.guards import (
    RULES,
    GuardReport,
    UnknownBackendError,
    analyze_source,
    detect_backend,
)

ROOT = Path(__file__).resolve().parents[1]
CORPUS = ROOT / "tests" / "adversarial"
SOLUTIONS = ROOT / "kernelbench" / "solutions"
CORPUS_FILES = sorted(CORPUS.glob("*.py"))
EXPLOITS = [p for p in CORPUS_FILES if p.name.startswith("e")]
CONTROLS = [p for p in CORPUS_FILES if p.name.startswith("ok_")]

_MARKER = re.compile(r"(?:#|//)\s*static:\s*([a-z0-9\-]+(?:\s*,\s*[a-z0-9\-]+)*)")
_HEADER = re.compile(r"^# (exploit|problem|backend|runs-on|expect|runtime-expect): (.+)$", re.M)
_VERDICT = re.compile(r"^(pass|honest|fail|fail [a-z]+(:[a-z0-9\-]+)?|flag [a-z0-9\-]+)$")


def header(path: Path) -> dict[str, str]:
    return dict(_HEADER.findall(path.read_text()))


def markers(path: Path) -> set[tuple[str, int]]:
    out = set()
    for lineno, line in enumerate(path.read_text().splitlines(), 1):
        m = _MARKER.search(line)
        if m:
            out.update((rule.strip(), lineno) for rule in m.group(1).split(","))
    return out


def failing_and_warning(report: GuardReport) -> set[tuple[str, int | None]]:
    return {(f.rule, f.line) for f in report.findings if f.severity in ("error", "warning")}


# --- the corpus ----------------------------------------------------------------------------------


def test_corpus_covers_every_exploit_of_issue_4():
    numbers = {int(header(p)["exploit"].split()[0]) for p in EXPLOITS}
    assert set(range(1, 19)) <= numbers
    assert len(CONTROLS) >= 2


@pytest.mark.parametrize("path", CORPUS_FILES, ids=lambda p: p.name)
def test_corpus_header_is_machine_readable(path):
    h = header(path)
    assert set(h) == {"exploit", "problem", "backend", "runs-on", "expect", "runtime-expect"}, h
    assert h["backend"] in backend_names()
    assert h["runs-on"] in ("any", "gpu")
    for key in ("expect", "runtime-expect"):
        for verdict in h[key].split(" | "):
            assert _VERDICT.match(verdict.strip()), f"{path.name}: bad {key} verdict {verdict!r}"
    m = re.fullmatch(r"level=(\d+) id=(\d+)", h["problem"])
    assert m, h["problem"]
    level, pid = int(m.group(1)), int(m.group(2))
    builtin = ROOT / "kernelbench" / "problems" / "builtin" / f"level{level}"
    assert list(builtin.glob(f"{pid}_*.py")), f"{path.name}: no built-in problem level {level} id {pid}"
    source = path.read_text()
    assert '"""' in source.split("\n\n")[0] + source, "a module docstring explains the exploit"
    assert "class ModelNew" in source


@pytest.mark.parametrize("path", CORPUS_FILES, ids=lambda p: p.name)
def test_static_findings_match_markers(path):
    backend = header(path)["backend"]
    report = analyze_source(path.read_text(), backend)
    got = failing_and_warning(report)
    want = markers(path)
    assert got == want, (f"\nmissing: {sorted(want - got)}\nextra:   {sorted(got - want)}\n"
                         f"report:\n{report.to_text()}")


@pytest.mark.parametrize("path", EXPLOITS, ids=lambda p: p.name)
def test_static_verdict_agrees_with_expect_line(path):
    """Where the full verdict is a static guard rule, the static report fails with that rule."""
    h = header(path)
    report = analyze_source(path.read_text(), h["backend"])
    static_rules = {r for r, rule in RULES.items() if rule.severity == "error"}
    expected = [v.strip() for v in h["expect"].split(" | ")]
    guard_rules = [v.split(":", 1)[1] for v in expected if v.startswith("fail guard:")]
    if guard_rules and all(r in static_rules for r in guard_rules):
        assert not report.passed
        assert report.rules("error") & set(guard_rules), report.to_text()
    else:
        # the runtime decides: the static guard must not fail it for an unrelated reason
        assert report.rules("error") <= set(guard_rules), report.to_text()


@pytest.mark.parametrize("path", CONTROLS, ids=lambda p: p.name)
def test_honest_controls_have_no_findings_beyond_info(path):
    report = analyze_source(path.read_text(), header(path)["backend"])
    assert report.passed
    assert not report.warnings, report.to_text()
    assert "kernel-launch" in report.rules("info")


def _solution_files() -> list[Path]:
    return sorted(p for p in SOLUTIONS.glob("*/level*/*.py") if p.name != "__init__.py")


def test_worked_solutions_exist():
    assert _solution_files(), "expected worked solutions under kernelbench/solutions/<backend>/level<L>/"


@pytest.mark.parametrize("path", _solution_files(), ids=lambda p: f"{p.parent.parent.name}/{p.parent.name}/{p.name}")
def test_worked_solutions_pass_without_warnings(path):
    backend = path.parent.parent.name
    report = analyze_source(path.read_text(), backend)
    assert report.passed, report.to_text()
    assert not report.warnings, report.to_text()
    assert "kernel-launch" in report.rules("info"), report.to_text()


# --- report format -------------------------------------------------------------------------------


def test_report_text_and_json_round_trip():
    report = analyze_source((CORPUS / "e05_patch_perf_counter.py").read_text(), "triton")
    lines = report.to_text().splitlines()
    assert len(lines) == len(report.findings)
    assert all(re.fullmatch(r"line (\d+|-): \[(info|warning|error)\] [a-z0-9\-]+: .+", ln) for ln in lines)
    assert "line 30: [error] monkey-patch: assigns time.perf_counter" in report.to_text()
    data = json.loads(report.to_json())
    assert data["passed"] is False and data["backend"] == "triton"
    assert {f["origin"] for f in data["findings"]} == {"static"}
    back = GuardReport.from_json(report.to_json())
    assert back == report and back.passed is False


def test_every_rule_id_is_catalogued():
    """A finding never carries a rule the catalogue (and so the docs) does not know."""
    for path in CORPUS_FILES:
        for f in analyze_source(path.read_text(), header(path)["backend"]).findings:
            assert f.rule in RULES and f.severity == RULES[f.rule].severity


def test_syntax_error_is_a_finding_not_an_exception():
    report = analyze_source("import torch\nclass ModelNew(:\n    pass\n", "triton")
    assert not report.passed
    assert [(f.rule, f.line) for f in report.findings] == [("syntax-error", 2)]


def test_unknown_backend_is_a_clear_error():
    with pytest.raises(UnknownBackendError, match=r"unknown backend 'hip' \(available: cuda, cute, tilelang, torch, triton\)"):
        analyze_source("x = 1\n", "hip")
    assert issubclass(UnknownBackendError, KernelBenchError)


def test_missing_model_new():
    report = analyze_source("import torch\nclass Model(torch.nn.Module):\n    pass\n", "torch")
    assert report.rules("error") == {"no-model-new"}


def test_detect_backend():
    assert detect_backend((CORPUS / "ok_triton_relu.py").read_text()) == "triton"
    assert detect_backend((CORPUS / "ok_cuda_relu.py").read_text()) == "cuda"
    # No backend can be read from a source that does not parse: callers fall back to their own default
    # (``kernelbench guard`` to cuda). The cases where the old guard and leaderboard rules disagreed are
    # in tests/test_backends.py.
    assert detect_backend("not python (") is None


# --- rule unit cases -----------------------------------------------------------------------------

TRITON_HEAD = """
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def k(x_ptr, o_ptr, n, B: tl.constexpr):
    i = tl.program_id(0) * B + tl.arange(0, B)
    tl.store(o_ptr + i, tl.load(x_ptr + i, mask=i < n), mask=i < n)


def launch(x):
    o = torch.empty_like(x)
    k[(triton.cdiv(x.numel(), 1024),)](x, o, x.numel(), B=1024)
    return o
"""


def triton_candidate(forward_body: str, extra: str = "", init_body: str = "pass") -> str:
    return (TRITON_HEAD + textwrap.dedent(extra) + "\n\nclass ModelNew(nn.Module):\n    def __init__(self):\n"
            "        super().__init__()\n" + textwrap.indent(textwrap.dedent(init_body), "        ")
            + "\n\n    def forward(self, x):\n" + textwrap.indent(textwrap.dedent(forward_body), "        ") + "\n")


def rules_of(source: str, backend: str = "triton", severity: str | None = None) -> set[str]:
    return analyze_source(source, backend).rules(severity) - {"kernel-launch", "unused-kernel"}


def test_baseline_candidate_is_clean():
    assert rules_of(triton_candidate("return launch(x)")) == set()


@pytest.mark.parametrize("extra", [
    "import torch.cuda as tc\ntc.synchronize = lambda *a: None",
    "setattr(torch.cuda, 'synchronize', lambda *a: None)",
    "import sys\nsys.modules['time'] = None",
    "getattr(torch, 'cuda').synchronize = None",
    "import importlib\nimportlib.import_module('time').perf_counter = None",
    "del torch.relu",
    "import builtins\nbuiltins.print = None",
    "__builtins__['open'] = None",
    "type(torch.zeros(1)).__add__ = None",
    "from torch.cuda import Event\nEvent.elapsed_time = None",
    "cuda_mod = torch.cuda\ncuda_mod.synchronize = None",
    "import triton.testing\ntriton.testing.do_bench = None",
    "torch.Tensor.__eq__ = lambda a, b: True",
    "import kernelbench.evaluation\nkernelbench.evaluation.evaluate = None",
    "import sys\nsys.modules.update(time=None)",
])
def test_monkey_patching_forms(extra):
    assert "monkey-patch" in rules_of(triton_candidate("return launch(x)", extra), severity="error")


def test_ordinary_assignments_are_not_patches():
    src = triton_candidate("y = launch(x)\nreturn y", "import types\nns = types.SimpleNamespace()\nns.x = 1",
                           init_body="self.scale = 2.0\nself.w = nn.Parameter(torch.randn(4))")
    assert rules_of(src) == set()


@pytest.mark.parametrize("extra, rule", [
    ("torch.backends.cuda.matmul.allow_tf32 = True", "precision-downcast"),
    ("torch.backends.cudnn.allow_tf32 = True", "precision-downcast"),
    ("torch.backends.cuda.matmul.allow_fp16_reduced_precision_reduction = True", "precision-downcast"),
    ("torch.set_float32_matmul_precision('high')", "precision-downcast"),
    ("torch.set_default_dtype(torch.float16)", "precision-downcast"),
    ("torch.backends.cudnn.benchmark = True", "backend-flag"),
    ("torch.backends.cuda.matmul.allow_tf32 = False", "backend-flag"),
])
def test_backend_switches(extra, rule):
    found = analyze_source(triton_candidate("return launch(x)", extra), "triton")
    assert rule in found.rules() and "monkey-patch" not in found.rules()
    assert found.passed


def test_float32_matmul_precision_highest_is_fine():
    assert rules_of(triton_candidate("return launch(x)", "torch.set_float32_matmul_precision('highest')")) == set()


@pytest.mark.parametrize("body", [
    "return launch(x.half()).float()",
    "return launch(x.bfloat16()).float()",
    "return launch(x.to(torch.float16)).float()",
    "return launch(x.to(dtype=torch.bfloat16)).float()",
    "y = torch.empty(x.shape, dtype=torch.float16)\nreturn launch(x)",
    "with torch.autocast('cuda'):\n    return launch(x)",
])
def test_python_downcasts_warn(body):
    assert rules_of(triton_candidate(body)) == {"precision-downcast"}


@pytest.mark.parametrize("call, flagged", [
    ("tl.dot(a, b)", True),
    ("tl.dot(a, b, input_precision='tf32')", True),
    ("tl.dot(a, b, allow_tf32=True)", True),
    ("tl.dot(a, b, input_precision='ieee')", False),
    ("tl.dot(a, b, allow_tf32=False)", False),
    ("tl.dot(a, b, input_precision=PREC)", False),
    ("tl.dot(a.to(tl.float16), b)", True),
])
def test_tl_dot_precision(call, flagged):
    extra = f"""
    @triton.jit
    def mm(a_ptr, b_ptr, c_ptr, PREC: tl.constexpr):
        r = tl.arange(0, 16)
        a = tl.load(a_ptr + r[:, None] * 16 + r[None, :])
        b = tl.load(b_ptr + r[:, None] * 16 + r[None, :])
        tl.store(c_ptr + r[:, None] * 16 + r[None, :], {call})
    """
    body = "o = torch.empty_like(x)\nmm[(1,)](x, x, o, PREC='ieee')\nreturn o"
    assert ("precision-downcast" in rules_of(triton_candidate(body, extra))) == flagged


@pytest.mark.parametrize("extra, rule", [
    ("import threading", "threads"),
    ("from concurrent.futures import ThreadPoolExecutor", "threads"),
    ("import torch.multiprocessing as mp", "threads"),
    ("import os\nos.fork", "threads"),
    ("import subprocess", "subprocess"),
    ("import os\nos.system('nvidia-smi')", "subprocess"),
    ("import os\nos.execv('/bin/true', [])", "subprocess"),
    ("import socket", "network"),
    ("import urllib.request", "network"),
    ("from http import client", "network"),
    ("import ctypes", "ctypes"),
    ("import gc\ngc.get_objects()", "introspection"),
    ("import inspect\ninspect.currentframe().f_back", "introspection"),
    ("import sys\nsys._getframe(1)", "introspection"),
    ("import sys\nm = sys.modules['__main__']", "introspection"),
    ("import kernelbench", "introspection"),
    ("import sys\nsys.exit(0)", "process-control"),
    ("import signal", "process-control"),
    ("model = torch.compile(launch)", "compiler"),
    ("@torch.jit.script\ndef f(x):\n    return x", "compiler"),
    ("import jax", "compiler"),
    ("import cupy", "compiler"),
    ("exec('x = 1')", "dynamic-code"),
    ("import importlib\nname = 'thr' + 'eading'\nimportlib.import_module(name)", "dynamic-code"),
    ("s = torch.UntypedStorage._new_shared_cuda", "ipc"),
])
def test_forbidden_apis_fail(extra, rule):
    report = analyze_source(triton_candidate("return launch(x)", extra), "triton")
    assert rule in report.rules("error"), report.to_text()
    assert not report.passed


def test_sys_modules_of_own_module_is_fine():
    assert rules_of(triton_candidate("return launch(x)", "import sys\nme = sys.modules[__name__]")) == set()


def test_gc_collect_and_inspect_signature_are_fine():
    src = triton_candidate("return launch(x)", "import gc\nimport inspect\ngc.collect()\ninspect.signature(launch)")
    assert rules_of(src) == set()


@pytest.mark.parametrize("extra, body", [
    ("", "s = torch.cuda.Stream()\nwith torch.cuda.stream(s):\n    return launch(x)"),
    ("from torch.cuda import Stream\nS = Stream()", "return launch(x)"),
    ("", "torch.cuda.set_stream(torch.cuda.Stream())\nreturn launch(x)"),
])
def test_streams_warn(extra, body):
    report = analyze_source(triton_candidate(body, extra), "triton")
    assert "side-stream" in report.rules("warning") and report.passed


def test_cuda_graph_warns():
    body = "g = torch.cuda.CUDAGraph()\nwith torch.cuda.graph(g):\n    y = launch(x)\ng.replay()\nreturn y"
    report = analyze_source(triton_candidate(body), "triton")
    assert "cuda-graph" in report.rules("warning") and report.passed


def test_current_stream_argument_is_fine():
    body = "s = torch.cuda.current_stream()\ntorch.cuda.current_stream().synchronize()\nreturn launch(x)"
    assert rules_of(triton_candidate(body)) == set()


@pytest.mark.parametrize("extra, flagged", [
    ("open('kernel.cu', 'w').write('x')", True),
    ("open('kernel.cu').read()", False),
    ("import pathlib\npathlib.Path('out.bin').write_bytes(b'')", True),
    ("torch.save({}, 'cache.pt')", True),
    ("import os\nos.remove('x')", True),
    ("import tempfile, os\nd = tempfile.mkdtemp()\nopen(os.path.join(d, 'k.cu'), 'w').write('x')", False),
    ("import tempfile\nwith tempfile.TemporaryDirectory() as d:\n    open(f'{d}/k.cu', 'w').write('x')", False),
    ("open('/tmp/k.cu', 'w').write('x')", False),
])
def test_file_writes(extra, flagged):
    assert ("file-write" in rules_of(triton_candidate("return launch(x)", extra))) == flagged


def test_tensor_subclass_via_torch_function():
    extra = """
    class Wrapper:
        @classmethod
        def __torch_function__(cls, func, types, args=(), kwargs=None):
            return func(*args, **(kwargs or {}))
    """
    assert rules_of(triton_candidate("return launch(x)", extra)) == {"tensor-subclass"}


def test_assigning_class_of_output_is_a_subclass_finding():
    body = "o = launch(x)\no.__class__ = nn.Parameter\nreturn o"
    assert "tensor-subclass" in rules_of(triton_candidate(body))


@pytest.mark.parametrize("body, rules", [
    ("return x", {"returns-input", "kernel-not-launched"}),
    ("o = launch(x)\nx.add_(1)\nreturn o", {"mutates-input"}),
    ("o = launch(x)\nx[0] = 0\nreturn o", {"mutates-input"}),
    ("o = launch(x)\nx += 1\nreturn o", {"mutates-input"}),
    ("o = launch(x)\ntorch.relu_(x)\nreturn o", {"mutates-input", "torch-compute"}),
    ("o = launch(x)\ntorch.add(o, 1, out=x)\nreturn o", {"mutates-input", "torch-compute"}),
    ("x = x.contiguous()\nlaunch(x)\nreturn x.view(-1)", set()),
    ("launch(x)\nreturn x.view(-1)", {"returns-input"}),
    ("y = launch(x)\nreturn y", set()),
])
def test_inputs_returned_or_mutated(body, rules):
    assert rules_of(triton_candidate(body)) == rules


def test_x_contiguous_rebinding_still_tracks_mutation():
    assert rules_of(triton_candidate("x = x.contiguous()\nx.zero_()\nreturn launch(x)")) == {"mutates-input"}


@pytest.mark.parametrize("body, rules", [
    ("launch(x)\nreturn torch.empty_like(x)", {"uninitialised-output"}),
    ("o = torch.empty_like(x)\nlaunch(x)\nreturn o", {"uninitialised-output"}),
    ("o = torch.empty_like(x)\nk[(1,)](x, o, x.numel(), B=1024)\nreturn o", set()),
    ("o = x.new_empty(x.shape)\nk[(1,)](x, o, x.numel(), B=1024)\nreturn o.view(-1)", set()),
])
def test_uninitialised_outputs(body, rules):
    assert rules_of(triton_candidate(body)) == rules


@pytest.mark.parametrize("body, init, extra", [
    ("self.n += 1\nreturn launch(x)", "self.n = 0", ""),
    ("self.cache[x.shape] = launch(x)\nreturn self.cache[x.shape]", "self.cache = {}", ""),
    ("self.outs.append(launch(x))\nreturn self.outs[-1]", "self.outs = []", ""),
    ("_CACHE['k'] = launch(x)\nreturn _CACHE['k']", "pass", "_CACHE = {}"),
    ("global _LAST\n_LAST = launch(x)\nreturn _LAST", "pass", "_LAST = None"),
    ("if self.buf is None:\n    self.buf = torch.empty_like(x)\nk[(1,)](x, self.buf, x.numel(), B=1024)\n"
     "return self.buf.view(-1)", "self.buf = None", ""),
])
def test_state_across_calls_warns(body, init, extra):
    assert "stateful-forward" in rules_of(triton_candidate(body, extra, init))


def test_lazy_build_and_local_containers_are_not_state():
    extra = """
    from torch.utils.cpp_extension import load_inline

    def _build():
        return load_inline(name="e", cpp_sources="", cuda_sources="", functions=["f"])
    """
    body = "if self.ext is None:\n    self.ext = _build()\nouts = []\nouts.append(launch(x))\nreturn outs[0]"
    assert rules_of(triton_candidate(body, extra, "self.ext = None")) == set()


def test_clock_read_in_forward_warns():
    src = triton_candidate("import time\nt = time.perf_counter()\nreturn launch(x)")
    assert rules_of(src) == {"clock-read"}


@pytest.mark.parametrize("body, rules", [
    ("h = {x.data_ptr(): 1}\nreturn launch(x)", {"input-keyed-cache"}),
    ("key = hash(x)\nreturn launch(x)", {"input-keyed-cache"}),
    ("key = id(x)\nreturn launch(x)", {"input-keyed-cache"}),
])
def test_input_keyed_cache(body, rules):
    assert rules_of(triton_candidate(body)) == rules


def test_rng_seed_warns():
    assert rules_of(triton_candidate("return launch(x)", init_body="torch.manual_seed(0)")) == {"rng-seed"}


# --- launches through the call graph ------------------------------------------------------------


@pytest.mark.parametrize("extra, init, body", [
    ("", "pass", "return launch(x)"),
    ("", "pass", "o = torch.empty_like(x)\nk[lambda meta: (1,)](x, o, x.numel(), B=1024)\nreturn o"),
    ("", "self.kern = k", "o = torch.empty_like(x)\nself.kern[(1,)](x, o, x.numel(), B=1024)\nreturn o"),
    ("", "self.fn = launch", "return self.fn(x)"),
    ("""
     class ReLUFn(torch.autograd.Function):
         @staticmethod
         def forward(ctx, x):
             return launch(x)
     """, "pass", "return ReLUFn.apply(x)"),
    ("""
     class Inner(nn.Module):
         def forward(self, x):
             return launch(x)
     """, "self.inner = Inner()", "return self.inner(x)"),
    ("""
     class Runner:
         def go(self, x):
             return launch(x)
     """, "self.r = Runner()", "return self.r.go(x)"),
    ("alias = launch", "pass", "return alias(x)"),
    ("""
     @torch.library.custom_op("kb::relu", mutates_args=())
     def relu_op(x: torch.Tensor) -> torch.Tensor:
         return launch(x)
     """, "pass", "return torch.ops.kb.relu(x)"),
    ("", "pass", "def inner(t):\n    return launch(t)\nreturn inner(x)"),
    ("", "pass", "o = torch.empty_like(x)\nk.run(x, o, x.numel(), B=1024, grid=(1,), warmup=False)\nreturn o"),
    ("IMPLS = {torch.float32: launch}", "pass", "return IMPLS[x.dtype](x)"),
    ("", "self.impls = [launch]", "return self.impls[0](x)"),
    ("import functools\nrun = functools.partial(launch)", "pass", "return run(x)"),
])
def test_triton_launch_is_found_through_calls(extra, init, body):
    report = analyze_source(triton_candidate(body, extra, init), "triton")
    assert report.rules("error") == set(), report.to_text()
    assert "kernel-launch" in report.rules("info")


def test_method_of_model_new_helper():
    src = TRITON_HEAD + textwrap.dedent("""
    class ModelNew(nn.Module):
        def _run(self, x):
            return launch(x)

        def forward(self, x):
            return self._run(x)
    """)
    assert analyze_source(src, "triton").passed


@pytest.mark.parametrize("init, body", [
    ("self.warm = launch(torch.zeros(8))", "return x.relu()"),
    ("pass", "return torch.relu(x)"),
    ("pass", "f = launch\nreturn torch.relu(x)"),
])
def test_kernel_not_launched_from_forward(init, body):
    report = analyze_source(triton_candidate(body, init_body=init), "triton")
    assert "kernel-not-launched" in report.rules("error")
    assert "torch-compute" in report.rules("warning")


def test_device_helper_jit_functions_are_not_kernels():
    extra = """
    @triton.jit
    def helper(v):
        return tl.maximum(v, 0.0)

    @triton.jit
    def relu_k(x_ptr, o_ptr, n, B: tl.constexpr):
        i = tl.program_id(0) * B + tl.arange(0, B)
        tl.store(o_ptr + i, helper(tl.load(x_ptr + i, mask=i < n)), mask=i < n)
    """
    body = "o = torch.empty_like(x)\nrelu_k[(1,)](x, o, x.numel(), B=1024)\nreturn o"
    report = analyze_source(triton_candidate(body, extra), "triton")
    assert report.passed
    unused = [f for f in report.findings if f.rule == "unused-kernel"]
    assert [f.message.split()[2] for f in unused] == ["k"]  # the head's k, not the helper


def test_no_triton_kernel_at_all():
    src = "import torch\nimport torch.nn as nn\n\nclass ModelNew(nn.Module):\n    def forward(self, x):\n        return x * 2\n"
    assert analyze_source(src, "triton").rules("error") == {"no-custom-kernel"}
    assert analyze_source(src, "cuda").rules("error") == {"no-custom-kernel"}
    assert analyze_source(src, "torch").passed
    assert "torch-compute" not in analyze_source(
        src.replace("x * 2", "torch.relu(x)"), "torch").rules()


def test_try_fallback_variants():
    fallback = "try:\n    return launch(x)\nexcept RuntimeError:\n    return self.slow(x)"
    extra_method = ""
    src = triton_candidate(fallback, extra_method).replace(
        "    def forward(self, x):", "    def slow(self, x):\n        return torch.relu(x)\n\n    def forward(self, x):")
    assert "try-fallback" in rules_of(src, severity="error")
    reraise = "try:\n    return launch(x)\nexcept RuntimeError as e:\n    raise RuntimeError('kernel failed') from e"
    assert rules_of(triton_candidate(reraise)) == set()
    unrelated = "try:\n    n = int(x.shape[0])\nexcept Exception:\n    n = torch.relu(x).numel()\nreturn launch(x)"
    assert "try-fallback" not in rules_of(triton_candidate(unrelated))


def test_swallowed_build_error_warns():
    extra = """
    from torch.utils.cpp_extension import load_inline
    try:
        ext = load_inline(name="e", cpp_sources="", cuda_sources="", functions=["f"])
    except Exception:
        ext = None
    """
    assert "swallowed-kernel-error" in rules_of(triton_candidate("return launch(x)", extra))


# --- CUDA sources in strings --------------------------------------------------------------------

CUDA_TEMPLATE = '''
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

src = r"""
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>
__global__ void relu_kernel(const float* x, float* o, int64_t n) {
    int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
    if (i < n) o[i] = x[i] > 0.f ? x[i] : 0.f;
}
BODY
"""

ext = load_inline(name="t", cpp_sources="torch::Tensor relu_cuda(torch::Tensor x);", cuda_sources=src,
                  functions=["relu_cuda"], verbose=False, extra_cuda_cflags=["-O3"])


class ModelNew(nn.Module):
    def forward(self, x):
        return CALL
'''

HOST_OK = """
torch::Tensor relu_cuda(torch::Tensor x) {
    auto o = torch::empty_like(x);
    int64_t n = x.numel();
    relu_kernel<<<(n + 255) / 256, 256, 0, at::cuda::getCurrentCUDAStream()>>>(x.data_ptr<float>(), o.data_ptr<float>(), n);
    return o;
}
"""


def cuda_candidate(body: str = HOST_OK, call: str = "ext.relu_cuda(x)") -> str:
    return CUDA_TEMPLATE.replace("BODY", body).replace("CALL", call)


def test_cuda_clean():
    report = analyze_source(cuda_candidate(), "cuda")
    assert report.passed and not report.warnings, report.to_text()


def test_cuda_launch_through_a_helper_and_pybind_alias():
    body = """
static void launch(const float* x, float* o, int64_t n, cudaStream_t s) {
    relu_kernel<<<(n + 255) / 256, 256, 0, s>>>(x, o, n);
}
torch::Tensor relu_impl(torch::Tensor x) {
    auto o = torch::empty_like(x);
    launch(x.data_ptr<float>(), o.data_ptr<float>(), x.numel(), at::cuda::getCurrentCUDAStream());
    return o;
}
PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) { m.def("relu_cuda", &relu_impl, "relu"); }
"""
    report = analyze_source(cuda_candidate(body), "cuda")
    assert report.passed and not report.warnings, report.to_text()


def test_cuda_launch_kernel_api_counts():
    body = """
torch::Tensor relu_cuda(torch::Tensor x) {
    auto o = torch::empty_like(x);
    const float* xp = x.data_ptr<float>(); float* op = o.data_ptr<float>(); int64_t n = x.numel();
    void* args[] = {(void*)&xp, (void*)&op, (void*)&n};
    cudaLaunchKernel((const void*)relu_kernel, dim3(1), dim3(256), args, 0, at::cuda::getCurrentCUDAStream());
    return o;
}
"""
    assert analyze_source(cuda_candidate(body), "cuda").passed


def test_cuda_host_function_without_launch():
    body = "torch::Tensor relu_cuda(torch::Tensor x) { return at::relu(x); }"
    report = analyze_source(cuda_candidate(body), "cuda")
    assert "kernel-not-launched" in report.rules("error")
    assert "torch-compute" in report.rules("warning")


def test_cuda_extension_never_called():
    report = analyze_source(cuda_candidate(call="torch.relu(x)"), "cuda")
    assert report.rules("error") == {"kernel-not-launched"}


def test_cuda_kernel_never_built():
    src = cuda_candidate().replace("ext = load_inline(", "ext = dict(").replace("return ext.relu_cuda(x)", "return x")
    assert "no-custom-kernel" in analyze_source(src, "cuda").rules("error")


def test_cuda_torch_library_op():
    body = HOST_OK + """
TORCH_LIBRARY(kbops, m) { m.def("relu(Tensor x) -> Tensor"); }
TORCH_LIBRARY_IMPL(kbops, CUDA, m) { m.impl("relu", &relu_cuda); }
"""
    report = analyze_source(cuda_candidate(body, call="torch.ops.kbops.relu(x)"), "cuda")
    assert report.passed and "kernel-launch" in report.rules("info"), report.to_text()


@pytest.mark.parametrize("snippet, rule", [
    ("cudaStream_t s; cudaStreamCreate(&s);", "side-stream"),
    ("auto s = at::cuda::getStreamFromPool();", "side-stream"),
    ("cudaEvent_t e; cudaEventCreate(&e);", "cuda-event"),
    ("cudaIpcMemHandle_t h; cudaIpcGetMemHandle(&h, nullptr);", "ipc"),
    ("cublasSetMathMode(handle, CUBLAS_TF32_TENSOR_OP_MATH);", "precision-downcast"),
])
def test_cuda_string_patterns(snippet, rule):
    body = HOST_OK.replace("auto o = torch::empty_like(x);", "auto o = torch::empty_like(x);\n    " + snippet)
    assert rule in analyze_source(cuda_candidate(body), "cuda").rules()


def test_cuda_launch_on_created_stream_is_flagged_at_the_launch():
    body = HOST_OK.replace("at::cuda::getCurrentCUDAStream()", "side").replace(
        "auto o = torch::empty_like(x);", "auto o = torch::empty_like(x);\n    cudaStream_t side; cudaStreamCreate(&side);")
    src = cuda_candidate(body)
    report = analyze_source(src, "cuda")
    launch_line = next(i for i, ln in enumerate(src.splitlines(), 1) if "<<<" in ln)
    assert ("side-stream", launch_line) in {(f.rule, f.line) for f in report.findings}


def test_float2half_depends_on_dtype_dispatch():
    downcast = HOST_OK.replace("relu_kernel<<<", "// fp16 trick\n    relu_kernel<<<") + \
        "\n__device__ __half to_half(float v) { return __float2half(v); }\n"
    assert "precision-downcast" in analyze_source(cuda_candidate(downcast), "cuda").rules()
    dispatched = downcast + "\n// AT_DISPATCH_FLOATING_TYPES_AND_HALF is used by the launcher\n" \
        "void dispatch(torch::Tensor x) { AT_DISPATCH_FLOATING_TYPES_AND_HALF(x.scalar_type(), \"d\", [&] {}); }\n"
    assert "precision-downcast" not in analyze_source(cuda_candidate(dispatched), "cuda").rules()


def test_cuda_comments_do_not_count():
    body = HOST_OK + "\n// cudaStreamCreate(&s); would be faster\n/* cudaIpcOpenMemHandle */\n"
    assert analyze_source(cuda_candidate(body), "cuda").rules() == {"kernel-launch"}


# --- documentation -------------------------------------------------------------------------------


def test_threat_model_lists_every_rule_and_corpus_file():
    doc = (ROOT / "docs" / "threat-model.md").read_text()
    missing_rules = [r for r in RULES if f"`{r}`" not in doc]
    missing_files = [p.name for p in EXPLOITS if f"`{p.name}`" not in doc]
    assert not missing_rules and not missing_files, (missing_rules, missing_files)
    for test_name in re.findall(r"`(test_[a-z_0-9]+)`", doc):
        assert f"def {test_name}(" in Path(__file__).read_text(), f"the doc cites a test that does not exist: {test_name}"


# --- the CLI verb --------------------------------------------------------------------------------


def _cli(*args: str) -> subprocess.CompletedProcess:
    return run_cli("guard", *args, cwd=ROOT, timeout=120)


def test_cli_text_exit_codes_and_table():
    ok = _cli("tests/adversarial/ok_triton_relu.py")
    assert ok.returncode == 0, ok.stderr
    assert "passed" in ok.stdout and "[info] kernel-launch" in ok.stdout
    mixed = _cli("tests/adversarial/ok_triton_relu.py", "tests/adversarial/e05_patch_perf_counter.py",
                 "--backend", "triton")
    assert mixed.returncode == 1
    assert "line 30: [error] monkey-patch: assigns time.perf_counter" in mixed.stdout
    assert re.search(r"e05_patch_perf_counter\.py\s+triton\s+FAIL\s+1\s+0", mixed.stdout), mixed.stdout


def test_cli_json_form():
    out = _cli("--json", "tests/adversarial/e12_compiled_not_launched.py", "tests/adversarial/ok_cuda_relu.py")
    assert out.returncode == 1
    data = json.loads(out.stdout)
    assert [d["path"] for d in data] == ["tests/adversarial/e12_compiled_not_launched.py",
                                         "tests/adversarial/ok_cuda_relu.py"]
    assert [d["passed"] for d in data] == [False, True]
    assert data[0]["backend"] == "cuda"
    assert {f["rule"] for f in data[0]["findings"] if f["severity"] == "error"} == {"kernel-not-launched"}


def test_cli_bad_usage(tmp_path):
    missing = _cli(str(tmp_path / "nope.py"))
    assert missing.returncode == 2
    assert missing.stderr.strip().splitlines() == [f"error: no such file: {tmp_path / 'nope.py'}"]
    bad_backend = _cli("tests/adversarial/ok_triton_relu.py", "--backend", "hip")
    assert bad_backend.returncode == 2 and "invalid choice" in bad_backend.stderr
    broken = tmp_path / "broken.py"
    broken.write_text("class ModelNew(:\n")
    syntax = _cli(str(broken))
    assert syntax.returncode == 1 and "[error] syntax-error" in syntax.stdout
