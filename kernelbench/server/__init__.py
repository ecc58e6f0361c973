"""``kernelbench serve``: an HTTP evaluation service for RL trainers and agent loops.

The service puts candidates from many clients in one bounded queue and feeds them to one evaluator
process per device (the same :class:`~kernelbench.evaluation.parent.Evaluator` and sandbox as the
CLI), so the GPUs stay busy while clients wait or poll. Modules, one job each:

* :mod:`~kernelbench.server.config` - the server's options and the checks made before it starts;
* :mod:`~kernelbench.server.models` - the request and response bodies (the API's contract);
* :mod:`~kernelbench.server.problems` - turning a request into an :class:`EvalJob` (or a 400);
* :mod:`~kernelbench.server.device` - the evaluator process of one device and its supervisor;
* :mod:`~kernelbench.server.queue` - admission, dispatch, retries, expiry, drain and re-queue;
* :mod:`~kernelbench.server.metrics` - counters and their Prometheus text;
* :mod:`~kernelbench.server.app` - the FastAPI application (routes, limits, auth);
* :mod:`~kernelbench.server.compat` - KBenchEval's ``POST /eval`` call, translated both ways;
* :mod:`~kernelbench.server.client` - the Python client RL loops import.

The server's own dependencies (FastAPI, uvicorn, httpx) are the ``server`` extra; the client needs
httpx only.
"""
