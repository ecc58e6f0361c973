"""The evaluate workflow's job holds the Modal token, so it installs from a hash-pinned lock file.

``scripts/ci/requirements-evaluate.txt`` (compiled from ``requirements-evaluate.in`` with hashes) must pin
every package with at least one sha256, agree with pyproject.toml's runtime dependencies and ``modal``
extra, and be what the workflow installs, through ``install.sh --locked`` with ``--require-hashes``.
The lock leaves torch and triton out (the job validates, dispatches to Modal and scores; kernels run
only in Modal's containers), so the last test runs the job's own commands with torch unimportable.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

yaml = pytest.importorskip("yaml")
tomllib = pytest.importorskip("tomllib")
packaging = pytest.importorskip("packaging.requirements")
from packaging.requirements import Requirement  # noqa: E402
from packaging.utils import canonicalize_name  # noqa: E402
from packaging.version import Version  # noqa: E402

REPO = Path(__file__).resolve().parent.parent
LOCK = REPO / "scripts" / "ci" / "requirements-evaluate.txt"
LOCK_IN = REPO / "scripts" / "ci" / "requirements-evaluate.in"
INSTALL = REPO / "scripts" / "ci" / "install.sh"
#: Left out of the lock on purpose: nothing the job runs imports them (checked below).
NOT_IN_JOB = {"torch", "triton"}
#: The GitHub runner the job uses (setup-python 3.11 on ubuntu-latest, x86_64).
RUNNER_ENV = {"python_version": "3.11", "python_full_version": "3.11.9", "platform_system": "Linux",
              "sys_platform": "linux", "platform_machine": "x86_64", "os_name": "posix",
              "implementation_name": "cpython", "platform_python_implementation": "CPython"}


def lock_entries() -> dict[str, tuple[Version, list[str]]]:
    """name -> (pinned version, sha256 hashes), parsed from the lock's continuation-line blocks."""
    text = LOCK.read_text(encoding="utf-8")
    entries: dict[str, tuple[Version, list[str]]] = {}
    for block in re.split(r"\n(?=\S)", text):
        first = block.splitlines()[0].strip()
        if not first or first.startswith("#"):
            continue
        m = re.fullmatch(r"([A-Za-z0-9._-]+)==([^\s\\;]+)\s*(;[^\\]*)?\\?", first)
        assert m, f"not an exact pin: {first!r}"
        hashes = re.findall(r"--hash=sha256:([0-9a-f]{64})\b", block)
        entries[canonicalize_name(m.group(1))] = (Version(m.group(2)), hashes)
    return entries


def pyproject_requirements() -> list[Requirement]:
    project = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    reqs = [Requirement(r) for r in project["dependencies"]]
    reqs += [Requirement(r) for r in project["optional-dependencies"]["modal"]]
    return [r for r in reqs if r.marker is None or r.marker.evaluate(RUNNER_ENV)]


def test_every_package_is_pinned_exactly_with_hashes():
    entries = lock_entries()
    assert len(entries) > 10  # modal and its dependencies, not an empty file
    for name, (_version, hashes) in entries.items():
        assert hashes, f"{name} has no --hash: pip --require-hashes would refuse the whole file"
    text = LOCK.read_text(encoding="utf-8")
    assert not re.search(r"^\s*(-e|--editable|git\+|https?://)", text, re.MULTILINE), "only registry pins"


def test_the_lock_satisfies_pyproject_and_leaves_out_only_torch_and_triton():
    entries = lock_entries()
    for req in pyproject_requirements():
        name = canonicalize_name(req.name)
        if name in NOT_IN_JOB:
            assert name not in entries, f"{name} is in the lock: the job was meant not to install it"
            continue
        assert name in entries, f"pyproject's {req} is not in {LOCK.name}: regenerate it (command in its header)"
        version, _ = entries[name]
        assert req.specifier.contains(version, prereleases=True), f"{LOCK.name} pins {name}=={version}, pyproject wants {req}"
    # Building the editable install without network needs the build backend pyproject names.
    build = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["build-system"]["requires"]
    for spec in build:
        req = Requirement(spec)
        assert canonicalize_name(req.name) in entries, f"build requirement {req} missing from the lock"
        assert req.specifier.contains(entries[canonicalize_name(req.name)][0])


def test_the_lock_input_keeps_pyprojects_bounds():
    """The .in file the lock is compiled from states the same requirements as pyproject (minus torch, triton)."""
    wanted = {canonicalize_name(r.name): str(r.specifier) for r in pyproject_requirements()
              if canonicalize_name(r.name) not in NOT_IN_JOB}
    given = {}
    for line in LOCK_IN.read_text(encoding="utf-8").splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            req = Requirement(line)
            given[canonicalize_name(req.name)] = str(req.specifier)
    for name, spec in wanted.items():
        assert given.get(name) == spec, f"{LOCK_IN.name}: {name}{given.get(name, ' missing')} vs pyproject {name}{spec}"


