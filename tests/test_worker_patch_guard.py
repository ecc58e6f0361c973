"""The runtime patch guard watches the worker's own code: the modules of ``kernelbench.evaluation.worker``
(the timed loop, the export, the launch trace) and the protocol its replies are encoded with.

Before the worker became a package it ran as ``__main__``, so the guard's ``kernelbench.evaluation.worker``
entry matched nothing in the worker process and a candidate could replace the worker's own methods unseen.
"""

from __future__ import annotations

import pytest

from kernelbench.evaluation import EvalJob, EvalSettings, evaluate
from kernelbench.results import Stage

HONEST = "import torch\nimport torch.nn as nn\n\nclass ModelNew(nn.Module):\n    def forward(self, x):\n" \
         "        return x.clamp_min(0)\n"


def _replacing(module: str, owner: str, name: str) -> str:
    """A candidate that wraps ``owner.name`` of ``module`` at import (it still works: only the guard sees it)."""
    target = f"sys.modules[{module!r}]" + (f".{owner}" if owner else "")
    return ("import sys\n"
            f"_orig = {target}.{name}\n"
            f"def _wrapped(*a, **k):\n    return _orig(*a, **k)\n"
            f"setattr({target}, {name!r}, _wrapped)\n" + HONEST)


@pytest.mark.parametrize("module, owner, name", [
    ("kernelbench.evaluation.worker.timing", "TimingCommands", "_flush"),
    ("kernelbench.evaluation.worker.export", "ExportCommands", "_export"),
    ("kernelbench.evaluation.worker.process", "Worker", "cmd_compare"),
    ("kernelbench.evaluation.protocol", "", "encode_reply"),
])
def test_replacing_the_workers_own_code_fails_the_guard(relu_problem, module, owner, name):
    settings = EvalSettings(backend="torch", device="cpu", static_guard=False, correctness_trials=1)
    result = evaluate(EvalJob(relu_problem, _replacing(module, owner, name), settings))
    assert result.error is not None and (result.error.stage, result.error.type) == (Stage.GUARD, "RuntimeGuard")
    assert f"{module}.{owner + '.' if owner else ''}{name}" in result.error.message


def test_an_honest_candidate_trips_nothing(relu_problem):
    settings = EvalSettings(backend="torch", device="cpu", static_guard=False, correctness_trials=1)
    result = evaluate(EvalJob(relu_problem, HONEST, settings))
    assert result.correct and not result.guard_findings, result.guard_findings
