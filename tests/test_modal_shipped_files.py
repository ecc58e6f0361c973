"""What the Modal containers actually receive, and that the GPU functions run from it alone.

A Modal container imports the app from the files Modal uploads, not from this checkout. Which
files those are is decided by Modal's own matcher for every ``add_local_*`` step of the image
and every mount the function carries (the app's own package is mounted automatically). These
tests ask Modal for that set, copy exactly those files into a temporary directory, and run the
GPU functions' bodies in a fresh interpreter whose import path holds only that directory and the
installed dependencies. A data file the matcher leaves behind (``measured_rates.json`` was one)
fails here instead of on the first paid run.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path, PurePosixPath

import pytest

modal = pytest.importorskip("modal")
tomllib = pytest.importorskip("tomllib")  # Python 3.11+; CI and the Modal image run 3.11/3.12

REPO = Path(__file__).resolve().parent.parent
#: Modal puts local Python sources under /root in the container, which is on its import path.
CONTAINER_ROOT = PurePosixPath("/root")


def shipped_files(function) -> dict[PurePosixPath, Path]:
    """Container path -> local file, for every local mount reachable from a Modal function.

    Walks the function's dependency graph (its image layers and its own mounts) the way Modal's
    resolver does and asks each local mount entry for its files with Modal's matching code.
    Mounts that are not local (Modal's client package) hold installed dependencies, not ours.
    """
    from modal._utils.async_utils import synchronizer
    from modal.mount import _Mount

    out: dict[PurePosixPath, Path] = {}
    seen: set[int] = set()
    stack = [synchronizer._translate_in(function)]
    while stack:
        obj = stack.pop()
        if id(obj) in seen:
            continue
        seen.add(id(obj))
        if isinstance(obj, _Mount) and obj._entries is not None:
            for entry in obj._entries:
                for local, remote in entry.get_files_to_upload():
                    out[PurePosixPath(remote)] = Path(local)
        stack.extend(obj._deps_())
    return out


def materialise(files: dict[PurePosixPath, Path], dest: Path) -> Path:
    """Copy the shipped files under ``dest``; returns the directory that stands for /root."""
    root = dest / "root"
    for remote, local in files.items():
        rel = remote.relative_to(CONTAINER_ROOT)  # anything outside /root would be a surprise: fail
        target = root / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(local, target)
    return root


def run_isolated(root: Path, code: str, tmp_path: Path, env_extra: dict[str, str] | None = None,
                 timeout: int = 600) -> subprocess.CompletedProcess:
    """Run ``code`` in a fresh interpreter that can import our packages only from ``root``."""
    cwd = tmp_path / "cwd"
    cwd.mkdir(exist_ok=True)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "KERNELBENCH", "MODAL_"))}
    # Installed dependencies may come through PYTHONPATH (the GPU machine's carried wheels); entries that
    # hold a copy of our own packages (a checkout) are dropped, so only ``root`` can provide them.
    deps = [e for e in os.environ.get("PYTHONPATH", "").split(os.pathsep)
            if e and not any((Path(e) / pkg).exists() for pkg in ("kernelbench", "modal_app"))]
    env.update({"PYTHONPATH": os.pathsep.join([str(root), *deps]), "PYTHONDONTWRITEBYTECODE": "1",
                **(env_extra or {})})
    prologue = textwrap.dedent(f"""
        import sys
        ROOT = {str(root)!r}
        import kernelbench, modal_app
        for mod in (kernelbench, modal_app):
            assert mod.__file__.startswith(ROOT), f"{{mod.__name__}} imported from {{mod.__file__}}, not the shipped set"
    """)
    return subprocess.run([sys.executable, "-c", prologue + textwrap.dedent(code)], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=timeout)


@pytest.fixture(scope="module")
def app_module():
    import modal_app.app as app_module

    return app_module


@pytest.fixture(scope="module")
def shipped_root(app_module, tmp_path_factory):
    files = shipped_files(app_module.evaluate_h100)
    return materialise(files, tmp_path_factory.mktemp("shipped"))


def _package_data_files(package: str) -> set[Path]:
    """The files pip ships as package data for ``package``, from pyproject's own globs."""
    config = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))
    globs = config["tool"]["setuptools"]["package-data"].get(package, [])
    base = REPO / package
    return {p for g in globs for p in base.glob(g) if p.is_file() and "__pycache__" not in p.parts}


