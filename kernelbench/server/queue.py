"""The job queue: admission, dispatch to the devices, retries, result keeping, drain and re-queue.

Invariants, each with a test in ``tests/test_server.py``:

* A request is either refused at the door (4xx, nothing queued) or it ends with a result: an evaluator
  process that dies puts its job back at the head of the queue (up to ``max_attempts`` evaluations);
  a job that runs past its timeout gets a timeout result and its evaluator process is replaced.
* The queue is bounded: a submission that does not fit in whole is refused (429 with Retry-After).
* Results are kept until collected (DELETE) or ``result_ttl_s`` after they finish.
* Problem affinity with bounded unfairness: a free device takes the oldest waiting job of the problem its
  evaluator process last finished (that process keeps the problem's reference worker, so the job skips the
  reference's start and setup), passing over the head of the queue for at most ``affinity_window_s`` seconds
  from the first time the head was passed over; then the head goes next. 0 turns it off (plain FIFO).
* Shutdown stops admission, finishes what it can within ``drain_timeout_s`` and saves the rest (queued
  jobs, jobs stopped mid-evaluation, results not yet collected) to ``state_dir``, which the next start
  loads: a client polling the same job id across a restart gets its result.
"""

from __future__ import annotations

import json
import logging
import math
import os
import threading
import time
import uuid
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from kernelbench.evaluation.parent.session import reference_key
from kernelbench.evaluation.settings import EvalJob
from kernelbench.results import KernelResult, Stage, StageError
from kernelbench.server.config import TOKEN_ENV, ServerConfig
from kernelbench.server.device import Aborted, DeadlineExceeded, DeviceLost, DeviceProcess, crash_result
from kernelbench.server.metrics import Metrics
from kernelbench.server.models import DeviceInfo, EvalRequest, Health, JobInfo
from kernelbench.server.problems import JobBuilder, RequestError

log = logging.getLogger(__name__)

STATE_FILE = "server-state.json"
STATE_VERSION = 1


class QueueFull(Exception):
    def __init__(self, message: str, retry_after_s: int):
        super().__init__(message)
        self.retry_after_s = retry_after_s


class ShuttingDown(Exception):
    """The server is draining and admits nothing new."""


@dataclass
class JobRecord:
    id: str
    request: EvalRequest | None
    job: EvalJob | None
    timeout_s: float
    submitted_at: float
    status: str = "queued"
    attempts: int = 0
    device: str | None = None
    started_at: float | None = None
    finished_at: float | None = None
    finished_mono: float | None = None
    result: KernelResult | None = None
    done: threading.Event = field(default_factory=threading.Event)
    #: When a device first took another job while this one was at the head of the queue (monotonic seconds).
    passed_over_mono: float | None = None

    def info(self, position: int | None = None) -> JobInfo:
        return JobInfo(id=self.id, status=self.status, position=position, attempts=self.attempts, device=self.device,
                       submitted_at=self.submitted_at, started_at=self.started_at, finished_at=self.finished_at,
                       result=self.result)


@dataclass(frozen=True)
class Affinity:
    """Which waiting job a free device takes: the head of the queue, or the oldest job of the problem whose
    reference the device's evaluator process holds, while the head has not been passed over for too long.

    Why: each evaluator process keeps the reference worker of the last problem it ran, and a job of that problem
    skips the reference's start and setup (about a second on a GPU). With many clients, plain FIFO almost never
    sends a device the problem it just ran. Why the window counts from the first time the head was passed over,
    not from its submission: under load every job waits longer than a few seconds in the queue, so a window on
    the whole wait would turn affinity off exactly when the queue is long. Counted this way, affinity delays any
    one job at the head by at most ``window_s`` (plus the evaluation running when the window ends).
    """

    window_s: float

    def choose(self, waiting: Sequence[JobRecord], key: tuple | None, now: float) -> int:
        """The index in ``waiting`` (oldest first) of the job to take next; marks the head when it is passed over."""
        if self.window_s <= 0 or key is None or len(waiting) < 2:
            return 0
        head = waiting[0]
        if head.job is None or reference_key(head.job) == key:
            return 0
        if head.passed_over_mono is not None and now - head.passed_over_mono >= self.window_s:
            return 0
        for i in range(1, len(waiting)):
            job = waiting[i].job
            if job is not None and reference_key(job) == key:
                if head.passed_over_mono is None:
                    head.passed_over_mono = now
                return i
        return 0


