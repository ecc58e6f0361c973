"""``kernelbench serve``: the evaluation server for RL trainers and agent loops (docs/server.md)."""

from __future__ import annotations

import argparse
import logging
import os
from pathlib import Path

from kernelbench.cli.common import add_source_args, non_negative_float, positive_int

log = logging.getLogger(__name__)


def register(sub: argparse._SubParsersAction) -> None:
    from kernelbench.runners import runner_names

    p = sub.add_parser(
        "serve", help="run the HTTP evaluation server (RL and agent loops)",
        description="Accept evaluation requests over HTTP, queue them over this machine's GPUs (or its CPU) with "
                    "the same evaluator and sandbox as `kernelbench eval`, and return KernelResult JSON. "
                    "Needs the server extra: pip install 'kernelbench[server]'. API: docs/server.md.",
    )
    p.add_argument("--host", default="127.0.0.1",
                   help="address to listen on (default 127.0.0.1); beyond loopback a bearer token is required")
    p.add_argument("--port", type=int, default=8000, help="port (default 8000)")
    p.add_argument("--gpus", default="all",
                   help="devices to evaluate on: all (every visible GPU, else the CPU), a list of GPU indices "
                        "such as 0,1,3, or cpu (default all)")
    p.add_argument("--cpu-workers", type=positive_int, default=1,
                   help="evaluator processes when evaluating on the CPU (default 1)")
    p.add_argument("--runner", choices=runner_names(), default="local",
                   help="local: this machine's devices (modal is not yet supported by the server)")
    p.add_argument("--token-file", default=None,
                   help=f"file holding the bearer token (else ${'KERNELBENCH_SERVER_TOKEN'}); required beyond loopback")
    lim = p.add_argument_group("limits")
    lim.add_argument("--max-queue", type=positive_int, default=256,
                     help="jobs waiting to start; beyond it submissions get 429 with Retry-After (default 256)")
    lim.add_argument("--max-batch", type=positive_int, default=64, help="requests per batch (default 64)")
    lim.add_argument("--max-request-bytes", type=positive_int, default=4 * 2**20,
                     help="request body size (default 4 MiB)")
    lim.add_argument("--max-source-bytes", type=positive_int, default=256 * 2**10,
                     help="size of each source in a request (default 256 KiB)")
    lim.add_argument("--timeout", type=non_negative_float, default=600.0,
                     help="seconds an evaluation may run when the request names no timeout_s (default 600)")
    lim.add_argument("--max-timeout", type=non_negative_float, default=1800.0,
                     help="the most timeout_s a request may ask for (default 1800)")
    lim.add_argument("--kill-grace", type=non_negative_float, default=10.0,
                     help="seconds past its timeout before an evaluation's evaluator process is killed (default 10)")
    lim.add_argument("--result-ttl", type=non_negative_float, default=3600.0,
                     help="seconds an uncollected result is kept (default 3600)")
    lim.add_argument("--drain-timeout", type=non_negative_float, default=30.0,
                     help="on SIGTERM/SIGINT, seconds to finish work before stopping (default 30)")
    lim.add_argument("--affinity-window", type=non_negative_float, default=10.0,
                     help="seconds a free GPU may keep taking jobs of the problem it just ran (its reference worker "
                          "is kept) ahead of the head of the queue, counted from the head's first pass-over; "
                          "0 is plain FIFO (default 10)")
    lim.add_argument("--state-dir", default=None,
                     help="save unfinished jobs and uncollected results here at shutdown, and load them at start")
    add_source_args(p)
    s = p.add_argument_group("isolation of candidate code (docs/threat-model.md)")
    x = s.add_mutually_exclusive_group()
    x.add_argument("--require-sandbox", dest="sandbox", action="store_const", const="require",
                   help="refuse to start unless candidates run in the OS sandbox (bubblewrap)")
    x.add_argument("--no-sandbox", dest="sandbox", action="store_const", const="off",
                   help="process isolation only: candidate code can read what this user can read")
    s.add_argument("--allow-network", action="store_true", help="let sandboxed candidates reach the network")
    s.add_argument("--allow-reference-source", action="store_true",
                   help="accept problems sent by source (reference_source); their reference runs as trusted code "
                        "outside the sandbox, so allow it only when every client is trusted")
    p.set_defaults(sandbox="auto", func=run)


