"""The HTTP face of the server: routes, the bearer-token and size gate, and errors that say what to fix.

Routes (``docs/server.md`` has the bodies): ``POST /v1/jobs`` and ``/v1/jobs/batch`` submit and return
202 at once; ``GET /v1/jobs/{id}`` polls; ``DELETE /v1/jobs/{id}`` collects a result or cancels a queued
job; ``POST /v1/evaluate`` and ``/v1/evaluate/batch`` block until the verdicts are in (or answer 202 with
the jobs to poll once ``wait_s`` is over); ``GET /v1/problems`` and ``/v1/problems/{level}/{id}`` (the reference source, for prompts);
``GET /health``; ``GET /metrics`` (Prometheus text); ``POST /eval``, KBenchEval's call (:mod:`.compat`).

Every refusal is a JSON ``{"detail": "..."}`` with a 4xx status: 400 bad request, 401 token, 404 unknown
job, 409 conflict, 413 too large, 429 queue full (with Retry-After), 503 shutting down.
"""

from __future__ import annotations

import asyncio
import hmac
import json
import logging
import time
from contextlib import asynccontextmanager

from fastapi import FastAPI, HTTPException, Query, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, PlainTextResponse

from kernelbench import __version__
from kernelbench.errors import KernelBenchError
from kernelbench.server import compat
from kernelbench.server.compat import KBenchEvalRequest
from kernelbench.server.config import ServerConfig
from kernelbench.server.models import (
    BatchInfo,
    BatchRequest,
    ErrorBody,
    EvalRequest,
    Health,
    JobInfo,
    ProblemInfo,
    ProblemList,
)
from kernelbench.server.problems import RequestError
from kernelbench.server.queue import JobQueue, QueueFull, ShuttingDown

log = logging.getLogger(__name__)

#: Paths anyone may call, token or not (a load balancer's probe has no token).
PUBLIC_PATHS = frozenset({"/health"})
_POLL_S = 0.05


def _error(status: int, detail: str, headers: dict[str, str] | None = None) -> JSONResponse:
    return JSONResponse(ErrorBody(detail=detail).model_dump(), status_code=status, headers=headers)


class Gate:
    """Pure ASGI middleware: the bearer token and the body size are checked before a byte of the body is parsed.

    A request with a wrong token never reaches JSON parsing; a body larger than the limit is refused by
    its Content-Length, or (chunked uploads) as soon as the bytes read pass the limit.
    """

    def __init__(self, app, token: str | None, max_bytes: int):
        self.app, self.token, self.max_bytes = app, token, max_bytes

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope.get("headers", [])}
        if self.token and scope.get("path") not in PUBLIC_PATHS:
            scheme, _, cred = headers.get("authorization", "").partition(" ")
            if scheme.lower() != "bearer" or not hmac.compare_digest(cred.strip().encode(), self.token.encode()):
                resp = _error(401, "missing or wrong bearer token: send the header 'Authorization: Bearer <token>' "
                                   "with the token the server was started with", {"WWW-Authenticate": "Bearer"})
                return await resp(scope, receive, send)
        length = headers.get("content-length")
        if length is not None and length.isdigit() and int(length) > self.max_bytes:
            return await self._too_large(scope, receive, send, int(length))
        seen = 0

        async def limited():
            nonlocal seen
            msg = await receive()
            if msg["type"] == "http.request":
                seen += len(msg.get("body", b""))
                if seen > self.max_bytes:
                    raise HTTPException(413, self._too_large_text(seen))
            return msg

        return await self.app(scope, limited, send)

    def _too_large_text(self, n: int) -> str:
        return (f"the request body is {n} bytes or more; this server accepts at most {self.max_bytes} bytes "
                "(kernelbench serve --max-request-bytes); send smaller batches")

    async def _too_large(self, scope, receive, send, n: int):
        return await _error(413, self._too_large_text(n))(scope, receive, send)


