"""The built-in problem suite: its contract, shapes, sizes and determinism, and its cost on a GPU.

CI checks are cheap on purpose: full-size problems run with the default device set to ``meta``
(shapes and byte counts without compute), and real CPU forwards run at shrunk sizes (each
problem's module-level size constants overridden after the file is executed). The full-size CPU
forwards are marked ``slow``; the timing check needs a GPU and is marked ``gpu``.
"""

from __future__ import annotations

import ast
import importlib.util
import os
import re
import statistics
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode

from kernelbench.problems import Problem, load_builtin
from kernelbench.problems.contract import check_problem_code

REPO = Path(__file__).resolve().parents[1]
BUILTIN_DIR = REPO / "kernelbench" / "problems" / "builtin"
DOCS = REPO / "docs" / "builtin-suite.md"


def _has_transformers() -> bool:
    try:
        return importlib.util.find_spec("transformers") is not None
    except (ImportError, ValueError):  # a None entry in sys.modules makes find_spec raise
        return False


HAS_TRANSFORMERS = _has_transformers()
NO_TRANSFORMERS = "level-4 problems need the 'transformers' package, which is not installed"
TRANSFORMERS_MESSAGE = "this problem needs the 'transformers' package: pip install 'kernelbench[transformers]'"

#: Problems whose forward is random by construction; every other forward must be deterministic.
RANDOM_PROBLEMS = {"level2/7_Gemm_Dropout_Softmax"}
#: Every tensor a problem creates (inputs, weights, outputs, intermediates) must fit in this.
MAX_TOTAL_BYTES = 16e9
#: H100 rates the size rule is stated in: fp32 on CUDA cores, HBM3 bandwidth.
H100_FP32_FLOPS = 50e12
H100_BYTES_PER_S = 3e12
MIN_REFERENCE_S = 1e-4

C = dict[str, Any]

