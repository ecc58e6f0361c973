"""The worker process: runs the reference (trusted code) or one candidate (untrusted code).

Started by :mod:`kernelbench.evaluation.sandbox` as ``python -m kernelbench.evaluation.worker``.
It answers commands from the parent over its own channel (never stdout), in the messages of
:mod:`kernelbench.evaluation.protocol`. Roles:

* ``reference``: builds ``Model``, produces reference outputs for given seeds, compares a
  candidate's outputs (received by IPC handle or bytes) with them, times the reference.
* ``candidate``: imports the candidate, builds ``ModelNew``, runs it on inputs it generates
  from seeds it receives one trial at a time, exports its outputs, times itself.
* ``compile``: only imports the candidate, so its CUDA extensions land in the build cache.

Everything timing relies on is bound at import (:mod:`.bound`), before any candidate code runs.
Modules: :mod:`.process` (the worker's state, its shared commands, the command loop), :mod:`.timing`,
:mod:`.export` and :mod:`.trace` (the timing, output export and launch-trace commands).
"""

from kernelbench.evaluation.worker.export import ExportArena
from kernelbench.evaluation.worker.process import (
    COMPILER_MODULES,
    GRAPH_REPLAY_MODES,
    PRELOAD_COMPILER_ENV,
    Worker,
    main,
    serve,
)

__all__ = ["COMPILER_MODULES", "GRAPH_REPLAY_MODES", "PRELOAD_COMPILER_ENV", "ExportArena", "Worker", "main", "serve"]
