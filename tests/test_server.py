"""``kernelbench serve`` against a real server: a subprocess on 127.0.0.1, real HTTP, the real evaluator on the CPU.

Bad input (400/401/404/409/413 with the reason), a full queue (429 with Retry-After), verdicts through the
blocking call, submit-and-poll and the client, a candidate the guards refuse or that hangs, an evaluator
process killed mid-job (the job is re-queued and no other result is lost), a wedged evaluation killed at its
deadline, problem affinity through the real dispatch (and its key forgotten when the evaluator process dies), and a
shutdown while busy (unfinished work saved and finished after a restart).

The problems are tiny (a 32x64 scaled ReLU) so that each evaluation takes about two seconds on two cores.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx
import pytest
from kbtesting import BROKEN_INPUTS_PROBLEM, SCALED_RELU_PROBLEM, scaled_relu_candidate

from kernelbench.results import KernelResult, Stage
from kernelbench.server.client import EvalClient, ServerError, make_request

PROBLEM = SCALED_RELU_PROBLEM
cand = scaled_relu_candidate


HONEST = cand("        return x.clamp_min(0) * self.scale\n")
WRONG = cand("        return x.clamp_min(0) * self.scale + 1.0\n")
#: Refused by the static guard before it runs: the guards are part of the verdict through the server too.
EXPLOIT = cand("        import os\n        os._exit(0)\n")
HANGS = cand("        while True:\n            pass\n")
#: Honest, but its import takes 2 s: a window in which to stop the server with it in flight.
SLOW = cand("        return x.clamp_min(0) * self.scale\n", prefix="import time\ntime.sleep(2)\n")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    """``kernelbench serve`` in a subprocess, on a free loopback port, evaluating on the CPU."""

    def __init__(self, tmp: Path, *args: str, env: dict[str, str] | None = None, problems: Path | None = None):
        self.port = _free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log_path = tmp / f"server-{self.port}.log"
        self.problems = problems
        cmd = [sys.executable, "-m", "kernelbench.cli.main", "serve", "--port", str(self.port), "--gpus", "cpu",
               "--source", "directory", "--path", str(problems), *args]
        self.log = open(self.log_path, "w")  # noqa: SIM115 - closed in stop()
        self.proc = subprocess.Popen(cmd, stdout=self.log, stderr=subprocess.STDOUT,
                                     env={**os.environ, "CUDA_VISIBLE_DEVICES": "", **(env or {})})
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            assert self.proc.poll() is None, self.output()
            try:
                if httpx.get(self.url + "/health", timeout=2).status_code == 200:
                    return
            except httpx.TransportError:
                time.sleep(0.2)
        raise AssertionError("the server did not answer /health within 60 s:\n" + self.output())

    def output(self) -> str:
        if not self.log.closed:
            self.log.flush()
        return self.log_path.read_text()

    def health(self) -> dict:
        return httpx.get(self.url + "/health", timeout=5).json()

    def wait_busy(self, timeout_s: float = 60) -> dict:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            dev = self.health()["devices"][0]
            if dev["state"] == "busy" and dev["pid"]:
                return dev
            time.sleep(0.1)
        raise AssertionError("no device became busy")

    def stop(self, sig: int = signal.SIGTERM, timeout_s: float = 60) -> bool:
        """Stop it as an operator would; True if it drained and stopped cleanly (uvicorn exits by re-raising
        the signal once its shutdown is done, so the exit status alone does not say)."""
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
            try:
                self.proc.wait(timeout_s)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
                raise AssertionError("the server did not stop within its drain time:\n" + self.output()) from None
        out = self.output()
        self.log.close()
        return self.proc.returncode in (0, -sig) and "server stopped: " in out


@pytest.fixture(scope="module")
def problems(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("problems")
    (root / "level1").mkdir()
    (root / "level1" / "1_Scaled_relu.py").write_text(PROBLEM)
    (root / "level1" / "2_Scaled_relu_48.py").write_text(PROBLEM.replace("N = 64", "N = 48"))  # another reference
    return root


@pytest.fixture(scope="module")
def server(tmp_path_factory, problems):
    # Process isolation, as on the GPU today: there orphaned workers do not die with their parent (the sandbox's
    # do), so the killed-evaluator test shows that the server kills them. The other servers here use the sandbox.
    s = Server(tmp_path_factory.mktemp("srv"), "--max-queue", "5", "--max-batch", "8", "--max-source-bytes", "4096",
               "--max-request-bytes", "65536", "--kill-grace", "6", "--allow-reference-source", "--no-sandbox",
               "--affinity-window", "60", problems=problems)
    yield s
    assert s.stop(), s.output()


@pytest.fixture(scope="module")
def client(server):
    with EvalClient(server.url, poll_s=0.2) as c:
        yield c


def body(source: str = HONEST, **extra) -> dict:
    settings = {"backend": "torch", "correctness_trials": 2, **extra.pop("settings", {})}
    return {"candidate_source": source, "problem": {"level": 1, "problem_id": 1}, "settings": settings, **extra}


# ---------------------------------------------------------------------------- bad input
BAD = {
    "malformed JSON": (b'{"candidate_source": "x",', 400, "malformed JSON"),
    "not an object": (b"[1, 2]", 400, "the request body must be one JSON object"),
    "empty body": (b"", 400, "request body is missing"),
    "missing candidate": ({"problem": {"level": 1, "problem_id": 1}}, 400, "candidate_source: Field required"),
    "missing problem": ({"candidate_source": HONEST}, 400, "exactly one of `problem`"),
    "both problems": ({**body(), "reference_source": PROBLEM}, 400, "exactly one of `problem`"),
    "unknown field": (body(settings={"correctnes_trials": 3}), 400, "settings.correctnes_trials: Extra inputs"),
    "bad backend": (body(settings={"backend": "rocm"}), 400, "settings.backend: Input should be"),
    "zero trials": (body(settings={"correctness_trials": 0}), 400, "settings.correctness_trials"),
    "unknown problem id": ({**body(), "problem": {"level": 1, "problem_id": 99}}, 400,
                           "unknown problem: no problem with id 99 in level 1"),
    "unknown level": ({**body(), "problem": {"level": 3, "problem_id": 1}}, 400, "level 3 has no problems"),
    "unknown set": ({**body(), "problem": {"set": "kernelbench", "level": 1, "problem_id": 1}}, 400,
                    "unknown problem set 'kernelbench'"),
    "not a problem": ({"candidate_source": HONEST, "reference_source": "x = 1\n"}, 400,
                      "does not define Model"),
    "empty candidate": (body(source="  \n"), 400, "candidate_source is empty"),
    "no reduced size": (body(settings={"reduced_size": True}), 400, "declares no CPU_SIZE"),
    "timeout too long": (body(settings={"timeout_s": 10_000}), 400, "timeout_s is 10000 s"),
    "bad job id": (body(id="../etc"), 400, "id: String should match pattern"),
    "oversized source": (body(source=HONEST + "#" * 5000), 413, "candidate_source is 5"),
    "oversized body": (body(source="#" * 70000), 413, "at most 65536 bytes"),
}


@pytest.mark.parametrize("case", list(BAD))
def test_bad_input_is_refused_with_a_clear_message(server, case):
    payload, status, text = BAD[case]
    content = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
    r = httpx.post(server.url + "/v1/jobs", content=content, headers={"Content-Type": "application/json"}, timeout=10)
    assert r.status_code == status, r.text
    assert text in r.json()["detail"], r.json()["detail"]
    if case in ("missing problem", "both problems"):
        assert r.json()["detail"].startswith("give exactly one of"), r.json()["detail"]


def test_bad_batches_and_unknown_jobs(server):
    r = httpx.post(server.url + "/v1/jobs/batch", json={"requests": []}, timeout=10)
    assert r.status_code == 400 and "requests: List should have at least 1 item" in r.json()["detail"]
    r = httpx.post(server.url + "/v1/jobs/batch", json={"requests": [body()] * 9}, timeout=10)
    assert r.status_code == 413 and "at most 8 requests" in r.json()["detail"]
    assert server.health()["max_batch"] == 8  # the client splits larger batches by it
    r = httpx.post(server.url + "/v1/jobs/batch", json={"requests": [body(), {**body(), "problem": {
        "level": 1, "problem_id": 7}}]}, timeout=10)
    assert r.status_code == 400 and r.json()["detail"].startswith("requests[1]: unknown problem")
    r = httpx.post(server.url + "/v1/jobs/batch", json={"requests": [body(id="same"), body(id="same")]}, timeout=10)
    assert r.status_code == 409 and "repeats a job id" in r.json()["detail"]
    for method in ("GET", "DELETE"):
        r = httpx.request(method, server.url + "/v1/jobs/nope", timeout=10)
        assert r.status_code == 404 and "no job 'nope'" in r.json()["detail"]
    assert server.health()["queued"] == 0  # nothing refused was queued


# ---------------------------------------------------------------------------- verdicts and the queue
def _sample(metrics: str, name: str) -> float:
    """The value of one Prometheus sample line (0 when absent)."""
    return next((float(line.rsplit(" ", 1)[1]) for line in metrics.splitlines() if line.startswith(name + " ")), 0.0)


def test_verdicts_through_batch_poll_and_a_full_queue(server, client):
    names = ["honest", "wrong", "exploit", "hangs", "honest2"]
    sources = [HONEST, WRONG, EXPLOIT, HANGS, HONEST]
    reqs = [make_request(src, level=1, problem_id=1, backend="torch", correctness_trials=2, sample_id=i,
                         timeout_s=3 if name == "hangs" else None) for i, (name, src) in enumerate(zip(names, sources))]
    infos = client.submit_batch(reqs)
    assert [i.status for i in infos][1:] == ["queued"] * 4
    # Five places, one evaluator: at most one job has left the queue, so two more cannot fit.
    r = httpx.post(server.url + "/v1/jobs/batch", json={"requests": [body(), body()]}, timeout=10)
    assert r.status_code == 429, r.text
    assert int(r.headers["Retry-After"]) >= 1 and "the queue is full" in r.json()["detail"]
    assert client.get(infos[-1].id).position is not None
    # The client waits a 429 out for its Retry-After and gets in once two places have freed up.
    late = client.submit_batch([make_request(HONEST, level=1, problem_id=1, backend="torch", correctness_trials=2,
                                             sample_id=10 + k) for k in range(2)])
    assert _sample(client.metrics(), 'kernelbench_server_events_total{kind="rejected_queue_full"}') >= 2
    results = {name: client.wait(info.id, timeout_s=120, collect=False) for name, info in zip(names, infos)}
    assert results["honest"].correct and results["honest2"].correct, results["honest"].error
    assert not results["wrong"].correct and results["wrong"].correctness.trials_passed == 0
    assert results["exploit"].error.stage == Stage.GUARD and results["exploit"].failing_findings
    assert results["hangs"].error.stage == Stage.TIMEOUT and "within 3 s" in results["hangs"].error.message
    assert all(client.wait(j.id, timeout_s=120).correct for j in late)
    # Kept until collected: polling twice works, collecting removes it.
    assert client.get(infos[0].id).result.correct
    assert client.collect(infos[0].id).status == "done"
    with pytest.raises(ServerError) as e:
        client.get(infos[0].id)
    assert e.value.status == 404


def test_blocking_call_by_source_and_reduced_size(server, client):
    r = client.evaluate(make_request(HONEST, reference_source=PROBLEM, backend="torch", correctness_trials=2))
    assert r.correct and r.problem_name == "custom" and r.environment.device == "cpu"
    raw = httpx.post(server.url + "/v1/evaluate", json=body(WRONG), timeout=120)
    assert raw.status_code == 200
    info = raw.json()
    assert info["status"] == "done" and info["result"]["correct"] is False
    assert httpx.get(server.url + f"/v1/jobs/{info['id']}").status_code == 404  # collected by the blocking call
    # A blocking call whose wait ends first answers 202 with the job to poll; nothing is lost.
    raw = httpx.post(server.url + "/v1/evaluate", params={"wait_s": 0.01}, json=body(id="poll-me"), timeout=30)
    assert raw.status_code == 202 and raw.json()["id"] == "poll-me"
    assert client.wait("poll-me", timeout_s=120).correct
    dup = httpx.post(server.url + "/v1/jobs", json=body(id="taken"), timeout=10)
    assert dup.status_code == 202
    again = httpx.post(server.url + "/v1/jobs", json=body(id="taken"), timeout=10)
    assert again.status_code == 409 and "already exists" in again.json()["detail"]
    assert client.wait("taken", timeout_s=120).correct


def _reuses(server) -> tuple[int, int]:
    """The one device's reference reuses and affinity picks, from /health."""
    dev = server.health()["devices"][0]
    return dev["reference_reuses"], dev["affinity_picks"]


