"""Scan CUDA/C++ held in the candidate's Python string literals, without compiling it.

A CUDA candidate keeps its kernels in strings passed to ``load_inline``. This module finds the
``__global__`` kernels, the host functions and which of them launch a kernel (``<<<...>>>`` or
``cudaLaunchKernel``), the pybind/TORCH_LIBRARY bindings, and the patterns the guard reports
inside C++: side streams, events, IPC, precision downcasts and ATen compute in host code.
It is a lexical scan with brace matching, good enough for the code LLMs write, not a C++ parser.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass, field

_MARKERS = ("__global__", "<<<", "#include", "torch::Tensor", "at::Tensor", "PYBIND11_MODULE",
            "TORCH_LIBRARY", "cudaStream", "__device__", "cudaIpc")

_KEYWORDS = frozenset({
    "if", "for", "while", "switch", "catch", "return", "sizeof", "alignof", "decltype", "static_assert",
    "__launch_bounds__", "defined", "template", "typename", "operator", "new", "delete", "throw",
})

_KERNEL_RE = re.compile(
    r"__global__\s+(?:__launch_bounds__\s*\([^)]*\)\s*)?(?:static\s+|inline\s+|__forceinline__\s+)*"
    r"void\s+(?:__launch_bounds__\s*\([^)]*\)\s*)?([A-Za-z_]\w*)\s*\(")
_CALL_RE = re.compile(r"\b([A-Za-z_]\w*)\s*(?:<[^;(){}<>]*(?:<[^;(){}<>]*>[^;(){}<>]*)*>)?\s*\(")
_LAUNCH_API_RE = re.compile(r"\bcudaLaunch(?:Cooperative)?Kernel(?:Ex)?\s*\(")
_BIND_RE = re.compile(r"\b\w+\s*\.\s*(?:def|impl)\s*\(\s*\"([A-Za-z_][\w.:]*)(?:\([^\"]*\))?[^\"]*\"\s*,\s*"
                      r"(?:TORCH_FN\s*\(\s*)?&?\s*(?:[\w:]+::)?([A-Za-z_]\w*)")
_TORCH_LIBRARY_RE = re.compile(r"TORCH_LIBRARY(?:_IMPL|_FRAGMENT)?\s*\(\s*(\w+)")

_STREAM_CREATE_RE = re.compile(r"\bcudaStreamCreate\w*\s*\(\s*&?\s*([A-Za-z_]\w*)?")
_STREAM_POOL_RE = re.compile(r"(?:\b([A-Za-z_]\w*)\s*=\s*)?[\w:]*getStreamFromPool\s*\(")
_EVENT_RE = re.compile(r"\bcudaEventCreate\w*\s*\(")
_GRAPH_RE = re.compile(r"\bcudaGraph\w*\s*\(|\bcudaStreamBeginCapture\s*\(")
_IPC_RE = re.compile(r"\bcudaIpc\w+")
_DOWNCAST_RE = re.compile(r"\b(__float2half(?:_r[nzdu])?|__floats2half2_rn|__float22half2_rn|"
                          r"__float2bfloat16(?:_r[nzdu])?|__floats2bfloat162_rn|__float22bfloat162_rn)\s*\(")
_TF32_RE = re.compile(r"\b(wmma::precision::tf32|precision::tf32|__float_to_tf32|cvt\.rna\.tf32|"
                      r"CUBLAS_TF32_TENSOR_OP_MATH|CUBLAS_COMPUTE_32F_FAST_\w+|CUBLASLT_\w*TF32\w*)")
#: A source that dispatches on dtype converts to half for half inputs, not to cut fp32 precision.
_DTYPE_DISPATCH_RE = re.compile(r"AT_DISPATCH_\w*(?:HALF|AND2|AND3|REDUCED)\w*|\bscalar_t\b|\b(?:at|c10)::"
                                r"(?:Half|BFloat16)\b|\bk(?:Half|BFloat16)\b|ScalarType::(?:Half|BFloat16)")
_ATEN_COMPUTE = ("matmul", "mm", "bmm", "addmm", "baddbmm", "einsum", "linear", "relu", "relu_", "gelu",
                 "softmax", "log_softmax", "sigmoid", "tanh", "sum", "mean", "amax", "max", "min", "cumsum",
                 "clamp", "clamp_min", "clamp_max", "conv1d", "conv2d", "conv3d", "conv_transpose2d",
                 "layer_norm", "batch_norm", "group_norm", "rms_norm", "max_pool2d", "avg_pool2d",
                 "scaled_dot_product_attention", "cross_entropy", "exp", "log", "sqrt", "rsqrt", "where")
_ATEN_RE = re.compile(r"\b(?:at|torch)::(?:native::)?(" + "|".join(_ATEN_COMPUTE) + r")\s*\(")


@dataclass
class CudaString:
    code: str  # comments and C++ string literals blanked (offsets and newlines kept)
    nocomment: str  # comments blanked, literals kept
    line: int  # Python line of the literal's first character

    def line_at(self, offset: int) -> int:
        return self.line + self.code.count("\n", 0, offset)


@dataclass
class CppFunction:
    name: str
    src: int  # index into CudaScan.strings
    start: int
    end: int
    line: int
    is_kernel: bool
    is_device: bool


@dataclass
class CudaLaunch:
    kernel: str
    src: int
    offset: int
    line: int
    config: list[str]


@dataclass
class TextFinding:
    rule: str
    message: str
    line: int


@dataclass
class CudaScan:
    strings: list[CudaString] = field(default_factory=list)
    kernels: dict[str, int] = field(default_factory=dict)  # name -> line
    functions: dict[str, CppFunction] = field(default_factory=dict)
    launches: list[CudaLaunch] = field(default_factory=list)
    bindings: dict[str, str] = field(default_factory=dict)  # python-visible name -> C++ function
    torch_library_namespaces: set[str] = field(default_factory=set)
    findings: list[TextFinding] = field(default_factory=list)

    @property
    def has_cuda(self) -> bool:
        return bool(self.strings)

    def launches_kernel(self, cname: str) -> bool | None:
        """Whether host function ``cname`` launches a kernel (directly or through host calls).

        None when ``cname`` is not defined in the scanned sources (the caller decides).
        """
        fn = self.functions.get(cname)
        if fn is None:
            return None
        return self._launches(fn, set())

    def launched_kernels_of(self, cname: str) -> list[str]:
        fn = self.functions.get(cname)
        if fn is None:
            return []
        out: list[str] = []
        self._collect_launched(fn, set(), out)
        return out

    def _launches(self, fn: CppFunction, seen: set[str]) -> bool:
        out: list[str] = []
        self._collect_launched(fn, seen, out)
        return bool(out)

    def _collect_launched(self, fn: CppFunction, seen: set[str], out: list[str]) -> None:
        if fn.name in seen:
            return
        seen.add(fn.name)
        for la in self.launches:
            if la.src == fn.src and fn.start <= la.offset < fn.end and la.kernel not in out:
                out.append(la.kernel)
        body = self.strings[fn.src].code[fn.start:fn.end]
        for m in _CALL_RE.finditer(body):
            callee = self.functions.get(m.group(1))
            if callee is not None and not callee.is_kernel and not callee.is_device and callee.name != fn.name:
                self._collect_launched(callee, seen, out)


def _blank(text: str, keep_literals: bool) -> str:
    """Blank C/C++ comments (and string/char literals unless ``keep_literals``), keeping offsets."""
    out = list(text)
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            for k in range(i, j):
                out[k] = " "
            i = j
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            for k in range(i, j):
                if out[k] != "\n":
                    out[k] = " "
            i = j
        elif c in "\"'":
            j = i + 1
            while j < n and text[j] != c and text[j] != "\n":
                j += 2 if text[j] == "\\" else 1
            if not keep_literals:
                for k in range(i + 1, min(j, n)):
                    out[k] = " "
            i = j + 1
        else:
            i += 1
    return "".join(out)


def _match(text: str, open_at: int, opener: str, closer: str) -> int | None:
    """Index just past the bracket that closes the one at ``open_at``."""
    depth = 0
    for k in range(open_at, len(text)):
        ch = text[k]
        if ch == opener:
            depth += 1
        elif ch == closer:
            depth -= 1
            if depth == 0:
                return k + 1
    return None


def _split_top_level(text: str) -> list[str]:
    parts, depth, cur = [], 0, []
    for ch in text:
        if ch in "([{<":
            depth += 1
        elif ch in ")]}>":
            depth -= 1
        if ch == "," and depth == 0:
            parts.append("".join(cur).strip())
            cur = []
        else:
            cur.append(ch)
    if "".join(cur).strip():
        parts.append("".join(cur).strip())
    return parts


def _string_literals(tree: ast.Module) -> list[tuple[str, int]]:
    """Every string literal (f-strings joined, placeholders as ``0``) with its line."""
    found: list[tuple[str, int]] = []
    inside_fstring: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.JoinedStr):
            parts = []
            for v in node.values:
                inside_fstring.add(id(v))
                parts.append(v.value if isinstance(v, ast.Constant) and isinstance(v.value, str) else "0")
            found.append(("".join(parts), node.lineno))
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in inside_fstring:
            found.append((node.value, node.lineno))
    return found


def scan_cuda(tree: ast.Module) -> CudaScan:
    scan = CudaScan()
    for text, line in _string_literals(tree):
        if len(text) > 20 and any(m in text for m in _MARKERS):
            scan.strings.append(CudaString(code=_blank(text, keep_literals=False),
                                           nocomment=_blank(text, keep_literals=True), line=line))
    for idx, s in enumerate(scan.strings):
        _scan_kernels(scan, idx, s)
        _scan_functions(scan, idx, s)
    for idx, s in enumerate(scan.strings):
        _scan_launches(scan, idx, s)
        _scan_bindings(scan, s)
    _scan_findings(scan)
    return scan


def _scan_kernels(scan: CudaScan, idx: int, s: CudaString) -> None:
    for m in _KERNEL_RE.finditer(s.code):
        scan.kernels.setdefault(m.group(1), s.line_at(m.start(1)))


def _scan_functions(scan: CudaScan, idx: int, s: CudaString) -> None:
    code = s.code
    for m in re.finditer(r"\b([A-Za-z_]\w*)\s*\(", code):
        name = m.group(1)
        if name in _KEYWORDS:
            continue
        close = _match(code, m.end() - 1, "(", ")")
        if close is None:
            continue
        j = close
        tail = re.match(r"\s*(?:const\s*|noexcept\s*|override\s*)*(?:->\s*[\w:<>,\s\*&]+?)?\s*\{", code[j:])
        if not tail:
            continue
        brace = j + tail.end() - 1
        end = _match(code, brace, "{", "}")
        if end is None:
            continue
        head_start = max(code.rfind(";", 0, m.start()), code.rfind("}", 0, m.start()),
                         code.rfind("{", 0, m.start()), code.rfind("#", 0, m.start()))
        head = code[head_start + 1:m.start()]
        fn = CppFunction(name=name, src=idx, start=brace, end=end, line=s.line_at(m.start(1)),
                         is_kernel="__global__" in head, is_device="__device__" in head and "__host__" not in head)
        if name not in scan.functions or (fn.is_kernel and not scan.functions[name].is_kernel):
            scan.functions[name] = fn


def _scan_launches(scan: CudaScan, idx: int, s: CudaString) -> None:
    code = s.code
    for m in re.finditer(r"<<<", code):
        end = code.find(">>>", m.end())
        if end < 0:
            continue
        config = _split_top_level(code[m.end():end])
        k = m.start() - 1
        while k >= 0 and code[k].isspace():
            k -= 1
        if k >= 0 and code[k] == ">":  # template arguments: kernel<T, 4><<<...>>>
            depth = 0
            while k >= 0:
                if code[k] == ">":
                    depth += 1
                elif code[k] == "<":
                    depth -= 1
                    if depth == 0:
                        k -= 1
                        break
                k -= 1
            while k >= 0 and code[k].isspace():
                k -= 1
        stop = k
        while k >= 0 and (code[k].isalnum() or code[k] == "_"):
            k -= 1
        name = code[k + 1:stop + 1]
        if name:
            scan.launches.append(CudaLaunch(kernel=name, src=idx, offset=m.start(), line=s.line_at(m.start()),
                                            config=config))
    for m in _LAUNCH_API_RE.finditer(code):
        close = _match(code, m.end() - 1, "(", ")")
        args = code[m.end():close] if close else ""
        for kname in scan.kernels:
            if re.search(rf"\b{re.escape(kname)}\b", args):
                scan.launches.append(CudaLaunch(kernel=kname, src=idx, offset=m.start(),
                                                line=s.line_at(m.start()), config=[]))


def _scan_bindings(scan: CudaScan, s: CudaString) -> None:
    for m in _BIND_RE.finditer(s.nocomment):
        pyname = m.group(1).split("(")[0].split("::")[-1].split(".")[-1]
        scan.bindings.setdefault(pyname, m.group(2))
    for m in _TORCH_LIBRARY_RE.finditer(s.code):
        scan.torch_library_namespaces.add(m.group(1))


def _scan_findings(scan: CudaScan) -> None:
    created_streams: set[str] = set()
    all_code = "\n".join(s.code for s in scan.strings)
    dispatches = bool(_DTYPE_DISPATCH_RE.search(all_code))
    for idx, s in enumerate(scan.strings):
        code = s.code
        for m in _STREAM_CREATE_RE.finditer(code):
            if m.group(1):
                created_streams.add(m.group(1))
            scan.findings.append(TextFinding("side-stream", "creates a CUDA stream in its C++ code "
                                             "(cudaStreamCreate)", s.line_at(m.start())))
        for m in _STREAM_POOL_RE.finditer(code):
            if m.group(1):
                created_streams.add(m.group(1))
            scan.findings.append(TextFinding("side-stream", "takes a stream from the pool (getStreamFromPool) "
                                             "instead of the current stream", s.line_at(m.start())))
        for m in _EVENT_RE.finditer(code):
            scan.findings.append(TextFinding("cuda-event", "creates CUDA events in its C++ code",
                                             s.line_at(m.start())))
        for m in _GRAPH_RE.finditer(code):
            scan.findings.append(TextFinding("cuda-graph", "captures or replays CUDA graphs in its C++ code",
                                             s.line_at(m.start())))
        for m in _IPC_RE.finditer(code):
            scan.findings.append(TextFinding("ipc", f"uses CUDA IPC ({m.group(0)}): it can map other "
                                             "processes' device memory", s.line_at(m.start())))
        for m in _TF32_RE.finditer(code):
            scan.findings.append(TextFinding("precision-downcast", f"uses TF32 ({m.group(1)}); on fp32 "
                                             "problems the correctness check decides", s.line_at(m.start())))
        if not dispatches:
            for m in _DOWNCAST_RE.finditer(code):
                scan.findings.append(TextFinding(
                    "precision-downcast", f"converts float to a 16-bit type ({m.group(1)}) with no dtype "
                    "dispatch: fp32 inputs are computed in reduced precision", s.line_at(m.start())))
        for fn in scan.functions.values():
            if fn.src != idx or fn.is_kernel or fn.is_device:
                continue
            for m in _ATEN_RE.finditer(code, fn.start, fn.end):
                scan.findings.append(TextFinding("torch-compute", f"host function {fn.name} computes with "
                                                 f"ATen ({m.group(0).rstrip('(').strip()})", s.line_at(m.start())))
    for la in scan.launches:
        if len(la.config) >= 4:
            stream_arg = la.config[3]
            if "cudaStreamPerThread" in stream_arg or any(
                    re.search(rf"\b{re.escape(v)}\b", stream_arg) for v in created_streams):
                scan.findings.append(TextFinding("side-stream", f"launches {la.kernel} on a stream other than "
                                                 "the current one", la.line))
