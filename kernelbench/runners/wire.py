"""The wire format between a client and the machines that evaluate for it: jobs, results, baseline and
hub-fetch requests as JSON-able dicts with a version number.

Not pickled objects: a deployed Modal app may run an older copy of the package, and a dict with a
version number fails loudly where a pickle would fail strangely. Used by the Modal runner and the
Modal app (``modal_app/``) on either side of a ``.map``, and by the evaluation server, whose queue
hands jobs to its device processes in the same format.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

from kernelbench.errors import KernelBenchError
from kernelbench.evaluation.settings import EvalJob, EvalSettings
from kernelbench.problems.model import Problem
from kernelbench.results import KernelResult

#: Bumped when the payload layout changes; the remote side refuses a version it does not know.
WIRE_VERSION = 1


class WireFormatError(KernelBenchError):
    """A payload from the other side of the wire has the wrong shape or version."""


def problem_to_wire(problem: Problem) -> dict[str, Any]:
    return problem.to_json()


def problem_from_wire(data: dict[str, Any]) -> Problem:
    try:
        problem = Problem.from_json(data)
    except (KeyError, TypeError, ValueError) as e:
        raise WireFormatError(f"malformed problem in payload: {e!r}") from None
    if data.get("hash") and data["hash"] != problem.hash:
        raise WireFormatError(f"problem level {problem.level} id {problem.problem_id} changed in transit (hash mismatch)")
    return problem


def settings_to_wire(settings: EvalSettings) -> dict[str, Any]:
    """The settings minus ``device``: the container picks its own GPU, whatever the client said."""
    data = settings.to_dict()
    data["device"] = None
    if settings.seed_secret is not None:
        data["seed_secret_hex"] = settings.seed_secret.hex()
    return data


def settings_from_wire(data: dict[str, Any]) -> EvalSettings:
    data = dict(data)
    secret_hex = data.pop("seed_secret_hex", None)
    known = {f.name for f in dataclasses.fields(EvalSettings)}
    unknown = sorted(set(data) - known)
    if unknown:
        raise WireFormatError(
            f"settings field(s) {', '.join(unknown)} unknown to this copy of kernelbench "
            "(the deployed Modal app is older than the client: run `modal deploy modal_app/app.py`)"
        )
    if secret_hex is not None:
        data["seed_secret"] = bytes.fromhex(secret_hex)
    try:
        return EvalSettings(**data)
    except (TypeError, ValueError) as e:
        raise WireFormatError(f"bad settings in payload: {e}") from None


def job_to_wire(job: EvalJob, index: int) -> dict[str, Any]:
    """One job as a JSON-able dict; ``index`` comes back with the result, whatever order results arrive in."""
    return {"wire_version": WIRE_VERSION, "index": index, "problem": problem_to_wire(job.problem),
            "candidate_source": job.candidate_source, "sample_id": job.sample_id,
            "settings": settings_to_wire(job.settings)}


def check_version(data: Any, what: str) -> None:
    if not isinstance(data, dict):
        raise WireFormatError(f"{what} is a {type(data).__name__}, expected a dict")
    if data.get("wire_version") != WIRE_VERSION:
        raise WireFormatError(
            f"{what} has wire version {data.get('wire_version')!r}, this copy of kernelbench speaks "
            f"{WIRE_VERSION} (redeploy with `modal deploy modal_app/app.py`)"
        )


def job_from_wire(data: dict[str, Any]) -> tuple[int, EvalJob]:
    check_version(data, "job payload")
    try:
        index = int(data["index"])
        job = EvalJob(problem=problem_from_wire(data["problem"]), candidate_source=str(data["candidate_source"]),
                      settings=settings_from_wire(data.get("settings") or {}),
                      sample_id=int(data.get("sample_id", 0)))
    except (KeyError, TypeError, ValueError) as e:
        raise WireFormatError(f"malformed job payload: {e!r}") from None
    return index, job


def result_to_wire(index: int, result: KernelResult) -> dict[str, Any]:
    return {"wire_version": WIRE_VERSION, "index": index, "result": result.model_dump(mode="json")}


def result_from_wire(data: Any) -> tuple[int, KernelResult]:
    check_version(data, "result payload")
    try:
        return int(data["index"]), KernelResult.from_dict(data["result"])
    except Exception as e:  # KeyError, pydantic ValidationError
        raise WireFormatError(f"malformed result payload: {e}") from None


def fetch_request_to_wire(models: Sequence[str]) -> dict[str, Any]:
    return {"wire_version": WIRE_VERSION, "models": sorted(set(models))}


def fetch_request_from_wire(data: Any) -> list[str]:
    check_version(data, "hub fetch payload")
    models = data.get("models")
    if not isinstance(models, list) or not all(isinstance(m, str) for m in models):
        raise WireFormatError("hub fetch payload: models must be a list of model ids")
    return models


def fetch_reply_from_wire(data: Any, asked: Sequence[str]) -> dict[str, str | None]:
    """Model id -> None (in the cache) or why not, for every model asked about."""
    from kernelbench.problems.hub import HubFetch

    check_version(data, "hub fetch reply")
    got: dict[str, str | None] = {}
    for entry in data.get("models") or []:
        try:
            fetch = HubFetch.from_dict(entry)
        except TypeError as e:
            raise WireFormatError(f"malformed hub fetch entry: {e}") from None
        got[fetch.model_id] = None if fetch.ok else (fetch.error or "not fetched")
    return {m: got.get(m, "the fetch function did not answer for this model") for m in asked}


def baseline_request_to_wire(problem: Problem, modes: Sequence[str], settings: EvalSettings,
                             index: int) -> dict[str, Any]:
    return {"wire_version": WIRE_VERSION, "index": index, "problem": problem_to_wire(problem),
            "modes": list(modes), "settings": settings_to_wire(settings)}


def baseline_request_from_wire(data: dict[str, Any]) -> tuple[int, Problem, list[str], EvalSettings]:
    check_version(data, "baseline payload")
    try:
        return (int(data["index"]), problem_from_wire(data["problem"]), [str(m) for m in data["modes"]],
                settings_from_wire(data.get("settings") or {}))
    except (KeyError, TypeError, ValueError) as e:
        raise WireFormatError(f"malformed baseline payload: {e!r}") from None
