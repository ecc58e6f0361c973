"""The backends that ship with the package. Adding one means adding its spec here, plus its own files.

Those files are: a prompt template and a worked example under ``kernelbench/prompts/`` (if it has
prompts), worked solutions under ``kernelbench/solutions/<name>/`` (if any), and the functions its spec
names (a static conformity check, a kernel-name reader). Nothing else lists backends: the command
line, settings validation, the guards, generation and the leaderboard all read the registry.
"""

from __future__ import annotations

from kernelbench.backends.spec import BackendSpec, Detection, PromptSpec

_GUARDS = "kernelbench.evaluation.guards"

CUDA = BackendSpec(
    name="cuda",
    display_name="CUDA",
    summary="CUDA C++ kernels built inline with torch.utils.cpp_extension.load_inline",
    # A source that builds a C++/CUDA extension is cuda even if it also uses Triton (highest precedence):
    # the extension needs nvcc and a GPU, which is what the cuda worker path gives it (built ahead on the
    # CPU, refused on the CPU path instead of failing halfway under the Triton interpreter).
    detection=Detection(modules=("torch.utils.cpp_extension",), names=("load_inline", "cpp_extension"),
                        precedence=20),
    conformity=f"{_GUARDS}.conformity:check_cuda",
    kernel_names=f"{_GUARDS}.runtime:cuda_kernel_names",
    needs_gpu=True,
    builds_ahead=True,
    build_estimate_s=120.0,  # nvcc through load_inline
    prompt=PromptSpec(template="cuda.j2", example="cuda_model_new.py",
                      example_intro="a fused CUDA kernel built inline with torch.utils.cpp_extension.load_inline"),
    worked_solutions=True,
    submissions=True,
)

TRITON = BackendSpec(
    name="triton",
    display_name="Triton",
    summary="Triton kernels (@triton.jit); on the CPU they run under the Triton interpreter",
    detection=Detection(modules=("triton",), precedence=10),
    conformity=f"{_GUARDS}.conformity:check_triton",
    kernel_names=f"{_GUARDS}.runtime:triton_kernel_names",
    records_launches=True,
    cpu_worker_env={"TRITON_INTERPRET": "1"},
    build_estimate_s=30.0,  # Triton's JIT
    prompt=PromptSpec(template="triton.j2", example="triton_model_new.py", example_intro="a fused Triton kernel"),
    worked_solutions=True,
    submissions=True,
)

CUTE = BackendSpec(
    name="cute",
    display_name="CuTe DSL",
    summary="CUTLASS's Python DSL (CuTe): @cute.kernel kernels launched from a @cute.jit host function",
    # A source with a C++ extension stays cuda; one with Triton code and CuTe kernels is cute (the DSL needs
    # its own package and a GPU, as cuda does).
    detection=Detection(modules=("cutlass",), precedence=15),
    conformity=f"{_GUARDS}.conformity:check_cute",
    kernel_names=f"{_GUARDS}.runtime:cute_kernel_names",
    # No interpreter: the DSL compiles for a GPU (cute.compile works on the CPU, running does not).
    needs_gpu=True,
    # The DSL's own compile cache (otherwise under the shared temporary folder) stays per candidate.
    private_dirs_env={"CUTE_DSL_CACHE_DIR": ".cute_dsl/cache"},
    requires=("cutlass",),
    extra="cute",
    build_estimate_s=30.0,  # cute.compile: MLIR to PTX to cubin, at the first forward
    prompt=PromptSpec(template="cute.j2", example="cute_model_new.py",
                      example_intro="a fused CuTe DSL kernel (a @cute.kernel launched from a @cute.jit function)"),
    worked_solutions=True,
    submissions=True,
)

TILELANG = BackendSpec(
    name="tilelang",
    display_name="TileLang",
    summary="TileLang kernels (@T.prim_func / @tilelang.jit) compiled with tilelang.compile",
    detection=Detection(modules=("tilelang",), precedence=15),
    conformity=f"{_GUARDS}.conformity:check_tilelang",
    kernel_names=f"{_GUARDS}.runtime:tilelang_kernel_names",
    needs_gpu=True,  # TileLang generates CUDA C++ and builds it with nvcc: a GPU runs it
    private_dirs_env={"TILELANG_CACHE_DIR": ".tilelang/cache"},
    requires=("tilelang",),
    extra="tilelang",
    build_estimate_s=30.0,  # TVM lowering plus nvcc, at the first forward
    prompt=PromptSpec(template="tilelang.j2", example="tilelang_model_new.py",
                      example_intro="a fused TileLang kernel (a @T.prim_func compiled with tilelang.compile)"),
    worked_solutions=True,
    submissions=True,
)

TORCH = BackendSpec(
    name="torch",
    display_name="PyTorch",
    summary="plain PyTorch (no kernels of its own): baselines, references and tests of the evaluator",
    custom_kernels=False,
    build_estimate_s=5.0,  # nothing to build
)

BUILTIN: tuple[BackendSpec, ...] = (CUDA, TRITON, CUTE, TILELANG, TORCH)
#: The backend assumed when none is named or detected (the evaluator's default). A source with no
#: kernel at all then fails cuda's conformity: a candidate without a kernel of its own fails whatever
#: it claims.
DEFAULT_BACKEND = CUDA.name
