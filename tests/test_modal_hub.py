"""Level 4 on Modal: the trusted fetch fills a hub cache, the evaluation reads it read-only and offline.

Nothing here reaches the Hugging Face hub. A tiny GPT-2 (random weights, built by the real
``transformers``) is laid out in the hub's own cache layout on disk; a level-4 style problem loads it
with ``from_pretrained`` exactly as the official problems load ``gpt2``. The GPU functions' bodies run
in-process (``.local()``) on the CPU evaluator, with the runner deciding what goes to the trusted
fetch, to ``evaluate_hub_<gpu>`` and to ``evaluate_<gpu>``. The trusted download itself runs the real
``huggingface_hub`` client against a small hub stand-in served on 127.0.0.1.
"""

from __future__ import annotations

import hashlib
import http.server
import json
import os
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import pytest
from kbtesting import ModalFunctionStandIn, problem_source, write_problems

pytest.importorskip("transformers")
modal = pytest.importorskip("modal")

from fixtures.hub_models import (  # noqa: E402
    COMMIT,
    HUB_PROBLEM,
    MODEL_ID,
    lay_out_cache,
    tiny_model_files,
    world_readable,
)

from kernelbench.evaluation.settings import EvalJob, EvalSettings  # noqa: E402
from kernelbench.problems import load_directory  # noqa: E402
from kernelbench.problems.contract import identity_candidate  # noqa: E402
from kernelbench.problems.hub import (  # noqa: E402
    HubFetch,
    cached_snapshot,
    fetch_models,
    hub_needs,
    missing_models,
    select_files,
)
from kernelbench.results import Stage  # noqa: E402
from kernelbench.runners.modal_problems import NOT_RUNNABLE_TYPE, modal_blocker  # noqa: E402
from kernelbench.runners.modal_runner import REMOTE_ERROR_TYPE, ModalRunner  # noqa: E402
from kernelbench.runners.wire import job_to_wire, result_from_wire  # noqa: E402

REPO = Path(__file__).resolve().parent.parent
RELU = problem_source()
NEEDS_MISSING_PACKAGE = "import not_a_real_package_kb\n" + RELU
SETTINGS = EvalSettings(backend="torch", correctness_trials=1, measure_timing=False, device="cpu")


@pytest.fixture(scope="module")
def model_files(tmp_path_factory) -> Path:
    return tiny_model_files(tmp_path_factory.mktemp("tiny-gpt2"))


@pytest.fixture(scope="module")
def hub_cache(tmp_path_factory, model_files) -> Path:
    cache = tmp_path_factory.mktemp("hub-cache")
    lay_out_cache(cache, model_files)
    world_readable(cache)
    return cache


@pytest.fixture(scope="module")
def problems(tmp_path_factory):
    root = write_problems(tmp_path_factory.mktemp("problems"),
                          {"1_ReLU.py": RELU, "2_NeedsMissing.py": NEEDS_MISSING_PACKAGE})
    return load_directory(write_problems(root, {"1_tiny-gpt2_bs2_seq16.py": HUB_PROBLEM}, level=4))


@pytest.fixture
def offline_cache(monkeypatch, hub_cache):
    """This process and every worker it starts read the hub cache offline, as in a Modal container."""
    monkeypatch.setenv("HF_HUB_CACHE", str(hub_cache))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    return hub_cache


def job(problem, source: str) -> EvalJob:
    return EvalJob(problem=problem, candidate_source=source, settings=SETTINGS)


# ---------------------------------------------------------------------------------------------
# What a problem needs, read from its source


def test_hub_needs_reads_the_model_an_official_style_problem_loads():
    assert hub_needs(HUB_PROBLEM).models == (MODEL_ID,) and not hub_needs(HUB_PROBLEM).unresolved
    assert not hub_needs(RELU).needed
    dynamic = HUB_PROBLEM.replace('model_name = "kbtest/tiny-gpt2"', "model_name = 'kbtest/' + 'tiny-gpt2'")
    needs = hub_needs(dynamic)
    assert needs.unresolved and needs.needed  # a name the source does not spell out cannot be fetched ahead


