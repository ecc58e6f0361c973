"""Problem-set identity: KernelBench's hash, the pinned manifest, and no score that mixes two sets.

A small official layout (``KernelBench/level1/<id>_<Name>.py``) is written by these tests from
problems of their own; a manifest made from it stands in for the pinned official one through
``KERNELBENCH_MANIFEST``, as the real one would for the real dataset.
"""

from __future__ import annotations

import hashlib
import json
import math
from pathlib import Path

import pytest
from kbtesting import load_script

from kernelbench import __version__
from kernelbench.baselines import BaselineEntry, BaselineFile, load_baseline
from kernelbench.problems import load_builtin, load_directory
from kernelbench.problems.identity import (
    MANIFEST_ENV,
    ProblemSetMismatchError,
    identify,
    kernelbench_code_hash,
    official_manifest,
)
from kernelbench.results import KernelResult, TimingStats
from kernelbench.runs import result_to_entry

ROOT = Path(__file__).resolve().parents[1]

PROBLEM = '''"""{doc}"""
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return {expr}  # the operation


def get_inputs():
    return [torch.randn({size})]


def get_init_inputs():
    return []
'''
#: id -> (name, expression): five level-1 problems written for these tests.
TEST_PROBLEMS = {1: ("ReLU_test", "torch.relu(x)"), 2: ("Tanh_test", "torch.tanh(x)"),
                 3: ("Sigmoid_test", "torch.sigmoid(x)"), 4: ("Abs_test", "torch.abs(x)"),
                 5: ("Neg_test", "-x")}


def write_layout(root: Path, size: int = 16, doc: str = "test problem") -> Path:
    """``root/KernelBench/level1/<id>_<Name>.py``: KernelBench's own layout."""
    level1 = root / "KernelBench" / "level1"
    level1.mkdir(parents=True, exist_ok=True)
    for pid, (name, expr) in TEST_PROBLEMS.items():
        (level1 / f"{pid}_{name}.py").write_text(PROBLEM.format(doc=doc, expr=expr, size=size))
    return root / "KernelBench"


@pytest.fixture
def official(tmp_path, pin_official):
    """The test layout, pinned as the official set through a manifest made from it."""
    folder = write_layout(tmp_path / "checkout")
    pin_official(folder, "test-rev-1")
    return folder


# ------------------------------------------------------------------------------------- hashing
def test_hash_is_kernelbench_formula_md5_without_docstrings_comments_and_whitespace():
    code = 'import torch\n"""a docstring"""\nB = 1  # batch\n\'\'\'more\ntext\'\'\'\nx = "s"\n'
    assert kernelbench_code_hash(code) == hashlib.md5(b'importtorchB=1x="s"').hexdigest()
    # Re-documenting or re-formatting keeps the hash; changing a number does not.
    assert kernelbench_code_hash(code.replace("a docstring", "other words").replace("B = 1", "B=1")) == \
        kernelbench_code_hash(code)
    assert kernelbench_code_hash(code.replace("B = 1", "B = 64")) != kernelbench_code_hash(code)


def test_a_problems_hash_is_kernelbenchs_so_files_of_either_project_can_be_checked(tmp_path):
    """One hash per problem: ``Problem.hash`` is KernelBench's get_code_hash, recorded everywhere."""
    from kernelbench.problems.model import Problem, legacy_code_hash

    code = PROBLEM.format(doc="a problem", expr="torch.relu(x)", size=16)
    p = Problem(level=1, problem_id=1, name="1_ReLU_test", code=code, source="test")
    assert p.hash == kernelbench_code_hash(code)
    assert identify(load_directory(write_layout(tmp_path))).hashes["level1/1_ReLU_test.py"] == p.hash
    # A CPU_SIZE declaration (built-in problems only) is not part of what the problem computes.
    sized = Problem(level=1, problem_id=1, name="1_ReLU_test", code=code + "\nCPU_SIZE = {'N': 4}\n", source="test")
    assert sized.hash == p.hash
    # Results recorded before (SHA-256 of the tokens) are still recognised as this problem's, and only its.
    assert p.matches_hash(p.hash) and p.matches_hash(legacy_code_hash(code))
    other = code.replace("randn(16)", "randn(32)")
    assert not p.matches_hash(kernelbench_code_hash(other)) and not p.matches_hash(legacy_code_hash(other))


