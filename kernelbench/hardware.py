"""The one place for GPUs: specifications, names, what Modal rents, and which GPUs this machine has.

Specifications are the peak rates a speed-of-light bound divides by, and what prompts tell a model.

The table holds vendor datasheet figures. NVIDIA quotes most tensor-core rates *with 2:4 structured
sparsity*; a KernelBench problem is dense, so those figures are halved here and the comment says so.
Rates measured on a real machine (``kernelbench/data/measured_rates.json``) are merged in and, when
present, preferred for bounds: a datasheet peak is a ceiling no kernel reaches, a measured rate is what
the best library kernel actually achieves.

Lookup is by any reasonable spelling of a name ("H100", "NVIDIA H100 80GB HBM3", "h100-sxm"). A bare
family name ("A100", "H100") resolves to the fastest variant in the table (SXM, most memory), so a bound
computed for it stays a lower bound on every other variant of that family.

Beside the table: :func:`canonical_gpu` and :func:`gpu_family` name the GPU *type* a result, a baseline
file or a bundle is for (the family, ``H100``, whatever the driver calls it), :func:`gpu_label` turns it
into a baseline file stem; :data:`MODAL_GPU_TABLE` holds the GPU types the Modal app has functions for
(Modal's spelling, build target, dated price); :func:`local_gpu_names` reads this machine's GPUs from
``nvidia-smi``, without creating a CUDA context.
"""

from __future__ import annotations

import logging
import re
import shutil
import subprocess
from dataclasses import dataclass, fields, replace
from functools import lru_cache
from importlib import resources
from pathlib import Path

from kernelbench.errors import KernelBenchError
from kernelbench.io_utils import read_json

log = logging.getLogger(__name__)

TERA = 1e12
GB = 1e9

#: Precisions whose peak the table knows; ``tf32`` is fp32 data on tensor cores.
RATE_KINDS = ("fp32", "tf32", "fp16", "bf16")


class UnknownGpuError(KernelBenchError):
    """A GPU name that matches nothing in the table."""


class MeasuredRatesError(KernelBenchError):
    """The measured-rates file is malformed."""


@dataclass(frozen=True)
class MeasuredRates:
    """Rates measured on one GPU type. A missing figure falls back to the datasheet."""

    source: str
    memory_bandwidth_bytes_s: float | None = None
    fp32_flops: float | None = None
    tf32_flops: float | None = None
    fp16_flops: float | None = None
    bf16_flops: float | None = None
    device_name: str | None = None
    date: str | None = None


@dataclass(frozen=True)
class Rate:
    """A rate together with where it comes from, so every bound can say which numbers it used."""

    value: float
    source: str  # "datasheet" or "measured"


