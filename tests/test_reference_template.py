"""Reference workers forked from a template process (issue 25, throughput): real processes on the CPU.

A fork must be a reference worker like a started one (same verdicts, nothing of an earlier problem in it), must
die and report its death like one, and a template that is lost must cost nothing but speed: the session starts its
references the usual way from then on.
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
from pathlib import Path

import pytest
from kbtesting import one_problem, problem_source

from kernelbench.evaluation import EvalJob, EvalSettings, protocol
from kernelbench.evaluation.parent import DeviceSession, run_job
from kernelbench.evaluation.parent.template import (
    TEMPLATE_ENV,
    ForkedProcess,
    ReferenceTemplate,
    TemplateUnavailable,
    template_wanted,
)
from kernelbench.evaluation.parent.workers import WorkerDied, call, finish_init, send_init, worker_env
from kernelbench.results import Stage

HONEST = ("import torch\nimport torch.nn as nn\n\nclass ModelNew(nn.Module):\n"
          "    def forward(self, x):\n        return torch.relu(x)\n")


def settings(**kw) -> EvalSettings:
    base = dict(backend="torch", device="cpu", static_guard=False, correctness_trials=2, stage_timeout_s=60.0,
                sandbox="off")
    base.update(kw)
    return EvalSettings(**base)


@contextlib.contextmanager
def cpu_session():
    """A CPU session as a batch makes one (one spare per kind, primed), closed at the end."""
    session = DeviceSession("cpu", spares=1, sandbox="off")
    session.prime("torch")
    try:
        yield session
    finally:
        session.close()


@pytest.fixture
def forked(monkeypatch):
    monkeypatch.setenv(TEMPLATE_ENV, "1")


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:  # a zombie is dead too
        return Path(f"/proc/{pid}/stat").read_text().split(") ", 1)[1][0] != "Z"
    except OSError:
        return False


def test_the_setting():
    assert template_wanted(True, {}) and not template_wanted(False, {})
    assert template_wanted(False, {TEMPLATE_ENV: "1"}) and not template_wanted(True, {TEMPLATE_ENV: "0"})
    with pytest.raises(ValueError, match=TEMPLATE_ENV):
        template_wanted(True, {TEMPLATE_ENV: "yes"})


def test_references_are_forked_fresh_for_each_problem(tmp_path, forked, monkeypatch):
    """Three problems, three forked references (the template's children, not ours); what the first problem's code
    left in its process (an environment variable, a torch setting) is absent from the next one's, and so is the
    template's own NVML setting. (References reused from problem to problem are tests/test_reference_reuse.py's.)"""
    monkeypatch.delenv("PYTORCH_NVML_BASED_CUDA_CHECK", raising=False)
    monkeypatch.setenv("KB_REUSE_REFERENCES", "0")
    leak = problem_source().replace(
        "import torch\n", "import os\nimport torch\nos.environ['KB_LEFT_BEHIND'] = '1'\n"
        "torch.backends.cudnn.benchmark = True\n", 1)
    check = problem_source(shape="8, 9").replace(
        "        super().__init__()\n",
        "        super().__init__()\n        import os\n"
        "        if os.environ.get('KB_LEFT_BEHIND'):\n            raise RuntimeError('the last problem was here')\n"
        "        if os.environ.get('PYTORCH_NVML_BASED_CUDA_CHECK'):\n            raise RuntimeError('the template\\'s')\n"
        "        if torch.backends.cudnn.benchmark:\n            raise RuntimeError('the last problem\\'s setting')\n",
        1)
    problems = [one_problem(tmp_path / "a", leak, name="1_Leak.py"), one_problem(tmp_path / "b", check, "2_Check.py"),
                one_problem(tmp_path / "c", problem_source(shape="8, 10"), name="3_Relu.py")]
    pids = []
    with cpu_session() as session:
        assert session._use_template
        for p in problems:
            r = run_job(session, EvalJob(p, HONEST, settings()))
            assert r.correct, r.error
            assert isinstance(session.reference.proc, ForkedProcess)
            pid = session.reference.proc.pid
            template_pid = session._template.process.pid
            assert f"PPid:\t{template_pid}\n" in Path(f"/proc/{pid}/status").read_text()  # the template's child
            pids.append(pid)
    assert len(set(pids)) == 3
    deadline = time.monotonic() + 10
    while any(map(_alive, [*pids, template_pid])) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not any(map(_alive, [*pids, template_pid])), "the session left its template or a reference running"


def test_a_forked_reference_dies_as_a_started_one_does(tmp_path):
    """Killed, its death is seen and named by its signal (the template's reap), and a command to it fails."""
    template = ReferenceTemplate("cpu", worker_env("reference", "cpu", None, None))
    try:
        w = template.start_reference()
        from kernelbench.evaluation.parent.workers import _startup_reply

        _startup_reply(w, protocol.Ready, 60, "start")
        finish_init(w, send_init(w))
        assert w.alive() and w.main_pid == w.proc.pid
        os.kill(w.proc.pid, signal.SIGKILL)
        with pytest.raises(WorkerDied, match="killed by SIGKILL"):
            call(w, protocol.Release(), protocol.DoneReply, 10, Stage.RUN, "release")
        assert not w.alive()
        w.kill()  # (again: harmless)
    finally:
        template.close()
    assert not template.process.alive()


def test_a_lost_template_costs_only_speed(tmp_path, forked, monkeypatch):
    """The template killed between two problems: the next reference is started the usual way and the job passes."""
    monkeypatch.setenv("KB_REUSE_REFERENCES", "0")  # (a reused reference would need no new one)
    problems = [one_problem(tmp_path / f"p{i}", problem_source(shape=f"8, {8 + i}"), name=f"{i + 1}_Relu.py")
                for i in range(2)]
    with cpu_session() as session:
        assert run_job(session, EvalJob(problems[0], HONEST, settings())).correct
        template = session._template
        template.process.kill()
        for sp in list(session._spare_references):  # (the spare forked before the kill is a fine worker: use up)
            session._forget(sp)
            sp.discard()
        r = run_job(session, EvalJob(problems[1], HONEST, settings()))
        assert r.correct, r.error
        assert not isinstance(session.reference.proc, ForkedProcess)
        assert session._template is None and not session._use_template


def test_a_template_that_cannot_start_leaves_references_started(tmp_path, forked, monkeypatch):
    """A template that fails at its start (here: its device is not one torch knows) is reported and not retried."""
    def broken(self, device, env, start_timeout_s=180.0):
        raise TemplateUnavailable("no template today")

    monkeypatch.setattr(ReferenceTemplate, "__init__", broken)
    problem = one_problem(tmp_path / "p", problem_source())
    with cpu_session() as session:
        r = run_job(session, EvalJob(problem, HONEST, settings()))
        assert r.correct, r.error
        assert not isinstance(session.reference.proc, ForkedProcess) and not session._use_template


def test_the_template_refuses_what_it_cannot_do():
    """Only an unconfined reference is forked; a fork request without its descriptors is refused, not obeyed."""
    from kernelbench.evaluation.sandbox import Confinement, WorkerProcess

    with pytest.raises(ValueError, match="unconfined reference"):
        WorkerProcess("candidate", "cpu", {}, launcher=lambda sock, cwd: None)
    with pytest.raises(ValueError, match="unconfined reference"):
        WorkerProcess("reference", "cpu", {}, confinement=Confinement(bwrap="bwrap"), launcher=lambda s, c: None)
    template = ReferenceTemplate("cpu", worker_env("reference", "cpu", None, None))
    try:
        with pytest.raises(TemplateUnavailable, match="descriptors"):
            template._request({"cmd": "fork", "cwd": "/"})
        assert template.reap(os.getpid()) == (None, True)  # not its child: no status will ever come
        assert template.alive()
    finally:
        template.close()


@pytest.mark.gpu
def test_a_forked_reference_creates_its_context_and_times_on_the_gpu(tmp_path):
    """On a GPU the template is on by default: the fork creates its own CUDA context at Init (the template never
    touched the GPU) and the job is timed against it as against a started one."""
    problem = one_problem(tmp_path, problem_source(shape="4096, 4096"))
    session = DeviceSession("cuda:0", sandbox="off")
    session.prime("torch")
    try:
        results = [run_job(session, EvalJob(problem, HONEST, settings(device="cuda:0", timing_budget_s=0.5), k))
                   for k in range(2)]
        assert isinstance(session.reference.proc, ForkedProcess)
        assert session.reference.info.get("gpu_name")
    finally:
        session.close()
    for r in results:
        assert r.correct, r.error
        assert r.runtime is not None and r.ref_runtime is not None and 0.8 < r.speedup < 1.25


def test_forked_references_that_fail_their_init_have_the_template_let_go(tmp_path, forked, monkeypatch):
    """Session 21's first GPU run: every fork's Init failed (its template had poisoned CUDA for its forks) and every
    job failed on our side. Now two failures in a row let the template go with its forked spares: the job's next try
    starts a reference afresh and passes."""
    from kernelbench.evaluation.parent import session as session_module
    from kernelbench.evaluation.parent.workers import start_worker

    made = []

    def broken_fork(template, device):  # a reference whose Init fails as a poisoned fork's does
        made.append(template)
        return start_worker("reference", "cuda:7", init=False)

    monkeypatch.setattr(session_module, "start_forked_reference", broken_fork)
    problem = one_problem(tmp_path / "p", problem_source())
    with cpu_session() as session:
        r = run_job(session, EvalJob(problem, HONEST, settings()))
        assert r.correct, r.error
        assert made and session._template is None and not session._use_template
        assert not made[0].alive()
        assert not isinstance(session.reference.proc, ForkedProcess)


def test_one_failed_fork_keeps_the_template(tmp_path, forked, monkeypatch):
    """One failure may be the GPU's (an Init out of memory beside a job): the template stays for the next fork."""
    from kernelbench.evaluation.parent import session as session_module
    from kernelbench.evaluation.parent.workers import start_worker

    real = session_module.start_forked_reference
    calls = []

    def once_broken(template, device):
        calls.append(1)
        if len(calls) == 1:
            return start_worker("reference", "cuda:7", init=False)
        return real(template, device)

    monkeypatch.setattr(session_module, "start_forked_reference", once_broken)
    problem = one_problem(tmp_path / "p", problem_source())
    with cpu_session() as session:
        r = run_job(session, EvalJob(problem, HONEST, settings()))
        assert r.correct, r.error
        assert session._template is not None and isinstance(session.reference.proc, ForkedProcess)


def test_the_template_asks_nvml(monkeypatch):
    """The template's environment asks NVML (``is_available()`` there spoils no fork); its forks remove it again
    (the fresh-fork test's second problem fails if one did not)."""
    monkeypatch.delenv("PYTORCH_NVML_BASED_CUDA_CHECK", raising=False)
    template = ReferenceTemplate("cpu", worker_env("reference", "cpu", None, None))
    try:
        assert template.left_to_forks == []
        env = Path(f"/proc/{template.process.pid}/environ").read_bytes().split(b"\0")
        assert b"PYTORCH_NVML_BASED_CUDA_CHECK=1" in env and b"KB_TEMPLATE_ADDED_NVML_CHECK=1" in env
    finally:
        template.close()


def _forked_worker(template):
    from kernelbench.evaluation.parent.workers import _startup_reply

    w = template.start_reference()
    _startup_reply(w, protocol.Ready, 60, "start")
    return w


def test_a_status_collected_elsewhere_still_ends_the_wait():
    """An abort's kill and the job thread's wait can both ask: the one that comes second must not see "running"."""
    template = ReferenceTemplate("cpu", worker_env("reference", "cpu", None, None))
    try:
        w = _forked_worker(template)
        os.kill(w.proc.pid, signal.SIGKILL)
        deadline = time.monotonic() + 10
        while template.reap(w.proc.pid)[0] is None and time.monotonic() < deadline:  # (collected here, not by w)
            time.sleep(0.02)
        t0 = time.monotonic()
        assert w.proc.wait(5) is not None and time.monotonic() - t0 < 1.0
        assert not w.alive() and "still running" not in w.exit_description()
        w.kill()
    finally:
        template.close()


def test_a_fork_killed_after_its_template_was_lost_is_named_killed():
    """With the template gone no status comes; a worker we killed is still reported as killed, not as exit 255."""
    template = ReferenceTemplate("cpu", worker_env("reference", "cpu", None, None))
    w = _forked_worker(template)
    template.process.kill()
    w.kill()
    assert w.exit_description() == "killed by SIGKILL"
    template.close()


def _in_a_fresh_python(code: str) -> None:
    """Run ``code`` in its own interpreter: the probes fork, and a fork of pytest's process (threads and all) could
    hang the run where a lock was held at the fork."""
    import subprocess
    import sys
    import textwrap

    from kbtesting import repo_env

    out = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, timeout=120,
                         env=repo_env())
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-3000:]


