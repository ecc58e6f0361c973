"""CuTe DSL and TileLang in the static guard: their kernels, what launches them, and the compiled kernels.

Both DSLs compile Python functions into GPU kernels, and in both a kernel runs only through a second
object:

* **CuTe DSL** (``import cutlass.cute as cute``): a ``@cute.kernel`` function runs when a ``@cute.jit``
  function (the host function) calls ``kernel(...).launch(grid=..., block=...)``. ``forward`` runs the
  host function directly, or calls the function ``cute.compile(host, ...)`` returned.
* **TileLang** (``import tilelang.language as T``): a ``@T.prim_func`` runs through the kernel
  ``tilelang.compile(func, ...)`` returns, or the one a ``@tilelang.jit`` function returns when called;
  ``forward`` calls that kernel.

A *handle* is such a compiled callable. Handles are followed without flow analysis, the way
:mod:`~kernelbench.evaluation.guards.callgraph` follows extension modules: names, attributes and
containers (``self.cache[key] = handle``) that are given a handle anywhere in the file, and functions
that return one (``self._get_kernel(m, n)``). Like the rest of the call graph, the analysis errs towards
finding a launch: the runtime launch trace is the real test, and a false "not launched" would fail an
honest candidate.

Kernel and host bodies are device code (or traced host code): the walk from ``forward`` does not enter
them (:attr:`DslIndex.device_nodes`), so a kernel's arithmetic is never mistaken for PyTorch compute.
"""

from __future__ import annotations

import ast
from collections.abc import Callable
from dataclasses import dataclass, field

from kernelbench.evaluation.guards.names import Resolver

FuncDef = ast.FunctionDef | ast.AsyncFunctionDef

CUTE_KERNEL = frozenset({"cutlass.cute.kernel"})
CUTE_JIT = frozenset({"cutlass.cute.jit"})
CUTE_COMPILE = frozenset({"cutlass.cute.compile"})
TILELANG_JIT = frozenset({"tilelang.jit", "tilelang.jit.jit", "tilelang.lazy_jit"})
TILELANG_COMPILE = frozenset({"tilelang.compile", "tilelang.jit.compile", "tilelang.par_compile",
                              "tilelang.jit.par_compile", "tilelang.JITKernel", "tilelang.jit.JITKernel"})
_CONTAINER_GETTERS = frozenset({"get", "setdefault", "pop", "__getitem__"})


def is_prim_func(path: str | None) -> bool:
    """``T.prim_func`` under whatever name TileLang exposes it (``tilelang.language.prim_func`` ...)."""
    return path is not None and path.startswith("tilelang.") and path.rsplit(".", 1)[-1] == "prim_func"


def decorator_paths(fn: FuncDef, resolver: Resolver) -> list[str]:
    """What each decorator of ``fn`` resolves to (``@cute.kernel`` and ``@tilelang.jit(out_idx=[-1])`` alike)."""
    out = []
    for d in fn.decorator_list:
        path = resolver.resolve(d.func if isinstance(d, ast.Call) else d)
        if path:
            out.append(path)
    return out