def test_modal_blocks_only_missing_packages_and_unnamed_models(problems):
    assert modal_blocker(problems.get(4, 1)) is None  # transformers is in the image; the model is fetched
    assert "not_a_real_package_kb" in modal_blocker(problems.get(1, 2))
    dynamic = problems.get(4, 1).__class__(
        level=4, problem_id=9, name="dyn", code=HUB_PROBLEM.replace('"kbtest/tiny-gpt2"', "'kbtest/' + 'x'"),
        requirements=("transformers",))
    assert "does not name" in modal_blocker(dynamic)


def test_only_configs_and_one_pytorch_weight_format_are_fetched():
    repo = ["config.json", "generation_config.json", "model.safetensors", "pytorch_model.bin", "tf_model.h5",
            "flax_model.msgpack", "tokenizer.json", "vocab.json", "onnx/model.onnx", "README.md"]
    assert select_files(repo) == ["config.json", "generation_config.json", "model.safetensors"]
    old = ["config.json", "pytorch_model.bin", "tf_model.h5"]
    assert select_files(old) == ["config.json", "pytorch_model.bin"]
    sharded = ["config.json", "model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors",
               "model.safetensors.index.json", "pytorch_model-00001-of-00002.bin"]
    assert select_files(sharded) == ["config.json", "model-00001-of-00002.safetensors",
                                     "model-00002-of-00002.safetensors", "model.safetensors.index.json"]
    with pytest.raises(ValueError, match="no PyTorch weights"):
        select_files(["config.json", "tf_model.h5"])
    with pytest.raises(ValueError, match="no config.json"):
        select_files(["model.safetensors"])


def test_the_cache_serves_a_model_only_with_its_config_and_weights(tmp_path, model_files):
    assert missing_models([MODEL_ID], tmp_path) == [MODEL_ID]
    snap = lay_out_cache(tmp_path, model_files)
    assert cached_snapshot(MODEL_ID, tmp_path) == snap and missing_models([MODEL_ID], tmp_path) == []
    assert cached_snapshot(MODEL_ID, tmp_path, revision=COMMIT) == snap
    (snap / "model.safetensors").unlink()
    assert missing_models([MODEL_ID], tmp_path) == [MODEL_ID]  # a config alone does not load


# ---------------------------------------------------------------------------------------------
# The trusted fetch: the real huggingface_hub client against a hub stand-in on 127.0.0.1


class _FakeHub(http.server.BaseHTTPRequestHandler):
    """The hub endpoints a snapshot download uses: model info, the file listing, and resolve (HEAD, GET) per file."""

    files: dict[str, bytes] = {}
    requests: list[str] = []

    def log_message(self, *args) -> None:  # keep pytest output clean
        pass

    def _file(self) -> tuple[str, bytes] | None:
        prefix = f"/{MODEL_ID}/resolve/"
        if not self.path.startswith(prefix):
            return None
        rev, _, name = self.path[len(prefix):].partition("/")
        if rev not in ("main", COMMIT) or name not in self.files:
            return None
        return name, self.files[name]

    def _send_file_headers(self, data: bytes) -> None:
        self.send_response(200)
        self.send_header("X-Repo-Commit", COMMIT)
        self.send_header("ETag", '"' + hashlib.sha256(data).hexdigest() + '"')
        self.send_header("Content-Length", str(len(data)))
        self.send_header("Content-Type", "application/octet-stream")
        self.end_headers()

    def do_HEAD(self) -> None:  # noqa: N802 - http.server's naming
        type(self).requests.append("HEAD " + self.path)
        found = self._file()
        if found is None:
            self.send_response(404)
            self.end_headers()
            return
        self._send_file_headers(found[1])

    def do_GET(self) -> None:  # noqa: N802
        type(self).requests.append("GET " + self.path)
        if self.path.split("?")[0] in (f"/api/models/{MODEL_ID}/revision/main", f"/api/models/{MODEL_ID}/revision/{COMMIT}",
                                       f"/api/models/{MODEL_ID}"):
            body = json.dumps({"id": MODEL_ID, "modelId": MODEL_ID, "sha": COMMIT, "private": False,
                               "siblings": [{"rfilename": n} for n in sorted(self.files)]}).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
            return
        if self.path.split("?")[0] == f"/api/models/{MODEL_ID}/tree/{COMMIT}":  # the listing snapshot_download reads
            body = json.dumps([{"type": "file", "path": n, "size": len(d), "oid": hashlib.sha1(d).hexdigest()}
                               for n, d in sorted(self.files.items())]).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
            return
        found = self._file()
        if found is None:
            body = b'{"error": "Repository not found"}'
            self.send_response(404)
            self.send_header("Content-Type", "application/json")
            self.send_header("X-Error-Code", "RepoNotFound")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
            return
        self._send_file_headers(found[1])
        self.wfile.write(found[1])