# Output shape of each problem as a function of its size constants, so that the same
# expectation holds at full size (on meta) and at the shrunk sizes (on the CPU).
EXPECTED_SHAPES: dict[str, Callable[[C], tuple[int, ...]]] = {
    "level1/1_Square_matmul": lambda c: (c["N"], c["N"]),
    "level1/2_Rectangular_matmul": lambda c: (c["M"], c["N"]),
    "level1/3_Batched_matmul": lambda c: (c["BATCH"], c["M"], c["N"]),
    "level1/4_Matmul_transposed_A": lambda c: (c["M"], c["N"]),
    "level1/5_Conv2d_3x3": lambda c: (c["batch_size"], c["out_channels"], c["height"], c["width"]),
    "level1/6_Depthwise_conv2d": lambda c: (c["batch_size"], c["channels"], c["height"], c["width"]),
    "level1/7_ConvTranspose2d": lambda c: (c["batch_size"], c["out_channels"], 2 * c["height"], 2 * c["width"]),
    "level1/8_ReLU": lambda c: (c["batch_size"], c["dim"]),
    "level1/9_GELU": lambda c: (c["batch_size"], c["dim"]),
    "level1/10_Sigmoid": lambda c: (c["batch_size"], c["dim"]),
    "level1/11_Tanh": lambda c: (c["batch_size"], c["dim"]),
    "level1/12_Softmax": lambda c: (c["batch_size"], c["dim"]),
    "level1/13_LogSoftmax": lambda c: (c["batch_size"], c["dim"]),
    "level1/14_LayerNorm": lambda c: (c["batch_size"], c["hidden"]),
    "level1/15_RMSNorm": lambda c: (c["batch_size"], c["hidden"]),
    "level1/16_BatchNorm2d": lambda c: (c["batch_size"], c["channels"], c["height"], c["width"]),
    "level1/17_Sum_reduction": lambda c: (c["batch_size"], 1, c["dim2"]),
    "level1/18_Mean_reduction": lambda c: (c["batch_size"],),
    "level1/19_Max_reduction": lambda c: (c["batch_size"], c["dim2"]),
    "level1/20_Argmax": lambda c: (c["batch_size"],),
    "level1/21_MaxPool2d": lambda c: (c["batch_size"], c["channels"], c["height"] // 2, c["width"] // 2),
    "level1/22_AvgPool2d": lambda c: (c["batch_size"], c["channels"], c["height"], c["width"]),
    "level1/23_Cumsum": lambda c: (c["batch_size"], c["dim"]),
    "level1/24_CrossEntropyLoss": lambda c: (),
    "level1/25_Scaled_dot_product_attention": lambda c: (c["batch_size"], c["num_heads"], c["seq_len"], c["head_dim"]),
    "level1/26_ReLU_large": lambda c: (c["batch_size"], c["dim"]),
    "level1/27_Softmax_large": lambda c: (c["batch_size"], c["dim"]),
    "level1/28_Sum_reduction_large": lambda c: (c["batch_size"], 1, c["dim2"]),
    "level2/1_Gemm_Bias_ReLU": lambda c: (c["batch_size"], c["out_features"]),
    "level2/2_Conv2d_BatchNorm_ReLU": lambda c: (c["batch_size"], c["out_channels"], c["height"], c["width"]),
    "level2/3_Gemm_Scale_Sigmoid": lambda c: (c["batch_size"], c["out_features"]),
    "level2/4_Conv2d_GELU_GlobalAvgPool": lambda c: (c["batch_size"], c["out_channels"]),
    "level2/5_Gemm_LayerNorm_GELU": lambda c: (c["batch_size"], c["out_features"]),
    "level2/6_Conv2d_Add_Multiply_ReLU": lambda c: (c["batch_size"], c["out_channels"], c["height"], c["width"]),
    "level2/7_Gemm_Dropout_Softmax": lambda c: (c["batch_size"], c["out_features"]),
    "level2/8_Gemm_Swish_Scale": lambda c: (c["batch_size"], c["out_features"]),
    "level2/9_Conv3d_ReLU_Clamp": lambda c: (c["batch_size"], c["out_channels"], c["depth"], c["height"], c["width"]),
    "level2/10_Gemm_RMSNorm_SiLU": lambda c: (c["batch_size"], c["out_features"]),
    "level2/11_ConvTranspose2d_Bias_Tanh": lambda c: (c["batch_size"], c["out_channels"], 2 * c["height"], 2 * c["width"]),
    "level2/12_Gemm_ResidualAdd_LayerNorm": lambda c: (c["batch_size"], c["hidden"]),
    "level3/1_MLP": lambda c: (c["batch_size"], c["output_size"]),
    "level3/2_LeNet5": lambda c: (c["batch_size"], c["num_classes"]),
    "level3/3_ResNet_BasicBlock": lambda c: (c["batch_size"], c["out_channels"], c["height"] // c["stride"], c["width"] // c["stride"]),
    "level3/4_Transformer_block": lambda c: (c["batch_size"], c["seq_len"], c["d_model"]),
    "level3/5_LSTM": lambda c: (c["batch_size"], c["output_size"]),
    "level3/6_GRU": lambda c: (c["batch_size"], c["output_size"]),
    "level3/7_MobileNetV2_InvertedResidual": lambda c: (c["batch_size"], c["channels"], c["height"], c["width"]),
    "level4/1_GPT2_causal_lm": lambda c: (c["batch_size"], c["seq_len"], c["vocab_size"]),
    "level4/2_BERT_encoder": lambda c: (c["batch_size"], c["seq_len"], c["hidden_size"]),
    "level4/3_Llama_decoder": lambda c: (c["batch_size"], c["seq_len"], c["hidden_size"]),
}

# Size constants overridden for the cheap CPU runs. Every problem needs an entry, and every
# name must be one of the problem's module-level constants (checked), so a renamed constant fails.
SMALL_SIZES: dict[str, C] = {
    "level1/1_Square_matmul": {"N": 64},
    "level1/2_Rectangular_matmul": {"M": 48, "K": 80, "N": 32},
    "level1/3_Batched_matmul": {"BATCH": 3, "M": 16, "K": 24, "N": 20},
    "level1/4_Matmul_transposed_A": {"M": 24, "K": 40, "N": 32},
    "level1/5_Conv2d_3x3": {"batch_size": 2, "in_channels": 4, "out_channels": 8, "height": 10, "width": 12},
    "level1/6_Depthwise_conv2d": {"batch_size": 2, "channels": 4, "height": 10, "width": 12},
    "level1/7_ConvTranspose2d": {"batch_size": 2, "in_channels": 8, "out_channels": 4, "height": 6, "width": 7},
    "level1/8_ReLU": {"batch_size": 16, "dim": 64},
    "level1/9_GELU": {"batch_size": 16, "dim": 64},
    "level1/10_Sigmoid": {"batch_size": 16, "dim": 64},
    "level1/11_Tanh": {"batch_size": 16, "dim": 64},
    "level1/12_Softmax": {"batch_size": 16, "dim": 128},
    "level1/13_LogSoftmax": {"batch_size": 16, "dim": 128},
    "level1/14_LayerNorm": {"batch_size": 16, "hidden": 64},
    "level1/15_RMSNorm": {"batch_size": 16, "hidden": 64},
    "level1/16_BatchNorm2d": {"batch_size": 4, "channels": 8, "height": 8, "width": 8},
    "level1/17_Sum_reduction": {"batch_size": 4, "dim1": 32, "dim2": 16},
    "level1/18_Mean_reduction": {"batch_size": 16, "dim": 64},
    "level1/19_Max_reduction": {"batch_size": 4, "dim1": 32, "dim2": 16},
    "level1/20_Argmax": {"batch_size": 16, "dim": 64},
    "level1/21_MaxPool2d": {"batch_size": 2, "channels": 4, "height": 16, "width": 16},
    "level1/22_AvgPool2d": {"batch_size": 2, "channels": 4, "height": 16, "width": 16},
    "level1/23_Cumsum": {"batch_size": 8, "dim": 64},
    "level1/24_CrossEntropyLoss": {"batch_size": 32, "num_classes": 10},
    "level1/25_Scaled_dot_product_attention": {"batch_size": 2, "num_heads": 2, "seq_len": 16, "head_dim": 8},
    "level1/26_ReLU_large": {"batch_size": 16, "dim": 64},
    "level1/27_Softmax_large": {"batch_size": 16, "dim": 128},
    "level1/28_Sum_reduction_large": {"batch_size": 4, "dim1": 32, "dim2": 16},
    "level2/1_Gemm_Bias_ReLU": {"batch_size": 8, "in_features": 32, "out_features": 16},
    "level2/2_Conv2d_BatchNorm_ReLU": {"batch_size": 4, "in_channels": 3, "out_channels": 8, "height": 8, "width": 8},
    "level2/3_Gemm_Scale_Sigmoid": {"batch_size": 8, "in_features": 32, "out_features": 16},
    "level2/4_Conv2d_GELU_GlobalAvgPool": {"batch_size": 2, "in_channels": 3, "out_channels": 8, "height": 8, "width": 8},
    "level2/5_Gemm_LayerNorm_GELU": {"batch_size": 8, "in_features": 32, "out_features": 16},
    "level2/6_Conv2d_Add_Multiply_ReLU": {"batch_size": 2, "in_channels": 3, "out_channels": 8, "height": 8, "width": 8},
    "level2/7_Gemm_Dropout_Softmax": {"batch_size": 8, "in_features": 32, "out_features": 64},
    "level2/8_Gemm_Swish_Scale": {"batch_size": 8, "in_features": 32, "out_features": 16},
    "level2/9_Conv3d_ReLU_Clamp": {"batch_size": 2, "in_channels": 2, "out_channels": 4, "depth": 4, "height": 6, "width": 6},
    "level2/10_Gemm_RMSNorm_SiLU": {"batch_size": 8, "in_features": 32, "out_features": 16},
    "level2/11_ConvTranspose2d_Bias_Tanh": {"batch_size": 2, "in_channels": 4, "out_channels": 3, "height": 5, "width": 6},
    "level2/12_Gemm_ResidualAdd_LayerNorm": {"batch_size": 8, "hidden": 32},
    "level3/1_MLP": {"batch_size": 8, "input_size": 32, "layer_sizes": [24, 16], "output_size": 4},
    "level3/2_LeNet5": {"batch_size": 4},
    "level3/3_ResNet_BasicBlock": {"batch_size": 2, "in_channels": 4, "out_channels": 8, "height": 16, "width": 16},
    "level3/4_Transformer_block": {"batch_size": 2, "seq_len": 16, "d_model": 32, "num_heads": 4},
    "level3/5_LSTM": {"batch_size": 4, "seq_len": 8, "input_size": 16, "hidden_size": 32, "output_size": 8},
    "level3/6_GRU": {"batch_size": 4, "seq_len": 8, "input_size": 16, "hidden_size": 32, "output_size": 8},
    "level3/7_MobileNetV2_InvertedResidual": {"batch_size": 2, "channels": 8, "height": 12, "width": 12},
    "level4/1_GPT2_causal_lm": {"batch_size": 1, "seq_len": 16, "vocab_size": 128, "n_positions": 64,
                                "n_embd": 32, "n_layer": 2, "n_head": 4},
    "level4/2_BERT_encoder": {"batch_size": 1, "seq_len": 16, "vocab_size": 128, "hidden_size": 32,
                              "num_layers": 2, "num_heads": 4, "intermediate_size": 64},
    "level4/3_Llama_decoder": {"batch_size": 1, "seq_len": 16, "vocab_size": 128, "hidden_size": 32,
                               "intermediate_size": 64, "num_layers": 2, "num_heads": 4, "num_kv_heads": 2},
}

EXPECTED_NAMES = {level: sorted(k.split("/")[1] for k in EXPECTED_SHAPES if k.startswith(f"level{level}/"))
                  for level in (1, 2, 3, 4)}


def _tag(p: Problem) -> str:
    return f"level{p.level}/{p.name}"


SUITE = list(load_builtin())
PROBLEMS = {_tag(p): p for p in SUITE}


def _param(tag: str, *marks: pytest.MarkDecorator) -> Any:
    """One parameter per problem; level-4 ones skip, with a reason, when transformers is missing."""
    marks = list(marks)
    if tag.startswith("level4/"):
        marks.append(pytest.mark.skipif(not HAS_TRANSFORMERS, reason=NO_TRANSFORMERS))
    return pytest.param(tag, id=tag, marks=marks)


#: The source checks need no transformers; everything that runs a problem does.
SOURCE_PARAMS = [pytest.param(t, id=t) for t in PROBLEMS]
ALL_PARAMS = [_param(t) for t in PROBLEMS]
SLOW_PARAMS = [_param(t, pytest.mark.slow) for t in PROBLEMS]


# --- running a problem ------------------------------------------------------------------------

def _namespace(problem: Problem, overrides: C | None = None) -> C:
    """Execute the problem file as the evaluator would (as text, not as a module), then shrink it."""
    ns: C = {"__name__": f"builtin_problem_{problem.level}_{problem.problem_id}"}
    exec(compile(problem.code, f"<builtin {_tag(problem)}>", "exec"), ns)
    for name, value in (overrides or {}).items():
        assert name in ns, f"{_tag(problem)} has no size constant {name!r} to override"
        assert type(ns[name]) is type(value), f"{_tag(problem)}: {name} is {type(ns[name]).__name__}"
        ns[name] = value
    return ns


def _constants(ns: C) -> C:
    return {k: v for k, v in ns.items() if isinstance(v, (int, float, list)) and not k.startswith("__")}


def _build(ns: C, seed: int = 0) -> tuple[torch.nn.Module, list]:
    torch.manual_seed(seed)
    model = ns["Model"](*ns["get_init_inputs"]())
    inputs = ns["get_inputs"]()
    return model, inputs


def _forward(model: torch.nn.Module, inputs: list) -> torch.Tensor:
    with torch.no_grad():
        out = model(*inputs)
    assert type(out) is torch.Tensor, f"forward returned {type(out).__name__}, not a plain torch.Tensor"
    return out


def _check_output(tag: str, out: torch.Tensor, consts: C) -> None:
    assert tuple(out.shape) == EXPECTED_SHAPES[tag](consts), f"{tag}: output shape {tuple(out.shape)}"
    expected_dtype = torch.int64 if tag == "level1/20_Argmax" else torch.float32
    assert out.dtype == expected_dtype, f"{tag}: output dtype {out.dtype}"


class _Tally(TorchDispatchMode):
    """Adds up the bytes of every tensor an op creates (views excluded): an upper bound on the
    intermediates, since nothing is counted as freed."""

    def __init__(self) -> None:
        super().__init__()
        self.bytes = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        if not any(r.alias_info is not None for r in func._schema.returns):
            for t in out if isinstance(out, (tuple, list)) else (out,):
                if isinstance(t, torch.Tensor):
                    self.bytes += t.numel() * t.element_size()
        return out


def _nbytes(tensors) -> int:
    return sum(t.numel() * t.element_size() for t in tensors)


def _meta_run(tag: str) -> tuple[C, torch.nn.Module, list, torch.Tensor, int, int]:
    """Full-size model, inputs and output on the meta device: shapes and counts, no compute."""
    from torch.utils.flop_counter import FlopCounterMode

    ns = _namespace(PROBLEMS[tag])
    flops = FlopCounterMode(display=False)
    tally = _Tally()
    try:
        with torch.device("meta"):
            model, inputs = _build(ns)
            with flops, tally:
                out = _forward(model, inputs)
    except Exception as e:
        # transformers' own code is not meta-safe in every version (.item() on masks, autocast on
        # "meta"); that is no fault of the problem, whose full size the slow CPU test checks.
        if tag.startswith("level4/"):
            pytest.skip(f"{tag} does not run on the meta device with this transformers version "
                        f"({type(e).__name__}: {e}); its full size is checked by the slow CPU test")
        raise
    return ns, model, inputs, out, flops.get_total_flops(), tally.bytes


def _available_memory_bytes() -> int | None:
    try:
        text = Path("/proc/meminfo").read_text()
    except OSError:
        return None
    m = re.search(r"^MemAvailable:\s+(\d+) kB", text, re.M)
    return int(m.group(1)) * 1024 if m else None


# --- the suite as a whole -----------------------------------------------------------------------

def test_suite_has_the_expected_problems_per_level():
    suite = load_builtin()
    assert suite.count_by_level() == {1: 28, 2: 12, 3: 7, 4: 3}
    assert len(suite) >= 36
    for level in (1, 2, 3, 4):
        names = sorted(p.name for p in suite if p.level == level)
        assert names == EXPECTED_NAMES[level]
        assert suite.ids(level) == list(range(1, len(names) + 1)), f"level {level} ids are not 1..N"
    assert set(SMALL_SIZES) == set(EXPECTED_SHAPES), "every problem needs shrunk sizes for the CPU test"


def test_every_file_in_the_package_data_is_a_loaded_problem():
    files = sorted(str(f.relative_to(BUILTIN_DIR).with_suffix("")) for f in BUILTIN_DIR.glob("level*/*.py"))
    assert files == sorted(PROBLEMS), "a file under builtin/ is not loaded as a problem, or vice versa"
    stray = [f.name for f in BUILTIN_DIR.rglob("*")
             if f.is_file() and f.suffix != ".py" and "__pycache__" not in f.parts]
    assert not stray, f"non-problem files in the suite: {stray}"


def test_ids_and_names_match_the_file_names():
    for p in SUITE:
        path = BUILTIN_DIR / f"level{p.level}" / p.filename
        assert path.is_file(), path
        assert p.name.split("_", 1)[0] == str(p.problem_id)
        assert p.code == path.read_text(encoding="utf-8")
        assert p.source == "builtin"


def test_hashes_are_unique():
    hashes = {}
    for p in SUITE:
        assert p.hash not in hashes, f"{_tag(p)} has the same normalised code as {hashes.get(p.hash)}"
        hashes[p.hash] = _tag(p)


def test_requirements_are_transformers_for_level_4_only():
    for p in SUITE:
        assert p.requirements == (("transformers",) if p.level == 4 else ()), _tag(p)


# --- the format rules, checked on the source ------------------------------------------------------

def _function(tree: ast.Module, name: str) -> ast.FunctionDef:
    return next(n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == name)


def _call_name(node: ast.Call) -> str:
    return ast.unparse(node.func)


@pytest.mark.parametrize("tag", SOURCE_PARAMS)
def test_source_follows_the_format_rules(tag):
    p = PROBLEMS[tag]
    check_problem_code(p.code, tag)
    tree = ast.parse(p.code)
    assert "torch" in {a.name for n in tree.body if isinstance(n, ast.Import) for a in n.names}

    model = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "Model")
    doc = ast.get_docstring(model)
    assert doc and "\n" not in doc.strip(), f"{tag}: Model needs a one-line docstring"
    methods = {n.name: n for n in model.body if isinstance(n, ast.FunctionDef)}
    assert {"__init__", "forward"} <= set(methods)

    constants = [t.id for n in tree.body if isinstance(n, ast.Assign) for t in n.targets if isinstance(t, ast.Name)]
    assert constants, f"{tag}: sizes must be module-level constants"

    # The evaluator picks the device and the dtype: no device anywhere, dtype only for integers.
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            name = _call_name(node)
            assert not name.endswith((".cuda", ".to", ".half", ".bfloat16", ".double")), f"{tag}: calls {name}"
            keywords = {k.arg for k in node.keywords}
            assert "device" not in keywords, f"{tag}: {name} names a device"
            if "dtype" in keywords:
                assert name == "torch.randint", f"{tag}: {name} names a dtype"

    # Inputs come from plain torch.randn / torch.rand / torch.randint.
    creators = [_call_name(n) for n in ast.walk(_function(tree, "get_inputs"))
                if isinstance(n, ast.Call) and _call_name(n).startswith("torch.")]
    assert creators and set(creators) <= {"torch.randn", "torch.rand", "torch.randint"}, f"{tag}: {creators}"


def test_docs_list_every_problem():
    text = DOCS.read_text(encoding="utf-8")
    for p in SUITE:
        assert re.search(rf"\|\s*{p.level}\s*\|\s*{p.problem_id}\s*\|\s*`?{re.escape(p.name)}`?\s*\|", text), (
            f"{DOCS.name} has no table row for level {p.level} {p.name}"
        )


# --- full size, on the meta device ----------------------------------------------------------------

@pytest.mark.parametrize("tag", ALL_PARAMS)
def test_full_size_shape_memory_and_estimated_time_on_meta(tag):
    ns, model, inputs, out, flops, created = _meta_run(tag)
    _check_output(tag, out, _constants(ns))
    weights = _nbytes(list(model.parameters()) + list(model.buffers()))
    total = _nbytes(inputs) + weights + created
    assert total <= MAX_TOTAL_BYTES, f"{tag}: {total / 1e9:.1f} GB of tensors, over the 16 GB limit"
    # Roofline estimate on an H100 in fp32: the reference must take at least 0.1 ms.
    min_bytes = _nbytes(inputs) + weights + _nbytes([out])
    estimate_s = max(flops / H100_FP32_FLOPS, min_bytes / H100_BYTES_PER_S)
    assert estimate_s >= MIN_REFERENCE_S, f"{tag}: estimated {estimate_s * 1e3:.3f} ms on an H100"


def test_the_large_problems_are_at_kernelbench_scale():
    sizes = {}
    for tag in ("level1/26_ReLU_large", "level1/27_Softmax_large", "level1/28_Sum_reduction_large"):
        _, _, inputs, _, _, _ = _meta_run(tag)
        sizes[tag] = _nbytes(inputs) / 2**30
    assert 3.5 <= sizes["level1/26_ReLU_large"] <= 6
    assert 1.75 <= sizes["level1/27_Softmax_large"] <= 3
    assert 3.5 <= sizes["level1/28_Sum_reduction_large"] <= 6


# --- real CPU forwards at shrunk sizes ---------------------------------------------------------------

@pytest.mark.parametrize("tag", ALL_PARAMS)
def test_small_cpu_forward_is_finite_deterministic_and_input_dependent(tag):
    ns = _namespace(PROBLEMS[tag], SMALL_SIZES[tag])
    model, inputs = _build(ns, seed=0)
    assert model.training, "a problem's Model starts in training mode"
    originals = [t.clone() for t in inputs]
    out = _forward(model, inputs)
    _check_output(tag, out, _constants(ns))
    if out.is_floating_point():
        assert torch.isfinite(out).all(), f"{tag}: non-finite output"
    for before, after in zip(originals, inputs):
        assert torch.equal(before, after), f"{tag}: forward modified its input"

    # Same seed, same output; and the same model run again gives the same output unless the
    # problem is random by construction.
    model_b, inputs_b = _build(ns, seed=0)
    assert torch.equal(_forward(model_b, inputs_b), out), f"{tag}: not reproducible from the seed"
    again = _forward(model, inputs)
    if tag in RANDOM_PROBLEMS:
        assert not torch.equal(again, out), f"{tag} is listed as random but two forwards agree"
    else:
        assert torch.equal(again, out), f"{tag}: two forwards of one model differ"

    # Other inputs, other output; and no problem is solved by returning an input.
    _, inputs_c = _build(ns, seed=1)
    assert not torch.equal(_forward(model_b, inputs_c), out), f"{tag}: output ignores the inputs"
    for t in inputs:
        if t.shape == out.shape and t.dtype == out.dtype:
            assert not torch.allclose(t, out, atol=1e-2, rtol=1e-2), f"{tag}: the identity would pass"


def test_dropout_problem_drops_about_ten_percent_and_rows_sum_to_one():
    ns = _namespace(PROBLEMS["level2/7_Gemm_Dropout_Softmax"], {"batch_size": 64, "out_features": 256})
    model, (x,) = _build(ns)
    with torch.no_grad():
        dropped = (model.dropout(model.gemm(x)) == 0).float().mean().item()
    assert 0.07 < dropped < 0.13
    out = _forward(model, [x])
    torch.testing.assert_close(out.sum(dim=1), torch.ones(64))


def test_weights_that_a_solution_could_skip_are_not_identities():
    """Norm weights are random so that a kernel ignoring them fails the comparison."""
    for tag in ("level1/14_LayerNorm", "level1/15_RMSNorm", "level1/16_BatchNorm2d",
                "level2/2_Conv2d_BatchNorm_ReLU", "level2/5_Gemm_LayerNorm_GELU",
                "level2/10_Gemm_RMSNorm_SiLU", "level2/12_Gemm_ResidualAdd_LayerNorm"):
        ns = _namespace(PROBLEMS[tag], SMALL_SIZES[tag])
        model, _ = _build(ns)
        for name, param in model.named_parameters():
            if "weight" in name and param.dim() == 1:
                assert not torch.allclose(param, torch.ones_like(param)), f"{tag}: {name} is all ones"
            if "bias" in name and param.dim() == 1 and "gemm" not in name and "conv" not in name:
                assert not torch.allclose(param, torch.zeros_like(param)), f"{tag}: {name} is all zeros"


# --- level 4 without transformers -----------------------------------------------------------------

def test_level4_problems_say_clearly_that_transformers_is_missing(tmp_path):
    """Run each level-4 file with transformers made unimportable, in a fresh interpreter."""
    level4 = [p for p in SUITE if p.level == 4]
    assert len(level4) == 3
    script = textwrap.dedent(f"""
        import sys
        sys.modules["transformers"] = None  # any import of it now raises ImportError
        for path in {[str(BUILTIN_DIR / "level4" / p.filename) for p in level4]!r}:
            try:
                exec(compile(open(path).read(), path, "exec"), {{"__name__": "problem"}})
            except ImportError as e:
                print("ImportError:", e)
            else:
                print("imported without transformers:", path)
    """)
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120,
                            env={**os.environ, "PYTHONWARNINGS": "ignore"})
    assert result.returncode == 0, result.stderr
    lines = result.stdout.strip().splitlines()
    assert lines == [f"ImportError: {TRANSFORMERS_MESSAGE}"] * 3, result.stdout


