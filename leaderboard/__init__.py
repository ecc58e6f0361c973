"""The public leaderboard: submission schema and validation, submission <-> run directories,
evaluation of a submission through a runner, aggregation into ``data/`` and the static site.

Everything here builds on ``kernelbench``; ``kernelbench`` never imports this package at import
time, so the evaluator stays usable without it. Scores come only from ``kernelbench.scoring``.
"""

from leaderboard.errors import SubmissionError

__all__ = ["SubmissionError"]
