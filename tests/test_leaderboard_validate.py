"""Submission validation: every error reported at once, reports in JSON and Markdown, CLI and script."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
import time
from pathlib import Path

import pytest
from fixtures.leaderboard import factory as F
from kbtesting import run_cli

from leaderboard.schema import MAX_KERNEL_BYTES
from leaderboard.validate import md_escape, validate_file, validate_files

REPO = Path(__file__).resolve().parent.parent
PROBLEMS_ARGS = ["--source", "directory", "--path", str(F.PROBLEMS_DIR)]
HAS_GUARD = importlib.util.find_spec("kernelbench.evaluation.guards.static") is not None


@pytest.fixture(scope="module")
def problems():
    return F.problems()


def codes(report, severity="error"):
    return sorted(i.code for i in report.issues if i.severity == severity)


def test_good_submission_passes_and_lists_missing_problems(tmp_path, problems):
    path = F.write_submission(tmp_path / "good_model.json")
    r = validate_file(path, problems)
    assert r.passed, r.issues
    assert r.display_name == "Test Model"
    assert r.kernels_per_level == {"1": 2}
    assert r.missing == {"1": [3, 4], "2": [1, 2]}
    assert r.backends == {"triton": 2}
    missing = [i.message for i in r.issues if i.code == "missing-problems"]
    assert missing == ["level 1: 2 of 4 problems have no kernel and count as incorrect (3-4)",
                       "level 2: 2 of 2 problems have no kernel and count as incorrect (1-2)"]
    if not HAS_GUARD:
        assert "guard-unavailable" in codes(r, "warning")


def test_every_error_is_reported_at_once(tmp_path, problems):
    good = F.kernel("triton_relu")
    data = {
        "metadata": {"display_name": "", "organization": 5, "backend": "triton", "colour": "blue"},
        "kernels": {
            "level_1_problem_1_sample_0": good,                      # fine
            "level_1_problem_99_sample_0": good,                     # unknown problem
            "level_7_problem_1_sample_0": good,                      # unknown level
            "level_01_problem_2_sample_0": good,                     # key format
            "level_1_problem_2_sample_0": "def broken(:\n",          # syntax
            "level_1_problem_3_sample_0": "import torch\nx = 1\n",   # no ModelNew
            "level_1_problem_4_sample_0": ["not", "a", "string"],    # wrong type
            "level_2_problem_1_sample_0": "",                        # empty
            "level_2_problem_2_sample_0": "class ModelNew: pass\n" + "#" * MAX_KERNEL_BYTES,  # too large
            "level_1_problem_1_sample_3": good,                      # extra sample: warning
        },
        "extra": True,
    }
    path = F.write_submission(tmp_path / "many_errors.json", data)
    r = validate_file(path, problems, use_guard=False)
    assert not r.passed
    assert codes(r) == sorted([
        "metadata", "metadata", "unknown-problem", "unknown-level", "key-format", "syntax", "no-modelnew",
        "kernel-type", "kernel-empty", "kernel-too-large"])
    warnings = codes(r, "warning")
    for w in ("metadata-unknown-field", "unknown-field", "extra-sample"):
        assert w in warnings
    by_key = {i.key: i for i in r.issues if i.key}
    assert by_key["level_1_problem_2_sample_0"].line == 1
    assert "ids 1-4" in by_key["level_1_problem_99_sample_0"].message
    assert "levels 1, 2" in by_key["level_7_problem_1_sample_0"].message
    assert "256.0 KB limit" in by_key["level_2_problem_2_sample_0"].message
    # a broken kernel is still a kernel: it fails evaluation, it is not "missing"
    assert r.missing == {}


@pytest.mark.parametrize("content,code,fragment", [
    (b'{"metadata": {"display_name": "x"}, "kernels": {', "json", "not valid JSON"),
    (b'["level_1_problem_1_sample_0"]', "top-level-type", "not an array"),
    (b'{"metadata": "x", "kernels": {}}', "metadata-type", "must be a JSON object"),
    (b'{"metadata": {"display_name": "x"}, "kernels": []}', "kernels-type", "not an array"),
    (b'{"metadata": {"display_name": "x"}}', "kernels-missing", "'kernels' is missing"),
    (b'{"kernels": {}}', "metadata-missing", "'metadata' is missing"),
    (b'{"metadata": {"display_name": "x"}, "kernels": {}}', "kernels-empty", "at least one kernel"),
    ('{"metadata": {"display_name": "caf\u00e9"}, "kernels": {}}'.encode("latin-1"), "encoding", "not UTF-8"),
    (b'{"metadata": {"display_name": "x", "display_name": "y"}, "kernels": {}}', "duplicate-key", "'display_name'"),
    (b"", "json", "is empty"),
])
def test_malformed_files_are_clear_errors(tmp_path, problems, content, code, fragment):
    path = tmp_path / "entry.json"
    path.write_bytes(content)
    r = validate_file(path, problems, use_guard=False)
    assert not r.passed
    matching = [i for i in r.issues if i.code == code]
    assert matching, r.issues
    assert fragment in matching[0].message


def test_duplicate_kernel_keys_are_errors_naming_the_key(tmp_path, problems):
    src = json.dumps(F.kernel("triton_relu"))
    path = tmp_path / "dups.json"
    path.write_text('{"metadata": {"display_name": "x"}, "kernels": {'
                    f'"level_1_problem_1_sample_0": {src}, "level_1_problem_1_sample_0": {src}}}}}')
    r = validate_file(path, problems, use_guard=False)
    dup = [i for i in r.issues if i.code == "duplicate-key"]
    assert len(dup) == 1 and dup[0].key == "level_1_problem_1_sample_0"


def test_a_200_mb_file_is_refused_by_size_without_reading(tmp_path, problems):
    path = tmp_path / "huge.json"
    with open(path, "wb") as f:
        f.truncate(200 * 1024 * 1024)
    start = time.perf_counter()
    r = validate_file(path, problems)
    assert time.perf_counter() - start < 1.0
    assert codes(r) == ["too-large"]
    assert "200.0 MB, over the 50.0 MB limit" in r.issues[0].message


def test_file_name_becomes_the_entry_id(tmp_path, problems):
    r = validate_file(F.write_submission(tmp_path / "bad name.json"), problems, use_guard=False)
    assert "file-name" in codes(r)
    r = validate_file(F.write_submission(tmp_path / "a__b.json"), problems, use_guard=False)
    assert "file-name" in codes(r)
    missing = validate_file(tmp_path / "absent.json", problems)
    assert codes(missing) == ["missing-file"]


def test_backend_mismatch_is_a_warning(tmp_path, problems):
    path = F.write_submission(tmp_path / "mixed.json", F.submission_dict(backend="cuda"))
    r = validate_file(path, problems, use_guard=False)
    assert r.passed
    assert codes(r, "warning").count("backend-mismatch") == 2
    assert r.backends == {"cuda": 2}


def test_markdown_report_is_safe_and_complete(tmp_path, problems):
    hostile = "<img src=x onerror=alert(1)> @everyone **bold** | pipe"
    good = F.write_submission(tmp_path / "good.json", F.submission_dict(hostile))
    bad = F.write_submission(tmp_path / "bad.json", F.submission_dict(kernels={
        "level_1_problem_9_sample_0": "class ModelNew: pass", "level_1_problem_1_sample_0": "x ="}))
    report = validate_files([good, bad], problems, use_guard=False)
    md = report.to_markdown()
    assert md.startswith("## ❌ KernelBench submission check failed with 2 errors")
    assert "<img" not in md and "&lt;img" in md
    assert "@everyone" not in md and "@\u200beveryone" in md
    assert "\\*\\*bold\\*\\*" in md and "\\| pipe" in md
    assert "`level_1_problem_9_sample_0`" in md and "`level_1_problem_1_sample_0` line 1" in md
    assert "| `good.json` |" in md and "| 2/4 | 0/2 |" in md
    assert "- level 2: 2 of 2 — 1-2" in md
    data = json.loads(report.to_json())
    assert data["passed"] is False
    assert [f["passed"] for f in data["files"]] == [True, False]
    assert data["limits"] == {"max_kernel_bytes": 262144, "max_file_bytes": 52428800}


def test_md_escape():
    assert md_escape("a_b*c`d") == "a\\_b\\*c\\`d"
    assert md_escape("x\ny") == "x y"


def test_markdown_caps_long_lists(tmp_path, problems):
    kernels = {f"level_9_problem_{i}_sample_0": "class ModelNew: pass" for i in range(1, 80)}
    path = F.write_submission(tmp_path / "long.json", F.submission_dict(kernels=kernels))
    md = validate_files([path], problems, use_guard=False).to_markdown()
    assert "… and 19 more (see the JSON report)" in md


@pytest.mark.skipif(not HAS_GUARD, reason="kernelbench.evaluation.guards.static is not written yet")
def test_static_guard_findings_are_reported(tmp_path, problems):
    patched = F.kernel("triton_relu") + "\ntorch.relu = lambda x: x.clamp(min=0)\n"
    path = F.write_submission(tmp_path / "guarded.json", F.submission_dict(kernels={
        "level_1_problem_1_sample_0": F.kernel("triton_relu"),
        "level_1_problem_2_sample_0": patched,
    }))
    r = validate_file(path, problems)
    assert r.guard_available and r.guard_checked == 2
    guard_errors = [i for i in r.issues if i.code.startswith("guard:") and i.severity == "error"]
    assert guard_errors and all(i.key == "level_1_problem_2_sample_0" for i in guard_errors)
    assert any(i.line == patched.count("\n") for i in guard_errors)
    assert not r.passed


def _cli(*args, cwd=None):
    return run_cli("leaderboard", *args, cwd=cwd or REPO, timeout=120)


def test_cli_validate_exit_codes_and_reports(tmp_path):
    good = F.write_submission(tmp_path / "good.json")
    bad = F.write_submission(tmp_path / "bad.json", F.submission_dict(kernels={"level_1_problem_1_sample_0": "x ="}))
    ok = _cli("validate", str(good), "--no-guard", *PROBLEMS_ARGS)
    assert ok.returncode == 0, ok.stderr
    assert "pass" in ok.stdout
    js, md = tmp_path / "r.json", tmp_path / "r.md"
    fail = _cli("validate", str(good), str(bad), "--json", str(js), "--report-md", str(md), *PROBLEMS_ARGS)
    assert fail.returncode == 1
    assert "level_1_problem_1_sample_0 line 1: error: not valid Python" in fail.stdout
    assert json.loads(js.read_text())["passed"] is False
    assert "❌" in md.read_text()
    usage = _cli("validate", str(good), "--source", "directory", "--path", str(tmp_path / "nowhere"))
    assert usage.returncode == 2 and usage.stderr.startswith("error:") and "nowhere" in usage.stderr
    assert len(usage.stderr.strip().splitlines()) == 1


def test_cli_help_lists_subcommands(capsys):
    from kernelbench.cli.main import build_parser

    parser = build_parser()
    for argv in (["leaderboard", "--help"], *[["leaderboard", verb, "--help"]
                                               for verb in ("validate", "to-run", "evaluate", "aggregate", "build")]):
        with pytest.raises(SystemExit) as e:
            parser.parse_args(argv)
        assert e.value.code == 0
    out = capsys.readouterr().out
    for verb in ("validate", "to-run", "evaluate", "aggregate", "build"):
        assert f"kernelbench leaderboard {verb}" in out
    assert "--report-md" in out and "--runner" in out and "--evaluations-dir" in out


def test_validate_script(tmp_path):
    good = F.write_submission(tmp_path / "good.json")
    md = tmp_path / "comment.md"
    run = subprocess.run([sys.executable, str(REPO / "scripts" / "validate_submission.py"), "--submission", str(good),
                          "--report_md", str(md), "--no_guard", *PROBLEMS_ARGS],
                         capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    assert "PASS (2 kernels, 0 errors" in run.stdout
    assert md.read_text().startswith("## ✅")


@pytest.mark.parametrize("where", ["kernel", "key", "metadata"])
def test_text_that_is_not_valid_unicode_is_a_validation_error_not_a_traceback(tmp_path, where):
    """JSON can escape a lone surrogate (\\ud800); Python then holds text no UTF-8 writer accepts."""
    good = json.loads(F.write_submission(tmp_path / "good.json").read_text(encoding="utf-8"))
    key = next(iter(good["kernels"]))
    if where == "kernel":
        good["kernels"][key] += "\n# \ud800\n"
    elif where == "key":
        good["kernels"][key + "\udcff"] = good["kernels"][key]
    else:
        good["metadata"]["display_name"] = "name \ud83d"
    path = tmp_path / "lone.json"
    path.write_text(json.dumps(good), encoding="ascii")  # ensure_ascii: the surrogate travels as \\udXXX
    js, md = tmp_path / "r.json", tmp_path / "r.md"
    proc = _cli("validate", str(path), "--no-guard", "--json", str(js), "--report-md", str(md), *PROBLEMS_ARGS)
    assert proc.returncode == 1, proc.stderr
    assert "Traceback" not in proc.stderr and "UnicodeEncodeError" not in proc.stderr
    report = json.loads(js.read_text(encoding="utf-8"))
    messages = [i["message"] for f in report["files"] for i in f["issues"] if i["code"] == "encoding"]
    assert len(messages) == 1 and "lone surrogate" in messages[0], report
    assert {"kernel": "$.kernels.", "key": "(a key)", "metadata": "$.metadata.display_name"}[where] in messages[0]
    assert "lone surrogate" in md.read_text(encoding="utf-8")


HUB_PROBLEM = """
import torch
from transformers import AutoModelForCausalLM, AutoConfig

