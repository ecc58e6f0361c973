"""The backend registry: one spec per backend, one ``detect_backend``, and a new backend in one place.

The last test registers a toy backend (detected by a marker import, conforming by a marker call) and
shows that the static guard, the command line, settings, the worker environment and the runtime
kernel names pick it up with no other edit.
"""

from __future__ import annotations

import argparse
import ast
import json
import textwrap
from pathlib import Path

import pytest

from kernelbench.backends import (
    DEFAULT_BACKEND,
    BackendSpec,
    Detection,
    UnknownBackendError,
    all_backends,
    backend_names,
    backend_registered,
    detect_backend,
    get_backend,
    prompt_backends,
    solution_backends,
    submission_backends,
)
from kernelbench.errors import KernelBenchError
from kernelbench.evaluation.guards import analyze_source
from kernelbench.evaluation.guards.runtime import launch_findings, own_kernel_names
from kernelbench.evaluation.settings import EvalSettings

ROOT = Path(__file__).resolve().parents[1]
CORPUS = ROOT / "tests" / "adversarial"


# --- the registry ---------------------------------------------------------------------------------


def test_unknown_backend_names_the_available_ones():
    with pytest.raises(UnknownBackendError) as info:
        get_backend("hip")
    assert str(info.value) == "unknown backend 'hip' (available: cuda, cute, tilelang, torch, triton)"
    assert isinstance(info.value, KernelBenchError) and isinstance(info.value, ValueError)
    with pytest.raises(UnknownBackendError, match=r"unknown backend 'hip' \(available: cuda, cute, tilelang, torch, triton\)"):
        EvalSettings(backend="hip")


def test_the_lists_come_from_the_specs():
    assert backend_names() == ("cuda", "cute", "tilelang", "torch", "triton")
    assert prompt_backends() == ("cuda", "cute", "tilelang", "triton")
    assert solution_backends() == ("cuda", "cute", "tilelang", "triton")
    assert submission_backends() == ("cuda", "cute", "tilelang", "triton")
    assert EvalSettings().backend == DEFAULT_BACKEND == "cuda"


def test_every_spec_points_at_real_parts():
    prompts = ROOT / "kernelbench" / "prompts"
    for spec in all_backends():
        for reader in (spec.conformity_check(), spec.kernel_name_reader()):
            assert reader is None or callable(reader), spec.name
        assert (spec.conformity is None) == (not spec.custom_kernels), spec.name
        if spec.prompt is not None:
            assert (prompts / "templates" / spec.prompt.template).is_file(), spec.name
            assert (prompts / "examples" / spec.prompt.example).is_file(), spec.name
        assert (ROOT / "kernelbench" / "solutions" / spec.name).is_dir() == spec.worked_solutions, spec.name


def test_worker_environment_and_gpu_needs():
    assert get_backend("triton").worker_env(on_gpu=False) == {"TRITON_INTERPRET": "1"}
    assert get_backend("triton").worker_env(on_gpu=True) == {}
    assert get_backend("cuda").worker_env(on_gpu=False) == {}
    assert [s.name for s in all_backends() if s.needs_gpu] == ["cuda", "cute", "tilelang"]
    with pytest.raises(TypeError):
        get_backend("triton").cpu_worker_env["X"] = "1"  # a spec is frozen, its environment too


# --- one detect_backend ---------------------------------------------------------------------------
# The guard (``kernelbench guard --backend auto``) used to say triton when a @triton.jit kernel was
# defined and cuda otherwise; the leaderboard said triton for a source importing triton without a C++
# extension, cuda for one building an extension, and None (then cuda) for anything else. They now share
# one rule: imports and names, each backend's own markers, the highest precedence winning. These are
# the sources where the two old rules disagreed, and what the one rule says.

