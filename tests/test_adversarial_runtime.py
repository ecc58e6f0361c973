"""Every exploit of the adversarial corpus is caught by the evaluator at run time.

Each file in tests/adversarial/ says in its header which problem it attacks, with which backend,
whether it is meaningful without a GPU, and the verdicts expected with all guards on (``expect``)
and with the static guard switched off (``runtime-expect``: the runtime defences alone).

A verdict is ``pass`` (correct), ``honest`` (the exploit is neutralised: correct is allowed but any
measured speedup must be plausible), ``fail [stage[:rule]]`` or ``flag <text>``; alternatives are
separated by ``|``. Optional ``cpu-expect`` / ``cpu-runtime-expect`` replace them on the CPU path, where
nothing is timed: an exploit aimed at timing (caching, warm-up detection) can only be shown to gain nothing. On the CPU path (CI) the files marked ``runs-on: any`` run against small copies
of their problems; on a GPU every file runs against the built-in problems at full size.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

import pytest

from kernelbench.backends import backend_names, get_backend
from kernelbench.evaluation import EvalJob, EvalSettings, evaluate_batch
from kernelbench.problems import load_builtin, load_directory
from kernelbench.results import KernelResult

CORPUS = Path(__file__).parent / "adversarial"
#: Sizes of the CPU copies of the problems the corpus attacks (module-level constants rewritten).
SMALL = {
    (1, 1): {"N": 64},
    (1, 8): {"batch_size": 64, "dim": 1024},
    (1, 12): {"batch_size": 64, "dim": 512},
    (1, 17): {"batch_size": 8, "dim1": 64, "dim2": 32},
}
HONEST_MAX_SPEEDUP = 1.5


@dataclass(frozen=True)
class Exploit:
    path: Path
    level: int
    problem_id: int
    backend: str
    runs_on: str
    expect: str
    runtime_expect: str
    #: Where the CPU path (no timing) can only show that the exploit gains nothing.
    cpu_expect: str | None = None
    cpu_runtime_expect: str | None = None

    @property
    def name(self) -> str:
        return self.path.stem


def _header(text: str, key: str) -> str:
    m = re.search(rf"^# {key}:\s*(.+)$", text, re.MULTILINE)
    if not m:
        raise AssertionError(f"missing '# {key}:' header")
    return m.group(1).strip()


def load_corpus() -> list[Exploit]:
    out = []
    for f in sorted(CORPUS.glob("*.py")):
        text = f.read_text()
        prob = re.match(r"level=(\d+)\s+id=(\d+)", _header(text, "problem"))
        cpu = re.search(r"^# cpu-expect:\s*(.+)$", text, re.MULTILINE)
        cpu_rt = re.search(r"^# cpu-runtime-expect:\s*(.+)$", text, re.MULTILINE)
        out.append(Exploit(f, int(prob.group(1)), int(prob.group(2)), _header(text, "backend"),
                           _header(text, "runs-on"), _header(text, "expect"), _header(text, "runtime-expect"),
                           cpu.group(1).strip() if cpu else None, cpu_rt.group(1).strip() if cpu_rt else None))
    return out


CORPUS_FILES = load_corpus()


def matches(r: KernelResult, spec: str) -> bool:
    for alt in (a.strip() for a in spec.split("|")):
        if alt == "pass" and r.correct:
            return True
        if alt == "honest" and (not r.correct or r.speedup is None or r.speedup <= HONEST_MAX_SPEEDUP):
            return True
        if alt.startswith("fail") and not r.correct and r.error is not None:
            rest = alt[4:].strip()
            if not rest:
                return True
            stage, _, rule = rest.partition(":")
            if r.error.stage.value == stage and (not rule or any(
                    f.rule == rule and f.severity == "error" for f in r.guard_findings)):
                return True
        if alt.startswith("flag"):
            words = alt[4:].strip().replace("-", " ").lower()
            if r.correct and any(words in f.replace("-", " ").lower() for f in r.flags):
                return True
    return False


def describe(r: KernelResult) -> str:
    return (f"correct={r.correct} error={r.error.one_line() if r.error else None} speedup={r.speedup} "
            f"findings={[(f.rule, f.severity) for f in r.guard_findings]} flags={r.flags}")


def small_problems(tmp: Path):
    for (level, pid), sizes in SMALL.items():
        p = load_builtin([level]).get(level, pid)
        code = p.code
        for name, value in sizes.items():
            code, n = re.subn(rf"^{name}\s*=\s*.+$", f"{name} = {value}", code, count=1, flags=re.MULTILINE)
            assert n == 1, f"{p.name} has no constant {name}"
        d = tmp / f"level{level}"
        d.mkdir(parents=True, exist_ok=True)
        (d / p.filename).write_text(code)
    return load_directory(tmp)


def run_corpus(problems, exploits: list[Exploit], device: str) -> dict[tuple[str, str], KernelResult]:
    jobs, keys = [], []
    for ex in exploits:
        problem = problems.get(ex.level, ex.problem_id)
        source = ex.path.read_text()
        base = EvalSettings(backend=ex.backend, device=device, stage_timeout_s=30.0, timing_budget_s=0.3)
        for mode, guard in (("expect", True), ("runtime-expect", False)):
            jobs.append(EvalJob(problem, source, base.with_(static_guard=guard), sample_id=len(jobs)))
            keys.append((ex.name, mode))
    def show(i: int, r: KernelResult) -> None:  # as each arrives: a run cut short still says what it saw
        print(f"{keys[i][0]} [{keys[i][1]}] {describe(r)}", flush=True)

    results = evaluate_batch(jobs, progress=False, on_result=show)
    return dict(zip(keys, results))


def test_corpus_headers_are_complete():
    assert len(CORPUS_FILES) >= 21
    numbers = {int(m.group(1)) for ex in CORPUS_FILES if (m := re.match(r"e(\d+)_", ex.name))}
    assert set(range(1, 19)) <= numbers, "every exploit of issue 4 has a file"
    for ex in CORPUS_FILES:
        assert ex.backend in backend_names() and ex.runs_on in ("any", "gpu"), ex.name
        # A backend with no interpreter cannot be meaningful on the CPU path.
        assert ex.runs_on == "gpu" or not get_backend(ex.backend).needs_gpu, ex.name


@pytest.fixture(scope="module")
def cpu_results(tmp_path_factory):
    problems = small_problems(tmp_path_factory.mktemp("adversarial-problems"))
    return run_corpus(problems, [e for e in CORPUS_FILES if e.runs_on == "any"], "cpu")


@pytest.mark.slow
@pytest.mark.parametrize("ex", [e for e in CORPUS_FILES if e.runs_on == "any"], ids=lambda e: e.name)
def test_exploit_is_caught_on_the_cpu_path(cpu_results, ex):
    cpu_runtime = ex.cpu_runtime_expect or ex.cpu_expect or ex.runtime_expect
    for mode, spec in (("expect", ex.cpu_expect or ex.expect), ("runtime-expect", cpu_runtime)):
        r = cpu_results[(ex.name, mode)]
        assert matches(r, spec), f"{ex.name} [{mode}] expected {spec!r}, got {describe(r)}"


def _runnable_here(ex: Exploit) -> bool:
    """The backend's own package (kernelbench[cute], kernelbench[tilelang]) is installed."""
    return not get_backend(ex.backend).missing_packages()


def _selected(ex: Exploit) -> bool:
    """``KB_CORPUS_BACKENDS=cute,tilelang`` limits the GPU run to those backends' files (gpu_check.sh's dsl phase)."""
    wanted = [b for b in os.environ.get("KB_CORPUS_BACKENDS", "").split(",") if b]
    return not wanted or ex.backend in wanted


@pytest.fixture(scope="module")
def gpu_results():
    problems = load_builtin([1])
    return run_corpus(problems, [e for e in CORPUS_FILES if _runnable_here(e) and _selected(e)], "cuda:0")


@pytest.mark.gpu
@pytest.mark.parametrize("ex", CORPUS_FILES, ids=lambda e: e.name)
def test_exploit_is_caught_on_the_gpu(gpu_results, ex):
    if not _selected(ex):
        pytest.skip("not among KB_CORPUS_BACKENDS")
    if not _runnable_here(ex):
        pytest.skip(get_backend(ex.backend).missing_message())
    for mode, spec in (("expect", ex.expect), ("runtime-expect", ex.runtime_expect)):
        r = gpu_results[(ex.name, mode)]
        print(ex.name, mode, describe(r))
        assert matches(r, spec), f"{ex.name} [{mode}] expected {spec!r}, got {describe(r)}"