def test_every_function_ships_the_same_files(app_module):
    from kernelbench.hardware import MODAL_GPUS
    from kernelbench.runners.modal_runner import FETCH_FUNCTION, FUNCTION_KINDS, function_name

    names = [function_name(kind, gpu) for gpu in MODAL_GPUS for kind in FUNCTION_KINDS] + [FETCH_FUNCTION]
    sets = {name: set(shipped_files(getattr(app_module, name))) for name in names}
    first = next(iter(sets.values()))
    assert first, "no local files shipped at all"
    for name, files in sets.items():
        assert files == first, f"{name} ships a different file set"


def test_the_package_data_is_shipped(app_module):
    """Every data file the installed package carries (prompt templates, rates, manifest) is uploaded too."""
    shipped = {local.resolve() for local in shipped_files(app_module.evaluate_h100).values()}
    needed = _package_data_files("kernelbench")
    assert REPO / "kernelbench" / "data" / "measured_rates.json" in needed  # the globs are read right
    missing = sorted(str(p.relative_to(REPO)) for p in needed if p.resolve() not in shipped)
    assert not missing, f"package data not shipped to Modal: {missing}"


def test_nothing_but_our_sources_and_data_is_shipped(app_module):
    """No caches, dot-files or stray build outputs travel (they would also bust Modal's mount cache)."""
    for remote in shipped_files(app_module.evaluate_h100):
        parts = remote.relative_to(CONTAINER_ROOT).parts
        assert parts[0] in ("kernelbench", "modal_app"), remote
        assert "__pycache__" not in parts and not any(p.startswith(".") for p in parts), remote
        assert remote.suffix != ".pyc", remote


def _worked_solution_payload(device: str) -> tuple[dict, object]:
    from kernelbench.evaluation.settings import EvalJob, EvalSettings
    from kernelbench.problems import load_problems
    from kernelbench.runners.wire import job_to_wire
    from kernelbench.solutions import list_solutions

    solution = next(s for s in list_solutions("triton", level=1) if s.problem_id == 8)  # ReLU
    problem = load_problems("builtin", levels=[1]).get(1, 8)
    if device == "cpu":
        problem = problem.at_reduced_size()
    settings = EvalSettings(backend="triton", correctness_trials=2, measure_timing=device != "cpu")
    job = EvalJob(problem=problem, candidate_source=solution.source, settings=settings)
    return job_to_wire(job, 0), job


EVALUATE_IN_CONTAINER = """
    import json
    import modal_app.app as app
    from kernelbench.runners.wire import job_from_wire, result_from_wire
    payload = json.load(open(sys.argv[1] if len(sys.argv) > 1 else "payload.json"))
    _, job = job_from_wire(payload)
    out = app.evaluate_h100.local(payload)
    _, result = result_from_wire(out)
    # What the evaluator does with every timed GPU result; on the CPU nothing is timed, so ask directly.
    from kernelbench.roofline import check_speed_of_light
    check_speed_of_light(job.problem, "H100", "fp32", 1.0)
    print("RESULT " + json.dumps(out))
"""


def _run_payload(root: Path, tmp_path: Path, payload: dict, code: str, env: dict[str, str]):
    (tmp_path / "cwd").mkdir(exist_ok=True)
    (tmp_path / "cwd" / "payload.json").write_text(json.dumps(payload), encoding="utf-8")
    proc = run_isolated(root, code, tmp_path, env_extra=env)
    assert proc.returncode == 0, proc.stderr[-4000:]
    line = next(x for x in proc.stdout.splitlines() if x.startswith("RESULT "))
    return json.loads(line[len("RESULT "):])


@pytest.mark.slow
def test_evaluate_function_runs_a_worked_solution_from_the_shipped_files(shipped_root, tmp_path):
    from kernelbench.runners.wire import result_from_wire

    payload, _job = _worked_solution_payload("cpu")
    out = _run_payload(shipped_root, tmp_path, payload, EVALUATE_IN_CONTAINER, {"TRITON_INTERPRET": "1"})
    _, result = result_from_wire(out)
    assert result.error is None, result.error
    assert result.compiled and result.correct
    assert result.correctness.trials_passed == result.correctness.trials_run == 2


