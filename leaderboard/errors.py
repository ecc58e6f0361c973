"""Leaderboard errors: one-line messages the CLI prints as they are (exit code 2)."""

from kernelbench.errors import KernelBenchError


class SubmissionError(KernelBenchError):
    """A submission file cannot be used: unreadable, malformed or failing its schema."""


class AggregationError(KernelBenchError):
    """Inputs of the aggregation disagree (a results bundle for an unknown entry, and so on)."""


class SiteError(KernelBenchError):
    """The site cannot be built from the data folder given."""
