"""Where evaluations run: the local GPUs or Modal, behind one interface (:class:`~.base.Runner`).

The runners are a registry (:class:`RunnerSpec` records): ``--runner`` choices and
:func:`get_runner` read it, and an unknown name fails as ``unknown runner 'x' (available: local, modal)``.
The registry lives here, not in :mod:`.base`: its factories import the implementations, which import
the interface from :mod:`.base`, so the interface module imports none of them.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from kernelbench.errors import KernelBenchError
from kernelbench.registry import Registry
from kernelbench.runners.base import ResultCallback, Runner

__all__ = ["REGISTRY", "ResultCallback", "Runner", "RunnerSpec", "UnknownRunnerError", "get_runner", "runner_names"]


class UnknownRunnerError(KernelBenchError, ValueError):
    """The runner named is not registered; the message lists those that are."""


@dataclass(frozen=True)
class RunnerSpec:
    """One place evaluations can run. ``make(gpu, **options)`` builds the runner; implementations are
    imported inside it, so listing runners never imports Modal."""

    name: str
    #: One line for ``--help`` and the docs.
    summary: str
    make: Callable[..., Runner]


def _local(gpu: str | None, **options: Any) -> Runner:
    from kernelbench.runners.local import LocalRunner

    return LocalRunner(**options)  # the local runner uses this machine's devices, whatever ``gpu`` says


def _modal(gpu: str | None, **options: Any) -> Runner:
    from kernelbench.runners.modal_runner import ModalRunner

    return ModalRunner(gpu=gpu or "H100", **options)


REGISTRY: Registry[RunnerSpec] = Registry("runner", UnknownRunnerError)
REGISTRY.register(RunnerSpec("local", "this machine's GPUs (or its CPU), a pool of isolated workers", _local))
REGISTRY.register(RunnerSpec("modal", "Modal cloud GPUs, one container per job (needs a Modal token)", _modal))


def runner_names() -> tuple[str, ...]:
    """Every registered runner, sorted: what ``--runner`` accepts."""
    return REGISTRY.names()


def get_runner(name: str = "local", gpu: str | None = None, **options: Any) -> Runner:
    """A runner by name; ``gpu`` is the GPU type for remote runners, ``options`` go to its constructor."""
    return REGISTRY.get(name).make(gpu, **options)
