"""The server's configuration: one frozen object built by ``kernelbench serve`` (or a test) and read everywhere."""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass, field
from pathlib import Path

from kernelbench.errors import KernelBenchError

#: The environment variable holding the bearer token (a file is the other way; never a command-line value,
#: which every user of the machine can read in the process list).
TOKEN_ENV = "KERNELBENCH_SERVER_TOKEN"


class ConfigError(KernelBenchError):
    """The server cannot start as configured (the message says which option to change)."""


def is_loopback(host: str) -> bool:
    """Whether ``host`` only accepts connections from this machine (then a token is optional)."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False  # a host name: assume it resolves beyond loopback


@dataclass(frozen=True)
class ServerConfig:
    host: str = "127.0.0.1"
    port: int = 8000
    #: One evaluator process per entry: "cuda:0", "cuda:1", ... or "cpu" (several "cpu" entries run in parallel).
    devices: tuple[str, ...] = ("cpu",)
    runner: str = "local"
    #: Where problems named by level and id come from (as ``--source``/``--path`` of the CLI).
    problem_source: str = "builtin"
    problem_path: str | None = None
    sandbox: str = "auto"
    allow_network: bool = False
    #: Accept problems sent by source. Off by default: a problem's reference runs as trusted code, outside the
    #: sandbox, so only a server whose every client is trusted may take references from requests.
    allow_reference_source: bool = False
    token: str | None = field(default=None, repr=False)
    #: Jobs waiting to start; a submission that does not fit is refused with 429 and Retry-After.
    max_queue: int = 256
    max_batch: int = 64
    #: Whole request body, and each source in it.
    max_request_bytes: int = 4 * 2**20
    max_source_bytes: int = 256 * 2**10
    #: Per evaluation, from its start: the default when a request names none, and the most it may ask.
    default_timeout_s: float = 600.0
    max_timeout_s: float = 1800.0
    max_timing_budget_s: float = 10.0
    #: Seconds a killed evaluation gets beyond its timeout before the server kills its evaluator process.
    kill_grace_s: float = 10.0
    #: An evaluator process that dies this many times on one job gives up on it (a result says why).
    max_attempts: int = 3
    #: Finished results are kept this long unless collected (DELETE) first; at most max_results are kept.
    result_ttl_s: float = 3600.0
    max_results: int = 10000
    #: On shutdown: seconds to finish queued and running work; what remains is saved to state_dir.
    drain_timeout_s: float = 30.0
    state_dir: Path | None = None
    #: Blocking calls wait at most this long, then answer 202 with the job to poll.
    max_wait_s: float = 3600.0
    #: Problem affinity: a free device may take a job of the problem its evaluator process last finished ahead of
    #: the head of the queue, for at most this many seconds after the head was first passed over; 0: plain FIFO.
    affinity_window_s: float = 10.0

    def check(self) -> None:
        """Refuse configurations that would be unsafe or cannot work, before anything starts."""
        if not is_loopback(self.host) and not self.token:
            raise ConfigError(f"listening on {self.host} (beyond loopback) needs a bearer token: set {TOKEN_ENV} "
                              "or pass --token-file FILE; clients send 'Authorization: Bearer <token>'")
        if self.runner != "local":
            raise ConfigError(f"--runner {self.runner} is not yet supported by the server: it evaluates on this "
                              "machine's devices only (use --runner local; for Modal GPUs use "
                              "`kernelbench eval --runner modal`)")
        if not self.devices:
            raise ConfigError("no devices to evaluate on")
        for d in self.devices:
            if d != "cpu" and not (d.startswith("cuda:") and d[5:].isdigit()):
                raise ConfigError(f"bad device {d!r}: use cuda:N or cpu")
        for name in ("max_queue", "max_batch", "max_request_bytes", "max_source_bytes", "max_attempts", "max_results"):
            if getattr(self, name) < 1:
                raise ConfigError(f"{name.replace('_', '-')} must be at least 1")
        if self.affinity_window_s < 0:
            raise ConfigError("affinity-window must be 0 (off) or more seconds")
        if self.default_timeout_s > self.max_timeout_s:
            raise ConfigError("the default timeout exceeds the maximum timeout")
