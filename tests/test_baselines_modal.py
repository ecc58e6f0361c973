"""Baselines through the Modal runner: the app's real container body run in-process (``.local()``), no cloud."""

from __future__ import annotations

import json

import pytest
from kbtesting import BROKEN_INPUTS_PROBLEM, ModalFunctionStandIn, load_problems_from, problem_source

from kernelbench.baselines import BaselineFile, baseline_settings, load_baseline, measure_into_via_modal
from kernelbench.cli.main import main
from kernelbench.runners.modal_runner import ModalRunner

pytest.importorskip("modal")

RELU = problem_source(shape="64, 32")
NEEDS = problem_source(imports="import not_a_real_package_kb\n")


@pytest.mark.slow
def test_modal_results_are_merged_failures_recorded_and_resume_sends_only_what_is_missing(tmp_path):
    from modal_app.worker import baselines_payload

    problems = load_problems_from(tmp_path / "p", {"1_ReLU.py": RELU, "2_Broken.py": BROKEN_INPUTS_PROBLEM,
                                                   "3_Needs.py": NEEDS})
    settings = baseline_settings(timing_budget_s=0.1, min_trials=5)
    fn = ModalFunctionStandIn(baselines_payload)
    runner = ModalRunner(gpu="H100", function=fn, baselines_function=fn)
    out = tmp_path / "H100.json"
    # No GPU here: the container body measures on the CPU, so the file is opened without a GPU check.
    report = measure_into_via_modal(BaselineFile.open(out), problems, ["eager"], settings, runner, progress=False)
    assert [(p["problem"]["name"], p["modes"]) for p in fn.calls] == [("1_ReLU", ["eager"]), ("2_Broken", ["eager"])]
    assert report.count("measured") == 1 and [o.filename for o in report.failures] == ["3_Needs.py", "2_Broken.py"]
    assert "needs not_a_real_package_kb, which the Modal image does not install" in report.failures[0].error
    assert "inputs cannot be made" in report.failures[1].error
    data = json.loads(out.read_text())
    assert data["level1"]["1_ReLU.py"]["device"] == "cpu" and data["level1"]["1_ReLU.py"]["num_trials"] >= 5
    assert "inputs cannot be made" in data["failures"]["level1"]["2_Broken.py"]["eager"]
    assert data["environment"]["timing_protocol"] and data["environment"]["date"]

    # Resume: only the failed problem goes out again; a lost container is recorded, not fatal.
    lossy = ModalFunctionStandIn(baselines_payload, fail={0: RuntimeError("container lost")})  # the one sent
    again = measure_into_via_modal(BaselineFile.open(out), problems, ["eager"], settings,
                                   ModalRunner(gpu="H100", function=lossy, baselines_function=lossy), progress=False)
    assert [p["problem"]["name"] for p in lossy.calls] == ["2_Broken"]
    assert again.count("reused") == 1 and again.failures[1].error == "Modal could not run this problem"
    assert load_baseline(out).find(problems.get(1, 1)).num_trials >= 5


def test_modal_runner_without_a_token_is_a_one_line_error(tmp_path, monkeypatch, capsys):
    monkeypatch.delenv("MODAL_TOKEN_ID", raising=False)
    monkeypatch.delenv("MODAL_TOKEN_SECRET", raising=False)
    monkeypatch.setenv("MODAL_CONFIG_PATH", str(tmp_path / "no-modal.toml"))
    load_problems_from(tmp_path / "p", {"1_ReLU.py": RELU})
    rc = main(["baselines", "--runner", "modal", "--gpu", "L40S", "--source", "directory", "--path",
               str(tmp_path / "p"), "--modes", "eager", "--out", str(tmp_path / "L40S.json")])
    err = capsys.readouterr().err
    assert rc == 2 and "no Modal token found" in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "L40S.json").exists()
