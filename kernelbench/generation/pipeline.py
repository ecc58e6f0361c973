"""Generate candidates for a problem set into a run directory, and refine them over several turns.

Per sample the run directory gets the kernel (``level_L_problem_P_sample_S_kernel.py``, the name
KernelBench uses), the prompt (``..._prompt.txt``), the raw reply (``..._response.txt``, plus
``..._reasoning.txt`` when the API returns reasoning separately) and the usage (``..._usage.json``:
tokens, cost, latency, attempts, error). A kernel file exists only when code was extracted, so a
rerun skips exactly the samples that are done and retries the ones that failed.

Refinement (``turns > 1``) runs in rounds: generate for every open sample, evaluate the round as one
batch, then send each sample its verdict. Turn ``k`` keeps its files as ``..._turn<k>_kernel.py``,
``..._turn<k>_prompt.txt``, ``..._turn<k>_response.txt``, ``..._turn<k>_usage.json`` and
``..._turn<k>_result.json``; the best correct kernel (fastest, earliest on ties; the last attempt if
none is correct) is copied to the plain kernel name and its result saved to ``eval_results.json``.

With ``feedback="profile"`` every correct turn is also profiled (Nsight Compute, see
:mod:`kernelbench.profiling`): the compact profile is kept as ``..._turn<k>_profile.txt`` (the report as
``..._turn<k>_profile.json`` when there is one, "profile unavailable: <why>" otherwise) and the next prompt
carries the profile of the last correct turn.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from kernelbench.backends import DEFAULT_BACKEND
from kernelbench.generation.client import Completion, LLMClient, Usage
from kernelbench.generation.extract import Extraction, extract_code
from kernelbench.io_utils import atomic_write_text
from kernelbench.runs import RunDirectory

if TYPE_CHECKING:
    from kernelbench.evaluation.settings import EvalSettings
    from kernelbench.problems.model import Problem, ProblemSet
    from kernelbench.results import KernelResult
    from kernelbench.runners.base import Runner

log = logging.getLogger(__name__)

PROMPT, RESPONSE, REASONING, USAGE, KERNEL, RESULT = (
    "prompt.txt", "response.txt", "reasoning.txt", "usage.json", "kernel.py", "result.json")
PROFILE_TEXT, PROFILE_JSON = "profile.txt", "profile.json"
TURNS_SUMMARY = "turns.json"
Status = Literal["generated", "failed", "skipped", "not_run"]
#: What a refinement turn sends back: the verdict (errors, times), or the verdict and a profile of the last
#: correct kernel.
FEEDBACK_MODES: tuple[str, ...] = ("verdict", "profile")


@dataclass(frozen=True)
class ProfileNote:
    """A profile for the next prompt: the compact text, and the report as JSON when one was taken."""

    text: str
    report_json: str | None = None


#: Profiles one correct kernel: ``(problem, source) -> ProfileNote``. It must not raise: when no profile can be
#: taken it says so in the note ("profile unavailable: <why>"), which goes to the model as it is.
Profiler = Callable[["Problem", str], ProfileNote]


@dataclass(frozen=True)
class PromptOptions:
    """What the prompt says about the target: backend, precision, GPU and tolerance mode."""

    backend: str = DEFAULT_BACKEND
    precision: str = "fp32"
    gpu: str | None = None
    tolerance_mode: str = "default"


class SpendTracker:
    """Running cost across threads; once it reaches the cap, no new request starts.

    Requests already in flight finish, so the total can pass the cap by at most the cost of the
    requests that were running when it was reached. A response without a known price adds nothing
    and is counted in ``unpriced``: the cap cannot see it.
    """

    def __init__(self, cap_usd: float | None = None):
        if cap_usd is not None and cap_usd < 0:
            raise ValueError("spend cap must not be negative")
        self.cap_usd = cap_usd
        self._lock = threading.Lock()
        self.spent_usd = 0.0
        self.unpriced = 0
        self.refused = 0

    def add(self, usage: Usage | None) -> None:
        if usage is None:
            return
        with self._lock:
            if usage.cost_usd is None:
                if usage.total_tokens:
                    self.unpriced += 1
            else:
                self.spent_usd += usage.cost_usd

    def try_start(self) -> bool:
        """May a new request start? Counts the refusals for the summary."""
        with self._lock:
            if self.cap_usd is not None and self.spent_usd >= self.cap_usd:
                self.refused += 1
                return False
            return True

    @property
    def reached(self) -> bool:
        with self._lock:
            return self.cap_usd is not None and self.spent_usd >= self.cap_usd


@dataclass
class SampleRecord:
    """What happened to one sample (one turn of it, when refining)."""

    level: int
    problem_id: int
    problem_name: str
    sample_id: int
    status: Status
    reason: str | None = None
    usage: Usage | None = None
    latency_s: float | None = None
    attempts: int = 0
    kernel_path: Path | None = None
    turn: int | None = None
    warnings: tuple[str, ...] = ()

    @property
    def key(self) -> str:
        return f"level_{self.level}_problem_{self.problem_id}_sample_{self.sample_id}"


@dataclass
class GenerationSummary:
    records: list[SampleRecord] = field(default_factory=list)
    cap_usd: float | None = None
    cap_reached: bool = False
    unpriced: int = 0

    def count(self, status: Status) -> int:
        return sum(1 for r in self.records if r.status == status)

    @property
    def prompt_tokens(self) -> int:
        return sum(r.usage.prompt_tokens for r in self.records if r.usage)

    @property
    def completion_tokens(self) -> int:
        return sum(r.usage.completion_tokens for r in self.records if r.usage)

    @property
    def cost_usd(self) -> float:
        return sum(r.usage.cost_usd for r in self.records if r.usage and r.usage.cost_usd is not None)

    @property
    def failures(self) -> list[SampleRecord]:
        return [r for r in self.records if r.status == "failed"]

    def merge(self, other: GenerationSummary) -> None:
        self.records.extend(other.records)
        self.cap_reached = self.cap_reached or other.cap_reached
        self.unpriced = max(self.unpriced, other.unpriced)


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def usage_record(completion: Completion, extraction: Extraction | None) -> dict:
    """The ``usage.json`` body: tokens, cost, latency, attempts and errors; never the key or the text."""
    u = completion.usage
    return {
        "model": completion.model,
        "ok": completion.ok and extraction is not None and extraction.ok,
        "error": completion.error or (extraction.error if extraction is not None else None),
        "error_type": completion.error_type or ("no_code" if extraction is not None and not extraction.ok else None),
        "prompt_tokens": u.prompt_tokens,
        "completion_tokens": u.completion_tokens,
        "total_tokens": u.total_tokens,
        "reasoning_tokens": u.reasoning_tokens,
        "cost_usd": u.cost_usd,
        "latency_s": round(completion.latency_s, 4),
        "elapsed_s": round(completion.elapsed_s, 4),
        "attempts": completion.attempts,
        "finish_reason": completion.finish_reason,
        "extraction": extraction.to_dict() if extraction is not None else None,
        "created_at": _now(),
    }


def _prefix(turn: int | None) -> str:
    return f"turn{turn}_" if turn is not None else ""


def generate_sample(client: LLMClient, problem: Problem, sample_id: int, run_dir: RunDirectory, prompt: str,
                    tracker: SpendTracker | None = None, turn: int | None = None) -> SampleRecord:
    """One request for one sample; writes the prompt, the reply, the usage and (if any) the kernel."""
    lv, pid = problem.level, problem.problem_id
    if tracker is not None and not tracker.try_start():
        return SampleRecord(lv, pid, problem.name, sample_id, "not_run", "spend cap reached", turn=turn)
    pre = _prefix(turn)
    run_dir.write_text(lv, pid, sample_id, pre + PROMPT, prompt)
    completion = client.complete(prompt)
    if tracker is not None:
        tracker.add(completion.usage)
    extraction = extract_code(completion.text, completion.reasoning) if completion.ok else None
    if completion.text is not None:
        run_dir.write_text(lv, pid, sample_id, pre + RESPONSE, completion.text)
    if completion.reasoning:
        run_dir.write_text(lv, pid, sample_id, pre + REASONING, completion.reasoning)
    run_dir.write_json(lv, pid, sample_id, pre + USAGE, usage_record(completion, extraction))
    base = dict(usage=completion.usage, latency_s=completion.latency_s, attempts=completion.attempts, turn=turn)
    if not completion.ok:
        return SampleRecord(lv, pid, problem.name, sample_id, "failed",
                            f"{completion.error_type}: {completion.error}", **base)
    assert extraction is not None
    if not extraction.ok:
        return SampleRecord(lv, pid, problem.name, sample_id, "failed", f"no_code: {extraction.error}", **base)
    path = run_dir.write_text(lv, pid, sample_id, pre + KERNEL, extraction.code or "")
    return SampleRecord(lv, pid, problem.name, sample_id, "generated", None, kernel_path=path,
                        warnings=extraction.warnings, **base)


def _progress(total: int, desc: str, enabled: bool):
    from kernelbench.progress import progress_bar

    return progress_bar(total=total, desc=desc, unit="sample", enabled=enabled, leave=False)


def _run_tasks(tasks: Sequence[Callable[[], SampleRecord]], concurrency: int, desc: str, progress: bool,
               on_record: Callable[[SampleRecord], None] | None) -> list[SampleRecord]:
    records: list[SampleRecord] = []
    if not tasks:
        return records
    with _progress(len(tasks), desc, progress) as bar, \
            ThreadPoolExecutor(max_workers=max(1, concurrency), thread_name_prefix="kb-gen") as pool:
        futures = [pool.submit(t) for t in tasks]
        for fut in as_completed(futures):
            rec = fut.result()
            records.append(rec)
            if on_record is not None:
                on_record(rec)
            bar.update(1)
    return records


def _sorted(records: list[SampleRecord]) -> list[SampleRecord]:
    return sorted(records, key=lambda r: (r.level, r.problem_id, r.sample_id, r.turn or 0))


def kernel_done(run_dir: RunDirectory, problem: Problem, sample_id: int, turn: int | None = None) -> bool:
    p = run_dir.file_for(problem.level, problem.problem_id, sample_id, _prefix(turn) + KERNEL)
    return p.exists() and p.stat().st_size > 0 and bool(p.read_text(encoding="utf-8").strip())


def generate_samples(problems: ProblemSet | Sequence[Problem], run_dir: RunDirectory, client: LLMClient,
                     options: PromptOptions, samples: int = 1, concurrency: int = 4,
                     tracker: SpendTracker | None = None, progress: bool = True,
                     on_record: Callable[[SampleRecord], None] | None = None) -> GenerationSummary:
    """One request per (problem, sample) without a kernel yet; samples already done are skipped."""
    from kernelbench.prompts import build_prompt

    if samples < 1:
        raise ValueError("samples must be at least 1")
    tracker = tracker or SpendTracker()
    skipped: list[SampleRecord] = []
    tasks: list[Callable[[], SampleRecord]] = []
    for problem in problems:
        prompt: str | None = None
        for sid in range(samples):
            if kernel_done(run_dir, problem, sid):
                skipped.append(SampleRecord(problem.level, problem.problem_id, problem.name, sid, "skipped",
                                            "already generated",
                                            kernel_path=run_dir.kernel_path(problem.level, problem.problem_id, sid)))
                continue
            if prompt is None:
                prompt = build_prompt(problem, options.backend, options.precision, options.gpu, options.tolerance_mode)
            tasks.append(lambda p=problem, s=sid, pr=prompt: generate_sample(client, p, s, run_dir, pr, tracker))
    records = _run_tasks(tasks, concurrency, "generating", progress, on_record)
    return GenerationSummary(_sorted(skipped + records), tracker.cap_usd, tracker.reached, tracker.unpriced)


# ---------------------------------------------------------------- refinement
@dataclass
class TurnOutcome:
    turn: int
    source: str | None
    result: KernelResult | None
    extraction_error: str | None = None
    #: The profile of this turn's kernel (correct turns, ``feedback="profile"``), as the next prompt shows it.
    profile: str | None = None

    def summary(self) -> dict:
        r = self.result
        out = {"turn": self.turn, "has_code": self.source is not None,
               "verdict": r.verdict() if r is not None else "no-code",
               "correct": bool(r and r.correct), "speedup": r.speedup if r is not None else None,
               "runtime_ms": r.runtime_ms if r is not None else None,
               "error": (r.error.one_line() if r is not None and r.error else self.extraction_error)}
        if self.profile is not None:
            out["profile"] = self.profile
        return out


@dataclass
class Chain:
    """The turns of one (problem, sample)."""

    problem: Problem
    sample_id: int
    turns: list[TurnOutcome] = field(default_factory=list)
    stopped: str | None = None

    def last_profiled(self) -> TurnOutcome | None:
        """The last correct turn that has a profile (what ``feedback="profile"`` sends back)."""
        done = [t for t in self.turns if t.result is not None and t.result.correct and t.profile is not None]
        return done[-1] if done else None

    def best(self) -> TurnOutcome | None:
        """The fastest correct turn (earliest on ties), else the last turn that produced code."""
        correct = [t for t in self.turns if t.result is not None and t.result.correct]
        if correct:
            return max(correct, key=lambda t: (t.result.speedup or 0.0, -t.turn))  # type: ignore[union-attr]
        with_code = [t for t in self.turns if t.source is not None]
        return with_code[-1] if with_code else None


@dataclass
class RefinementSummary:
    generation: GenerationSummary
    chains: list[Chain]

    @property
    def n_correct(self) -> int:
        return sum(1 for c in self.chains if (b := c.best()) and b.result is not None and b.result.correct)


def _read_text(path: Path) -> str | None:
    return path.read_text(encoding="utf-8") if path.exists() else None


def _load_turn(run_dir: RunDirectory, chain: Chain, turn: int) -> TurnOutcome | None:
    """A turn already on disk (resume): its kernel, and its result when it was evaluated."""
    from kernelbench.results import KernelResult

    lv, pid, sid = chain.problem.level, chain.problem.problem_id, chain.sample_id
    pre = _prefix(turn)
    source = _read_text(run_dir.file_for(lv, pid, sid, pre + KERNEL))
    result_text = _read_text(run_dir.file_for(lv, pid, sid, pre + RESULT))
    if source is None or not source.strip():
        return None
    result = KernelResult.from_json(result_text) if result_text else None
    return TurnOutcome(turn, source, result, profile=_read_text(run_dir.file_for(lv, pid, sid, pre + PROFILE_TEXT)))


def _profile_turn(run_dir: RunDirectory, chain: Chain, outcome: TurnOutcome, profiler: Profiler) -> None:
    """Profile a correct turn's kernel once (a resumed run keeps the profile it has) and keep the note."""
    if outcome.profile is not None or outcome.source is None:
        return
    try:
        note = profiler(chain.problem, outcome.source)
    except Exception as e:  # a profiler must not raise; if one does, the run goes on and the prompt says why
        log.exception("profiling %s turn %d failed", chain.problem.key, outcome.turn)
        note = ProfileNote(f"profile unavailable: {type(e).__name__}: {e}")
    lv, pid, sid = chain.problem.level, chain.problem.problem_id, chain.sample_id
    pre = _prefix(outcome.turn)
    if note.report_json is not None:
        atomic_write_text(run_dir.file_for(lv, pid, sid, pre + PROFILE_JSON), note.report_json)
    atomic_write_text(run_dir.file_for(lv, pid, sid, pre + PROFILE_TEXT), note.text)
    outcome.profile = note.text


