"""Measuring into a baseline file: order, resume, failures recorded, environment checks, deadline.

The per-problem measurement is the seam: these tests drive the writer with a deterministic
stand-in for ``measure_problem`` (real timing needs a GPU; see test_baselines_gpu.py), and one
slow test runs the real ``measure_problem`` on the CPU.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

import pytest
from kbtesting import BROKEN_INPUTS_PROBLEM, load_problems_from, problem_source

from kernelbench import TIMING_PROTOCOL_VERSION
from kernelbench.baselines import (
    BaselineEntry,
    BaselineFile,
    BaselineMeasureError,
    LocalMeasurer,
    baseline_settings,
    load_baseline,
    measure_into,
    measure_problem,
)
from kernelbench.errors import BaselineError
from kernelbench.problems.model import Problem, ProblemSet

ENV = {"device": "cuda:0", "gpu_name": "NVIDIA H100 80GB HBM3", "driver": "580.65", "cuda": "13.0",
       "torch": "2.11.0+cu130", "triton": "3.6.0", "timing_protocol": TIMING_PROTOCOL_VERSION}
SETTINGS = baseline_settings(timing_budget_s=0.1)
MODES = ["eager", "compile-default"]


def make_problems() -> ProblemSet:
    names = [(1, 1, "ReLU"), (1, 2, "Tanh"), (1, 10, "GELU"), (2, 1, "Gemm_ReLU")]
    return ProblemSet([Problem(level=lv, problem_id=pid, name=f"{pid}_{n}", code=f"# {n}\n", source="test")
                       for lv, pid, n in names], source="test")


class FakeMeasure:
    """Stands in for measure_problem: a time derived from the problem and mode, or a scripted failure."""

    def __init__(self, fail: dict[tuple[str, str], BaseException] | None = None, env: dict | None = None,
                 interrupt_after: int | None = None):
        self.fail = fail or {}
        self.env = env or ENV
        self.calls: list[tuple[str, str]] = []
        self.interrupt_after = interrupt_after

    def __call__(self, problem: Problem, modes: Sequence[str], settings) -> dict[str, BaselineEntry]:
        assert len(modes) == 1 and settings is SETTINGS
        mode = modes[0]
        if self.interrupt_after is not None and len(self.calls) >= self.interrupt_after:
            raise KeyboardInterrupt
        self.calls.append((problem.key, mode))
        err = self.fail.get((problem.key, mode))
        if err is not None:
            raise err
        ms = problem.level + problem.problem_id / 100 + (0.5 if mode != "eager" else 0.0)
        e = BaselineEntry(mean=ms, median=ms, std=0.0, min=ms, max=ms, num_trials=30,
                          hardware=self.env["gpu_name"], device="cuda:0", wall_s=0.25)
        e._environment = dict(self.env)
        return {mode: e}


def test_mode_by_mode_every_time_written_and_a_rerun_measures_nothing(tmp_path):
    path = tmp_path / "H100.json"
    problems = make_problems()
    fake = FakeMeasure()
    report = measure_into(BaselineFile.open(path, "H100"), problems, MODES, SETTINGS, fake, progress=False)
    # All of eager first: a run cut short still has whole modes.
    assert fake.calls[:4] == [("level_1_problem_1", "eager"), ("level_1_problem_2", "eager"),
                              ("level_1_problem_10", "eager"), ("level_2_problem_1", "eager")]
    assert len(fake.calls) == 8 and report.count("measured") == 8 and report.complete
    assert report.summary_rows() == [[1, "eager", 3, 0, 0, 0, "0.8"], [1, "compile-default", 3, 0, 0, 0, "0.8"],
                                     [2, "eager", 1, 0, 0, 0, "0.2"], [2, "compile-default", 1, 0, 0, 0, "0.2"]]
    eager, compiled = load_baseline(path), load_baseline(path, mode="compile-default")
    for p in problems:
        assert eager.require(p).headline_ms == pytest.approx(p.level + p.problem_id / 100)
        assert compiled.require(p).headline_ms == pytest.approx(p.level + p.problem_id / 100 + 0.5)
    assert json.loads(path.read_text())["environment"]["gpu_name"] == "NVIDIA H100 80GB HBM3"

    again = FakeMeasure()
    report2 = measure_into(BaselineFile.open(path, "H100"), problems, MODES, SETTINGS, again, progress=False)
    assert again.calls == [] and report2.count("reused") == 8 and report2.complete

    # Adding a mode measures only that mode.
    more = FakeMeasure()
    measure_into(BaselineFile.open(path, "H100"), problems, ["eager", "compile-cudagraphs"], SETTINGS, more,
                 progress=False)
    assert more.calls == [(p.key, "compile-cudagraphs") for p in problems]


def test_a_failing_problem_is_recorded_and_skipped_then_retried(tmp_path):
    path = tmp_path / "H100.json"
    problems = make_problems()
    fake = FakeMeasure(fail={
        ("level_1_problem_2", "compile-default"): BaselineMeasureError(
            "level_1_problem_2", {}, {"compile-default": "reference failed during compile-default setup: boom"}),
        ("level_2_problem_1", "eager"): RuntimeError("could not start a reference worker on cuda:0"),
    })
    report = measure_into(BaselineFile.open(path, "H100"), problems, MODES, SETTINGS, fake, progress=False)
    assert len(fake.calls) == 8  # the run went on past both failures
    assert [(o.filename, o.mode, o.error) for o in report.failures] == [
        ("1_Gemm_ReLU.py", "eager", "RuntimeError: could not start a reference worker on cuda:0"),
        ("2_Tanh.py", "compile-default", "reference failed during compile-default setup: boom"),
    ]
    assert not report.complete and report.count("measured") == 6
    raw = json.loads(path.read_text())
    assert raw["failures"] == {
        "level1": {"2_Tanh.py": {"compile-default": "reference failed during compile-default setup: boom"}},
        "level2": {"1_Gemm_ReLU.py": {"eager": "RuntimeError: could not start a reference worker on cuda:0"}},
    }
    assert "1_Gemm_ReLU.py" not in raw.get("level2", {})

    skip = FakeMeasure()
    r_skip = measure_into(BaselineFile.open(path, "H100"), problems, MODES, SETTINGS, skip, retry_failed=False,
                          progress=False)
    assert skip.calls == [] and r_skip.count("skipped") == 2 and r_skip.count("reused") == 6

    retry = FakeMeasure()
    r_retry = measure_into(BaselineFile.open(path, "H100"), problems, MODES, SETTINGS, retry, progress=False)
    assert sorted(retry.calls) == [("level_1_problem_2", "compile-default"), ("level_2_problem_1", "eager")]
    assert r_retry.complete and "failures" not in json.loads(path.read_text())


def test_the_modes_that_worked_come_back_inside_the_error_and_are_kept(tmp_path):
    """measure_problem's contract: every mode is tried; the error carries the times that were measured."""
    problems = make_problems().select(levels=[2])

    def measure(problem, modes, settings):
        entries = {m: FakeMeasure()(problem, [m], SETTINGS)[m] for m in modes}
        failures = {"compile-default": "Timeout: 5 s", "compile-cudagraphs": "no CUDA graphs here"}
        raise BaselineMeasureError(problem.key, {m: e for m, e in entries.items() if m not in failures},
                                   {m: failures[m] for m in ["compile-default", "compile-cudagraphs"]})

    f = BaselineFile.open(tmp_path / "H100.json", "H100")
    report = measure_into(f, problems, ["eager", "compile-default"], SETTINGS, measure, progress=False)
    assert [(o.mode, o.status) for o in report.outcomes] == [("eager", "measured"), ("compile-default", "failed")]
    assert report.failures[0].error == "Timeout: 5 s"
    assert json.loads(f.path.read_text())["failures"] == {"level2": {"1_Gemm_ReLU.py": {"compile-default":
                                                                                      "Timeout: 5 s"}}}