def _validation_message(exc: RequestValidationError) -> str:
    """One readable sentence from pydantic's error list: which field, what is wrong."""
    parts = []
    for err in exc.errors():
        loc = [str(x) for x in err.get("loc", ()) if x != "body"]
        kind = err.get("type", "")
        if kind == "json_invalid":
            where = f" at character {loc[0]}" if loc else ""
            reason = (err.get("ctx") or {}).get("error", "not JSON")
            parts.append(f"malformed JSON{where} ({reason}): send one JSON object")
            continue
        if not loc and kind == "missing":
            parts.append("the request body is missing: send a JSON object (Content-Type: application/json)")
            continue
        msg = str(err.get("msg", "invalid")).removeprefix("Value error, ")
        if not loc and kind in ("model_attributes_type", "dict_type", "model_type"):
            parts.append(f"the request body must be one JSON object (Content-Type: application/json): {msg}")
            continue
        if not loc:  # the model's own checks (exactly one of problem and reference_source)
            parts.append(msg)
            continue
        parts.append(f"{'.'.join(loc)}: {msg}")
    return "; ".join(parts[:10]) + (f"; and {len(parts) - 10} more" if len(parts) > 10 else "")


def create_app(config: ServerConfig, queue: JobQueue | None = None) -> FastAPI:
    """The application; the queue starts with it (lifespan) and drains and saves its state when it stops."""
    queue = queue or JobQueue(config)

    @asynccontextmanager
    async def lifespan(_app: FastAPI):
        queue.start()
        try:
            yield
        finally:
            await asyncio.to_thread(queue.shutdown)

    app = FastAPI(title="kernelbench evaluation server", version=__version__, lifespan=lifespan,
                  description="Send candidate kernels, get KernelResult verdicts (docs/server.md).")
    app.state.queue = queue
    app.add_middleware(Gate, token=config.token, max_bytes=config.max_request_bytes)

    @app.exception_handler(RequestValidationError)
    async def _bad_request(_request: Request, exc: RequestValidationError):
        return _error(400, _validation_message(exc))

    @app.exception_handler(RequestError)
    async def _refused(_request: Request, exc: RequestError):
        return _error(exc.status, str(exc))

    @app.exception_handler(QueueFull)
    async def _full(_request: Request, exc: QueueFull):
        return _error(429, str(exc), {"Retry-After": str(exc.retry_after_s)})

    @app.exception_handler(ShuttingDown)
    async def _down(_request: Request, exc: ShuttingDown):
        return _error(503, str(exc), {"Retry-After": "30"})

    def _found(job_id: str, info: JobInfo | None) -> JobInfo:
        if info is None:
            raise HTTPException(404, f"no job {job_id!r} on this server: it was never submitted, or its result was "
                                     f"collected or expired (results are kept {config.result_ttl_s:g} s)")
        return info

    def _json(model, status: int = 200) -> JSONResponse:
        return JSONResponse(model.model_dump(mode="json"), status_code=status)

    async def _wait(ids: list[str], wait_s: float | None) -> bool:
        limit = min(wait_s if wait_s is not None else config.max_wait_s, config.max_wait_s)
        deadline = time.monotonic() + limit
        records = [queue.record(i) for i in ids]
        while time.monotonic() < deadline:
            if all(r is None or r.done.is_set() for r in records):
                return True
            await asyncio.sleep(_POLL_S)
        return all(r is None or r.done.is_set() for r in records)

    def _answer(ids: list[str], done: bool, collect: bool) -> list[JobInfo]:
        infos = [_found(i, queue.get(i)) for i in ids]
        if done and collect:
            for i in ids:
                try:
                    queue.delete(i)
                except RequestError:
                    pass
        return infos

    @app.post("/v1/jobs", status_code=202, response_model=JobInfo, summary="submit one job, return at once")
    async def submit(req: EvalRequest) -> JSONResponse:
        rec = queue.submit([req])[0]
        return _json(_found(rec.id, queue.get(rec.id)), 202)

    @app.post("/v1/jobs/batch", status_code=202, response_model=BatchInfo, summary="submit jobs (all or none)")
    async def submit_batch(batch: BatchRequest) -> JSONResponse:
        recs = queue.submit(batch.requests)
        return _json(BatchInfo(jobs=[_found(r.id, queue.get(r.id)) for r in recs]), 202)

    @app.get("/v1/jobs/{job_id}", response_model=JobInfo, summary="poll a job")
    async def poll(job_id: str) -> JSONResponse:
        return _json(_found(job_id, queue.get(job_id)))

    @app.delete("/v1/jobs/{job_id}", response_model=JobInfo, summary="collect a result or cancel a queued job")
    async def collect(job_id: str) -> JSONResponse:
        return _json(_found(job_id, queue.delete(job_id)))

    @app.post("/v1/evaluate", response_model=JobInfo, summary="submit one job and wait for its result",
              responses={202: {"model": JobInfo, "description": "wait_s passed first: poll the job"}})
    async def evaluate(req: EvalRequest, wait_s: float | None = Query(default=None, gt=0),
                       collect: bool = Query(default=True)) -> JSONResponse:
        rec = queue.submit([req])[0]
        done = await _wait([rec.id], wait_s)
        return _json(_answer([rec.id], done, collect)[0], 200 if done else 202)

    @app.post("/v1/evaluate/batch", response_model=BatchInfo, summary="submit jobs and wait for all results",
              responses={202: {"model": BatchInfo, "description": "wait_s passed first: poll the jobs"}})
    async def evaluate_batch(batch: BatchRequest, wait_s: float | None = Query(default=None, gt=0),
                             collect: bool = Query(default=True)) -> JSONResponse:
        ids = [r.id for r in queue.submit(batch.requests)]
        done = await _wait(ids, wait_s)
        return _json(BatchInfo(jobs=_answer(ids, done, collect)), 200 if done else 202)

    def _problem_info(p, code: bool) -> ProblemInfo:
        from kernelbench.problems.contract import reduced_size

        return ProblemInfo(level=p.level, problem_id=p.problem_id, name=p.name, hash=p.hash,
                           reduced_size=reduced_size(p.code) is not None, code=p.code if code else None)

    @app.get("/v1/problems", response_model=ProblemList, summary="the problems this server evaluates against")
    async def problems() -> JSONResponse:
        ps = queue.builder.problems()
        return _json(ProblemList(problem_set=queue.builder.set_name, problems=[_problem_info(p, False) for p in ps]))

    @app.get("/v1/problems/{level}/{problem_id}", response_model=ProblemInfo, summary="one problem, with its source")
    async def problem(level: int, problem_id: int) -> JSONResponse:
        try:
            p = queue.builder.problems().get(level, problem_id)
        except KernelBenchError as e:
            raise HTTPException(404, f"unknown problem: {e}") from None
        return _json(_problem_info(p, True))

    @app.post("/eval", summary="KBenchEval-compatible blocking call (KernelExecResult shape)")
    async def kbencheval(req: KBenchEvalRequest) -> JSONResponse:
        """KBenchEval's ``simple_eval_server`` call, for trainers written against it (docs/server.md)."""
        rec = queue.submit([compat.to_request(req, queue.builder)])[0]
        await _wait([rec.id], None)
        info = _answer([rec.id], True, True)[0]
        return JSONResponse(compat.to_kernel_exec_result(info.result))

    @app.get("/health", response_model=Health, summary="liveness, queue and devices")
    async def health() -> JSONResponse:
        return _json(queue.health(__version__))

    @app.get("/metrics", response_class=PlainTextResponse, summary="Prometheus metrics")
    async def metrics() -> PlainTextResponse:
        return PlainTextResponse(queue.prometheus(), media_type="text/plain; version=0.0.4")

    return app


def dump_openapi(config: ServerConfig) -> str:
    """The OpenAPI schema (for docs and client generators), without starting anything."""
    return json.dumps(create_app(config, queue=JobQueue(config)).openapi(), indent=2)