@pytest.fixture
def fake_hub(model_files):
    files = {f.name: f.read_bytes() for f in model_files.iterdir()}
    files["tf_model.h5"] = b"tensorflow weights the fetch must leave behind"
    handler = type("Hub", (_FakeHub,), {"files": files, "requests": []})
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", handler
    finally:
        server.shutdown()
        server.server_close()


def test_the_trusted_fetch_downloads_configs_and_weights_into_the_hub_layout_and_then_serves_offline(tmp_path, fake_hub):
    endpoint, hub = fake_hub
    cache = tmp_path / "cache"
    (fetched,) = fetch_models([MODEL_ID], cache, endpoint=endpoint)
    assert fetched.ok and not fetched.cached, fetched.error
    assert fetched.commit == COMMIT
    assert fetched.files == ["config.json", "generation_config.json", "model.safetensors"]  # no tf_model.h5
    assert not any("tf_model.h5" in r for r in hub.requests)
    assert fetched.size_bytes == sum(len(hub.files[f]) for f in fetched.files)

    # Loaded offline, in a fresh interpreter, by the same code the problem runs.
    code = ("from transformers import AutoConfig, AutoModelForCausalLM\n"
            f"c = AutoConfig.from_pretrained({MODEL_ID!r})\n"
            f"m = AutoModelForCausalLM.from_pretrained({MODEL_ID!r}, config=c)\n"
            "print('LOADED', c.vocab_size, sum(p.numel() for p in m.parameters()))\n")
    env = {**os.environ, "HF_HUB_CACHE": str(cache), "HF_HUB_OFFLINE": "1"}
    proc = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0 and "LOADED 64" in proc.stdout, proc.stderr[-3000:]

    # Fetched once: a second fetch is answered from the cache, without asking the hub.
    before = len(hub.requests)
    (again,) = fetch_models([MODEL_ID], cache, endpoint=endpoint)
    assert again.ok and again.cached and again.commit == COMMIT and len(hub.requests) == before


def test_fetch_errors_are_per_model_data_not_exceptions(tmp_path, fake_hub):
    endpoint, _hub = fake_hub
    results = fetch_models(["kbtest/not-there", "bad id with spaces", MODEL_ID], tmp_path / "c", endpoint=endpoint)
    by_id = {r.model_id: r for r in results}
    assert not by_id["kbtest/not-there"].ok and by_id["kbtest/not-there"].error
    assert by_id["bad id with spaces"].error == "not a valid hub model id"
    assert by_id[MODEL_ID].ok  # one bad model does not stop the others
    assert HubFetch.from_dict(by_id[MODEL_ID].to_dict()) == by_id[MODEL_ID]


# ---------------------------------------------------------------------------------------------
# The runner and the GPU functions' bodies


@pytest.fixture(scope="module")
def app_module():
    import modal_app.app as app_module

    return app_module


def test_hub_functions_mount_the_hub_cache_read_only_and_only_the_fetch_has_network(app_module):
    from modal_app import versions

    for gpu in versions.GPUS:
        slug = versions.GPUS[gpu].slug
        hub = getattr(app_module, f"evaluate_hub_{slug}").info()
        assert hub.restrict_modal_access and hub.single_use_containers and hub.block_network
        assert hub.secrets == []
        assert list(hub.volumes) == [versions.HUB_MOUNT]
        assert hub.volumes[versions.HUB_MOUNT].name == versions.HUB_VOLUME_NAME
        assert hub.volumes[versions.HUB_MOUNT].read_only is True
        base = getattr(app_module, f"baselines_{slug}").info()
        assert base.volumes[versions.HUB_MOUNT].read_only is True and base.block_network and base.secrets == []
    fetch = app_module.fetch_hub_models.info()
    assert fetch.gpus == [] and fetch.block_network is False
    assert fetch.volumes[versions.HUB_MOUNT].read_only is False  # the only writer of the hub cache
    assert fetch.secrets == []  # no HF token unless one is configured (next test)


