"""The server's counters and their Prometheus text exposition (format 0.0.4, written here: it is a few lines).

What an operator of an RL loop needs to see: is the queue backing up (queue depth, Retry-After given),
how fast are verdicts coming (evaluations per minute), where does the time go (per-stage seconds), and
what fails (failures by kind: the evaluator's stages for candidates, and the server's own events).
"""

from __future__ import annotations

import threading
import time
from collections import Counter, deque

from kernelbench.results import KernelResult

#: Evaluations per minute are counted over this window (or the uptime, when shorter).
RATE_WINDOW_S = 300.0


def failure_kind(result: KernelResult) -> str | None:
    """The kind a failed result is counted under: the stage it stopped at, or ``incorrect``; None if correct."""
    if result.correct:
        return None
    return result.error.stage.value if result.error is not None else "incorrect"


class Metrics:
    def __init__(self, clock=time.monotonic):
        self._clock = clock
        self._lock = threading.Lock()
        self.started = clock()
        self._finished: deque[float] = deque()
        self.results = Counter()  # verdict -> count (correct, incorrect, compile, timeout, ...)
        self.events = Counter()  # server events: requeued, device_died, device_killed, rejected_queue_full, ...
        self.stage_sum: Counter = Counter()
        self.stage_count: Counter = Counter()
        self.submitted = 0

    def record_result(self, result: KernelResult, queue_s: float, eval_s: float) -> None:
        with self._lock:
            now = self._clock()
            self._finished.append(now)
            self._trim(now)
            self.results[failure_kind(result) or "correct"] += 1
            for stage, secs in {**result.stage_times_s, "queue_wait": queue_s, "evaluation": eval_s}.items():
                self.stage_sum[stage] += float(secs)
                self.stage_count[stage] += 1

    def event(self, kind: str, n: int = 1) -> None:
        with self._lock:
            self.events[kind] += n

    def _trim(self, now: float) -> None:
        while self._finished and self._finished[0] < now - RATE_WINDOW_S:
            self._finished.popleft()

    def per_minute(self) -> float:
        """Evaluations finished per minute over the last five minutes (or since start)."""
        with self._lock:
            now = self._clock()
            self._trim(now)
            window = min(RATE_WINDOW_S, max(now - self.started, 1.0))
            return len(self._finished) * 60.0 / window

    def render(self, gauges: dict[str, float], device_gauges: dict[str, dict[str, float]]) -> str:
        """Prometheus text: ``gauges`` from the queue (depth, running...), per device ``device_gauges``."""
        lines: list[str] = []

        def metric(name: str, kind: str, help_: str, samples: list[tuple[dict[str, str], float]]) -> None:
            lines.append(f"# HELP {name} {help_}")
            lines.append(f"# TYPE {name} {kind}")
            for labels, value in samples:
                lab = ",".join(f'{k}="{_escape(v)}"' for k, v in labels.items())
                lines.append(f"{name}{{{lab}}} {value:g}" if lab else f"{name} {value:g}")

        for name, value in gauges.items():
            metric(f"kernelbench_server_{name}", "gauge", name.replace("_", " "), [({}, value)])
        metric("kernelbench_server_evaluations_per_minute", "gauge",
               "evaluations finished per minute over the last 5 minutes", [({}, self.per_minute())])
        with self._lock:
            metric("kernelbench_server_evaluations_total", "counter", "evaluations finished, by verdict or failure kind",
                   [({"verdict": k}, v) for k, v in sorted(self.results.items())])
            metric("kernelbench_server_events_total", "counter",
                   "server events: rejected (queue full), requeued, evaluator process died or killed, expired",
                   [({"kind": k}, v) for k, v in sorted(self.events.items())])
            lines.append("# HELP kernelbench_server_stage_seconds seconds per evaluation stage "
                         "(queue_wait and evaluation are the server's own)")
            lines.append("# TYPE kernelbench_server_stage_seconds summary")
            for k in sorted(self.stage_sum):
                lines.append(f'kernelbench_server_stage_seconds_sum{{stage="{_escape(k)}"}} {self.stage_sum[k]:g}')
                lines.append(f'kernelbench_server_stage_seconds_count{{stage="{_escape(k)}"}} {self.stage_count[k]}')
        for name, help_ in (("evaluations", "evaluations finished by this device"),
                            ("restarts", "times this device's evaluator process was started again"),
                            ("busy", "1 while this device evaluates")):
            metric(f"kernelbench_server_device_{name}", "counter" if name != "busy" else "gauge", help_,
                   [({"device": d}, g[name]) for d, g in device_gauges.items()])
        for name, help_ in (("reference_reuses", "jobs started on an evaluator process that held their problem's "
                             "reference worker (no reference start or setup)"),
                            ("affinity_picks", "of those, jobs taken ahead of an older waiting job (--affinity-window)")):
            metric(f"kernelbench_server_{name}_total", "counter", help_,
                   [({"device": d}, g.get(name, 0)) for d, g in device_gauges.items()])
        return "\n".join(lines) + "\n"


def _escape(v: str) -> str:
    return str(v).replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
