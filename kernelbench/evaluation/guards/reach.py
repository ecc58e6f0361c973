"""Walking from ``ModelNew.forward`` through a :class:`~kernelbench.evaluation.guards.callgraph.Program`.

:func:`walk_from_forward` collects every function and call site ``forward`` can reach;
:class:`Summaries` answers, per reachable function, whether it launches a kernel or computes with
PyTorch (transitively).
"""

from __future__ import annotations

import ast
from dataclasses import dataclass

from kernelbench.evaluation.guards.callgraph import CallSite, FuncCtx, FuncNode, Program


@dataclass
class Reach:
    """The result of walking from ``ModelNew.forward``."""

    funcs: list[FuncNode]
    sites: list[CallSite]
    #: id(call node) -> its site, for every call inside a reachable function.
    by_call: dict[int, CallSite]

    def launched_kernels(self) -> dict[str, list[int]]:
        out: dict[str, list[int]] = {}
        for s in self.sites:
            for k in s.launches:
                out.setdefault(k, []).append(s.node.lineno)
        return out

    def ext_calls(self) -> list[CallSite]:
        return [s for s in self.sites if s.ext_fn is not None]

    def dsl_launches(self, backend: str) -> list[CallSite]:
        """Call sites that run a CuTe (``"cute"``) or TileLang (``"tilelang"``) kernel."""
        return [s for s in self.sites if s.dsl_launch is not None and s.dsl_launch.backend == backend]


def _calls_in(fn: FuncNode, skip: set[int] | frozenset[int] = frozenset()) -> list[ast.Call]:
    """Calls inside ``fn``, nested functions included, except inside the functions of ``skip`` (DSL kernels)."""
    root = fn.body if isinstance(fn, ast.Lambda) else fn
    out: list[ast.Call] = []
    stack: list[ast.AST] = [root]
    while stack:
        n = stack.pop()
        if n is not root and id(n) in skip:
            continue
        if isinstance(n, ast.Call):
            out.append(n)
        stack.extend(ast.iter_child_nodes(n))
    out.sort(key=lambda c: (c.lineno, c.col_offset))
    return out


def walk_from_forward(prog: Program) -> Reach:
    funcs: list[FuncNode] = []
    seen: set[int] = set()
    sites: list[CallSite] = []
    by_call: dict[int, CallSite] = {}
    work = list(prog.entry_points())
    while work:
        fn = work.pop()
        if id(fn) in seen or id(fn) in prog.jit_nodes or id(fn) in prog.dsl.device_nodes:
            continue
        seen.add(id(fn))
        funcs.append(fn)
        ctx = prog.ctx.get(id(fn)) or FuncCtx(fn, None, None)
        for call in _calls_in(fn, prog.dsl.device_nodes):
            if id(call) in by_call:
                continue
            inner_ctx = ctx
            site = prog.analyze_call(call, inner_ctx)
            sites.append(site)
            by_call[id(call)] = site
            work.extend(t for t in site.targets if id(t) not in seen)
    return Reach(funcs=funcs, sites=sites, by_call=by_call)


class Summaries:
    """Transitive "launches a kernel" and "computes with PyTorch" per reachable function."""

    def __init__(self, prog: Program, reach: Reach) -> None:
        self.prog = prog
        self.reach = reach
        self._launch: dict[int, bool] = {}
        self._compute: dict[int, bool] = {}

    def site_launches(self, site: CallSite) -> bool:
        return bool(site.launches) or site.ext_fn is not None or site.dsl_launch is not None or \
            any(self.launches(t) for t in site.targets)

    def site_computes(self, site: CallSite) -> bool:
        return site.compute is not None or any(self.computes(t) for t in site.targets)

    def launches(self, fn: FuncNode) -> bool:
        return self._memo(fn, self._launch, lambda s: bool(s.launches) or s.ext_fn is not None or
                          s.dsl_launch is not None, self.launches)

    def computes(self, fn: FuncNode) -> bool:
        return self._memo(fn, self._compute, lambda s: s.compute is not None, self.computes, matmul_op=True)

    def _memo(self, fn, memo, direct, recurse, matmul_op: bool = False) -> bool:
        key = id(fn)
        if key in memo:
            return memo[key]
        memo[key] = False  # cycle guard
        result = False
        for call in _calls_in(fn):
            site = self.reach.by_call.get(id(call))
            if site is None:
                continue
            if direct(site) or any(recurse(t) for t in site.targets):
                result = True
                break
        if not result and matmul_op:
            body = fn.body if isinstance(fn, ast.Lambda) else fn
            result = any(isinstance(n, ast.BinOp) and isinstance(n.op, ast.MatMult) for n in ast.walk(body))
        memo[key] = result
        return result

    def nodes_launch(self, nodes: list[ast.stmt]) -> bool:
        return any(self.site_launches(self.reach.by_call[id(n)]) for stmt in nodes for n in ast.walk(stmt)
                   if isinstance(n, ast.Call) and id(n) in self.reach.by_call)

    def nodes_compute(self, nodes: list[ast.stmt]) -> bool:
        for stmt in nodes:
            for n in ast.walk(stmt):
                if isinstance(n, ast.BinOp) and isinstance(n.op, ast.MatMult):
                    return True
                if isinstance(n, ast.Call) and id(n) in self.reach.by_call and self.site_computes(
                        self.reach.by_call[id(n)]):
                    return True
        return False