def refine_samples(problems: ProblemSet | Sequence[Problem], run_dir: RunDirectory, client: LLMClient,
                   options: PromptOptions, settings: EvalSettings, runner: Runner, turns: int,
                   samples: int = 1, concurrency: int = 4, tracker: SpendTracker | None = None,
                   progress: bool = True,
                   on_record: Callable[[SampleRecord], None] | None = None,
                   feedback: str = "verdict", profiler: Profiler | None = None) -> RefinementSummary:
    """Generate, evaluate and feed back the verdict, ``turns`` times per sample; keep the best kernel.

    With ``feedback="profile"``, ``profiler`` profiles every correct turn and the next prompt carries the
    profile of the last correct one (kept beside the turn's files as ``turn<k>_profile.txt``).
    """
    from kernelbench.evaluation.settings import EvalJob
    from kernelbench.prompts import build_feedback_prompt, build_prompt

    if turns < 1:
        raise ValueError("turns must be at least 1")
    if feedback not in FEEDBACK_MODES:
        raise ValueError(f"unknown feedback {feedback!r} (choose from {', '.join(FEEDBACK_MODES)})")
    if feedback == "profile" and profiler is None:
        raise ValueError("feedback='profile' needs a profiler")
    tracker = tracker or SpendTracker()
    chains = [Chain(p, s) for p in problems for s in range(samples)]
    gen = GenerationSummary(cap_usd=tracker.cap_usd)
    for turn in range(1, turns + 1):
        # 1. generate (or reload) this turn for every open chain
        tasks: list[Callable[[], SampleRecord]] = []
        pending: dict[tuple[int, int], Chain] = {}
        for chain in chains:
            if chain.stopped:
                continue
            loaded = _load_turn(run_dir, chain, turn)
            if loaded is not None:
                chain.turns.append(loaded)
                continue
            if turn == 1:
                prompt = build_prompt(chain.problem, options.backend, options.precision, options.gpu,
                                      options.tolerance_mode)
            else:
                prev = chain.turns[-1]
                best = chain.best()
                profiled = chain.last_profiled() if feedback == "profile" else None
                prompt = build_feedback_prompt(
                    chain.problem, options.backend, options.precision, options.gpu, prev.source, prev.result,
                    prev.turn, extraction_error=prev.extraction_error,
                    best=best.result if best is not None else None, tolerance_mode=options.tolerance_mode,
                    profile=profiled.profile if profiled is not None else None,
                    profile_turn=profiled.turn if profiled is not None else None)
            pending[(chain.problem.problem_id, chain.sample_id)] = chain
            tasks.append(lambda c=chain, pr=prompt, t=turn: generate_sample(client, c.problem, c.sample_id, run_dir,
                                                                             pr, tracker, turn=t))
        records = _run_tasks(tasks, concurrency, f"turn {turn}: generating", progress, on_record)
        gen.records.extend(records)
        for rec in records:
            chain = pending[(rec.problem_id, rec.sample_id)]
            if rec.status == "not_run":
                chain.stopped = "spend cap reached"
                continue
            source = rec.kernel_path.read_text(encoding="utf-8") if rec.kernel_path else None
            chain.turns.append(TurnOutcome(turn, source, None, extraction_error=None if source else rec.reason))

        # 2. evaluate this turn's new kernels as one batch
        to_eval = [c for c in chains if not c.stopped and c.turns and c.turns[-1].turn == turn
                   and c.turns[-1].source is not None and c.turns[-1].result is None]
        if to_eval:
            jobs = [EvalJob(c.problem, c.turns[-1].source or "", settings, c.sample_id) for c in to_eval]
            got: dict[int, KernelResult] = {}

            def save(index: int, result: KernelResult, _chains: list[Chain] = to_eval, _turn: int = turn,
                     _got: dict[int, KernelResult] = got) -> None:
                c = _chains[index]
                atomic_write_text(run_dir.file_for(c.problem.level, c.problem.problem_id, c.sample_id,
                                                   _prefix(_turn) + RESULT), result.to_json())
                _got[index] = result

            results = runner.run(jobs, on_result=save, progress=progress)
            if len(results) == len(jobs):  # a runner that reports only at the end
                for i, result in enumerate(results):
                    if i not in got:
                        save(i, result)
            for i, c in enumerate(to_eval):
                c.turns[-1].result = got.get(i)
                if i not in got:
                    log.warning("%s turn %d: the runner returned no result", c.problem.key, turn)
        # 3. profile this turn's correct kernels (one at a time: a profile owns the GPU while it runs)
        if feedback == "profile" and profiler is not None and turn < turns:
            for c in chains:
                last = c.turns[-1] if c.turns else None
                if last is not None and last.turn == turn and last.result is not None and last.result.correct:
                    _profile_turn(run_dir, c, last, profiler)
        if tracker.reached:
            for c in chains:
                c.stopped = c.stopped or "spend cap reached"

    for chain in chains:
        _finalize_chain(run_dir, chain)
    gen.cap_reached = tracker.reached
    gen.unpriced = tracker.unpriced
    gen.records = _sorted(gen.records)
    return RefinementSummary(gen, chains)


def _finalize_chain(run_dir: RunDirectory, chain: Chain) -> None:
    """Copy the best turn to the plain KernelBench names and record every turn's verdict."""
    lv, pid, sid = chain.problem.level, chain.problem.problem_id, chain.sample_id
    best = chain.best()
    summary = {"problem_id": pid, "sample_id": sid, "best_turn": best.turn if best else None,
               "stopped": chain.stopped, "turns": [t.summary() for t in chain.turns]}
    if chain.turns:
        run_dir.write_json(lv, pid, sid, TURNS_SUMMARY, summary)
    if best is None or best.source is None:
        return
    run_dir.write_kernel(lv, pid, sid, best.source)
    for suffix in (PROMPT, RESPONSE, USAGE):
        text = _read_text(run_dir.file_for(lv, pid, sid, _prefix(best.turn) + suffix))
        if text is not None:
            atomic_write_text(run_dir.file_for(lv, pid, sid, suffix), text)
    if best.result is not None:
        run_dir.save_result(best.result)