def test_a_killed_run_keeps_what_it_wrote_and_resumes(tmp_path):
    path = tmp_path / "H100.json"
    problems = make_problems()
    with pytest.raises(KeyboardInterrupt):
        measure_into(BaselineFile.open(path, "H100"), problems, MODES, SETTINGS, FakeMeasure(interrupt_after=3),
                     progress=False)
    kept = BaselineFile.open(path, "H100")
    assert kept.count() == 3
    rest = FakeMeasure()
    report = measure_into(kept, problems, MODES, SETTINGS, rest, progress=False)
    assert len(rest.calls) == 5 and report.count("reused") == 3 and report.complete


def test_times_from_another_gpu_are_refused_not_mixed(tmp_path):
    path = tmp_path / "H100.json"
    problems = make_problems()
    measure_into(BaselineFile.open(path, "H100"), problems.select(ids=[1]), ["eager"], SETTINGS, FakeMeasure(),
                 progress=False)
    # Opening for another GPU: refused before anything runs.
    with pytest.raises(BaselineError, match="holds H100 times; measuring H200"):
        BaselineFile.open(path, "H200")
    # A measurement that comes back from another GPU (a wrong --gpu-name, a substituted cloud GPU).
    h200 = FakeMeasure(env={**ENV, "gpu_name": "NVIDIA H200"})
    report = measure_into(BaselineFile.open(path, "H100"), problems, ["eager"], SETTINGS, h200, progress=False)
    assert report.count("measured") == 0 and report.count("reused") == 2
    assert all("measured on H200" in o.error for o in report.failures) and len(report.failures) == 2
    assert BaselineFile.open(path, "H100").count() == 2


def test_deadline_stops_starting_new_measurements(tmp_path):
    path = tmp_path / "H100.json"
    fake = FakeMeasure()
    report = measure_into(BaselineFile.open(path, "H100"), make_problems(), MODES, SETTINGS, fake, deadline_s=1e-9,
                          progress=False)
    assert fake.calls == [] and report.count("pending") == 8 and "8 measurement(s) left" in report.stopped
    assert not path.exists()


