"""Backend conformity: a cuda candidate launches its own ``__global__`` kernel, a triton one its
own ``@triton.jit`` kernel, a cute one a ``@cute.kernel`` through a ``@cute.jit`` host function, a tilelang one
the compiled form of its own ``@T.prim_func``, from ``ModelNew.forward``'s call graph (the DSLs' kernels and
launches are found by :mod:`~kernelbench.evaluation.guards.dsl`).

Each check is named by its backend's spec (:mod:`kernelbench.backends`) and called by the static
guard as ``check(ctx, sink, required, anchor)``.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass

from kernelbench.evaluation.guards.callgraph import Program
from kernelbench.evaluation.guards.cuda_text import CudaScan
from kernelbench.evaluation.guards.names import Resolver
from kernelbench.evaluation.guards.reach import Reach
from kernelbench.evaluation.guards.report import FindingSink


@dataclass(frozen=True)
class GuardContext:
    """What the static guard has worked out about one source, for the backends' conformity checks."""

    tree: ast.Module
    resolver: Resolver
    prog: Program
    #: What ``ModelNew.forward`` reaches (functions, kernel launches, extension calls).
    reach: Reach
    #: The CUDA text of the source's strings: ``__global__`` kernels, launches, bindings.
    scan: CudaScan


def _device_helpers(prog: Program) -> set[str]:
    """Jit functions called from other jit functions: device code, not kernels to launch."""
    helpers: set[str] = set()
    for name, fn in prog.jit.items():
        for n in ast.walk(fn):
            if isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id in prog.jit \
                    and n.func.id != name:
                helpers.add(n.func.id)
    return helpers


def check_triton(ctx: GuardContext, sink: FindingSink, required: bool, anchor: int | None) -> None:
    prog, reach = ctx.prog, ctx.reach
    helpers = _device_helpers(prog)
    kernels = {name: fn for name, fn in prog.jit.items() if name not in helpers or _launched_anywhere(reach, name)}
    if not kernels and not prog.jit:
        if required:
            sink.add("no-custom-kernel", "no @triton.jit kernel is defined: a triton candidate must launch its own "
                                         "Triton kernel", anchor)
        return
    launched = reach.launched_kernels()
    unknown_launch = "?" in launched
    referenced = _referenced_names(reach)
    launched_names = {k for k in kernels if k in launched or (unknown_launch and k in referenced)}
    if not launched_names:
        if required:
            for name, fn in sorted(kernels.items(), key=lambda kv: kv[1].lineno):
                sink.add("kernel-not-launched", f"Triton kernel {name} is never launched from ModelNew.forward "
                                                "(launch it as kernel[grid](...))", fn.lineno)
        return
    for name in sorted(launched_names):
        for line in launched.get(name, []) or [kernels[name].lineno]:
            sink.add("kernel-launch", f"forward launches Triton kernel {name} (defined at line "
                                      f"{kernels[name].lineno})", line)
    for name, fn in kernels.items():
        if name not in launched_names and name not in helpers:
            sink.add("unused-kernel", f"Triton kernel {name} is defined but forward never launches it", fn.lineno)


def _launched_anywhere(reach: Reach, name: str) -> bool:
    return name in reach.launched_kernels()


def _referenced_names(reach: Reach) -> set[str]:
    out: set[str] = set()
    for fn in reach.funcs:
        body = fn.body if isinstance(fn, ast.Lambda) else fn
        out.update(n.id for n in ast.walk(body) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load))
    return out


def check_cuda(ctx: GuardContext, sink: FindingSink, required: bool, anchor: int | None) -> None:
    prog, reach, scan = ctx.prog, ctx.reach, ctx.scan
    if not scan.kernels:
        if required:
            sink.add("no-custom-kernel", "no __global__ CUDA kernel in the source: a cuda candidate builds its own "
                                         "kernel with torch.utils.cpp_extension.load_inline", anchor)
        return
    first_kernel, first_line = min(scan.kernels.items(), key=lambda kv: kv[1])
    if not prog.build_calls:
        if required:
            sink.add("no-custom-kernel", f"__global__ kernel {first_kernel} is never built (no load_inline/load "
                                         "call)", first_line)
        return
    calls = reach.ext_calls()
    if not calls:
        if required:
            sink.add("kernel-not-launched", f"CUDA kernel {first_kernel} is compiled but ModelNew.forward never "
                                            "calls the extension", first_line)
        return
    verdicts = []
    for site in calls:
        name = site.ext_fn or "?"
        cname = scan.bindings.get(name, name)
        verdicts.append((site, name, cname, scan.launches_kernel(cname)))
    if any(v is True for *_, v in verdicts):
        for site, name, cname, v in verdicts:
            if v:
                ks = ", ".join(scan.launched_kernels_of(cname))
                sink.add("kernel-launch", f"forward calls extension function {name}, which launches {ks}",
                         site.node.lineno)
        return
    if any(v is None for *_, v in verdicts) and scan.launches:
        for site, name, _cname, v in verdicts:
            if v is None:
                sink.add("kernel-launch", f"forward calls extension function {name} (its C++ body was not found; "
                                          "the sources launch " + ", ".join(sorted({la.kernel for la in scan.launches}))
                         + ")", site.node.lineno)
        return
    if required:
        for site, name, cname, _v in verdicts:
            sink.add("kernel-not-launched", f"extension function {name} (C++ {cname}) launches no __global__ kernel",
                     site.node.lineno)