def parse_devices(spec: str, cpu_workers: int) -> tuple[str, ...]:
    """``--gpus`` to device names: every evaluator process gets one entry."""
    from kernelbench.errors import KernelBenchError

    spec = spec.strip().lower()
    if spec == "cpu":
        return ("cpu",) * cpu_workers
    if spec == "all":
        from kernelbench.evaluation.parent import visible_devices

        found = visible_devices()
        return tuple(found) if found != ["cpu"] else ("cpu",) * cpu_workers
    try:
        ids = [int(x) for x in spec.split(",") if x.strip()]
    except ValueError:
        raise KernelBenchError(f"--gpus {spec!r}: expected all, cpu or GPU indices such as 0,1") from None
    if not ids or len(set(ids)) != len(ids) or min(ids) < 0:
        raise KernelBenchError(f"--gpus {spec!r}: expected distinct GPU indices such as 0,1")
    return tuple(f"cuda:{i}" for i in ids)


def read_token(token_file: str | None) -> str | None:
    from kernelbench.errors import KernelBenchError
    from kernelbench.server.config import TOKEN_ENV

    if token_file:
        try:
            token = Path(token_file).read_text().strip()
        except OSError as e:
            raise KernelBenchError(f"--token-file {token_file}: {e.strerror}") from None
        if not token:
            raise KernelBenchError(f"--token-file {token_file} is empty")
        return token
    return os.environ.get(TOKEN_ENV) or None


def run(args: argparse.Namespace) -> int:
    from kernelbench.errors import KernelBenchError

    try:
        import uvicorn

        from kernelbench.server.app import create_app
    except ImportError as e:
        raise KernelBenchError(f"the server needs its extra ({e.name} is missing): "
                               "pip install 'kernelbench[server]'") from None
    from kernelbench.server.config import ServerConfig
    from kernelbench.server.queue import JobQueue

    config = ServerConfig(
        host=args.host, port=args.port, devices=parse_devices(args.gpus, args.cpu_workers), runner=args.runner,
        problem_source=args.source, problem_path=args.path, sandbox=args.sandbox, allow_network=args.allow_network,
        allow_reference_source=args.allow_reference_source,
        token=read_token(args.token_file), max_queue=args.max_queue, max_batch=args.max_batch,
        max_request_bytes=args.max_request_bytes, max_source_bytes=args.max_source_bytes,
        default_timeout_s=args.timeout, max_timeout_s=args.max_timeout, result_ttl_s=args.result_ttl, kill_grace_s=args.kill_grace,
        drain_timeout_s=args.drain_timeout, affinity_window_s=args.affinity_window,
        state_dir=Path(args.state_dir) if args.state_dir else None,
    )
    config.check()
    if config.sandbox == "require":
        from kernelbench.evaluation.parent import confinement_for

        confinement_for("require", any(d.startswith("cuda") for d in config.devices), config.allow_network)
    queue = JobQueue(config)
    try:
        queue.builder.problems()  # a bad --source/--path stops the server now, not on the first request
    except KernelBenchError as e:
        raise KernelBenchError(f"cannot load the problem set: {e}") from None
    app = create_app(config, queue)

    class Server(uvicorn.Server):
        """Stops admitting new jobs the moment a stop signal arrives, before uvicorn closes connections."""

        def handle_exit(self, sig, frame) -> None:
            queue.begin_drain()
            super().handle_exit(sig, frame)

    server = Server(uvicorn.Config(app, host=config.host, port=config.port, log_level="warning",
                                   timeout_graceful_shutdown=max(1, int(config.drain_timeout_s))))
    # The one line a human or a script waits for; logging keeps it off stdout for piped use.
    logging.getLogger("kernelbench").warning(
        "kernelbench serve: http://%s:%d on %s, problem set %s, sandbox %s%s", config.host, config.port,
        ", ".join(config.devices), config.problem_source, config.sandbox, ", token required" if config.token else "")
    try:
        server.run()
    except KeyboardInterrupt:  # uvicorn re-raises Ctrl-C once its shutdown (and our drain) is done
        pass
    return 0