def test_a_free_device_takes_the_problem_it_just_ran_first(server, client):
    """Problem affinity through the real dispatch: after a job of problem 1 finishes, the device takes the later job
    of problem 1 ahead of the older one of problem 2 (its evaluator keeps problem 1's reference), and counts it."""
    before = _reuses(server)
    metrics_before = client.metrics()
    a1, b1, a2 = client.submit_batch([make_request(HONEST, level=1, problem_id=p, backend="torch", correctness_trials=2,
                                                   sample_id=i) for i, p in enumerate((1, 2, 1))])
    infos = {}
    for name, job in (("a1", a1), ("b1", b1), ("a2", a2)):
        assert client.wait(job.id, timeout_s=120, collect=False).correct
        infos[name] = client.collect(job.id)
    assert infos["a1"].started_at < infos["a2"].started_at < infos["b1"].started_at
    reuses, picks = _reuses(server)
    assert picks - before[1] == 1 and reuses - before[0] >= 1  # a2 (a1 too if the device's last job was problem 1)
    assert server.health()["devices"][0]["reference"] == "level 1 problem 2"
    name = 'kernelbench_server_affinity_picks_total{device="cpu"}'
    assert _sample(client.metrics(), name) - _sample(metrics_before, name) == 1
    # A reference that cannot be set up is not kept: the next job of that problem is no reuse.
    before = _reuses(server)
    for i in range(2):
        r = client.evaluate(make_request(HONEST, reference_source=BROKEN_INPUTS_PROBLEM, backend="torch", sample_id=i))
        assert not r.correct and "inputs cannot be made" in r.error.message, r.error
    assert _reuses(server) == before and server.health()["devices"][0]["reference"] is None


