"""A reference worker that goes on to the next problem instead of exiting (worker/recycle.py, KB_REUSE_REFERENCES).

Real workers on the CPU. A recycled reference must forget its problem entirely and set the next one up as a fresh
worker would, and must refuse (and exit) when the problem's code left something a fresh worker would not have: a
changed torch setting, a patched function, a running thread, a compiled model. The session then hands the next
problem a fresh reference, and with ``KB_REUSE_REFERENCES=0`` always does.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from kbtesting import one_problem, problem_source, repo_env

from kernelbench.evaluation import EvalJob, EvalSettings
from kernelbench.evaluation.parent import DeviceSession, run_job
from kernelbench.evaluation.parent.session import reuse_references_wanted

ROOT = Path(__file__).resolve().parents[1]

CHILD = """
import sys
from kbtesting import problem_source
from kernelbench.evaluation import protocol
from kernelbench.evaluation.seeds import INIT_SEED
from kernelbench.evaluation.worker.process import Worker

def setup(w, code, compile_mode=None):
    return w.cmd_setup(protocol.Setup(code=code, precision="fp32", atol=1e-4, rtol=1e-4, init_seed=INIT_SEED,
                                      probe_seed=1, ieee_fp32=True, compile_mode=compile_mode), [])[0]

def run(w, slot=0):
    return w.cmd_run(protocol.Run(seed=5, fwd_seed=6, slot=slot, poison=False), [])[0]

w = Worker("reference", "cpu")
w.cmd_init(protocol.Init(), [])
"""


def run_child(body: str) -> None:
    code = CHILD + textwrap.dedent(body) + "\nprint('CHILD-OK')\n"
    proc = subprocess.run([sys.executable, "-c", code], env=repo_env({"PYTHONPATH": str(ROOT / "tests")}),
                          capture_output=True, text=True, timeout=300, cwd=str(ROOT))
    assert proc.returncode == 0 and "CHILD-OK" in proc.stdout, proc.stdout[-3000:] + proc.stderr[-3000:]


def test_a_clean_reference_forgets_its_problem_and_sets_up_the_next():
    run_child("""
        import torch
        setup(w, problem_source("torch.relu(x)"))
        w.cmd_time(protocol.Time(seeds=[1, 2], fwd_seeds=[3, 4], warmup=True, fingerprint=True, cushion_us=0), [])
        run(w)  # (after the timing: a warm-up lets go of earlier trials' slots)
        assert "kb_problem" in sys.modules and w.slots and w.last is not None
        reply = w.cmd_recycle(protocol.Recycle(), [])[0]
        assert reply.clean and reply.detail == "", reply
        assert w.problem is None and w.model is None and not w.slots and w.last is None
        assert "kb_problem" not in sys.modules and w.fingerprinter._buf is None and w.before_problem is None
        setup(w, problem_source("x * 2 + 1"))
        run(w, slot=1)
        x, out = w.slots["1"]
        assert torch.equal(out, x[0] * 2 + 1)  # the second problem's model, not the first's
        assert w.cmd_recycle(protocol.Recycle(), [])[0].clean
    """)


@pytest.mark.parametrize("what,left", [
    ("torch.backends.cudnn.benchmark = True", "cudnn.benchmark"),
    ("torch.set_default_dtype(torch.float64)", "default dtype"),
    ("torch.set_float32_matmul_precision('medium')", "float32 matmul precision"),
    ("torch.allclose = lambda *a, **k: True", "torch.allclose"),
    ("import os\nos.environ['KB_LEFT_BEHIND'] = '1'", "KB_LEFT_BEHIND"),
    ("import gc\ngc.callbacks.append(lambda *a: None)", "garbage collector callback"),
    ("import sys\nsys.setprofile(lambda *a: None)", "trace or profile hook"),
    ("import threading, time\nthreading.Thread(target=time.sleep, args=(60,), daemon=True).start()", "thread"),
])
def test_a_problem_that_leaves_something_behind_is_not_reused(what, left):
    run_child(f"""
        code = "import torch\\n" + {what!r} + "\\n" + problem_source("x + 1")
        setup(w, code)
        reply = w.cmd_recycle(protocol.Recycle(), [])[0]
        assert not reply.clean and {left!r} in reply.detail, reply
        assert w.problem is not None  # not forgotten: the worker exits instead
    """)


def test_the_next_problem_draws_the_random_numbers_a_fresh_worker_would():
    """Module-level draws run before any seeding, in the reference and in the candidate (a fresh process, warmed the
    same way): a reused reference must start the next problem from the same generator state, whatever the last
    problem drew."""
    run_child("""
        import random
        import torch
        drawing = "import random\\nimport torch\\nW = torch.randn(4)\\nR = random.random()\\n" + problem_source("x + W[0]")
        setup(w, drawing)
        fresh = (sys.modules["kb_problem"].W.clone(), sys.modules["kb_problem"].R)
        assert w.cmd_recycle(protocol.Recycle(), [])[0].clean
        setup(w, "import torch\\n_ = torch.rand(1000)\\n" + problem_source("x * 3"))
        torch.randn(7)
        random.random()
        assert w.cmd_recycle(protocol.Recycle(), [])[0].clean
        setup(w, drawing)
        again = sys.modules["kb_problem"]
        assert torch.equal(again.W, fresh[0]) and again.R == fresh[1]
    """)


def test_only_references_recycle_and_only_after_a_setup():
    run_child("""
        assert not w.cmd_recycle(protocol.Recycle(), [])[0].clean  # nothing set up yet
        c = Worker("candidate", "cpu")
        try:
            c.cmd_recycle(protocol.Recycle(), [])
        except RuntimeError as e:
            assert "reference" in str(e)
        else:
            raise AssertionError("a candidate worker recycled")
    """)


def _settings() -> EvalSettings:
    return EvalSettings(backend="torch", device="cpu", static_guard=False, correctness_trials=1, stage_timeout_s=60.0,
                        sandbox="off")


def _sweep(tmp: Path, problems: list[str]) -> tuple[list, list[int]]:
    """One job per problem on one session; the results and the pid of each job's reference."""
    session = DeviceSession("cpu", spares=1, sandbox="off")
    session.prime("torch")
    results, pids = [], []
    try:
        for i, code in enumerate(problems):
            problem = one_problem(tmp / str(i), code, name=f"{i + 1}_P.py")
            results.append(run_job(session, EvalJob(problem, _identity(code), _settings())))
            pids.append(session.reference.main_pid)
    finally:
        session.close()
    return results, pids