def _report_dsl_launches(sink: FindingSink, sites: list, display: str) -> None:
    for site in sites:
        sink.add("kernel-launch", f"forward runs {display} through {site.dsl_launch.what}", site.node.lineno)


def check_cute(ctx: GuardContext, sink: FindingSink, required: bool, anchor: int | None) -> None:
    """A cute candidate's forward runs a @cute.jit host function that launches one of its @cute.kernel functions,
    directly or through the function ``cute.compile(host, ...)`` returned."""
    dsl, reach = ctx.prog.dsl, ctx.reach
    if not dsl.cute_kernels:
        if required:
            sink.add("no-custom-kernel", "no @cute.kernel function is defined: a cute candidate must launch its own "
                                         "CuTe kernel (kernel(...).launch(grid=..., block=...) in a @cute.jit "
                                         "function)", anchor)
        return
    hosts = dsl.launching_hosts()
    launched_anywhere = set().union(*hosts.values()) if hosts else set()
    if not hosts:
        if required:
            for name, fn in sorted(dsl.cute_kernels.items(), key=lambda kv: kv[1].lineno):
                sink.add("kernel-not-launched", f"CuTe kernel {name} is never launched: call {name}(...).launch("
                                                "grid=..., block=...) in a @cute.jit function", fn.lineno)
        return
    sites = reach.dsl_launches("cute")
    if not sites:
        if required:
            host, kernels = min(hosts.items(), key=lambda kv: dsl.cute_hosts[kv[0]].lineno)
            sink.add("kernel-not-launched", f"the @cute.jit function {host} launches {', '.join(sorted(kernels))}, "
                                            f"but ModelNew.forward never runs it (call {host}(...), or the function "
                                            f"cute.compile({host}, ...) returns)", dsl.cute_hosts[host].lineno)
        return
    _report_dsl_launches(sink, sites, "CuTe kernels")
    run = set().union(*(set(s.dsl_launch.kernels) for s in sites))
    for name, fn in dsl.cute_kernels.items():
        if name not in launched_anywhere or ("?" not in run and name not in run):
            sink.add("unused-kernel", f"CuTe kernel {name} is defined but forward never launches it", fn.lineno)


def check_tilelang(ctx: GuardContext, sink: FindingSink, required: bool, anchor: int | None) -> None:
    """A tilelang candidate compiles one of its kernels (@T.prim_func with tilelang.compile, or a @tilelang.jit
    function) and forward calls the compiled kernel."""
    dsl, reach = ctx.prog.dsl, ctx.reach
    kernels = dsl.tilelang_kernels()
    if not kernels:
        if required:
            sink.add("no-custom-kernel", "no TileLang kernel is defined (a @T.prim_func, or a @tilelang.jit "
                                         "function): a tilelang candidate must compile and call its own kernel",
                     anchor)
        return
    first, first_fn = min(kernels.items(), key=lambda kv: kv[1].lineno)
    if not dsl.tilelang_compiled():
        if required:
            sink.add("kernel-not-launched", f"TileLang kernel {first} is never compiled: pass it to "
                                            "tilelang.compile(...) (or decorate its builder with @tilelang.jit) and "
                                            "call the kernel that returns", first_fn.lineno)
        return
    sites = reach.dsl_launches("tilelang")
    if not sites:
        if required:
            sink.add("kernel-not-launched", f"TileLang kernel {first} is compiled, but ModelNew.forward never calls "
                                            "the compiled kernel", first_fn.lineno)
        return
    _report_dsl_launches(sink, sites, "TileLang kernels")