def _alive(pid: int, started: str) -> bool:
    """The very process (same start time) still exists and is not a zombie."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return False
    return fields[19] == started and fields[0] != "Z"


def test_kbencheval_compatible_call(server):
    """KBenchEval's POST /eval: its field names in, KernelExecResult out, the full result in metadata."""
    sent = {"original_model_src": "# the official text, recommented\n" + PROBLEM, "custom_model_src": HONEST,
            "backend": "torch", "num_correct_trials": 2, "seed_num": 7, "num_perf_trials": 100,
            "measure_performance": True, "verbose": False, "preferred_device": 0}
    r = httpx.post(server.url + "/eval", json=sent, timeout=120)
    assert r.status_code == 200, r.text
    out = r.json()
    assert out["compiled"] is True and out["correctness"] is True and out["runtime"] == -1.0  # not timed on a CPU
    full = KernelResult.from_dict(out["metadata"]["kernelbench_result"])
    assert (full.level, full.problem_id) == (1, 1)  # matched to the server's own copy by hash
    wrong = httpx.post(server.url + "/eval", json={**sent, "custom_model_src": WRONG}, timeout=120).json()
    assert wrong["correctness"] is False and "WrongOutput" in wrong["metadata"]["correctness_issue"]
    bad = httpx.post(server.url + "/eval", json={"custom_model_src": HONEST}, timeout=10)
    assert bad.status_code == 400 and "original_model_src: Field required" in bad.json()["detail"]


