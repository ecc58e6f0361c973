"""scripts/bench_host_copies.py: the sandbox's host-copy transport measured trial by trial, every read checked."""

from __future__ import annotations

import json
import subprocess
import sys

from kbtesting import SCRIPTS, repo_env

SCRIPT = str(SCRIPTS / "bench_host_copies.py")


def test_every_mode_reads_back_what_was_exported_on_the_cpu(tmp_path):
    out = tmp_path / "h.json"
    proc = subprocess.run([sys.executable, SCRIPT, "--device", "cpu", "--gib", "0.01", "--trials", "2", "--json", str(out)],
                          capture_output=True, text=True, timeout=300, env=repo_env({"OMP_NUM_THREADS": "1"}))
    assert proc.returncode == 0, proc.stderr
    (row,) = json.loads(out.read_text())["rows"]
    assert row["device"] == "cpu" and row["bytes"] == int(0.01 * (1 << 30)) // 4 * 4
    for mode in ("export", "read, mapped per trial", "read into own memory", "read, kept mapping"):
        assert row[mode]["median_ms"] > 0 and row[mode]["gb_per_s"] > 0, mode
        assert mode in proc.stdout
    # Nothing to page-lock for without a GPU: that mode is reported as skipped.
    assert row["read, kept + page-locked"] is None and row["reader_page_locked"] is False
    assert "read, kept + page-locked" in proc.stdout and "(cannot page-lock here)" in proc.stdout


def test_bad_arguments_are_one_line_errors():
    proc = subprocess.run([sys.executable, SCRIPT, "--device", "cpu", "--trials", "0"],
                          capture_output=True, text=True, timeout=120, env=repo_env())
    assert proc.returncode == 2 and "must be positive" in proc.stderr and "Traceback" not in proc.stderr
