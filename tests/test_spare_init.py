"""Spare workers create their CUDA contexts as soon as they have started, while nothing is being timed: a job then
finds its reference and candidate workers ready instead of waiting for contexts made at its own start (session 18's
load test waited about 1 s per evaluation for them). Never during a timing: after ``quiesce`` a spare that starts
waits for the next ``allow_gpu_init``. On the CPU the Init command is the same; its sending is what is checked."""

from __future__ import annotations

import time

from kernelbench.evaluation.parent.session import DeviceSession


def _wait_started(spares, timeout: float = 120.0) -> None:
    for sp in spares:
        sp.future.result(timeout=timeout)
    time.sleep(0.3)  # the done-callback runs just after the result is set, in the pool's thread


def test_a_spare_that_starts_while_init_is_allowed_sends_its_init_at_once_and_not_after_quiesce():
    session = DeviceSession("cpu", spares=1)
    try:
        session.allow_gpu_init()  # nothing started yet: on the old code only a later call sent Init
        session.prime("torch")
        first = session._all_spares()
        assert len(first) == 2  # one candidate, one reference
        _wait_started(first)
        assert all(sp.init_sent is not None for sp in first), "a spare started while allowed must begin its Init"

        session.quiesce()  # about to time: every Init under way finishes, none begins
        assert all(sp.ready for sp in first)
        cand = session.candidate_worker("torch")  # takes the ready spare, starts a replacement
        fresh = [sp for sp in session._all_spares() if sp not in first]
        assert len(fresh) == 1
        _wait_started(fresh)
        assert fresh[0].init_sent is None, "a spare that starts during a timing must not create its context"
        session.allow_gpu_init()
        assert fresh[0].init_sent is not None
        session.quiesce()
        assert fresh[0].ready
        cand.kill()
    finally:
        session.close()
