"""The parallel compile warm-up before baselines: what it leaves in Inductor's cache, what it deletes.

The slow test compiles for real (Inductor on the CPU) and checks that the timed run then reads the
warm-up's FX graph entry instead of writing its own.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from kernelbench.baselines import baseline_settings, measure_problem
from kernelbench.cli.main import main
from kernelbench.evaluation.compile_warmup import (
    WARMED_DIR,
    forget_timed_choices,
    inductor_cache_dir,
    is_warm,
    mark_warm,
    warm_key,
    warm_up,
    warmup_environment,
)
from kernelbench.problems.model import Problem

SMALL = """
import torch

class Model(torch.nn.Module):
    def forward(self, x):
        return torch.relu(x) * 2.0 + 1.0

def get_inputs():
    return [torch.rand(64, 32)]

def get_init_inputs():
    return []
"""
BROKEN = "import torch\nclass Model(torch.nn.Module:\n"


def problem(pid: int, code: str) -> Problem:
    return Problem(level=1, problem_id=pid, name=f"{pid}_P{pid}", code=code, source="test")


def test_cache_dir_is_torchs_default_when_unset(monkeypatch):
    from torch._inductor.runtime.cache_dir_utils import default_cache_dir

    monkeypatch.delenv("TORCHINDUCTOR_CACHE_DIR", raising=False)
    assert inductor_cache_dir() == Path(default_cache_dir()).resolve()


def test_cache_dir_follows_the_environment(tmp_path):
    assert inductor_cache_dir({"TORCHINDUCTOR_CACHE_DIR": str(tmp_path / "ind")}) == (tmp_path / "ind").resolve()


def test_max_autotune_warmups_write_no_fx_graph_entries(tmp_path):
    auto = warmup_environment("compile-max-autotune", 4, tmp_path)
    default = warmup_environment("compile-default", 4, tmp_path)
    assert auto["TORCHINDUCTOR_FX_GRAPH_CACHE"] == "0"
    assert "TORCHINDUCTOR_FX_GRAPH_CACHE" not in default
    assert default["TORCHINDUCTOR_CACHE_DIR"] == str(tmp_path)
    # the workers share the cores instead of each starting one compile thread per core
    assert int(default["TORCHINDUCTOR_COMPILE_THREADS"]) == max(1, (os.cpu_count() or 1) // 4)


def test_forget_timed_choices_keeps_compiled_code(tmp_path):
    (tmp_path / "ab").mkdir()
    (tmp_path / "ab" / "kernel.py").write_text("# compiled kernel")
    (tmp_path / "ab" / "k1.best_config").write_text("{}")
    (tmp_path / "cd").mkdir()
    (tmp_path / "cd" / "k2.best_config").write_text("{}")
    (tmp_path / "cache" / "hash").mkdir(parents=True)
    (tmp_path / "cache" / "hash" / "mm_timings").write_text("{}")
    (tmp_path / "fxgraph" / "x").mkdir(parents=True)
    (tmp_path / "fxgraph" / "x" / "entry").write_text("graph")

    assert forget_timed_choices(tmp_path) == 3
    assert not list(tmp_path.rglob("*.best_config"))
    assert not (tmp_path / "cache").exists()
    assert (tmp_path / "ab" / "kernel.py").exists()
    assert (tmp_path / "fxgraph" / "x" / "entry").exists()
    assert forget_timed_choices(tmp_path / "missing") == 0


def test_past_the_deadline_nothing_is_started(tmp_path, monkeypatch):
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(tmp_path))
    s = baseline_settings(0.1, device="cpu")
    report = warm_up([(problem(1, SMALL), "compile-default")], s, "cpu", 2, deadline_s=0.0, progress=False)
    assert [o.ok for o in report.outcomes] == [False]
    assert "deadline" in report.outcomes[0].error
    assert not (tmp_path / "fxgraph").exists()


def test_eager_and_cudagraphs_need_no_warmup(tmp_path, monkeypatch):
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(tmp_path))
    s = baseline_settings(0.1, device="cpu")
    report = warm_up([(problem(1, SMALL), "eager"), (problem(1, SMALL), "compile-cudagraphs")], s, "cpu", 2,
                     progress=False)
    assert report.outcomes == []


def test_the_warm_key_changes_with_what_changes_the_compiled_code():
    s = baseline_settings(0.1, device="cpu")
    a = warm_key(problem(1, SMALL), "compile-default", s, "9.0")
    assert a == warm_key(problem(1, SMALL), "compile-default", s, "9.0")
    assert a == warm_key(problem(7, SMALL), "compile-default", s, "9.0")  # same code elsewhere: same graph
    others = {
        warm_key(problem(1, SMALL + "\n# edited\n"), "compile-default", s, "9.0"),
        warm_key(problem(1, SMALL), "compile-max-autotune", s, "9.0"),
        warm_key(problem(1, SMALL), "compile-default", baseline_settings(0.1, precision="bf16", device="cpu"), "9.0"),
        warm_key(problem(1, SMALL), "compile-default", s, "10.0"),
    }
    assert a not in others and len(others) == 4


def test_a_reference_warmed_before_in_this_cache_is_not_compiled_again(tmp_path, monkeypatch):
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(tmp_path))
    s = baseline_settings(0.1, device="cpu")
    # Broken code: compiling it would fail, so a reused outcome proves no worker ran.
    warmed, fresh = problem(1, BROKEN), problem(2, BROKEN + "# other\n")
    key = warm_key(warmed, "compile-default", s, None)
    mark_warm(tmp_path, key, warmed.key, "compile-default", 12.5)
    assert is_warm(tmp_path, key) and not list((tmp_path / WARMED_DIR).glob(".*"))  # no temporary file left

    report = warm_up([(warmed, "compile-default"), (fresh, "compile-default")], s, "cpu", 2, progress=False)
    by_key = {o.problem_key: o for o in report.outcomes}
    assert by_key[warmed.key].ok and by_key[warmed.key].reused and by_key[warmed.key].seconds == 0.0
    assert not by_key[fresh.key].ok and not by_key[fresh.key].reused  # tried, failed, and not marked
    assert not is_warm(tmp_path, warm_key(fresh, "compile-default", s, None))
    assert report.reused == 1 and "1 already warm from an earlier run" in report.summary()
    # the same reference in the other compile mode is not warm
    again = warm_up([(warmed, "compile-max-autotune")], s, "cpu", 1, deadline_s=0.0, progress=False)
    assert [o.reused for o in again.outcomes] == [False]


def test_compile_jobs_must_not_be_negative(capsys):
    with pytest.raises(SystemExit) as e:
        main(["baselines", "--compile-jobs", "-1", "--device", "cpu"])
    assert e.value.code == 2
    assert "0 or more" in capsys.readouterr().err


def _fx_entries(cache: Path) -> set[Path]:
    return {p for p in (cache / "fxgraph").rglob("*") if p.is_file()} if (cache / "fxgraph").exists() else set()


@pytest.mark.slow
def test_timed_run_reads_what_the_warmup_compiled(tmp_path, monkeypatch):
    cache = tmp_path / "inductor"
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(cache))
    s = baseline_settings(0.1, device="cpu")
    good, bad = problem(1, SMALL), problem(2, BROKEN)
    report = warm_up([(good, "compile-default"), (bad, "compile-default")], s, "cpu", 2, progress=False)

    by_key = {o.problem_key: o for o in report.outcomes}
    assert by_key[good.key].ok
    assert not by_key[bad.key].ok and "SyntaxError" in by_key[bad.key].error  # logged, not raised
    assert report.cache_dir == cache.resolve()
    written = _fx_entries(cache)
    assert written, "the warm-up left no FX graph entry"

    entries = measure_problem(good, ["compile-default"], s, device="cpu")
    assert entries["compile-default"].median > 0
    # The timed worker found the compiled graph instead of compiling (and writing) it again.
    assert _fx_entries(cache) == written

    # A resumed run finds the good reference warm and tries the broken one again.
    again = warm_up([(good, "compile-default"), (bad, "compile-default")], s, "cpu", 2, progress=False)
    assert {o.problem_key: o.reused for o in again.outcomes} == {good.key: True, bad.key: False}


def test_every_compile_mode_that_replays_cuda_graphs_has_its_outputs_copied():
    """The reference's probe compares two calls' outputs; a CUDA-graph replay overwrites the previous one's."""
    from torch._inductor import list_mode_options

    from kernelbench.evaluation.parent import COMPILE_MODES
    from kernelbench.evaluation.worker import GRAPH_REPLAY_MODES

    replaying = {m for m, opts in list_mode_options().items() if opts.get("triton.cudagraphs")}
    assert "max-autotune" in replaying
    assert replaying <= set(GRAPH_REPLAY_MODES)
    assert COMPILE_MODES["compile-cudagraphs"] in GRAPH_REPLAY_MODES  # backend="cudagraphs"
