"""Our failures are never verdicts (issue 23, part 5): real workers, real pools, real signals, on the CPU.

An exception in the evaluator, a lost worker pool and a reference that cannot be set up are recorded
as infrastructure failures, reported apart and evaluated again on resume; Ctrl-C stops a batch
within seconds and leaves ``eval_results.json`` holding only real verdicts.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from kbtesting import problem_source, write_problems

from kernelbench.evaluation import EvalJob, EvalSettings
from kernelbench.evaluation.parent import DeviceSession, run_job
from kernelbench.problems import load_directory
from kernelbench.results import KernelResult, Stage, StageError, infrastructure_failures
from kernelbench.runs import RunDirectory

PROBLEM = problem_source(shape="16, 16")

HONEST = ("import torch\nimport torch.nn as nn\n\nclass ModelNew(nn.Module):\n"
          "    def forward(self, x):\n        return x.clamp_min(0)\n")
SLOW = ("import time\nimport torch\nimport torch.nn as nn\n\nclass ModelNew(nn.Module):\n"
        "    def forward(self, x):\n        time.sleep(300)\n        return x.clamp_min(0)\n")
SETTINGS = EvalSettings(backend="torch", device="cpu", stage_timeout_s=200.0, static_guard=False,
                        correctness_trials=1)


@pytest.fixture(scope="module")
def problems(tmp_path_factory) -> Path:
    return write_problems(tmp_path_factory.mktemp("problems"), {"1_Relu.py": PROBLEM, "2_Relu_again.py": PROBLEM})


def test_a_lost_worker_pool_is_an_infrastructure_failure_not_a_crash(problems):
    """The issue's case: the pool that starts workers is shut down while a batch still needs one."""
    problem = load_directory(problems).get(1, 1)
    job = EvalJob(problem, HONEST, SETTINGS)
    session = DeviceSession("cpu", spares=1)
    try:
        first = run_job(session, job)
        assert first.correct and not first.infrastructure_failure
        # Lose the pool; the reference stays (same problem), so the candidate's worker is what fails.
        for sp in session._spare_candidates.pop(None, []):
            sp.discard()
        session._pool.shutdown(wait=True)
        lost = run_job(session, job)
    finally:
        session.close()
    assert lost.error is not None and lost.error.stage == Stage.INFRASTRUCTURE
    assert "cannot schedule new futures after shutdown" in lost.error.message
    assert lost.infrastructure_failure and lost.verdict() == "infrastructure-failure"
    assert not lost.correct and any("not a verdict" in f for f in lost.flags)
    assert KernelResult.from_json(lost.to_json()).infrastructure_failure


def test_a_reference_that_cannot_start_is_ours(problems):
    problem = load_directory(problems).get(1, 1)
    session = DeviceSession("cpu", spares=1)
    session._pool.shutdown(wait=True)  # no reference worker can start
    try:
        result = run_job(session, EvalJob(problem, HONEST, SETTINGS))
    finally:
        session.close()
    assert result.error.stage == Stage.INFRASTRUCTURE and result.error.type == "ReferenceFailed"
    assert result.infrastructure_failure


#: A problem whose reference runs out of memory at its first correctness trial (its setup's two probe calls pass):
#: the GPU is shared by two processes, and which one fails to allocate says nothing about the candidate.
REFERENCE_OUT_OF_MEMORY = """
import torch
import torch.nn as nn

CALLS = [0]


class Model(nn.Module):
    def forward(self, x):
        CALLS[0] += 1
        if CALLS[0] > 2:
            raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 6.00 GiB (simulated)")
        return x.clamp_min(0)


def get_inputs():
    return [torch.randn(16, 16)]


def get_init_inputs():
    return []
"""


def test_a_reference_out_of_memory_after_the_candidate_ran_is_a_flagged_verdict_not_an_infrastructure_result(tmp_path):
    """Found on an 80 GB H100 with official level-1 problems of 6-8 GiB tensors. Once candidate code has run, the
    candidate may be the cause (a process holding the GPU's memory makes the reference's allocations fail), and an
    infrastructure result is left out of the scores: a kernel that knows it is wrong could withdraw its failures from
    pass@k that way. So it is a verdict, named and flagged as out of memory, not an infrastructure failure."""
    problem = load_directory(write_problems(tmp_path, {"1_Relu.py": REFERENCE_OUT_OF_MEMORY})).get(1, 1)
    session = DeviceSession("cpu", spares=1)
    try:
        result = run_job(session, EvalJob(problem, HONEST, SETTINGS))
    finally:
        session.close()
    assert result.error is not None and result.error.stage == Stage.CRASH, result.error
    assert result.error.type == "ReferenceOutOfMemory" and "out of memory" in result.error.message
    assert not result.infrastructure_failure and not result.correct
    assert any("out of device memory" in f for f in result.flags), result.flags


def test_legacy_records_of_our_failures_are_recognised():
    """eval_results.json written before the infrastructure stage: the issue's record and Modal's."""
    base = dict(level=1, problem_id=1, problem_name="x", backend="torch")
    evaluator = KernelResult(**base, error=StageError.make(
        Stage.CRASH, "RuntimeError", "evaluator error: cannot schedule new futures after shutdown"))
    remote = KernelResult(**base, error=StageError.make(Stage.CRASH, "RemoteError", "container lost"))
    candidate = KernelResult(**base, error=StageError.make(Stage.CRASH, "WorkerDied", "segfault"))
    assert evaluator.infrastructure_failure and remote.infrastructure_failure
    assert not candidate.infrastructure_failure and candidate.verdict() == "crash"
    assert infrastructure_failures([evaluator, remote, candidate]) == [evaluator, remote]


