"""Rules that look at single nodes anywhere in the candidate, independent of the call graph.

Forbidden modules and APIs, monkey-patching, introspection, precision downcasts, tensor
subclasses, input-keyed caches, file writes and the use of the reference ``Model``.
"""

from __future__ import annotations

import ast

from kernelbench.evaluation.guards.names import Resolver, const_str, matches, matches_any
from kernelbench.evaluation.guards.report import FindingSink

#: (path prefix, rule, what it is). Matched component-wise against resolved dotted paths.
BANNED: tuple[tuple[str, str, str], ...] = (
    ("threading", "threads", "threading"),
    ("_thread", "threads", "_thread"),
    ("concurrent", "threads", "concurrent.futures pools"),
    ("multiprocessing", "threads", "multiprocessing"),
    ("torch.multiprocessing", "threads", "torch.multiprocessing"),
    ("os.fork", "threads", "os.fork"),
    ("os.forkpty", "threads", "os.forkpty"),
    ("os.register_at_fork", "threads", "os.register_at_fork"),
    ("subprocess", "subprocess", "subprocess"),
    ("os.system", "subprocess", "os.system"),
    ("os.popen", "subprocess", "os.popen"),
    ("os.posix_spawn", "subprocess", "os.posix_spawn"),
    ("os.posix_spawnp", "subprocess", "os.posix_spawnp"),
    ("pty", "subprocess", "pty"),
    ("socket", "network", "socket"),
    ("urllib", "network", "urllib"),
    ("urllib3", "network", "urllib3"),
    ("requests", "network", "requests"),
    ("http", "network", "http"),
    ("httpx", "network", "httpx"),
    ("aiohttp", "network", "aiohttp"),
    ("ftplib", "network", "ftplib"),
    ("smtplib", "network", "smtplib"),
    ("telnetlib", "network", "telnetlib"),
    ("xmlrpc", "network", "xmlrpc"),
    ("websocket", "network", "websocket"),
    ("websockets", "network", "websockets"),
    ("paramiko", "network", "paramiko"),
    ("ctypes", "ctypes", "ctypes"),
    ("cffi", "ctypes", "cffi"),
    ("mmap", "ctypes", "mmap"),
    ("gc.get_objects", "introspection", "gc.get_objects"),
    ("gc.get_referrers", "introspection", "gc.get_referrers"),
    ("gc.get_referents", "introspection", "gc.get_referents"),
    ("gc.garbage", "introspection", "gc.garbage"),
    ("gc.callbacks", "introspection", "gc.callbacks"),
    ("inspect.currentframe", "introspection", "inspect.currentframe"),
    ("inspect.stack", "introspection", "inspect.stack"),
    ("inspect.trace", "introspection", "inspect.trace"),
    ("inspect.getouterframes", "introspection", "inspect.getouterframes"),
    ("inspect.getinnerframes", "introspection", "inspect.getinnerframes"),
    ("inspect.getframeinfo", "introspection", "inspect.getframeinfo"),
    ("inspect.getmembers", "introspection", "inspect.getmembers"),
    ("inspect.getclosurevars", "introspection", "inspect.getclosurevars"),
    ("sys._getframe", "introspection", "sys._getframe"),
    ("sys._current_frames", "introspection", "sys._current_frames"),
    ("sys.settrace", "introspection", "sys.settrace"),
    ("sys.setprofile", "introspection", "sys.setprofile"),
    ("kernelbench", "introspection", "the evaluator's own package (kernelbench)"),
    ("__main__", "introspection", "the __main__ module"),
    ("sys.exit", "process-control", "sys.exit"),
    ("os._exit", "process-control", "os._exit"),
    ("os.kill", "process-control", "os.kill"),
    ("os.killpg", "process-control", "os.killpg"),
    ("os.abort", "process-control", "os.abort"),
    ("signal", "process-control", "signal handlers"),
    ("builtins.exit", "process-control", "exit()"),
    ("builtins.quit", "process-control", "quit()"),
    ("torch.compile", "compiler", "torch.compile"),
    ("torch.jit", "compiler", "TorchScript (torch.jit)"),
    ("torch._dynamo", "compiler", "torch._dynamo"),
    ("torch._inductor", "compiler", "torch._inductor"),
    ("torch.export", "compiler", "torch.export"),
    ("torch._export", "compiler", "torch._export"),
    ("torch.cuda.jiterator", "compiler", "torch.cuda.jiterator"),
    ("tvm", "compiler", "TVM"),
    ("jax", "compiler", "JAX"),
    ("jaxlib", "compiler", "JAX"),
    ("tensorflow", "compiler", "TensorFlow"),
    ("torch_tensorrt", "compiler", "Torch-TensorRT"),
    ("tensorrt", "compiler", "TensorRT"),
    ("onnxruntime", "compiler", "ONNX Runtime"),
    ("numba", "compiler", "Numba"),
    ("cupy", "compiler", "CuPy"),
    ("torch_xla", "compiler", "torch_xla"),
    ("hidet", "compiler", "Hidet"),
    ("taichi", "compiler", "Taichi"),
    ("unittest.mock", "monkey-patch", "unittest.mock"),
    ("mock", "monkey-patch", "mock"),
    ("builtins.exec", "dynamic-code", "exec()"),
    ("builtins.eval", "dynamic-code", "eval()"),
    ("builtins.compile", "dynamic-code", "compile()"),
    ("types.FunctionType", "dynamic-code", "types.FunctionType"),
    ("types.CodeType", "dynamic-code", "types.CodeType"),
    ("marshal", "dynamic-code", "marshal"),
    ("torch.cuda.Stream", "side-stream", "torch.cuda.Stream"),
    ("torch.cuda.stream", "side-stream", "torch.cuda.stream"),
    ("torch.cuda.streams", "side-stream", "torch.cuda.streams"),
    ("torch.cuda.ExternalStream", "side-stream", "torch.cuda.ExternalStream"),
    ("torch.cuda.set_stream", "side-stream", "torch.cuda.set_stream"),
    ("torch.cuda.StreamContext", "side-stream", "torch.cuda.StreamContext"),
    ("torch.Stream", "side-stream", "torch.Stream"),
    ("torch.cuda.Event", "cuda-event", "torch.cuda.Event"),
    ("torch.Event", "cuda-event", "torch.Event"),
    ("torch.cuda.CUDAGraph", "cuda-graph", "torch.cuda.CUDAGraph"),
    ("torch.cuda.graph", "cuda-graph", "torch.cuda.graph"),
    ("torch.cuda.graphs", "cuda-graph", "torch.cuda.graphs"),
    ("torch.cuda.make_graphed_callables", "cuda-graph", "torch.cuda.make_graphed_callables"),
    ("torch.autocast", "precision-downcast", "autocast"),
    ("torch.amp", "precision-downcast", "torch.amp autocast"),
    ("torch.cuda.amp", "precision-downcast", "torch.cuda.amp autocast"),
    ("torch.cpu.amp", "precision-downcast", "torch.cpu.amp autocast"),
    ("hashlib", "input-keyed-cache", "hashlib"),
    ("zlib.crc32", "input-keyed-cache", "zlib.crc32"),
    ("zlib.adler32", "input-keyed-cache", "zlib.adler32"),
    ("xxhash", "input-keyed-cache", "xxhash"),
    ("builtins.hash", "input-keyed-cache", "hash()"),
    ("builtins.id", "input-keyed-cache", "id()"),
    ("torch.manual_seed", "rng-seed", "torch.manual_seed"),
    ("torch.seed", "rng-seed", "torch.seed"),
    ("torch.set_rng_state", "rng-seed", "torch.set_rng_state"),
    ("torch.random.manual_seed", "rng-seed", "torch.random.manual_seed"),
    ("torch.random.set_rng_state", "rng-seed", "torch.random.set_rng_state"),
    ("torch.cuda.manual_seed", "rng-seed", "torch.cuda.manual_seed"),
    ("torch.cuda.manual_seed_all", "rng-seed", "torch.cuda.manual_seed_all"),
    ("torch.cuda.set_rng_state", "rng-seed", "torch.cuda.set_rng_state"),
    ("torch.cuda.set_rng_state_all", "rng-seed", "torch.cuda.set_rng_state_all"),
    ("random.seed", "rng-seed", "random.seed"),
    ("numpy.random.seed", "rng-seed", "numpy.random.seed"),
)

