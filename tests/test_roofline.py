"""Roofline arithmetic on hand-computed problems, cost counting on the meta device, cache, CLI."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from dataclasses import replace
from pathlib import Path

import pytest
from kbtesting import repo_env, run_cli

torch = pytest.importorskip("torch")

from kernelbench.hardware import MeasuredRates, get_gpu_spec  # noqa: E402
from kernelbench.problems import Problem, load_builtin  # noqa: E402
from kernelbench.problems.contract import extra_requirements  # noqa: E402
from kernelbench.roofline import (  # noqa: E402
    COST_MODEL_VERSION,
    CostCache,
    CostUnavailableError,
    bound,
    check_speed_of_light,
    count_cost,
    fraction_of_sol,
    problem_cost,
    problem_roofline,
    roofline_bound,
    roofline_for,
)

# Datasheet figures only: the hand-computed cases below use them, whatever the shipped measured-rates
# file holds (the measured figures are tested on their own further down).
H100 = replace(get_gpu_spec("H100"), measured=None)
H100_FP32 = 67e12
H100_TF32 = 989e12 / 2
H100_BF16 = 1979e12 / 2
H100_BW = 3.35e12


@pytest.fixture(autouse=True)
def _private_cache(tmp_path, monkeypatch):
    """Every test gets its own on-disk cost cache, so nothing leaks between tests or into ~/.cache."""
    monkeypatch.setenv("KERNELBENCH_CACHE_DIR", str(tmp_path / "kb-cache"))


def make_problem(body: str, name: str = "test_problem", pid: int = 1, level: int = 1) -> Problem:
    code = "import torch\nimport torch.nn as nn\nimport torch.nn.functional as F\n\n" + textwrap.dedent(body)
    return Problem(level=level, problem_id=pid, name=f"{pid}_{name}", code=code, source="test",
                   requirements=extra_requirements(code))


MATMUL = """
N = 512
class Model(nn.Module):
    def forward(self, A, B):
        return torch.matmul(A, B)
def get_inputs():
    return [torch.randn(N, N), torch.randn(N, N)]
def get_init_inputs():
    return []
"""

RELU = """
class Model(nn.Module):
    def forward(self, x):
        return torch.relu(x)
def get_inputs():
    return [torch.randn(64, 1000)]
def get_init_inputs():
    return []
