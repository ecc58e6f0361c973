"""Rules about what ``ModelNew.forward`` and the code it reaches do with its inputs and state."""

from __future__ import annotations

import ast
from typing import TYPE_CHECKING

from kernelbench.evaluation.guards.callgraph import FuncNode, Program
from kernelbench.evaluation.guards.names import Resolver, matches
from kernelbench.evaluation.guards.reach import Reach, Summaries
from kernelbench.evaluation.guards.report import FindingSink

if TYPE_CHECKING:
    from kernelbench.backends import BackendSpec

_CLOCKS = frozenset({"time.time", "time.time_ns", "time.perf_counter", "time.perf_counter_ns", "time.monotonic",
                     "time.monotonic_ns", "time.process_time", "time.process_time_ns", "time.thread_time",
                     "time.thread_time_ns", "datetime.datetime.now", "datetime.datetime.utcnow",
                     "timeit.default_timer"})
_VIEW_METHODS = frozenset({"view", "view_as", "reshape", "reshape_as", "detach", "expand", "expand_as", "squeeze",
                           "unsqueeze", "flatten", "t", "transpose", "permute", "as_strided", "narrow", "contiguous",
                           "requires_grad_", "unflatten", "movedim", "T", "mT"})
_EMPTY_ALLOCS = frozenset({"torch.empty", "torch.empty_like", "torch.empty_strided", "torch.Tensor",
                           "torch.FloatTensor", "torch.cuda.FloatTensor"})
_CONTAINER_MUTATORS = frozenset({"append", "extend", "insert", "update", "setdefault", "add", "__setitem__",
                                 "pop", "popitem", "clear", "appendleft"})
_NOT_INPLACE = frozenset({"requires_grad_", "share_memory_"})


def _body_nodes(fn: FuncNode, nested: bool = True, skip: set[int] | frozenset[int] = frozenset()) -> list[ast.AST]:
    """Nodes of a function; without ``nested``, nested functions and lambdas are left out; the functions of
    ``skip`` (CuTe and TileLang kernels, which hold device code) always are."""
    root = fn.body if isinstance(fn, ast.Lambda) else fn
    if nested and not skip:
        return list(ast.walk(root))
    out: list[ast.AST] = []
    stack = list(ast.iter_child_nodes(root)) if not isinstance(fn, ast.Lambda) else [root]
    while stack:
        n = stack.pop()
        if id(n) in skip:
            continue
        out.append(n)
        if nested or not isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)):
            stack.extend(ast.iter_child_nodes(n))
    return out


def _params(fn: FuncNode) -> list[str]:
    a = fn.args
    names = [x.arg for x in a.posonlyargs + a.args + a.kwonlyargs]
    if a.vararg:
        names.append(a.vararg.arg)
    return names


def _chain_root(e: ast.expr) -> ast.expr:
    while isinstance(e, (ast.Attribute, ast.Subscript)):
        e = e.value
    return e


def _names_in(e: ast.AST) -> set[str]:
    return {n.id for n in ast.walk(e) if isinstance(n, ast.Name)}