@dataclass(frozen=True)
class GpuSpec:
    name: str
    full_name: str
    aliases: tuple[str, ...]
    architecture: str
    compute_capability: str
    sm_count: int
    memory_gb: float
    l2_mb: float
    memory_bandwidth_bytes_s: float
    #: Non-tensor (CUDA core) FP32 rate: what PyTorch's default fp32 matmul runs at.
    fp32_flops: float
    #: Dense tensor-core rates.
    tf32_tensor_flops: float
    fp16_tensor_flops: float
    bf16_tensor_flops: float
    datasheet: str
    measured: MeasuredRates | None = None

    def bandwidth(self, prefer_measured: bool = True) -> Rate:
        if prefer_measured and self.measured and self.measured.memory_bandwidth_bytes_s:
            return Rate(self.measured.memory_bandwidth_bytes_s, "measured")
        return Rate(self.memory_bandwidth_bytes_s, "datasheet")

    def peak(self, kind: str, prefer_measured: bool = True) -> Rate:
        """Peak FLOP/s for ``fp32`` (CUDA cores), ``tf32``, ``fp16`` or ``bf16`` (tensor cores, dense)."""
        datasheet = {"fp32": self.fp32_flops, "tf32": self.tf32_tensor_flops,
                     "fp16": self.fp16_tensor_flops, "bf16": self.bf16_tensor_flops}
        if kind not in datasheet:
            raise ValueError(f"unknown rate kind {kind!r} (choose from {', '.join(RATE_KINDS)})")
        if prefer_measured and self.measured:
            value = getattr(self.measured, f"{kind}_flops")
            if value:
                return Rate(value, "measured")
        return Rate(datasheet[kind], "datasheet")

    def describe(self) -> str:
        """A few lines for prompts and reports: what a kernel author needs to know about the target."""
        lines = [
            f"{self.full_name} ({self.architecture} architecture, compute capability {self.compute_capability}, "
            f"sm_{self.compute_capability.replace('.', '')})",
            f"{self.sm_count} SMs, {self.memory_gb:g} GB memory at {self.memory_bandwidth_bytes_s / 1e12:.2f} TB/s, "
            f"{self.l2_mb:g} MB L2 cache",
            f"Peak (datasheet, dense): FP32 {self.fp32_flops / TERA:g} TFLOP/s on CUDA cores; tensor cores "
            f"TF32 {self.tf32_tensor_flops / TERA:g}, FP16 {self.fp16_tensor_flops / TERA:g}, "
            f"BF16 {self.bf16_tensor_flops / TERA:g} TFLOP/s",
        ]
        m = self.measured
        if m is not None:
            parts = []
            if m.memory_bandwidth_bytes_s:
                parts.append(f"memory {m.memory_bandwidth_bytes_s / 1e12:.2f} TB/s")
            for kind in RATE_KINDS:
                v = getattr(m, f"{kind}_flops")
                if v:
                    parts.append(f"{kind.upper()} matmul {v / TERA:.1f} TFLOP/s")
            if parts:
                lines.append("Measured: " + ", ".join(parts))
        return "\n".join(lines)

    def to_dict(self) -> dict:
        d = {f.name: getattr(self, f.name) for f in fields(self) if f.name != "measured"}
        d["aliases"] = list(self.aliases)
        d["measured"] = None if self.measured is None else {
            f.name: getattr(self.measured, f.name) for f in fields(self.measured)}
        return d