BASELINES_IN_CONTAINER = """
    import json
    import modal_app.app as app
    payload = json.load(open("payload.json"))
    print("RESULT " + json.dumps(app.baselines_h100.local(payload)))
"""


@pytest.mark.slow
def test_baselines_function_runs_from_the_shipped_files(shipped_root, tmp_path):
    from kernelbench.baselines import EAGER
    from kernelbench.evaluation.settings import EvalSettings
    from kernelbench.problems import load_problems
    from kernelbench.runners.wire import baseline_request_to_wire

    problem = load_problems("builtin", levels=[1]).get(1, 8)
    payload = baseline_request_to_wire(problem, [EAGER], EvalSettings(backend="torch", timing_budget_s=0.2), 0)
    out = _run_payload(shipped_root, tmp_path, payload, BASELINES_IN_CONTAINER, {})
    assert out["problem_id"] == 8
    # Without a GPU the measurement itself is refused, but as data, and not for a missing file or module.
    err = out["error"] or ""
    for missing in ("No such file", "does not exist", "ModuleNotFoundError", "ImportError"):
        assert missing not in err, err


@pytest.mark.gpu
def test_gpu_evaluate_function_times_a_worked_solution_from_the_shipped_files(shipped_root, tmp_path):
    from kernelbench.runners.wire import result_from_wire

    payload, _job = _worked_solution_payload("cuda")
    out = _run_payload(shipped_root, tmp_path, payload, EVALUATE_IN_CONTAINER, {})
    _, result = result_from_wire(out)
    assert result.error is None, result.error
    assert result.correct and result.runtime is not None and result.ref_runtime is not None
    assert result.roofline is not None  # the speed-of-light check ran on the timed result


@pytest.mark.gpu
def test_gpu_baselines_function_measures_from_the_shipped_files(shipped_root, tmp_path):
    from kernelbench.baselines import EAGER
    from kernelbench.evaluation.settings import EvalSettings
    from kernelbench.problems import load_problems
    from kernelbench.runners.wire import baseline_request_to_wire

    problem = load_problems("builtin", levels=[1]).get(1, 8)
    payload = baseline_request_to_wire(problem, [EAGER], EvalSettings(backend="torch", timing_budget_s=0.5), 0)
    out = _run_payload(shipped_root, tmp_path, payload, BASELINES_IN_CONTAINER, {})
    assert out["error"] is None, out["error"]
    assert EAGER in out["entries"]


EVALUATE_HUB_IN_CONTAINER = """
    import json
    import modal_app.app as app
    payload = json.load(open("payload.json"))
    print("RESULT " + json.dumps(app.evaluate_hub_h100.local(payload)))
"""


@pytest.mark.slow
def test_evaluate_hub_function_runs_a_level4_kernel_from_the_shipped_files(shipped_root, tmp_path):
    """``evaluate_hub_<gpu>`` from the shipped files alone: a level-4 style problem loads its model from a hub
    cache on disk (``HF_HUB_CACHE``, offline), as it does from the read-only Volume on Modal."""
    pytest.importorskip("transformers")
    from test_modal_hub import HUB_PROBLEM, lay_out_cache, tiny_model_files, world_readable

    from kernelbench.evaluation.settings import EvalJob, EvalSettings
    from kernelbench.problems.contract import extra_requirements, identity_candidate
    from kernelbench.problems.model import Problem
    from kernelbench.runners.wire import job_to_wire, result_from_wire

    cache = tmp_path / "hub"
    lay_out_cache(cache, tiny_model_files(tmp_path / "model"))
    world_readable(cache)
    problem = Problem(level=4, problem_id=1, name="1_tiny-gpt2", code=HUB_PROBLEM,
                      requirements=extra_requirements(HUB_PROBLEM))
    job = EvalJob(problem=problem, candidate_source=identity_candidate(HUB_PROBLEM),
                  settings=EvalSettings(backend="torch", correctness_trials=1, measure_timing=False))
    out = _run_payload(shipped_root, tmp_path, job_to_wire(job, 0), EVALUATE_HUB_IN_CONTAINER,
                       {"HF_HUB_CACHE": str(cache), "HF_HUB_OFFLINE": "1"})
    _, result = result_from_wire(out)
    assert result.error is None and result.correct, result.error