def test_a_template_whose_forks_torch_marks_is_found():
    """torch marks the forks of a process that asked the CUDA runtime anything; the template asks a fork of its own."""
    _in_a_fresh_python("""
        import torch
        from kernelbench.evaluation.worker import template
        assert template.fork_is_usable()
        torch.cuda._is_in_bad_fork = lambda: True  # (the fork inherits the patched state)
        assert template._fork_fault() == 3 and not template.fork_is_usable()
    """)


def test_a_template_whose_forks_the_driver_refuses_is_found():
    """A device count asked from C++ (the profiler's first run does) sets no flag in torch: the fork's cuInit tells."""
    _in_a_fresh_python("""
        from kernelbench.evaluation.worker import template
        template._driver_refuses = lambda: True
        assert template._fork_fault() == 4 and not template.fork_is_usable()
    """)


def test_a_step_that_would_spoil_the_forks_is_left_to_them():
    """A preloading step is tried in a scout fork first: one after which forks could not use CUDA is not taken."""
    _in_a_fresh_python("""
        import torch
        from kernelbench.evaluation.worker import template

        def spoils():
            torch.cuda._is_in_bad_fork = lambda: True  # (in the scout only)

        assert template._fault_of_step(spoils) == 3
        assert template._fault_of_step(lambda: None) == 0
        assert template._fault_of_step(lambda: 1 / 0) == 5
        assert template.fork_is_usable()  # the scout's step never reached this process
    """)