# The datasheet table. Each figure's source is the URL in ``datasheet`` unless a comment says otherwise.
_DATASHEET: tuple[GpuSpec, ...] = (
    GpuSpec(
        # NVIDIA H100 Tensor Core GPU datasheet, "H100 SXM" column:
        #   https://resources.nvidia.com/en-us-tensor-core/nvidia-tensor-core-gpu-datasheet
        # FP32 67 TFLOPS; TF32 989*, BF16 1,979*, FP16 1,979* TFLOPS, "* with sparsity": halved.
        # 80 GB HBM3 at 3.35 TB/s. SMs (132) and L2 (50 MB): NVIDIA H100 Tensor Core GPU Architecture
        # whitepaper (https://resources.nvidia.com/en-us-tensor-core/gtc22-whitepaper-hopper), table 3.
        name="H100",
        full_name="NVIDIA H100 SXM5 80GB HBM3",
        aliases=("H100", "H100 SXM", "H100 SXM5", "H100-SXM", "H100 80GB", "H100 80GB HBM3",
                 "NVIDIA H100 80GB HBM3", "H100 SXM5 80GB", "NVIDIA H100 SXM5 80GB HBM3"),
        architecture="Hopper",
        compute_capability="9.0",
        sm_count=132,
        memory_gb=80,
        l2_mb=50,
        memory_bandwidth_bytes_s=3.35e12,
        fp32_flops=67 * TERA,
        tf32_tensor_flops=989 / 2 * TERA,
        fp16_tensor_flops=1979 / 2 * TERA,
        bf16_tensor_flops=1979 / 2 * TERA,
        datasheet="https://resources.nvidia.com/en-us-tensor-core/nvidia-tensor-core-gpu-datasheet",
    ),
    GpuSpec(
        # NVIDIA H200 Tensor Core GPU datasheet, "H200 SXM" column:
        #   https://nvdam.widen.net/s/nb5zzzsjdf/hpc-datasheet-sc23-h200-datasheet-3002446
        #   (product page https://www.nvidia.com/en-us/data-center/h200/)
        # FP32 67 TFLOPS; TF32 989*, BF16 1,979*, FP16 1,979* TFLOPS, "* with sparsity": halved.
        # 141 GB HBM3e at 4.8 TB/s. Same GH100 die and SM configuration as H100 SXM5: 132 SMs, 50 MB L2.
        name="H200",
        full_name="NVIDIA H200 SXM 141GB HBM3e",
        aliases=("H200", "H200 SXM", "H200-SXM", "H200 141GB", "NVIDIA H200", "H200 SXM 141GB",
                 "NVIDIA H200 SXM 141GB HBM3e"),
        architecture="Hopper",
        compute_capability="9.0",
        sm_count=132,
        memory_gb=141,
        # Not in the datasheet; torch.cuda.get_device_properties reported 60 MiB (62914560 bytes) on the
        # H200 we measured on (2026-11-22).
        l2_mb=60,
        memory_bandwidth_bytes_s=4.8e12,
        fp32_flops=67 * TERA,
        tf32_tensor_flops=989 / 2 * TERA,
        fp16_tensor_flops=1979 / 2 * TERA,
        bf16_tensor_flops=1979 / 2 * TERA,
        datasheet="https://nvdam.widen.net/s/nb5zzzsjdf/hpc-datasheet-sc23-h200-datasheet-3002446",
    ),
    GpuSpec(
        # NVIDIA A100 Tensor Core GPU datasheet, "A100 80GB SXM" column:
        #   https://www.nvidia.com/content/dam/en-zz/Solutions/Data-Center/a100/pdf/nvidia-a100-datasheet-us-nvidia-1758950-r4-web.pdf
        # FP32 19.5 TFLOPS; TF32 156 | 312*, BF16 312 | 624*, FP16 312 | 624* TFLOPS: the datasheet
        # gives dense and sparse ("*") side by side; the dense figure is used. 80 GB HBM2e at 2,039 GB/s.
        # SMs (108) and L2 (40 MB): NVIDIA A100 Tensor Core GPU Architecture whitepaper, table 1.
        name="A100-80GB",
        full_name="NVIDIA A100 SXM4 80GB",
        aliases=("A100", "A100-80GB", "A100 80GB", "A100 SXM", "A100-SXM4-80GB", "A100 SXM4 80GB",
                 "NVIDIA A100-SXM4-80GB", "A100-SXM-80GB", "A100 80GB SXM"),
        architecture="Ampere",
        compute_capability="8.0",
        sm_count=108,
        memory_gb=80,
        l2_mb=40,
        memory_bandwidth_bytes_s=2039e9,
        fp32_flops=19.5 * TERA,
        tf32_tensor_flops=156 * TERA,
        fp16_tensor_flops=312 * TERA,
        bf16_tensor_flops=312 * TERA,
        datasheet="https://www.nvidia.com/content/dam/en-zz/Solutions/Data-Center/a100/pdf/"
                  "nvidia-a100-datasheet-us-nvidia-1758950-r4-web.pdf",
    ),
    GpuSpec(
        # NVIDIA L40S datasheet: https://resources.nvidia.com/en-us-l40s/l40s-datasheet-28413
        # FP32 91.6 TFLOPS; TF32 183 | 366*, BF16 362.05 | 733*, FP16 362.05 | 733* TFLOPS: dense and
        # sparse ("*") side by side; the dense figure is used. 48 GB GDDR6 with ECC at 864 GB/s.
        # 568 tensor cores at 4 per SM: 142 SMs. L2: 96 MB (AD102, NVIDIA Ada Lovelace architecture
        # whitepaper); not on the datasheet.
        name="L40S",
        full_name="NVIDIA L40S 48GB GDDR6",
        aliases=("L40S", "NVIDIA L40S", "L40S 48GB", "L40-S"),
        architecture="Ada Lovelace",
        compute_capability="8.9",
        sm_count=142,
        memory_gb=48,
        l2_mb=96,
        memory_bandwidth_bytes_s=864e9,
        fp32_flops=91.6 * TERA,
        tf32_tensor_flops=183 * TERA,
        fp16_tensor_flops=362.05 * TERA,
        bf16_tensor_flops=362.05 * TERA,
        datasheet="https://resources.nvidia.com/en-us-l40s/l40s-datasheet-28413",
    ),
    GpuSpec(
        # NVIDIA HGX platform page, "HGX B200" column, per-GPU specifications:
        #   https://www.nvidia.com/en-us/data-center/hgx/
        # FP32 75 TFLOPS; TF32 2.2 PFLOPS, FP16/BF16 4.5 PFLOPS are quoted with sparsity: halved to
        # 1.1 and 2.25 PFLOPS. 180 GB HBM3e at 7.7 TB/s (the HGX B200 board; a GB200 B200 runs at
        # 8 TB/s and higher clocks, and is not this entry). 148 SMs (18,944 CUDA cores at 128 per
        # SM) and 126 MB L2 are not on the page: they are what CUDA's device query reports on a B200.
        name="B200",
        full_name="NVIDIA B200 180GB HBM3e (HGX)",
        aliases=("B200", "NVIDIA B200", "B200 180GB", "HGX B200", "B200 SXM", "B200-SXM"),
        architecture="Blackwell",
        compute_capability="10.0",
        sm_count=148,
        memory_gb=180,
        l2_mb=126,
        memory_bandwidth_bytes_s=7.7e12,
        fp32_flops=75 * TERA,
        tf32_tensor_flops=2.2e15 / 2,
        fp16_tensor_flops=4.5e15 / 2,
        bf16_tensor_flops=4.5e15 / 2,
        datasheet="https://www.nvidia.com/en-us/data-center/hgx/",
    ),
)


