"""scripts/gpu_check.sh refuses a misspelt phase before it runs anything (each device minute counts)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def run(*phases: str, tmp_path: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "KB_CHECK_PHASES_ONLY": "1", "OUT": str(tmp_path / "out")}
    return subprocess.run(["bash", str(ROOT / "scripts" / "gpu_check.sh"), *phases], capture_output=True, text=True,
                          timeout=60, env=env, cwd=tmp_path)


@pytest.mark.parametrize("phases", [["tests-b", "timing-profile"], ["official-baselines"], ["evaltests", "server"]])
def test_known_phases_pass_the_check(phases, tmp_path):
    proc = run(*phases, tmp_path=tmp_path)
    assert proc.returncode == 0, proc.stderr


def test_an_unknown_phase_stops_everything_before_it_starts(tmp_path):
    proc = run("tests-b", "overheads", tmp_path=tmp_path)
    assert proc.returncode == 2
    assert "unknown phase overheads; nothing was run" in proc.stderr and " overhead " in proc.stderr
    assert not (tmp_path / "out").exists()
