"""Guards against reward hacking.

``static`` reads a candidate's source (never running it) and reports findings with a severity
and a line; the runtime guards live in the evaluator. :func:`analyze_source` is the entry point.
"""

from kernelbench.evaluation.guards.report import GuardReport, format_finding
from kernelbench.evaluation.guards.rules import RULES, Rule, severity_of
from kernelbench.evaluation.guards.static import (
           GUARD_BACKENDS,
           UnknownBackendError,
           analyze_source,
           detect_backend,
)

__all__ = ["GUARD_BACKENDS", "RULES", "GuardReport", "Rule", "UnknownBackendError", "analyze_source",
           "detect_backend", "format_finding", "severity_of"]