def test_a_result_recorded_for_an_earlier_version_of_a_problem_is_evaluated_again(tmp_path):
    """``leaderboard evaluate`` resumes, but never reuses a verdict on a problem that changed since."""
    from fixtures.leaderboard import factory as F

    from kernelbench.evaluation.settings import EvalSettings
    from kernelbench.problems.model import legacy_code_hash
    from kernelbench.runs import RunDirectory
    from leaderboard.convert import submission_to_runs
    from leaderboard.evaluate import _pending, build_jobs
    from leaderboard.schema import load_submission

    problems = F.problems()
    keys = {f"level_1_problem_{i}_sample_0": F.kernel("triton_relu") for i in (1, 2, 3, 4)}
    sub = load_submission(F.write_submission(tmp_path / "s.json", F.submission_dict("S", keys)))
    jobs = {j.key: j for j in build_jobs(sub, problems, EvalSettings())}
    (lr,) = submission_to_runs(sub, tmp_path / "runs", "s", ranked_only=True)
    rd = RunDirectory(lr.path, level=1)
    p1, p2, p3 = (problems.get(1, i) for i in (1, 2, 3))
    rd.save_result(F.result(1, 1, p1.name).model_copy(update={"problem_hash": p1.hash}))        # current
    rd.save_result(F.result(1, 2, p2.name).model_copy(update={"problem_hash": legacy_code_hash(p2.code)}))  # older form
    rd.save_result(F.result(1, 3, p3.name).model_copy(update={"problem_hash": kernelbench_code_hash("x = 1")}))  # stale
    pending, reused = _pending(lr, jobs)
    assert reused == 2 and sorted(j.problem.problem_id for j in pending) == [3, 4]


def test_aggregate_flags_only_results_of_another_version_of_the_problem(tmp_path):
    from fixtures.leaderboard import factory as F

    from kernelbench.problems.model import legacy_code_hash
    from leaderboard.aggregate import aggregate

    problems, cfg = lb_setup(tmp_path, None)
    bundle_path = tmp_path / "data" / "evaluations" / "alpha__H100.json"
    bundle = json.loads(bundle_path.read_text())
    relu = F.problems().get(1, 1)
    for recorded, flagged in ((relu.hash, False), (legacy_code_hash(relu.code), False),
                              (legacy_code_hash(relu.code + "\nX = 2\n"), True)):
        bundle["results"][0]["problem_hash"] = recorded
        bundle_path.write_text(json.dumps(bundle))
        aggregate(problems, cfg)
        entry = json.loads((tmp_path / "data" / "index.json").read_text())["entries"][0]
        assert (entry["audit"]["status"] == "flagged") == flagged, recorded
        assert ("problem(s) changed since evaluation: level_1_problem_1" in entry["audit"]["reasons"]) == flagged
    problem_file = json.loads((tmp_path / "data" / "problems" / "level1_1.json").read_text())
    assert problem_file["hash"] == kernelbench_code_hash(relu.code)  # the site's hash is KernelBench's


def test_shipped_manifest_pins_the_official_levels_with_names_and_hashes_only(monkeypatch):
    monkeypatch.delenv(MANIFEST_ENV, raising=False)
    m = official_manifest()
    assert m.name == "kernelbench" and len(m.revision) == 40
    counts = {lv: sum(1 for k in m.hashes if k.startswith(f"level{lv}/")) for lv in (1, 2, 3, 4)}
    assert counts == {1: 100, 2: 100, 3: 50, 4: 20}
    assert all(len(h) == 32 and int(h, 16) >= 0 for h in m.hashes.values())
    assert "level1/1_Square_matrix_multiplication_.py" in m.hashes


# ------------------------------------------------------------------------------------ identity
def test_builtin_is_builtin_at_the_package_version():
    ident = identify(load_builtin(levels=[1]))
    assert ident.name == "builtin" and ident.revision == __version__
    assert all(k.startswith("level1/") for k in ident.hashes) and len(ident.hashes) == len(load_builtin(levels=[1]))


def test_a_checkout_is_the_official_set_only_when_every_hash_matches(official, tmp_path):
    ident = identify(load_directory(official))
    assert (ident.name, ident.revision) == ("kernelbench", "test-rev-1")
    # Documentation changes keep the identity (KernelBench's hash drops docstrings).
    redoc = write_layout(tmp_path / "redoc", doc="reworded")
    assert identify(load_directory(redoc)).name == "kernelbench"
    # A different input size is a different problem: named, not silently official.
    changed = write_layout(tmp_path / "changed", size=32)
    with pytest.raises(ProblemSetMismatchError, match=r"does not hash the same as kernelbench@test-rev-1: "
                                                      r"level1/1_ReLU_test.py, level1/2_Tanh_test.py"):
        identify(load_directory(changed))


def test_problems_outside_the_manifest_are_a_custom_set(official, tmp_path):
    other = tmp_path / "other" / "level1"
    other.mkdir(parents=True)
    (other / "1_Other.py").write_text(PROBLEM.format(doc="x", expr="x * 2", size=8))
    assert identify(load_directory(other.parent)).name == "custom"


