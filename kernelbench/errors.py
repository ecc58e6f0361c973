"""Errors the library raises for bad input.

Each carries a one-line message that names the offending thing, so the CLI can print it as is
and exit non-zero without a traceback.
"""


class KernelBenchError(Exception):
    """Base class: the message is meant for the user, on one line."""


class ProblemNotFoundError(KernelBenchError):
    pass


class ProblemFormatError(KernelBenchError):
    pass


class SourceError(KernelBenchError):
    """A problem source (directory, dataset) cannot be read."""


class BaselineError(KernelBenchError):
    pass


class RunDirectoryError(KernelBenchError):
    pass


class DispatchDeclined(KernelBenchError):
    """Nothing (more) was sent to a paid runner: a dry run, a declined confirmation, or the cost cap.

    ``dry_run`` tells a CLI to exit 0: showing the estimate was what the user asked for.
    """

    def __init__(self, message: str, dry_run: bool = False):
        super().__init__(message)
        self.dry_run = dry_run
