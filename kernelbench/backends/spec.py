"""What a kernel backend is: one frozen record holding, or pointing at, every part that differs by backend.

The parts are: its name; how a source reveals it (:class:`Detection`); what the static guard requires
of it (``conformity``); how its kernels are told apart from PyTorch's at run time (``kernel_names``,
``records_launches``); what its worker processes need (``needs_gpu``, ``cpu_worker_env``,
``builds_ahead``, ``private_dirs_env``) and which packages it needs installed (``requires``, ``extra``);
and what generation and the leaderboard offer for it (``prompt``, ``worked_solutions``, ``submissions``).

Code that implements a part for one backend (a conformity check, a kernel-name reader) lives with the
layer that runs it (the guards) and is named here as ``"module:function"``, looked up on first use.
So the registry imports none of the layers that consult it, and any of them may import the registry.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import cache
from types import MappingProxyType
from typing import Any

#: A function, or where to find one: ``"package.module:function"``.
Ref = str | Callable[..., Any]


@cache
def _import_ref(ref: str) -> Callable[..., Any]:
    module, sep, attr = ref.partition(":")
    if not sep or not module or not attr:
        raise ValueError(f"bad reference {ref!r}: write 'package.module:function'")
    fn = getattr(importlib.import_module(module), attr, None)
    if not callable(fn):
        raise ValueError(f"bad reference {ref!r}: {module} has no function {attr}")
    return fn


def resolve(ref: Ref) -> Callable[..., Any]:
    """The function ``ref`` names (a callable is returned as is)."""
    return _import_ref(ref) if isinstance(ref, str) else ref


@dataclass(frozen=True)
class Detection:
    """How a candidate's source shows it is written for a backend (read from the syntax tree, never run).

    A source is *marked* by a backend when it imports one of ``modules`` (or a submodule of one) or
    uses one of ``names`` as a name or an attribute. When several backends mark a source, the one with
    the highest ``precedence`` is the detected one (equal precedence: the first name alphabetically).
    """

    modules: tuple[str, ...] = ()
    names: tuple[str, ...] = ()
    precedence: int = 0

    def marks(self, imported: set[str], used: set[str]) -> bool:
        return any(m == p or m.startswith(p + ".") for m in imported for p in self.modules) or \
            any(n in used for n in self.names)


@dataclass(frozen=True)
class PromptSpec:
    """The files generation asks for this backend with (package data of :mod:`kernelbench.prompts`)."""

    #: The jinja2 template in ``kernelbench/prompts/templates/``.
    template: str
    #: The worked example's ``ModelNew`` in ``kernelbench/prompts/examples/`` (its ``Model`` is ``model.py``).
    example: str
    #: How the template introduces the worked example ("a fused Triton kernel").
    example_intro: str


@dataclass(frozen=True, eq=False)
class BackendSpec:
    """One backend: every part of the project that differs by backend reads it from here."""

    #: The name used everywhere: settings, ``--backend``, results, submissions.
    name: str
    #: The name in prose ("CUDA", "Triton"): prompts, messages.
    display_name: str
    #: One line for ``--help`` and the docs.
    summary: str
    #: Candidates must launch kernels of their own: the static and runtime guards fail one that does not,
    #: and flag PyTorch compute in ``forward`` (``torch-compute``). False for the plain-PyTorch backend.
    custom_kernels: bool = True
    #: How a source reveals this backend (None: never detected, it must be named).
    detection: Detection | None = None
    #: Static-guard conformity, ``check(ctx, sink, required, anchor)``: it reports the backend's kernels
    #: and their launches from ``ModelNew.forward``, and, when ``required`` (the candidate claims this
    #: backend), errors for a missing or never-launched kernel. Every backend's check runs on every
    #: source (a cuda candidate's Triton launches are still reported); the claimed one first.
    conformity: Ref | None = None
    #: ``names(source, tree) -> set[str]``: the kernel names a source defines, for telling the
    #: candidate's own launches from PyTorch's at run time (profiler trace, interpreter counts). The
    #: evaluator uses every backend's names, whatever the candidate claims. ``tree`` is None when the
    #: source does not parse.
    kernel_names: Ref | None = None
    #: The evaluation worker wraps this backend's kernel launcher before the candidate is imported: on the
    #: CPU it counts launches (so the runtime launch guard runs without a profiler) and a candidate's
    #: launch arguments are recorded for output provenance. The wrapping itself is Triton's
    #: (``evaluation/provenance.py``, ``evaluation/worker/trace.py``); another backend setting this
    #: needs its own there.
    records_launches: bool = False
    #: Only an NVIDIA GPU can run it: on the CPU path the evaluator fails such a candidate before starting it.
    needs_gpu: bool = False
    #: Environment of a worker that runs this backend's candidate on the CPU (Triton's interpreter switch).
    cpu_worker_env: Mapping[str, str] = field(default_factory=dict)
    #: A batch builds the candidate's extension ahead, on the CPU, while the GPU evaluates others.
    builds_ahead: bool = False
    #: Environment variables naming a folder the backend's compiler caches into, as a path relative to the
    #: candidate worker's private scratch folder (``{"TILELANG_CACHE_DIR": ".tilelang/cache"}``): a cache
    #: one candidate writes must never be read by another (it could hold a kernel planted for it).
    private_dirs_env: Mapping[str, str] = field(default_factory=dict)
    #: Top-level modules a candidate of this backend imports, which the package does not depend on:
    #: evaluating such a candidate where one is missing gives a one-line result naming :attr:`extra`.
    requires: tuple[str, ...] = ()
    #: The optional dependency group that installs :attr:`requires` (``pip install 'kernelbench[<extra>]'``).
    extra: str | None = None
    #: Rough seconds to build one candidate (import and compile), for the cost estimate before a paid dispatch.
    build_estimate_s: float = 30.0
    #: What generation asks for it with (None: no prompts for this backend).
    prompt: PromptSpec | None = None
    #: ``kernelbench/solutions/<name>/`` holds hand-written worked solutions.
    worked_solutions: bool = False
    #: A leaderboard submission may declare it (``metadata.backend``).
    submissions: bool = False

    def __post_init__(self) -> None:
        if not self.name or not self.name.isidentifier() or self.name != self.name.lower():
            raise ValueError(f"backend name {self.name!r} must be a lowercase identifier")
        object.__setattr__(self, "cpu_worker_env", MappingProxyType(dict(self.cpu_worker_env)))
        object.__setattr__(self, "private_dirs_env", MappingProxyType(dict(self.private_dirs_env)))
        for rel in self.private_dirs_env.values():
            if rel.startswith("/") or ".." in rel.split("/"):
                raise ValueError(f"backend {self.name}: private folder {rel!r} must be relative to the worker's scratch")

    def worker_env(self, on_gpu: bool) -> dict[str, str]:
        """Environment variables a candidate worker of this backend gets on a GPU or on the CPU."""
        return {} if on_gpu else dict(self.cpu_worker_env)

    def missing_packages(self) -> list[str]:
        """The modules of :attr:`requires` this interpreter cannot import (found, not imported: cheap)."""
        import importlib.util

        missing = []
        for module in self.requires:
            try:
                found = importlib.util.find_spec(module) is not None
            except (ImportError, ValueError):
                found = False
            if not found:
                missing.append(module)
        return missing

    def missing_message(self, missing: list[str] | None = None) -> str:
        """One line saying what is not installed and how to install it."""
        missing = self.missing_packages() if missing is None else missing
        what = ", ".join(missing) or ", ".join(self.requires)
        fix = f"pip install 'kernelbench[{self.extra}]'" if self.extra else f"install {what}"
        return (f"{self.display_name} candidates need the Python package(s) {what}, which are not installed "
                f"where this evaluation runs: {fix}")

    def conformity_check(self) -> Callable[..., None] | None:
        return resolve(self.conformity) if self.conformity is not None else None

    def kernel_name_reader(self) -> Callable[..., set[str]] | None:
        return resolve(self.kernel_names) if self.kernel_names is not None else None