@dataclass
class _Slot:
    """One evaluator process and what it is doing (for /health and /metrics)."""

    process: DeviceProcess
    job_id: str | None = None
    evaluations: int = 0
    stopped: bool = False
    #: The reference key (and problem) of the last job that finished normally on this process and whose reference
    #: worker its evaluator kept; None after a death, a kill, a restart, and while a job runs.
    reference: tuple | None = None
    reference_problem: str | None = None
    #: Jobs started while this process held their reference; of those, jobs taken ahead of an older job.
    reference_reuses: int = 0
    affinity_picks: int = 0


class JobQueue:
    def __init__(self, config: ServerConfig, builder: JobBuilder | None = None, metrics: Metrics | None = None):
        self.config = config
        self.builder = builder or JobBuilder(config)
        self.metrics = metrics or Metrics()
        self._jobs: dict[str, JobRecord] = {}
        self._waiting: deque[str] = deque()
        self._cv = threading.Condition()
        env = {k: v for k, v in os.environ.items() if k != TOKEN_ENV}  # the evaluator has no use for the token
        self._slots = [_Slot(DeviceProcess(d, config.sandbox, config.allow_network, env)) for d in config.devices]
        self._threads: list[threading.Thread] = []
        self.draining = False
        self._drain_deadline: float | None = None
        self._abort = threading.Event()
        self._stopped = threading.Event()
        self.affinity = Affinity(config.affinity_window_s)

    # ------------------------------------------------------------------ lifecycle
    def start(self) -> None:
        self._restore()
        for i, slot in enumerate(self._slots):
            t = threading.Thread(target=self._dispatch, args=(slot,), name=f"dispatch-{slot.process.device}-{i}",
                                 daemon=True)
            t.start()
            self._threads.append(t)
        t = threading.Thread(target=self._housekeeping, name="expire-results", daemon=True)
        t.start()
        self._threads.append(t)

    def begin_drain(self) -> None:
        """Stop admitting; the drain clock starts now (called on SIGTERM/SIGINT, before connections close)."""
        with self._cv:
            if not self.draining:
                self.draining = True
                self._drain_deadline = time.monotonic() + self.config.drain_timeout_s
                log.warning("draining: %d queued and %d running jobs get %g s to finish", len(self._waiting),
                            self._running(), self.config.drain_timeout_s)
            self._cv.notify_all()

    def shutdown(self) -> None:
        """Finish what fits in the drain time, stop the rest, save what is unfinished or uncollected."""
        self.begin_drain()
        with self._cv:
            while (self._waiting or self._running()) and time.monotonic() < (self._drain_deadline or 0):
                self._cv.wait(0.2)
        self._abort.set()
        self._stopped.set()
        with self._cv:
            self._cv.notify_all()
        for t in self._threads:
            t.join(timeout=30)
        saved = self._save()
        for slot in self._slots:
            slot.process.stop()
            slot.stopped = True
        log.warning("server stopped: %d evaluations finished; %d unfinished jobs %s", sum(s.evaluations for s in self._slots),
                    saved, f"saved to {self._state_path()}" if self._state_path() else "dropped (no --state-dir)")

    # ------------------------------------------------------------------ admission
    def submit(self, requests: list[EvalRequest]) -> list[JobRecord]:
        """Admit all of ``requests`` or none. Raises RequestError (4xx), QueueFull (429) or ShuttingDown (503)."""
        if len(requests) > self.config.max_batch:
            raise RequestError(f"a batch holds at most {self.config.max_batch} requests; got {len(requests)} "
                               "(kernelbench serve --max-batch)", status=413)
        if len(requests) > self.config.max_queue:
            raise RequestError(f"a batch of {len(requests)} can never fit in this server's queue of "
                               f"{self.config.max_queue}; send smaller batches", status=413)
        records = []
        for i, req in enumerate(requests):
            try:
                job = self.builder.build(req)
            except RequestError as e:
                if len(requests) > 1:
                    raise RequestError(f"requests[{i}]: {e}", e.status) from None
                raise
            records.append(JobRecord(id=req.id or uuid.uuid4().hex, request=req, job=job,
                                     timeout_s=self.builder.timeout_of(req), submitted_at=time.time()))
        ids = [r.id for r in records]
        if len(set(ids)) != len(ids):
            raise RequestError("the batch repeats a job id; ids must be unique", status=409)
        with self._cv:
            if self.draining:
                raise ShuttingDown("the server is shutting down and admits no new jobs; retry against its successor")
            taken = [i for i in ids if i in self._jobs]
            if taken:
                raise RequestError(f"job id {taken[0]!r} already exists on this server; choose another", status=409)
            free = self.config.max_queue - len(self._waiting)
            if len(records) > free:
                self.metrics.event("rejected_queue_full")
                retry = self.retry_after(len(records) - free)
                raise QueueFull(f"the queue is full ({len(self._waiting)} of {self.config.max_queue} places taken; "
                                f"{len(records)} requested); retry after {retry} s", retry)
            for r in records:
                self._jobs[r.id] = r
                self._waiting.append(r.id)
            self.metrics.submitted += len(records)
            self._cv.notify_all()
        return records

    def retry_after(self, places: int) -> int:
        """Seconds until about ``places`` queued jobs have started, from the recent rate (or 5 s a job)."""
        rate = self.metrics.per_minute() / 60.0
        if rate <= 0:
            rate = len(self._slots) / 5.0
        return int(min(600, max(1, math.ceil(places / rate))))

    # ------------------------------------------------------------------ reading and collecting
    def get(self, job_id: str) -> JobInfo | None:
        with self._cv:
            rec = self._jobs.get(job_id)
            if rec is None:
                return None
            pos = self._waiting.index(job_id) if rec.status == "queued" else None
            return rec.info(pos)

    def record(self, job_id: str) -> JobRecord | None:
        with self._cv:
            return self._jobs.get(job_id)

    def delete(self, job_id: str) -> JobInfo | None:
        """Collect a finished job or cancel a queued one; a running job cannot be taken back (RequestError 409)."""
        with self._cv:
            rec = self._jobs.get(job_id)
            if rec is None:
                return None
            if rec.status == "running":
                raise RequestError(f"job {job_id} is running and cannot be cancelled; delete it once it is done",
                                   status=409)
            if rec.status == "queued":
                self._waiting.remove(job_id)
                self.metrics.event("cancelled")
            del self._jobs[job_id]
            return rec.info()

    # ------------------------------------------------------------------ dispatch
    def _running(self) -> int:
        return sum(1 for s in self._slots if s.job_id is not None)

    def _take(self, slot: _Slot) -> JobRecord | None:
        with self._cv:
            while True:
                if self._abort.is_set():
                    return None
                if self._waiting:
                    # What the process holds is known only until it runs the next job: a normal finish sets it
                    # again (_finish), a death or a kill leaves it None. A process that died idle holds nothing.
                    key = slot.reference if slot.process.alive() else None
                    slot.reference = slot.reference_problem = None
                    if key is None or self.affinity.window_s <= 0:  # FIFO: nothing to look through
                        i, rec = 0, self._jobs[self._waiting[0]]
                    else:
                        waiting = [self._jobs[k] for k in self._waiting]
                        i = self.affinity.choose(waiting, key, time.monotonic())
                        rec = waiting[i]
                    del self._waiting[i]
                    if key is not None and rec.job is not None and reference_key(rec.job) == key:
                        slot.reference_reuses += 1
                        slot.affinity_picks += i > 0
                    rec.status, rec.device, rec.started_at = "running", slot.process.device, time.time()
                    rec.attempts += 1
                    slot.job_id = rec.id
                    return rec
                self._cv.wait(0.5)

    def _dispatch(self, slot: _Slot) -> None:
        from kernelbench.runners.wire import job_to_wire

        dev = slot.process
        try:  # start now, so the first request does not wait for Python, torch and the evaluator
            dev.start()
        except RuntimeError as e:
            log.error("%s (tried again with the first job)", e)
        while True:
            rec = self._take(slot)
            if rec is None:
                return
            assert rec.job is not None
            started = time.monotonic()
            normal = False  # the evaluator process answered
            try:
                result = dev.run(rec.id, job_to_wire(rec.job, 0), rec.timeout_s + self.config.kill_grace_s, self._abort,
                                 list(rec.job.problem.reduced_size or ()) or None)
                normal = True
            except Aborted:
                self._requeue(rec, slot, counted=False)
                return
            except DeadlineExceeded:
                self.metrics.event("evaluation_killed")
                result = crash_result(rec.job, "Timeout", f"the evaluation did not finish within its timeout of "
                                      f"{rec.timeout_s:g} s (+{self.config.kill_grace_s:g} s grace); its evaluator "
                                      "process was killed and started again", Stage.TIMEOUT)
            except (DeviceLost, RuntimeError) as e:
                self.metrics.event("device_died")
                log.warning("job %s: %s (attempt %d of %d)", rec.id, e, rec.attempts, self.config.max_attempts)
                if rec.attempts < self.config.max_attempts:
                    self._requeue(rec, slot, counted=True)
                    if isinstance(e, RuntimeError):  # could not even start: do not spin
                        self._abort.wait(2.0)
                    continue
                result = crash_result(rec.job, "EvaluatorDied", f"{e}; the evaluator process died on {rec.attempts} "
                                      "attempts at this job, so it is not tried again")
            self._finish(rec, slot, result, queue_s=max(0.0, (rec.started_at or 0) - rec.submitted_at),
                         eval_s=time.monotonic() - started, normal=normal)

    def _requeue(self, rec: JobRecord, slot: _Slot, counted: bool) -> None:
        with self._cv:
            if not counted:
                rec.attempts -= 1  # stopped by the shutdown, not by a failure
            rec.status, rec.device, rec.started_at = "queued", None, None
            slot.job_id = None
            if rec.id in self._jobs:
                self._waiting.appendleft(rec.id)
            if counted:
                self.metrics.event("requeued")
            self._cv.notify_all()

    def _finish(self, rec: JobRecord, slot: _Slot, result: KernelResult, queue_s: float, eval_s: float,
                normal: bool = True) -> None:
        """``normal``: the evaluator process answered; False after a kill or a death. Only then, and only if the
        process says it kept the job's reference worker, is the job's reference remembered for the slot."""
        with self._cv:
            if normal and slot.process.holds_reference and rec.job is not None:
                slot.reference = reference_key(rec.job)
                slot.reference_problem = f"level {rec.job.problem.level} problem {rec.job.problem.problem_id}"
            rec.result, rec.status = result, "done"
            rec.finished_at, rec.finished_mono = time.time(), time.monotonic()
            slot.job_id = None
            slot.evaluations += 1
            self._evict_over_limit()
            self._cv.notify_all()
        rec.done.set()
        self.metrics.record_result(result, queue_s, eval_s)

    # ------------------------------------------------------------------ expiry
    def _housekeeping(self) -> None:
        while not self._stopped.wait(1.0):
            self.expire()

    def expire(self) -> int:
        """Drop results finished more than ``result_ttl_s`` ago; returns how many went."""
        cutoff = time.monotonic() - self.config.result_ttl_s
        with self._cv:
            old = [k for k, r in self._jobs.items() if r.status == "done" and (r.finished_mono or 0) < cutoff]
            for k in old:
                del self._jobs[k]
        if old:
            self.metrics.event("expired", len(old))
            log.info("%d uncollected results expired", len(old))
        return len(old)

    def _evict_over_limit(self) -> None:
        done = [r for r in self._jobs.values() if r.status == "done"]
        extra = len(done) - self.config.max_results
        if extra > 0:
            for r in sorted(done, key=lambda r: r.finished_mono or 0)[:extra]:
                del self._jobs[r.id]
            self.metrics.event("evicted", extra)
            log.warning("%d uncollected results dropped: more than max_results=%d are kept", extra,
                        self.config.max_results)

    # ------------------------------------------------------------------ state across restarts
    def _state_path(self) -> Path | None:
        return Path(self.config.state_dir) / STATE_FILE if self.config.state_dir else None

    def _save(self) -> int:
        """Write unfinished jobs and uncollected results to the state file; returns the unfinished count."""
        with self._cv:
            pending = [self._jobs[k] for k in self._waiting if k in self._jobs]
            done = [r for r in self._jobs.values() if r.status == "done"]
        path = self._state_path()
        if path is None:
            if pending:
                log.error("%d queued jobs are dropped at shutdown: start the server with --state-dir to keep them",
                          len(pending))
            return len(pending)
        state = {"version": STATE_VERSION,
                 "pending": [{"id": r.id, "request": r.request.model_dump(mode="json"), "submitted_at": r.submitted_at,
                              "attempts": r.attempts} for r in pending if r.request is not None],
                 "results": [r.info().model_dump(mode="json") for r in done]}
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(state))
        os.replace(tmp, path)
        log.warning("saved %d unfinished jobs and %d uncollected results to %s", len(state["pending"]),
                    len(state["results"]), path)
        return len(state["pending"])

    def _restore(self) -> None:
        path = self._state_path()
        if path is None or not path.exists():
            return
        state = json.loads(path.read_text())
        if state.get("version") != STATE_VERSION:
            log.error("ignoring %s: state version %r, this server writes %d", path, state.get("version"), STATE_VERSION)
            return
        now = time.monotonic()
        for d in state.get("results", []):
            info = JobInfo.model_validate(d)
            rec = JobRecord(id=info.id, request=None, job=None, timeout_s=0, submitted_at=info.submitted_at,
                            status="done", attempts=info.attempts, device=info.device, started_at=info.started_at,
                            finished_at=info.finished_at, finished_mono=now, result=info.result)
            rec.done.set()
            self._jobs[rec.id] = rec
        for d in state.get("pending", []):
            req = EvalRequest.model_validate(d["request"])
            rec = JobRecord(id=d["id"], request=req, job=None, timeout_s=self.builder.timeout_of(req),
                            submitted_at=d["submitted_at"], attempts=int(d.get("attempts", 0)))
            try:
                rec.job = self.builder.build(req)
            except RequestError as e:  # the server restarted with another problem set or limits
                rec.status, rec.finished_at, rec.finished_mono = "done", time.time(), now
                rec.result = _refused_result(req, str(e))
                rec.done.set()
            else:
                self._waiting.append(rec.id)
            self._jobs[rec.id] = rec
        path.unlink()
        log.warning("restored %d queued jobs and %d results from %s", len(self._waiting),
                    len(state.get("results", [])), path)

    # ------------------------------------------------------------------ status
    def health(self, version: str) -> Health:
        with self._cv:
            devices = [DeviceInfo(device=s.process.device, pid=s.process.pid, job_id=s.job_id,
                                  evaluations=s.evaluations, restarts=s.process.restarts,
                                  reference=s.reference_problem if s.process.alive() else None,
                                  reference_reuses=s.reference_reuses, affinity_picks=s.affinity_picks,
                                  state="stopped" if s.stopped else "busy" if s.job_id else
                                  "idle" if s.process.alive() else "starting")
                       for s in self._slots]
            stored = sum(1 for r in self._jobs.values() if r.status == "done")
            return Health(status="draining" if self.draining else "ok", version=version,
                          problem_set=self.builder.set_name, sandbox=self.config.sandbox, queued=len(self._waiting),
                          running=self._running(), max_queue=self.config.max_queue,
                          max_batch=self.config.max_batch, stored_results=stored,
                          affinity_window_s=self.config.affinity_window_s, devices=devices)

    def prometheus(self) -> str:
        with self._cv:
            gauges = {"queue_depth": len(self._waiting), "running": self._running(),
                      "max_queue": self.config.max_queue,
                      "stored_results": sum(1 for r in self._jobs.values() if r.status == "done"),
                      "jobs_submitted": self.metrics.submitted, "draining": int(self.draining),
                      "affinity_window_seconds": self.config.affinity_window_s}
            per_device: dict[str, dict[str, float]] = {}
            for i, s in enumerate(self._slots):
                name = s.process.device if self.config.devices.count(s.process.device) == 1 else f"{s.process.device}#{i}"
                per_device[name] = {"evaluations": s.evaluations, "restarts": s.process.restarts,
                                    "busy": int(s.job_id is not None), "reference_reuses": s.reference_reuses,
                                    "affinity_picks": s.affinity_picks}
        return self.metrics.render(gauges, per_device)


def _refused_result(req: EvalRequest, message: str) -> KernelResult:
    ref = req.problem
    return KernelResult(level=ref.level if ref else 0, problem_id=ref.problem_id if ref else 0,
                        problem_name=req.reference_name if ref is None else f"level {ref.level} problem {ref.problem_id}",
                        sample_id=req.sample_id, backend=req.settings.backend, precision=req.settings.precision,
                        error=StageError.make(Stage.LOAD, "RequestRefused",
                                              f"refused after the server restarted: {message}"))