def test_killed_evaluator_process_loses_no_request(server, client):
    """SIGKILL the evaluator process while a candidate hangs in it: the job is re-queued and judged by a new
    process, the job queued behind it is judged too, and the orphaned workers (the hung one too) are killed."""
    from kernelbench.server.device import descendants

    # The device holds problem 1's reference; the hung job (problem 1) is a reuse, its second attempt on the new
    # process is not (the key dies with the process), and the job behind it is again.
    assert client.evaluate(make_request(HONEST, level=1, problem_id=1, backend="torch", correctness_trials=2)).correct
    reuses = _reuses(server)[0]
    hung = client.submit(make_request(HANGS, level=1, problem_id=1, backend="torch", timeout_s=4))
    other = client.submit(make_request(HONEST, level=1, problem_id=1, backend="torch", correctness_trials=2))
    restarts = server.health()["devices"][0]["restarts"]
    before = client.metrics()  # the server is shared by the module: earlier tests may have counted events too
    busy = server.wait_busy()
    assert busy["job_id"] == hung.id
    time.sleep(3)  # the candidate is in its endless forward now
    tree = descendants(busy["pid"])
    assert tree
    os.kill(busy["pid"], signal.SIGKILL)
    r_hung = client.wait(hung.id, timeout_s=120, collect=False)
    assert r_hung.error.stage == Stage.TIMEOUT and "within 4 s" in r_hung.error.message  # the evaluator's verdict
    assert client.get(hung.id).attempts == 2
    assert client.wait(other.id, timeout_s=120).correct
    dev = server.health()["devices"][0]
    assert dev["restarts"] == restarts + 1 and dev["pid"] != busy["pid"]
    assert dev["reference_reuses"] - reuses == 2, (reuses, dev)
    assert not [pid for pid, started in tree.items() if _alive(pid, started)]
    after = client.metrics()
    for kind in ("requeued", "device_died"):
        name = f'kernelbench_server_events_total{{kind="{kind}"}}'
        assert _sample(after, name) - _sample(before, name) == 1, (kind, before, after)


