"""Baselines through the Modal runner: the app's real container body run in-process (``.local()``), no cloud."""

from __future__ import annotations

import json
import textwrap

import pytest

from kernelbench.baselines import BaselineFile, baseline_settings, load_baseline, measure_into_via_modal
from kernelbench.cli.main import main
from kernelbench.problems import load_directory
from kernelbench.runners.modal_runner import ModalRunner

pytest.importorskip("modal")

RELU = """
import torch
import torch.nn as nn

class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return torch.relu(x)

def get_inputs():
    return [torch.randn(64, 32)]

def get_init_inputs():
    return []
"""

BROKEN = """
import torch
import torch.nn as nn

class Model(nn.Module):
    def forward(self, x):
        return x

def get_inputs():
    raise ValueError("inputs cannot be made")

def get_init_inputs():
    return []
"""

NEEDS = """
import torch
import torch.nn as nn
import not_a_real_package_kb

class Model(nn.Module):
    def forward(self, x):
        return x

def get_inputs():
    return [torch.ones(2)]

def get_init_inputs():
    return []
"""


class InProcessMap:
    """Modal's ``Function.map`` contract, run here: each payload through ``body``; ``lose`` drops outputs."""

    def __init__(self, body, lose: set[int] | None = None):
        self.body = body
        self.lose = lose or set()
        self.payloads: list[dict] = []

    def map(self, payloads, order_outputs=True, return_exceptions=False):
        for i, payload in enumerate(payloads):
            self.payloads.append(payload)
            if i in self.lose:
                yield RuntimeError("container lost")
                continue
            yield self.body(payload)


def problems_in(tmp_path, files):
    (tmp_path / "level1").mkdir(parents=True)
    for name, code in files.items():
        (tmp_path / "level1" / name).write_text(textwrap.dedent(code))
    return load_directory(tmp_path)


@pytest.mark.slow
def test_modal_results_are_merged_failures_recorded_and_resume_sends_only_what_is_missing(tmp_path):
    from modal_app.worker import baselines_payload

    problems = problems_in(tmp_path / "p", {"1_ReLU.py": RELU, "2_Broken.py": BROKEN, "3_Needs.py": NEEDS})
    settings = baseline_settings(timing_budget_s=0.1, min_trials=5)
    fn = InProcessMap(baselines_payload)
    runner = ModalRunner(gpu="H100", function=fn, baselines_function=fn)
    out = tmp_path / "H100.json"
    # No GPU here: the container body measures on the CPU, so the file is opened without a GPU check.
    report = measure_into_via_modal(BaselineFile.open(out), problems, ["eager"], settings, runner, progress=False)
    assert [(p["problem"]["name"], p["modes"]) for p in fn.payloads] == [("1_ReLU", ["eager"]), ("2_Broken", ["eager"])]
    assert report.count("measured") == 1 and [o.filename for o in report.failures] == ["3_Needs.py", "2_Broken.py"]
    assert "needs not_a_real_package_kb, which the Modal image does not install" in report.failures[0].error
    assert "inputs cannot be made" in report.failures[1].error
    data = json.loads(out.read_text())
    assert data["level1"]["1_ReLU.py"]["device"] == "cpu" and data["level1"]["1_ReLU.py"]["num_trials"] >= 5
    assert "inputs cannot be made" in data["failures"]["level1"]["2_Broken.py"]["eager"]
    assert data["environment"]["timing_protocol"] and data["environment"]["date"]

    # Resume: only the failed problem goes out again; a lost container is recorded, not fatal.
    lossy = InProcessMap(baselines_payload, lose={0})
    again = measure_into_via_modal(BaselineFile.open(out), problems, ["eager"], settings,
                                   ModalRunner(gpu="H100", function=lossy, baselines_function=lossy), progress=False)
    assert [p["problem"]["name"] for p in lossy.payloads] == ["2_Broken"]
    assert again.count("reused") == 1 and again.failures[1].error == "Modal could not run this problem"
    assert load_baseline(out).find(problems.get(1, 1)).num_trials >= 5


def test_modal_runner_without_a_token_is_a_one_line_error(tmp_path, monkeypatch, capsys):
    monkeypatch.delenv("MODAL_TOKEN_ID", raising=False)
    monkeypatch.delenv("MODAL_TOKEN_SECRET", raising=False)
    monkeypatch.setenv("MODAL_CONFIG_PATH", str(tmp_path / "no-modal.toml"))
    problems_in(tmp_path / "p", {"1_ReLU.py": RELU})
    rc = main(["baselines", "--runner", "modal", "--gpu", "L40S", "--source", "directory", "--path",
               str(tmp_path / "p"), "--modes", "eager", "--out", str(tmp_path / "L40S.json")])
    err = capsys.readouterr().err
    assert rc == 2 and "no Modal token found" in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "L40S.json").exists()
