"""The static guard: findings from the candidate's source alone, never executing it.

Used by the evaluator before a candidate runs, by ``kernelbench guard`` and by the leaderboard's
validate job (which must not run untrusted code). See :mod:`kernelbench.evaluation.guards.rules`
for the rule ids and the severity policy.
"""

from __future__ import annotations

import ast
import logging

from kernelbench.backends import UnknownBackendError, all_backends, get_backend
from kernelbench.evaluation.guards.callgraph import Program
from kernelbench.evaluation.guards.checks import NodeChecks
from kernelbench.evaluation.guards.conformity import GuardContext
from kernelbench.evaluation.guards.cuda_text import scan_cuda
from kernelbench.evaluation.guards.forward_checks import ForwardChecks
from kernelbench.evaluation.guards.names import Resolver
from kernelbench.evaluation.guards.reach import Summaries, walk_from_forward
from kernelbench.evaluation.guards.report import FindingSink, GuardReport

log = logging.getLogger(__name__)

__all__ = ["UnknownBackendError", "analyze_source"]


def analyze_source(source: str, backend: str) -> GuardReport:
    """Check one candidate source for ``backend`` (a registered backend: cuda, triton, torch...) and report
    findings; an unknown backend raises :class:`UnknownBackendError`.

    A syntax error is reported as an error finding, not raised: the report is what callers store.
    """
    spec = get_backend(backend)
    sink = FindingSink()
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError) as e:
        line = getattr(e, "lineno", None)
        msg = getattr(e, "msg", None) or str(e)
        sink.add("syntax-error", f"the source does not parse: {msg}", line)
        return GuardReport(backend=backend, findings=sink.sorted())

    resolver = Resolver(tree)
    scan = scan_cuda(tree)
    prog = Program(tree, resolver, cuda_namespaces=scan.torch_library_namespaces)
    NodeChecks(tree, resolver, sink).run()
    for tf in scan.findings:
        sink.add(tf.rule, tf.message, tf.line)

    model_new = prog.classes.get("ModelNew")
    if model_new is None:
        sink.add("no-model-new", "the source defines no class ModelNew (the class the evaluator instantiates)", None)
        return GuardReport(backend=backend, findings=sink.sorted())

    reach = walk_from_forward(prog)
    summaries = Summaries(prog, reach)
    ForwardChecks(prog, reach, summaries, resolver, sink, spec).run()
    _conformity(GuardContext(tree, resolver, prog, reach, scan), sink, backend, anchor=model_new.lineno)
    if not prog.entry_points() and spec.custom_kernels:
        log.debug("ModelNew has no forward of its own")
    report = GuardReport(backend=backend, findings=sink.sorted())
    log.debug("static guard: %s", report.summary())
    return report


def _conformity(ctx: GuardContext, sink: FindingSink, backend: str, anchor: int) -> None:
    """Every backend's conformity check, the claimed backend's first (its messages win a shared line);
    only the claimed one's is ``required`` (the others report what they find, never a missing kernel)."""
    specs = sorted(all_backends(), key=lambda s: s.name != backend)
    for spec in specs:
        check = spec.conformity_check()
        if check is not None:
            check(ctx, sink, required=spec.name == backend, anchor=anchor)
