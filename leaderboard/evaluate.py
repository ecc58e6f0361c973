"""Evaluate a submission: kernels -> run directories -> EvalJobs -> a runner -> a results bundle.

The submission is read as data (never imported here); kernels run only inside the evaluator's
isolated workers, locally or on Modal, through ``kernelbench.runners.get_runner``. Each result is
written to its level's run directory as it arrives, so an interrupted evaluation resumes where it
stopped; the bundle is written at the end from what the run directories hold.
"""

from __future__ import annotations

import json
import logging
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import date
from pathlib import Path

from kernelbench.evaluation.settings import EvalJob, EvalSettings
from kernelbench.hardware import canonical_gpu
from kernelbench.problems.identity import identify
from kernelbench.problems.model import ProblemSet
from kernelbench.results import KernelResult
from kernelbench.runs import RunDirectory, RunInfo
from leaderboard.bundle import ResultsBundle, check_gpu_label, write_bundle
from leaderboard.convert import LevelRun, submission_to_runs
from leaderboard.errors import SubmissionError
from leaderboard.schema import Submission, check_entry_id, entry_id_for, load_submission

log = logging.getLogger(__name__)


@dataclass
class SubmissionEvaluation:
    entry: str
    gpu: str
    bundle_path: Path | None
    runs: list[LevelRun]
    n_evaluated: int
    n_reused: int
    results: list[KernelResult] = field(default_factory=list)
    #: This run's results that are not verdicts (infrastructure failures: a lost container, a hub model the
    #: local cache lacks); their kernels are evaluated again by the next run.
    no_verdict: list[KernelResult] = field(default_factory=list)


def build_jobs(submission: Submission, problems: ProblemSet, settings: EvalSettings) -> list[EvalJob]:
    """One job per ranked kernel, with the kernel's own backend; unknown problems are an error."""
    jobs = []
    unknown = []
    known = {(p.level, p.problem_id) for p in problems}
    for key, source in submission.kernel_items(ranked_only=True):
        if (key.level, key.problem_id) not in known:
            unknown.append(str(key))
            continue
        problem = problems.get(key.level, key.problem_id)
        jobs.append(EvalJob(problem=problem, candidate_source=source,
                            settings=settings.with_(backend=submission.backend_for(source)),
                            sample_id=key.sample_id))
    if unknown:
        more = f" and {len(unknown) - 3} more" if len(unknown) > 3 else ""
        raise SubmissionError(f"kernels for problems not in {problems.source}: {', '.join(unknown[:3])}{more}")
    return jobs


def local_gpu_label() -> str:
    """The canonical name of this machine's first GPU, or ``CPU`` (Triton interpreter path)."""
    import torch  # lazy: heavy

    if torch.cuda.is_available():
        return canonical_gpu(torch.cuda.get_device_name(0)) or "GPU"
    return "CPU"


def measured_gpu(results: Sequence[KernelResult], fallback: str) -> str:
    """The GPU most results ran on (Modal may substitute); ``CPU`` for results measured on the CPU."""
    names: Counter[str] = Counter()
    for r in results:
        env = r.environment
        if env is None:
            continue
        if env.gpu_name:
            names[canonical_gpu(env.gpu_name) or env.gpu_name] += 1
        elif env.device and env.device.startswith("cpu"):
            names["CPU"] += 1
    if not names:
        return fallback
    top, _ = names.most_common(1)[0]
    if len(names) > 1:
        log.warning("results ran on several GPU types %s; labelling the bundle %s", dict(names), top)
    return top.replace(" ", "-")


def _is_verdict(result: KernelResult | None) -> bool:
    """A result that judges the kernel; an infrastructure failure (Modal lost a container) does not."""
    return result is not None and not result.infrastructure_failure


def _current(result: KernelResult | None, job: EvalJob) -> bool:
    """A verdict on the problem as it is now: one recorded for an earlier version of it is stale."""
    if not _is_verdict(result):
        return False
    recorded = result.problem_hash  # type: ignore[union-attr]
    return not recorded or job.problem.matches_hash(recorded)


