"""scripts/bench_fingerprint.py on the CPU: every variant it times gives the shipped fingerprint's sums (the
script refuses to time one that does not), and it writes one row per size."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

SCRIPT = Path(__file__).resolve().parent.parent / "scripts" / "bench_fingerprint.py"


def _script():
    spec = importlib.util.spec_from_file_location("bench_fingerprint", SCRIPT)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_the_variants_agree_with_the_shipped_fingerprint_and_are_timed(tmp_path, capsys):
    out = tmp_path / "fp.json"
    assert _script().main(["--device", "cpu", "--elements", "3000", "257", "--repeats", "2", "--json", str(out)]) == 0
    rows = json.loads(out.read_text())["rows"]
    assert [r["elements"] for r in rows] == [3000, 257]
    for r in rows:
        assert set(r) == {"elements", "fixed", "shipped", "float64", "mixed-dtype", "pattern"}
        assert all(v > 0 for k, v in r.items() if k != "elements")
    assert "3000 elements" in capsys.readouterr().out


def test_a_variant_that_weighs_wrongly_is_refused(monkeypatch, capsys):
    mod = _script()
    real = mod._variants

    def broken(torch, compare):
        variants = real(torch, compare)
        make, fn = variants["pattern"]
        variants["pattern"] = (make, lambda t, st, key: fn(t, st, key + 1))  # another call's weights
        return variants

    monkeypatch.setattr(mod, "_variants", broken)
    assert mod.main(["--device", "cpu", "--elements", "3000", "--repeats", "1"]) == 1
    assert "does not give the shipped sums" in capsys.readouterr().err


def test_a_float32_path_further_from_the_float64_sums_than_its_rounding_is_refused(monkeypatch, capsys):
    import torch

    from kernelbench.evaluation import compare

    real = compare._Segmented.sums

    def off(self, part, *a, **k):  # a segment's sum wrong by far more than float32 rounding
        out = real(self, part, *a, **k)
        return out + torch.tensor([1e-2] + [0.0] * (out.numel() - 1), dtype=out.dtype)

    monkeypatch.setattr(compare._Segmented, "sums", off)
    assert _script().main(["--device", "cpu", "--elements", "3000", "--repeats", "1"]) == 1
    assert "float32 path's sums are further" in capsys.readouterr().err