def test_the_job_that_holds_the_token_installs_from_the_lock_with_hashes_required():
    wf = yaml.safe_load((REPO / ".github" / "workflows" / "evaluate.yml").read_text(encoding="utf-8"))
    (job,) = wf["jobs"].values()
    runs = [str(s.get("run", "")).strip() for s in job["steps"]]
    installs = [r for r in runs if "install.sh" in r]
    assert installs == ["bash scripts/ci/install.sh --locked scripts/ci/requirements-evaluate.txt"]
    assert not any(re.search(r"\bpip\b", r) for r in runs if r not in installs), "no other pip call in the job"
    script = INSTALL.read_text(encoding="utf-8")
    locked = script.split('if [ "${1:-}" = "--locked" ]; then', 1)[1].split("fi\n", 1)[0]
    pip_lines = [ln.strip() for ln in locked.splitlines() if "pip install" in ln]
    assert pip_lines == ['python -m pip install --require-hashes --no-deps -r "$lock"',
                         "python -m pip install --no-deps --no-build-isolation --no-index -e ."]
    assert "exit 0" in locked  # the unlocked path below never runs after it


def test_the_jobs_commands_run_without_torch(tmp_path):
    """Validate, dispatch (dry run) and the Modal app's import work where torch cannot be imported."""
    stub = tmp_path / "stub"
    for name in NOT_IN_JOB:
        (stub / name).mkdir(parents=True)
        (stub / name / "__init__.py").write_text(f"raise ImportError('{name} is not installed in this job')\n")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(stub), str(REPO)])}
    untrusted = tmp_path / "untrusted"
    (untrusted / "submissions").mkdir(parents=True)
    sub = untrusted / "submissions" / "worked.json"
    demo = REPO / "examples" / "demo-board" / "submissions" / "worked_solutions_triton.json"
    sub.write_text(demo.read_text(encoding="utf-8"))
    (tmp_path / "changed.txt").write_text("submissions/worked.json\n")

    def run(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, *args], cwd=tmp_path, env=env, capture_output=True, text=True,
                              timeout=300)

    proc = run("-c", "import torch")
    assert proc.returncode != 0 and "not installed in this job" in proc.stderr  # the stub works
    # The job's "Check the problem set" step: an official layout (problems written for the test), pinned by a
    # manifest written for it, is loaded and hashed without torch.
    from kernelbench.problems import load_directory
    from kernelbench.problems.identity import ProblemSetIdentity, identify, write_manifest

    official = tmp_path / "official" / "KernelBench"
    shutil.copytree(REPO / "kernelbench" / "problems" / "builtin" / "level1", official / "level1",
                    ignore=shutil.ignore_patterns("__pycache__", "[2-9]*", "1[0-9]*"))
    write_manifest(ProblemSetIdentity("kernelbench", "0" * 40, identify(load_directory(official)).hashes),
                   tmp_path / "manifest.json")
    env["KERNELBENCH_MANIFEST"] = str(tmp_path / "manifest.json")
    proc = run(str(REPO / "scripts" / "ci" / "kb_ci.py"), "problems", "--source", "kernelbench",
               "--path", str(official))
    assert proc.returncode == 0 and "problem set kernelbench@" in proc.stdout, proc.stdout[-2000:] + proc.stderr[-2000:]
    del env["KERNELBENCH_MANIFEST"]
    proc = run(str(REPO / "scripts" / "ci" / "kb_ci.py"), "validate", "--files-from", str(tmp_path / "changed.txt"),
               "--root", str(untrusted), "--report-dir", str(tmp_path / "validation"), "--source", "builtin")
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    proc = run("-m", "kernelbench.cli.main", "leaderboard", "evaluate", str(sub), "--source", "builtin",
               "--runner", "modal", "--gpu", "H100", "--dry-run", "--yes", "--runs-dir", "runs", "--results-dir", "ev")
    assert proc.returncode == 0 and "dry run, nothing dispatched" in proc.stdout + proc.stderr, proc.stderr[-2000:]
    if __import__("importlib.util").util.find_spec("modal") is not None:
        proc = run("-c", "import modal_app.app as a; print(len(a.EVALUATE_HUB_FUNCTIONS))")
        assert proc.returncode == 0 and proc.stdout.strip() == "4", proc.stderr[-2000:]