def test_an_hf_token_secret_goes_to_the_trusted_fetch_and_nowhere_else():
    from modal_app import versions

    code = textwrap.dedent("""
        import modal_app.app as a
        from modal_app import versions
        print("FETCH", len(a.fetch_hub_models.info().secrets))
        others = [getattr(a, f"{k}_{g.slug}") for g in versions.GPUS.values()
                  for k in ("evaluate", "evaluate_hub", "baselines")]
        print("OTHERS", sum(len(f.info().secrets) for f in others))
    """)
    env = {**os.environ, versions.HF_SECRET_ENV: "my-hf-secret", "PYTHONPATH": str(REPO)}
    proc = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120, cwd=REPO)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "FETCH 1" in proc.stdout and "OTHERS 0" in proc.stdout


def test_the_image_installs_every_package_a_runnable_problem_may_import():
    from kernelbench.runners.modal_problems import MODAL_IMAGE_MODULES
    from modal_app.image import recipe_for

    pins = recipe_for("H100").pinned()
    assert set(MODAL_IMAGE_MODULES) <= set(pins), f"not pinned in the image: {set(MODAL_IMAGE_MODULES) - set(pins)}"
    assert {"huggingface_hub", "safetensors"} <= set(pins)  # what loads the hub cache, at the tested versions


def test_the_fetch_image_is_online_and_the_gpu_images_are_offline_on_one_cache_path():
    from modal_app import versions
    from modal_app.image import recipe_for, recipe_for_fetch

    fetch, gpu = recipe_for_fetch(), recipe_for("H100")
    assert gpu.env["HF_HUB_OFFLINE"] == "1" and "HF_HUB_OFFLINE" not in fetch.env
    assert fetch.env["HF_HUB_CACHE"] == gpu.env["HF_HUB_CACHE"] == versions.HUB_CACHE_DIR
    assert versions.HUB_CACHE_DIR.startswith(versions.HUB_MOUNT + "/")
    assert fetch.pip_steps == gpu.pip_steps  # same layers: the fetch builds nothing new


@pytest.mark.slow
def test_level4_kernels_run_through_the_fetch_and_the_hub_function_and_the_rest_as_before(problems, offline_cache,
                                                                                         app_module):
    """The runner fetches the model (already cached: nothing downloaded), sends the level-4 kernel to
    ``evaluate_hub_h100`` and the others to ``evaluate_h100``, and a kernel whose problem imports a package
    the image lacks gets its own not-runnable result. Reference and candidate load the model offline."""
    hub_problem = problems.get(4, 1)
    jobs = [job(problems.get(1, 1), identity_candidate(RELU)),
            job(hub_problem, identity_candidate(HUB_PROBLEM)),
            job(problems.get(1, 2), identity_candidate(RELU))]
    plain, hub, fetch = (ModalFunctionStandIn(app_module.evaluate_h100.local), ModalFunctionStandIn(app_module.evaluate_hub_h100.local),
                         ModalFunctionStandIn(app_module.fetch_hub_models.local))
    runner = ModalRunner(gpu="H100", function=plain, hub_function=hub, fetch_function=fetch)
    results = runner.run(jobs, progress=False)
    assert [r.key for r in results] == [j.key for j in jobs]
    assert [c["models"] for c in fetch.calls] == [[MODEL_ID]]
    assert [c["problem"]["level"] for c in hub.calls] == [4] and [c["problem"]["level"] for c in plain.calls] == [1]
    relu, l4, blocked = results
    assert relu.correct, relu.error
    assert l4.error is None and l4.compiled and l4.correct, l4.error
    assert l4.correctness.trials_passed == 1
    assert blocked.error.type == NOT_RUNNABLE_TYPE and "not_a_real_package_kb" in blocked.error.message
    assert not blocked.infrastructure_failure
    assert sorted(p.name for p in offline_cache.rglob("*") if p.is_file()) == \
        ["config.json", "generation_config.json", "main", "model.safetensors"]  # nothing written to the cache
    from kernelbench.evaluation import isolation

    sandboxed = isolation.probe(False).available  # CI requires it: the candidate read the cache from inside
    assert l4.environment.isolation == ("sandbox" if sandboxed else "process")
    if sandboxed:
        assert l4.environment.network is False


