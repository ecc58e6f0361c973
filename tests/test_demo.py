"""``kernelbench demo`` and the reduced CPU size (CPU_SIZE) of the problem contract, on the CPU.

The demo test runs the real command in a subprocess (real worker processes, real Triton interpreter)
and checks every verdict from its JSON, so a guard or correctness regression makes it fail; it runs with
the optional extras (LLM, Modal, datasets, transformers, server) unimportable, as after `pip install -e .`.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import pytest

from kernelbench.demo import CASES
from kernelbench.errors import BaselineError, ProblemFormatError
from kernelbench.problems import load_problems
from kernelbench.problems.contract import reduced_size
from kernelbench.results import KernelResult, reduced_size_results

RELU = """
import torch
import torch.nn as nn
batch_size = 4096
dim = 512
CPU_SIZE = {"batch_size": 8, "dim": 16}
class Model(nn.Module):
    def forward(self, x):
        return torch.relu(x)
def get_inputs():
    return [torch.randn(batch_size, dim)]
def get_init_inputs():
    return []
"""


#: The optional extras' top-level packages (pyproject.toml): ``pip install -e .`` plus torch must be enough
#: for the demo (issue 27), so the demo test runs with each of them made unimportable.
EXTRAS_PACKAGES = ("litellm", "modal", "datasets", "transformers", "fastapi", "uvicorn", "httpx")


def without_extras(tmp_path, env: dict) -> dict:
    """``env`` with a folder first on PYTHONPATH in which every optional extra's package fails to import.

    PYTHONPATH reaches the worker processes too (the sandbox binds its folders read-only), so an import
    of an extra anywhere in the demo's path, parent or worker, fails the demo."""
    blockers = tmp_path / "no-extras"
    for name in EXTRAS_PACKAGES:
        (blockers / name).mkdir(parents=True)
        (blockers / name / "__init__.py").write_text(
            f"raise ImportError('{name} belongs to an optional extra; the demo must run without it')\n")
    path = os.pathsep.join(p for p in (str(blockers), env.get("PYTHONPATH", "")) if p)
    return dict(env, PYTHONPATH=path)


def test_demo_runs_on_cpu_with_expected_verdicts(tmp_path):
    out = tmp_path / "demo.json"
    env = without_extras(tmp_path, dict(os.environ, CUDA_VISIBLE_DEVICES=""))
    started = time.monotonic()
    proc = subprocess.run([sys.executable, "-m", "kernelbench.cli.main", "demo", "--device", "cpu",
                           "--json", str(out)], capture_output=True, text=True, env=env, timeout=300)
    wall = time.monotonic() - started
    assert proc.returncode == 0, proc.stdout + proc.stderr
    results = [KernelResult.from_dict(d) for d in json.loads(out.read_text())]
    assert len(results) == len(CASES)
    by_label = dict(zip([c.label for c in CASES], results))
    for case, r in zip(CASES, results):
        assert (r.level, r.problem_id, r.backend) == (case.level, case.problem_id, case.backend)
        assert r.reduced_size, f"{case.label}: not marked as reduced size"
        assert r.runtime is None  # no timing on the CPU
    assert by_label["ReLU, Triton (worked solution)"].correct
    assert by_label["GELU, torch (rewritten in torch ops)"].correct
    wrong = by_label["ReLU, Triton, wrong"]
    assert not wrong.correct and wrong.correctness is not None and wrong.correctness.trials_passed == 0
    exploit = by_label["Matmul, Triton, exploit"]
    assert not exploit.correct and exploit.failing_findings
    # The table and the stage-by-stage progress lines are printed.
    assert "every verdict as expected" in proc.stdout
    assert "correct (reduced size)" in proc.stdout
    assert proc.stderr.count("as expected") == len(CASES)
    # Generous bound for a shared CI machine; scripts/bench_demo.py measures it properly.
    assert wall < 240


