"""Joining baseline files measured in parts (one per GPU of a host): ``BaselineFile.merge_from`` and its script.

Real files on disk, written by the real writer; the script runs as a subprocess, as a user runs it.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from kernelbench import TIMING_PROTOCOL_VERSION
from kernelbench.baselines import BaselineEntry, BaselineFile
from kernelbench.errors import BaselineError
from kernelbench.problems.model import Problem

ROOT = Path(__file__).resolve().parents[1]
ENV = {"device": "cuda:0", "gpu_name": "NVIDIA H200", "driver": "580.159.04", "cuda": "13.0",
       "torch": "2.11.0+cu130", "triton": "3.6.0", "timing_protocol": TIMING_PROTOCOL_VERSION}


def problem(level: int, pid: int, code: str | None = None) -> Problem:
    return Problem(level=level, problem_id=pid, name=f"{pid}_P", code=code or f"x = {level * 100 + pid}\n",
                   source="test")


def entry(ms: float) -> BaselineEntry:
    return BaselineEntry(mean=ms, median=ms, std=0.0, min=ms, max=ms, num_trials=10)


def write(path: Path, times: dict[tuple[int, int, str], float], env: dict = ENV,
          failures: dict[tuple[int, int, str], str] | None = None, code: dict | None = None) -> BaselineFile:
    f = BaselineFile.open(path)
    for (level, pid, mode), ms in times.items():
        f.put(problem(level, pid, (code or {}).get((level, pid))), mode, entry(ms), environment=env)
    for (level, pid, mode), err in (failures or {}).items():
        f.put_failure(problem(level, pid), mode, err)
    return f


def test_two_gpus_parts_join_into_one_file(tmp_path):
    first = write(tmp_path / "H200.json", {(1, 1, "eager"): 1.0, (1, 1, "compile-default"): 0.5,
                                            (2, 1, "eager"): 2.0})
    part = write(tmp_path / "part.json", {(2, 1, "compile-default"): 1.5, (3, 1, "compile-default"): 3.5,
                                           (1, 1, "compile-default"): 9.9})
    added = first.merge_from(BaselineFile.open(part.path))
    assert added == 2  # 1/1 compile-default was already measured: the first file's time stays
    data = json.loads((tmp_path / "H200.json").read_text())
    assert data["modes"]["compile-default"]["level1"]["1_P.py"]["median"] == 0.5
    assert data["modes"]["compile-default"]["level2"]["1_P.py"]["median"] == 1.5
    assert data["modes"]["compile-default"]["level3"]["1_P.py"]["median"] == 3.5
    reopened = BaselineFile.open(tmp_path / "H200.json")
    assert reopened.count("eager") == 2 and reopened.count("compile-default") == 3
    assert len(data["problem_set"]["hashes"]) == 3


def test_a_time_from_the_part_clears_the_first_files_failure(tmp_path):
    first = write(tmp_path / "a.json", {(1, 1, "eager"): 1.0}, failures={(2, 1, "compile-default"): "timed out"})
    part = write(tmp_path / "b.json", {(2, 1, "compile-default"): 1.5}, failures={(3, 1, "compile-default"): "OOM"})
    first.merge_from(BaselineFile.open(part.path))
    data = json.loads((tmp_path / "a.json").read_text())
    assert data["failures"] == {"level3": {"1_P.py": {"compile-default": "OOM"}}}


def test_parts_of_another_gpu_are_refused(tmp_path):
    first = write(tmp_path / "a.json", {(1, 1, "eager"): 1.0})
    before = (tmp_path / "a.json").read_text()
    part = write(tmp_path / "b.json", {(2, 1, "eager"): 1.5}, env={**ENV, "gpu_name": "NVIDIA H100 80GB HBM3"})
    with pytest.raises(BaselineError, match="H100 times"):
        first.merge_from(BaselineFile.open(part.path))
    assert (tmp_path / "a.json").read_text() == before


def test_parts_of_another_protocol_are_refused(tmp_path):
    first = write(tmp_path / "a.json", {(1, 1, "eager"): 1.0})
    old = write(tmp_path / "b.json", {(2, 1, "eager"): 1.5}, env={**ENV, "timing_protocol": "kb-timing-0"})
    with pytest.raises(BaselineError, match="timing protocol"):  # opening it to extend is refused already
        BaselineFile.open(old.path)
    with pytest.raises(BaselineError, match="timing_protocol 'kb-timing-0'"):
        first.merge_from(BaselineFile(old.path, json.loads(old.path.read_text())))


def test_another_version_of_a_problem_is_refused(tmp_path):
    first = write(tmp_path / "a.json", {(1, 1, "eager"): 1.0})
    part = write(tmp_path / "b.json", {(1, 1, "compile-default"): 0.5}, code={(1, 1): "x = 2\n"})
    with pytest.raises(BaselineError, match="different versions"):
        first.merge_from(BaselineFile.open(part.path))


def run_script(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(ROOT / "scripts" / "merge_baselines.py"), *args],
                          capture_output=True, text=True, timeout=120)


def test_the_script_joins_and_reports_and_refuses_without_writing(tmp_path):
    write(tmp_path / "a.json", {(1, 1, "eager"): 1.0})
    write(tmp_path / "b.json", {(1, 1, "compile-default"): 0.5, (1, 2, "compile-default"): 0.7})
    dry = run_script(str(tmp_path / "a.json"), str(tmp_path / "b.json"), "--dry-run")
    assert dry.returncode == 0, dry.stderr
    assert "2 times added" in dry.stdout
    assert "compile-default" not in (tmp_path / "a.json").read_text()
    done = run_script(str(tmp_path / "a.json"), str(tmp_path / "b.json"))
    assert done.returncode == 0, done.stderr
    assert "compile-default: 2 times" in done.stdout
    write(tmp_path / "c.json", {(1, 3, "eager"): 1.0}, env={**ENV, "gpu_name": "NVIDIA H100 80GB HBM3"})
    before = (tmp_path / "a.json").read_text()
    bad = run_script(str(tmp_path / "a.json"), str(tmp_path / "c.json"))
    assert bad.returncode == 2 and "error:" in bad.stderr and "not merged" in bad.stderr
    assert (tmp_path / "a.json").read_text() == before
    missing = run_script(str(tmp_path / "a.json"), str(tmp_path / "nope.json"))
    assert missing.returncode != 0


def test_a_part_that_does_not_say_its_gpu_protocol_or_set_is_refused(tmp_path):
    first = write(tmp_path / "a.json", {(1, 1, "eager"): 1.0})
    part = write(tmp_path / "b.json", {(2, 1, "eager"): 1.5})
    data = json.loads(part.path.read_text())
    for drop in ("gpu_name", "timing_protocol"):
        bare = {**data, "environment": {k: v for k, v in data["environment"].items() if k != drop}}
        with pytest.raises(BaselineError, match="does not say"):
            first.merge_from(BaselineFile(part.path, bare))
    with pytest.raises(BaselineError, match="a problem set"):
        first.merge_from(BaselineFile(part.path, {k: v for k, v in data.items() if k != "problem_set"}))


def test_the_gpu_of_a_part_is_read_from_its_entries_when_its_environment_lacks_it(tmp_path):
    first = write(tmp_path / "a.json", {(1, 1, "eager"): 1.0})
    part = write(tmp_path / "b.json", {(2, 1, "eager"): 1.5})
    data = json.loads(part.path.read_text())
    data["environment"] = {k: v for k, v in data["environment"].items() if k != "gpu_name"}
    data["level2"]["1_P.py"]["hardware"] = "NVIDIA H100 80GB HBM3"
    with pytest.raises(BaselineError, match="H100"):
        first.merge_from(BaselineFile(part.path, data))


def test_a_failure_both_files_record_stays_the_first_files(tmp_path):
    first = write(tmp_path / "a.json", {(1, 1, "eager"): 1.0}, failures={(2, 1, "eager"): "first"})
    part = write(tmp_path / "b.json", {(1, 2, "eager"): 1.0}, failures={(2, 1, "eager"): "second"})
    first.merge_from(BaselineFile.open(part.path))
    assert json.loads((tmp_path / "a.json").read_text())["failures"]["level2"]["1_P.py"]["eager"] == "first"


def test_the_script_merges_half_precision_files(tmp_path):
    env = {**ENV, "precision": "fp16"}
    a = write(tmp_path / "a.json", {(1, 1, "eager"): 1.0}, env=env)
    b = write(tmp_path / "b.json", {(1, 2, "eager"): 1.0}, env=env)
    for f in (a, b):  # what the precision-aware writer records for an fp16 measurement
        data = json.loads(f.path.read_text())
        data["environment"]["precision"] = "fp16"
        f.path.write_text(json.dumps(data))
    done = run_script(str(a.path), str(b.path))
    assert done.returncode == 0, done.stderr
    assert "eager: 2 times" in done.stdout


def test_a_refused_merge_changes_nothing_even_in_memory(tmp_path):
    first = write(tmp_path / "a.json", {(1, 1, "eager"): 1.0})
    part = write(tmp_path / "b.json", {(1, 2, "eager"): 1.0, (1, 3, "eager"): 2.0})
    data = json.loads(part.path.read_text())
    data["failures"] = {"level1": ["not", "a", "dict"]}
    before = json.dumps(first.data, sort_keys=True)
    with pytest.raises(BaselineError, match="malformed"):
        first.merge_from(BaselineFile(part.path, data))
    assert json.dumps(first.data, sort_keys=True) == before