# ------------------------------------------------------------- a KernelBench run, as KernelBench scores it
BASELINE_MEAN = {1: 2.0, 2: 1.0, 3: 4.0, 4: 0.5, 5: 3.0}


def kb_entry(sample_id: int, correct: bool, runtime: float) -> dict:
    return {"sample_id": sample_id, "compiled": True, "correctness": correct, "metadata": {},
            "runtime": runtime, "runtime_stats": {}}


def write_kb_run(cwd: Path) -> None:
    """What KernelBench's eval_from_generations.py leaves: eval_results.json and kernels, no run.json."""
    run = cwd / "runs" / "kbrun"
    run.mkdir(parents=True)
    results = {
        "1": [kb_entry(0, True, 1.0)],                          # 2.0 / 1.0  = 2.0x
        "2": [kb_entry(0, True, 2.0)],                          # 1.0 / 2.0  = 0.5x
        "3": [kb_entry(0, False, -1.0), kb_entry(1, True, 1.0)],  # sample 0 wrong; sample 1 does not count
        "4": [kb_entry(0, True, 0.4)],                          # 0.5 / 0.4  = 1.25x
        # 5: no result at all -> incorrect
    }
    (run / "eval_results.json").write_text(json.dumps(results))
    for pid in results:
        (run / f"level_1_problem_{pid}_sample_0_kernel.py").write_text("# kernel\n")
    timing = cwd / "results" / "timing" / "H100_Modal"
    timing.mkdir(parents=True)
    names = {pid: f"{pid}_{name}.py" for pid, (name, _) in TEST_PROBLEMS.items()}
    (timing / "baseline_time_torch.json").write_text(json.dumps({"level1": {
        names[pid]: {"mean": m, "std": 0.01, "min": m, "max": m, "num_trials": 100, "hardware": "NVIDIA H100",
                     "device": "cuda:0"} for pid, m in BASELINE_MEAN.items()}}))


def test_kernelbench_run_dir_scores_as_kernelbench_script_does(official, tmp_path, monkeypatch):
    cwd = tmp_path / "kb"
    cwd.mkdir()
    write_layout(cwd)  # run from a KernelBench checkout: ./KernelBench/ tells the set
    write_kb_run(cwd)
    monkeypatch.chdir(cwd)
    rc = load_script("benchmark_eval_analysis").main(
        ["run_name=kbrun", "level=1", "hardware=H100_Modal", "baseline=baseline_time_torch"])
    assert rc == 0
    out = json.loads((cwd / "runs" / "kbrun" / "analysis_results.json").read_text())
    kb = out["kernelbench_compatible"]
    # KernelBench's formulas by hand: n = 5 problems with a baseline time; correct speedups 2.0, 0.5, 1.25.
    assert kb["n_aligned"] == 5 and kb["n_correct"] == 3
    assert kb["fast_p"] == {"fast_0": 3 / 5, "fast_0.5": 2 / 5, "fast_0.8": 2 / 5, "fast_1": 2 / 5,
                            "fast_1.5": 1 / 5, "fast_2": 0.0}
    assert kb["geomean_speedup_correct"] == pytest.approx((2.0 * 0.5 * 1.25) ** (1 / 3), rel=1e-12)
    assert out["problem_set"]["name"] == "kernelbench" and out["problem_set"]["revision"] == "test-rev-1"
    assert set(out["problem_set"]["hashes"]) == {f"level1/{p}_{n}.py" for p, (n, _) in TEST_PROBLEMS.items()}
    # Our own score agrees here (full set = aligned set; KernelBench baselines carry only the mean).
    assert out["levels"]["1"]["fast_p"]["fast_1"] == pytest.approx(2 / 5)


def test_nothing_tells_the_set_so_the_script_asks(official, tmp_path, monkeypatch, capsys):
    cwd = tmp_path / "bare"
    cwd.mkdir()
    write_kb_run(cwd)
    (cwd / "results" / "timing" / "H100_Modal" / "baseline_time_torch.json").unlink()
    monkeypatch.chdir(cwd)
    rc = load_script("benchmark_eval_analysis").main(["run_name=kbrun", "level=1"])
    err = capsys.readouterr().err
    assert rc == 2 and "cannot tell which problem set run runs/kbrun belongs to" in err and "--source" in err
    assert not (cwd / "runs" / "kbrun" / "analysis_results.json").exists()


