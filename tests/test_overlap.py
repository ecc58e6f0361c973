"""Untimed work of two workers at once (issue 25, throughput): real workers on the CPU.

A new problem's reference is set up while the candidate loads, and each correctness trial runs on both
workers at once. The tests prove the overlap happens (rendezvous that only a concurrent order can meet;
the sequential order fails them) and that verdicts do not depend on it: a reference that fails or is
random has the job redone alone, and whatever happens to the candidate, the reference stays in step for
the next job of its problem.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from kbtesting import one_problem, problem_source

from kernelbench.evaluation import EvalJob, EvalSettings
from kernelbench.evaluation.parent import DeviceSession, run_job
from kernelbench.evaluation.settings import overlap_enabled
from kernelbench.results import Stage

HONEST = ("import torch\nimport torch.nn as nn\n\nclass ModelNew(nn.Module):\n"
          "    def forward(self, x):\n        return torch.relu(x)\n")


def settings(overlap: bool, **kw) -> EvalSettings:
    # Process isolation: the rendezvous files are written by candidate code (the sandbox would refuse them).
    base = dict(backend="torch", device="cpu", static_guard=False, correctness_trials=2, stage_timeout_s=60.0,
                sandbox="off",
                overlap=overlap)
    base.update(kw)
    return EvalSettings(**base)


def wait_for(marker: Path, seconds: float) -> str:
    """Source of a wait for ``marker`` to exist, raising if it does not within ``seconds``.

    Where the order under test can meet the rendezvous the wait is long (a worker starting on a busy
    2-core machine takes seconds); where it cannot, the wait is short: no wait would be long enough."""
    return (f"_kb_wait(r'{marker}', {seconds})")


WAIT_HELPER = '''import os as _os
import time as _time


def _kb_wait(path, seconds):
    end = _time.monotonic() + seconds
    while not _os.path.exists(path):
        if _time.monotonic() > end:
            raise RuntimeError("rendezvous missed: " + path)
        _time.sleep(0.02)


'''


def evaluate(tmp: Path, problem_code: str, candidates: list[str], overlap: bool, **kw):
    """Each candidate in turn on one session (one reference for them all, as in a batch)."""
    problem = one_problem(tmp, problem_code)
    session = DeviceSession("cpu", spares=1, sandbox="off")
    session.prime("torch")  # as a batch does
    try:
        results = [run_job(session, EvalJob(problem, c, settings(overlap, **kw))) for c in candidates]
        return results, session.reference_key is not None
    finally:
        session.close()


def test_the_setting_defaults_from_the_environment():
    assert overlap_enabled({}) and overlap_enabled({"KB_OVERLAP": "1"})
    assert not overlap_enabled({"KB_OVERLAP": "0"}) and not overlap_enabled({"KB_OVERLAP": "off"})
    assert EvalSettings(backend="torch", overlap=False).to_dict()["overlap"] is False


@pytest.mark.parametrize("overlap", [True, False])
def test_the_reference_is_set_up_while_the_candidate_loads(tmp_path, overlap):
    """The reference's constructor waits for the candidate's import: met only when both run at once."""
    imported = tmp_path / "candidate-imported"
    problem = WAIT_HELPER + problem_source().replace(
        "        super().__init__()\n", f"        super().__init__()\n        {wait_for(imported, 90 if overlap else 3)}\n")
    candidate = f"open(r'{imported}', 'w').close()\n" + HONEST
    (result,), _ = evaluate(tmp_path / "p", problem, [candidate], overlap)
    if overlap:
        assert result.correct, result.error
        assert "reference_setup" in result.stage_times_s and "load" in result.stage_times_s
    else:  # alone, the reference waits for a candidate that has not started: ours, not the candidate's
        assert result.error.stage == Stage.INFRASTRUCTURE and "rendezvous missed" in result.error.message


@pytest.mark.parametrize("overlap", [True, False])
def test_a_correctness_trial_runs_on_both_workers_at_once(tmp_path, overlap):
    """The reference's first trial waits for the candidate's first forward (its two probe calls do not)."""
    ran = tmp_path / "candidate-ran"
    problem = WAIT_HELPER + problem_source().replace(
        "    def forward(self, x):\n",
        "    calls = 0\n\n    def forward(self, x):\n        type(self).calls += 1\n"
        f"        if type(self).calls == 3:\n            {wait_for(ran, 90 if overlap else 3)}\n")
    candidate = HONEST.replace("        return torch.relu(x)\n",
                               f"        open(r'{ran}', 'w').close()\n        return torch.relu(x)\n")
    (result,), _ = evaluate(tmp_path / "p", problem, [candidate], overlap)
    if overlap:
        assert result.correct, result.error
    else:
        assert result.error.stage == Stage.CRASH and result.error.type == "ReferenceFailed"
        assert "rendezvous missed" in result.error.message


def _same_verdict(a, b, flags: bool = True) -> None:
    assert (a.correct, a.compiled) == (b.correct, b.compiled)
    if flags:
        assert a.flags == b.flags
    assert (a.error is None) == (b.error is None)
    if a.error is not None:
        assert (a.error.stage, a.error.type) == (b.error.stage, b.error.type)


def test_a_reference_that_fails_gives_the_same_verdict_with_or_without_overlap(tmp_path):
    """Redone alone: a reference that cannot be built is ours (infrastructure), never the candidate's."""
    problem = problem_source().replace("        super().__init__()\n",
                                       "        super().__init__()\n        raise ValueError('no reference today')\n")
    (on,), _ = evaluate(tmp_path / "on", problem, [HONEST], True)
    (off,), _ = evaluate(tmp_path / "off", problem, [HONEST], False)
    _same_verdict(on, off)
    assert on.error.stage == Stage.INFRASTRUCTURE and "no reference today" in on.error.message