def _identity(problem_code: str) -> str:
    return problem_code.replace("class Model(", "class ModelNew(")


def test_a_session_reuses_its_reference_across_problems_unless_one_leaves_something_behind(tmp_path, monkeypatch):
    monkeypatch.delenv("KB_REUSE_REFERENCES", raising=False)
    dirty = "import torch\ntorch.backends.cudnn.benchmark = True\n" + problem_source("x - 3")
    problems = [problem_source("torch.relu(x)"), problem_source("x * 2"), dirty, problem_source("x + 5")]
    results, pids = _sweep(tmp_path, problems)
    assert all(r.correct for r in results), [r.error for r in results]
    assert pids[0] == pids[1] == pids[2], "a clean problem's reference set the next problems up"
    assert pids[3] != pids[2], "the reference whose problem changed a torch setting was reused"


def test_with_reuse_off_every_problem_takes_a_fresh_reference(tmp_path, monkeypatch):
    monkeypatch.setenv("KB_REUSE_REFERENCES", "0")
    results, pids = _sweep(tmp_path, [problem_source("torch.relu(x)"), problem_source("x * 2")])
    assert all(r.correct for r in results)
    assert pids[0] != pids[1]
    assert not reuse_references_wanted({"KB_REUSE_REFERENCES": "0"}) and reuse_references_wanted({})
    with pytest.raises(ValueError, match="KB_REUSE_REFERENCES"):
        reuse_references_wanted({"KB_REUSE_REFERENCES": "yes"})