WRITES_THE_CACHE = '''
import os, pathlib
target = pathlib.Path(os.environ["HF_HUB_CACHE"]) / "planted-by-candidate"
try:
    target.write_text("x")
    PLANTED = "yes"
except OSError as e:
    PLANTED = type(e).__name__
'''


def test_a_sandboxed_candidate_reads_the_hub_cache_but_cannot_write_it(problems, offline_cache):
    from kernelbench.evaluation import evaluate, isolation

    support = isolation.probe(False)
    if not support.available:
        if os.environ.get("KB_REQUIRE_SANDBOX_TESTS") == "1":
            pytest.fail(support.message())
        pytest.skip(support.message())
    source = WRITES_THE_CACHE + identity_candidate(HUB_PROBLEM)
    result = evaluate(job(problems.get(4, 1), source))
    assert result.environment.isolation == "sandbox"
    assert result.correct, result.error  # it loaded the model from the cache it could not write
    assert not (offline_cache / "planted-by-candidate").exists()


def test_a_model_the_fetch_could_not_get_gives_that_kernel_an_infrastructure_result(problems, tmp_path, monkeypatch):
    """Fetch failed (no such model on the hub here): the level-4 kernel is not sent, says why, and is retried
    on resume; the other kernels are evaluated."""
    from modal_app.worker import fetch_hub_payload

    empty = tmp_path / "empty-cache"
    monkeypatch.setenv("HF_HUB_CACHE", str(empty))
    closed = "http://127.0.0.1:9"  # the discard port: nothing listens, the connection is refused at once
    fetch = ModalFunctionStandIn(lambda p: fetch_hub_payload(p, cache_dir=empty, endpoint=closed))
    plain = ModalFunctionStandIn(lambda p: job_to_wire_result(p))
    hub = ModalFunctionStandIn(lambda p: pytest.fail("nothing may be sent to the hub function"))
    runner = ModalRunner(gpu="H100", function=plain, hub_function=hub, fetch_function=fetch)
    results = runner.run([job(problems.get(4, 1), identity_candidate(HUB_PROBLEM)),
                          job(problems.get(1, 1), identity_candidate(RELU))], progress=False)
    l4, relu = results
    assert l4.infrastructure_failure and l4.error.type == REMOTE_ERROR_TYPE and l4.error.stage == Stage.INFRASTRUCTURE
    assert MODEL_ID in l4.error.message and "run again" in l4.error.message
    assert hub.calls == [] and len(plain.calls) == 1 and relu.error is None


def job_to_wire_result(payload: dict) -> dict:
    """A stand-in verdict for kernels whose evaluation is not what a test is about (correct, not timed)."""
    from kernelbench.results import KernelResult
    from kernelbench.runners.wire import job_from_wire, result_to_wire

    index, j = job_from_wire(payload)
    p = j.problem
    return result_to_wire(index, KernelResult(level=p.level, problem_id=p.problem_id, problem_name=p.name,
                                              problem_hash=p.hash, sample_id=j.sample_id, backend=j.settings.backend,
                                              precision=j.settings.precision, compiled=True, correct=True))


def test_the_hub_function_says_plainly_when_the_cache_lacks_the_model(problems, tmp_path, monkeypatch, app_module):
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "nothing-here"))
    payload = job_to_wire(job(problems.get(4, 1), identity_candidate(HUB_PROBLEM)), 0)
    _, result = result_from_wire(app_module.evaluate_hub_h100.local(payload))
    assert result.infrastructure_failure and not result.correct
    assert MODEL_ID in result.error.message and "fetch_hub_models" in result.error.message