def test_a_baseline_naming_official_problems_without_them_here_says_where_to_get_them(tmp_path, monkeypatch,
                                                                                      capsys):
    monkeypatch.delenv(MANIFEST_ENV, raising=False)
    cwd = tmp_path / "nokb"
    run = cwd / "runs" / "r"
    run.mkdir(parents=True)
    (run / "eval_results.json").write_text(json.dumps({"1": [kb_entry(0, True, 1.0)]}))
    base = cwd / "kb_baseline.json"
    base.write_text(json.dumps({"level1": {"1_Square_matrix_multiplication_.py": {"mean": 1.0}}}))
    monkeypatch.chdir(cwd)
    rc = load_script("benchmark_eval_analysis").main(["run_name=r", "level=1", f"baseline_file={base}"])
    err = capsys.readouterr().err
    assert rc == 2 and "official KernelBench problems" in err and "run from a KernelBench checkout" in err


# ------------------------------------------------------------------------------------ bad input
def test_baseline_of_another_set_is_refused_and_nothing_is_written(official, tmp_path, monkeypatch, capsys):
    cwd = tmp_path / "kb"
    cwd.mkdir()
    write_layout(cwd)
    write_kb_run(cwd)
    builtin_names = {p.filename: {"mean": 1.0} for p in load_builtin(levels=[1])}
    other = cwd / "builtin_baseline.json"
    other.write_text(json.dumps({"level1": builtin_names}))
    monkeypatch.chdir(cwd)
    rc = load_script("benchmark_eval_analysis").main(["run_name=kbrun", "level=1", f"baseline_file={other}"])
    err = capsys.readouterr().err
    first = sorted(f"level1/{n}" for n in builtin_names)[0]
    assert rc == 2 and "names problems that are not in kernelbench@test-rev-1" in err and first in err
    assert not (cwd / "runs" / "kbrun" / "analysis_results.json").exists()


def test_baseline_recording_other_hashes_is_refused(official, tmp_path, monkeypatch, capsys):
    """A baseline measured on a changed copy of the same names: same file names, other problems."""
    cwd = tmp_path / "kb"
    cwd.mkdir()
    write_layout(cwd)
    write_kb_run(cwd)
    changed = load_directory(write_layout(tmp_path / "changed", size=32))
    path = cwd / "ours.json"
    f = BaselineFile(path, {})
    for p in changed:
        f.put(p, "eager", BaselineEntry(mean=1.0, median=1.0), save=False)
    f.save()
    assert load_baseline(path).problem_set.name == "custom"
    monkeypatch.chdir(cwd)
    rc = load_script("benchmark_eval_analysis").main(["run_name=kbrun", "level=1", f"baseline_file={path}"])
    err = capsys.readouterr().err
    assert rc == 2 and "was made from problem set custom@" in err and "not kernelbench@test-rev-1" in err
    assert not (cwd / "runs" / "kbrun" / "analysis_results.json").exists()


def test_run_whose_kernels_name_problems_of_another_set_is_refused(official, tmp_path, monkeypatch, capsys):
    cwd = tmp_path / "kb"
    run = cwd / "runs" / "mixed"
    run.mkdir(parents=True)
    write_layout(cwd)
    # Our own results name their problem: these were made on the built-in suite's level 1.
    builtin = {p.problem_id: p for p in load_builtin(levels=[1])}
    entries = {}
    for pid in (1, 4):
        r = KernelResult(level=1, problem_id=pid, problem_name=builtin[pid].name, backend="cuda", compiled=True,
                         correct=True, runtime=TimingStats(samples_ms=[1.0]))
        entries[str(pid)] = [result_to_entry(r)]
    (run / "eval_results.json").write_text(json.dumps(entries))
    monkeypatch.chdir(cwd)
    rc = load_script("benchmark_eval_analysis").main(["run_name=mixed", "level=1", "dataset_src=local"])
    err = capsys.readouterr().err
    assert rc == 2 and "was made on another problem set" in err
    assert f"problem 1 is {builtin[1].name} in the run but 1_ReLU_test" in err
    assert not (run / "analysis_results.json").exists()
    # --force scores it anyway (with a warning), for whoever knows better.
    assert load_script("benchmark_eval_analysis").main(
        ["run_name=mixed", "level=1", "dataset_src=local", "force=true"]) == 0
    assert "scoring anyway" in capsys.readouterr().err


def test_run_json_recording_another_set_is_refused(official, tmp_path, monkeypatch, capsys):
    cwd = tmp_path / "kb"
    write_kb_run(cwd)
    write_layout(cwd)
    run = cwd / "runs" / "kbrun"
    builtin = identify(load_builtin(levels=[1]))
    (run / "run.json").write_text(json.dumps({"level": 1, "source": "directory", "source_path": "KernelBench",
                                              "problem_set": builtin.to_dict()}))
    monkeypatch.chdir(cwd)
    rc = load_script("benchmark_eval_analysis").main(["run_name=kbrun", "level=1"])
    err = capsys.readouterr().err
    assert rc == 2 and f"was made from problem set builtin@{__version__}, not kernelbench@test-rev-1" in err


