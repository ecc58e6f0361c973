"""The static guard: findings from the candidate's source alone, never executing it.

Used by the evaluator before a candidate runs, by ``kernelbench guard`` and by the leaderboard's
validate job (which must not run untrusted code). See :mod:`kernelbench.evaluation.guards.rules`
for the rule ids and the severity policy.
"""

from __future__ import annotations

import ast
import logging

from kernelbench.errors import KernelBenchError
from kernelbench.evaluation.guards.callgraph import Program
from kernelbench.evaluation.guards.checks import NodeChecks
from kernelbench.evaluation.guards.conformity import check_cuda, check_triton
from kernelbench.evaluation.guards.cuda_text import scan_cuda
from kernelbench.evaluation.guards.forward_checks import ForwardChecks
from kernelbench.evaluation.guards.names import Resolver
from kernelbench.evaluation.guards.reach import Summaries, walk_from_forward
from kernelbench.evaluation.guards.report import FindingSink, GuardReport

log = logging.getLogger(__name__)

GUARD_BACKENDS = ("cuda", "triton", "torch")


class UnknownBackendError(KernelBenchError, ValueError):
    """The backend named is not one the guard knows."""


def detect_backend(source: str) -> str:
    """Best guess of a candidate's backend: triton if it defines a jit kernel, else cuda.

    A source with no kernel at all is reported as cuda, the evaluator's default, which then
    fails conformity: a candidate with no custom kernel fails whichever backend it claims.
    """
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return "cuda"
    r = Resolver(tree)
    prog = Program(tree, r)
    if prog.jit:
        return "triton"
    return "cuda"


def analyze_source(source: str, backend: str) -> GuardReport:
    """Check one candidate source for ``backend`` (cuda, triton or torch) and report findings.

    A syntax error is reported as an error finding, not raised: the report is what callers store.
    """
    if backend not in GUARD_BACKENDS:
        raise UnknownBackendError(f"unknown backend {backend!r} (choose from {', '.join(GUARD_BACKENDS)})")
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
    ForwardChecks(prog, reach, summaries, resolver, sink, backend).run()
    anchor = model_new.lineno
    check_triton(prog, reach, sink, required=backend == "triton", anchor=anchor)
    check_cuda(prog, reach, scan, sink, required=backend == "cuda", anchor=anchor)
    if not prog.entry_points() and backend != "torch":
        log.debug("ModelNew has no forward of its own")
    report = GuardReport(backend=backend, findings=sink.sorted())
    log.debug("static guard: %s", report.summary())
    return report