class Model(torch.nn.Module):
    def __init__(self, model_name, config):
        super().__init__()
        self.model = AutoModelForCausalLM.from_pretrained(model_name, config=config)

    def forward(self, x):
        return self.model(x).logits

model_name = "gpt2"
config = AutoConfig.from_pretrained(model_name)

def get_inputs():
    return [torch.randint(0, 10, (1, 8))]

def get_init_inputs():
    return [model_name, config]
"""


def _problems_with_level4(root: Path) -> Path:
    """The fixture problems, plus an official-style level-4 problem (a hub model) and one needing a package
    the Modal image lacks. Validation never runs them: no transformers or network needed."""
    import shutil

    shutil.copytree(F.PROBLEMS_DIR, root)
    (root / "level4").mkdir()
    (root / "level4" / "1_gpt2_bs1_seq8.py").write_text(HUB_PROBLEM)
    (root / "level4" / "2_needs_pkg.py").write_text("import not_a_real_package_kb\n" + HUB_PROBLEM)
    return root


def test_validate_names_the_kernels_that_need_the_hub_or_cannot_run_on_modal(tmp_path):
    """Level-4 kernels pass validation, each with a note: which hub model it loads and how Modal serves it,
    or why Modal cannot run it at all."""
    from kernelbench.problems import load_directory

    problems = load_directory(_problems_with_level4(tmp_path / "problems"))
    kernels = dict(F.submission_dict()["kernels"])
    l4_source = next(iter(kernels.values()))  # any valid ModelNew: validation does not run it
    kernels["level_4_problem_1_sample_0"] = l4_source
    kernels["level_4_problem_2_sample_0"] = l4_source
    path = F.write_submission(tmp_path / "with_l4.json", F.submission_dict(kernels=kernels))
    report = validate_file(path, problems, use_guard=False)
    (hub,) = [i for i in report.issues if i.code == "needs-hub"]
    assert hub.key == "level_4_problem_1_sample_0" and hub.severity == "info"
    assert "gpt2" in hub.message and "transformers" in hub.message and "Modal" in hub.message
    (blocked,) = [i for i in report.issues if i.code == "not-on-modal"]
    assert blocked.key == "level_4_problem_2_sample_0" and "not_a_real_package_kb" in blocked.message
    assert "needs-hub" not in codes(report) and "not-on-modal" not in codes(report)  # notes, not errors
    assert report.passed


def test_cli_validate_prints_which_kernels_need_the_hub(tmp_path):
    kernels = dict(F.submission_dict()["kernels"])
    kernels["level_4_problem_1_sample_0"] = next(iter(kernels.values()))
    path = F.write_submission(tmp_path / "l4.json", F.submission_dict(kernels=kernels))
    root = _problems_with_level4(tmp_path / "problems")
    proc = _cli("validate", str(path), "--no-guard", "--source", "directory", "--path", str(root))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    (line,) = [ln for ln in proc.stdout.splitlines() if "[needs-hub]" in ln]
    assert "level_4_problem_1_sample_0" in line and "gpt2" in line and "Hugging Face hub" in line


def test_cute_and_tilelang_kernels_are_detected_and_guarded(tmp_path, problems):
    """Issue 26: metadata-less kernels are detected as cute / tilelang; a declared one that never launches its own
    kernel is refused by the guard, as the evaluator would refuse it."""
    solutions = REPO / "kernelbench" / "solutions"
    cute = (solutions / "cute" / "level1" / "8_ReLU.py").read_text()
    tilelang = (solutions / "tilelang" / "level1" / "8_ReLU.py").read_text()
    path = F.write_submission(tmp_path / "dsl.json", F.submission_dict(kernels={
        "level_1_problem_1_sample_0": cute, "level_1_problem_2_sample_0": tilelang}))
    r = validate_file(path, problems)
    assert r.backends == {"cute": 1, "tilelang": 1}
    assert r.passed, [i for i in r.issues if i.severity == "error"]
    cheat = (REPO / "tests" / "adversarial" / "e24_cute_compiled_not_called.py").read_text()
    path = F.write_submission(tmp_path / "cheat.json", F.submission_dict(backend="cute", kernels={
        "level_1_problem_1_sample_0": cheat}))
    r = validate_file(path, problems)
    assert not r.passed and "guard:kernel-not-launched" in codes(r)
    assert r.backends == {"cute": 1}