def test_kernelbench_keys_get_their_meaning_or_a_reason(tmp_path, capsys):
    m = load_script("benchmark_eval_analysis")
    args = m._kv.parse_kv(["run_name=r", "level=1", "eval_results_dir=/elsewhere/runs"], m.KEYS)
    argv = m.build_argv(args)
    assert argv[argv.index("--run-dir") + 1] == str(Path("/elsewhere/runs/r"))
    with pytest.raises(m._kv.KvError, match="problem_ids= is not supported: scores are over the whole level"):
        m.build_argv(m._kv.parse_kv(["run_name=r", "level=1", "problem_ids=[1,2]"], m.KEYS))


def test_geomean_with_an_untimed_correct_kernel_is_nan_like_numpy():
    from kernelbench.baselines import Baseline
    from kernelbench.problems.model import Problem, ProblemSet
    from kernelbench.scoring import kernelbench_figures

    p = Problem(level=1, problem_id=1, name="1_A", code="x = 1\n", source="test")
    b = Baseline({1: {"1_A.py": BaselineEntry(mean=1.0)}})
    r = KernelResult(level=1, problem_id=1, problem_name="1_A", backend="cuda", compiled=True, correct=True)
    fig = kernelbench_figures(ProblemSet([p]), [r], b)
    assert math.isnan(fig.geomean_speedup_correct) and fig.fast_p[0.0] == 0.0


# ------------------------------------------------------------------- KernelBench's other keys
def parse(script: str, argv: list[str]):
    m = load_script(script)
    return m, m.build_argv(m._kv.parse_kv(argv, m.KEYS))


def test_problem_ids_is_a_list_of_ids_never_a_range():
    _, argv = parse("eval_from_generations", ["run_name=r", "level=1", "dataset_src=builtin", "problem_ids=[3,7]"])
    assert argv[argv.index("--problem-ids") + 1] == "3,7"
    _, argv = parse("generate_samples", ["run_name=r", "level=1", "dataset_src=builtin", "model_name=m",
                                         "problem_ids=[71,86,95]"])
    assert argv[argv.index("--problem-ids") + 1] == "71,86,95"
    m = load_script("eval_from_generations")
    with pytest.raises(m._kv.KvError, match="subset= or problem_ids=, not both"):
        m.build_argv(m._kv.parse_kv(["run_name=r", "level=1", "dataset_src=builtin", "subset=(1,3)",
                                     "problem_ids=[2]"], m.KEYS))


def test_timing_method_and_check_kernel_mean_what_happens_or_are_refused():
    _, argv = parse("eval_from_generations", ["run_name=r", "level=1", "dataset_src=builtin",
                                              "timing_method=cuda_event", "check_kernel=true"])
    assert "evaluate-run" in argv
    m = load_script("eval_from_generations")
    base = ["run_name=r", "level=1", "dataset_src=builtin"]
    with pytest.raises(m._kv.KvError, match="timing_method=do_bench is not supported: the evaluator times with "
                                            "CUDA events only"):
        m.build_argv(m._kv.parse_kv([*base, "timing_method=do_bench"], m.KEYS))
    with pytest.raises(m._kv.KvError, match="timing_method=stopwatch is unknown"):
        m.build_argv(m._kv.parse_kv([*base, "timing_method=stopwatch"], m.KEYS))
    with pytest.raises(m._kv.KvError, match="check_kernel=false is not supported: the static and runtime guards"):
        m.build_argv(m._kv.parse_kv([*base, "check_kernel=false"], m.KEYS))
    g = load_script("generate_samples")
    with pytest.raises(g._kv.KvError, match="check_kernel=false is not supported"):
        g.build_argv(g._kv.parse_kv(["run_name=r", "level=1", "dataset_src=builtin", "model_name=m",
                                     "check_kernel=false"], g.KEYS))


