"""The Python client of ``kernelbench serve``, for RL trainers and agent loops.

    from kernelbench.server.client import EvalClient, make_request

    client = EvalClient("http://127.0.0.1:8000")          # token: argument or $KERNELBENCH_SERVER_TOKEN
    result = client.evaluate(make_request(source, level=1, problem_id=8, backend="triton"))
    reward = result.speedup if result.correct else 0.0

Why it does more than POST: a trainer must not lose a rollout's reward to a full queue or a dropped
connection. Every job gets an id chosen here, so after a network error the client polls that id
instead of submitting twice; a 429 is waited out for its Retry-After (up to ``max_wait_full_s``).
"""

from __future__ import annotations

import os
import time
import uuid
from collections.abc import Sequence
from typing import Any

import httpx

from kernelbench.results import KernelResult
from kernelbench.server.config import TOKEN_ENV
from kernelbench.server.models import (
    BatchInfo,
    BatchRequest,
    EvalRequest,
    Health,
    JobInfo,
    ProblemInfo,
    ProblemList,
    ProblemRef,
    RequestSettings,
)


class ServerError(Exception):
    """The server refused a request; ``status`` and ``detail`` are its answer."""

    def __init__(self, status: int, detail: str, retry_after_s: float | None = None):
        super().__init__(f"{status}: {detail}")
        self.status, self.detail, self.retry_after_s = status, detail, retry_after_s


def make_request(candidate_source: str, *, level: int | None = None, problem_id: int | None = None,
                 reference_source: str | None = None, sample_id: int = 0, job_id: str | None = None,
                 **settings: Any) -> EvalRequest:
    """An :class:`EvalRequest` for a problem by level and id, or by ``reference_source``; ``settings`` are
    :class:`RequestSettings` fields (backend, precision, correctness_trials, timeout_s, reduced_size, ...)."""
    problem = ProblemRef(level=level, problem_id=problem_id) if reference_source is None else None
    return EvalRequest(candidate_source=candidate_source, problem=problem, reference_source=reference_source,
                       settings=RequestSettings(**settings), sample_id=sample_id, id=job_id)