@pytest.mark.slow
def test_wedged_evaluator_is_killed_at_the_deadline(server, client):
    """An evaluator process that stops answering (SIGSTOP stands for a wedged GPU process) is killed once the
    job's timeout and grace are over; the job gets a timeout result and the next job a fresh process."""
    restarts = server.health()["devices"][0]["restarts"]
    job = client.submit(make_request(HONEST, level=1, problem_id=1, backend="torch", timeout_s=2))
    busy = server.wait_busy()
    os.kill(busy["pid"], signal.SIGSTOP)
    started = time.monotonic()
    r = client.wait(job.id, timeout_s=60)
    assert time.monotonic() - started < 30
    assert r.error.stage == Stage.TIMEOUT and "did not finish within its timeout of 2 s" in r.error.message
    reuses = _reuses(server)[0]
    assert client.evaluate(make_request(HONEST, level=1, problem_id=1, backend="torch", correctness_trials=2)).correct
    assert _reuses(server)[0] == reuses  # the killed process's reference is gone with it
    assert server.health()["devices"][0]["restarts"] == restarts + 1
    with pytest.raises(ProcessLookupError):
        os.kill(busy["pid"], 0)  # killed, not left stopped


def test_problems_endpoint_and_the_example_rl_loop(server, client):
    listed = client.problems()
    assert listed.problem_set == "directory" and [(p.level, p.problem_id) for p in listed.problems] == [(1, 1), (1, 2)]
    one = client.problem(1, 1)
    assert one.code == PROBLEM and one.name == "1_Scaled_relu" and not one.reduced_size
    r = httpx.get(server.url + "/v1/problems/1/5")
    assert r.status_code == 404 and "no problem with id 5" in r.json()["detail"]
    example = Path(__file__).resolve().parents[1] / "examples" / "rl_loop.py"
    proc = subprocess.run([sys.executable, str(example), "--url", server.url, "--level", "1", "--problem-id", "1",
                           "--steps", "1", "--group", "3"], capture_output=True, text=True, timeout=180)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "step 0: mean reward" in proc.stdout and "correct->0.10" in proc.stdout, proc.stdout


def test_health_and_metrics(server, client):
    h = client.health()
    assert h.status == "ok" and h.problem_set == "directory" and h.max_queue == 5
    m = client.metrics()
    for needle in ("kernelbench_server_queue_depth 0", "# TYPE kernelbench_server_evaluations_per_minute gauge",
                   'kernelbench_server_evaluations_total{verdict="correct"}',
                   'kernelbench_server_evaluations_total{verdict="guard"}',
                   'kernelbench_server_evaluations_total{verdict="timeout"}',
                   'kernelbench_server_evaluations_total{verdict="correctness"}',
                   'kernelbench_server_stage_seconds_count{stage="queue_wait"}',
                   'kernelbench_server_events_total{kind="rejected_queue_full"}',
                   'kernelbench_server_device_evaluations{device="cpu"}',
                   'kernelbench_server_reference_reuses_total{device="cpu"}', "kernelbench_server_affinity_window_seconds 60"):
        assert needle in m, needle
    rate = next(float(line.split()[-1]) for line in m.splitlines()
                if line.startswith("kernelbench_server_evaluations_per_minute "))
    assert rate > 0


