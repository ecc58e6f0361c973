#!/usr/bin/env python
"""Load test of ``kernelbench serve``: N requests from C concurrent clients; none may be lost.

Each client thread sends blocking calls (``EvalClient.evaluate``, which waits out 429s for their
Retry-After) until N have been sent. Candidates cycle over a level's problems: the worked Triton
solution where one exists, else the reference itself as a torch candidate (``--candidates solutions``),
or always the reference (``--candidates reference``). Request i is for problem (i // G) mod P, G being
``--group-size`` (default 1): with G > 1 each run of G consecutive requests is for one problem, as an RL
loop samples a group of candidates per prompt (GRPO). Reports requests sent, results received (with
the job ids matched: "lost" must be 0), evaluations per minute overall and per device, latency
percentiles, verdicts, 429 refusals, evaluator restarts, reference reuses and affinity picks (the
server's problem affinity, ``kernelbench serve --affinity-window``) and per-stage means, from the client
side and from /metrics.

``--progress PATH`` rewrites a small JSON file every ``--progress-every`` seconds (results so far, lost,
evaluations per minute; atomically), for a run started in the background and watched from elsewhere
(``scripts/gpu_check.sh server-start`` / ``server-wait``).

On the GPU machine (starts its own server on every visible GPU, stops it at the end):

    python scripts/bench_server.py --requests 192 --clients 16 --level 2 --out docs/measurements/bench_server_H100.json

Against a running server: ``--url http://HOST:PORT`` (token from $KERNELBENCH_SERVER_TOKEN). A quick check
without a GPU: ``python scripts/bench_server.py --gpus cpu --level 1 --problem-id 8 --reduced-size
--candidates reference --requests 8 --clients 4``.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import signal
import socket
import statistics
import subprocess
import sys
import threading
import time
import uuid
from collections import Counter
from pathlib import Path

import _checkout  # noqa: F401  (this checkout first on the path)
import httpx

from kernelbench.problems import load_problems
from kernelbench.server.client import EvalClient, make_request


def identity_source(problem_code: str) -> str:
    from kernelbench.problems.contract import identity_candidate

    return identity_candidate(problem_code)


def candidates(level: int, ids: list[int] | None, mode: str) -> list[tuple[int, str, str]]:
    """(problem id, backend, source) for each problem of the level, in id order."""
    from kernelbench.solutions import list_solutions

    problems = load_problems("builtin", None, levels=[level]).select(levels=[level])
    solved = {s.problem_id: s.source for s in list_solutions("triton", level)} if mode == "solutions" else {}
    out = []
    for p in problems:
        if ids and p.problem_id not in ids:
            continue
        if p.problem_id in solved:
            out.append((p.problem_id, "triton", solved[p.problem_id]))
        else:
            out.append((p.problem_id, "torch", identity_source(p.code)))
    return out


def start_server(gpus: str, extra: list[str]) -> tuple[subprocess.Popen, str]:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.Popen([sys.executable, "-m", "kernelbench.cli.main", "serve", "--port", str(port), "--gpus", gpus,
                             *extra])
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SystemExit(f"the server exited with status {proc.returncode}")
        try:
            if httpx.get(url + "/health", timeout=2).status_code == 200:
                return proc, url
        except httpx.TransportError:
            time.sleep(0.3)
    proc.kill()
    raise SystemExit("the server did not come up within 300 s")


def wait_ready(client: EvalClient, timeout_s: float = 600) -> None:
    """Until every device's evaluator process has started (so start-up is not counted as throughput)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if all(d.state == "idle" for d in client.health().devices):
            return
        time.sleep(0.5)


def metric(text: str, name: str) -> float:
    """The sum of a Prometheus metric's samples whose line starts with ``name`` (all label values)."""
    total = 0.0
    for line in text.splitlines():
        if line.startswith(name) and not line.startswith("#"):
            total += float(line.rsplit(" ", 1)[1])
    return total


