"""The process that counts a batch's roofline costs ahead of its timed results (kernelbench.roofline.ahead).

Only batches on a GPU start one: the speed-of-light check runs after each timed result, and only there.
"""

from __future__ import annotations

import logging
import os
import subprocess
import sys
import tempfile
from collections.abc import Iterable
from pathlib import Path

from kernelbench.evaluation.sandbox import scrubbed_environment
from kernelbench.problems.model import Problem

log = logging.getLogger(__name__)


class CostsAhead:
    """A running counter of costs; :meth:`close` stops it (what it counted so far stays in the cache)."""

    def __init__(self, proc: subprocess.Popen, count: int):
        self.proc, self.count = proc, count

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


def start_costs_ahead(problems: Iterable[Problem], cache_path: Path | None = None) -> CostsAhead | None:
    """Start counting the costs the cache lacks, in the order given; None when none is missing or the
    process cannot start (the check then counts each cost itself, as without it)."""
    from kernelbench.roofline import CostCache, default_cache_path
    from kernelbench.roofline.ahead import request, uncounted

    path = cache_path or default_cache_path()
    todo = uncounted(problems, CostCache(path))
    if not todo:
        return None
    pkg_root = str(Path(__file__).resolve().parents[3])
    env = scrubbed_environment(extra={"PYTHONPATH": pkg_root, "OMP_NUM_THREADS": "2", "CUDA_VISIBLE_DEVICES": ""})
    try:
        # A file, not a pipe: a pipe would block the batch's start until the child has imported torch.
        fd, request_path = tempfile.mkstemp(prefix="kb-costs-", suffix=".json")
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(request(todo, path))
        proc = subprocess.Popen([sys.executable, "-m", "kernelbench.roofline.ahead", request_path],
                                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
    except OSError as e:
        log.warning("could not start counting roofline costs ahead: %s", e)
        return None
    log.info("counting the roofline costs of %d problem(s) ahead (pid %d)", len(todo), proc.pid)
    return CostsAhead(proc, len(todo))