# --- full size on the CPU (slow) -----------------------------------------------------------------------

@pytest.mark.parametrize("tag", SLOW_PARAMS)
def test_full_size_cpu_forward(tag):
    if not tag.startswith("level4/"):  # transformers' models do not all run on meta; they are small
        _, model, inputs, _, _, created = _meta_run(tag)
        needed = 1.25 * (_nbytes(inputs) + _nbytes(list(model.parameters())) + created)
        available = _available_memory_bytes()
        if available is not None and available < needed:
            pytest.skip(f"{tag} needs about {needed / 1e9:.1f} GB of free memory, {available / 1e9:.1f} GB available")
    ns = _namespace(PROBLEMS[tag])
    model, inputs = _build(ns)
    consts = _constants(ns)
    out = _forward(model, inputs)
    _check_output(tag, out, consts)
    if out.is_floating_point():
        assert torch.isfinite(out).all(), f"{tag}: non-finite output"


# --- the H100 timing rule (GPU) ---------------------------------------------------------------------------

def _cuda_median_ms(model: torch.nn.Module, inputs: list, warmup_s: float = 0.25, trials: int = 20) -> float:
    """Median of CUDA-event times of single forwards, after warming up for a while (clocks ramp)."""
    with torch.no_grad():
        started, calls = time.perf_counter(), 0
        while calls < 3 or time.perf_counter() - started < warmup_s:
            model(*inputs)
            torch.cuda.synchronize()
            calls += 1
        times = []
        for _ in range(trials):
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            model(*inputs)
            end.record()
            torch.cuda.synchronize()
            times.append(start.elapsed_time(end))
    return statistics.median(times)


