"""``kernelbench serve`` on the GPU machine: the real server on every visible GPU, real kernels, timed verdicts.

Run there with ``python -m pytest -m gpu tests/test_server_gpu.py`` (or ``bash scripts/gpu_check.sh server``).
"""

from __future__ import annotations

import socket
import subprocess
import sys
import time

import httpx
import pytest

from kernelbench.evaluation.timing import MIN_TIMED_CALLS
from kernelbench.results import Stage
from kernelbench.server.client import EvalClient, make_request
from kernelbench.solutions import get_solution

pytestmark = pytest.mark.gpu

EXPLOIT = """
import torch
import torch.nn as nn
import triton
import triton.language as tl

@triton.jit
def unused(x_ptr):
    pass

class ModelNew(nn.Module):
    def forward(self, x):
        return torch.relu(x)
"""


@pytest.fixture(scope="module")
def url():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.Popen([sys.executable, "-m", "kernelbench.cli.main", "serve", "--port", str(port)])
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        assert proc.poll() is None, "the server exited"
        try:
            if httpx.get(base + "/health", timeout=2).status_code == 200:
                break
        except httpx.TransportError:
            time.sleep(0.5)
    yield base
    proc.terminate()
    proc.wait(timeout=120)


def test_worked_solution_is_timed_and_an_exploit_refused(url):
    relu = get_solution(1, 8, "triton").source
    with EvalClient(url) as c:
        assert all(d.device.startswith("cuda:") for d in c.health().devices)
        ok, bad = c.evaluate_batch([make_request(relu, level=1, problem_id=8, backend="triton"),
                                    make_request(EXPLOIT, level=1, problem_id=8, backend="triton")])
    assert ok.correct and ok.speedup is not None and ok.environment.device.startswith("cuda"), ok.error
    assert ok.runtime.n >= MIN_TIMED_CALLS and ok.ref_runtime is not None
    assert not bad.correct and bad.error.stage == Stage.GUARD