def test_presets_greedy_and_verbose_logging():
    _, argv = parse("generate_samples", ["run_name=r", "level=1", "dataset_src=builtin", "model_name=m", ".greedy"])
    assert argv[argv.index("--temperature") + 1] == "0.0"
    # An explicit key still wins over the preset.
    _, argv = parse("generate_samples", ["run_name=r", "level=1", "dataset_src=builtin", "model_name=m",
                                         ".greedy", "temperature=0.7"])
    assert argv[argv.index("--temperature") + 1] == "0.7"
    _, argv = parse("eval_from_generations", ["run_name=r", "level=1", "dataset_src=builtin", ".verbose_logging"])
    assert argv[0] == "-v"
    m = load_script("eval_from_generations")
    with pytest.raises(m._kv.KvError, match=r"preset \.greedy means temperature=0, which this script does not take"):
        m._kv.parse_kv(["run_name=r", "level=1", "dataset_src=builtin", ".greedy"], m.KEYS)
    with pytest.raises(m._kv.KvError, match=r"unknown preset '\.fast'"):
        m._kv.parse_kv(["run_name=r", "level=1", ".fast"], m.KEYS)


# ------------------------------------------------------------------------------------ leaderboard
def lb_setup(root: Path, problem_set: dict | None, baseline: dict | None = None, result_name: str = "1_ReLU"):
    from fixtures.leaderboard import factory as F

    from leaderboard.aggregate import AggregateConfig
    from leaderboard.bundle import ResultsBundle, write_bundle
    from leaderboard.schema import load_submission

    keys = {"level_1_problem_1_sample_0": F.kernel("triton_relu")}
    sub = load_submission(F.write_submission(root / "submissions" / "alpha.json", F.submission_dict("Alpha", keys)))
    write_bundle(ResultsBundle(entry="alpha", gpu="H100", submission_sha256=sub.sha256(), problem_source="test",
                               problem_set=problem_set, evaluated_on="2026-03-01",
                               results=[F.result(1, 1, result_name, candidate_ms=0.5)]), root / "data" / "evaluations")
    if baseline is not None:
        (root / "baselines").mkdir()
        (root / "baselines" / "H100.json").write_text(json.dumps(baseline))
    return F.problems(), AggregateConfig(submissions_dir=root / "submissions",
                                         evaluations_dir=root / "data" / "evaluations",
                                         baselines_dir=root / "baselines", exclusions_path=None,
                                         out_dir=root / "data")


def test_aggregate_records_and_accepts_bundles_of_the_boards_set(tmp_path):
    from fixtures.leaderboard import factory as F

    from leaderboard.aggregate import aggregate

    problems, cfg = lb_setup(tmp_path, identify(F.problems()).to_dict())
    aggregate(problems, cfg)
    assert (tmp_path / "data" / "index.json").exists()


@pytest.mark.parametrize("case", ["other-set", "other-revision-hashes", "baseline-of-another-set",
                                  "results-named-for-other-problems"])
def test_aggregate_refuses_other_sets_and_writes_nothing(tmp_path, case):
    from fixtures.leaderboard import factory as F

    from leaderboard.aggregate import aggregate
    from leaderboard.errors import AggregationError

    board = identify(F.problems())
    baseline = None
    if case == "other-set":
        recorded = identify(load_builtin(levels=[1])).to_dict()
        expected = f"was made from problem set builtin@{__version__}, not {board.label}"
    elif case == "other-revision-hashes":
        recorded = {**board.to_dict(), "hashes": {**board.hashes, "level1/1_ReLU.py": "0" * 32}}
        expected = "holds other versions of level1/1_ReLU.py"
    elif case == "baseline-of-another-set":
        recorded = board.to_dict()
        baseline = F.baseline({(1, p.filename): 1.0 for p in load_builtin(levels=[1])})
        expected = "names problems that are not in"
    else:  # a bundle from before sets had an identity: its results still name their problems
        recorded = None
        expected = "holds results for other problems: level 1 problem 1 is 1_Square_matmul in the bundle but 1_ReLU"
    name = "1_Square_matmul" if case == "results-named-for-other-problems" else "1_ReLU"
    problems, cfg = lb_setup(tmp_path, recorded, baseline, result_name=name)
    with pytest.raises(AggregationError, match=expected):
        aggregate(problems, cfg)
    assert not (tmp_path / "data" / "index.json").exists()