@dataclass
class HandleIndex:
    """Where compiled kernels (handles) are kept: names, attributes, containers and getter functions."""

    resolver: Resolver
    #: Is this call one that returns a handle (``cute.compile(...)``, ``tilelang.compile(...)`` ...)?
    is_source: Callable[[ast.Call], bool]
    names: set[str] = field(default_factory=set)
    attrs: set[str] = field(default_factory=set)
    container_names: set[str] = field(default_factory=set)
    container_attrs: set[str] = field(default_factory=set)
    getters: set[str] = field(default_factory=set)

    def build(self, tree: ast.Module) -> HandleIndex:
        assigns = [n for n in ast.walk(tree) if isinstance(n, (ast.Assign, ast.AnnAssign)) and n.value is not None]
        returns: list[tuple[str, ast.expr]] = []
        for fn in ast.walk(tree):
            if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
                returns.extend((fn.name, r.value) for r in ast.walk(fn) if isinstance(r, ast.Return) and r.value)
        while True:  # to a fixed point: handles kept in containers filled from getters returning handles...
            before = self._size()
            for node in assigns:
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                if self.is_handle(node.value):
                    for t in targets:
                        self._bind(t)
                elif isinstance(node.value, ast.Dict) and any(self.is_handle(v) for v in node.value.values if v):
                    for t in targets:
                        if isinstance(t, ast.Name):
                            self.container_names.add(t.id)
                        elif isinstance(t, ast.Attribute):
                            self.container_attrs.add(t.attr)
            for name, value in returns:
                if self.is_handle(value):
                    self.getters.add(name)
            if self._size() == before:
                return self

    def _size(self) -> tuple[int, ...]:
        return (len(self.names), len(self.attrs), len(self.container_names), len(self.container_attrs),
                len(self.getters))

    def _bind(self, target: ast.expr) -> None:
        if isinstance(target, ast.Name):
            self.names.add(target.id)
        elif isinstance(target, ast.Attribute):
            self.attrs.add(target.attr)
        elif isinstance(target, ast.Subscript):  # cache[key] = handle: cache holds handles
            holder = target.value
            if isinstance(holder, ast.Name):
                self.container_names.add(holder.id)
            elif isinstance(holder, ast.Attribute):
                self.container_attrs.add(holder.attr)
        elif isinstance(target, (ast.Tuple, ast.List)):
            for elt in target.elts:
                self._bind(elt)

    def _is_container(self, e: ast.expr) -> bool:
        if isinstance(e, ast.Name):
            return e.id in self.container_names
        if isinstance(e, ast.Attribute):
            return e.attr in self.container_attrs
        return False

    def is_handle(self, e: ast.expr | None) -> bool:
        """Does ``e`` evaluate to a compiled kernel (as far as a flow-insensitive reading can tell)?"""
        if e is None:
            return False
        if isinstance(e, ast.Call):
            if self.is_source(e):
                return True
            f = e.func
            if isinstance(f, ast.Name) and f.id in self.getters:
                return True
            if isinstance(f, ast.Attribute):
                if f.attr in self.getters:
                    return True
                if f.attr in _CONTAINER_GETTERS and self._is_container(f.value):
                    return True
            return False
        if isinstance(e, ast.Name):
            return e.id in self.names
        if isinstance(e, ast.Attribute):
            return e.attr in self.attrs and not isinstance(e.value, ast.Call)
        if isinstance(e, ast.Subscript):  # cache[key], or one of par_compile's kernels
            return self._is_container(e.value) or self.is_handle(e.value)
        if isinstance(e, ast.IfExp):
            return self.is_handle(e.body) or self.is_handle(e.orelse)
        if isinstance(e, ast.BoolOp):
            return any(self.is_handle(v) for v in e.values)
        if isinstance(e, ast.NamedExpr):
            return self.is_handle(e.value)
        return False

    def is_handle_call(self, call: ast.Call) -> bool:
        """Is ``call`` a call *of* a compiled kernel (a launch), as opposed to one that makes it?"""
        return self.is_handle(call.func)


@dataclass
class Launch:
    """A call in ``forward``'s reach that runs a DSL kernel."""

    backend: str
    #: In words, for the finding: "CuTe host function add_host (launches add_kernel)".
    what: str
    #: The kernels it runs, where known ("?" when the analysis cannot tell which).
    kernels: tuple[str, ...]