def test_steps_are_taken_directly_and_a_spoiling_one_sends_the_template_careful():
    """By default the template takes its steps directly and asks its forks once after them (the scouts doubled its
    start); a step that spoiled them returns None, where a careful start leaves it to the forks instead."""
    _in_a_fresh_python("""
        import torch
        from kernelbench.evaluation.worker import template

        taken = []
        template._preload_steps = lambda device: [("fine", lambda: taken.append("fine"))]
        assert template._preload("cpu", careful=False) == [] and taken == ["fine"], "taken once, no scout"
        taken.clear()
        assert template._preload("cpu", careful=True) == [] and taken == ["fine"], "(the scout's run is its own)"

        def spoils():
            torch.cuda._is_in_bad_fork = lambda: True

        template._preload_steps = lambda device: [("spoils", spoils)]
        left = template._preload("cpu", careful=True)
        assert left == ["spoils (torch marks its forks as unable to use CUDA)"] and template.fork_is_usable()
        assert template._preload("cpu", careful=False) is None and not template.fork_is_usable()
    """)


def test_a_template_whose_direct_steps_spoiled_its_forks_starts_again_careful_in_the_same_process():
    """The careful start replaces the process (same pid, same channel) and then says Ready as any template does."""
    _in_a_fresh_python("""
        import os, socket, torch
        from kernelbench.evaluation import protocol
        from kernelbench.evaluation.channel import Channel
        from kernelbench.evaluation.worker import template

        def spoils():
            torch.cuda._is_in_bad_fork = lambda: True

        template._preload_steps = lambda device: [("spoils", spoils)]  # (in this process only: the exec drops it)
        ours, theirs = socket.socketpair()
        pid = os.fork()
        if pid == 0:
            ours.close()
            try:
                template.serve_template("cpu", theirs.fileno())
            finally:
                os._exit(9)
        theirs.close()
        chan = Channel.from_fd(ours.detach())
        ready, _ = chan.recv()
        reply, _ = protocol.decode_reply(ready, protocol.Ready)
        assert isinstance(reply, protocol.Ready) and reply.pid == pid, (ready, pid)
        report, _ = chan.recv()
        assert report["ok"] and report["left_to_forks"] == [], report
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            assert b"--careful" in f.read(), "the process was replaced by a careful template"
        chan.send({"cmd": "exit"})
        _, raw = os.waitpid(pid, 0)
        assert os.waitstatus_to_exitcode(raw) == 0
    """)