# ---------------------------------------------------------------------------- auth and shutdown
def test_token_is_required_beyond_loopback_and_checked(tmp_path, problems):
    def refused(*args: str) -> str:
        proc = subprocess.run([sys.executable, "-m", "kernelbench.cli.main", "serve", "--gpus", "cpu", *args],
                              capture_output=True, text=True, timeout=60,
                              env={k: v for k, v in os.environ.items() if k != "KERNELBENCH_SERVER_TOKEN"})
        assert proc.returncode == 2, proc.stderr
        return proc.stderr

    assert "needs a bearer token" in refused("--host", "0.0.0.0")
    assert "--runner modal is not yet supported" in refused("--runner", "modal")
    s = Server(tmp_path, env={"KERNELBENCH_SERVER_TOKEN": "s3cret"}, problems=problems)
    try:
        assert httpx.get(s.url + "/health").status_code == 200  # probes need no token
        for headers in ({}, {"Authorization": "Bearer wrong"}, {"Authorization": "s3cret"}):
            r = httpx.post(s.url + "/v1/jobs", json=body(), headers=headers)
            assert r.status_code == 401 and "bearer token" in r.json()["detail"]
            assert r.headers["WWW-Authenticate"] == "Bearer"
        assert httpx.get(s.url + "/metrics").status_code == 401
        # A wrong token is refused before the body is parsed: malformed JSON still gets 401.
        assert httpx.post(s.url + "/v1/jobs", content=b"{", headers={"Authorization": "Bearer no"}).status_code == 401
        with EvalClient(s.url, token="s3cret") as c:
            assert "kernelbench_server_queue_depth" in c.metrics()
            # Problems by source run their reference unconfined: refused unless the operator allows it.
            with pytest.raises(ServerError) as e:
                c.submit(make_request(HONEST, reference_source=PROBLEM, backend="torch"))
            assert e.value.status == 403 and "--allow-reference-source" in e.value.detail
        r = httpx.post(s.url + "/eval", headers={"Authorization": "Bearer s3cret"},
                       json={"original_model_src": PROBLEM.replace("N = 64", "N = 65"), "custom_model_src": HONEST})
        assert r.status_code == 403, r.text  # not one of the server's problems: a problem by source
    finally:
        assert s.stop()


@pytest.mark.slow
def test_shutdown_finishes_a_blocking_call_in_flight(tmp_path, problems):
    """SIGTERM with time to drain: the call already waiting gets its verdict; new connections are refused."""
    s = Server(tmp_path, "--drain-timeout", "30", problems=problems)
    answer: dict = {}

    def call() -> None:
        r = httpx.post(s.url + "/v1/evaluate", json=body(SLOW), timeout=120)
        answer.update(status=r.status_code, info=r.json())

    t = threading.Thread(target=call)
    t.start()
    s.wait_busy()
    s.proc.send_signal(signal.SIGTERM)
    time.sleep(0.5)
    with pytest.raises(httpx.TransportError):
        httpx.post(s.url + "/v1/jobs", json=body(), timeout=5)
    t.join(120)
    assert answer["status"] == 200 and answer["info"]["result"]["correct"] is True, answer
    assert s.stop()
    assert "0 unfinished jobs" in s.output()


@pytest.mark.slow
def test_shutdown_while_busy_saves_work_and_a_restart_finishes_it(tmp_path, problems):
    state = tmp_path / "state"
    args = ("--state-dir", str(state), "--drain-timeout", "1")
    s = Server(tmp_path, *args, problems=problems)
    with EvalClient(s.url, poll_s=0.2) as c:
        jobs = c.submit_batch([make_request(SLOW, level=1, problem_id=1, backend="torch", correctness_trials=2,
                                            sample_id=i) for i in range(2)])
        s.wait_busy()
        started = time.monotonic()
        assert s.stop()
        assert time.monotonic() - started < 30
    saved = json.loads((state / "server-state.json").read_text())
    assert {p["id"] for p in saved["pending"]} | {r["id"] for r in saved["results"]} == {j.id for j in jobs}
    assert saved["pending"], "nothing was in flight at the shutdown"
    s2 = Server(tmp_path, *args, "--result-ttl", "3", problems=problems)
    try:
        with EvalClient(s2.url, poll_s=0.2) as c:
            results = [c.wait(j.id, timeout_s=120, collect=k == 0) for k, j in enumerate(jobs)]
            assert all(isinstance(r, KernelResult) and r.correct for r in results), [r.error for r in results]
            assert not (state / "server-state.json").exists()
            # The one result nobody collected expires after --result-ttl.
            deadline = time.monotonic() + 20
            while httpx.get(f"{s2.url}/v1/jobs/{jobs[1].id}").status_code == 200 and time.monotonic() < deadline:
                time.sleep(0.5)
            assert httpx.get(f"{s2.url}/v1/jobs/{jobs[1].id}").status_code == 404
            assert 'kernelbench_server_events_total{kind="expired"} 1' in c.metrics()
    finally:
        assert s2.stop()