def test_the_fetch_body_commits_the_volume_only_after_a_download(tmp_path, fake_hub):
    from kernelbench.runners.wire import fetch_reply_from_wire, fetch_request_to_wire
    from modal_app.worker import fetch_hub_payload

    endpoint, _hub = fake_hub
    commits: list[int] = []
    payload = fetch_request_to_wire([MODEL_ID])
    first = fetch_hub_payload(payload, cache_dir=tmp_path / "vol", endpoint=endpoint, commit=lambda: commits.append(1))
    assert fetch_reply_from_wire(first, [MODEL_ID]) == {MODEL_ID: None} and commits == [1]
    fetch_hub_payload(payload, cache_dir=tmp_path / "vol", endpoint=endpoint, commit=lambda: commits.append(2))
    assert commits == [1]  # already cached: nothing new to publish


def test_torch_wrapping_manual_seed_when_dynamo_loads_is_not_a_patch_but_a_forged_wrapper_is():
    """``from_pretrained`` imports torch._dynamo, which wraps torch.manual_seed (torch's own doing): the
    runtime guard must not fail every level-4 candidate for it, and must still catch a wrapper around
    something else."""
    code = textwrap.dedent("""
        import torch
        from kernelbench.evaluation.guards.runtime import PatchSnapshot
        before = PatchSnapshot.take()
        import torch._dynamo  # torch replaces torch.manual_seed with its _disable_dynamo wrapper
        assert torch.manual_seed is not torch.random.manual_seed
        print("DYNAMO", before.changes(PatchSnapshot.take()))
        original = torch.manual_seed
        torch.manual_seed = torch._disable_dynamo(lambda seed: None)  # same wrapper, another function
        print("FORGED", before.changes(PatchSnapshot.take()))
        torch.manual_seed = original
        forged = torch._disable_dynamo(lambda seed: None)
        forged.__wrapped__ = torch.random.manual_seed  # lying about what it wraps changes nothing
        torch.manual_seed = forged
        print("LYING", before.changes(PatchSnapshot.take()))
    """)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}
    proc = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    lines = dict(line.split(" ", 1) for line in proc.stdout.splitlines() if line.split(" ")[0] in
                 ("DYNAMO", "FORGED", "LYING"))
    assert lines["DYNAMO"] == "[]"
    assert "torch.manual_seed" in lines["FORGED"] and "torch.manual_seed" in lines["LYING"]


@pytest.mark.slow
def test_modal_check_hub_job_goes_through_the_fetch_and_reports_item_by_item(problems, offline_cache, app_module):
    """``modal run modal_app/app.py::check --hub``: its job is routed like a level-4 kernel; on the tiny model
    here (gpt2 on an account) every hub item of the report is ok, and a failed fetch is reported as such."""
    import dataclasses

    from modal_app.commands import CHECK_HUB_MODEL, check_hub_job, check_hub_report, check_text

    real = check_hub_job()
    from kernelbench.runners.modal_problems import hub_models_of

    assert hub_models_of(real.problem) == (CHECK_HUB_MODEL,) and modal_blocker(real.problem) is None
    tiny_code = real.problem.code.replace(f'"{CHECK_HUB_MODEL}"', f'"{MODEL_ID}"')
    tiny = dataclasses.replace(real, problem=dataclasses.replace(real.problem, code=tiny_code),
                               candidate_source=identity_candidate(tiny_code))
    hub, fetch = ModalFunctionStandIn(app_module.evaluate_hub_h100.local), ModalFunctionStandIn(app_module.fetch_hub_models.local)
    (result,) = ModalRunner(gpu="L40S", function=ModalFunctionStandIn(job_to_wire_result), hub_function=hub,
                            fetch_function=fetch).run([tiny], progress=False)
    items = check_hub_report(result)
    assert all(i.ok for i in items), check_text(items)
    assert [c["models"] for c in fetch.calls] == [[MODEL_ID]] and len(hub.calls) == 1

    failed = ModalRunner(gpu="L40S", function=ModalFunctionStandIn(job_to_wire_result), hub_function=hub,
                         fetch_function=ModalFunctionStandIn(lambda p: {"wire_version": p["wire_version"], "models": [
                             {"model_id": MODEL_ID, "error": "HTTPError: 401 gated"}]})).run([tiny], progress=False)
    (item,) = check_hub_report(failed[0])
    assert not item.ok and "401 gated" in item.detail