def _norm(name: str) -> str:
    """Case-, punctuation- and vendor-insensitive form: "NVIDIA A100-SXM4-80GB" -> "a100sxm480gb"."""
    s = re.sub(r"[^a-z0-9]", "", name.lower())
    return s[len("nvidia"):] if s.startswith("nvidia") else s


def measured_rates_path() -> Path:
    return Path(str(resources.files("kernelbench") / "data" / "measured_rates.json"))


def _alias_index(specs: tuple[GpuSpec, ...]) -> dict[str, GpuSpec]:
    index: dict[str, GpuSpec] = {}
    for spec in specs:
        for alias in (spec.name, spec.full_name, *spec.aliases):
            key = _norm(alias)
            if key in index and index[key].name != spec.name:
                raise AssertionError(f"GPU alias {alias!r} names both {index[key].name} and {spec.name}")
            index[key] = spec
    return index


def _positive_or_none(value, where: str) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0:
        raise MeasuredRatesError(f"{where} must be a positive number, got {value!r}")
    return float(value)


def load_measured_rates(path: str | Path | None = None) -> dict[str, MeasuredRates]:
    """Measured rates by canonical GPU name; an empty file (the shipped default) gives ``{}``."""
    path = Path(path) if path is not None else measured_rates_path()
    return parse_measured_rates(read_json(path, MeasuredRatesError, "measured-rates file "), path)


def parse_measured_rates(data: object, path: str | Path) -> dict[str, MeasuredRates]:
    """The measured-rates file's content, checked; ``path`` only names it in errors."""
    path = Path(path)
    gpus = data.get("gpus") if isinstance(data, dict) else None
    if not isinstance(gpus, dict):
        raise MeasuredRatesError(f"measured-rates file {path}: expected an object with a \"gpus\" mapping")
    index = _alias_index(_DATASHEET)
    out: dict[str, MeasuredRates] = {}
    for gpu_name, entry in gpus.items():
        spec = index.get(_norm(gpu_name))
        if spec is None:
            raise MeasuredRatesError(
                f"measured-rates file {path}: unknown GPU {gpu_name!r} (known: {', '.join(known_gpu_names())})")
        if not isinstance(entry, dict):
            raise MeasuredRatesError(f"measured-rates file {path}: {gpu_name} must be an object")
        where = f"measured-rates file {path}: {gpu_name}"
        numbers = {k: _positive_or_none(entry.get(k), f"{where}.{k}")
                   for k in ("memory_bandwidth_bytes_s", "fp32_flops", "tf32_flops", "fp16_flops", "bf16_flops")}
        if not any(numbers.values()):
            raise MeasuredRatesError(f"{where} has no rates (memory_bandwidth_bytes_s, fp32_flops, ...)")
        source = entry.get("source") or f"measured ({path.name})"
        out[spec.name] = MeasuredRates(source=str(source), device_name=entry.get("device_name"),
                                       date=entry.get("date"), **numbers)
    return out


