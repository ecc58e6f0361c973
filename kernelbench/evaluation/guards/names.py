"""What a name or attribute chain in the candidate refers to, as a dotted path.

``import torch.cuda as tc`` then ``tc.Event`` resolves to ``torch.cuda.Event``; so do
``getattr(torch.cuda, "Event")``, ``importlib.import_module("torch.cuda").Event`` and
``sys.modules["torch.cuda"].Event``. Analysis is flow-insensitive: a name counts as an alias
only when every binding of it in the file points at the same thing.
"""

from __future__ import annotations

import ast
import builtins

_BUILTIN_NAMES = frozenset(dir(builtins))


def matches(path: str | None, prefix: str) -> bool:
    """True when ``path`` is ``prefix`` or lies under it (component-wise, not by characters)."""
    return path is not None and (path == prefix or path.startswith(prefix + "."))


def matches_any(path: str | None, prefixes: tuple[str, ...] | frozenset[str]) -> str | None:
    for p in prefixes:
        if matches(path, p):
            return p
    return None


def const_str(node: ast.AST | None) -> str | None:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    return None


class Resolver:
    """Maps local names to the modules and objects they were imported or assigned from."""

    def __init__(self, tree: ast.Module) -> None:
        self.aliases: dict[str, str] = {}
        self._assigned_aliases: set[str] = set()
        #: Every name bound anywhere (def, class, assignment, parameter, import): shadows builtins.
        self.bound: set[str] = set()
        self._collect_imports(tree)
        self._collect_bound(tree)
        self._collect_assignment_aliases(tree)

    def _collect_imports(self, tree: ast.Module) -> None:
        conflicting: set[str] = set()
        for node in ast.walk(tree):
            pairs: list[tuple[str, str]] = []
            if isinstance(node, ast.Import):
                for a in node.names:
                    if a.asname:
                        pairs.append((a.asname, a.name))
                    else:
                        top = a.name.split(".")[0]
                        pairs.append((top, top))
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                for a in node.names:
                    if a.name != "*":
                        pairs.append((a.asname or a.name, f"{node.module}.{a.name}"))
            for local, path in pairs:
                if local in self.aliases and self.aliases[local] != path:
                    conflicting.add(local)
                self.aliases.setdefault(local, path)
        for name in conflicting:
            self.aliases.pop(name, None)

    def _collect_bound(self, tree: ast.Module) -> None:
        for node in ast.walk(tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                self.bound.add(node.name)
            elif isinstance(node, ast.Name) and isinstance(node.ctx, (ast.Store, ast.Del)):
                self.bound.add(node.id)
            elif isinstance(node, ast.arg):
                self.bound.add(node.arg)
        self.bound.update(self.aliases)

    def _collect_assignment_aliases(self, tree: ast.Module) -> None:
        bindings: dict[str, list[ast.expr | None]] = {}
        for node in ast.walk(tree):
            if isinstance(node, ast.Assign):
                for t in node.targets:
                    if isinstance(t, ast.Name):
                        bindings.setdefault(t.id, []).append(node.value)
            elif isinstance(node, (ast.AnnAssign, ast.AugAssign)) and isinstance(node.target, ast.Name):
                bindings.setdefault(node.target.id, []).append(node.value)
            elif isinstance(node, (ast.For, ast.AsyncFor, ast.comprehension)):
                for n in ast.walk(node.target):
                    if isinstance(n, ast.Name):
                        bindings.setdefault(n.id, []).append(None)
            elif isinstance(node, ast.withitem) and node.optional_vars is not None:
                for n in ast.walk(node.optional_vars):
                    if isinstance(n, ast.Name):
                        bindings.setdefault(n.id, []).append(None)
            elif isinstance(node, ast.arg):
                bindings.setdefault(node.arg, []).append(None)
        for _ in range(3):  # aliases of aliases
            for name, values in bindings.items():
                if name in self.aliases and name not in self._assigned_aliases:
                    if any(v is not None for v in values):
                        # imported and also reassigned: only an alias if the reassignment agrees
                        paths = {self.resolve(v) if v is not None else None for v in values}
                        if paths != {self.aliases[name]}:
                            self.aliases.pop(name)
                    continue
                paths = {self.resolve(v) if v is not None else None for v in values}
                if len(paths) == 1 and None not in paths:
                    self.aliases[name] = paths.pop()
                    self._assigned_aliases.add(name)

    def resolve(self, node: ast.AST | None) -> str | None:
        """Dotted path of what ``node`` denotes, or None when it is not a module-level object."""
        if node is None:
            return None
        if isinstance(node, ast.Name):
            if node.id in self.aliases:
                return self.aliases[node.id]
            if node.id == "__builtins__":
                return "builtins"
            if node.id in _BUILTIN_NAMES and node.id not in self.bound:
                return f"builtins.{node.id}"
            return None
        if isinstance(node, ast.Attribute):
            base = self.resolve(node.value)
            return f"{base}.{node.attr}" if base else None
        if isinstance(node, ast.Call):
            fn = self.resolve(node.func)
            if fn == "builtins.getattr" and len(node.args) >= 2:
                attr = const_str(node.args[1])
                base = self.resolve(node.args[0])
                if attr and base:
                    return f"{base}.{attr}"
            if fn in ("importlib.import_module", "builtins.__import__") and node.args:
                return const_str(node.args[0])
            return None
        if isinstance(node, ast.Subscript):
            base = self.resolve(node.value)
            key = const_str(node.slice)
            if base == "sys.modules" and key:
                return key
            if base and base.endswith(".__dict__") and key:
                return f"{base[: -len('.__dict__')]}.{key}"
            if base == "builtins" and key:  # __builtins__["open"]
                return f"builtins.{key}"
            return None
        return None

    def root_binding(self, node: ast.AST) -> str | None:
        """The path the leftmost name of an attribute chain is bound to (its import, usually)."""
        while isinstance(node, (ast.Attribute, ast.Subscript, ast.Call)):
            node = node.func if isinstance(node, ast.Call) else node.value
        if isinstance(node, ast.Name):
            return self.resolve(node)
        return None

