"""What the ``modal run`` entry points do, as plain functions that take a runner.

``app.py`` parses options and prints; everything here returns data, so the same code runs with
a real Modal function inside ``modal run`` and with an in-process stand-in in the tests.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from kernelbench.backends import DEFAULT_BACKEND
from kernelbench.errors import KernelBenchError, RunDirectoryError
from kernelbench.evaluation.settings import EvalJob, EvalSettings
from kernelbench.io_utils import atomic_write_text
from kernelbench.problems.model import Problem, ProblemSet, problem_key
from kernelbench.results import KernelResult
from kernelbench.runners.modal_runner import ModalRunner

if TYPE_CHECKING:
    from kernelbench.baselines import BaselineRunReport

log = logging.getLogger(__name__)


def make_settings(backend: str = EvalSettings.backend, precision: str = EvalSettings.precision,
                  correctness_trials: int = EvalSettings.correctness_trials,
                  tolerance_mode: str = EvalSettings.tolerance_mode, timing: bool = EvalSettings.measure_timing,
                  timing_budget: float = EvalSettings.timing_budget_s) -> EvalSettings:
    """The entry points' options as EvalSettings; every default is EvalSettings' own, and a bad value is a
    KernelBenchError (EvalSettings validates)."""
    try:
        return EvalSettings(backend=backend, precision=precision, correctness_trials=correctness_trials,
                            tolerance_mode=tolerance_mode, measure_timing=timing, timing_budget_s=timing_budget)
    except ValueError as e:
        raise KernelBenchError(str(e)) from None


def load_problem_set(source: str, path: str | None, levels: Sequence[int] | None = None) -> ProblemSet:
    from kernelbench.problems import load_problems

    return load_problems(source, path or None, levels=levels)


def parse_levels(spec: str) -> list[int]:
    """``"1,2"`` -> [1, 2]; a bad level is named in the error."""
    from kernelbench.problems import LEVELS

    levels = []
    for part in spec.split(","):
        part = part.strip()
        if not part:
            continue
        if not part.isdigit() or int(part) not in LEVELS:
            raise KernelBenchError(f"bad level {part!r} in --levels (levels are {', '.join(map(str, LEVELS))})")
        levels.append(int(part))
    if not levels:
        raise KernelBenchError("--levels is empty (e.g. --levels 1,2)")
    return sorted(set(levels))


# ---------------------------------------------------------------------------------------------
# One kernel


def evaluate_kernel_file(kernel_file: str | Path, problem: Problem, settings: EvalSettings, runner: ModalRunner,
                         sample_id: int = 0, output: str | Path | None = None) -> KernelResult:
    path = Path(kernel_file)
    try:
        source = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise KernelBenchError(f"kernel file {path} does not exist") from None
    except (OSError, UnicodeDecodeError) as e:
        raise KernelBenchError(f"cannot read kernel file {path}: {e}") from None
    job = EvalJob(problem=problem, candidate_source=source, settings=settings, sample_id=sample_id)
    (result,) = runner.run([job], progress=False)
    if output:
        atomic_write_text(output, result.to_json() + "\n")
    return result


# ---------------------------------------------------------------------------------------------
# A run directory


@dataclass
class RunEvaluation:
    run_dir: Path
    level: int
    results: list[KernelResult]
    n_evaluated: int
    n_reused: int


def evaluate_run_dir(run_dir: str | Path, problems: ProblemSet, settings: EvalSettings, runner: ModalRunner,
                     level: int | None = None, progress: bool = True) -> RunEvaluation:
    """Evaluate every kernel of a run that has no result yet, writing each result as it arrives.

    The library's run evaluation does the work (the same one ``kernelbench evaluate-run`` uses);
    it counts results that stand for a Modal infrastructure failure (``RemoteError``) as missing,
    so running the command again retries exactly the jobs that got no verdict.
    """
    from kernelbench.generation.run_eval import evaluate_run_dir as library_evaluate_run_dir
    from kernelbench.runs import RunDirectory

    path = Path(run_dir)
    if not path.is_dir():
        raise RunDirectoryError(f"run directory {path} does not exist")
    rd = RunDirectory(path, level=level)
    if not rd.kernels():
        raise RunDirectoryError(f"{path} holds no level_<L>_problem_<P>_sample_<S>_kernel.py files")
    if rd.level is None:
        raise RunDirectoryError(f"cannot tell the level of {path}; pass --level")

    summary = library_evaluate_run_dir(rd, problems, settings, runner, progress=progress)
    final = rd.load_results()
    results = [final[(r.problem_id, r.sample_id)] for r in summary.results if (r.problem_id, r.sample_id) in final]
    return RunEvaluation(run_dir=path, level=rd.level, results=results, n_evaluated=summary.evaluated,
                         n_reused=summary.already_done)


def run_level(run_dir: str | Path, level: int | None = None) -> int:
    """The run's level: given, recorded in run.json, or read off its kernel file names."""
    from kernelbench.runs import RunDirectory

    path = Path(run_dir)
    if not path.is_dir():
        raise RunDirectoryError(f"run directory {path} does not exist")
    rd = RunDirectory(path, level=level)
    if rd.level is None:
        raise RunDirectoryError(f"cannot tell the level of {path} (no kernels, no run.json); pass --level")
    return rd.level


