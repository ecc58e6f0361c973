"""The timing loop both timings share, driven with real CPU workers.

In an evaluation the candidate's timing stage runs only on a GPU; here it is called directly, so the
order of what the parent sends (warm-up of each side, ABBA rounds of fingerprinted blocks on the same
seeds, the last timed output checked) is pinned down on any machine. Reference-only timing (baselines)
runs the same loop with one side.
"""

from __future__ import annotations

import pytest
from kbtesting import one_problem, problem_source

from kernelbench.evaluation import EvalJob, EvalSettings, protocol
from kernelbench.evaluation.channel import Channel
from kernelbench.evaluation.parent import candidate_timing, reference_timing, stages
from kernelbench.evaluation.parent.session import DeviceSession
from kernelbench.evaluation.parent.verdict import Verdict
from kernelbench.evaluation.seeds import derive_seed
from kernelbench.evaluation.timing import BLOCK_MAX_CALLS, BLOCK_MIN_CALLS, block_order
from kernelbench.results import Stage

HEAD = "import torch\nimport torch.nn as nn\n\nclass ModelNew(nn.Module):\n"
HONEST = HEAD + "    def forward(self, x):\n        return x.clamp_min(0)\n"
#: Right in the correctness trials (one forward each), wrong from the tenth call on: only timing sees it.
WRONG_WHEN_TIMED = HEAD + (
    "    calls = 0\n"
    "    def forward(self, x):\n"
    "        ModelNew.calls += 1\n"
    "        return x.clamp_min(0) + (1.0 if ModelNew.calls > 10 else 0.0)\n")
SECRET = b"s" * 32
TRIALS = 300
#: Not the default: the settings' cushion must be what every Time command carries.
CUSHION_US = 37


@pytest.fixture(scope="module")
def problem(tmp_path_factory):
    return one_problem(tmp_path_factory.mktemp("problems"), problem_source(shape="16, 16"))


@pytest.fixture
def sent(monkeypatch):
    """Every command the parent sends, as ``(channel, command)`` in order (the real channel still sends it)."""
    log: list[tuple[Channel, protocol.Command]] = []
    real = Channel.send

    def send(self, msg, blobs=()):
        if "cmd" in msg and msg["cmd"] not in ("init", "warm"):  # spares' Inits come whenever a spare is ready
            log.append((self, protocol.decode_command(dict(msg))))
        return real(self, msg, blobs)

    monkeypatch.setattr(Channel, "send", send)
    return log


def _settings() -> EvalSettings:
    # A trial limit, no budget to speak of: the loop stops at exactly TRIALS calls on any machine.
    return EvalSettings(backend="torch", device="cpu", seed_secret=SECRET, static_guard=False, correctness_trials=1,
                        min_timing_trials=TRIALS, max_timing_trials=TRIALS, timing_budget_s=1000.0,
                        launch_cushion_us=CUSHION_US)


def _timed(problem, source: str, sent: list) -> tuple[Verdict, list, Channel, Channel]:
    session = DeviceSession("cpu", spares=1)
    try:
        job = EvalJob(problem, source, _settings())
        ref, _ = session.reference_for(job, derive_seed(SECRET, "probe"))
        cand = session.candidate_worker("torch")
        v = Verdict()
        assert stages.load(job, v, cand, False) and stages.correctness(job, v, ref, cand, SECRET)
        sent.clear()
        candidate_timing.time_candidate(job, v, ref, cand, SECRET)
        cand.kill()
        return v, list(sent), ref.channel, cand.channel
    finally:
        session.close()


def test_candidate_timing_warms_up_both_sides_then_times_abba_rounds_on_the_same_seeds(problem, sent):
    v, log, ref, cand = _timed(problem, HONEST, sent)
    assert v.error is None, v.error
    n = v.runtime.block_calls
    assert BLOCK_MIN_CALLS <= n <= BLOCK_MAX_CALLS and v.ref_runtime.block_calls == n
    rounds = -(-TRIALS // n)
    assert len(v.runtime.samples_ms) == len(v.ref_runtime.samples_ms) == rounds * n
    assert v.timing_note == (f"{rounds * n} timed calls per side in {rounds} rounds; "
                             f"stopped: reached the maximum of {TRIALS} trials")
    assert v.correctness.timed_outputs_checked == rounds * n

    warm = protocol.Time(seeds=[derive_seed(SECRET, "warm", i) for i in range(4)],
                         fwd_seeds=[derive_seed(SECRET, "warm-forward", i) for i in range(4)], warmup=True,
                         fingerprint=True, cushion_us=CUSHION_US)  # each side makes its fingerprint buffers
    expected = [(ref, warm), (cand, warm)]
    for r in range(rounds):
        block = protocol.Time(seeds=[derive_seed(SECRET, "time", r, i) for i in range(n)],
                              fwd_seeds=[derive_seed(SECRET, "time-forward", r, i) for i in range(n)],
                              warmup=False, fingerprint=True, cushion_us=CUSHION_US)
        expected += [(ref if side == "reference" else cand, block) for side in block_order(r)]
    assert log[:len(expected)] == expected
    assert [type(c) for _, c in log[len(expected):]] == [protocol.ExportLast, protocol.Compare, protocol.Release]
    assert [ch for ch, _ in log[len(expected):]] == [cand, ref, cand]
    assert log[-2][1].slot == "last"


def test_an_output_that_changes_when_timed_fails_the_first_round(problem, sent):
    v, log, ref, cand = _timed(problem, WRONG_WHEN_TIMED, sent)
    assert v.error is not None and (v.error.stage, v.error.type) == (Stage.TIMING, "TimedOutputMismatch")
    assert "round 1, call" in v.error.message and v.runtime is None
    assert not any(isinstance(c, protocol.ExportLast) for _, c in log)  # stopped after the first round
    assert sum(isinstance(c, protocol.Time) and not c.warmup for _, c in log) == 2


def test_reference_timing_runs_the_same_loop_with_one_side(problem, sent):
    session = DeviceSession("cpu", spares=1)
    try:
        timing = reference_timing.measure_reference(session, problem, "eager", _settings(), allow_cpu=True)
    finally:
        session.close()
    commands = [c for _, c in sent]
    assert isinstance(commands[0], protocol.Setup) and commands[0].compile_mode is None
    warm_seeds = [derive_seed(SECRET, "warm", i) for i in range(4)]
    assert commands[1] == protocol.Time(seeds=warm_seeds, fwd_seeds=warm_seeds, warmup=True, fingerprint=False,
                                        cushion_us=CUSHION_US)
    blocks = commands[2:-1]
    assert isinstance(commands[-1], protocol.Exit)
    n = len(blocks[0].seeds)
    assert len(timing.timing.samples_ms) == len(blocks) * n >= TRIALS
    for r, block in enumerate(blocks):
        seeds = [derive_seed(SECRET, "time", r, i) for i in range(n)]
        assert block == protocol.Time(seeds=seeds, fwd_seeds=seeds, warmup=False, fingerprint=False,
                                      cushion_us=CUSHION_US)
    assert timing.note == f"{len(blocks) * n} timed calls in {len(blocks)} rounds; stopped: reached the maximum " \
                          f"of {TRIALS} trials"
