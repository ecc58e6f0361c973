"""The baseline files committed in baselines/ are complete, of the right problems, under today's protocol.

Scores are only as good as these files: a problem missing from one, a file left half-measured, a file
timed under an older protocol, or times of another version of a problem would silently change what
``kernelbench analyze`` and the leaderboard report. These tests read the real committed files:

- ``baselines/H100.json``, ``baselines/H200.json``: the 50 built-in problems, in every mode, with a second
  eager run;
- ``baselines/kernelbench/``: the official levels 1-3 of the pinned revision (250 problems, named and
  hashed in ``kernelbench/data/kernelbench_manifest.json``), in the modes :data:`OFFICIAL_FILES` says were
  measured. docs/baselines.md lists the modes still to measure; add each here as its file is committed.
"""

from __future__ import annotations

import json
import math
import os
from pathlib import Path

import pytest
from kbtesting import gpu_environment, problem_source

from kernelbench import TIMING_PROTOCOL_VERSION
from kernelbench.baselines import (
    BASELINE_MODES,
    EAGER,
    BaselineEntry,
    BaselineFile,
    compare_baselines,
    gpu_family,
    load_baseline,
    plan,
)
from kernelbench.cli.main import main
from kernelbench.problems import OFFICIAL_LEVELS, load_directory
from kernelbench.problems.identity import (
    KERNELBENCH,
    KERNELBENCH_REVISION,
    MANIFEST_ENV,
    official_manifest,
)
from kernelbench.problems.sources import load_builtin
from kernelbench.results import EnvironmentInfo, KernelResult, TimingStats
from kernelbench.runs import RunDirectory

REPO = Path(__file__).resolve().parents[1]
BASELINES = REPO / "baselines"
BUILTIN_DIR = BASELINES  # the built-in suite's files; the official set's are in their own folder
OFFICIAL_DIR = BASELINES / "kernelbench"
COMMITTED = ("H100", "H200")
COMPLETE, PARTIAL = "complete", "partial"
#: Official files committed -> (GPU, {mode: COMPLETE or PARTIAL}). A mode measured over several sessions may be
#: committed PARTIAL (a subset of the pinned problems, resumed later); a mode not listed must not be in the file.
#: Not yet measured (docs/baselines.md): H100 compile-default, compile-max-autotune, compile-cudagraphs; H200
#: eager and compile-default.
OFFICIAL_FILES = {
    "H100.json": ("H100", {"eager": COMPLETE, "compile-default": COMPLETE}),
    "H100.eager-repeat.json": ("H100", {"eager": COMPLETE}),
    "H200.json": ("H200", {"eager": COMPLETE, "compile-default": COMPLETE}),
}


@pytest.fixture(scope="module")
def builtin():
    return list(load_builtin())


# ---------------------------------------------------------------------------------------- built-in suite
@pytest.mark.parametrize("label", COMMITTED)
def test_committed_file_has_every_builtin_problem_in_every_mode(label, builtin):
    file = BaselineFile.open(BUILTIN_DIR / f"{label}.json", label)  # refuses another GPU or protocol
    todo, settled = plan(file, builtin, BASELINE_MODES, retry_failed=True)
    assert [f"{p.level}/{p.filename} {mode}" for p, mode in todo] == []
    assert len(settled) == len(builtin) * len(BASELINE_MODES)
    env = file.environment
    assert env["timing_protocol"] == TIMING_PROTOCOL_VERSION
    assert gpu_family(env["gpu_name"]) == label


@pytest.mark.parametrize("label", COMMITTED)
@pytest.mark.parametrize("mode", BASELINE_MODES)
def test_committed_times_are_positive_and_load_by_mode(label, mode, builtin):
    baseline = load_baseline(BUILTIN_DIR / f"{label}.json", mode)
    for p in builtin:
        entry = baseline.levels[p.level][p.filename]
        assert 0 < entry.headline_ms < 10_000, (p.level, p.filename, entry.headline_ms)


@pytest.mark.parametrize("label", COMMITTED)
def test_committed_eager_repeat_agrees_with_the_file_it_repeats(label, builtin):
    """The second, independent eager run: all problems, and the median problem within 2% of the first."""
    agreement = compare_baselines(load_baseline(BUILTIN_DIR / f"{label}.json"),
                                  load_baseline(BUILTIN_DIR / f"{label}.eager-repeat.json"))
    assert agreement.n == len(builtin) and agreement.only_in_one == ()
    assert 0.98 < agreement.median_ratio < 1.02


# ---------------------------------------------------------------------------------------- official set
def test_the_official_files_committed_are_the_ones_listed():
    assert sorted(p.name for p in OFFICIAL_DIR.glob("*.json")) == sorted(OFFICIAL_FILES)


