"""scripts/eval_solutions.py: usage errors, the own-kernel share it reports, and what makes a worked
solution a defect (any warning or error finding, not only failing ones: issue 23).

The evaluation itself runs on the GPU (``bash scripts/gpu_check.sh solutions``); the worked solutions'
CPU path is covered by tests/test_solutions_inprocess.py.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from kbtesting import load_script

from kernelbench.evaluation.guards.runtime import LaunchReport, launch_findings, output_provenance_findings
from kernelbench.evaluation.protocol import LaunchesReply
from kernelbench.results import KernelResult

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "scripts" / "eval_solutions.py"


def _run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True, cwd=ROOT,
                          timeout=120)


@pytest.mark.parametrize(("args", "message"), [
    (["--only", "one"], "--only expects level:id"),
    (["--only", "9:9"], "no worked solution matches"),
])
def test_bad_selection_is_a_usage_error(args, message):
    done = _run(*args)
    assert done.returncode == 2, done.stderr
    assert message in done.stderr


def test_help_lists_the_options():
    done = _run("--help")
    assert done.returncode == 0
    assert "--backend" in done.stdout and "--only" in done.stdout


def _result_with(report: LaunchReport) -> KernelResult:
    return KernelResult(level=1, problem_id=8, problem_name="8_ReLU", backend="triton",
                        guard_findings=launch_findings(report, "triton"))


def _script():
    return load_script("eval_solutions")


def test_own_share_comes_from_the_evaluators_launch_report():
    own_share = _script().own_share
    mixed = LaunchReport(["relu_kernel"], ["vectorized_elementwise_kernel"], 30.0, 10.0, [7], 7, [7])
    assert own_share(_result_with(mixed)) == pytest.approx(0.75)
    alone = LaunchReport(["relu_kernel"], [], 12.0, 0.0, [7], 7, [7])
    assert own_share(_result_with(alone)) == pytest.approx(1.0)
    none = LaunchReport([], ["vectorized_elementwise_kernel"], 0.0, 10.0, [7], 7, [])
    assert own_share(_result_with(none)) is None


def test_gpu_check_parts_cover_every_gpu_test_file():
    """The time-limited parts (tests-a..d, basetests) together must run the whole GPU suite."""
    import re

    root = Path(__file__).resolve().parents[1]
    script = (root / "scripts" / "gpu_check.sh").read_text()
    parts = ("tests-a", "tests-b", "tests-c", "tests-d", "basetests")
    covered: set[str] = set()
    for case in re.finditer(r"^    ([\w|-]+)\) (.*?);;", script, re.S | re.M):
        if any(p in case.group(1).split("|") for p in parts):
            covered.update(re.findall(r"tests/(test_\w+\.py)", case.group(2)))
    gpu_files = {p.name for p in (root / "tests").glob("test_*.py")
                 if re.search(r"pytest\.mark\.gpu|mark\.gpu", p.read_text())}
    assert gpu_files, "no GPU test files found"
    assert gpu_files <= covered, f"GPU test files in no gpu_check part: {sorted(gpu_files - covered)}"


def test_the_results_own_kernel_share_is_preferred_to_the_launch_reports_text():
    alone = LaunchReport(["relu_kernel"], [], 12.0, 0.0, [7], 7, [7])
    r = _result_with(alone).model_copy(update={"own_kernel_share": 0.25})
    assert _script().own_share(r) == pytest.approx(0.25)


def test_a_warning_finding_makes_a_worked_solution_a_defect():
    """Issue 23: the worked solutions must stay free of warning findings, so the script's check (and its
    exit status) counts a warning such as the decoy's ``library-output`` as a failure, not only errors."""
    script = _script()
    report = LaunchReport(["relu_kernel"], [], 12.0, 0.0, [7], 7, [7])
    clean = _result_with(report).model_copy(update={"correct": True})
    assert [f.severity for f in clean.guard_findings] == ["info"]  # the launch report itself is only info
    assert script.solution_ok(clean) and script.flagged_findings(clean) == []
    warned = clean.model_copy(update={"guard_findings": clean.guard_findings + output_provenance_findings(
        LaunchesReply(launches={}, unowned_outputs=[0], n_outputs=1, recorded=True), report)})
    assert not warned.failing_findings  # no error: the old check (errors only) let this pass
    assert not script.solution_ok(warned)
    assert [(f.rule, f.severity) for f in script.flagged_findings(warned)] == [("library-output", "warning")]
    assert not script.solution_ok(clean.model_copy(update={"correct": False}))