def test_a_random_reference_has_the_candidate_loaded_again_in_eval_mode(tmp_path):
    """Dropout: found only by the setup, after the candidate was loaded in train mode; the job is redone."""
    problem = problem_source(forward="torch.relu(self.drop(x))").replace(
        "        super().__init__()\n", "        super().__init__()\n        self.drop = nn.Dropout(0.5)\n")
    # Correct only in eval() mode, as the sequential order loads it for a random reference.
    candidate = HONEST.replace("        return torch.relu(x)\n",
                               "        return torch.relu(x) if not self.training else x * 0 - 1\n")
    (on,), _ = evaluate(tmp_path / "on", problem, [candidate], True)
    (off,), _ = evaluate(tmp_path / "off", problem, [candidate], False)
    _same_verdict(on, off)
    assert on.correct and any("reference is random" in f for f in on.flags)


FAILS_TO_IMPORT = "raise ImportError('this candidate does not import')\n"
CRASHES_IN_A_TRIAL = HONEST.replace("        return torch.relu(x)\n", "        import os\n        os._exit(3)\n")
WRONG = HONEST.replace("torch.relu(x)", "x + 1")


@pytest.mark.parametrize("name,candidate,stage", [
    ("fails to import", FAILS_TO_IMPORT, Stage.LOAD),
    ("crashes in a trial", CRASHES_IN_A_TRIAL, Stage.CRASH),
    ("wrong", WRONG, Stage.CORRECTNESS),
])
def test_after_a_failing_candidate_the_reference_serves_the_next_one(tmp_path, name, candidate, stage):
    """Whatever became of the candidate, the reference's replies were all read: the next job reuses it."""
    problem = problem_source()
    results, kept = evaluate(tmp_path / "on", problem, [candidate, HONEST], True)
    first, second = results
    assert first.error is not None and first.error.stage == stage, (name, first.error)
    assert second.correct, (name, second.error)
    assert kept
    (off,), _ = evaluate(tmp_path / "off", problem, [candidate], False)
    _same_verdict(first, off)


def test_a_candidate_that_hangs_in_its_load_times_out_and_the_reference_stays_usable(tmp_path):
    hangs = "import time\ntime.sleep(120)\n" + HONEST
    # The limit applies to both loads: 10 s is far beyond an honest load even on a busy 2-core machine.
    results, kept = evaluate(tmp_path / "p", problem_source(), [hangs, HONEST], True, compile_timeout_s=10.0)
    assert results[0].error.stage == Stage.TIMEOUT
    assert results[1].correct and kept


@pytest.mark.gpu
def test_on_a_gpu_an_overlapped_batch_gives_the_verdicts_and_identity_speedups_of_one_in_turn(tmp_path, monkeypatch):
    """Three built-in problems, identity candidates, overlap on and off: the same verdicts, identity speedups
    near 1; the batch counted the problems' roofline costs ahead into its cache."""
    from kernelbench.evaluation import evaluate_batch
    from kernelbench.problems import load_builtin
    from kernelbench.problems.contract import identity_candidate
    from kernelbench.roofline import CostCache

    monkeypatch.setenv("KERNELBENCH_CACHE_DIR", str(tmp_path / "cache"))
    problems = [load_builtin([1]).get(1, pid) for pid in (8, 19, 23)]
    runs = {}
    for overlap in (True, False):
        s = EvalSettings(backend="torch", timing_budget_s=0.5, overlap=overlap)
        jobs = [EvalJob(p, identity_candidate(p.code), s) for p in problems]
        runs[overlap] = evaluate_batch(jobs, progress=False)
    for on, off in zip(runs[True], runs[False]):
        print(on.problem_name, on.speedup, on.speedup_ci95, {k: round(v, 3) for k, v in on.stage_times_s.items()})
        _same_verdict(on, off, flags=False)  # timing flags may differ between two timings
        assert on.correct and 0.9 <= on.speedup <= 1.1
        assert "reference_start" in on.stage_times_s and "reference_start" not in off.stage_times_s
    cache = CostCache(tmp_path / "cache" / "roofline_costs.json")
    assert all(cache.get(p.hash) is not None for p in problems)