class EvalClient:
    def __init__(self, base_url: str = "http://127.0.0.1:8000", token: str | None = None, timeout_s: float = 60.0,
                 max_wait_full_s: float = 600.0, poll_s: float = 0.5):
        token = token if token is not None else os.environ.get(TOKEN_ENV)
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        self._http = httpx.Client(base_url=base_url.rstrip("/"), headers=headers, timeout=timeout_s)
        self.max_wait_full_s, self.poll_s = max_wait_full_s, poll_s
        self._max_batch: int | None = None

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> EvalClient:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # ------------------------------------------------------------------ plumbing
    def _call(self, method: str, path: str, body: Any = None, params: dict | None = None,
              timeout_s: float | None = None) -> httpx.Response:
        """One call; a 429 is retried after its Retry-After until ``max_wait_full_s``; other 4xx/5xx raise."""
        give_up = time.monotonic() + self.max_wait_full_s
        while True:
            kwargs: dict[str, Any] = {"params": params}
            if body is not None:
                kwargs["content"] = body.model_dump_json(exclude_none=True)
                kwargs["headers"] = {"Content-Type": "application/json"}
            if timeout_s is not None:
                kwargs["timeout"] = timeout_s
            resp = self._http.request(method, path, **kwargs)
            if resp.status_code < 400:
                return resp
            try:
                detail = str(resp.json().get("detail", resp.text))
            except ValueError:
                detail = resp.text
            retry = resp.headers.get("Retry-After")
            retry_s = float(retry) if retry and retry.replace(".", "", 1).isdigit() else None
            if resp.status_code == 429 and retry_s is not None and time.monotonic() + retry_s < give_up:
                time.sleep(retry_s)
                continue
            raise ServerError(resp.status_code, detail, retry_s)

    # ------------------------------------------------------------------ the API
    def health(self) -> Health:
        return Health.model_validate(self._call("GET", "/health").json())

    def metrics(self) -> str:
        return self._call("GET", "/metrics").text

    def problems(self) -> ProblemList:
        return ProblemList.model_validate(self._call("GET", "/v1/problems").json())

    def problem(self, level: int, problem_id: int) -> ProblemInfo:
        """One problem with its reference source (what a policy's prompt is built from)."""
        return ProblemInfo.model_validate(self._call("GET", f"/v1/problems/{level}/{problem_id}").json())

    def submit(self, request: EvalRequest) -> JobInfo:
        """Queue one job and return at once (202)."""
        request = _with_id(request)
        return JobInfo.model_validate(self._call("POST", "/v1/jobs", request).json())

    def submit_batch(self, requests: Sequence[EvalRequest]) -> list[JobInfo]:
        """Queue several jobs, in batches of the server's ``max_batch``; each batch is admitted whole or not at all."""
        if self._max_batch is None:
            self._max_batch = self.health().max_batch
        out: list[JobInfo] = []
        reqs = [_with_id(r) for r in requests]
        for i in range(0, len(reqs), self._max_batch):
            batch = BatchRequest(requests=reqs[i:i + self._max_batch])
            out.extend(BatchInfo.model_validate(self._call("POST", "/v1/jobs/batch", batch).json()).jobs)
        return out

    def get(self, job_id: str) -> JobInfo:
        return JobInfo.model_validate(self._call("GET", f"/v1/jobs/{job_id}").json())

    def collect(self, job_id: str) -> JobInfo:
        """Take a finished result off the server (or cancel a queued job)."""
        return JobInfo.model_validate(self._call("DELETE", f"/v1/jobs/{job_id}").json())

    def wait(self, job_id: str, timeout_s: float | None = None, collect: bool = True) -> KernelResult:
        """Poll until the job is done; its result is then collected unless ``collect`` is False."""
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        while True:
            info = self._poll_through_errors(job_id, deadline)
            if info.status == "done" and info.result is not None:
                if collect:
                    try:
                        self.collect(job_id)
                    except ServerError as e:
                        if e.status != 404:
                            raise
                return info.result
            if deadline is not None and time.monotonic() > deadline:
                raise TimeoutError(f"job {job_id} is still {info.status} after {timeout_s:g} s")
            time.sleep(self.poll_s)

    def _poll_through_errors(self, job_id: str, deadline: float | None) -> JobInfo:
        """A poll that outlives a server restart (connection refused) until ``deadline``."""
        while True:
            try:
                return self.get(job_id)
            except httpx.TransportError:
                if deadline is not None and time.monotonic() > deadline:
                    raise
                time.sleep(max(self.poll_s, 1.0))

    def evaluate(self, request: EvalRequest, timeout_s: float | None = None) -> KernelResult:
        """Submit and wait (a blocking call); after a dropped connection it polls the same job id."""
        request = _with_id(request)
        try:
            resp = self._call("POST", "/v1/evaluate", request, params={"wait_s": timeout_s} if timeout_s else None,
                              timeout_s=(timeout_s or 3600.0) + 30.0)
        except httpx.TransportError:
            return self.wait(request.id, timeout_s)  # it may have been admitted before the connection broke
        info = JobInfo.model_validate(resp.json())
        if resp.status_code == 200 and info.result is not None:
            return info.result
        return self.wait(info.id, timeout_s)

    def evaluate_batch(self, requests: Sequence[EvalRequest], timeout_s: float | None = None) -> list[KernelResult]:
        """Submit several jobs and wait for all; results in request order."""
        infos = self.submit_batch(requests)
        return [self.wait(i.id, timeout_s) for i in infos]


def _with_id(request: EvalRequest) -> EvalRequest:
    return request if request.id else request.model_copy(update={"id": uuid.uuid4().hex})


__all__ = ["EvalClient", "ServerError", "make_request"]