TRITON_IMPORT_NO_KERNEL = (CORPUS / "e11_reference_matmul.py").read_text()  # old guard: cuda; leaderboard: triton
TRITON_AND_EXTENSION = '''
import torch
import triton
import triton.language as tl
from torch.utils.cpp_extension import load_inline

ext = load_inline(name="e", cpp_sources="", cuda_sources="__global__ void k(float* x) {}", functions=[])


@triton.jit
def scale(x_ptr, n, BLOCK: tl.constexpr):
    pass


class ModelNew(torch.nn.Module):
    def forward(self, x):
        return x
'''  # old guard: triton (a jit kernel); old leaderboard: cuda (an extension)
PLAIN_TORCH = "import torch\nclass ModelNew(torch.nn.Module):\n    def forward(self, x):\n        return x * 2\n"
CPP_EXTENSION_MODULE = '''
from torch.utils import cpp_extension
ext = cpp_extension.load(name="e", sources=["k.cu"])
'''  # old leaderboard: None (it looked only for load_inline); old guard: cuda by default


@pytest.mark.parametrize("source,expected", [
    pytest.param(TRITON_IMPORT_NO_KERNEL, "triton", id="imports-triton-no-kernel"),
    pytest.param(TRITON_AND_EXTENSION, "cuda", id="triton-kernel-and-cuda-extension"),
    pytest.param(PLAIN_TORCH, None, id="no-kernel"),
    pytest.param("class ModelNew(:\n", None, id="does-not-parse"),
    pytest.param("x = 1\0\n", None, id="null-byte"),
    pytest.param(CPP_EXTENSION_MODULE, "cuda", id="cpp-extension-module"),
    pytest.param("from . import triton\n", None, id="relative-import-is-not-triton"),
    pytest.param((CORPUS / "ok_triton_relu.py").read_text(), "triton", id="ok-triton"),
    pytest.param((CORPUS / "ok_cuda_relu.py").read_text(), "cuda", id="ok-cuda"),
])
def test_detect_backend_where_the_old_rules_disagreed(source, expected):
    assert detect_backend(source) == expected


def test_a_source_that_names_no_backend_is_guarded_and_ranked_as_the_default():
    from leaderboard.schema import Metadata, Submission

    sub = Submission(metadata=Metadata(display_name="x"), kernels={})
    assert sub.backend_for(PLAIN_TORCH) == DEFAULT_BACKEND
    assert sub.backend_for(TRITON_IMPORT_NO_KERNEL) == "triton"
    assert _guard_cli_backend(PLAIN_TORCH) == DEFAULT_BACKEND
    assert _guard_cli_backend(TRITON_AND_EXTENSION) == "cuda"


def test_the_triton_claim_without_a_kernel_gets_the_triton_message():
    """e11 imports triton and launches nothing: ``guard --backend auto`` now checks it as triton (as the
    leaderboard always did), so the finding names the missing Triton kernel; it fails either way."""
    report = analyze_source(TRITON_IMPORT_NO_KERNEL, detect_backend(TRITON_IMPORT_NO_KERNEL) or DEFAULT_BACKEND)
    missing = [f for f in report.findings if f.rule == "no-custom-kernel"]
    assert not report.passed and len(missing) == 1 and "@triton.jit" in missing[0].message


def _guard_cli_backend(source: str) -> str:
    """The backend ``kernelbench guard --json FILE`` (auto detection) checked ``source`` as."""
    import contextlib
    import io
    import tempfile

    from kernelbench.cli.main import main

    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "cand.py"
        path.write_text(source)
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            main(["guard", "--json", str(path)])
    return json.loads(out.getvalue())[0]["backend"]


# --- a new backend touches one place ---------------------------------------------------------------

TOY_SOURCE = textwrap.dedent('''
    import torch
    import toy_kernels


    @toy_kernels.kernel
    def toy_scale(x):
        pass


    class ModelNew(torch.nn.Module):
        def forward(self, x):
            return toy_kernels.launch(toy_scale, x)
''')
TOY_NO_LAUNCH = TOY_SOURCE.replace("return toy_kernels.launch(toy_scale, x)", "return torch.relu(x)")