class ForwardChecks:
    def __init__(self, prog: Program, reach: Reach, summaries: Summaries, resolver: Resolver, sink: FindingSink,
                 backend: BackendSpec) -> None:
        self.prog = prog
        self.reach = reach
        self.sum = summaries
        self.r = resolver
        self.sink = sink
        self.backend = backend

    def _nodes(self, fn: FuncNode, nested: bool = True) -> list[ast.AST]:
        return _body_nodes(fn, nested, self.prog.dsl.device_nodes)

    def run(self) -> None:
        for fn in self.reach.funcs:
            self._torch_compute(fn)
            self._try_fallback(fn)
            self._stateful(fn)
            self._clock(fn)
            self._uninitialised_output(fn)
        for fn in self.prog.entry_points():
            if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
                self._inputs(fn)
        self._swallowed_errors()

    def _torch_compute(self, fn: FuncNode) -> None:
        if not self.backend.custom_kernels:  # plain PyTorch: computing with torch is the point
            return
        for n in self._nodes(fn):
            if isinstance(n, ast.Call):
                site = self.reach.by_call.get(id(n))
                if site is not None and site.compute:
                    self.sink.add("torch-compute", f"forward computes with PyTorch: {site.compute}", n.lineno)
            elif isinstance(n, ast.BinOp) and isinstance(n.op, ast.MatMult):
                self.sink.add("torch-compute", "forward computes with PyTorch: the @ operator", n.lineno)

    def _try_fallback(self, fn: FuncNode) -> None:
        for n in self._nodes(fn):
            if not isinstance(n, ast.Try) and not (hasattr(ast, "TryStar") and isinstance(n, ast.TryStar)):
                continue
            if not self.sum.nodes_launch(n.body):
                continue
            for h in n.handlers:
                if self.sum.nodes_compute(h.body):
                    self.sink.add("try-fallback", f"the kernel launch is wrapped in try/except and the handler "
                                                  f"(line {h.lineno}) computes with PyTorch instead", n.lineno)
                    break

    def _swallowed_errors(self) -> None:
        for n in ast.walk(self.prog.tree):
            if not isinstance(n, ast.Try):
                continue
            builds = any(isinstance(c, ast.Call) and self.r.resolve(c.func) in (
                "torch.utils.cpp_extension.load_inline", "torch.utils.cpp_extension.load")
                for stmt in n.body for c in ast.walk(stmt))
            launches = self.sum.nodes_launch(n.body)
            if not (builds or launches):
                continue
            for h in n.handlers:
                reraises = any(isinstance(x, ast.Raise) for stmt in h.body for x in ast.walk(stmt))
                if reraises:
                    continue
                if launches and self.sum.nodes_compute(h.body):
                    continue  # reported as try-fallback
                what = "kernel build" if builds else "kernel launch"
                self.sink.add("swallowed-kernel-error", f"a failing {what} is caught (line {h.lineno}) and not "
                                                        "re-raised: the candidate may silently run something else",
                              n.lineno)
                break

    def _stateful(self, fn: FuncNode) -> None:
        if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)) and fn.name in ("__init__", "__new__",
                                                                                   "__post_init__"):
            return  # constructors initialise a fresh object; that is not state carried across calls
        ctx = self.prog.ctx.get(id(fn))
        self_name = ctx.self_name if ctx else None
        params = set(_params(fn)) if not isinstance(fn, ast.Lambda) else set()
        local_assigned = {t.id for n in self._nodes(fn) if isinstance(n, (ast.Assign, ast.AugAssign, ast.AnnAssign,
                                                                           ast.For, ast.With))
                          for t in ast.walk(n) if isinstance(t, ast.Name) and isinstance(t.ctx, ast.Store)}
        globals_declared = {name for n in self._nodes(fn) if isinstance(n, (ast.Global, ast.Nonlocal))
                            for name in n.names}
        module_names = set(self.prog.name_values) | globals_declared

        def is_state(target: ast.expr) -> str | None:
            root = _chain_root(target)
            if not isinstance(root, ast.Name):
                return None
            if self_name is not None and root.id == self_name and target is not root:
                return ast.unparse(target)
            if root.id in globals_declared:
                return root.id
            if target is not root and root.id in module_names and root.id not in params \
                    and root.id not in local_assigned:
                return ast.unparse(target)
            return None

        for n in self._nodes(fn):
            if isinstance(n, (ast.Assign, ast.AugAssign, ast.AnnAssign)):
                targets = n.targets if isinstance(n, ast.Assign) else [n.target]
                if n.value is not None and (self.prog.is_ext(n.value) or self.prog.kernel_name(n.value)
                                            or self.prog.is_dsl_handle(n.value)):
                    continue  # building the extension (or compiling a kernel) lazily is not state that changes results
                for t in targets:
                    what = is_state(t)
                    if what:
                        self.sink.add("stateful-forward", f"forward assigns {what}: state kept across calls can "
                                                          "change results between warm-up, checks and timing",
                                      n.lineno)
                        break
            elif isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr in _CONTAINER_MUTATORS \
                    and not any(self.prog.is_dsl_handle(a) for a in n.args):
                what = is_state(ast.Subscript(value=n.func.value, slice=ast.Constant(0))) if isinstance(
                    _chain_root(n.func.value), ast.Name) else None
                if what:
                    self.sink.add("stateful-forward", f"forward mutates {ast.unparse(n.func.value)} "
                                                      f"(.{n.func.attr}): state kept across calls", n.lineno)

    def _clock(self, fn: FuncNode) -> None:
        for n in self._nodes(fn):
            if isinstance(n, ast.Call):
                path = self.r.resolve(n.func)
                if path in _CLOCKS or (isinstance(n.func, ast.Attribute) and n.func.attr == "elapsed_time"):
                    self.sink.add("clock-read", f"forward reads a clock ({path or 'elapsed_time'})", n.lineno)

    def _uninitialised_output(self, fn: FuncNode) -> None:
        if isinstance(fn, ast.Lambda):
            return
        nodes = self._nodes(fn, nested=False)
        empties: dict[str, int] = {}
        for n in nodes:
            if isinstance(n, ast.Assign) and len(n.targets) == 1 and isinstance(n.targets[0], ast.Name) \
                    and self._is_empty_alloc(n.value):
                empties[n.targets[0].id] = n.lineno
        returns = [n for n in nodes if isinstance(n, ast.Return) and n.value is not None]
        return_names = set()
        for ret in returns:
            if self._is_empty_alloc(ret.value):
                self.sink.add("uninitialised-output", "returns a new torch.empty tensor that nothing writes: its "
                                                      "contents are whatever memory held before", ret.lineno)
            for e in (ret.value.elts if isinstance(ret.value, ast.Tuple) else [ret.value]):
                root = _chain_root(e.func.value if isinstance(e, ast.Call) and isinstance(e.func, ast.Attribute)
                                   else e)
                if isinstance(root, ast.Name) and root.id in empties:
                    return_names.add((root.id, ret.lineno))
        all_nodes = self._nodes(fn)
        for name, ret_line in return_names:
            used = 0
            for n in all_nodes:
                if isinstance(n, ast.Name) and n.id == name and isinstance(n.ctx, ast.Load):
                    used += 1
            returned_uses = sum(1 for ret in returns for x in ast.walk(ret) if isinstance(x, ast.Name)
                                and x.id == name)
            if used - returned_uses <= 0:
                self.sink.add("uninitialised-output", f"returns {name}, allocated with torch.empty at line "
                                                      f"{empties[name]}, which no kernel or op is given",
                              ret_line)

    def _is_empty_alloc(self, e: ast.expr | None) -> bool:
        if not isinstance(e, ast.Call):
            return False
        path = self.r.resolve(e.func)
        if path in _EMPTY_ALLOCS:
            return True
        return isinstance(e.func, ast.Attribute) and e.func.attr in ("new_empty", "new_empty_strided") and path is None

    def _inputs(self, fn: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        params = _params(fn)[1:]  # drop self
        nodes = self._nodes(fn, nested=False)
        rebound: set[str] = set()
        derived: set[str] = set()
        for n in nodes:
            if isinstance(n, ast.Assign):
                for t in n.targets:
                    for name in (x.id for x in ast.walk(t) if isinstance(x, ast.Name) and isinstance(x.ctx, ast.Store)):
                        if name in _names_in(n.value):
                            derived.add(name)
                        else:
                            rebound.add(name)
            elif isinstance(n, (ast.For, ast.With, ast.AnnAssign)):
                for x in ast.walk(n.target if isinstance(n, (ast.For, ast.AnnAssign)) else n):
                    if isinstance(x, ast.Name) and isinstance(x.ctx, ast.Store):
                        rebound.add(x.id)
        inputs = {p for p in params if p not in rebound}
        untouched = {p for p in inputs if p not in derived}
        for n in nodes:
            if isinstance(n, ast.Return) and n.value is not None:
                for e in (n.value.elts if isinstance(n.value, (ast.Tuple, ast.List)) else [n.value]):
                    name = self._aliased_input(e, untouched)
                    if name:
                        self.sink.add("returns-input", f"forward returns its input {name} (or a view of it): the "
                                                       "output aliases the input", n.lineno)
            elif isinstance(n, ast.Call):
                f = n.func
                if isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name) and f.value.id in inputs \
                        and f.attr.endswith("_") and not f.attr.endswith("__") and f.attr not in _NOT_INPLACE:
                    self.sink.add("mutates-input", f"forward modifies its input in place ({f.value.id}.{f.attr})",
                                  n.lineno)
                    continue
                path = self.r.resolve(f)
                first = n.args[0] if n.args else None
                if isinstance(first, ast.Name) and first.id in inputs and path and (
                        (path.startswith("torch.") and path.endswith("_") and not path.endswith("__"))
                        or (matches(path, "torch.nn.functional") and any(
                            k.arg == "inplace" and isinstance(k.value, ast.Constant) and k.value.value
                            for k in n.keywords))):
                    self.sink.add("mutates-input", f"forward modifies its input in place ({path})", n.lineno)
                    continue
                for k in n.keywords:
                    if k.arg == "out" and isinstance(k.value, ast.Name) and k.value.id in inputs:
                        self.sink.add("mutates-input", f"forward writes into its input {k.value.id} (out=)",
                                      n.lineno)
            elif isinstance(n, (ast.Assign, ast.AugAssign)):
                targets = n.targets if isinstance(n, ast.Assign) else [n.target]
                for t in targets:
                    if isinstance(t, ast.Subscript) and isinstance(_chain_root(t), ast.Name) \
                            and _chain_root(t).id in inputs:  # type: ignore[union-attr]
                        self.sink.add("mutates-input", f"forward writes into its input "
                                                       f"{_chain_root(t).id}", n.lineno)  # type: ignore[union-attr]
                    elif isinstance(n, ast.AugAssign) and isinstance(t, ast.Name) and t.id in inputs:
                        self.sink.add("mutates-input", f"forward updates its input {t.id} in place "
                                                       "(augmented assignment)", n.lineno)

    def _aliased_input(self, e: ast.expr, untouched: set[str]) -> str | None:
        if isinstance(e, ast.Name) and e.id in untouched:
            return e.id
        if isinstance(e, ast.Subscript) and isinstance(e.value, ast.Name) and e.value.id in untouched:
            return e.value.id
        if isinstance(e, ast.Attribute) and e.attr in ("T", "mT", "data") and isinstance(e.value, ast.Name) \
                and e.value.id in untouched:
            return e.value.id
        if isinstance(e, ast.Call) and isinstance(e.func, ast.Attribute) and e.func.attr in _VIEW_METHODS:
            return self._aliased_input(e.func.value, untouched)
        return None
