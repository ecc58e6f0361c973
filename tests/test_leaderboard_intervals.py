"""The leaderboard shows each speedup's 95% interval, its timing flags and shares, and fast_1 beyond noise
(issue 23), from real aggregated data rendered into the static site."""

from __future__ import annotations

import json
import random
import re

from fixtures.leaderboard import factory as F

from kernelbench.results import TimingStats
from leaderboard.site import build_site


def _interleaved(result, speedup: float, noise: float, seed: int):
    rng = random.Random(seed)
    ref, cand = [], []
    for _ in range(8):
        for out, base in ((ref, 1.0), (cand, 1.0 / speedup)):
            lv = 1.0 + noise * rng.gauss(0, 1)
            out += [base * lv for _ in range(5)]
    return result.model_copy(update={"runtime": TimingStats(samples_ms=cand, block_calls=5),
                                     "ref_runtime": TimingStats(samples_ms=ref, block_calls=5)})


def test_entry_page_and_board_show_intervals_flags_and_significant_fast_1(tmp_path):
    from leaderboard.aggregate import AggregateConfig, aggregate
    from leaderboard.bundle import ResultsBundle, write_bundle
    from leaderboard.schema import load_submission

    keys = ["level_1_problem_1_sample_0", "level_1_problem_2_sample_0"]
    sub_path = F.write_submission(tmp_path / "submissions" / "delta.json",
                                  F.submission_dict("Delta", kernels={k: F.kernel("triton_relu") for k in keys}))
    sub = load_submission(sub_path)
    clear = _interleaved(F.result(1, 1), 2.0, 0.001, 1)
    noisy = _interleaved(F.result(1, 2), 1.05, 0.2, 2).model_copy(update={"host_share": 3.0, "own_kernel_share": 0.4})
    write_bundle(ResultsBundle(entry="delta", gpu="H100", submission_sha256=sub.sha256(), problem_source="test",
                               evaluated_on="2026-03-01", results=[clear, noisy]), tmp_path / "data" / "evaluations")
    aggregate(F.problems(), AggregateConfig(submissions_dir=tmp_path / "submissions",
                                            evaluations_dir=tmp_path / "data" / "evaluations",
                                            baselines_dir=tmp_path / "baselines", exclusions_path=None,
                                            out_dir=tmp_path / "data"))
    data = json.loads((tmp_path / "data" / "results" / "delta__H100.json").read_text())
    rows = {r["key"]: r for r in data["problems"]}
    assert rows["level_1_problem_2"]["timing_flags"] == ["imprecise", "host-bound"]
    lo, hi = rows["level_1_problem_1"]["speedup_ci95"]
    assert lo < 2.0 < hi
    overall = data["scores"]["overall"]
    assert overall["fast_p"]["fast_1"] > overall["fast_p_significant"]["fast_1"] > 0
    build_site(tmp_path / "data", tmp_path / "site")
    page = (tmp_path / "site" / "entries" / "delta__H100.html").read_text()
    assert "timing: host-bound (host 3.00× the GPU time)" in page and "timing: imprecise" in page
    assert "own kernels: 40.0% of GPU time" in page and 'class="ci"' in page
    assert "fast_1 beyond noise" in page
    board = (tmp_path / "site" / "index.html").read_text()
    assert "fast_1 (sig.)" in board
    # The geomean with its 95% interval on the board, in its download and in the entry's per-level table,
    # and the significance-aware fast_1 beside KernelBench's there too.
    glo, ghi = overall["geomean_ci95"]
    assert glo < overall["geomean_speedup"] < ghi
    shown = f'[{glo:.2f}×–{ghi:.2f}×]'
    assert shown in board and shown in page
    level = data["scores"]["levels"]["1"]
    table = page[page.index('id="levels"'):]
    headers = re.findall(r"<th[^>]*>([^<]*)</th>", table[:table.index("</thead>")])
    row = table[table.index("<td>Level 1</td>"):]
    cells = re.findall(r"<td[^>]*>(.*?)</td>", row[:row.index("</tr>")])
    by_header = dict(zip(headers, cells))
    assert by_header["fast_1"] == f'{level["fast_p"]["fast_1"] * 100:.1f}%' == "50.0%"
    assert by_header["fast_1 (sig.)"] == f'{level["fast_p_significant"]["fast_1"] * 100:.1f}%' == "25.0%"
    lo1, hi1 = level["geomean_ci95"]
    assert f"[{lo1:.2f}×–{hi1:.2f}×]" in by_header["Geomean (correct)"]
    download = json.loads(next((tmp_path / "site" / "gpu").glob("*/index.json")).read_text())
    entry = next(r for r in download["rows"] if r["entry"] == "delta")
    assert (entry["geomean_lo"], entry["geomean_hi"]) == (glo, ghi)
    assert {"geomean_lo", "geomean_hi"} <= set(download["columns"])