_BANNED_PREFIX_FAMILIES = (("os.exec", "subprocess"), ("os.spawn", "subprocess"))

_RULE_VERBS = {
    "threads": "uses {what}: work can run outside the timed call",
    "subprocess": "uses {what}: runs other programs",
    "network": "uses {what}: network access",
    "ctypes": "uses {what}: raw memory / foreign-function access",
    "introspection": "uses {what}: it can reach objects it was not given",
    "process-control": "uses {what}: it can end or signal processes mid-measurement",
    "compiler": "uses {what}: another compiler does the work",
    "monkey-patch": "uses {what}: it patches other modules",
    "dynamic-code": "uses {what}: code generated at run time is invisible to the guard",
    "side-stream": "uses {what}: work on a stream other than the current one",
    "cuda-event": "uses {what}: CUDA events of its own",
    "cuda-graph": "uses {what}: CUDA graph capture/replay",
    "precision-downcast": "uses {what}: reduced-precision compute",
    "input-keyed-cache": "uses {what}: keys on input identity or content",
    "rng-seed": "uses {what}: sets RNG seeds or state",
}

#: Modules and packages whose attributes a candidate must never assign.
PROTECTED = ("torch", "triton", "time", "timeit", "kernelbench", "builtins", "numpy")

_LOW_DTYPES = frozenset({
    "torch.float16", "torch.half", "torch.bfloat16", "triton.language.float16", "triton.language.bfloat16",
})
_LOW_DTYPE_PREFIXES = ("torch.float8", "triton.language.float8")
_FRAME_ATTRS = frozenset({"f_back", "f_locals", "f_globals", "f_builtins", "tb_frame", "gi_frame", "cr_frame",
                          "ag_frame", "__globals__", "__subclasses__"})