def test_modal_run_check_lists_the_hub_option():
    proc = subprocess.run([sys.executable, "-m", "modal", "run", "modal_app/app.py::check", "--help"], cwd=REPO,
                          capture_output=True, text=True, timeout=120,
                          env={**os.environ, "PYTHONPATH": str(REPO)})
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "--hub" in proc.stdout


@pytest.mark.gpu
def test_gpu_hub_function_evaluates_and_times_a_level4_kernel_from_the_cache(problems, offline_cache, app_module):
    """On a GPU: the hub function's body loads the model offline on both sides, checks and times the kernel."""
    import torch

    if not torch.cuda.is_available():
        pytest.skip("needs an NVIDIA GPU")
    gpu_settings = EvalSettings(backend="torch", correctness_trials=2, measure_timing=True, timing_budget_s=0.5)
    payload = job_to_wire(EvalJob(problem=problems.get(4, 1), candidate_source=identity_candidate(HUB_PROBLEM),
                                  settings=gpu_settings), 0)
    _, result = result_from_wire(app_module.evaluate_hub_h100.local(payload))
    assert result.error is None and result.correct, result.error
    assert result.runtime is not None and result.ref_runtime is not None
    assert result.environment.device.startswith("cuda")


def test_baselines_of_level4_problems_are_measured_after_the_fetch_and_a_failed_fetch_is_recorded(problems):
    from kernelbench.runners.wire import WIRE_VERSION, fetch_request_from_wire

    sent: list[str] = []

    def baseline_body(payload: dict) -> dict:
        sent.append(payload["problem"]["name"])
        return {"wire_version": WIRE_VERSION, "index": payload["index"], "entries": {}, "error": None}

    def fetch_ok(payload: dict) -> dict:
        return {"wire_version": WIRE_VERSION, "models": [
            HubFetch(model_id=m, commit=COMMIT, files=["config.json", "model.safetensors"]).to_dict()
            for m in fetch_request_from_wire(payload)]}

    def fetch_gated(payload: dict) -> dict:
        return {"wire_version": WIRE_VERSION, "models": [
            HubFetch(model_id=m, error="GatedRepoError: 401").to_dict() for m in fetch_request_from_wire(payload)]}

    todo = [problems.get(1, 1), problems.get(4, 1)]
    fetch = ModalFunctionStandIn(fetch_ok)
    runner = ModalRunner(gpu="H100", function=ModalFunctionStandIn(job_to_wire_result), baselines_function=ModalFunctionStandIn(baseline_body), fetch_function=fetch)
    outs = runner.measure_baselines(todo, ["eager"], SETTINGS, progress=False)
    assert sorted(sent) == ["1_ReLU", "1_tiny-gpt2_bs2_seq16"] and [c["models"] for c in fetch.calls] == [[MODEL_ID]]
    assert all(o is not None and o["error"] is None for o in outs)

    sent.clear()
    got: dict[int, dict] = {}
    runner = ModalRunner(gpu="H100", function=ModalFunctionStandIn(job_to_wire_result), baselines_function=ModalFunctionStandIn(baseline_body),
                         fetch_function=ModalFunctionStandIn(fetch_gated))
    outs = runner.measure_baselines(todo, ["eager"], SETTINGS, on_result=got.__setitem__, progress=False)
    assert sent == ["1_ReLU"]  # the level-4 reference is not measured without its model
    assert "GatedRepoError" in outs[1]["error"] and MODEL_ID in outs[1]["error"] and got[1] is outs[1]

    sent.clear()
    plain_only = ModalRunner(gpu="H100", function=ModalFunctionStandIn(job_to_wire_result), baselines_function=ModalFunctionStandIn(baseline_body),
                             fetch_function=ModalFunctionStandIn(lambda p: pytest.fail("no fetch without a hub problem")))
    plain_only.measure_baselines([problems.get(1, 1)], ["eager"], SETTINGS, progress=False)
    assert sent == ["1_ReLU"]
