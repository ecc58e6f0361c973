"""Problem affinity of the server's queue: which waiting job a free device takes (kernelbench/server/queue.py).

The jobs are real: a real :class:`JobQueue` (not started, so no evaluator process) admits real requests for two
problems on disk and builds their :class:`EvalJob`; the choice is made by the queue's own :class:`Affinity` on
a clock given by the test. The dispatch path that uses it (the key remembered after a normal finish, forgotten
after a death) runs against a real server in ``tests/test_server.py``.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from kbtesting import SCALED_RELU_PROBLEM, scaled_relu_candidate

from kernelbench.evaluation.parent.session import reference_key
from kernelbench.server.client import make_request
from kernelbench.server.config import ConfigError, ServerConfig
from kernelbench.server.queue import Affinity, JobQueue

HONEST = scaled_relu_candidate("        return x.clamp_min(0) * self.scale\n")


@pytest.fixture(scope="module")
def queue(tmp_path_factory) -> JobQueue:
    root: Path = tmp_path_factory.mktemp("problems")
    (root / "level1").mkdir()
    (root / "level1" / "1_Scaled_relu.py").write_text(SCALED_RELU_PROBLEM)
    (root / "level1" / "2_Scaled_relu_48.py").write_text(SCALED_RELU_PROBLEM.replace("N = 64", "N = 48"))
    return JobQueue(ServerConfig(devices=("cpu",), problem_source="directory", problem_path=str(root)))


def jobs(queue: JobQueue, *problems: int):
    """Admit one job per problem id, in order; returns their records (oldest first), then empties the queue."""
    records = queue.submit([make_request(HONEST, level=1, problem_id=p, backend="torch") for p in problems])
    for r in records:
        queue.delete(r.id)
    return records


def test_the_oldest_job_of_the_last_problem_goes_first(queue):
    waiting = jobs(queue, 2, 1, 2, 1)
    a = reference_key(waiting[1].job)
    assert reference_key(waiting[3].job) == a != reference_key(waiting[0].job)
    assert Affinity(10).choose(waiting, a, now=100.0) == 1  # not the head, and not the younger job of problem 1
    assert waiting[0].passed_over_mono == 100.0  # the head's window starts now
    # The head itself matches, no job matches, or the device holds nothing: the head.
    assert Affinity(10).choose(waiting[1:], a, now=100.0) == 0
    b_only = jobs(queue, 2, 2)
    assert Affinity(10).choose(b_only, a, now=100.0) == 0 and b_only[0].passed_over_mono is None
    assert Affinity(10).choose(jobs(queue, 2, 1), None, now=100.0) == 0


def test_the_head_goes_next_once_its_window_has_passed(queue):
    waiting = jobs(queue, 2, 1, 1, 1)
    a = reference_key(waiting[1].job)
    policy = Affinity(5)
    assert policy.choose(waiting, a, now=100.0) == 1
    assert policy.choose(waiting[:1] + waiting[2:], a, now=104.9) == 1  # still within 5 s of the first pass-over
    assert policy.choose(waiting[:1] + waiting[3:], a, now=105.0) == 0  # 5 s: the head, though a job matches
    assert waiting[0].passed_over_mono == 100.0  # counted from the first pass-over, not the latest


def test_a_window_of_zero_is_fifo(queue):
    waiting = jobs(queue, 2, 1)
    assert Affinity(0).choose(waiting, reference_key(waiting[1].job), now=100.0) == 0
    assert waiting[0].passed_over_mono is None


def test_the_window_comes_from_the_config_and_is_checked(queue):
    assert queue.affinity.window_s == 10.0  # the default: about three level-2 evaluations
    assert JobQueue(ServerConfig(affinity_window_s=0)).affinity.window_s == 0
    with pytest.raises(ConfigError, match="affinity-window"):
        ServerConfig(affinity_window_s=-1).check()