@pytest.fixture(scope="module")
def pinned() -> dict[str, str]:
    """Names and hashes of the official levels 1-3 at the pinned revision (the shipped manifest, not a stand-in)."""
    saved = os.environ.pop(MANIFEST_ENV, None)
    try:
        manifest = official_manifest()
    finally:
        if saved is not None:
            os.environ[MANIFEST_ENV] = saved
    assert manifest.name == KERNELBENCH and manifest.revision == KERNELBENCH_REVISION
    hashes = dict(manifest.restricted(OFFICIAL_LEVELS).hashes)
    assert len(hashes) == 250
    return hashes


@pytest.mark.parametrize("name", sorted(OFFICIAL_FILES))
def test_official_file_has_every_pinned_problem_in_each_measured_mode_under_todays_protocol(name, pinned):
    label, modes = OFFICIAL_FILES[name]
    path = OFFICIAL_DIR / name
    BaselineFile.open(path, label)  # refuses another GPU, another protocol or another precision
    data = json.loads(path.read_text(encoding="utf-8"))
    recorded = data["problem_set"]
    assert recorded["name"] == KERNELBENCH and recorded["revision"] == KERNELBENCH_REVISION
    # The very code the pinned revision holds, problem by problem; all of it once any mode is complete.
    assert {ref: pinned.get(ref) for ref in recorded["hashes"]} == recorded["hashes"]
    if COMPLETE in modes.values():
        assert recorded["hashes"] == pinned
    env = data["environment"]
    assert env["timing_protocol"] == TIMING_PROTOCOL_VERSION and env["precision"] == "fp32"
    assert gpu_family(env["gpu_name"]) == label
    present = [EAGER, *(data.get("modes") or {})]
    assert sorted(present) == sorted(modes), "a mode in the file that OFFICIAL_FILES does not list, or the reverse"
    if all(state == COMPLETE for state in modes.values()):
        assert not data.get("failures"), data.get("failures")
    for mode, state in modes.items():
        baseline = load_baseline(path, mode)
        refs = set(baseline.refs())
        assert refs == set(pinned) if state == COMPLETE else refs < set(pinned), mode
        for lv, entries in baseline.levels.items():
            for filename, entry in entries.items():
                # Fields only our protocol writes: a median with its precision, trials, and the time it took.
                assert entry.median is not None and 0 < entry.median < 10_000, (lv, filename, mode)
                assert entry.rse_median is not None and entry.num_trials and entry.wall_s, (lv, filename, mode)
                assert gpu_family(entry.hardware) == label, (lv, filename, mode)


def test_official_eager_repeat_agrees_with_the_file_it_repeats():
    agreement = compare_baselines(load_baseline(OFFICIAL_DIR / "H100.json"),
                                  load_baseline(OFFICIAL_DIR / "H100.eager-repeat.json"))
    assert agreement.n == 250 and agreement.only_in_one == ()
    assert 0.99 < agreement.median_ratio < 1.01
    assert {lv: a.n for lv, a in agreement.by_level().items()} == {1: 100, 2: 100, 3: 50}


# ------------------------------------------------------- kernelbench analyze --gpu H100 on an official run
H100 = "NVIDIA H100 80GB HBM3"
#: Official level-1 names; the stand-in test gives them small problems of its own.
OFFICIAL_NAMES = ("19_ReLU", "21_Sigmoid", "22_Tanh")
CANDIDATE_MS = 0.05


def _official_run(root: Path, folder: Path, names: tuple[str, ...]) -> Path:
    """A level-1 run on the official problems in ``folder``: results on disk for ``names``, timed on an H100."""
    run = RunDirectory(root / "runs" / "official", level=1)
    run.path.mkdir(parents=True)
    run.write_info(level=1, source="directory", source_path=str(folder))
    for name in names:
        run.save_result(KernelResult(
            level=1, problem_id=int(name.split("_", 1)[0]), problem_name=name, backend="cuda", compiled=True,
            correct=True, runtime=TimingStats(samples_ms=[CANDIDATE_MS] * 3),
            ref_runtime=TimingStats(samples_ms=[CANDIDATE_MS * 2] * 3),
            environment=EnvironmentInfo.model_validate(gpu_environment(H100, driver="580.159.04"))))
    return run.path


def _geomean(baseline, names: tuple[str, ...]) -> float:
    """Geometric mean of the speedups against ``baseline``'s level-1 times (they differ problem by problem)."""
    speedups = [baseline.levels[1][f"{n}.py"].headline_ms / CANDIDATE_MS for n in names]
    assert len(set(speedups)) == len(names)
    return math.prod(speedups) ** (1 / len(speedups))