_TENSOR_BASES = ("torch.Tensor", "torch._C.TensorBase", "torch._C._TensorBase", "torch.nn.Parameter",
                 "torch.nn.parameter.Parameter")
_MUTATING = frozenset({"update", "pop", "setdefault", "clear", "popitem", "__setitem__", "__delitem__"})
_WRITE_FUNCS = {  # resolved function -> index of the destination argument
    "torch.save": 1, "numpy.save": 0, "numpy.savez": 0, "numpy.savetxt": 0, "shutil.copy": 1, "shutil.copy2": 1,
    "shutil.copyfile": 1, "shutil.copytree": 1, "shutil.move": 1, "shutil.rmtree": 0, "os.remove": 0,
    "os.unlink": 0, "os.rename": 1, "os.replace": 1, "os.rmdir": 0, "os.removedirs": 0, "os.makedirs": 0,
    "os.mkdir": 0, "os.truncate": 0, "os.symlink": 1, "os.link": 1, "os.chmod": 0,
}
_PATH_METHODS_WRITING = frozenset({"write_text", "write_bytes", "mkdir", "touch", "unlink", "rmdir", "rename",
                                   "symlink_to", "hardlink_to"})


def banned(path: str | None) -> tuple[str, str] | None:
    """(rule, what) when ``path`` is a forbidden module or API."""
    if path is None:
        return None
    for prefix, rule, what in BANNED:
        if matches(path, prefix):
            return rule, what
    for prefix, rule in _BANNED_PREFIX_FAMILIES:
        if path.startswith(prefix):
            return rule, path
    return None


