"""What ``ModelNew.forward`` can reach: functions, kernel launches and PyTorch compute.

Calls are followed through module-level functions, methods of ``ModelNew`` and of module-level
classes (``self.m()``, ``Helper.apply()``, submodules built in ``__init__``), aliases assigned
from them, and ``torch.ops`` custom ops defined in the file. A Triton launch is a subscript
call ``kernel[grid](...)`` (or ``kernel.run``); a CUDA launch is a call of a function object of an
extension built with ``load_inline``/``load`` (``self.ext.relu(x)``, ``module.fn(x)``). CuTe DSL and TileLang
launches (a ``@cute.jit`` host function, or a compiled kernel) are recognised by
:mod:`~kernelbench.evaluation.guards.dsl`, whose kernel and host bodies the walk does not enter.
Unknown calls are not followed; the analysis errs towards finding a launch, because the runtime
launch trace is the real test and a false "not launched" error would fail an honest candidate.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field

from kernelbench.evaluation.guards.dsl import DslIndex, Launch
from kernelbench.evaluation.guards.names import Resolver, const_str, matches

FuncNode = ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda

BUILD_FUNCS = frozenset({"torch.utils.cpp_extension.load_inline", "torch.utils.cpp_extension.load"})
_JIT_DECORATORS = ("triton.jit", "triton.runtime.jit", "triton.runtime.jit.jit")
_KERNEL_DECORATORS = _JIT_DECORATORS + ("triton.autotune", "triton.heuristics", "triton.runtime.autotune",
                                        "triton.runtime.heuristics", "triton.runtime.autotuner.autotune")
_CUSTOM_OP_DECORATORS = ("torch.library.custom_op", "torch.library.triton_op", "torch._library.custom_ops.custom_op")
_NN_CONTAINERS = frozenset({"Module", "ModuleList", "ModuleDict", "Parameter", "ParameterList", "ParameterDict",
                            "Identity", "Buffer", "Sequential"})

#: torch.<name> calls that compute (as opposed to allocate, view or describe tensors).
TORCH_COMPUTE = frozenset({
    "matmul", "mm", "bmm", "addmm", "addbmm", "baddbmm", "einsum", "tensordot", "linear", "conv1d", "conv2d",
    "conv3d", "conv_transpose1d", "conv_transpose2d", "conv_transpose3d", "relu", "relu_", "gelu", "sigmoid",
    "tanh", "softmax", "log_softmax", "exp", "log", "sum", "mean", "amax", "amin", "max", "min", "argmax",
    "argmin", "cumsum", "cumprod", "prod", "norm", "layer_norm", "batch_norm", "group_norm", "instance_norm",
    "rms_norm", "dropout", "clamp", "clamp_min", "clamp_max", "clip", "where", "maximum", "minimum", "sqrt",
    "rsqrt", "pow", "square", "abs", "erf", "topk", "sort", "var", "std", "logsumexp", "softplus", "silu",
    "mish", "hardtanh", "leaky_relu", "elu", "selu", "max_pool1d", "max_pool2d", "max_pool3d", "avg_pool1d",
    "avg_pool2d", "avg_pool3d", "adaptive_avg_pool1d", "adaptive_avg_pool2d", "adaptive_max_pool2d",
    "scaled_dot_product_attention", "cross_entropy", "nll_loss", "mse_loss", "addcmul", "addcdiv", "lerp",
    "add", "sub", "mul", "div", "neg", "reciprocal", "mv", "dot", "outer", "cdist", "cosine_similarity",
})
_TORCH_COMPUTE_NAMESPACES = ("torch.nn.functional", "torch.linalg", "torch.special", "torch.fft",
                             "torch.ops.aten", "torch._C._nn", "torch._C._VariableFunctions")
#: Tensor methods that compute.
TENSOR_COMPUTE_METHODS = frozenset({
    "matmul", "mm", "bmm", "addmm", "relu", "relu_", "sigmoid", "tanh", "softmax", "log_softmax", "exp", "log",
    "sum", "mean", "amax", "amin", "argmax", "argmin", "cumsum", "norm", "clamp", "clamp_min", "clamp_max",
    "sqrt", "rsqrt", "pow", "abs", "erf", "var", "std", "logsumexp", "max", "min", "prod", "mv", "dot",
})


@dataclass
class CallSite:
    node: ast.Call
    owner: FuncNode
    targets: list[FuncNode] = field(default_factory=list)
    #: Triton kernels launched here (names).
    launches: list[str] = field(default_factory=list)
    #: Extension function called here (Python-visible name).
    ext_fn: str | None = None
    #: What PyTorch compute this call is, in words.
    compute: str | None = None
    #: A CuTe DSL or TileLang kernel this call runs.
    dsl_launch: Launch | None = None


@dataclass
class FuncCtx:
    node: FuncNode
    cls: str | None
    self_name: str | None


class Program:
    """Index of the module's functions, classes, kernels and extension handles."""

    def __init__(self, tree: ast.Module, resolver: Resolver, cuda_namespaces: set[str] | None = None) -> None:
        self.tree = tree
        self.r = resolver
        self.cuda_namespaces = cuda_namespaces or set()
        self.module_funcs: dict[str, ast.FunctionDef | ast.AsyncFunctionDef] = {}
        self.classes: dict[str, ast.ClassDef] = {}
        self.ctx: dict[int, FuncCtx] = {}
        self.jit: dict[str, ast.FunctionDef] = {}
        self.jit_nodes: set[int] = set()
        self.custom_ops: dict[str, ast.FunctionDef | ast.AsyncFunctionDef] = {}
        self.build_calls: list[ast.Call] = []
        self.self_attr_values: dict[str, list[ast.expr]] = {}
        self.name_values: dict[str, list[ast.expr]] = {}
        self._index()
        self._index_ext()
        self.dsl = DslIndex(tree, resolver)

    # --- indexing ----------------------------------------------------------------------------

    def _index(self) -> None:
        for node in self.tree.body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                self.module_funcs[node.name] = node
            elif isinstance(node, ast.ClassDef):
                self.classes[node.name] = node
        for node in ast.walk(self.tree):
            if isinstance(node, ast.ClassDef):
                for item in node.body:
                    if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)):
                        self_name = item.args.args[0].arg if item.args.args else None
                        if any(self.r.resolve(d) == "builtins.staticmethod" for d in item.decorator_list):
                            self_name = None
                        self.ctx[id(item)] = FuncCtx(item, node.name, self_name)
            elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                self.ctx.setdefault(id(node), FuncCtx(node, None, None))
                self._index_decorators(node)
            elif isinstance(node, ast.Assign):
                for t in node.targets:
                    if isinstance(t, ast.Name):
                        self.name_values.setdefault(t.id, []).append(node.value)
                    elif isinstance(t, ast.Attribute):
                        self.self_attr_values.setdefault(t.attr, []).append(node.value)
                if isinstance(node.value, ast.Call) and self.r.resolve(node.value.func) in _JIT_DECORATORS:
                    fn = node.value.args[0] if node.value.args else None
                    if isinstance(fn, ast.Name) and fn.id in self.module_funcs:
                        for t in node.targets:
                            if isinstance(t, ast.Name):
                                self.jit[t.id] = self.module_funcs[fn.id]
                                self.jit_nodes.add(id(self.module_funcs[fn.id]))
            elif isinstance(node, ast.Call) and self.r.resolve(node.func) in BUILD_FUNCS:
                self.build_calls.append(node)
        # nested functions inherit the self name of the method they are defined in
        for node in ast.walk(self.tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and id(node) in self.ctx:
                outer = self.ctx[id(node)]
                for inner in ast.walk(node):
                    if inner is not node and isinstance(inner, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
                        c = self.ctx.get(id(inner))
                        if c is None or (c.cls is None and c.self_name is None):
                            self.ctx[id(inner)] = FuncCtx(inner, outer.cls, outer.self_name)

    def _index_decorators(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        for d in node.decorator_list:
            path = self.r.resolve(d.func if isinstance(d, ast.Call) else d)
            if path in _KERNEL_DECORATORS:
                self.jit[node.name] = node  # type: ignore[assignment]
                self.jit_nodes.add(id(node))
            if path in _CUSTOM_OP_DECORATORS and isinstance(d, ast.Call) and d.args:
                name = const_str(d.args[0])
                if name and "::" in name:
                    ns, op = name.split("::", 1)
                    self.custom_ops[f"{ns}.{op}"] = node

    def _index_ext(self) -> None:
        """Names, attributes and getter functions that hold a built extension module."""
        self.ext_names: set[str] = set()
        self.ext_attrs: set[str] = set()
        self.ext_getters: set[str] = set()
        self.ext_fn_names: dict[str, str] = {}
        self.ext_fn_attrs: dict[str, str] = {}
        self.func_aliases: dict[str, str] = {}
        self.jit_aliases: dict[str, str] = {}
        self.jit_attr_aliases: dict[str, str] = {}
        assigns = [n for n in ast.walk(self.tree) if isinstance(n, (ast.Assign, ast.AnnAssign)) and n.value is not None]
        returns: list[tuple[str, ast.expr]] = []
        for fn in ast.walk(self.tree):
            if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
                returns.extend((fn.name, r.value) for r in ast.walk(fn) if isinstance(r, ast.Return) and r.value)
        while True:  # to a fixed point: handles assigned from getters assigned from handles...
            before = (len(self.ext_names), len(self.ext_attrs), len(self.ext_getters))
            for node in assigns:
                self._index_assignment(node)
            for name, value in returns:
                if self.is_ext(value):
                    self.ext_getters.add(name)
            if before == (len(self.ext_names), len(self.ext_attrs), len(self.ext_getters)):
                break

    def _index_assignment(self, node: ast.Assign | ast.AnnAssign) -> None:
        targets = node.targets if isinstance(node, ast.Assign) else [node.target]
        value = node.value
        if self.is_ext(value):
            for t in targets:
                if isinstance(t, ast.Name):
                    self.ext_names.add(t.id)
                elif isinstance(t, ast.Attribute):
                    self.ext_attrs.add(t.attr)
        elif isinstance(value, ast.Attribute) and self.is_ext(value.value):
            for t in targets:
                if isinstance(t, ast.Name):
                    self.ext_fn_names[t.id] = value.attr
                elif isinstance(t, ast.Attribute):
                    self.ext_fn_attrs[t.attr] = value.attr
        elif isinstance(value, ast.Call) and self.r.resolve(value.func) == "functools.partial" and value.args \
                and isinstance(value.args[0], ast.Name) and value.args[0].id in self.module_funcs:
            for t in targets:
                if isinstance(t, ast.Name):
                    self.func_aliases[t.id] = value.args[0].id
        elif isinstance(value, ast.Name):
            v = value.id
            for t in targets:
                if isinstance(t, ast.Name) and t.id != v:
                    if v in self.module_funcs and v not in self.jit:
                        self.func_aliases[t.id] = v
                    if v in self.jit:
                        self.jit_aliases[t.id] = v
                elif isinstance(t, ast.Attribute) and v in self.jit:
                    self.jit_attr_aliases[t.attr] = v

    def is_dsl_handle(self, e: ast.expr | None) -> bool:
        """A compiled CuTe or TileLang kernel (see :class:`~kernelbench.evaluation.guards.dsl.HandleIndex`)."""
        return self.dsl.cute_handles.is_handle(e) or self.dsl.tilelang_handles.is_handle(e)

    def is_ext(self, e: ast.expr | None) -> bool:
        if e is None:
            return False
        if isinstance(e, ast.Call):
            if self.r.resolve(e.func) in BUILD_FUNCS:
                return True
            if isinstance(e.func, ast.Name) and e.func.id in self.ext_getters:
                return True
            if isinstance(e.func, ast.Attribute) and e.func.attr in self.ext_getters:
                return True
            return False
        if isinstance(e, ast.Name):
            return e.id in self.ext_names
        if isinstance(e, ast.Attribute):
            return e.attr in self.ext_attrs and not isinstance(e.value, ast.Call)
        if isinstance(e, (ast.IfExp,)):
            return self.is_ext(e.body) or self.is_ext(e.orelse)
        if isinstance(e, ast.BoolOp):
            return any(self.is_ext(v) for v in e.values)
        return False

    # --- lookups -----------------------------------------------------------------------------

    def find_method(self, cls: str, name: str, seen: set[str] | None = None) -> FuncNode | None:
        seen = seen or set()
        if cls in seen or cls not in self.classes:
            return None
        seen.add(cls)
        for item in self.classes[cls].body:
            if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)) and item.name == name:
                return item
        for b in self.classes[cls].bases:
            if isinstance(b, ast.Name):
                found = self.find_method(b.id, name, seen)
                if found is not None:
                    return found
        return None

    def module_class_bases(self, cls: str) -> list[str]:
        return [b.id for b in self.classes[cls].bases if isinstance(b, ast.Name) and b.id in self.classes] \
            if cls in self.classes else []

    def entry_points(self) -> list[FuncNode]:
        out = []
        for name in ("forward", "__call__"):
            m = self.find_method("ModelNew", name)
            if m is not None:
                out.append(m)
        return out

    def kernel_name(self, e: ast.expr) -> str | None:
        """The Triton kernel a subscripted expression denotes (``k`` in ``k[grid](...)``)."""
        if isinstance(e, ast.Name):
            if e.id in self.jit:
                return e.id
            return self.jit_aliases.get(e.id)
        if isinstance(e, ast.Attribute):
            return self.jit_attr_aliases.get(e.attr)
        if isinstance(e, ast.Call):  # torch.library.wrap_triton(kernel)[grid](...)
            for a in e.args:
                k = self.kernel_name(a)
                if k:
                    return k
        return None

    def _dispatch_table(self, e: ast.expr) -> list[FuncNode]:
        """Functions held in a dict/list/tuple literal that ``e`` names (module name or self attribute)."""
        if isinstance(e, ast.Name):
            values = self.name_values.get(e.id, [])
        elif isinstance(e, ast.Attribute):
            values = self.self_attr_values.get(e.attr, [])
        else:
            return []
        out: list[FuncNode] = []
        for v in values:
            elts = list(v.values) if isinstance(v, ast.Dict) else list(v.elts) if isinstance(
                v, (ast.List, ast.Tuple)) else []
            for el in elts:
                if isinstance(el, ast.Name) and el.id in self.module_funcs and el.id not in self.jit:
                    out.append(self.module_funcs[el.id])
                elif isinstance(el, ast.Lambda):
                    out.append(el)
        return out

    def _self_attr_callees(self, attr: str) -> tuple[list[FuncNode], str | None]:
        targets: list[FuncNode] = []
        compute = None
        for v in self.self_attr_values.get(attr, []):
            if isinstance(v, ast.Name) and v.id in self.module_funcs:
                targets.append(self.module_funcs[v.id])
            elif isinstance(v, ast.Lambda):
                targets.append(v)
            elif isinstance(v, ast.Call):
                if isinstance(v.func, ast.Name) and v.func.id in self.classes:
                    for m in ("forward", "__call__"):
                        f = self.find_method(v.func.id, m)
                        if f is not None:
                            targets.append(f)
                else:
                    path = self.r.resolve(v.func)
                    if matches(path, "torch.nn") and path is not None and path.split(".")[-1] not in _NN_CONTAINERS \
                            and not matches(path, "torch.nn.functional") and path.split(".")[-1][:1].isupper():
                        compute = f"self.{attr} ({path.split('.')[-1]} module)"
                    elif isinstance(v.func, ast.Name) and v.func.id == "Model":
                        compute = f"self.{attr} (the reference Model)"
        return targets, compute

    # --- the walk ----------------------------------------------------------------------------

    def analyze_call(self, call: ast.Call, ctx: FuncCtx) -> CallSite:
        site = CallSite(node=call, owner=ctx.node)
        site.dsl_launch = self.dsl.launch_of(call)
        f = call.func
        path = self.r.resolve(f)
        if isinstance(f, ast.Subscript):
            k = self.kernel_name(f.value)
            if k:
                site.launches.append(k)
                return site
            table = self._dispatch_table(f.value)
            if table:  # IMPLS[x.dtype](x): every function in the table may run
                site.targets.extend(table)
            else:
                site.launches.append("?")
            return site
        if isinstance(f, ast.Name):
            n = f.id
            if n in self.module_funcs and n not in self.jit:
                site.targets.append(self.module_funcs[n])
            elif n in self.func_aliases:
                site.targets.append(self.module_funcs[self.func_aliases[n]])
            elif n in self.classes:
                for m in ("__init__",):
                    t = self.find_method(n, m)
                    if t is not None:
                        site.targets.append(t)
            elif n in self.ext_fn_names:
                site.ext_fn = self.ext_fn_names[n]
            elif n == "Model" and "Model" not in self.classes:
                site.compute = "the reference Model"
        elif isinstance(f, ast.Attribute):
            self._analyze_attribute_call(site, f, ctx)
        elif isinstance(f, ast.Call):
            inner = f.func
            if isinstance(inner, ast.Name) and inner.id in self.classes:
                for m in ("forward", "__call__"):
                    t = self.find_method(inner.id, m)
                    if t is not None:
                        site.targets.append(t)
            elif self.r.resolve(inner) == "builtins.getattr" and f.args and self.is_ext(f.args[0]):
                site.ext_fn = const_str(f.args[1]) if len(f.args) > 1 else "?"
        if site.compute is None and path is not None:
            site.compute = _torch_compute(path)
        if path is not None and path.startswith("torch.ops."):
            rest = path[len("torch.ops."):].removesuffix(".default")
            if rest in self.custom_ops:
                site.targets.append(self.custom_ops[rest])
                site.compute = None
            elif rest.split(".")[0] in self.cuda_namespaces:
                site.ext_fn = rest.split(".")[-1]
                site.compute = None
        return site

    def _analyze_attribute_call(self, site: CallSite, f: ast.Attribute, ctx: FuncCtx) -> None:
        v, m = f.value, f.attr
        if m == "run" and self.kernel_name(v):
            site.launches.append(self.kernel_name(v) or "?")
            return
        if self.is_ext(v):
            site.ext_fn = m
            return
        if isinstance(v, ast.Name) and ctx.self_name is not None and v.id == ctx.self_name and ctx.cls:
            t = self.find_method(ctx.cls, m)
            if t is not None:
                site.targets.append(t)
                return
            if m in self.ext_fn_attrs:
                site.ext_fn = self.ext_fn_attrs[m]
                return
            targets, compute = self._self_attr_callees(m)
            site.targets.extend(targets)
            site.compute = compute
            return
        if isinstance(v, ast.Name) and v.id in self.classes:
            t = self.find_method(v.id, "forward" if m == "apply" else m)
            if t is not None:
                site.targets.append(t)
            return
        if isinstance(v, ast.Call) and isinstance(v.func, ast.Name) and v.func.id == "super":
            bases = self.module_class_bases(ctx.cls) if ctx.cls else []
            for b in bases:
                t = self.find_method(b, m)
                if t is not None:
                    site.targets.append(t)
                    return
            if m in ("forward", "__call__") and ctx.cls == "ModelNew":
                site.compute = "super().forward (the parent class's PyTorch forward)"
            return
        if isinstance(v, ast.Attribute) and isinstance(v.value, ast.Name) and v.value.id == ctx.self_name:
            for val in self.self_attr_values.get(v.attr, []):
                if isinstance(val, ast.Call) and isinstance(val.func, ast.Name) and val.func.id in self.classes:
                    t = self.find_method(val.func.id, m)
                    if t is not None:
                        site.targets.append(t)
        if self.r.resolve(v) is None and m in TENSOR_COMPUTE_METHODS and not site.targets:
            site.compute = f".{m}()"
            return
        if not site.targets and self.r.resolve(v) is None:
            # unknown receiver: any module-level class method of that name may run
            for cls in self.classes:
                t = self.find_method(cls, m)
                if t is not None and t not in site.targets:
                    site.targets.append(t)


def _torch_compute(path: str) -> str | None:
    for ns in _TORCH_COMPUTE_NAMESPACES:
        if matches(path, ns) and path != ns:
            return path
    if path.startswith("torch.") and path.count(".") == 1 and path.split(".")[1] in TORCH_COMPUTE:
        return path
    if path.startswith("torch.Tensor.") and path.split(".")[-1] in TENSOR_COMPUTE_METHODS:
        return path
    return None