def test_reduced_size_is_read_and_applied_without_changing_identity():
    from kernelbench.problems.model import Problem

    assert reduced_size(RELU) == {"batch_size": 8, "dim": 16}
    p = Problem(level=1, problem_id=99, name="99_R", code=RELU)
    without = Problem(level=1, problem_id=99, name="99_R", code=RELU.replace('CPU_SIZE = {"batch_size": 8, "dim": 16}\n', ""))
    assert p.hash == without.hash  # declaring a CPU size keeps the problem's identity
    small = p.at_reduced_size()
    assert small.reduced_size == (("batch_size", 8), ("dim", 16))
    assert small.hash != p.hash
    ns: dict = {}
    exec(compile(small.code, "small", "exec"), ns)
    assert tuple(ns["get_inputs"]()[0].shape) == (8, 16)
    with pytest.raises(ValueError, match="no CPU_SIZE"):
        without.at_reduced_size()


@pytest.mark.parametrize("decl, msg", [
    ('CPU_SIZE = {"nope": 8}', "not a module-level int"),
    ('CPU_SIZE = {"dim": 0}', "positive int"),
    ('CPU_SIZE = {"dim": "8"}', "positive int"),
    ("CPU_SIZE = [8]", "non-empty dict"),
    ("CPU_SIZE = {'dim': f(8)}", "literal dict"),
])
def test_bad_reduced_size_declarations_are_refused(decl, msg):
    code = RELU.replace('CPU_SIZE = {"batch_size": 8, "dim": 16}', decl)
    with pytest.raises(ProblemFormatError, match=msg):
        reduced_size(code)


def test_builtin_cpu_sizes_are_valid_and_smaller():
    problems = load_problems("builtin", None, levels=[1])
    declared = [p for p in problems if reduced_size(p.code)]
    assert {p.problem_id for p in declared} >= {c.problem_id for c in CASES}
    for p in declared:
        small = p.at_reduced_size()
        assert small.reduced_size
        for name, value in small.reduced_size:
            full = next(int(line.split("=")[1]) for line in p.code.splitlines() if line.startswith(f"{name} ="))
            assert value < full, f"{p.name}: CPU_SIZE {name}={value} is not smaller than {full}"


def test_reduced_results_are_refused_by_scoring_paths(tmp_path):
    from kernelbench.baselines import measure_problem

    p = load_problems("builtin", None, levels=[1]).get(1, 8).at_reduced_size()
    with pytest.raises(BaselineError, match="reduced CPU size"):
        measure_problem(p, ["eager"])
    r = KernelResult(level=1, problem_id=8, problem_name="8_ReLU", backend="triton", correct=True,
                     reduced_size={"batch_size": 64})
    full = r.model_copy(update={"reduced_size": None})
    assert reduced_size_results([r, full]) == [r]
    assert KernelResult.from_json(r.to_json()).reduced_size == {"batch_size": 64}
    assert r.verdict() == "correct (reduced size)"

    from leaderboard.bundle import read_bundle
    from leaderboard.errors import AggregationError

    bundle = {"entry": "x", "gpu": "H100", "submission_sha256": "0" * 64, "problem_source": "builtin",
              "results": [json.loads(r.to_json())]}
    path = tmp_path / "b.json"
    path.write_text(json.dumps(bundle))
    with pytest.raises(AggregationError, match="reduced CPU size"):
        read_bundle(path)


def test_analyze_refuses_a_run_with_reduced_size_results(tmp_path):
    from kernelbench.runs import RunDirectory

    rd = RunDirectory(tmp_path / "run", level=1)
    rd.write_info(level=1, source="builtin")
    rd.save_result(KernelResult(level=1, problem_id=8, problem_name="8_ReLU", backend="triton", correct=True,
                                reduced_size={"batch_size": 64, "dim": 1024}))
    proc = subprocess.run([sys.executable, "-m", "kernelbench.cli.main", "analyze", "--run-dir",
                           str(tmp_path / "run")], capture_output=True, text=True, timeout=120)
    assert proc.returncode != 0
    assert "reduced CPU size" in proc.stderr and "level 1 problem 8" in proc.stderr