@pytest.mark.slow
def test_load_script_loses_nothing(tmp_path):
    """scripts/bench_server.py (the GPU load test) in its CPU form: several clients, every result back."""
    out, progress = tmp_path / "bench.json", tmp_path / "progress.json"
    script = Path(__file__).resolve().parents[1] / "scripts" / "bench_server.py"
    proc = subprocess.run([sys.executable, str(script), "--gpus", "cpu", "--level", "1", "--problem-id", "8", "12",
                           "--reduced-size", "--candidates", "reference", "--requests", "4", "--clients", "2",
                           "--group-size", "2", "--progress", str(progress), "--progress-every", "0.5",
                           "--out", str(out)], capture_output=True, text=True, timeout=300,
                          env={**os.environ, "CUDA_VISIBLE_DEVICES": ""})
    assert proc.returncode == 0, proc.stdout + proc.stderr
    report = json.loads(out.read_text())
    assert report["results"] == 4 and report["lost"] == 0 and report["evaluations_per_minute_per_device"] > 0
    assert report["verdicts"] == {"correct (reduced size)": 4}
    # --group-size 2: two consecutive requests per problem; the server's counters of reference reuses come back.
    assert report["group_size"] == 2 and [r["problem_id"] for r in report["rows"]] == [8, 8, 12, 12]
    assert report["reference_reuses"] >= 1 and report["affinity_window_s"] == 10
    assert report["stage_means_s"]["evaluation"] > 0
    done = json.loads(progress.read_text())
    assert done["state"] == "done" and done["results"] == 4 and done["lost"] == 0 and done["group_size"] == 2
    assert sorted(x.name for x in tmp_path.iterdir()) == ["bench.json", "progress.json"]  # no temp file left


def test_load_script_refuses_a_bad_group_size(tmp_path):
    script = Path(__file__).resolve().parents[1] / "scripts" / "bench_server.py"
    proc = subprocess.run([sys.executable, str(script), "--group-size", "0"], capture_output=True, text=True,
                          timeout=60)
    assert proc.returncode == 2 and "--group-size must be at least 1; got 0" in proc.stderr


def test_device_specs_and_metrics_arithmetic():
    """The pieces with no server: --gpus parsing, failure kinds, evaluations per minute on a fake clock."""
    from kernelbench.cli.serve import parse_devices
    from kernelbench.errors import KernelBenchError
    from kernelbench.server.metrics import Metrics, failure_kind

    assert parse_devices("cpu", 2) == ("cpu", "cpu")
    assert parse_devices("0,2", 1) == ("cuda:0", "cuda:2")
    for bad in ("0,0", "gpu0", "-1"):
        with pytest.raises(KernelBenchError, match="--gpus"):
            parse_devices(bad, 1)
    now = [1000.0]
    m = Metrics(clock=lambda: now[0])
    ok = KernelResult(level=1, problem_id=1, problem_name="p", backend="torch", correct=True,
                      stage_times_s={"load": 0.5})
    wrong = ok.model_copy(update={"correct": False})
    assert failure_kind(ok) is None and failure_kind(wrong) == "incorrect"
    now[0] += 30
    for r in (ok, ok, wrong):
        m.record_result(r, queue_s=1.0, eval_s=2.0)
    assert m.per_minute() == pytest.approx(6.0)  # 3 in the 30 s since start
    now[0] += 600
    assert m.per_minute() == 0.0  # outside the 5-minute window
    text = m.render({"queue_depth": 2}, {"cpu": {"evaluations": 3, "restarts": 0, "busy": 0}})
    assert 'kernelbench_server_evaluations_total{verdict="incorrect"} 1' in text
    assert 'kernelbench_server_stage_seconds_sum{stage="load"} 1.5' in text
    assert 'kernelbench_server_stage_seconds_count{stage="queue_wait"} 3' in text
    assert "kernelbench_server_queue_depth 2" in text
