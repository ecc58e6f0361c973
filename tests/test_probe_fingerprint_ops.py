"""scripts/probe_fingerprint_ops.py on the CPU: every formulation it times gives the float64 path's sums within its
groups' rounding at a size no group length divides (it leaves out, and names, any that does not)."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

SCRIPT = Path(__file__).resolve().parent.parent / "scripts" / "probe_fingerprint_ops.py"


def test_every_formulation_is_right_and_timed_at_an_odd_size(tmp_path, capsys):
    spec = importlib.util.spec_from_file_location("probe_fingerprint_ops", SCRIPT)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    out = tmp_path / "probe.json"
    assert mod.main(["--device", "cpu", "--elements", "3001", "--repeats", "1", "--json", str(out)]) == 0
    assert "wrong, left out" not in capsys.readouterr().err
    (row,) = json.loads(out.read_text())["rows"]
    timed = [k for k in row if k.startswith("S")]
    assert len(timed) == 17 and {"float64", "shipped"} <= set(row) and all(row[k] > 0 for k in timed)
    assert "sum dim0 [32,R]" in row["blocks"]