@lru_cache(maxsize=8)
def _table_cached(path_key: str | None) -> tuple[GpuSpec, ...]:
    measured = load_measured_rates(path_key)
    return tuple(replace(s, measured=measured.get(s.name)) for s in _DATASHEET)


def gpu_table(measured_path: str | Path | None = None) -> tuple[GpuSpec, ...]:
    """The datasheet table with measured rates merged in (from the shipped file unless a path is given)."""
    return _table_cached(str(measured_path) if measured_path is not None else None)


def known_gpu_names() -> list[str]:
    return [s.name for s in _DATASHEET]


def find_gpu_spec(name: str, measured_path: str | Path | None = None) -> GpuSpec | None:
    """The spec for any spelling of a known GPU's name, or None."""
    return _alias_index(gpu_table(measured_path)).get(_norm(name))


def get_gpu_spec(name: str, measured_path: str | Path | None = None) -> GpuSpec:
    """Like :func:`find_gpu_spec`, but an unknown name is a one-line error that lists the known GPUs."""
    spec = find_gpu_spec(name, measured_path)
    if spec is None:
        raise UnknownGpuError(
            f"unknown GPU {name!r}: the hardware table knows {', '.join(known_gpu_names())} "
            f"(e.g. --gpu H100 or 'NVIDIA H100 80GB HBM3')")
    return spec


def current_gpu_spec(device: int | str | None = None) -> GpuSpec | None:
    """The spec of the local GPU, or None without a GPU or when the table does not know it."""
    import torch  # lazy: keeps this module cheap for --help and the prompt builder

    if not torch.cuda.is_available():
        return None
    name = torch.cuda.get_device_name(device)
    spec = find_gpu_spec(name)
    if spec is None:
        log.warning("GPU %r is not in the hardware table (%s); no speed-of-light bounds for it",
                    name, ", ".join(known_gpu_names()))
        return None
    sms = torch.cuda.get_device_properties(device).multi_processor_count
    if sms != spec.sm_count:
        log.warning("GPU %r reports %d SMs but %s has %d (a MIG slice or another variant?): "
                    "its bounds are optimistic", name, sms, spec.name, spec.sm_count)
    return spec


# ---------------------------------------------------------------------------------------------- GPU types
_FAMILY = re.compile(r"\b(H100|H200|H20|A100|A10G|A10|L40S|L40|L4|B200|B100|GB200|T4|V100|A6000|RTX\s?\d{4})\b",
                     re.IGNORECASE)


def canonical_gpu(name: str | None) -> str | None:
    """'NVIDIA H100 80GB HBM3' -> 'H100': the GPU type two timings must share to be compared.

    Names without a known family are compared as given.
    """
    if not name:
        return None
    m = _FAMILY.search(name)
    return m.group(1).upper().replace(" ", "") if m else name.strip()


def gpu_family(name: str | None) -> str | None:
    """:func:`canonical_gpu` that also reads KernelBench's folder spelling (``H100_together`` -> ``H100``)."""
    return canonical_gpu(name.replace("_", " ")) if name else None


def gpu_label(name: str) -> str:
    """The baseline file stem for a GPU: its family (``NVIDIA H100 80GB HBM3`` -> ``H100``)."""
    label = gpu_family(name) or name
    return re.sub(r"[^A-Za-z0-9._-]+", "_", label).strip("_") or "gpu"