def test_spares_of_both_kinds_start_at_once_not_queued_behind_each_other():
    """Each new problem consumes a candidate and a reference worker, and a worker took 6-11 s to start on the lent
    GPU machines: with one spawning thread per spare of one kind (plus one), a sweep's reference starts queued behind
    its candidate starts and jobs waited for workers (session 19). Every spare primed must be starting at once."""
    from kernelbench.evaluation.parent.session import DeviceSession

    session = DeviceSession("cpu", spares=3)
    try:
        session.prime("torch")
        spares = session._all_spares()
        # (references are reused from problem to problem by default: fewer reference spares are kept)
        expected = 3 + session.reference_depth
        assert len(spares) == expected and session.reference_depth >= 2
        queued = [sp for sp in spares if not (sp.future.running() or sp.future.done())]
        assert queued == [], f"{len(queued)} of {expected} spare starts waited for a thread"
    finally:
        session.close()


def _started(spares, timeout_s: float = 120.0) -> None:
    for sp in spares:
        sp.future.result(timeout=timeout_s)


def test_a_spare_begins_its_init_as_soon_as_it_has_started_while_nothing_is_timed():
    """Spares used to begin Init only when a job began or a timing ended: half of a level's new problems then waited
    0.1-1.5 s for their reference's CUDA context (session 20, H200). Now a started spare begins it at once, unless a
    timing is under way; then it waits for allow_gpu_init(), and so does its warm-up."""
    import time

    quiet = DeviceSession("cpu", spares=1, sandbox="off")
    timing = DeviceSession("cpu", spares=1, sandbox="off")
    try:
        quiet.prime("torch")  # nothing timed: no allow_gpu_init() call needed
        timing.quiesce()  # a timing under way on this device
        timing.prime("torch")
        _started(quiet._all_spares() + timing._all_spares())
        time.sleep(0.2)  # the done-callbacks have run by now
        assert all(sp.init_sent is not None for sp in quiet._all_spares())
        assert all(sp.init_sent is None for sp in timing._all_spares()), "an Init began while a timing was under way"
        timing.allow_gpu_init()
        assert all(sp.init_sent is not None for sp in timing._all_spares())
        for sp in quiet._all_spares() + timing._all_spares():  # the warm-up follows each context, nothing timed
            assert sp._done.wait(60) and sp.warm_sent is not None and sp.ready and sp.error is None
        worker = quiet.candidate_worker("torch")  # Init answered once, the worker usable
        assert worker.alive() and worker.info.get("device") == "cpu"
        worker.close()
    finally:
        quiet.close()
        timing.close()


def test_the_last_problems_reference_exits_in_the_background_and_a_quiet_timing_waits_for_it(tmp_path):
    """Closing the last problem's reference took 0.2-0.5 s of every new problem's start (its CUDA context's teardown,
    session 20); it now exits while the next problem sets up, and quiesce() (before any timing) waits for it."""
    import time

    from kernelbench.evaluation.parent.session import reference_key

    problem = one_problem(tmp_path, problem_source())
    job = EvalJob(problem, HONEST, settings(True))
    session = DeviceSession("cpu", spares=1, sandbox="off")
    try:
        session.prime("torch")
        ref, _ = session.reference_for(job, probe_seed=1)
        assert session.reference_key == reference_key(job)
        real_close = ref.close

        def slow_close(timeout: float = 5.0) -> None:  # the real close, after a second's teardown
            time.sleep(1.0)
            real_close(timeout)

        ref.close = slow_close
        t0 = time.monotonic()
        session.drop_reference()
        assert time.monotonic() - t0 < 0.5, "drop_reference waited for the old reference to exit"
        assert ref.alive()
        t0 = time.monotonic()
        session.quiesce()
        assert time.monotonic() - t0 > 0.5, "quiesce did not wait for the old reference's exit"
        assert not ref.alive()
    finally:
        session.close()


