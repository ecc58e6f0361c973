"""The baseline files committed in baselines/ cover the built-in suite, in every mode, under today's protocol.

Scores are only as good as these files: a problem missing from one, a file left half-measured, or a
file timed under an older protocol would silently change what ``kernelbench analyze`` and the
leaderboard report. These tests read the real committed files.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from kernelbench import TIMING_PROTOCOL_VERSION
from kernelbench.baselines import (
    BASELINE_MODES,
    BaselineFile,
    compare_baselines,
    gpu_family,
    load_baseline,
    plan,
)
from kernelbench.problems.sources import load_builtin

BASELINES = Path(__file__).resolve().parents[1] / "baselines"
COMMITTED = ("H100", "H200")


@pytest.fixture(scope="module")
def builtin():
    return list(load_builtin())


@pytest.mark.parametrize("label", COMMITTED)
def test_committed_file_has_every_builtin_problem_in_every_mode(label, builtin):
    file = BaselineFile.open(BASELINES / f"{label}.json", label)  # refuses another GPU or protocol
    todo, settled = plan(file, builtin, BASELINE_MODES, retry_failed=True)
    assert [f"{p.level}/{p.filename} {mode}" for p, mode in todo] == []
    assert len(settled) == len(builtin) * len(BASELINE_MODES)
    env = file.environment
    assert env["timing_protocol"] == TIMING_PROTOCOL_VERSION
    assert gpu_family(env["gpu_name"]) == label


@pytest.mark.parametrize("label", COMMITTED)
@pytest.mark.parametrize("mode", BASELINE_MODES)
def test_committed_times_are_positive_and_load_by_mode(label, mode, builtin):
    baseline = load_baseline(BASELINES / f"{label}.json", mode)
    for p in builtin:
        entry = baseline.levels[p.level][p.filename]
        assert 0 < entry.headline_ms < 10_000, (p.level, p.filename, entry.headline_ms)


@pytest.mark.parametrize("label", COMMITTED)
def test_committed_eager_repeat_agrees_with_the_file_it_repeats(label, builtin):
    """The second, independent eager run: all problems, and the median problem within 2% of the first."""
    agreement = compare_baselines(load_baseline(BASELINES / f"{label}.json"),
                                  load_baseline(BASELINES / f"{label}.eager-repeat.json"))
    assert agreement.n == len(builtin) and agreement.only_in_one == ()
    assert 0.98 < agreement.median_ratio < 1.02