def _pending(lr: LevelRun, jobs_by_key: dict[str, EvalJob]) -> tuple[list[EvalJob], int]:
    have = RunDirectory(lr.path, level=lr.level).load_results()
    pending, reused = [], 0
    for key in [*lr.written, *lr.unchanged]:
        job = jobs_by_key.get(str(key))
        if job is None:
            continue
        if _current(have.get((key.problem_id, key.sample_id)), job):
            reused += 1
        else:
            pending.append(job)
    return pending, reused


def evaluate_submission(
    submission_path: str | Path,
    problems: ProblemSet,
    settings: EvalSettings,
    runs_dir: str | Path = "runs",
    results_dir: str | Path | None = "data/evaluations",
    runner_name: str = "local",
    gpu: str | None = None,
    runner=None,
    entry: str | None = None,
    runner_options: dict | None = None,
    progress: bool = True,
    on_result: Callable[[KernelResult], None] | None = None,
) -> SubmissionEvaluation:
    """Evaluate every ranked kernel not yet evaluated, then write the (entry, GPU) results bundle.

    ``runner`` may be passed ready-made (tests, the Modal app); otherwise it is
    ``get_runner(runner_name, gpu=gpu, **runner_options)`` (Modal's cost controls travel there). The GPU label is this machine's GPU for the local runner
    and ``gpu`` for Modal; the bundle is finally labelled with the GPU the results report.
    """
    from leaderboard.validate import validate_file

    path = Path(submission_path)
    entry = check_entry_id(entry or entry_id_for(path))
    check = validate_file(path, problems, use_guard=False)
    if not check.passed:
        first = next(i for i in check.issues if i.severity == "error")
        raise SubmissionError(
            f"{path} has {check.n_errors} validation error(s), e.g. {first.message}; "
            f"run 'kernelbench leaderboard validate {path}' for the full list"
        )
    submission = load_submission(path)

    if runner_name == "local":
        label = local_gpu_label()
        if gpu and canonical_gpu(gpu) != label:
            log.warning("--gpu %s is ignored by the local runner: this machine has %s", gpu, label)
    else:
        label = canonical_gpu(gpu or "H100") or "H100"
    label = check_gpu_label(label.replace(" ", "-"))

    # Each submission builds into its own corner of the CUDA build cache: its code runs where it builds.
    settings = settings.with_(cache_namespace=f"sub-{submission.sha256()[:16]}")
    jobs = build_jobs(submission, problems, settings)
    jobs_by_key = {j.key: j for j in jobs}
    runs = submission_to_runs(submission, runs_dir, f"{entry}_{label}", ranked_only=True,
                              run_info=RunInfo(source=_source_kind(problems.source),
                                               source_path=_source_path(problems.source),
                                               problem_set=identify(problems), gpu=label, runner=runner_name))
    pending: list[EvalJob] = []
    no_verdict: list[KernelResult] = []
    reused = 0
    for lr in runs:
        p, r = _pending(lr, jobs_by_key)
        pending += p
        reused += r
    log.info("%s on %s: %d kernel(s) to evaluate, %d result(s) reused", entry, label, len(pending), reused)

    if pending:
        if runner is None:
            from kernelbench.runners import get_runner

            runner = (get_runner(runner_name, gpu=gpu, **(runner_options or {})) if runner_name != "local"
                      else get_runner("local"))
        run_dirs = {lr.level: RunDirectory(lr.path, level=lr.level) for lr in runs}

        def _save(index: int, result: KernelResult) -> None:
            run_dirs[result.level].save_result(result)
            if not _is_verdict(result):
                no_verdict.append(result)
            if on_result is not None:
                on_result(result)

        runner.run(pending, on_result=_save, progress=progress)

    results: list[KernelResult] = []
    for lr in runs:
        have = RunDirectory(lr.path, level=lr.level).load_results()
        for key in [*lr.written, *lr.unchanged]:
            r = have.get((key.problem_id, key.sample_id))
            job = jobs_by_key.get(str(key))
            if job is not None and _current(r, job):
                results.append(r)  # type: ignore[arg-type]
    missing = len(jobs) - len(results)
    bundle_path = None
    bundle_gpu = measured_gpu(results, label)
    if missing:
        log.warning("%d kernel(s) have no verdict yet (not run, or lost to an infrastructure failure); "
                    "no bundle written: run the same command again to resume", missing)
    elif results_dir is not None:
        bundle = ResultsBundle(
            entry=entry, gpu=check_gpu_label(bundle_gpu), submission_sha256=submission.sha256(),
            problem_source=problems.source, problem_set=identify(problems),
            runner=runner_name if runner_name == "local" else f"{runner_name}:{label}",
            evaluated_on=date.today().isoformat(), settings=_settings_record(settings), results=results,
        )
        bundle_path = write_bundle(bundle, results_dir)
    return SubmissionEvaluation(entry=entry, gpu=bundle_gpu, bundle_path=bundle_path, runs=runs,
                                n_evaluated=len(pending), n_reused=reused, results=results, no_verdict=no_verdict)


