"""scripts/gpu_check.sh refuses a misspelt phase before it runs anything (each device minute counts); its load test
phases (server-start, server-wait) run in their CPU form."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def run(*phases: str, tmp_path: Path, **env: str) -> subprocess.CompletedProcess:
    """gpu_check.sh PHASES; with no ``env`` only the phase names are checked, else the phases run with ``env``."""
    env = {**os.environ, "OUT": str(tmp_path / "out"), **(env or {"KB_CHECK_PHASES_ONLY": "1"})}
    return subprocess.run(["bash", str(ROOT / "scripts" / "gpu_check.sh"), *phases], capture_output=True, text=True,
                          timeout=240, env=env, cwd=tmp_path)


@pytest.mark.parametrize("phases", [["tests-b", "timing-profile"], ["official-baselines"], ["evaltests", "server"],
                                    ["server-start", "server-wait"]])
def test_known_phases_pass_the_check(phases, tmp_path):
    proc = run(*phases, tmp_path=tmp_path)
    assert proc.returncode == 0, proc.stderr


def test_an_unknown_phase_stops_everything_before_it_starts(tmp_path):
    proc = run("tests-b", "overheads", tmp_path=tmp_path)
    assert proc.returncode == 2
    assert "unknown phase overheads; nothing was run" in proc.stderr and " overhead " in proc.stderr
    assert not (tmp_path / "out").exists()


def test_server_wait_without_a_run_says_so(tmp_path):
    proc = run("server-wait", tmp_path=tmp_path, KB_LOAD_DIR=str(tmp_path / "load"))
    assert proc.returncode == 1 and "no load test on this machine" in proc.stderr, proc.stderr


def _stat(pid: int) -> list[str] | None:
    """/proc/PID/stat after the command name: [state, ppid, pgrp, session, ...]; None once it is gone."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None


@pytest.mark.slow
def test_the_load_test_outlives_the_call_that_started_it(tmp_path):
    """server-start returns at once with the run going on in a session of its own; a second server-start is refused
    meanwhile; server-wait prints progress and brings back the log, the progress and the JSON (a CPU-sized run)."""
    from kernelbench.server.device import descendants, kill_tree

    load = tmp_path / "load"
    env = {"KB_LOAD_DIR": str(load), "KB_SERVER_REQUESTS": "4", "KB_SERVER_CLIENTS": "2", "KB_SERVER_GROUP": "2",
           "KB_SERVER_EXTRA": "--gpus cpu --level 1 --problem-id 8 12 --reduced-size --candidates reference",
           "CUDA_VISIBLE_DEVICES": "", "KB_SERVER_WAIT_S": "180"}
    start = run("server-start", tmp_path=tmp_path, **env)
    pid = int((load / "pid").read_text())
    try:
        assert start.returncode == 0 and "running in the background" in start.stdout, start.stdout + start.stderr
        assert int(_stat(pid)[3]) == pid  # a session leader: the device tool leaves such processes running
        again = run("server-start", tmp_path=tmp_path, **env)
        assert again.returncode == 1 and "still running" in again.stderr
        waited = run("server-wait", tmp_path=tmp_path, **env)
        assert waited.returncode == 0, waited.stdout + waited.stderr
    finally:
        if not (load / "rc").exists():  # a failed test leaves no run behind
            fields = _stat(pid)
            kill_tree({**descendants(pid), **({pid: fields[19]} if fields else {})})
    out = tmp_path / "out"
    assert "the run ended with status 0" in waited.stdout and "4 of 4 results, 0 lost" in waited.stdout
    report = json.loads((out / "bench_server.json").read_text())
    assert report["results"] == 4 and report["lost"] == 0 and report["group_size"] == 2
    assert json.loads((out / "progress.json").read_text())["state"] == "done"
    assert "4/4 results, 0 lost" in (out / "bench_server.log").read_text()