# ------------------------------------------------------------------------------------ evaluate-run
def test_evaluate_run_never_defaults_to_builtin_and_records_the_set(official, tmp_path, monkeypatch, capsys):
    from kernelbench.cli.main import main

    cwd = tmp_path / "kb"
    cwd.mkdir()
    write_kb_run(cwd)
    run = cwd / "runs" / "kbrun"
    (run / "eval_results.json").unlink()
    monkeypatch.chdir(cwd)
    assert main(["evaluate-run", "--run-dir", "runs/kbrun", "--problem-ids", "1"]) == 2
    assert "cannot tell which problem set run runs/kbrun belongs to" in capsys.readouterr().err
    assert not (run / "run.json").exists() and not (run / "eval_results.json").exists()

    write_layout(cwd)  # now run from a KernelBench checkout
    assert main(["evaluate-run", "--run-dir", "runs/kbrun", "--problem-ids", "1"]) == 0
    info = json.loads((run / "run.json").read_text())
    assert (info["problem_set"]["name"], info["problem_set"]["revision"]) == ("kernelbench", "test-rev-1")
    assert set(info["problem_set"]["hashes"]) == {f"level1/{p}_{n}.py" for p, (n, _) in TEST_PROBLEMS.items()}
    before = (run / "eval_results.json").read_bytes()

    # The same run evaluated against the built-in suite is refused, and nothing changes.
    assert main(["evaluate-run", "--run-dir", "runs/kbrun", "--source", "builtin", "--problem-ids", "2"]) == 2
    err = capsys.readouterr().err
    assert f"run runs/kbrun was made from problem set kernelbench@test-rev-1, not builtin@{__version__}" in err
    assert (run / "eval_results.json").read_bytes() == before
    assert json.loads((run / "run.json").read_text())["problem_set"]["name"] == "kernelbench"


# ------------------------------------------------------------------------------- the official board
def write_official_layout(root: Path) -> Path:
    """Levels 1-3 in KernelBench's layout (5 + 2 + 1 problems written for the tests) and level 4 (1)."""
    folder = write_layout(root)
    for level, names in ((2, ["Gemm_test", "Conv_test"]), (3, ["MLP_test"]), (4, ["LM_test"])):
        d = folder / f"level{level}"
        d.mkdir()
        for i, name in enumerate(names, start=1):
            (d / f"{i}_{name}.py").write_text(PROBLEM.format(doc=name, expr=f"x * {level + i}", size=8))
    return folder


@pytest.fixture
def official_board(tmp_path, monkeypatch, pin_official):
    cwd = tmp_path / "board"
    cwd.mkdir()
    pin_official(write_official_layout(cwd), "test-rev-2")
    monkeypatch.chdir(cwd)
    return cwd


def test_leaderboard_ranks_the_official_levels_1_to_3_by_default(official_board, capsys):
    from fixtures.leaderboard import factory as F

    from kernelbench.cli.main import main
    from kernelbench.problems import load_problems
    from leaderboard.bundle import ResultsBundle, write_bundle
    from leaderboard.schema import load_submission

    official = load_problems("kernelbench", levels=[1, 2, 3])
    assert official.count_by_level() == {1: 5, 2: 2, 3: 1}  # level 4 is not on the board
    keys = {"level_1_problem_1_sample_0": F.kernel("triton_relu"), "level_2_problem_1_sample_0": F.kernel("triton_relu")}
    sub = load_submission(F.write_submission(official_board / "submissions" / "alpha.json",
                                             F.submission_dict("Alpha", keys)))
    write_bundle(ResultsBundle(entry="alpha", gpu="H100", submission_sha256=sub.sha256(), problem_source="x",
                               problem_set=identify(official).to_dict(), evaluated_on="2026-03-01",
                               results=[F.result(1, 1, "1_ReLU_test", candidate_ms=0.5),
                                        F.result(2, 1, "1_Gemm_test", candidate_ms=0.25)]),
                 official_board / "data" / "evaluations")
    assert main(["leaderboard", "aggregate", "--exclusions", "none.json"]) == 0
    index = json.loads((official_board / "data" / "index.json").read_text())
    assert index["levels"] == {"1": 5, "2": 2, "3": 1}
    assert index["problem_set"] == {"name": "kernelbench", "revision": "test-rev-2"}
    overall = index["entries"][0]["scores"]["overall"]
    # 2 of 8 problems correct (the other 6, missing, count as incorrect); speedups 2x and 4x
    assert overall["n_problems"] == 8 and overall["correctness_rate"] == 0.25
    assert overall["fulldeck_geomean"] == round(8 ** (1 / 8), 6)
    assert index["entries"][0]["speedup_basis"] == "in-session reference"

    # The official board's baselines are baselines/kernelbench/<GPU>.json; baselines/<GPU>.json is the
    # built-in suite's (it would be refused here, naming its problems).
    (official_board / "baselines" / "kernelbench").mkdir(parents=True)
    (official_board / "baselines" / "H100.json").write_text(json.dumps(
        F.baseline({(1, p.filename): 1.0 for p in load_builtin(levels=[1])})))
    (official_board / "baselines" / "kernelbench" / "H100.json").write_text(json.dumps(
        F.baseline({(p.level, p.filename): 2.0 for p in official})))
    assert main(["leaderboard", "aggregate", "--exclusions", "none.json"]) == 0
    entry = json.loads((official_board / "data" / "index.json").read_text())["entries"][0]
    assert entry["speedup_basis"] == "baseline eager"
    assert entry["scores"]["overall"]["fulldeck_geomean"] == round((4 * 8) ** (1 / 8), 6)  # 2/0.5 and 2/0.25
    assert main(["leaderboard", "aggregate", "--exclusions", "none.json", "--baselines-dir", "baselines"]) == 2
    assert "names problems that are not in kernelbench@test-rev-2" in capsys.readouterr().err
    assert main(["leaderboard", "build", "--out", "site"]) == 0
    html = (official_board / "site" / "index.html").read_text()
    assert "8 problems" in html and "Alpha" in html and "Problem set: <code>kernelbench@test-rev-2</code>" in html


