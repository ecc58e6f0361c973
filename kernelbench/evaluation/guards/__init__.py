"""Guards against reward hacking.

``static`` reads a candidate's source (never running it) and reports findings with a severity
and a line; the runtime guards live in the evaluator. :func:`analyze_source` is the entry point.
What each backend requires (its conformity check, its kernel names) is named by its spec in
:mod:`kernelbench.backends`, which also holds the one :func:`detect_backend`.
"""

from kernelbench.backends import UnknownBackendError, detect_backend
from kernelbench.evaluation.guards.report import GuardReport, format_finding
from kernelbench.evaluation.guards.rules import RULES, Rule, severity_of
from kernelbench.evaluation.guards.static import analyze_source

__all__ = ["RULES", "GuardReport", "Rule", "UnknownBackendError", "analyze_source", "detect_backend",
           "format_finding", "severity_of"]