def is_low_dtype(path: str | None) -> bool:
    return path is not None and (path in _LOW_DTYPES or path.startswith(_LOW_DTYPE_PREFIXES))


def protected(path: str | None) -> bool:
    return matches_any(path, PROTECTED) is not None


class NodeChecks:
    """Runs the node-level rules over the whole module."""

    def __init__(self, tree: ast.Module, resolver: Resolver, sink: FindingSink) -> None:
        self.tree = tree
        self.r = resolver
        self.sink = sink
        self._patch_nodes: set[int] = set()
        self._temp_names = self._collect_temp_names()

    def run(self) -> None:
        for node in ast.walk(self.tree):
            if isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Name) \
                    and node.slice.id == "__name__" and self.r.resolve(node.value) == "sys.modules":
                self._mark(node.value)  # the candidate's own module: harmless
        for node in ast.walk(self.tree):
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                self._check_import(node)
            elif isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign)):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                for t in targets:
                    self._check_target(t, node.value, node.lineno)
            elif isinstance(node, ast.Delete):
                for t in node.targets:
                    self._check_target(t, None, node.lineno)
            elif isinstance(node, ast.Call):
                self._check_call(node)
            elif isinstance(node, ast.ClassDef):
                self._check_class(node)
        # Load-context uses run last so that patch targets found above are not reported twice.
        for node in ast.walk(self.tree):
            if isinstance(node, (ast.Name, ast.Attribute)) and isinstance(node.ctx, ast.Load):
                self._check_use(node)

    # --- forbidden modules -------------------------------------------------------------------

    def _check_import(self, node: ast.Import | ast.ImportFrom) -> None:
        paths: list[str] = []
        if isinstance(node, ast.Import):
            paths = [a.name for a in node.names]
        elif node.module and node.level == 0:
            paths = [f"{node.module}.{a.name}" for a in node.names] + [node.module]
        for path in paths:
            hit = banned(path)
            if hit:
                rule, what = hit
                self.sink.add(rule, "imports " + _RULE_VERBS[rule].format(what=what).removeprefix("uses "),
                              node.lineno)
                return

    def _check_use(self, node: ast.Name | ast.Attribute) -> None:
        if id(node) in self._patch_nodes:
            return
        path = self.r.resolve(node)
        if isinstance(node, ast.Attribute) and node.attr in _FRAME_ATTRS:
            self.sink.add("introspection", f"reads .{node.attr}: frame and global-namespace access reaches "
                                           "objects it was not given", node.lineno)
            return
        if isinstance(node, ast.Attribute) and node.attr in ("_new_shared_cuda", "_share_cuda_",
                                                               "_new_with_weak_ptr", "_share_filename_"):
            self.sink.add("ipc", f"uses .{node.attr}: shared storage across processes", node.lineno)
            return
        if path == "sys.modules":
            self.sink.add("introspection", "reads sys.modules: it reaches other modules' objects, the "
                                           "evaluator's included", node.lineno)
            return
        hit = banned(path)
        if not hit:
            return
        root = _root_name(node)
        if root in self.r.aliases and banned(self.r.aliases[root]) is not None:
            return  # reported where it was imported
        rule, what = hit
        self.sink.add(rule, _RULE_VERBS[rule].format(what=what), node.lineno)

    # --- monkey-patching --------------------------------------------------------------------

    def _check_target(self, t: ast.expr, value: ast.expr | None, line: int) -> None:
        if isinstance(t, (ast.Tuple, ast.List)):
            for e in t.elts:
                self._check_target(e, None, line)
            return
        if isinstance(t, ast.Attribute):
            if t.attr == "__class__":
                self.sink.add("tensor-subclass", "assigns __class__: the object becomes another type", line)
                return
            if isinstance(t.value, ast.Call) and self.r.resolve(t.value.func) == "builtins.type":
                self._mark(t)
                self.sink.add("monkey-patch", f"patches .{t.attr} on a class through type(...)", line)
                return
            base = self.r.resolve(t.value)
            if matches(base, "torch.backends"):
                self._mark(t)
                self._backend_flag(f"{base}.{t.attr}", t.attr, value, line)
                return
            if protected(base):
                self._mark(t)
                verb = "deletes" if value is None else "assigns"
                self.sink.add("monkey-patch", f"{verb} {base}.{t.attr}: patching {base.split('.')[0]} can fake "
                                              "timings or checks", line)
            return
        if isinstance(t, ast.Subscript):
            base = self.r.resolve(t.value)
            if base == "sys.modules":
                self._mark(t)
                key = const_str(t.slice) or "..."
                self.sink.add("monkey-patch", f"replaces sys.modules[{key!r}]: other code imports the fake", line)
            elif base and (base == "builtins" or (base.endswith(".__dict__") and protected(base[:-9]))):
                self._mark(t)
                self.sink.add("monkey-patch", f"writes into {base}", line)

    def _backend_flag(self, full: str, attr: str, value: ast.expr | None, line: int) -> None:
        if "tf32" in attr or "reduced_precision" in attr or attr == "fp32_precision":
            v = value.value if isinstance(value, ast.Constant) else object()
            if v is False or v in ("ieee", "highest"):
                self.sink.add("backend-flag", f"sets {full} = {v!r}", line)
            else:
                self.sink.add("precision-downcast", f"switches {full} on: fp32 matmuls/convolutions may run in "
                                                    "TF32 or reduced precision", line)
        else:
            self.sink.add("backend-flag", f"sets {full} (a global torch setting)", line)

    def _mark(self, node: ast.AST) -> None:
        for n in ast.walk(node):
            self._patch_nodes.add(id(n))

    # --- calls ------------------------------------------------------------------------------

    def _check_call(self, node: ast.Call) -> None:
        fn = self.r.resolve(node.func)
        line = node.lineno
        if not isinstance(node.func, (ast.Name, ast.Attribute)):
            hit = banned(fn)
            if hit:
                self.sink.add(hit[0], _RULE_VERBS[hit[0]].format(what=hit[1]), line)
        if fn in ("builtins.setattr", "builtins.delattr", "builtins.object.__setattr__",
                  "builtins.object.__delattr__", "builtins.type.__setattr__") and node.args:
            target = node.args[0]
            tpath = self.r.resolve(target)
            via_type = isinstance(target, ast.Call) and self.r.resolve(target.func) == "builtins.type"
            if protected(tpath) or via_type or tpath == "sys.modules":
                self._mark(target)
                name = const_str(node.args[1]) if len(node.args) > 1 else None
                what = f"{tpath or 'type(...)'}.{name or '<dynamic>'}"
                self.sink.add("monkey-patch", f"{fn.split('.')[-1]}({what}): patching can fake timings or checks",
                              line)
            elif matches(tpath, "torch.backends"):
                self.sink.add("backend-flag", f"sets an attribute of {tpath}", line)
        if isinstance(node.func, ast.Attribute) and node.func.attr in _MUTATING:
            holder = self.r.resolve(node.func.value)
            is_vars = (isinstance(node.func.value, ast.Call) and self.r.resolve(node.func.value.func) == "builtins.vars"
                       and node.func.value.args and protected(self.r.resolve(node.func.value.args[0])))
            if holder == "sys.modules" or is_vars or (holder and holder.endswith(".__dict__") and protected(holder[:-9])):
                self._mark(node.func.value)
                self.sink.add("monkey-patch", f"changes {holder or 'vars(...)'} with .{node.func.attr}()", line)
        if fn in ("builtins.__import__", "importlib.import_module") and node.args and const_str(node.args[0]) is None:
            self.sink.add("dynamic-code", "imports a module whose name is computed at run time", line)
        self._check_precision_call(node, fn)
        self._check_subclass_call(node, fn)
        self._check_cache_call(node)
        self._check_write_call(node, fn)
        if isinstance(node.func, ast.Name) and node.func.id == "Model" and "Model" not in self.r.aliases:
            self.sink.add("reference-model", "instantiates the reference Model", line)

    def _check_precision_call(self, node: ast.Call, fn: str | None) -> None:
        line = node.lineno
        if isinstance(node.func, ast.Attribute) and fn is None:
            attr = node.func.attr
            if attr in ("half", "bfloat16") and not node.args:
                self.sink.add("precision-downcast", f".{attr}() casts to a 16-bit type", line)
                return
            if attr in ("to", "type"):
                for a in list(node.args) + [k.value for k in node.keywords if k.arg == "dtype"]:
                    if is_low_dtype(self.r.resolve(a)):
                        self.sink.add("precision-downcast", f".{attr}({self.r.resolve(a)}) casts to a low-precision "
                                                            "type", line)
                        return
        for k in node.keywords:
            if k.arg in ("dtype", "out_dtype") and is_low_dtype(self.r.resolve(k.value)):
                self.sink.add("precision-downcast", f"{k.arg}={self.r.resolve(k.value)}: low-precision result", line)
                return
        if fn == "triton.language.cast" and len(node.args) > 1 and is_low_dtype(self.r.resolve(node.args[1])):
            self.sink.add("precision-downcast", "tl.cast to a 16-bit type", line)
        elif fn == "torch.set_float32_matmul_precision":
            arg = const_str(node.args[0]) if node.args else None
            if arg != "highest":
                self.sink.add("precision-downcast", f"set_float32_matmul_precision({arg!r}) lets fp32 matmuls use "
                                                    "TF32/bf16", line)
        elif fn == "torch.set_default_dtype" and node.args and is_low_dtype(self.r.resolve(node.args[0])):
            self.sink.add("precision-downcast", "sets a 16-bit default dtype", line)
        elif fn == "triton.language.dot":
            kw = {k.arg: k.value for k in node.keywords}
            prec = kw.get("input_precision")
            tf32 = kw.get("allow_tf32")
            if prec is not None:
                value = const_str(prec)
                if isinstance(prec, ast.Constant) and value != "ieee":
                    self.sink.add("precision-downcast", f"tl.dot(input_precision={value!r}): fp32 inputs are "
                                                        "multiplied in reduced precision", line)
            elif tf32 is not None:
                if isinstance(tf32, ast.Constant) and tf32.value is not False:
                    self.sink.add("precision-downcast", "tl.dot(allow_tf32=True): fp32 inputs run in TF32", line)
            else:
                self.sink.add("precision-downcast", "tl.dot without input_precision=\"ieee\": fp32 inputs run in TF32 "
                                                    "(about 1e-3 relative error)", line)

    def _check_subclass_call(self, node: ast.Call, fn: str | None) -> None:
        attr = node.func.attr if isinstance(node.func, ast.Attribute) else None
        if attr in ("_make_subclass", "_make_wrapper_subclass", "as_subclass"):
            self.sink.add("tensor-subclass", f"creates a tensor subclass instance (.{attr})", node.lineno)

    def _check_cache_call(self, node: ast.Call) -> None:
        if isinstance(node.func, ast.Attribute) and self.r.resolve(node.func) is None:
            if node.func.attr == "data_ptr":
                self.sink.add("input-keyed-cache", ".data_ptr() in Python: tensor addresses are reused by the "
                                                   "allocator and say nothing about content", node.lineno)
            elif node.func.attr == "tobytes":
                self.sink.add("input-keyed-cache", ".tobytes(): hashing tensor content", node.lineno)

    def _check_write_call(self, node: ast.Call, fn: str | None) -> None:
        dest: ast.expr | None = None
        what = ""
        if fn in ("builtins.open", "io.open", "codecs.open"):
            mode = node.args[1] if len(node.args) > 1 else next((k.value for k in node.keywords if k.arg == "mode"), None)
            m = const_str(mode) if mode is not None else "r"
            if m is None or any(c in m for c in "wax+"):
                dest = node.args[0] if node.args else next((k.value for k in node.keywords if k.arg == "file"), None)
                what = f"open(..., {m!r})"
        elif fn in _WRITE_FUNCS:
            idx = _WRITE_FUNCS[fn]
            dest = node.args[idx] if len(node.args) > idx else next(
                (k.value for k in node.keywords if k.arg in ("f", "dst", "file", "path")), None)
            what = fn
        elif isinstance(node.func, ast.Attribute) and fn is None:
            attr = node.func.attr
            if attr in _PATH_METHODS_WRITING:
                dest, what = node.func.value, f".{attr}()"
            elif attr == "tofile":
                dest, what = (node.args[0] if node.args else None), ".tofile()"
            elif attr == "open" and isinstance(node.func.value, ast.Call):
                mode = node.args[0] if node.args else next((k.value for k in node.keywords if k.arg == "mode"), None)
                m = const_str(mode) if mode is not None else "r"
                if m is None or any(c in m for c in "wax+"):
                    dest, what = node.func.value, f".open({m!r})"
        if what and not self._is_temp(dest):
            self.sink.add("file-write", f"{what} writes outside a temporary directory", node.lineno)

    # --- classes ------------------------------------------------------------------------------

    def _check_class(self, node: ast.ClassDef) -> None:
        flagged = False
        for b in node.bases:
            if matches_any(self.r.resolve(b), _TENSOR_BASES):
                self.sink.add("tensor-subclass", f"class {node.name} subclasses {self.r.resolve(b)}", node.lineno)
                flagged = True
            if node.name == "ModelNew" and isinstance(b, ast.Name) and b.id == "Model":
                self.sink.add("reference-model", "ModelNew inherits the reference Model", node.lineno)
        if not flagged:
            for item in node.body:
                if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)) and item.name in (
                        "__torch_function__", "__torch_dispatch__"):
                    self.sink.add("tensor-subclass", f"class {node.name} defines {item.name}", item.lineno)

    # --- temporary paths ---------------------------------------------------------------------

    def _collect_temp_names(self) -> set[str]:
        """Names bound (flow-insensitively) to temporary paths, derived from ``tempfile`` or /tmp."""
        names: set[str] = set()
        bindings = [n for n in ast.walk(self.tree) if isinstance(n, (ast.Assign, ast.withitem))]
        while True:
            before = len(names)
            for node in bindings:
                if isinstance(node, ast.Assign) and self._is_temp(node.value, names):
                    for t in node.targets:
                        names.update(n.id for n in ast.walk(t) if isinstance(n, ast.Name))
                elif isinstance(node, ast.withitem) and node.optional_vars is not None and self._is_temp(
                        node.context_expr, names):
                    names.update(n.id for n in ast.walk(node.optional_vars) if isinstance(n, ast.Name))
            if len(names) == before:
                return names

    def _is_temp(self, expr: ast.expr | None, names: set[str] | None = None) -> bool:
        if expr is None:
            return False
        names = self._temp_names if names is None else names
        for n in ast.walk(expr):
            if isinstance(n, ast.Call) and matches(self.r.resolve(n.func), "tempfile"):
                return True
            if isinstance(n, ast.Attribute) and matches(self.r.resolve(n), "tempfile"):
                return True
            if isinstance(n, ast.Name) and n.id in names:
                return True
            s = const_str(n)
            if s is not None and (s == "/tmp" or s.startswith("/tmp/")):
                return True
        return False



def _root_name(node: ast.AST) -> str | None:
    while isinstance(node, (ast.Attribute, ast.Subscript, ast.Call)):
        node = node.func if isinstance(node, ast.Call) else node.value
    return node.id if isinstance(node, ast.Name) else None
