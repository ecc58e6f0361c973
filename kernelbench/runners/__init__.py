"""Where evaluations run: the local GPUs or Modal, behind one interface (:class:`~.base.Runner`).

:func:`get_runner` lives here, not in :mod:`.base`: it imports the implementations, which import the
interface from :mod:`.base`, so the interface module imports none of them.
"""

from kernelbench.runners.base import ResultCallback, Runner

__all__ = ["RUNNERS", "ResultCallback", "Runner", "get_runner"]

RUNNERS = ("local", "modal")


def get_runner(name: str = "local", gpu: str | None = None, **options) -> Runner:
    if name == "local":
        from kernelbench.runners.local import LocalRunner

        return LocalRunner(**options)
    if name == "modal":
        from kernelbench.runners.modal_runner import ModalRunner

        return ModalRunner(gpu=gpu or "H100", **options)
    from kernelbench.errors import KernelBenchError

    raise KernelBenchError(f"unknown runner {name!r} (choose from {', '.join(RUNNERS)})")