def stage_means(before: str, after: str) -> dict[str, float]:
    """Mean seconds per evaluation stage over the run, from the server's stage summaries before and after."""
    out = {}
    for stage in sorted(set(re.findall(r'^kernelbench_server_stage_seconds_count\{stage="([^"]+)"\}', after, re.M))):
        n = metric(after, f'kernelbench_server_stage_seconds_count{{stage="{stage}"}}') - metric(
            before, f'kernelbench_server_stage_seconds_count{{stage="{stage}"}}')
        total = metric(after, f'kernelbench_server_stage_seconds_sum{{stage="{stage}"}}') - metric(
            before, f'kernelbench_server_stage_seconds_sum{{stage="{stage}"}}')
        if n > 0:
            out[stage] = round(total / n, 3)
    return out


def write_json(path: Path, data: dict) -> None:
    """Write atomically (temp file, then rename): a reader never sees half a file."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(data, indent=1))
    os.replace(tmp, path)


class Progress:
    """Results so far, rewritten to a file every few seconds by a thread of its own (``--progress``)."""

    def __init__(self, path: Path | None, every_s: float, requests: int, group_size: int):
        self.path, self.every_s = path, every_s
        self.base = {"requests": requests, "group_size": group_size}
        self.state = "starting"
        self.started: float | None = None
        self.rows: list[dict] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def snapshot(self) -> dict:
        rows = list(self.rows)
        results = sum(1 for r in rows if "verdict" in r and r["sample_id"] == r["i"])
        elapsed = time.monotonic() - self.started if self.started is not None else 0.0
        return {**self.base, "state": self.state, "results": results, "lost": len(rows) - results,
                "elapsed_s": round(elapsed, 1),
                "evaluations_per_minute": round(results * 60 / elapsed, 2) if elapsed > 0 else 0.0,
                "written_at": time.strftime("%Y-%m-%dT%H:%M:%S")}

    def write(self) -> None:
        if self.path is not None:
            write_json(self.path, self.snapshot())

    def start(self) -> None:
        self.write()
        if self.path is not None:
            self._thread.start()

    def _loop(self) -> None:
        while not self._stop.wait(self.every_s):
            self.write()

    def finish(self, state: str) -> None:
        self._stop.set()
        self.state = state
        self.write()


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--url", default=None, help="a running server (default: start one)")
    p.add_argument("--gpus", default="all", help="--gpus of the server this script starts")
    p.add_argument("--server-arg", action="append", default=[], help="extra argument for the server it starts")
    p.add_argument("--requests", type=int, default=192)
    p.add_argument("--clients", type=int, default=16)
    p.add_argument("--level", type=int, default=2)
    p.add_argument("--problem-id", type=int, nargs="*", default=None)
    p.add_argument("--candidates", choices=["solutions", "reference"], default="solutions")
    p.add_argument("--group-size", type=int, default=1,
                   help="consecutive requests per problem (default 1: request i is for problem i mod P)")
    p.add_argument("--reduced-size", action="store_true")
    p.add_argument("--no-timing", action="store_true")
    p.add_argument("--out", default=None, help="write the figures as JSON")
    p.add_argument("--progress", default=None, help="rewrite this JSON file with the results so far as the run goes")
    p.add_argument("--progress-every", type=float, default=5.0, help="seconds between progress writes (default 5)")
    args = p.parse_args()
    if args.group_size < 1:
        p.error(f"--group-size must be at least 1; got {args.group_size}")
    if args.requests < 1 or args.clients < 1:
        p.error("--requests and --clients must be at least 1")
    if args.progress_every <= 0:
        p.error("--progress-every must be more than 0 seconds")

    progress = Progress(Path(args.progress) if args.progress else None, args.progress_every, args.requests,
                        args.group_size)
    progress.start()
    proc: list[subprocess.Popen] = []
    try:
        return run(args, progress, proc)
    except BaseException as e:
        progress.finish(f"failed: {type(e).__name__}: {e}")
        raise
    finally:
        if proc:  # the server this script started: SIGINT drains and stops it
            proc[0].send_signal(signal.SIGINT)
            try:
                proc[0].wait(timeout=120)
            except subprocess.TimeoutExpired:
                proc[0].kill()


def run(args: argparse.Namespace, progress: Progress, proc: list[subprocess.Popen]) -> int:
    pool = candidates(args.level, args.problem_id, args.candidates)
    if not pool:
        raise SystemExit("no problems selected")
    url = args.url
    if url is None:
        server, url = start_server(args.gpus, args.server_arg)
        proc.append(server)
    sent, lock = [0], threading.Lock()
    rows = progress.rows

    def client_loop() -> None:
        with EvalClient(url, timeout_s=120, max_wait_full_s=3600) as c:
            while True:
                with lock:
                    i = sent[0]
                    if i >= args.requests:
                        return
                    sent[0] += 1
                pid, backend, src = pool[(i // args.group_size) % len(pool)]
                job_id = f"bench-{uuid.uuid4().hex[:12]}-{i}"
                t0 = time.monotonic()
                try:
                    r = c.evaluate(make_request(src, level=args.level, problem_id=pid, backend=backend, sample_id=i,
                                                job_id=job_id, reduced_size=args.reduced_size,
                                                measure_timing=not args.no_timing))
                    row = {"i": i, "id": job_id, "problem_id": pid, "backend": backend, "latency_s": time.monotonic() - t0,
                           "verdict": r.verdict(), "sample_id": r.sample_id, "speedup": r.speedup}
                except Exception as e:  # counted as lost: the point of the test
                    row = {"i": i, "id": job_id, "problem_id": pid, "error": f"{type(e).__name__}: {e}"}
                with lock:
                    rows.append(row)

    with EvalClient(url) as c:
        wait_ready(c)
        devices = len(c.health().devices)
        before = c.metrics()
    started = time.monotonic()
    progress.started, progress.state = started, "running"
    threads = [threading.Thread(target=client_loop) for _ in range(args.clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.monotonic() - started
    with EvalClient(url) as c:
        after = c.metrics()
        health = c.health()
    ok = [r for r in rows if "verdict" in r and r["sample_id"] == r["i"]]
    lost = args.requests - len(ok)
    lat = sorted(r["latency_s"] for r in ok)
    report = {
        "requests": args.requests, "clients": args.clients, "level": args.level, "group_size": args.group_size,
        "problems": len(pool), "devices": devices,
        "device_names": [d.device for d in health.devices], "candidates": args.candidates,
        "results": len(ok), "lost": lost, "wall_s": round(wall, 2),
        "evaluations_per_minute": round(len(ok) * 60 / wall, 2),
        "evaluations_per_minute_per_device": round(len(ok) * 60 / wall / devices, 2),
        "latency_s": {"p50": round(statistics.median(lat), 2) if lat else None,
                      "p95": round(lat[int(0.95 * (len(lat) - 1))], 2) if lat else None,
                      "max": round(lat[-1], 2) if lat else None},
        "verdicts": dict(Counter(r["verdict"] for r in ok)),
        "rejected_queue_full": metric(after, 'kernelbench_server_events_total{kind="rejected_queue_full"}')
        - metric(before, 'kernelbench_server_events_total{kind="rejected_queue_full"}'),
        "evaluator_restarts": sum(d.restarts for d in health.devices),
        "affinity_window_s": health.affinity_window_s,
        "reference_reuses": int(metric(after, "kernelbench_server_reference_reuses_total")
                                - metric(before, "kernelbench_server_reference_reuses_total")),
        "affinity_picks": int(metric(after, "kernelbench_server_affinity_picks_total")
                              - metric(before, "kernelbench_server_affinity_picks_total")),
        "stage_means_s": stage_means(before, after),
        "errors": [r for r in rows if "error" in r][:10],
    }
    print(json.dumps(report, indent=2))
    if args.out:
        write_json(Path(args.out), {**report, "rows": sorted(rows, key=lambda r: r["i"])})
    progress.finish("done")
    print(f"{len(ok)}/{args.requests} results, {lost} lost; {report['evaluations_per_minute_per_device']} "
          f"evaluations/minute/device over {devices} device(s)", file=sys.stderr)
    return 0 if lost == 0 else 1


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    raise SystemExit(main())
