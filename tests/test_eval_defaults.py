"""Evaluation defaults are stated once, in EvalSettings: every command line, script and Modal entry point
that takes an evaluation option starts from EvalSettings' own value."""

from __future__ import annotations

import inspect
import sys
from pathlib import Path

import pytest

from kernelbench.cli.main import build_parser
from kernelbench.evaluation.settings import EvalSettings

ROOT = Path(__file__).resolve().parents[1]
D = EvalSettings()
#: (argparse dest, EvalSettings field) of the options add_eval_args gives every evaluating command.
EVAL_OPTIONS = [("backend", "backend"), ("precision", "precision"), ("correctness_trials", "correctness_trials"),
                ("tolerance_mode", "tolerance_mode"), ("timing_budget", "timing_budget_s")]


def parse(*argv: str):
    return build_parser().parse_args(list(argv))


@pytest.mark.parametrize("argv", [
    ("eval", "--level", "1", "--problem-id", "1", "--kernel", "k.py"),
    ("leaderboard", "evaluate", "sub.json"),
])
def test_evaluating_commands_default_to_eval_settings(argv):
    args = parse(*argv)
    for dest, name in EVAL_OPTIONS:
        assert getattr(args, dest) == getattr(D, name), dest
    assert args.no_timing is (not D.measure_timing)


def test_evaluate_run_falls_back_to_eval_settings_when_neither_command_line_nor_run_json_says():
    from kernelbench.cli.evaluate_run import settings_for
    from kernelbench.runs import RunInfo

    args = parse("evaluate-run", "--run-dir", "runs/x")
    assert (args.backend, args.precision, args.tolerance_mode) == (None, None, None)  # run.json's, if any
    s = settings_for(args, RunInfo())
    for _, name in EVAL_OPTIONS:
        assert getattr(s, name) == getattr(D, name), name
    assert (s.stage_timeout_s, s.compile_timeout_s) == (D.stage_timeout_s, D.compile_timeout_s)
    recorded = settings_for(args, RunInfo(backend="triton", precision="bf16", tolerance_mode="kernelbench-v0.1"))
    assert (recorded.backend, recorded.precision, recorded.tolerance_mode) == ("triton", "bf16", "kernelbench-v0.1")


def test_prompt_options_and_baseline_timing_default_to_eval_settings():
    for argv in (("generate", "--level", "1", "--model", "m"), ("prompt", "--level", "1", "--problem-id", "1")):
        args = parse(*argv)
        assert (args.backend, args.precision, args.tolerance_mode) == (D.backend, D.precision, D.tolerance_mode)
    b = parse("baselines")
    assert (b.timing_budget, b.precision) == (D.timing_budget_s, D.precision)


def test_help_states_eval_settings_values(capsys):
    with pytest.raises(SystemExit):
        parse("baselines", "--help")
    flat = " ".join(capsys.readouterr().out.split())
    assert f"timed calls at most (default {D.max_timing_trials})" in flat
    assert f"per other stage (default {D.stage_timeout_s:g})" in flat
    sys.path.insert(0, str(ROOT / "scripts"))
    try:
        import _kv
    finally:
        sys.path.remove(str(ROOT / "scripts"))
    keys = {k.name: k.help for k in _kv.eval_keys()}
    assert keys["timing_budget"].endswith(f"(default {D.timing_budget_s:g})")  # it said 2 while the CLI used 1
    assert keys["num_correct_trials"].endswith(f"(default {D.correctness_trials})")


def test_modal_entry_points_default_to_eval_settings():
    pytest.importorskip("modal")
    import modal_app.app as app
    from modal_app.commands import make_settings

    assert make_settings() == D
    fields = {"backend": "backend", "precision": "precision", "correctness_trials": "correctness_trials",
              "tolerance_mode": "tolerance_mode", "timing": "measure_timing", "timing_budget": "timing_budget_s"}
    seen = 0
    for entry in ("evaluate_kernel", "evaluate_run", "baselines", "eval_submission"):
        params = inspect.signature(getattr(app, entry).info.raw_f).parameters
        for option, name in fields.items():
            if option in params and not (entry == "evaluate_run" and option == "backend"):  # "" = run.json's
                assert params[option].default == getattr(D, name), f"{entry} --{option}"
                seen += 1
    assert seen == 18


def test_the_servers_request_defaults_are_eval_settings():
    """The server's request models are the HTTP contract (the client imports them without the evaluator),
    so they state their defaults themselves; this keeps them equal to EvalSettings'."""
    from kernelbench.server.compat import KBenchEvalRequest
    from kernelbench.server.models import RequestSettings

    r = RequestSettings()
    for name in ("backend", "precision", "correctness_trials", "tolerance_mode", "measure_timing", "timing_budget_s"):
        assert getattr(r, name) == getattr(D, name), name
    kb = KBenchEvalRequest(original_model_src="", custom_model_src="")
    assert (kb.backend, kb.num_correct_trials, kb.measure_performance) == (D.backend, D.correctness_trials,
                                                                           D.measure_timing)


@pytest.mark.parametrize("bad", [
    {"compile_timeout_s": 0}, {"compile_timeout_s": -5}, {"min_timing_trials": 0},
    {"min_timing_trials": 50, "max_timing_trials": 10}, {"target_rse": 0}, {"timing_input_sets": 0},
    {"review_speedup": -1}, {"launch_cushion_us": -1}, {"launch_cushion_us": 2.5}, {"launch_cushion_us": True},
])
def test_settings_refuse_values_that_cannot_time(bad):
    from kernelbench.evaluation.settings import EvalSettings

    with pytest.raises(ValueError, match=next(iter(bad))):
        EvalSettings(**bad)


def test_cushion_and_pinning_defaults_follow_their_environment_overrides(monkeypatch):
    from kernelbench.evaluation.settings import EvalSettings
    from kernelbench.evaluation.timing import LAUNCH_CUSHION_US

    monkeypatch.delenv("KB_LAUNCH_CUSHION_US", raising=False)
    monkeypatch.delenv("KB_PIN_CPUS", raising=False)
    s = EvalSettings()
    assert (s.launch_cushion_us, s.pin_cpus) == (LAUNCH_CUSHION_US, True)
    monkeypatch.setenv("KB_LAUNCH_CUSHION_US", "0")
    monkeypatch.setenv("KB_PIN_CPUS", "0")
    assert (EvalSettings().launch_cushion_us, EvalSettings().pin_cpus) == (0, False)
    assert EvalSettings(launch_cushion_us=50, pin_cpus=True).to_dict()["launch_cushion_us"] == 50


def test_the_leaderboard_requires_the_sandbox_unless_told_to_take_it_where_it_can_be_made():
    """The evaluation workflow passes --sandbox-if-possible until a Modal run shows the sandbox inside Modal's
    containers (.github/workflows/evaluate.yml); a local `kernelbench eval` takes it where possible anyway."""
    assert parse("leaderboard", "evaluate", "sub.json").sandbox == "require"
    assert parse("leaderboard", "evaluate", "sub.json", "--sandbox-if-possible").sandbox == "auto"
    assert parse("leaderboard", "evaluate", "sub.json", "--no-sandbox").sandbox == "off"
    with pytest.raises(SystemExit):
        parse("leaderboard", "evaluate", "sub.json", "--no-sandbox", "--sandbox-if-possible")
    assert parse("eval", "--level", "1", "--problem-id", "1", "--kernel", "k.py").sandbox == "auto"
    workflow = (ROOT / ".github" / "workflows" / "evaluate.yml").read_text()
    assert "leaderboard evaluate" in workflow and "--sandbox-if-possible" in workflow and "--no-sandbox" not in workflow
