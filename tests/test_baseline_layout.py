"""Which baseline file scores which run: baselines/kernelbench/<GPU>.json for the official set, baselines/<GPU>.json
for the built-in suite (and any other set), picked by the run's problem set.

``kernelbench analyze --gpu`` and ``scripts/benchmark_eval_analysis.py hardware=`` go through
:func:`kernelbench.baselines.find_baseline_for_gpu`, tested here; whichever file is picked is still checked
against the run's problem set, so a wrong pick is an error rather than a score.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from kbtesting import load_script

from kernelbench.baselines import find_baseline_for_gpu

REPO = Path(__file__).resolve().parents[1]


def test_the_sets_own_file_is_picked_from_the_baselines_folder_or_a_sets_folder(tmp_path):
    official, builtin = tmp_path / "kernelbench" / "H100.json", tmp_path / "H100.json"
    # Nothing there yet: the path names where the set's file belongs.
    assert find_baseline_for_gpu("NVIDIA H100 80GB HBM3", "kernelbench", tmp_path) == official
    assert find_baseline_for_gpu("h100", "builtin", tmp_path) == builtin
    builtin.write_text("{}")
    # The official set has no file of its own yet: the folder's own H100.json is offered (and its set checked).
    assert find_baseline_for_gpu("H100", "kernelbench", tmp_path) == builtin
    official.parent.mkdir()
    official.write_text("{}")
    assert find_baseline_for_gpu("H100", "kernelbench", tmp_path) == official
    assert find_baseline_for_gpu("H100", "builtin", tmp_path) == builtin
    assert find_baseline_for_gpu("H100", "custom", tmp_path) == builtin
    # A set's own folder given as the folder: its file.
    assert find_baseline_for_gpu("H100", "kernelbench", tmp_path / "kernelbench") == official


def test_the_kernelbench_style_analysis_script_lets_analyze_pick_the_sets_file(tmp_path, monkeypatch):
    m = load_script("benchmark_eval_analysis")
    import _kv  # the scripts' own module: load_script put scripts/ on the path
    monkeypatch.chdir(tmp_path)
    args = _kv.parse_kv(["run_name=r", "level=1", "hardware=H100"], m.KEYS)
    with pytest.raises(_kv.KvError, match=r"tried baselines/H100.json, baselines/kernelbench/H100.json; "
                                          r"pass baseline_file=<path>"):
        m.build_argv(args)
    (tmp_path / "baselines" / "kernelbench").mkdir(parents=True)
    (tmp_path / "baselines" / "kernelbench" / "H100.json").write_text("{}")
    argv = m.build_argv(args)
    assert argv[-4:] == ["--gpu", "H100", "--baselines-dir", "baselines"] and "--baseline" not in argv
    with pytest.raises(_kv.KvError, match="baseline= needs hardware="):
        m.build_argv(_kv.parse_kv(["run_name=r", "level=1", "baseline=baseline_time_torch"], m.KEYS))


def test_analyze_gpu_asks_for_the_set_when_both_sets_files_could_tell(tmp_path, capsys):
    """A run with no run.json and no KernelBench/ folder: a folder with both sets' files cannot tell which."""
    from kernelbench.cli.main import main
    from kernelbench.results import KernelResult
    from kernelbench.runs import RunDirectory

    run = RunDirectory(tmp_path / "runs" / "kb", level=1)
    run.path.mkdir(parents=True)
    # KernelBench's own results carry no problem name, only the id.
    run.save_result(KernelResult(level=1, problem_id=8, problem_name="8", backend="cuda", compiled=False,
                                 correct=False))
    bdir = tmp_path / "baselines"
    (bdir / "kernelbench").mkdir(parents=True)
    (bdir / "H100.json").write_text((REPO / "baselines" / "H100.json").read_text())  # the built-in suite's
    (bdir / "kernelbench" / "H100.json").write_text(
        json.dumps({"level1": {"8_Matmul_with_irregular_shapes_.py": {"mean": 1.0}}}))
    rc = main(["analyze", "--run-dir", str(run.path), "--gpu", "H100", "--baselines-dir", str(bdir)])
    assert rc == 2 and "cannot tell which problem set run" in capsys.readouterr().err
    (bdir / "kernelbench" / "H100.json").unlink()
    # Only the built-in file: its names tell the set, as a --baseline file's would.
    rc = main(["analyze", "--run-dir", str(run.path), "--gpu", "H100", "--baselines-dir", str(bdir)])
    out = capsys.readouterr()
    assert rc == 0, out.err
    assert f"baseline {bdir / 'H100.json'} (eager)" in out.out