def test_a_worker_freezes_what_it_imported_before_any_candidate_code_and_nothing_the_candidate_makes(tmp_path):
    """Between correctness trials a worker frees its outputs' reference cycles with a full collection, which cost
    0.15-0.2 s with torch and the profiler's modules to scan (session 20: every Release of a model with large weights).
    The worker process freezes what exists after its start and its Init, all trusted, so a collection scans only what
    came later; the candidate's own objects are never frozen."""
    import json

    report, calls = tmp_path / "gc.json", tmp_path / "calls.txt"
    candidate = (f"import gc, json\njson.dump({{'frozen': gc.get_freeze_count()}}, open(r'{report}', 'w'))\n" + HONEST)
    candidate = candidate.replace("        return torch.relu(x)\n",
                                  f"        import gc\n        open(r'{calls}', 'a').write(f'{{gc.get_freeze_count()}}\\n')\n"
                                  "        return torch.relu(x)\n")
    results, _ = evaluate(tmp_path, problem_source(), [candidate], overlap=True)
    assert results[0].correct, results[0].error
    at_import = json.loads(report.read_text())["frozen"]
    assert at_import > 10_000, "the worker's start-up objects were not frozen"
    in_forward = {int(line) for line in calls.read_text().split()}
    # (freed frozen objects leave the count; a freeze after the candidate's code ran would add its objects to it)
    assert in_forward and max(in_forward) <= at_import, "objects made after the candidate's code ran were frozen"


def test_only_the_spares_first_in_line_create_their_contexts_ahead_and_the_next_one_follows_a_take():
    """Six processes per kind start ahead on a GPU, only four of them hold a CUDA context (GPU memory): here two
    spares per kind with one context each, on the CPU (where Init is the same command)."""
    import time

    session = DeviceSession("cpu", spares=2, sandbox="off", initialised=1)
    try:
        session.prime("torch")
        spares = session._all_spares()
        _started(spares)
        time.sleep(0.2)
        assert [sp.init_sent is not None for sp in spares] == [True, False, True, False]
        worker = session.candidate_worker("torch")
        time.sleep(0.2)  # the next candidate spare is first in line now
        assert session._all_spares()[0].init_sent is not None
        assert session._all_spares()[1].init_sent is None  # the one just started behind it
        worker.close()
    finally:
        session.close()


def test_the_number_of_spares_on_a_gpu_follows_the_cpus_per_gpu_unless_kb_spares_says_otherwise():
    from kernelbench.evaluation.parent.session import GPU_SPARES, GPU_SPARES_FEW_CPUS, spares_default

    assert spares_default({}, cpus_per_gpu=16) == GPU_SPARES == 6  # the lent machines: 16 CPUs per GPU
    assert spares_default({}, cpus_per_gpu=8) == GPU_SPARES_FEW_CPUS == 4  # a Modal container's 8
    assert spares_default({"KB_SPARES": " 6 "}, cpus_per_gpu=4) == 6
    assert spares_default({"KB_SPARES": "0"}, cpus_per_gpu=16) == 0
    for bad in ("six", "-1", "2.5"):
        with pytest.raises(ValueError, match="KB_SPARES"):
            spares_default({"KB_SPARES": bad}, cpus_per_gpu=16)


def test_a_spare_whose_init_failed_is_never_handed_out_and_a_timing_goes_on_without_it():
    """Review finding (session 20): a spare whose Init failed (out of memory beside another job, say) stayed first in
    line and the next take() returned its dead worker: the candidate given it crashed without running. Now quiesce()
    drops it, and a take tries the next spare (or a fresh start)."""
    import time

    session = DeviceSession("cpu", spares=2, sandbox="off")
    try:
        session.quiesce()  # as if timing: the spares start but send no Init yet
        session.prime("torch")
        spares = session._all_spares()
        _started(spares)
        time.sleep(0.2)
        first_candidate, first_reference = spares[0], spares[2]
        for sp in (first_candidate, first_reference):  # their processes die before their Init
            assert sp.init_sent is None
            sp.future.result().proc.kill()
            sp.future.result().proc.wait()
        session.allow_gpu_init()  # Init goes to every spare: two of them cannot answer
        # A candidate's take: the dead one is skipped for the next in line.
        worker = session.candidate_worker("torch")
        assert worker is not first_candidate.future.result() and worker.alive()
        worker.close()
        # Before a timing: the dead reference spare is dropped, not an error of the job being timed.
        session.quiesce()
        assert all(sp is not first_reference for sp in session._all_spares())
        session.allow_gpu_init()
        ref = session.take_reference()
        assert ref.alive()
        ref.close()
    finally:
        session.close()


