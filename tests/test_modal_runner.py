"""ModalRunner: token check, wire format, and fan-out/ordering/resume/partial failure.

Modal's cloud is unreachable here, so the fan-out tests use an in-process stand-in that honours
``Function.map``'s contract (inputs in, outputs in completion order, exceptions as values with
``return_exceptions=True``) and runs the real GPU-function body, which calls the real evaluator
on the CPU. Nothing pretends to be Modal's cloud: the stand-in is a thread loop in this process.
"""

from __future__ import annotations

import importlib
import importlib.util
import json
import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from kbtesting import ModalFunctionStandIn, candidate_of, load_problems_from, problem_source

from kernelbench.errors import KernelBenchError
from kernelbench.evaluation.settings import EvalJob, EvalSettings
from kernelbench.hardware import modal_gpu_name
from kernelbench.results import KernelResult, Stage
from kernelbench.runners import get_runner
from kernelbench.runners.modal_runner import (
    REMOTE_ERROR_TYPE,
    ModalRunner,
    function_name,
    modal_token_available,
)
from kernelbench.runners.wire import (
    WIRE_VERSION,
    WireFormatError,
    job_from_wire,
    job_to_wire,
    result_from_wire,
    result_to_wire,
)

REPO = Path(__file__).resolve().parent.parent
HAVE_EVALUATOR = importlib.util.find_spec("kernelbench.evaluation.parent") is not None
needs_evaluator = pytest.mark.skipif(not HAVE_EVALUATOR,
                                     reason="kernelbench.evaluation.parent (the evaluator) is not written yet")

# ---------------------------------------------------------------------------------------------
# Small problems and candidates (CPU-sized: the built-in suite's tensors are GPU-sized)

RELU = problem_source(shape="64, 32")
TANH = RELU.replace("torch.relu(x)", "torch.tanh(x)")
SCALE = RELU.replace("torch.relu(x)", "x * 2.0")

GOOD = {1: candidate_of(RELU), 2: candidate_of(TANH), 3: candidate_of(SCALE)}
WRONG = GOOD[1].replace("torch.relu(x)", "x + 1.0")
BROKEN = "import torch\nclass ModelNew(torch.nn.Module:\n    pass\n"


@pytest.fixture(scope="module")
def problems(tmp_path_factory):
    return load_problems_from(tmp_path_factory.mktemp("problems"),
                              {"1_ReLU.py": RELU, "2_Tanh.py": TANH, "3_Scale.py": SCALE})


SETTINGS = EvalSettings(backend="torch", correctness_trials=1, measure_timing=False, device="cpu")


def job(problems, pid: int, source: str | None = None, sample_id: int = 0) -> EvalJob:
    return EvalJob(problem=problems.get(1, pid), candidate_source=source or GOOD[pid], settings=SETTINGS,
                   sample_id=sample_id)


# ---------------------------------------------------------------------------------------------
# The in-process stand-in


class Interrupted(KeyboardInterrupt):
    """What Ctrl-C raises in the middle of a map."""


def real_body() -> Callable[[dict], dict]:
    """The H100 function's own body, run locally (``.local()``): the CPU path of the evaluator."""
    from modal_app.app import evaluate_h100

    return evaluate_h100.local


def runner_with(fn) -> ModalRunner:
    return ModalRunner(gpu="H100", function=fn, baselines_function=fn)


# ---------------------------------------------------------------------------------------------
# GPU names, token check


def test_gpu_names_are_canonical_and_unknown_ones_are_refused():
    assert modal_gpu_name("h100") == "H100"
    assert modal_gpu_name("a100_80gb") == "A100-80GB"
    assert function_name("evaluate", "l40s") == "evaluate_l40s"
    assert function_name("baselines", "A100-80GB") == "baselines_a100_80gb"
    with pytest.raises(KernelBenchError, match="'V100'.*H100, A100-80GB, L40S, B200"):
        modal_gpu_name("V100")


