"""A named registry: the one shape behind backends, runners and problem sources.

Each plug-in kind (a backend, a runner, a problem source) is one frozen record with a ``name``, kept
in a :class:`Registry`. Everything that lists or looks up that kind asks the registry, so a command
line's choices, a settings check and an error message can never disagree about what exists, and a
wrong name always fails the same way: ``unknown backend 'x' (available: cuda, cute, tilelang, torch, triton)``.

This module imports nothing but :mod:`kernelbench.errors`, so any layer may use it.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Generic, Protocol, TypeVar

from kernelbench.errors import KernelBenchError


class Named(Protocol):
    @property
    def name(self) -> str: ...


T = TypeVar("T", bound=Named)


class Registry(Generic[T]):
    """Records of one kind, by name (and by alias), in registration order.

    ``kind`` names the kind in error messages ("backend", "runner", "problem source"); ``error`` is
    the exception a failed lookup raises (a :class:`KernelBenchError`, so the CLI prints it as one line).
    """

    def __init__(self, kind: str, error: type[KernelBenchError] = KernelBenchError) -> None:
        self.kind = kind
        self.error = error
        self._items: dict[str, T] = {}
        self._aliases: dict[str, str] = {}

    def register(self, item: T, aliases: tuple[str, ...] = (), replace: bool = False) -> T:
        """Add ``item``; a name (or alias) already taken is an error unless ``replace``."""
        if not replace:
            for key in (item.name, *aliases):
                if key in self._items or key in self._aliases:
                    raise ValueError(f"{self.kind} {key!r} is already registered")
        self._items[item.name] = item
        for alias in aliases:
            self._aliases[alias] = item.name
        return item

    def unregister(self, name: str) -> T:
        """Remove a record (and its aliases); the record is returned."""
        item = self.get(name)
        del self._items[item.name]
        self._aliases = {a: n for a, n in self._aliases.items() if n != item.name}
        return item

    @contextmanager
    def registered(self, item: T, aliases: tuple[str, ...] = ()) -> Iterator[T]:
        """``item`` is registered inside the block only (tests, one-off experiments)."""
        self.register(item, aliases)
        try:
            yield item
        finally:
            self.unregister(item.name)

    def get(self, name: str) -> T:
        """The record called ``name`` (or an alias of it); anything else raises ``self.error``."""
        key = self._aliases.get(name, name)
        try:
            return self._items[key]
        except (KeyError, TypeError):
            raise self.error(f"unknown {self.kind} {name!r} (available: {', '.join(self.names())})") from None

    def names(self) -> tuple[str, ...]:
        """Every registered name, sorted (aliases are accepted by :meth:`get` but not listed)."""
        return tuple(sorted(self._items))

    def items(self) -> tuple[T, ...]:
        """Every record, in name order."""
        return tuple(self._items[n] for n in self.names())

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and self._aliases.get(name, name) in self._items