def run_backend(run_dir: str | Path, default: str = DEFAULT_BACKEND) -> str:
    """The backend recorded in the run's ``run.json`` by ``generate``, else ``default``.

    A run.json that cannot be read is a RunDirectoryError naming the file and the field.
    """
    from kernelbench.runs import RUN_INFO, RunInfo

    return RunInfo.load(Path(run_dir) / RUN_INFO).backend or default


# ---------------------------------------------------------------------------------------------
# Baselines


@dataclass
class BaselineRun:
    """What a Modal baseline run did, per problem, for the entry point's summary; ``report`` has it per mode."""

    path: Path
    n_measured: int
    n_reused: int
    failures: list[str] = field(default_factory=list)
    gpu_names: set[str] = field(default_factory=set)
    report: BaselineRunReport | None = None

    @classmethod
    def of(cls, report: BaselineRunReport, gpu_name: str | None) -> BaselineRun:
        """Problems with a time measured now, problems whose every mode was already there, each failure."""
        statuses: dict[tuple[int, int], set[str]] = {}
        for o in report.outcomes:
            statuses.setdefault((o.level, o.problem_id), set()).add(o.status)
        failures = [f"{problem_key(o.level, o.problem_id)} {o.mode}: {o.error}" for o in report.failures]
        return cls(path=report.path, n_measured=sum("measured" in s for s in statuses.values()),
                   n_reused=sum(s == {"reused"} for s in statuses.values()), failures=failures,
                   gpu_names={gpu_name} if gpu_name else set(), report=report)


def measure_baselines(problems: ProblemSet, modes: Sequence[str], settings: EvalSettings, runner: ModalRunner,
                      output: str | Path, resume: bool = True, progress: bool = True) -> BaselineRun:
    """Measure each problem's reference on the runner's GPU into ``output``, written as results arrive.

    The library's baseline run does the work, through its one writer (the same as ``kernelbench baselines
    --runner modal``): with ``resume``, times already in ``output`` are kept and new ones merged in, and
    the file must then hold comparable times (same GPU type, timing protocol, precision and problem set).
    """
    from kernelbench.baselines import BaselineFile, measure_into_via_modal

    file = BaselineFile.open(output, runner.gpu, precision=settings.precision, restart=not resume,
                             restart_flag="--no-resume", force_flag=None)
    report = measure_into_via_modal(file, problems, modes, settings, runner, progress=progress)
    return BaselineRun.of(report, file.environment.get("gpu_name"))


# ---------------------------------------------------------------------------------------------
# Submissions


def evaluate_submission_file(submission: str | Path, problems: ProblemSet, settings: EvalSettings,
                             runner: ModalRunner, runs_dir: str | Path = "runs",
                             results_dir: str | Path | None = "data/evaluations", entry: str | None = None,
                             progress: bool = True):
    """Evaluate a leaderboard submission through the leaderboard's own pipeline, on this runner."""
    from leaderboard.evaluate import evaluate_submission

    return evaluate_submission(submission, problems, settings, runs_dir=runs_dir, results_dir=results_dir,
                               runner_name="modal", gpu=runner.gpu, runner=runner, entry=entry, progress=progress)


# ---------------------------------------------------------------------------------------------
# Tables


def results_table(results: Sequence[KernelResult]) -> str:
    from tabulate import tabulate

    rows = []
    for r in sorted(results, key=lambda r: (r.level, r.problem_id, r.sample_id)):
        gpu = r.environment.gpu_name if r.environment and r.environment.gpu_name else "-"
        rows.append([r.key, r.verdict(), _fmt(r.runtime_ms), _fmt(r.ref_runtime_ms),
                     f"{r.speedup:.3f}x" if r.speedup is not None else "-", gpu,
                     r.error.one_line()[:70] if r.error else ""])
    return tabulate(rows, headers=["kernel", "verdict", "ms", "ref ms", "speedup", "GPU", "error"])


def results_summary(results: Sequence[KernelResult]) -> str:
    n = len(results)
    compiled = sum(r.compiled for r in results)
    correct = sum(r.correct for r in results)
    remote = sum(r.infrastructure_failure for r in results)
    text = f"{n} kernel(s): {compiled} compiled, {correct} correct"
    if remote:
        text += f", {remote} not run (Modal failures; run again to retry them)"
    return text


def _fmt(ms: float | None) -> str:
    return f"{ms:.4f}" if ms is not None else "-"


# ---------------------------------------------------------------------------------------------
# The end-to-end check for a new account


@dataclass
class CheckItem:
    """One thing the check proves (or fails to), in the words the user reads."""

    what: str
    ok: bool
    detail: str = ""