def _no_token_env(tmp_path: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MODAL_")}
    env["HOME"] = str(tmp_path)
    return env


def test_token_is_found_in_config_file_or_environment(tmp_path):
    env = _no_token_env(tmp_path)
    assert not modal_token_available(env)
    (tmp_path / ".modal.toml").write_text('[default]\ntoken_id = "ak-x"\ntoken_secret = "as-y"\n')
    assert modal_token_available(env)
    env2 = _no_token_env(tmp_path / "elsewhere")
    env2.update(MODAL_TOKEN_ID="ak-x", MODAL_TOKEN_SECRET="as-y")
    assert modal_token_available(env2)
    env2.pop("MODAL_TOKEN_SECRET")
    assert not modal_token_available(env2)


def test_modal_runner_without_token_fails_at_once_with_setup_instructions(tmp_path, monkeypatch, problems):
    for k in [k for k in os.environ if k.startswith("MODAL_")]:
        monkeypatch.delenv(k)
    monkeypatch.setenv("HOME", str(tmp_path))
    t0 = time.monotonic()
    with pytest.raises(KernelBenchError, match=r"modal token new"):
        get_runner("modal", gpu="H100")
    assert time.monotonic() - t0 < 5
    # Bound to an evaluation function (as inside `modal run`), it needs no token until it must look one up.
    runner = ModalRunner(gpu="H100", function=ModalFunctionStandIn(echo_body))
    assert runner.run([job(problems, 1)], progress=False)[0].key == "level_1_problem_1_sample_0"
    with pytest.raises(KernelBenchError, match=r"modal token new"):
        runner.measure_baselines(list(problems), ["eager"], SETTINGS, progress=False)


@pytest.mark.parametrize("argv", [
    ["eval", "--level", "1", "--problem-id", "8", "--kernel", "{kernel}", "--runner", "modal", "--gpu", "H100"],
    ["evaluate-run", "--run-dir", "{run}", "--source", "builtin", "--runner", "modal", "--gpu", "L40S"],
])
def test_kernelbench_cli_with_modal_runner_and_no_token_says_how_to_set_one_up(tmp_path, argv):
    from kernelbench.runs import RunDirectory

    kernel = tmp_path / "k.py"
    kernel.write_text(GOOD[1])
    RunDirectory(tmp_path / "run", level=1).write_kernel(1, 8, 0, GOOD[1])
    args = [a.format(kernel=kernel, run=tmp_path / "run") for a in argv]
    proc = subprocess.run([sys.executable, "-m", "kernelbench.cli.main", *args], cwd=tmp_path,
                          env=_no_token_env(tmp_path), capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2, proc.stderr
    lines = [ln for ln in proc.stderr.splitlines() if ln.startswith("error:")]
    assert len(lines) == 1 and "modal token new" in lines[0]
    assert "Traceback" not in proc.stderr


def test_modal_run_without_token_fails_fast(tmp_path):
    kernel = tmp_path / "k.py"
    kernel.write_text(GOOD[1])
    proc = subprocess.run(
        [sys.executable, "-m", "modal", "run", "modal_app/app.py::evaluate_kernel", "--kernel-file", str(kernel),
         "--level", "1", "--problem-id", "8"],
        cwd=REPO, env=_no_token_env(tmp_path), capture_output=True, text=True, timeout=120,
    )
    assert proc.returncode != 0
    assert "token" in (proc.stdout + proc.stderr).lower()


# ---------------------------------------------------------------------------------------------
# Wire format


def test_job_round_trips_through_the_wire(problems):
    secret = b"\x01\x02secret"
    j = EvalJob(problem=problems.get(1, 2), candidate_source=GOOD[2], sample_id=3,
                settings=SETTINGS.with_(seed_secret=secret, precision="fp16"))
    payload = job_to_wire(j, 7)
    json.dumps(payload)  # plain JSON, no pickles
    index, back = job_from_wire(payload)
    assert index == 7
    assert back.problem == j.problem and back.problem.hash == j.problem.hash
    assert back.candidate_source == j.candidate_source and back.sample_id == 3
    assert back.settings.seed_secret == secret and back.settings.precision == "fp16"
    assert back.settings.device is None  # the container picks its own GPU
    assert back.settings.with_(device="cpu") == j.settings


def test_wire_rejects_other_versions_tampering_and_unknown_settings(problems):
    payload = job_to_wire(job(problems, 1), 0)
    with pytest.raises(WireFormatError, match="wire version"):
        job_from_wire({**payload, "wire_version": WIRE_VERSION + 1})
    tampered = json.loads(json.dumps(payload))
    tampered["problem"]["code"] += "\nx = 1\n"
    with pytest.raises(WireFormatError, match="hash mismatch"):
        job_from_wire(tampered)
    newer = json.loads(json.dumps(payload))
    newer["settings"]["warp_drive"] = True
    with pytest.raises(WireFormatError, match="warp_drive.*modal deploy"):
        job_from_wire(newer)
    with pytest.raises(WireFormatError):
        result_from_wire({"wire_version": WIRE_VERSION, "index": 0, "result": {"level": "x"}})


def test_result_round_trips_through_the_wire():
    r = KernelResult(level=1, problem_id=2, problem_name="2_Tanh", backend="torch", compiled=True, correct=True)
    index, back = result_from_wire(json.loads(json.dumps(result_to_wire(5, r))))
    assert index == 5 and back == r


# ---------------------------------------------------------------------------------------------
# Fan-out, ordering, partial failure, interruption (real evaluator through the stand-in)


def echo_body(payload: dict) -> dict:
    """A body that answers with a well-formed "did not compile" result for the job it was sent.

    Used only where the test is about plumbing (callbacks, protocol checks, files written), not
    about verdicts; everything about verdicts runs the real body.
    """
    index, j = job_from_wire(payload)
    r = KernelResult(level=j.problem.level, problem_id=j.problem.problem_id, problem_name=j.problem.name,
                     problem_hash=j.problem.hash, sample_id=j.sample_id, backend=j.settings.backend)
    return result_to_wire(index, r)


@pytest.mark.slow
@needs_evaluator
def test_fan_out_orders_results_and_keeps_inputs_modal_gave_up_on(problems):
    from modal.exception import InternalFailure

    jobs = [job(problems, 1), job(problems, 2), job(problems, 3, WRONG)]
    fn = ModalFunctionStandIn(real_body(), order=lambda n: list(reversed(range(n))),
                           fail={1: InternalFailure("container exited with code 137")})
    arrivals: list[int] = []
    results = runner_with(fn).run(jobs, on_result=lambda i, r: arrivals.append(i), progress=False)

    assert arrivals == [2, 0, 1]  # as results arrive; the lost input is delivered at the end, not dropped
    assert [r.key for r in results] == [j.key for j in jobs]  # the list is in job order
    assert results[0].correct and not results[2].correct
    assert results[2].error is not None and results[2].error.stage == Stage.CORRECTNESS
    bad = results[1]
    assert bad.error.stage == Stage.INFRASTRUCTURE and bad.error.type == REMOTE_ERROR_TYPE
    assert "container exited with code 137" in bad.error.message and bad.infrastructure_failure
    assert all(r.runner == "modal:H100" for r in results)
    assert results[0].environment is not None and results[0].environment.device == "cpu"


def test_a_map_that_breaks_off_says_how_far_it_got(problems):
    from modal.exception import ConnectionError as ModalConnectionError

    jobs = [job(problems, 1), job(problems, 2), job(problems, 3)]
    fn = ModalFunctionStandIn(echo_body, stop_after=1, raise_after=ModalConnectionError("stream reset"))
    seen: list[int] = []
    with pytest.raises(KernelBenchError, match=r"after 1 of 3 results.*stream reset.*resume"):
        runner_with(fn).run(jobs, on_result=lambda i, r: seen.append(i), progress=False)
    assert seen == [0]  # what arrived before the break was delivered


def test_errors_writing_a_result_are_not_reported_as_modal_failures(problems):
    jobs = [job(problems, 1)]

    def full_disk(i, r):
        raise OSError(28, "No space left on device")

    with pytest.raises(OSError, match="No space left"):
        runner_with(ModalFunctionStandIn(echo_body)).run(jobs, on_result=full_disk, progress=False)


def test_malformed_outputs_become_remote_errors(problems):
    def garbage(payload: dict) -> dict:
        return {"wire_version": 0, "index": payload["index"]}

    results = runner_with(ModalFunctionStandIn(garbage)).run([job(problems, 1)], progress=False)
    assert results[0].error.type == REMOTE_ERROR_TYPE and "wire version" in results[0].error.message


def test_a_result_for_the_wrong_job_is_not_accepted(problems):
    jobs = [job(problems, 1), job(problems, 2)]

    def swapped(payload: dict) -> dict:
        other = jobs[1 - payload["index"]]
        r = KernelResult(level=1, problem_id=other.problem.problem_id, problem_name=other.problem.name,
                         backend="torch", compiled=True, correct=True)
        return result_to_wire(payload["index"], r)

    results = runner_with(ModalFunctionStandIn(swapped)).run(jobs, progress=False)
    assert [r.key for r in results] == [j.key for j in jobs]
    assert all(r.infrastructure_failure and "came back for job" in r.error.message for r in results)


# ---------------------------------------------------------------------------------------------
# Run directories: written as results arrive, resumed after an interruption


def _make_run(tmp_path: Path, sources: dict[int, str]) -> Path:
    from kernelbench.runs import RunDirectory

    run = tmp_path / "runs" / "r1"
    rd = RunDirectory(run, level=1)
    for pid, src in sources.items():
        rd.write_kernel(1, pid, 0, src)
    return run


@pytest.mark.slow
@needs_evaluator
def test_run_directory_survives_interruption_and_retries_modal_failures(problems, tmp_path):
    from modal.exception import InternalFailure

    from kernelbench.runs import RunDirectory
    from modal_app.commands import evaluate_run_dir

    run = _make_run(tmp_path, {1: GOOD[1], 2: BROKEN, 3: GOOD[3]})
    saved = lambda: RunDirectory(run, level=1).load_results()  # noqa: E731
    keys = lambda fn: [job_from_wire(p)[1].key for p in fn.calls]  # noqa: E731

    # 1. Ctrl-C after the first result: that result is on disk, nothing else is.
    first = ModalFunctionStandIn(real_body(), stop_after=1, raise_after=Interrupted())
    with pytest.raises(KeyboardInterrupt):
        evaluate_run_dir(run, problems, SETTINGS, runner_with(first), progress=False)
    assert sorted(saved()) == [(1, 0)] and saved()[(1, 0)].correct

    # 2. Resume: only the two pending kernels go out; Modal loses one of them.
    second = ModalFunctionStandIn(real_body(), fail={0: InternalFailure("preempted")})
    done = evaluate_run_dir(run, problems, SETTINGS, runner_with(second), progress=False)
    assert keys(second) == ["level_1_problem_2_sample_0", "level_1_problem_3_sample_0"]
    assert done.n_evaluated == 2 and done.n_reused == 1
    assert [r.infrastructure_failure for r in done.results] == [False, True, False]
    assert sorted(json.loads((run / "eval_results.json").read_text())) == ["1", "2", "3"]

    # 3. Again: only the job Modal lost is retried, and it gets its real verdict.
    third = ModalFunctionStandIn(real_body())
    done = evaluate_run_dir(run, problems, SETTINGS, runner_with(third), progress=False)
    assert keys(third) == ["level_1_problem_2_sample_0"]
    assert done.n_evaluated == 1 and done.n_reused == 2
    assert [(r.problem_id, r.correct) for r in done.results] == [(1, True), (2, False), (3, True)]
    assert done.results[1].error.stage in (Stage.LOAD, Stage.COMPILE) and not done.results[1].infrastructure_failure


def test_run_directory_errors_are_one_line(problems, tmp_path):
    from modal_app.commands import evaluate_run_dir, run_level

    with pytest.raises(KernelBenchError, match="does not exist"):
        run_level(tmp_path / "nope")
    (tmp_path / "empty").mkdir()
    with pytest.raises(KernelBenchError, match="pass --level"):
        run_level(tmp_path / "empty")
    with pytest.raises(KernelBenchError, match="no level_<L>_problem"):
        evaluate_run_dir(tmp_path / "empty", problems, SETTINGS, runner_with(ModalFunctionStandIn(dict)), level=1)


def test_eval_submission_goes_through_the_leaderboard_pipeline_on_the_modal_runner(problems, tmp_path):
    from modal_app.commands import evaluate_submission_file

    sub = tmp_path / "my_model.json"
    sub.write_text(json.dumps({"metadata": {"display_name": "My Model"},
                               "kernels": {"level_1_problem_1_sample_0": GOOD[1],
                                           "level_1_problem_3_sample_0": GOOD[3]}}))
    fn = ModalFunctionStandIn(echo_body)
    ev = evaluate_submission_file(sub, problems, SETTINGS, runner_with(fn), runs_dir=tmp_path / "runs",
                                  results_dir=tmp_path / "evaluations", progress=False)
    assert sorted(job_from_wire(p)[1].key for p in fn.calls) == ["level_1_problem_1_sample_0",
                                                                 "level_1_problem_3_sample_0"]
    assert {r.runner for r in ev.results} == {"modal:H100"}
    assert ev.bundle_path is not None and ev.bundle_path.parent == tmp_path / "evaluations"
    bundle = json.loads(ev.bundle_path.read_text())
    assert bundle["runner"] == "modal:H100" and len(bundle["results"]) == 2
    run_dirs = sorted((tmp_path / "runs").iterdir())
    assert len(run_dirs) == 1 and (run_dirs[0] / "eval_results.json").exists()

    again = ModalFunctionStandIn(echo_body)  # resumed: everything already has a result
    ev2 = evaluate_submission_file(sub, problems, SETTINGS, runner_with(again), runs_dir=tmp_path / "runs",
                                   results_dir=tmp_path / "evaluations", progress=False)
    assert again.calls == [] and ev2.n_reused == 2


def test_kernels_that_cannot_run_on_modal_get_their_own_result_and_the_rest_is_evaluated(problems):
    """A problem that imports a package the Modal image lacks is not sent; the other kernels are.
    (Level 4, transformers and a hub model, does run: tests/test_modal_hub.py.)"""
    import dataclasses

    from kernelbench.runners.modal_problems import NOT_RUNNABLE_TYPE

    hub = dataclasses.replace(problems.get(1, 1), requirements=("not_a_real_package_kb",))
    jobs = [job(problems, 2), EvalJob(problem=hub, candidate_source=GOOD[1], settings=SETTINGS), job(problems, 3)]
    fn = ModalFunctionStandIn(echo_body)
    estimates = []
    delivered: dict[int, KernelResult] = {}
    results = ModalRunner(gpu="H100", function=fn, confirm=lambda est: estimates.append(est.n_jobs) or True).run(
        jobs, on_result=lambda i, r: delivered.__setitem__(i, r), progress=False)
    assert [r.key for r in results] == [j.key for j in jobs] and sorted(delivered) == [0, 1, 2]
    assert len(fn.calls) == 2 and estimates == [2]  # only the runnable kernels are sent and priced
    blocked = results[1]
    assert blocked.error.type == NOT_RUNNABLE_TYPE and blocked.error.stage == Stage.LOAD
    assert "needs not_a_real_package_kb" in blocked.error.message and "local GPU" in blocked.error.message
    assert not blocked.infrastructure_failure  # a verdict for this runner, not an infrastructure failure to retry
    assert results[0].error is None or results[0].error.type != NOT_RUNNABLE_TYPE

    only_hub = ModalFunctionStandIn(echo_body)
    (r,) = runner_with(only_hub).run([jobs[1]], progress=False)
    assert only_hub.calls == [] and r.error.type == NOT_RUNNABLE_TYPE


# ---------------------------------------------------------------------------------------------
# Baselines


def test_baselines_refuse_unknown_modes_and_another_gpus_file(problems, tmp_path):
    from kernelbench.errors import BaselineError
    from modal_app.commands import measure_baselines

    fn = ModalFunctionStandIn(echo_body)
    with pytest.raises(BaselineError, match="unknown baseline mode.*turbo"):
        measure_baselines(problems, ["turbo"], SETTINGS, runner_with(fn), tmp_path / "H100.json")
    other = tmp_path / "mixed.json"
    other.write_text(json.dumps({"level1": {"1_ReLU.py": {"mean": 0.1}}, "environment": {"gpu_name": "NVIDIA L40S"}}))
    with pytest.raises(BaselineError, match="holds L40S times.*pass --no-resume to start the file over$"):
        measure_baselines(problems, ["eager"], SETTINGS, runner_with(fn), other)
    assert fn.calls == []
    assert not (tmp_path / "H100.json").exists()


@pytest.mark.slow
def test_baselines_are_measured_remotely_written_as_they_arrive_and_resumed(problems, tmp_path):
    from kernelbench.baselines import load_baseline
    from modal_app.app import baselines_h100
    from modal_app.commands import measure_baselines

    subset = problems.select(ids=[1, 2])
    out = tmp_path / "baselines" / "H100.json"
    settings = EvalSettings(backend="torch", timing_budget_s=0.2, min_timing_trials=5)
    fn = ModalFunctionStandIn(baselines_h100.local)
    run = measure_baselines(subset, ["eager"], settings, runner_with(fn), out, progress=False)
    assert run.failures == [] and run.n_measured == 2 and run.report.count("measured") == 2
    baseline = load_baseline(out)
    for p in subset:
        assert baseline.require(p).headline_ms > 0
    assert baseline.environment is not None and baseline.environment.timing_protocol
    # Written by the library's one writer: the file records its problem set, as `kernelbench baselines` does.
    assert baseline.problem_set is not None and set(baseline.problem_set.hashes) == {
        f"level{p.level}/{p.filename}" for p in subset}
    assert run.gpu_names == {baseline.environment.gpu_name} - {None}  # no GPU name here, on the CPU

    again = ModalFunctionStandIn(baselines_h100.local)
    run2 = measure_baselines(subset, ["eager"], settings, runner_with(again), out, progress=False)
    assert again.calls == [] and run2.n_reused == 2 and run2.n_measured == 0


# ---------------------------------------------------------------------------------------------
# Cost control: estimate before dispatch, dry run, confirmation, container cap, cost cap


def timed_echo_body(wall_time_s: float) -> Callable[[dict], dict]:
    """``echo_body`` whose result says the container worked ``wall_time_s`` seconds (what spend is counted from)."""
    def body(payload: dict) -> dict:
        out = echo_body(payload)
        out["result"]["wall_time_s"] = wall_time_s
        return out
    return body


def test_cost_estimate_grows_with_the_work_and_uses_the_dated_price(problems):
    from kernelbench.runners.modal_cost import estimate_jobs, seconds_per_job
    from modal_app import versions

    light = EvalSettings(backend="torch", correctness_trials=1, measure_timing=False)
    heavy = EvalSettings(backend="cuda", correctness_trials=5, measure_timing=True, timing_budget_s=2.0)
    assert seconds_per_job(heavy) > seconds_per_job(light) > 0
    jobs = [job(problems, 1), job(problems, 2), job(problems, 3)]
    est = estimate_jobs(jobs, "A100-80GB")
    assert est.n_jobs == 3 and est.usd_per_hour == versions.GPUS["A100-80GB"].usd_per_hour
    assert est.gpu_hours == pytest.approx(3 * seconds_per_job(SETTINGS) / 3600)
    assert est.usd == pytest.approx(est.gpu_hours * est.usd_per_hour)
    text = est.describe()
    assert "3 kernel(s)" in text and "A100-80GB" in text and versions.PRICES_DATE in text and "$" in text


def test_dry_run_and_a_declined_confirmation_dispatch_nothing(problems):
    from kernelbench.runners.modal_cost import DispatchDeclined

    jobs = [job(problems, 1), job(problems, 2)]
    for kwargs in ({"dry_run": True}, {"confirm": lambda est: False}):
        fn = ModalFunctionStandIn(echo_body)
        seen: list = []
        runner = ModalRunner(gpu="H100", function=fn, **kwargs)
        with pytest.raises(DispatchDeclined) as info:
            runner.run(jobs, on_result=lambda i, r, seen=seen: seen.append(i), progress=False)
        assert fn.calls == [] and seen == []
        assert info.value.dry_run == bool(kwargs.get("dry_run"))
        assert runner.last_estimate.n_jobs == 2


def test_confirmation_sees_the_estimate_before_dispatch(problems):
    fn = ModalFunctionStandIn(echo_body)
    shown = []

    def confirm(est):
        shown.append((est.n_jobs, est.gpu, len(fn.calls)))
        return True

    ModalRunner(gpu="L40S", function=fn, confirm=confirm).run([job(problems, 1), job(problems, 3)], progress=False)
    assert shown == [(2, "L40S", 0)] and len(fn.calls) == 2


def test_max_containers_is_passed_to_modal():
    class WithOptions(ModalFunctionStandIn):
        def with_options(self, **options):
            self.options = options
            return self

    fn = WithOptions(echo_body)
    runner = ModalRunner(gpu="H100", function=fn, max_containers=3)
    assert runner._limited(fn) is fn and fn.options == {"max_containers": 3}
    with pytest.raises(KernelBenchError, match="max-containers"):
        ModalRunner(gpu="H100", function=fn, max_containers=0)
    with pytest.raises(KernelBenchError, match="max-cost"):
        ModalRunner(gpu="H100", function=fn, max_cost_usd=-1)


def test_max_cost_stops_dispatching_once_the_spend_would_pass_it(problems):
    from kernelbench.runners.modal_cost import DispatchDeclined, estimate_jobs

    jobs = [job(problems, 1, sample_id=s) for s in range(5)]
    per_two = estimate_jobs(jobs[:2], "H100").usd
    fn = ModalFunctionStandIn(timed_echo_body(600.0))
    delivered: list[int] = []
    runner = ModalRunner(gpu="H100", function=fn, max_containers=2, max_cost_usd=per_two + 0.01)
    with pytest.raises(DispatchDeclined, match=r"2 of 5 kernels"):
        runner.run(jobs, on_result=lambda i, r: delivered.append(i), progress=False)
    assert len(fn.calls) == 2 and delivered == [0, 1]  # the first batch ran and was delivered, then it stopped

    # A cap above the whole estimate lets everything through, batch by batch, indices intact.
    fn = ModalFunctionStandIn(timed_echo_body(1.0))
    got: list[int] = []
    results = ModalRunner(gpu="H100", function=fn, max_containers=2, max_cost_usd=1000.0).run(
        jobs, on_result=lambda i, r: got.append(i), progress=False)
    assert sorted(got) == [0, 1, 2, 3, 4] and [r.key for r in results] == [j.key for j in jobs]


def test_max_cost_below_one_kernel_refuses_before_dispatch(problems):
    from kernelbench.runners.modal_cost import DispatchDeclined

    fn = ModalFunctionStandIn(echo_body)
    with pytest.raises(DispatchDeclined, match="above --max-cost"):
        ModalRunner(gpu="H100", function=fn, max_cost_usd=0.0001).run([job(problems, 1)], progress=False)
    assert fn.calls == []


@pytest.mark.parametrize("argv", [
    ["eval", "--level", "1", "--problem-id", "8", "--kernel", "{kernel}", "--runner", "modal", "--gpu", "A100-80GB"],
    ["evaluate-run", "--run-dir", "{run}", "--source", "builtin", "--runner", "modal", "--gpu", "A100-80GB"],
])
def test_cli_dry_run_prints_the_estimate_and_sends_nothing_and_scripts_must_say_yes(tmp_path, argv):
    """No token is needed for a dry run; without a terminal only --yes dispatches (CI passes it)."""
    from kernelbench.runs import RunDirectory

    kernel = tmp_path / "k.py"
    kernel.write_text(GOOD[1])
    RunDirectory(tmp_path / "run", level=1).write_kernel(1, 8, 0, GOOD[1])
    args = [a.format(kernel=kernel, run=tmp_path / "run") for a in argv]

    def cli(*extra: str, env: dict[str, str]) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "kernelbench.cli.main", *args, *extra], cwd=tmp_path, env=env,
                              stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=120)

    dry = cli("--dry-run", env=_no_token_env(tmp_path))
    assert dry.returncode == 0, dry.stderr
    assert "1 kernel(s) on Modal A100-80GB" in dry.stderr and "GPU-hours" in dry.stderr and "$" in dry.stderr
    assert "dry run, nothing dispatched" in dry.stderr and "Traceback" not in dry.stderr
    assert not (tmp_path / "run" / "eval_results.json").exists()

    # A (fake) token gets past the token check; with stdin not a terminal and no --yes, nothing is sent.
    env = _no_token_env(tmp_path)
    env.update(MODAL_TOKEN_ID="ak-fake", MODAL_TOKEN_SECRET="as-fake")
    refused = cli(env=env)
    assert refused.returncode == 2, refused.stderr
    assert "pass --yes" in refused.stderr and "Traceback" not in refused.stderr
    assert not (tmp_path / "run" / "eval_results.json").exists()