def test_eval_reduced_size_marks_the_verdict_and_refuses_undeclared(tmp_path):
    env = dict(os.environ, CUDA_VISIBLE_DEVICES="")
    kernel = "kernelbench/solutions/triton/level1/8_ReLU.py"
    out = tmp_path / "r.json"
    proc = subprocess.run([sys.executable, "-m", "kernelbench.cli.main", "eval", "--level", "1", "--problem-id", "8",
                           "--backend", "triton", "--kernel", kernel, "--reduced-size", "--correctness-trials", "2",
                           "--json", str(out)], capture_output=True, text=True, env=env, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("CORRECT (reduced size)")
    assert "REDUCED (batch_size=64, dim=1024)" in proc.stdout
    assert "at reduced size" in proc.stderr  # the start line, before any result
    assert "reference setup done" in proc.stderr and "correctness done" in proc.stderr  # stage by stage
    assert KernelResult.from_json(out.read_text()).reduced_size == {"batch_size": 64, "dim": 1024}
    bad = subprocess.run([sys.executable, "-m", "kernelbench.cli.main", "eval", "--level", "1", "--problem-id", "5",
                          "--backend", "triton", "--kernel", kernel, "--reduced-size"],
                         capture_output=True, text=True, env=env, timeout=120)
    assert bad.returncode != 0 and "declares no CPU_SIZE" in bad.stderr


def test_cpu_size_warning_estimates_large_problems_only():
    from kernelbench.cli.eval_cmd import cpu_size_warning, input_elements

    problems = load_problems("builtin", None, levels=[1])
    relu = problems.get(1, 8)
    assert input_elements(relu) == 8192 * 16384  # sized on the meta device, no memory used
    warning = cpu_size_warning(relu)
    assert warning and "134M input elements" in warning and "--reduced-size" in warning and "Ctrl-C" in warning
    assert cpu_size_warning(relu.at_reduced_size()) is None


def test_the_extras_blocker_reaches_the_worker_processes(tmp_path):
    """The demo test's blocker must bite where candidates run, or it would prove nothing about workers."""
    gelu = (tmp_path / "gelu_modal.py")
    gelu.write_text("import modal  # an extra\n" + CASES[1].source_path.read_text())
    env = without_extras(tmp_path, dict(os.environ, CUDA_VISIBLE_DEVICES=""))
    out = tmp_path / "r.json"
    proc = subprocess.run([sys.executable, "-m", "kernelbench.cli.main", "eval", "--level", "1", "--problem-id", "9",
                           "--backend", "torch", "--kernel", str(gelu), "--reduced-size", "--correctness-trials", "1",
                           "--json", str(out)], capture_output=True, text=True, env=env, timeout=300)
    assert proc.returncode == 0, proc.stderr
    r = KernelResult.from_json(out.read_text())
    assert not r.correct and r.error is not None and r.error.stage.value == "load"
    assert "optional extra" in r.error.message


def test_the_demo_table_shows_each_speedup_with_its_interval_and_flags():
    """On a GPU the demo's table gives the speedup's own 95% interval (issue 23), not the candidate time's."""
    import random

    from kernelbench.cli.demo import speed_cell
    from kernelbench.results import TimingStats

    rng = random.Random(27)
    ref, cand = [], []
    for _ in range(6):  # interleaved rounds of 5 calls a side, the candidate twice as fast
        level = 1.0 + 0.01 * rng.gauss(0, 1)
        ref += [2.0 * level * rng.lognormvariate(0, 0.002) for _ in range(5)]
        cand += [1.0 * level * rng.lognormvariate(0, 0.002) for _ in range(5)]
    timed = KernelResult(level=1, problem_id=8, problem_name="8_ReLU", backend="triton", compiled=True, correct=True,
                         runtime=TimingStats(samples_ms=cand, block_calls=5),
                         ref_runtime=TimingStats(samples_ms=ref, block_calls=5), host_share=1.5)
    iv = timed.speedup_ci95
    assert iv is not None and iv.lo < iv.hi
    cell = speed_cell(timed)
    assert cell.startswith(f"{timed.speedup:.2f}x (95% CI {iv.lo:.2f}-{iv.hi:.2f})")
    assert f"cand. {timed.runtime.median_ms:.3f} ms" in cell and cell.endswith("; host-bound")
    untimed = timed.model_copy(update={"runtime": None, "ref_runtime": None, "host_share": None})
    assert speed_cell(untimed) == "-"