def test_unknown_modes_are_refused_before_any_measurement(tmp_path):
    fake = FakeMeasure()
    with pytest.raises(BaselineError, match="unknown baseline mode 'turbo'"):
        measure_into(BaselineFile.open(tmp_path / "x.json"), make_problems(), ["eager", "turbo"], SETTINGS, fake,
                     progress=False)
    assert fake.calls == []


def test_settings_validate_their_numbers():
    s = baseline_settings(0.5, min_trials=10, max_trials=10, compile_timeout_s=90, stage_timeout_s=30,
                          precision="bf16", device="cuda:1")
    assert (s.timing_budget_s, s.min_timing_trials, s.max_timing_trials, s.compile_timeout_s, s.stage_timeout_s,
            s.precision, s.device, s.backend) == (0.5, 10, 10, 90, 30, "bf16", "cuda:1", "torch")
    with pytest.raises(BaselineError, match="min_timing_trials <= max_timing_trials, got 50 and 10"):
        baseline_settings(1.0, min_trials=50, max_trials=10)
    with pytest.raises(BaselineError, match="timing budget must be positive"):
        baseline_settings(0)
    with pytest.raises(BaselineError, match="unknown precision 'fp8'"):
        baseline_settings(1.0, precision="fp8")


# ---------------------------------------------------------------- the real measurement, on the CPU
RELU = problem_source(shape="64, 32")
NEEDS_PACKAGE = problem_source(imports="import kb_package_that_is_not_installed\n")


@pytest.mark.slow
def test_measure_problem_times_the_reference_for_real_and_reports_a_broken_one(tmp_path):
    problems = load_problems_from(tmp_path, {"1_ReLU.py": RELU, "2_Broken.py": BROKEN_INPUTS_PROBLEM})
    settings = baseline_settings(timing_budget_s=0.1, min_trials=5, device="cpu")
    entries = measure_problem(problems.get(1, 1), ["eager"], settings)
    e = entries["eager"]
    assert e.device == "cpu" and e.hardware is None and e.num_trials >= 5  # no GPU: no hardware name
    assert 0 < e.min <= e.median <= e.max and e.median < 50  # a 64x32 ReLU is far below 50 ms
    assert e.setup_s > 0 and e.wall_s >= e.setup_s
    assert e.environment["timing_protocol"] == TIMING_PROTOCOL_VERSION and e.environment["torch"]

    with pytest.raises(BaselineMeasureError) as info:
        measure_problem(problems.get(1, 2), ["eager"], settings)
    assert info.value.entries == {}
    assert "ValueError" in info.value.failures["eager"] and "inputs cannot be made" in info.value.failures["eager"]


@pytest.mark.slow
def test_the_local_measurer_keeps_the_asked_number_of_workers_started_ahead(tmp_path):
    # Starting a worker takes longer than an eager measurement; the ones kept waiting are the speed-up.
    problems = load_problems_from(tmp_path, {"1_ReLU.py": RELU})
    settings = baseline_settings(timing_budget_s=0.05, min_trials=3, device="cpu")
    with LocalMeasurer("cpu", spares=3) as measure:
        entries = measure(problems.get(1, 1), ["eager"], settings)
        waiting = list(measure.session._spare_references)
        assert len(waiting) == 3
        workers = [sp.future.result(timeout=120) for sp in waiting]
        assert all(w.alive() for w in workers)
    assert entries["eager"].num_trials >= 3
    assert not any(w.alive() for w in workers)  # closed with the measurer


@pytest.mark.slow
def test_workers_for_compile_modes_import_the_compiler_while_they_wait(tmp_path):
    problems = load_problems_from(tmp_path, {"1_ReLU.py": RELU})
    settings = baseline_settings(timing_budget_s=0.05, min_trials=3, device="cpu")
    for preload, expected in ((True, ["torch._dynamo", "torch._inductor.compile_fx"]), (False, [])):
        with LocalMeasurer("cpu", spares=1, preload_compiler=preload) as measure:
            measure(problems.get(1, 1), ["eager"], settings)
            waiting = measure.session.take_reference(replace=False)
            assert waiting.preloaded == expected
            waiting.close()
            if preload:  # a worker that imported the compiler ahead still compiles and times the reference
                entry = measure(problems.get(1, 1), ["compile-default"], settings)["compile-default"]
                assert entry.num_trials >= 3 and entry.compile_s is not None and entry.compile_s > 0


def test_a_negative_number_of_workers_started_ahead_is_refused():
    with pytest.raises(BaselineError, match="must be 0 or more, got -1"):
        LocalMeasurer("cpu", spares=-1)


def test_a_problem_needing_a_missing_package_fails_without_starting_a_worker(tmp_path):
    problems = load_problems_from(tmp_path, {"3_Needs.py": NEEDS_PACKAGE})
    p = problems.get(1, 3)
    assert p.requirements == ("kb_package_that_is_not_installed",)
    with pytest.raises(BaselineMeasureError, match="needs kb_package_that_is_not_installed, which is not installed"):
        measure_problem(p, ["eager", "compile-default"], baseline_settings(device="cpu"))
