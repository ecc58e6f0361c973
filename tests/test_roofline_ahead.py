"""Roofline costs counted ahead of a batch (issue 25): a real child process writing the real cache file."""

from __future__ import annotations

import json

from kbtesting import problem_source

from kernelbench.evaluation.parent.costs_ahead import start_costs_ahead
from kernelbench.problems.model import Problem
from kernelbench.roofline import COST_MODEL_VERSION, CostCache, count_cost, problem_cost


def problem(pid: int, forward: str = "torch.relu(x)", extra: str = "") -> Problem:
    return Problem(level=1, problem_id=pid, name=f"{pid}_p", code=problem_source(forward=forward) + extra,
                   source="test")


def test_a_batchs_costs_are_counted_ahead_into_the_shared_cache(tmp_path):
    cache_file = tmp_path / "costs.json"
    cached, first, second = problem(1), problem(2, "torch.sigmoid(x)"), problem(3, "x @ x")
    broken = problem(4, extra="\nraise RuntimeError('cannot be counted')\n")
    CostCache(cache_file).put(count_cost(cached))
    # In job order, each problem once, the cached one skipped, one that cannot be counted left to the check.
    ahead = start_costs_ahead([first, cached, broken, first, second], cache_file)
    assert ahead is not None and ahead.count == 3
    assert ahead.proc.wait(timeout=120) == 0
    costs = json.loads(cache_file.read_text())
    assert costs["version"] == COST_MODEL_VERSION
    assert set(costs["costs"]) == {cached.hash, first.hash, second.hash}
    # What the child counted is what counting here gives.
    assert CostCache(cache_file).get(second.hash) == count_cost(second)
    assert not list(tmp_path.glob("kb-costs-*"))  # the request file is gone
    assert start_costs_ahead([first, second, cached], cache_file) is None  # nothing left to count


def test_a_cache_in_use_sees_costs_another_process_wrote_since(tmp_path):
    """The evaluator's cache was read before the child wrote: a miss reads the file again, and the
    problem's code is not run a second time."""
    cache_file, marker = tmp_path / "costs.json", tmp_path / "executions"
    p = problem(1, extra=f"\nwith open({str(marker)!r}, 'a') as _f:\n    _f.write('x')\n")
    parent = CostCache(cache_file)
    assert parent.get(p.hash) is None
    ahead = start_costs_ahead([p], cache_file)
    assert ahead is not None and ahead.proc.wait(timeout=120) == 0
    assert marker.read_text() == "x"
    assert parent.get(p.hash) is not None
    assert problem_cost(p, "fp32", cache=parent).flops == 0  # a ReLU: no FLOPs, only bytes
    assert marker.read_text() == "x"


def test_closing_stops_a_counter_that_is_still_running(tmp_path):
    slow = problem(1, extra="\nimport time\ntime.sleep(60)\n")
    ahead = start_costs_ahead([slow], tmp_path / "costs.json")
    assert ahead is not None
    ahead.close()
    assert ahead.proc.poll() is not None