"""

SUM = """
class Model(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.dim = dim
    def forward(self, x):
        return torch.sum(x, dim=self.dim, keepdim=True)
def get_inputs():
    return [torch.randn(8, 300, 50)]
def get_init_inputs():
    return [1]
"""


# ---------------------------------------------------------------- hand-computed costs
def test_square_matmul_cost_and_bound():
    n = 512
    cost = problem_cost(make_problem(MATMUL), "fp32")
    assert cost.flops == 2 * n**3
    assert cost.conv_flops == 0 and cost.matmul_flops == 2 * n**3
    assert cost.input_bytes == 2 * n * n * 4 and cost.output_bytes == n * n * 4 and cost.param_bytes == 0
    assert cost.min_bytes == 3 * n * n * 4
    assert cost.method == "meta" and cost.note is None

    b = roofline_bound(cost, H100, "fp32")
    assert b.compute_ms == pytest.approx(2 * n**3 / H100_FP32 * 1e3)
    assert b.memory_ms == pytest.approx(3 * n * n * 4 / H100_BW * 1e3)
    assert b.bound_by == "compute" and b.bound_ms == b.compute_ms
    assert b.rates_source == "datasheet"
    # Opting into TF32 uses the tensor-core rate for fp32 matmuls.
    assert roofline_bound(cost, H100, "fp32", fp32_math="tf32").compute_ms == pytest.approx(2 * n**3 / H100_TF32 * 1e3)


@pytest.mark.parametrize("precision", ["fp16", "bf16"])
def test_half_precision_halves_bytes_and_uses_tensor_cores(precision):
    n = 512
    p = make_problem(MATMUL)
    half = problem_cost(p, precision)
    assert half.min_bytes * 2 == problem_cost(p, "fp32").min_bytes == 3 * n * n * 4
    assert half.flops == 2 * n**3
    b = roofline_bound(half, H100)
    assert b.precision == precision
    assert b.compute_ms == pytest.approx(2 * n**3 / H100_BF16 * 1e3)
    assert b.memory_ms == pytest.approx(3 * n * n * 2 / H100_BW * 1e3)


def test_elementwise_counts_no_flops_and_is_memory_bound():
    cost = problem_cost(make_problem(RELU), "fp32")
    numel = 64 * 1000
    assert cost.flops == 0
    assert cost.min_bytes == 2 * numel * 4
    info = bound(cost, H100, "fp32")
    assert info.bound_by == "memory"
    assert info.bound_ms == pytest.approx(2 * numel * 4 / H100_BW * 1e3)
    assert info.flops == 0 and info.min_bytes == 2 * numel * 4 and info.gpu == "H100"


def test_reduction_bytes_are_input_plus_output():
    cost = problem_cost(make_problem(SUM), "fp32")
    assert cost.flops == 0
    assert cost.input_bytes == 8 * 300 * 50 * 4
    assert cost.output_bytes == 8 * 1 * 50 * 4
    assert roofline_bound(cost, get_gpu_spec("A100-80GB")).memory_ms == pytest.approx(
        (8 * 300 * 50 + 8 * 50) * 4 / 2039e9 * 1e3)


def test_parameters_buffers_and_tensor_attributes_counted_once():
    p = make_problem("""
    B, IN, OUT = 32, 256, 128
    class Model(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(IN, OUT)
            self.register_buffer("scale", torch.ones(OUT))
            self.mask = torch.ones(OUT)
            self.alias = self.fc.weight          # same tensor again: not counted twice
        def forward(self, x):
            return self.fc(x) * self.scale * self.mask
    def get_inputs():
        return [torch.randn(B, IN)]
    def get_init_inputs():
        return []
    """)
    b, i, o = 32, 256, 128
    cost = problem_cost(p, "fp32")
    assert cost.flops == 2 * b * i * o
    assert cost.param_bytes == (i * o + o + o + o) * 4
    assert cost.input_bytes == b * i * 4 and cost.output_bytes == b * o * 4
    assert problem_cost(p, "bf16").param_bytes == (i * o + 3 * o) * 2


def test_conv_uses_tf32_by_default_in_fp32_as_pytorch_does():
    p = make_problem("""
    class Model(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = nn.Conv2d(16, 32, 3, bias=False)
        def forward(self, x):
            return self.conv(x)
    def get_inputs():
        return [torch.randn(4, 16, 34, 34)]
    def get_init_inputs():
        return []
    """)
    flops = 2 * 4 * 32 * 32 * 32 * 16 * 3 * 3
    cost = problem_cost(p, "fp32")
    assert cost.flops == flops and cost.conv_flops == flops and cost.matmul_flops == 0
    assert cost.param_bytes == 32 * 16 * 9 * 4
    assert roofline_bound(cost, H100).compute_ms == pytest.approx(flops / H100_TF32 * 1e3)
    assert roofline_bound(cost, H100, fp32_math="ieee").compute_ms == pytest.approx(flops / H100_FP32 * 1e3)


def test_attention_flops():
    p = make_problem("""
    class Model(nn.Module):
        def forward(self, q, k, v):
            return F.scaled_dot_product_attention(q, k, v)
    def get_inputs():
        return [torch.randn(2, 4, 128, 64) for _ in range(3)]
    def get_init_inputs():
        return []
    """)
    cost = problem_cost(p, "fp16")
    assert cost.flops == 4 * 2 * 4 * 128 * 128 * 64  # QK^T and PV
    assert cost.min_bytes == 4 * (2 * 4 * 128 * 64) * 2


def test_integer_tensors_keep_their_size_and_shared_inputs_count_once():
    p = make_problem("""
    B, C = 100, 10
    class Model(nn.Module):
        def forward(self, logits, targets, again):
            return F.cross_entropy(logits, targets) + again.sum()
    def get_inputs():
        x = torch.randn(B, C)
        return [x, torch.randint(0, C, (B,)), x]
    def get_init_inputs():
        return []
    """)
    cost = problem_cost(p, "fp16")
    assert cost.input_bytes == 100 * 10 * 2 + 100 * 8
    assert cost.output_bytes == 2


def test_nested_outputs_are_all_counted():
    p = make_problem("""
    class Model(nn.Module):
        def forward(self, x):
            return x * 2, {"a": x[:, :3] + 1, "b": [x.argmax(dim=1)]}
    def get_inputs():
        return [torch.randn(10, 20)]
    def get_init_inputs():
        return []
    """)
    cost = problem_cost(p, "fp32")
    assert cost.output_bytes == 10 * 20 * 4 + 10 * 3 * 4 + 10 * 8


def test_meta_device_allocates_nothing():
    """A 64 GiB input is counted without memory: the run happens on the meta device."""
    p = make_problem("""
    class Model(nn.Module):
        def forward(self, x):
            return torch.relu(x)
    def get_inputs():
        return [torch.randn(2**34)]
    def get_init_inputs():
        return []
    """)
    cost = problem_cost(p, "fp32")
    assert cost.method == "meta" and cost.min_bytes == 2 * 2**34 * 4


# ---------------------------------------------------------------- fallbacks and unavailability
MASKED = """
class Model(nn.Module):
    def forward(self, x):
        return x[x > 0].sum()
def get_inputs():
    return [torch.randn(1000)]
def get_init_inputs():
    return []
"""


def test_cpu_fallback_when_meta_fails_says_so():
    cost = problem_cost(make_problem(MASKED), "fp32")
    assert cost.method == "cpu"
    assert "meta device failed" in cost.note and "CPU" in cost.note
    assert cost.input_bytes == 1000 * 4 and cost.output_bytes == 4


def test_cpu_fallback_refused_for_large_problems():
    with pytest.raises(CostUnavailableError, match="would allocate"):
        count_cost(make_problem(MASKED), cpu_fallback_max_bytes=100)
    with pytest.raises(CostUnavailableError, match="meta device"):
        count_cost(make_problem(MASKED), allow_cpu_fallback=False)


def test_missing_package_is_unavailable_not_a_crash():
    p = make_problem("import kb_no_such_package_xyz\n" + RELU)
    assert p.requirements == ("kb_no_such_package_xyz",)
    with pytest.raises(CostUnavailableError, match="kb_no_such_package_xyz"):
        problem_cost(p)
    row = problem_roofline(p, H100)
    assert row.bound is None and "kb_no_such_package_xyz" in row.unavailable_reason
    assert row.to_dict()["status"] == "unavailable"


LEVEL4_STYLE = """
try:
    from transformers import GPT2Config
except ImportError as e:
    raise ImportError("this problem needs the 'transformers' package") from e
""" + RELU


def test_level4_without_transformers_is_unavailable(monkeypatch):
    monkeypatch.setitem(sys.modules, "transformers", None)  # as if not installed
    p = make_problem(LEVEL4_STYLE, level=4)
    with pytest.raises(CostUnavailableError, match="transformers"):
        problem_cost(p)
    # Even without the requirement declared, the ImportError the code raises is reported, not raised.
    bare = replace(p, requirements=())
    with pytest.raises(CostUnavailableError, match="needs the 'transformers' package"):
        problem_cost(bare)
    try:
        builtin4 = load_builtin([4])
    except Exception:
        return
    for prob in builtin4:
        row = problem_roofline(prob, H100)
        assert row.bound is None and "transformers" in row.unavailable_reason


def test_code_that_fails_everywhere_is_unavailable():
    p = make_problem("""
    class Model(nn.Module):
        def forward(self, x):
            raise RuntimeError("boom")
    def get_inputs():
        return [torch.randn(4)]
    def get_init_inputs():
        return []
    """)
    with pytest.raises(CostUnavailableError, match="neither on the meta device .* nor on the CPU .*boom"):
        problem_cost(p)


def test_problem_code_does_not_leak_state_or_output(capsys):
    p = make_problem("""
    print("hello from the problem")
    torch.set_default_dtype(torch.float64)
    torch.manual_seed(123)
    class Model(nn.Module):
        def forward(self, x):
            return x + 1
    def get_inputs():
        return [torch.randn(10)]
    def get_init_inputs():
        return []
    """)
    torch.manual_seed(0)
    expected = torch.rand(3)
    torch.manual_seed(0)
    cost = problem_cost(p, "fp32")
    assert torch.equal(torch.rand(3), expected)
    assert torch.get_default_dtype() == torch.float32
    assert "hello" not in capsys.readouterr().out
    assert cost.input_bytes == 10 * 4  # float64 in the code, counted at the precision's size


# ---------------------------------------------------------------- cache
COUNTED = """
with open({path!r}, "a") as _f:
    _f.write("x")
""" + RELU


def test_cache_avoids_recounting_across_precisions_and_processes(tmp_path):
    marker = tmp_path / "executions"
    p = make_problem(COUNTED.format(path=str(marker)))
    cache_file = tmp_path / "costs.json"
    cache = CostCache(cache_file)
    first = problem_cost(p, "fp32", cache=cache)
    assert problem_cost(p, "fp32", cache=cache) == first
    problem_cost(p, "bf16", cache=cache)
    assert marker.read_text() == "x"
    # A new cache object (another process) reads the file instead of executing the code.
    assert problem_cost(p, "fp32", cache=CostCache(cache_file)) == first
    assert marker.read_text() == "x"
    data = json.loads(cache_file.read_text())
    assert data["version"] == COST_MODEL_VERSION and p.hash in data["costs"]
    # An older cost model's file is ignored, and so is a damaged one.
    cache_file.write_text(json.dumps({"version": COST_MODEL_VERSION - 1, "costs": data["costs"]}))
    problem_cost(p, "fp32", cache=CostCache(cache_file))
    assert marker.read_text() == "xx"
    cache_file.write_text("{damaged")
    problem_cost(p, "fp32", cache=CostCache(cache_file))
    assert marker.read_text() == "xxx"
    assert json.loads(cache_file.read_text())["version"] == COST_MODEL_VERSION
    problem_cost(p, "fp32", cache=CostCache(cache_file), use_cache=False)
    assert marker.read_text() == "xxxx"


def test_default_cache_lives_under_kernelbench_cache_dir(tmp_path):
    problem_cost(make_problem(RELU))
    assert (tmp_path / "kb-cache" / "roofline_costs.json").is_file()


# ---------------------------------------------------------------- fraction, flags, evaluator entry point
def test_fraction_of_sol():
    assert fraction_of_sol(1.0, 4.0) == 0.25
    assert fraction_of_sol(2.0, 1.0) == 2.0
    assert fraction_of_sol(1.0, None) is None
    assert fraction_of_sol(1.0, 0.0) is None


def test_flag_only_below_the_bound():
    cost = problem_cost(make_problem(RELU))
    b = roofline_bound(cost, H100)
    assert b.flag_for(b.bound_ms * 1.5) is None
    assert b.flag_for(None) is None
    msg = b.flag_for(b.bound_ms / 2)
    assert msg and "faster than speed of light" in msg and "fewer bytes" in msg and "2.00x" in msg
    compute = roofline_bound(problem_cost(make_problem(MATMUL)), H100)
    msg = compute.flag_for((compute.compute_ms + compute.memory_ms) / 2)
    assert "cheaper algorithm" in msg and "TF32" in msg


def test_measured_rates_preferred_when_present_and_optional():
    measured = replace(H100, measured=MeasuredRates(source="test bench", memory_bandwidth_bytes_s=3.0e12,
                                                    fp32_flops=50e12))
    relu = problem_cost(make_problem(RELU))
    mm = problem_cost(make_problem(MATMUL))
    assert roofline_bound(relu, measured).memory_ms == pytest.approx(relu.min_bytes / 3.0e12 * 1e3)
    assert roofline_bound(relu, measured).rates_source == "measured"
    assert roofline_bound(relu, measured, prefer_measured=False).memory_ms == pytest.approx(
        relu.min_bytes / H100_BW * 1e3)
    assert roofline_bound(mm, measured).compute_ms == pytest.approx(mm.flops / 50e12 * 1e3)
    bf16 = roofline_bound(problem_cost(make_problem(MATMUL), "bf16"), measured)
    assert bf16.rates_source == "measured+datasheet"  # bandwidth measured, bf16 peak from the datasheet


def test_roofline_for_and_check_for_the_evaluator():
    from kernelbench.results import KernelResult

    p = make_problem(RELU)
    info = roofline_for(p, "NVIDIA H100 80GB HBM3", "fp32", runtime_ms=1.0)
    # By name, the shipped table: measured bandwidth where the file has one, for the fraction of SOL.
    expected = 2 * 64 * 1000 * 4 / get_gpu_spec("H100").bandwidth().value * 1e3
    assert info.bound_ms == pytest.approx(expected) and info.fraction_of_sol == pytest.approx(expected)
    result = KernelResult(level=1, problem_id=1, problem_name=p.name, backend="cuda", roofline=info)
    assert KernelResult.from_json(result.to_json()).roofline == info

    ok = check_speed_of_light(p, "H100", "fp32", runtime_ms=expected * 10)
    assert ok.flag is None and ok.info.fraction_of_sol == pytest.approx(0.1)
    fast = check_speed_of_light(p, "H100", "fp32", runtime_ms=expected / 3)
    assert fast.flag and fast.info.fraction_of_sol == pytest.approx(3.0)
    # The flag is judged against the datasheet, the hardware's hard limit, not a measured rate.
    datasheet_ms = 2 * 64 * 1000 * 4 / H100_BW * 1e3
    assert check_speed_of_light(p, "H100", "fp32", runtime_ms=datasheet_ms * 1.01).flag is None
    assert check_speed_of_light(p, "H100", "fp32", runtime_ms=datasheet_ms * 0.99).flag
    unknown = check_speed_of_light(p, "RTX 9090", "fp32", runtime_ms=1.0)
    assert unknown.info is None and "RTX 9090" in unknown.unavailable_reason
    assert roofline_for(p, "RTX 9090") is None
    assert roofline_for(make_problem("import kb_no_such_package_xyz\n" + RELU), "H100") is None


def test_bad_arguments_are_clear():
    cost = problem_cost(make_problem(RELU))
    with pytest.raises(ValueError, match="fp32 math"):
        roofline_bound(cost, H100, fp32_math="fast")
    with pytest.raises(ValueError, match="precision"):
        problem_cost(make_problem(RELU), "fp8")
    with pytest.raises(ValueError, match="computed for fp32"):
        roofline_bound(cost, H100, "bf16")


# ---------------------------------------------------------------- the built-in suite
def _builtin(level: int, name: str) -> Problem:
    try:
        problems = load_builtin([level])
        return problems.by_name(name, level=level)
    except Exception as e:
        pytest.skip(f"built-in problem {name} is not there yet ({e})")


def _meta_input_shapes(problem: Problem) -> list[tuple[int, ...]]:
    ns: dict = {"__name__": "shapes"}
    with torch.device("meta"):
        exec(problem.code, ns)
        return [tuple(t.shape) for t in ns["get_inputs"]()]


def test_builtin_square_matmul():
    p = _builtin(1, "1_Square_matmul")
    (n, k), (k2, m) = _meta_input_shapes(p)
    assert n == k == k2 == m
    cost = problem_cost(p, "fp32")
    assert cost.flops == 2 * n**3 and cost.min_bytes == 3 * n * n * 4
    assert roofline_bound(cost, H100).bound_by == "compute"


def test_builtin_relu():
    p = _builtin(1, "8_ReLU")
    (shape,) = _meta_input_shapes(p)
    numel = 1
    for d in shape:
        numel *= d
    cost = problem_cost(p, "bf16")
    assert cost.flops == 0 and cost.min_bytes == 2 * numel * 2
    assert roofline_bound(cost, H100).bound_by == "memory"


def test_builtin_sum_reduction():
    p = _builtin(1, "17_Sum_reduction")
    (shape,) = _meta_input_shapes(p)
    numel = 1
    for d in shape:
        numel *= d
    cost = problem_cost(p, "fp32")
    assert cost.flops == 0
    assert cost.min_bytes == numel * 4 + numel // shape[1] * 4  # sum over dim 1, keepdim


# ---------------------------------------------------------------- the CLI, end to end
@pytest.fixture
def problem_dir(tmp_path):
    root = tmp_path / "problems"
    (root / "level1").mkdir(parents=True)
    for pid, name, body in [(1, "Matmul", MATMUL), (2, "ReLU", RELU), (3, "Sum", SUM),
                            (4, "Needs", "import kb_no_such_package_xyz\n" + RELU)]:
        (root / "level1" / f"{pid}_{name}.py").write_text(make_problem(body).code)
    return root


def _cli(args: list[str], tmp_path: Path) -> subprocess.CompletedProcess:
    return run_cli("roofline", *args, env=repo_env({"KERNELBENCH_CACHE_DIR": str(tmp_path / "cli-cache")}), timeout=300)


def test_cli_json(problem_dir, tmp_path):
    r = _cli(["--level", "1", "--source", "directory", "--path", str(problem_dir), "--gpu", "h100-sxm",
              "--precision", "bf16", "--json", "--datasheet-only"], tmp_path)
    assert r.returncode == 0, r.stderr
    data = json.loads(r.stdout)
    assert data["gpu"] == "H100" and data["precision"] == "bf16" and data["level"] == 1
    rows = {row["problem_id"]: row for row in data["problems"]}
    assert rows[1]["flops"] == 2 * 512**3 and rows[1]["min_bytes"] == 3 * 512 * 512 * 2
    # At bf16 a 512 x 512 matmul is memory-bound on an H100 (the ridge point is ~295 FLOP/byte).
    assert rows[1]["compute_ms"] == pytest.approx(2 * 512**3 / H100_BF16 * 1e3)
    assert rows[1]["bound_ms"] == pytest.approx(3 * 512 * 512 * 2 / H100_BW * 1e3)
    assert rows[1]["bound_by"] == "memory"
    assert rows[2]["bound_by"] == "memory" and rows[2]["flops"] == 0
    assert rows[3]["min_bytes"] == (8 * 300 * 50 + 8 * 50) * 2
    assert rows[4]["status"] == "unavailable" and "kb_no_such_package_xyz" in rows[4]["reason"]
    assert data["summary"] == {"problems": 4, "compute_bound": 0, "memory_bound": 3, "unavailable": 1,
                               "with_baseline": 0, "mean_fraction_of_sol": None, "rates_source": "datasheet"}


def test_cli_table_with_baseline(problem_dir, tmp_path):
    baseline = tmp_path / "H100.json"
    baseline.write_text(json.dumps({
        "level1": {"1_Matmul.py": {"mean": 0.5, "median": 0.4, "hardware": "NVIDIA H100 80GB HBM3"},
                   "2_ReLU.py": {"mean": 0.01, "hardware": "NVIDIA H100 80GB HBM3"}},
        "environment": {"gpu_name": "NVIDIA H100 80GB HBM3"}}))
    r = _cli(["--level", "1", "--source", "directory", "--path", str(problem_dir), "--gpu", "H100",
              "--baseline", str(baseline), "--problem-id", "1-3", "--datasheet-only"], tmp_path)
    assert r.returncode == 0, r.stderr
    out = r.stdout
    for header in ("GFLOP", "MB moved", "bound (ms)", "bound by", "baseline (ms)", "fraction of SOL"):
        assert header in out
    mm = 2 * 512**3 / H100_FP32 * 1e3 / 0.4
    relu = 2 * 64000 * 4 / H100_BW * 1e3 / 0.01
    assert f"{mm:.1%}" in out and f"{relu:.1%}" in out
    last = out.strip().splitlines()[-1]
    assert "3 problems" in last and "1 compute-bound" in last and "2 memory-bound" in last
    assert f"{(mm + relu) / 2:.1%} of speed of light" in last and "2 problems with a baseline time" in last
    assert "warning" not in r.stderr


def _our_baseline(folder: Path, label: str, gpu_name: str, times: dict[str, float], precision: str = "fp32") -> Path:
    """A baseline as kernelbench writes it: timing protocol and precision in its environment."""
    folder.mkdir(exist_ok=True)
    path = folder / f"{label}.json"
    path.write_text(json.dumps({
        "level1": {name: {"mean": ms, "median": ms, "hardware": gpu_name} for name, ms in times.items()},
        "environment": {"gpu_name": gpu_name, "timing_protocol": "kb-timing-3", "precision": precision}}))
    return path


def test_cli_uses_the_committed_baseline_for_the_builtin_suite_in_its_math(tmp_path):
    """The built-in suite gets <baselines-dir>/<GPU>.json without --baseline, bounded in IEEE fp32 (how
    kernelbench timed it): a 3x3 convolution's bound then uses the FP32 rate, not TF32 tensor cores."""
    path = _our_baseline(tmp_path / "b", "H100", "NVIDIA H100 80GB HBM3",
                         {"1_Square_matmul.py": 3.0, "5_Conv2d_3x3.py": 2.0})
    args = ["--level", "1", "--problem-id", "1,5", "--gpu", "H100", "--datasheet-only", "--json",
            "--baselines-dir", str(tmp_path / "b")]
    r = _cli(args, tmp_path)
    assert r.returncode == 0, r.stderr
    data = json.loads(r.stdout)
    assert data["baseline"] == str(path) and data["baseline_mode"] == "eager" and data["fp32_math"] == "ieee"
    rows = {row["problem_id"]: row for row in data["problems"]}
    assert rows[1]["baseline_ms"] == 3.0 and rows[5]["baseline_ms"] == 2.0
    assert rows[1]["flops"] == 2 * 4096**3
    assert rows[1]["fraction_of_sol"] == pytest.approx(2 * 4096**3 / H100_FP32 * 1e3 / 3.0, rel=1e-6)
    conv_flops = rows[5]["conv_flops"]
    assert conv_flops > 0 and rows[5]["compute_ms"] == pytest.approx(conv_flops / H100_FP32 * 1e3)
    assert data["summary"]["with_baseline"] == 2

    off = json.loads(_cli([*args, "--no-baseline"], tmp_path).stdout)
    assert off["baseline"] is None and off["fp32_math"] == "default"
    assert {row["problem_id"]: row for row in off["problems"]}[5]["compute_ms"] == \
        pytest.approx(conv_flops / H100_TF32 * 1e3)

    r = _cli([*args, "--fp32-math", "tf32"], tmp_path)
    assert r.returncode == 0 and json.loads(r.stdout)["fp32_math"] == "tf32"
    assert "was timed in IEEE fp32" in r.stderr

    r = _cli([*args, "--precision", "bf16"], tmp_path)  # fp32 times are no measure of a bf16 bound
    assert r.returncode == 0 and json.loads(r.stdout)["baseline"] is None
    assert f"not using {path}: it holds fp32 times and the bound is for bf16" in r.stderr

    r = _cli([*args, "--baseline", str(path), "--no-baseline"], tmp_path)
    assert r.returncode == 2 and "contradict" in r.stderr


def test_cli_attaches_no_committed_baseline_to_other_sources(problem_dir, tmp_path):
    """Another source's 1_Matmul.py is not the built-in 1_Square_matmul.py, though the id would match."""
    _our_baseline(tmp_path / "b", "H100", "NVIDIA H100 80GB HBM3", {"1_Square_matmul.py": 3.0})
    r = _cli(["--level", "1", "--source", "directory", "--path", str(problem_dir), "--gpu", "H100", "--json",
              "--baselines-dir", str(tmp_path / "b")], tmp_path)
    assert r.returncode == 0, r.stderr
    data = json.loads(r.stdout)
    assert data["baseline"] is None and data["summary"]["with_baseline"] == 0


def test_cli_errors_and_gpu_list(problem_dir, tmp_path):
    r = _cli(["--level", "1", "--source", "directory", "--path", str(problem_dir), "--gpu", "H100 PCIe"], tmp_path)
    assert r.returncode == 2
    assert r.stderr.strip().count("\n") == 0 and "unknown GPU 'H100 PCIe'" in r.stderr and "B200" in r.stderr
    r = _cli(["--source", "directory", "--path", str(problem_dir)], tmp_path)
    assert r.returncode == 2 and "--level is required" in r.stderr
    r = _cli(["--list-gpus", "--json"], tmp_path)
    assert r.returncode == 0
    names = [g["name"] for g in json.loads(r.stdout)]
    assert names == ["H100", "H200", "A100-80GB", "L40S", "B200"]
    r = _cli(["--help"], tmp_path)
    assert r.returncode == 0 and "--precision" in r.stdout and "--baseline" in r.stdout


# ---------------------------------------------------------------- on a GPU: PyTorch never beats the bound
def _median_ms(fn, reps: int = 20) -> float:
    for _ in range(5):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(reps):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        torch.cuda.synchronize()
        times.append(start.elapsed_time(end))
    times.sort()
    return times[len(times) // 2]


GPU_CASES = [
    ("matmul fp32", "fp32", "N = 4096\n" + MATMUL.replace("N = 512\n", "")),
    ("matmul bf16", "bf16", "N = 8192\n" + MATMUL.replace("N = 512\n", "")),
    ("relu 1 GiB", "fp32", RELU.replace("torch.randn(64, 1000)", "torch.randn(16384, 16384)")),
    ("sum dim 1", "fp32", SUM.replace("torch.randn(8, 300, 50)", "torch.randn(128, 4096, 512)")),
]


@pytest.mark.gpu
@pytest.mark.parametrize("label, precision, body", GPU_CASES, ids=[c[0] for c in GPU_CASES])
def test_pytorch_eager_respects_the_datasheet_bound(label, precision, body):
    from kernelbench.hardware import current_gpu_spec

    if not torch.cuda.is_available():
        pytest.skip("no CUDA device")
    spec = current_gpu_spec()
    if spec is None:
        pytest.skip(f"{torch.cuda.get_device_name()} is not in the hardware table")
    if torch.backends.cuda.matmul.allow_tf32:
        pytest.skip("TF32 matmul is enabled in this process; the fp32 bound assumes PyTorch's default")
    problem = make_problem(body)
    cost = problem_cost(problem, precision)
    b = roofline_bound(cost, spec, precision, prefer_measured=False)
    dtype = {"fp32": torch.float32, "bf16": torch.bfloat16}[precision]
    ns: dict = {"__name__": "gpu_case"}
    with torch.device("cuda"):
        exec(problem.code, ns)
        model = ns["Model"](*ns["get_init_inputs"]()).to(dtype)
        inputs = [t.to(dtype) for t in ns["get_inputs"]()]
    with torch.no_grad():
        runtime = _median_ms(lambda: model(*inputs))
    fraction = fraction_of_sol(b.bound_ms, runtime)
    print(f"\n{spec.name} {label}: eager {runtime:.4f} ms, bound {b.bound_ms:.4f} ms ({b.bound_by}), "
          f"{fraction:.1%} of speed of light")
    assert b.flag_for(runtime) is None, f"PyTorch eager beat the bound: {b.flag_for(runtime)}"
    assert fraction > 0.2, "the bound is far looser than PyTorch's own time: a table figure is probably wrong"