def _state(pid: int) -> str:
    """The process's state letter from /proc (T: stopped)."""
    with open(f"/proc/{pid}/stat") as f:
        return f.read().rsplit(")", 1)[1].split()[0]


def _settles(pid: int, ok, seconds: float = 5.0) -> bool:
    """Does the process's state satisfy ``ok`` within ``seconds`` (a signal is delivered when the process is next
    scheduled: on a loaded machine not at once)?"""
    import time

    end = time.monotonic() + seconds
    while not ok(_state(pid)):
        if time.monotonic() > end:
            return False
        time.sleep(0.01)
    return True


def test_a_spares_step_under_way_as_a_timing_begins_is_paused_not_waited_for_and_goes_on_after():
    """Session 22 (H200): the timings of the 250 official problems waited 0.28 s each for spares' Inits and warm-ups
    under way. With KB_PAUSE_INITS=1 quiesce() stops such a spare where it stands (SIGSTOP) and allow_gpu_init() lets
    it go on (SIGCONT); a baseline's strict quiesce still waits. Here the spare's process is stopped before its Init is sent, so the Init stays under way
    until someone continues it: quiesce() must return at once, and only allow_gpu_init() gets the Init answered."""
    import os
    import signal
    import threading
    import time

    from kernelbench.evaluation.parent.session import pause_inits_wanted

    assert pause_inits_wanted({}) is False and pause_inits_wanted({"KB_PAUSE_INITS": "1"}) is True
    with pytest.raises(ValueError, match="KB_PAUSE_INITS"):
        pause_inits_wanted({"KB_PAUSE_INITS": "no"})
    default = DeviceSession("cpu", spares=0, sandbox="off")
    assert default.pause_inits is False  # opt-in: it cost precision (session 22)
    default.close()
    session = DeviceSession("cpu", spares=1, sandbox="off", pause_inits=True)
    try:
        session.quiesce()  # a timing under way: the spares start but send no Init
        session.prime("torch")
        _started(session._all_spares())
        sp = session._all_spares()[0]
        worker = sp.future.result()
        os.kill(worker.main_pid, signal.SIGSTOP)
        session.allow_gpu_init()  # the Init is sent to a stopped process: under way until continued
        assert sp.init_sent is not None and sp.stepping
        done = threading.Event()
        threading.Thread(target=lambda: (session.quiesce(), done.set()), daemon=True).start()
        assert done.wait(5), "quiesce waited for a spare's Init under way instead of pausing it"
        assert sp in session._paused and _state(worker.main_pid) == "T"
        time.sleep(0.3)
        assert not sp._context.is_set()
        session.allow_gpu_init()  # the timing is over: the spare goes on and its Init is answered
        assert sp._context.wait(60) and sp.context_ready and _state(worker.main_pid) != "T"
        assert session._paused == []
    finally:
        session.close()


def test_a_worker_is_paused_and_resumed_through_its_pidfd_and_never_once_it_is_gone():
    from kernelbench.evaluation.parent.workers import start_worker

    w = start_worker("candidate", "cpu", init=False)
    try:
        assert w.pause() and _settles(w.main_pid, lambda st: st == "T")
        assert w.resume() and _settles(w.main_pid, lambda st: st != "T")
    finally:
        w.kill()
    assert not w.pause() and not w.resume()


def test_a_spares_warm_up_goes_a_piece_at_a_time_and_a_timing_waits_for_one_piece_at_most():
    """Session 23 (H200, the 250 official problems): with references reused, the timings still waited 0.24 s each for
    candidate spares' warm-ups under way (0.56 s each beside a job). The warm-up now goes a piece at a time, each
    sent only while nothing is timed: a timing about to begin waits for the piece under way, never the rest."""
    from concurrent.futures import ThreadPoolExecutor

    from kernelbench.evaluation.parent.workers import Spare, start_worker

    steps = []
    with ThreadPoolExecutor(1) as pool:
        sp = Spare(pool.submit(start_worker, "candidate", "cpu", None, None, False, None, None),
                   lambda s: steps.append(s.piece_sent))
        sp.future.result(timeout=120)
        sp.begin_init()
        sp._context.wait(120)
        assert sp.context_ready and sp.warm_sent is None  # the context alone: no piece sent by itself
        pieces = 0
        while not sp.ready:
            sp.begin_warm()
            assert sp.warming or sp.ready
            sp.finish_warm()  # what quiesce() waits for: the piece under way, then it returns
            pieces += 1
            assert not sp.warming and sp.error is None
            if pieces == 1:
                assert not sp.ready, "the whole warm-up ran in one step"
        assert pieces >= 3 and len(steps) == pieces  # the context, then every piece but the last
        assert sp.take() is sp.worker
        sp.discard()