def test_official_board_without_the_official_problems_is_one_error(tmp_path, monkeypatch, capsys):
    from kernelbench.cli.main import main

    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    assert main(["leaderboard", "aggregate", "--out", "data"]) == 2
    assert "cannot load ScalingIntelligence/KernelBench from the Hugging Face hub" in capsys.readouterr().err
    assert not (tmp_path / "data").exists()


def test_a_changed_checkout_is_not_the_official_board(official_board, capsys):
    from kernelbench.cli.main import main

    p = official_board / "KernelBench" / "level2" / "1_Gemm_test.py"
    p.write_text(p.read_text().replace("randn(8)", "randn(9)"))
    assert main(["leaderboard", "aggregate"]) == 2
    err = capsys.readouterr().err
    assert "does not hash the same as kernelbench@test-rev-2: level2/1_Gemm_test.py" in err
    assert not (official_board / "data").exists()


def test_a_local_copy_of_the_dataset_is_the_official_set_when_it_hashes_the_same(official, tmp_path):
    """The Hugging Face layout (splits level_N; columns code, level, name, problem_id), saved to disk."""
    datasets = pytest.importorskip("datasets")
    from kernelbench.errors import SourceError
    from kernelbench.problems import load_problems

    problems = load_directory(official)
    rows = {"code": [p.code for p in problems], "level": [p.level for p in problems],
            "name": [p.name for p in problems], "problem_id": [p.problem_id for p in problems]}
    datasets.DatasetDict({"level_1": datasets.Dataset.from_dict(rows)}).save_to_disk(str(tmp_path / "ds"))
    loaded = load_problems("kernelbench", tmp_path / "ds", levels=[1])
    assert identify(loaded).label == "kernelbench@test-rev-1" and len(loaded) == 5

    rows["code"][2] = rows["code"][2].replace("randn(16)", "randn(17)")
    datasets.DatasetDict({"level_1": datasets.Dataset.from_dict(rows)}).save_to_disk(str(tmp_path / "ds2"))
    with pytest.raises(ProblemSetMismatchError, match="level1/3_Sigmoid_test.py"):
        load_problems("kernelbench", tmp_path / "ds2", levels=[1])
    # Problems that are not the official ones at all are refused as the official set.
    other = tmp_path / "other" / "level1"
    other.mkdir(parents=True)
    (other / "1_Other.py").write_text(PROBLEM.format(doc="x", expr="x * 2", size=8))
    with pytest.raises(SourceError, match="is not the official KernelBench set"):
        load_problems("kernelbench", other.parent, levels=[1])


def test_identity_candidate_renames_every_mention_of_model():
    """KernelBench's problems call super(Model, self): a class-line rename alone breaks them (NameError)."""
    from kernelbench.problems.contract import identity_candidate

    code = ("import torch.nn as nn\nclass Model(nn.Module):\n    def __init__(self):\n"
            "        super(Model, self).__init__()\n    def forward(self, x):\n        return x\n")
    ns: dict = {}
    exec(identity_candidate(code), ns)
    assert "Model" not in ns and ns["ModelNew"]()(3) == 3
    assert identity_candidate("ModelNew = 1\nMyModel = 2\n") == "ModelNew = 1\nMyModel = 2\n"


def test_at_reduced_sizes_keeps_the_problems_that_declare_a_cpu_size_each_at_it():
    from kernelbench.problems import load_builtin
    from kernelbench.problems.contract import reduced_size
    from kernelbench.problems.model import at_reduced_sizes

    level1 = list(load_builtin([1]).select(levels=[1]))
    sized = at_reduced_sizes(level1)
    declaring = [p for p in level1 if reduced_size(p.code) is not None]
    assert 0 < len(sized) == len(declaring) < len(level1)
    assert all(s.reduced_size is not None and s.problem_id == d.problem_id for s, d in zip(sized, declaring))
    assert at_reduced_sizes(sized) == sized  # already reduced: kept as they are