class DslIndex:
    """The CuTe and TileLang kernels of one source and how they can be run."""

    def __init__(self, tree: ast.Module, resolver: Resolver) -> None:
        self.tree = tree
        self.r = resolver
        #: @cute.kernel functions and methods, by name.
        self.cute_kernels: dict[str, FuncDef] = {}
        #: @cute.jit functions and methods (host code), by name.
        self.cute_hosts: dict[str, FuncDef] = {}
        #: @T.prim_func functions (anywhere, usually nested in a builder), by name.
        self.prim_funcs: dict[str, FuncDef] = {}
        #: @tilelang.jit functions: calling one returns a compiled kernel.
        self.tilelang_jit: dict[str, FuncDef] = {}
        for fn in ast.walk(tree):
            if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            for path in decorator_paths(fn, resolver):
                if path in CUTE_KERNEL:
                    self.cute_kernels.setdefault(fn.name, fn)
                elif path in CUTE_JIT:
                    self.cute_hosts.setdefault(fn.name, fn)
                elif is_prim_func(path):
                    self.prim_funcs.setdefault(fn.name, fn)
                elif path in TILELANG_JIT:
                    self.tilelang_jit.setdefault(fn.name, fn)
        #: Nodes the walk from forward does not enter: device code and traced host code.
        self.device_nodes: set[int] = {id(fn) for fn in (*self.cute_kernels.values(), *self.cute_hosts.values(),
                                                          *self.prim_funcs.values())}
        self.device_nodes |= {id(fn) for fn in self.tilelang_jit.values() if not self._builds_prim_func(fn)}
        self.cute_launches: dict[str, list[tuple[str, int]]] = {h: self._host_launches(fn)
                                                                  for h, fn in self.cute_hosts.items()}
        self.cute_handles = HandleIndex(resolver, self._is_cute_source).build(tree)
        self.tilelang_handles = HandleIndex(resolver, self._is_tilelang_source).build(tree)

    # --- CuTe ------------------------------------------------------------------------------------

    def _kernel_of(self, e: ast.expr, local_kernels: dict[str, str]) -> str | None:
        """The @cute.kernel a receiver of ``.launch`` denotes: ``k(...)``, ``self.k(...)`` or a name given one."""
        if isinstance(e, ast.Call):
            f = e.func
            if isinstance(f, ast.Name) and f.id in self.cute_kernels:
                return f.id
            if isinstance(f, ast.Attribute) and f.attr in self.cute_kernels:
                return f.attr
        if isinstance(e, ast.Name):
            return local_kernels.get(e.id)
        return None

    def _host_launches(self, host: FuncDef) -> list[tuple[str, int]]:
        """(kernel or "?", line) for every ``.launch(...)`` in a host function's body."""
        local: dict[str, str] = {}
        for n in ast.walk(host):
            if isinstance(n, ast.Assign) and len(n.targets) == 1 and isinstance(n.targets[0], ast.Name):
                k = self._kernel_of(n.value, {})
                if k:
                    local[n.targets[0].id] = k
        out = []
        for n in ast.walk(host):
            if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr == "launch":
                out.append((self._kernel_of(n.func.value, local) or "?", n.lineno))
        return out

    def host_kernels(self, host: str, seen: set[str] | None = None) -> set[str]:
        """Kernels a host function launches, itself or through the host functions it calls."""
        seen = seen if seen is not None else set()
        if host in seen or host not in self.cute_hosts:
            return set()
        seen.add(host)
        out = {k for k, _ in self.cute_launches.get(host, [])}
        for n in ast.walk(self.cute_hosts[host]):
            if isinstance(n, ast.Call):
                f = n.func
                callee = f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) else None
                if callee in self.cute_hosts and callee != host:
                    out |= self.host_kernels(callee, seen)
        return out

    def launching_hosts(self) -> dict[str, set[str]]:
        return {h: ks for h in self.cute_hosts if (ks := self.host_kernels(h))}

    def _is_cute_source(self, call: ast.Call) -> bool:
        return self.r.resolve(call.func) in CUTE_COMPILE

    def compiled_hosts(self) -> set[str] | None:
        """The host functions ``cute.compile`` is given, by name; None when one of them is not a name we know
        (``cute.compile(self.gemm, ...)``, an instance with a @cute.jit ``__call__``): any may be."""
        out: set[str] = set()
        for n in ast.walk(self.tree):
            if isinstance(n, ast.Call) and self._is_cute_source(n):
                first = n.args[0] if n.args else None
                name = first.id if isinstance(first, ast.Name) else None
                if name is None or name not in self.cute_hosts:
                    return None
                out.add(name)
        return out

    # --- TileLang ----------------------------------------------------------------------------------

    def _is_tilelang_source(self, call: ast.Call) -> bool:
        path = self.r.resolve(call.func)
        if path in TILELANG_COMPILE or path in TILELANG_JIT:
            return True
        f = call.func
        callee = f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) else None
        return callee in self.tilelang_jit

    def tilelang_kernels(self) -> dict[str, FuncDef]:
        return {**self.prim_funcs, **self.tilelang_jit}

    def tilelang_compiled(self) -> list[int]:
        """Lines where a TileLang kernel is compiled (a compile call, or a call of a @tilelang.jit function)."""
        return sorted(n.lineno for n in ast.walk(self.tree) if isinstance(n, ast.Call) and self._is_tilelang_source(n))

    # --- launches from forward -----------------------------------------------------------------------

    def launch_of(self, call: ast.Call) -> Launch | None:
        """Does this call (in code forward reaches) run a CuTe or TileLang kernel?"""
        f = call.func
        callee = f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) else None
        if callee in self.cute_hosts and self.host_kernels(callee):
            ks = tuple(sorted(self.host_kernels(callee)))
            return Launch("cute", f"CuTe host function {callee} (launches {', '.join(ks)})", ks)
        if self.cute_handles.is_handle_call(call):
            hosts = self.compiled_hosts()
            ks = tuple(sorted(set().union(*(self.host_kernels(h) for h in hosts)))) if hosts else ("?",)
            via = f"cute.compile({', '.join(sorted(hosts))})" if hosts else "cute.compile"
            return Launch("cute", f"the function {via} returned" + (f" (launches {', '.join(ks)})"
                                                                        if ks != ("?",) else ""), ks)
        if self.tilelang_handles.is_handle_call(call):
            return Launch("tilelang", "a compiled TileLang kernel", tuple(sorted(self.tilelang_kernels())) or ("?",))
        if callee in self.tilelang_jit and not self._builds_prim_func(self.tilelang_jit[callee]):
            # A @tilelang.jit function that is itself the kernel (no @T.prim_func inside): calling it with
            # tensors compiles on first use and launches.
            return Launch("tilelang", f"the @tilelang.jit kernel {callee}", (callee,))
        return None

    def _builds_prim_func(self, fn: FuncDef) -> bool:
        return any(id(n) in self.device_nodes and n is not fn for n in ast.walk(fn)
                   if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)))


__all__ = ["CUTE_COMPILE", "CUTE_JIT", "CUTE_KERNEL", "TILELANG_COMPILE", "TILELANG_JIT", "DslIndex", "HandleIndex",
           "Launch", "decorator_paths", "is_prim_func"]