def _toy_conformity(ctx, sink, required, anchor):
    """A toy candidate conforms when ``ModelNew.forward`` reaches a ``toy_kernels.launch(...)`` call."""
    calls = [n for fn in ctx.reach.funcs for n in ast.walk(fn)
             if isinstance(n, ast.Call) and ctx.resolver.resolve(n.func) == "toy_kernels.launch"]
    if calls:
        sink.add("kernel-launch", "forward launches a toy kernel", calls[0].lineno)
    elif required:
        sink.add("no-custom-kernel", "a toy candidate must launch its kernel with toy_kernels.launch", anchor)


def _toy_kernel_names(source, tree):
    if tree is None:
        return set()
    return {n.name for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)
            and any(ast.unparse(d).endswith("toy_kernels.kernel") for d in n.decorator_list)}


TOY = BackendSpec(name="toy", display_name="Toy", summary="a backend that exists only in this test",
                  detection=Detection(modules=("toy_kernels",), precedence=5), conformity=_toy_conformity,
                  kernel_names=_toy_kernel_names, cpu_worker_env={"TOY_INTERPRET": "1"}, build_estimate_s=1.0)


def _parse(argv: list[str]) -> argparse.Namespace:
    from kernelbench.cli.main import build_parser

    return build_parser().parse_args(argv)


def test_a_registered_backend_is_picked_up_everywhere_without_other_edits(tmp_path, capsys):
    from kernelbench.evaluation.parent.workers import worker_env
    from kernelbench.runners.modal_cost import seconds_per_job

    kernel = tmp_path / "toy.py"
    kernel.write_text(TOY_SOURCE)
    assert detect_backend(TOY_SOURCE) is None
    with pytest.raises(UnknownBackendError):
        analyze_source(TOY_SOURCE, "toy")

    with backend_registered(TOY):
        assert backend_names() == ("cuda", "cute", "tilelang", "torch", "toy", "triton")
        # detection keys on the marker import
        assert detect_backend(TOY_SOURCE) == "toy"
        # the static guard runs the toy conformity check, and its generic rules (torch-compute) apply
        good = analyze_source(TOY_SOURCE, "toy")
        assert good.passed and "kernel-launch" in good.rules("info"), good.to_text()
        bad = analyze_source(TOY_NO_LAUNCH, "toy")
        assert {"no-custom-kernel", "torch-compute"} <= {f.rule for f in bad.findings} and not bad.passed
        # a candidate claiming another backend is not required to launch a toy kernel
        assert "no-custom-kernel" not in {f.rule for f in analyze_source(PLAIN_TORCH, "torch").findings}
        # the command line offers it, and `guard --backend auto` detects it
        assert _parse(["eval", "--level", "1", "--problem-id", "1", "--kernel", str(kernel),
                       "--backend", "toy"]).backend == "toy"
        assert _parse(["guard", "--backend", "toy", str(kernel)]).backend == "toy"
        assert _guard_cli_backend(TOY_SOURCE) == "toy"
        # settings accept it; its worker environment and kernel names reach the evaluator
        assert EvalSettings(backend="toy").backend == "toy"
        assert worker_env("candidate", "cpu", "toy", None)["TOY_INTERPRET"] == "1"
        assert "TOY_INTERPRET" not in worker_env("candidate", "cuda:0", "toy", None)
        assert "toy_scale" in own_kernel_names(TOY_SOURCE)
        from kernelbench.evaluation.guards.runtime import LaunchReport

        silent = LaunchReport([], ["at::relu"], 0.0, 1.0, [], None)
        assert [f.rule for f in launch_findings(silent, "toy")] == ["no-own-kernel"]
        assert seconds_per_job(EvalSettings(backend="toy", measure_timing=False)) < \
            seconds_per_job(EvalSettings(backend="cuda", measure_timing=False))

    # unregistered: gone from every list again
    assert "toy" not in backend_names() and detect_backend(TOY_SOURCE) is None
    with pytest.raises(SystemExit):
        _parse(["guard", "--backend", "toy", str(kernel)])
    assert "invalid choice: 'toy'" in capsys.readouterr().err