# ---------------------------------------------------------------------------------------------- Modal
#: When the prices below were read, and where from: Modal bills GPU time per second; these are its
#: list prices per GPU-hour (modal.com/pricing, as quoted on 2026-05-07). CPU and memory are billed
#: on top and are not in the estimate. Check the page before trusting a dollar figure.
MODAL_PRICES_DATE = "2026-05-07"
MODAL_PRICES_SOURCE = "https://modal.com/pricing (list price per GPU-hour, quoted 2026-05-07)"


@dataclass(frozen=True)
class ModalGpu:
    """One GPU type the Modal app has functions for.

    ``name`` is what users type (``--gpu A100-80GB``) and the key into the datasheet table above, which
    holds the compute capability and rates; ``modal_gpu`` is what Modal schedules; ``cuda_arch`` the build
    target, with the ``a`` suffix where the chip has architecture-specific instructions (wgmma on sm_90a,
    tcgen05 on sm_100a) that kernels may use.
    """

    name: str
    modal_gpu: str
    cuda_arch: str
    usd_per_hour: float

    @property
    def slug(self) -> str:
        """The suffix of the app's function names: ``A100-80GB`` -> ``a100_80gb``."""
        return self.name.lower().replace("-", "_")

    @property
    def baseline_stem(self) -> str:
        """The baseline file stem, the same a local run on this chip writes (``A100-80GB`` -> ``A100``)."""
        return gpu_label(self.name)


#: ``H100!`` stops Modal from silently upgrading an H100 request to an H200: baselines are per GPU
#: type, so an upgraded container would time kernels on a different chip than the baseline file.
MODAL_GPU_TABLE: dict[str, ModalGpu] = {
    "H100": ModalGpu("H100", "H100!", "9.0a", 3.9492),
    "A100-80GB": ModalGpu("A100-80GB", "A100-80GB", "8.0", 2.4984),
    "L40S": ModalGpu("L40S", "L40S", "8.9", 1.9512),
    "B200": ModalGpu("B200", "B200", "10.0a", 6.2496),
}
#: GPU types the app has functions for, as Modal spells them.
MODAL_GPUS: tuple[str, ...] = tuple(MODAL_GPU_TABLE)
_missing = [n for n in MODAL_GPUS if _alias_index(_DATASHEET).get(_norm(n)) is None]
if _missing:  # every Modal GPU has its datasheet entry (rates, compute capability)
    raise AssertionError(f"Modal GPU(s) {', '.join(_missing)} not in the datasheet table")


def modal_gpu_name(gpu: str) -> str:
    """Accept ``h100``, ``a100_80gb`` and the like; refuse GPUs the Modal app has no function for."""
    wanted = gpu.strip().lower().replace("_", "-")
    for name in MODAL_GPUS:
        if name.lower() == wanted:
            return name
    raise KernelBenchError(f"unknown Modal GPU {gpu!r} (choose from {', '.join(MODAL_GPUS)})")


# ---------------------------------------------------------------------------------------------- this machine
def nvidia_smi_query(field: str, timeout_s: float = 30.0) -> list[str]:
    """One ``nvidia-smi --query-gpu`` field of every local GPU, in index order; ``[]`` without nvidia-smi.

    Asks the driver, so the calling process creates no CUDA context (the evaluator's parent must not own
    one). A failing or hanging nvidia-smi also gives ``[]``: callers decide what an unknown GPU means.
    """
    exe = shutil.which("nvidia-smi")
    if exe is None:
        return []
    try:
        out = subprocess.run([exe, f"--query-gpu={field}", "--format=csv,noheader"], capture_output=True, text=True,
                             timeout=timeout_s, check=False)
    except (OSError, subprocess.SubprocessError):
        return []
    if out.returncode != 0:
        return []
    return [line.strip() for line in out.stdout.splitlines() if line.strip()]


def local_gpu_names(timeout_s: float = 30.0) -> list[str]:
    """This machine's GPU names as the driver spells them (``NVIDIA H100 80GB HBM3``), in index order."""
    return nvidia_smi_query("name", timeout_s)