def check_job(backend: str = "triton") -> EvalJob:
    """The check's one job: the worked ReLU solution (level 1 problem 8), timed, at full size."""
    from kernelbench.problems import load_problems
    from kernelbench.solutions import list_solutions

    solution = next(s for s in list_solutions(backend, level=1) if s.problem_id == 8)
    problem = load_problems("builtin", levels=[1]).get(1, 8)
    settings = EvalSettings(backend=backend, correctness_trials=3, measure_timing=True, timing_budget_s=1.0)
    return EvalJob(problem=problem, candidate_source=solution.source, settings=settings)


def check_report(result: KernelResult, gpu: str) -> list[CheckItem]:
    """What one evaluated worked solution says about the Modal path, item by item.

    The image built and the function was scheduled if any result came back that is not a
    Modal failure; the rest is read from the result itself.
    """
    env = result.environment
    came_back = not result.infrastructure_failure
    items = [CheckItem("image built, GPU function scheduled, result returned", came_back,
                       result.error.one_line() if (result.error and not came_back) else "")]
    if not came_back:
        return items
    gpu_name = env.gpu_name if env and env.gpu_name else ""
    items.append(CheckItem(f"ran on a {gpu} GPU", bool(gpu_name), gpu_name or "no GPU reported (ran on the CPU?)"))
    items.append(CheckItem("worked solution compiled", result.compiled,
                           result.error.one_line() if result.error and not result.compiled else ""))
    items.append(CheckItem("worked solution passed its correctness trials", result.correct,
                           result.error.one_line() if result.error else ""))
    timed = result.runtime_ms is not None and result.ref_runtime_ms is not None
    items.append(CheckItem("candidate and reference timed", timed,
                           f"{result.runtime_ms:.4f} ms vs {result.ref_runtime_ms:.4f} ms" if timed
                           else (result.timing_note or "no timing")))
    items.append(CheckItem("speed-of-light check ran (needs the shipped measured_rates.json)",
                           result.roofline is not None, "" if result.roofline is not None else "no roofline info"))
    return items


def check_text(items: Sequence[CheckItem]) -> str:
    lines = [f"[{'ok' if i.ok else 'FAIL'}] {i.what}" + (f": {i.detail}" if i.detail else "") for i in items]
    verdict = "everything the check covers works" if all(i.ok for i in items) else "some of it does not work"
    return "\n".join([*lines, f"Modal check: {verdict}."])


#: The hub check's model: the one official level-4 problems 7, 16 and 19 load (about 0.5 GB of weights).
CHECK_HUB_MODEL = "gpt2"
CHECK_HUB_PROBLEM = '''
import torch
from transformers import AutoModelForCausalLM, AutoConfig

class Model(torch.nn.Module):
    def __init__(self, model_name, config):
        super().__init__()
        self.model_name = model_name
        self.config = config
        self.model = AutoModelForCausalLM.from_pretrained(self.model_name, config=self.config)

    def forward(self, x):
        return self.model(x).logits

model_name = "MODEL"
config = AutoConfig.from_pretrained(model_name)
vocab_size = config.vocab_size
sequence_length = 32
batch_size = 1

def get_inputs():
    return [torch.randint(0, vocab_size, (batch_size, sequence_length))]

def get_init_inputs():
    return [model_name, config]
'''.replace("MODEL", CHECK_HUB_MODEL)


def check_hub_job() -> EvalJob:
    """The hub check's job: an official-style level-4 problem on ``gpt2``, the reference itself as candidate.

    It goes through the trusted fetch (download into the hub cache Volume) and ``evaluate_hub_<gpu>``
    (the Volume read-only, no network): both sides load the model offline. Not timed: correctness only.
    """
    from kernelbench.problems.contract import extra_requirements, identity_candidate

    problem = Problem(level=4, problem_id=1, name=f"check_{CHECK_HUB_MODEL}_bs1_seq32", code=CHECK_HUB_PROBLEM,
                      source="modal-check", requirements=extra_requirements(CHECK_HUB_PROBLEM))
    settings = EvalSettings(backend="torch", correctness_trials=2, measure_timing=False)
    return EvalJob(problem=problem, candidate_source=identity_candidate(CHECK_HUB_PROBLEM), settings=settings)


def check_hub_report(result: KernelResult) -> list[CheckItem]:
    """What the hub job's result says about level 4 on Modal."""
    if result.infrastructure_failure:
        return [CheckItem(f"hub model {CHECK_HUB_MODEL} fetched by the trusted function and the level-4 style "
                          "kernel evaluated", False, result.error.one_line() if result.error else "")]
    env = result.environment
    return [
        CheckItem(f"hub model {CHECK_HUB_MODEL} fetched into the hub cache Volume and loaded offline, read-only",
                  result.compiled, result.error.one_line() if result.error and not result.compiled else ""),
        CheckItem("level-4 style kernel passed its correctness trials", result.correct,
                  result.error.one_line() if result.error else ""),
        CheckItem("the kernel ran without network", env is not None and env.network is not True,
                  "" if env is not None and env.network is not True else "the result says the candidate had network"),
    ]