def test_resume_evaluates_our_failures_again_and_the_summary_reports_them_apart(problems, tmp_path, capsys):
    from kernelbench.cli.evaluate_run import print_evaluation_summary
    from kernelbench.generation.run_eval import evaluate_run_dir
    from kernelbench.runners.local import LocalRunner

    ps = load_directory(problems)
    rd = RunDirectory(tmp_path / "run", level=1)
    rd.write_kernel(1, 1, 0, HONEST)
    rd.write_kernel(1, 2, 0, HONEST)
    lost = KernelResult(level=1, problem_id=1, problem_name=ps.get(1, 1).name, backend="torch",
                        error=StageError.make(Stage.INFRASTRUCTURE, "RuntimeError", "evaluator error: pool lost"))
    legacy = KernelResult(level=1, problem_id=2, problem_name=ps.get(1, 2).name, backend="torch",
                          error=StageError.make(Stage.CRASH, "RuntimeError", "evaluator error: pool lost"))
    rd.save_result(lost)
    rd.save_result(legacy)

    from kernelbench.generation.run_eval import EvaluationSummary

    before = EvaluationSummary(results=list(rd.load_results().values()), already_done=2)
    assert before.infrastructure_failures == 2
    print_evaluation_summary(before, rd.path)
    out = capsys.readouterr().out
    assert "not evaluated (our failures, not verdicts; evaluate-run evaluates them again): 2" in out
    assert "  infrastructure-failure  2" not in out  # not counted among the verdicts

    summary = evaluate_run_dir(rd, ps, SETTINGS, LocalRunner(["cpu"]), progress=False)
    assert summary.evaluated == 2 and summary.already_done == 0
    saved = rd.load_results()
    assert saved[(1, 0)].correct and saved[(2, 0)].correct
    assert summary.infrastructure_failures == 0


INTERRUPTED = '''
import sys
from kernelbench.cli.main import main
sys.exit(main(sys.argv[1:]))
'''


def _children(pid: int) -> set[int]:
    out: set[int] = set()
    try:
        for task in os.listdir(f"/proc/{pid}/task"):
            text = Path(f"/proc/{pid}/task/{task}/children").read_text()
            out.update(int(x) for x in text.split())
    except OSError:
        pass
    return out


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


@pytest.mark.skipif(not Path("/proc/self/task").exists(), reason="reads worker pids from /proc")
def test_ctrl_c_stops_the_batch_within_seconds_and_records_only_real_verdicts(problems, tmp_path):
    rd = RunDirectory(tmp_path / "run", level=1)
    rd.write_kernel(1, 1, 0, HONEST)
    rd.write_kernel(1, 2, 0, SLOW)  # in flight when Ctrl-C comes: sleeps in its correctness trial
    script = tmp_path / "evaluate.py"
    script.write_text(INTERRUPTED)
    proc = subprocess.Popen(
        [sys.executable, str(script), "evaluate-run", "--run-dir", str(rd.path), "--source", "directory",
         "--path", str(problems), "--backend", "torch", "--device", "cpu", "--correctness-trials", "1",
         "--timeout", "200"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and not rd.results_path.exists():
            assert proc.poll() is None, proc.communicate()
            time.sleep(0.2)
        assert rd.results_path.exists(), "the first (honest) result never arrived"
        time.sleep(4.0)  # the slow candidate is now loaded and sleeping in its trial
        workers = set()
        for child in _children(proc.pid):
            workers |= {child} | _children(child)
        assert workers, "no worker processes found under the evaluator"
        t0 = time.monotonic()
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=30)
        stopped_s = time.monotonic() - t0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 130, err[-3000:]
    assert stopped_s < 15, f"took {stopped_s:.1f} s to stop"
    assert "interrupted" in err
    raw = json.loads(rd.results_path.read_text())
    assert set(raw) == {"1"}, f"only the finished verdict may be recorded, got {sorted(raw)}"
    results = rd.load_results()
    assert results[(1, 0)].correct and not infrastructure_failures(list(results.values()))
    time.sleep(1.0)
    assert not [p for p in workers if _alive(p)], "worker processes outlived the interrupted batch"


#: A candidate that writes its own reply on the worker's channel while it is imported: a LoadReply of the right kind
#: and keys whose ``threads_started`` is a string, which the parent's code cannot compare with 0. It knows its kernel
#: is wrong; an infrastructure result would be left out of the scores (pass@k) and evaluated again on resume.
FORGED_REPLY = '''
import json, os, socket, struct, sys
import torch
import torch.nn as nn

_fd = int(sys.argv[sys.argv.index("--fd") + 1])
_sock = socket.socket(fileno=os.dup(_fd))
_header = json.dumps({"reply": "load", "cuda_mem": None, "import_s": 0.0, "builds": [], "threads_started": "many",
                      "findings": [], "_nblobs": 0}).encode()
_sock.sendall(struct.pack(">Q", len(_header)) + _header)


class ModelNew(nn.Module):
    def forward(self, x):
        return x
'''


def test_a_reply_the_candidate_forged_to_break_the_parent_is_a_verdict_not_an_infrastructure_result(problems):
    """An attacker's review (session 18): an exception in our parent code is an infrastructure failure, and the
    candidate's process can write any well-formed reply on its channel, of types our code does not expect. Once
    candidate code has run, such an error is a verdict (a crash), flagged for a human, as a reference that runs out of
    memory then is."""
    problem = load_directory(problems).get(1, 1)
    session = DeviceSession("cpu", spares=1)
    try:
        result = run_job(session, EvalJob(problem, FORGED_REPLY, SETTINGS))
    finally:
        session.close()
    assert result.error is not None, result
    assert not result.infrastructure_failure, result.error
    assert result.error.stage == Stage.CRASH and not result.correct, result.error
    assert any("after candidate code ran" in f for f in result.flags), result.flags