def _source_kind(label: str) -> str:
    if label.startswith("kernelbench:"):  # the official set read from a folder (load_official)
        return "kernelbench"
    if label.startswith("directory:"):
        return "directory"
    if label.startswith("huggingface"):
        return "huggingface"
    return "builtin"


def _source_path(label: str) -> str | None:
    for prefix in ("directory:", "huggingface:", "kernelbench:"):
        if label.startswith(prefix):
            return label[len(prefix):]
    return None


def bundle_from_runs(
    submission: Submission,
    entry: str,
    level_runs: dict[int, str | Path],
    problems: ProblemSet,
    gpu: str,
    evaluated_on: str | None = None,
) -> ResultsBundle:
    """Import results already in run directories (``eval_results.json``) as a bundle.

    For the seed's ``update_leaderboard.py --level1 ...`` flow: runs evaluated elsewhere are
    scored here by the same scoring module. Only results of kernels the submission holds count.
    """
    from kernelbench.errors import RunDirectoryError
    from kernelbench.runs import read_eval_results

    wanted = {(k.level, k.problem_id, k.sample_id) for k, _ in submission.kernel_items(ranked_only=True)}
    results = []
    for level, where in sorted(level_runs.items()):
        where = Path(where)
        results_file = where / "eval_results.json" if where.is_dir() else where
        if not results_file.exists():
            raise RunDirectoryError(f"{results_file} does not exist (expected a run directory or its eval_results.json)")
        raw = json.loads(results_file.read_text(encoding="utf-8"))
        if isinstance(raw, dict) and "total_count" in raw and "fast_p" in raw:
            raise RunDirectoryError(
                f"{results_file} is a score summary (benchmark_eval_analysis output); pass the run directory or its "
                f"eval_results.json so the leaderboard can score per problem with kernelbench.scoring"
            )
        for (pid, _sid), r in sorted(read_eval_results(results_file, level).items()):
            if (level, pid, r.sample_id) not in wanted:
                continue
            if r.problem_name in ("", str(pid)):
                try:
                    r = r.model_copy(update={"problem_name": problems.get(level, pid).name})
                except Exception:  # unknown problem: aggregation ignores it
                    pass
            results.append(r)
    return ResultsBundle(entry=entry, gpu=check_gpu_label(gpu), submission_sha256=submission.sha256(),
                         problem_source=problems.source, problem_set=identify(problems),
                         runner="imported", evaluated_on=evaluated_on,
                         results=results)


def _settings_record(settings: EvalSettings) -> dict:
    """Settings shared by the whole evaluation; the backend is per kernel, so it is left out."""
    d = settings.to_dict()
    d.pop("backend", None)
    return d