@pytest.mark.gpu
def test_every_reference_takes_at_least_0_1_ms_on_the_gpu(capsys):
    """Eager fp32 forward, PyTorch defaults, after warm-up; also the peak memory of each problem."""
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA GPU")
    rows, failures = [], []
    with torch.device("cuda"):  # bring the clocks up before the first problem
        a = torch.randn(4096, 4096)
        started = time.perf_counter()
        while time.perf_counter() - started < 1.0:
            a @ a
            torch.cuda.synchronize()
        del a
    for tag, p in PROBLEMS.items():
        if p.level == 4 and not HAS_TRANSFORMERS:
            rows.append([tag, "skipped", "", NO_TRANSFORMERS])
            continue
        ns = _namespace(p)
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats()
        with torch.device("cuda"):
            model, inputs = _build(ns)
        median_ms = _cuda_median_ms(model, inputs)
        peak_gb = torch.cuda.max_memory_allocated() / 1e9
        verdict = []
        if median_ms < MIN_REFERENCE_S * 1e3:
            verdict.append("under 0.1 ms")
        if peak_gb > MAX_TOTAL_BYTES / 1e9:
            verdict.append("over 16 GB")
        if verdict:
            failures.append(f"{tag}: {', '.join(verdict)}")
        rows.append([tag, f"{median_ms:.3f}", f"{peak_gb:.2f}", ", ".join(verdict) or "ok"])
        del model, inputs
    try:
        from tabulate import tabulate

        table = tabulate(rows, headers=["problem", "median ms", "peak GB", "verdict"])
    except ImportError:
        table = "\n".join("  ".join(map(str, r)) for r in rows)
    with capsys.disabled():
        print(f"\nbuilt-in suite on {torch.cuda.get_device_name()} (torch {torch.__version__})\n{table}")
    assert not failures, "; ".join(failures)