def _analyze(capsys, run_dir: Path, baselines_dir: Path, out: Path, mode: str = EAGER) -> tuple[str, dict]:
    rc = main(["analyze", "--run-dir", str(run_dir), "--gpu", "H100", "--baselines-dir", str(baselines_dir),
               "--mode", mode, "--json", str(out)])
    captured = capsys.readouterr()
    assert rc == 0, captured.err
    return captured.out, json.loads(out.read_text())


@pytest.mark.parametrize("mode", [EAGER, "compile-default"])
def test_analyze_gpu_scores_an_official_run_against_the_official_file_not_the_builtin_one(tmp_path, pin_official,
                                                                                        capsys, mode):
    """Runs in CI: three small problems carry official names, pinned as the official set by a stand-in
    manifest; the baselines folder holds the committed official times for those names (recorded against
    the stand-in's hashes, both modes) in kernelbench/H100.json, beside a copy of the committed built-in
    H100.json. Each mode scores against its own times, which differ from the other mode's."""
    folder = tmp_path / "KernelBench"
    (folder / "level1").mkdir(parents=True)
    for name, expr in zip(OFFICIAL_NAMES, ("torch.relu(x)", "torch.sigmoid(x)", "torch.tanh(x)")):
        (folder / "level1" / f"{name}.py").write_text(problem_source(expr))
    pin_official(folder, KERNELBENCH_REVISION)  # a stand-in for the official set, at its pinned revision

    committed = {m: load_baseline(OFFICIAL_DIR / "H100.json", mode=m) for m in (EAGER, "compile-default")}
    problems = load_directory(folder)
    bdir = tmp_path / "baselines"
    official = BaselineFile.open(bdir / "kernelbench" / "H100.json", H100)
    for m, times in committed.items():
        for p in problems:
            entry = BaselineEntry.model_validate(times.levels[1][p.filename].model_dump())
            entry._environment = gpu_environment(H100, driver="580.159.04")
            official.put(p, m, entry, precision="fp32")
    (bdir / "H100.json").write_text((BUILTIN_DIR / "H100.json").read_text())  # the built-in one, beside it

    run_dir = _official_run(tmp_path, folder, OFFICIAL_NAMES)
    stdout, scores = _analyze(capsys, run_dir, bdir, tmp_path / "scores.json", mode)
    assert f"baseline {bdir / 'kernelbench' / 'H100.json'} ({mode})" in stdout
    assert scores["baseline"] == str(bdir / "kernelbench" / "H100.json")
    assert scores["problem_set"]["name"] == KERNELBENCH
    expected = {m: _geomean(times, OFFICIAL_NAMES) for m, times in committed.items()}
    assert expected[EAGER] != pytest.approx(expected["compile-default"], rel=1e-6)
    assert scores["levels"]["1"]["geomean_speedup"] == pytest.approx(expected[mode], rel=1e-9)


def _official_checkout() -> Path | None:
    """A local copy of KernelBench's KernelBench/ folder at the pinned revision (never committed), if any."""
    for candidate in (os.environ.get("KB_OFFICIAL"), str(REPO / "kb_official" / "KernelBench")):
        if candidate and (Path(candidate) / "level1").is_dir():
            return Path(candidate)
    return None


@pytest.mark.skipif(_official_checkout() is None,
                    reason="needs KernelBench's problems at the pinned revision (KB_OFFICIAL or kb_official/KernelBench)")
@pytest.mark.parametrize("mode", [EAGER, "compile-default"])
def test_analyze_gpu_scores_an_official_run_against_the_committed_file_itself(tmp_path, monkeypatch, capsys, mode):
    """With the real official problems: the committed baselines folder, unchanged, scores the run."""
    monkeypatch.delenv(MANIFEST_ENV, raising=False)
    names = ("1_Square_matrix_multiplication_", "19_ReLU", "97_ScaledDotProductAttention")
    run_dir = _official_run(tmp_path, _official_checkout(), names)
    stdout, scores = _analyze(capsys, run_dir, BASELINES, tmp_path / "scores.json", mode)
    assert f"baseline {OFFICIAL_DIR / 'H100.json'} ({mode})" in stdout
    assert scores["problem_set"]["name"] == KERNELBENCH and scores["problem_set"]["revision"] == KERNELBENCH_REVISION
    committed = load_baseline(OFFICIAL_DIR / "H100.json", mode=mode)
    level = scores["levels"]["1"]
    assert level["n_problems"] == 100 and level["n_correct"] == len(names)
    assert level["geomean_speedup"] == pytest.approx(_geomean(committed, names), rel=1e-9)
