"""Where evaluations run: the local GPUs or Modal, behind one interface."""

from kernelbench.runners.base import Runner, get_runner

__all__ = ["Runner", "get_runner"]
