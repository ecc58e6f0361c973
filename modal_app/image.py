"""The container image, as data first and as a ``modal.Image`` second.

The recipe is a plain dataclass so it can be checked without Modal's cloud (what is installed,
in which order, which environment variables are set); :func:`build_image` turns it into Modal's
lazy image object step by step, in the recipe's order.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from modal_app import versions

#: Packages copied into the image last, so editing the source does not rebuild the heavy layers.
LOCAL_PACKAGES: tuple[str, ...] = ("kernelbench", "modal_app")

#: Which files of those packages travel, as Modal ``FilePatternMatcher`` patterns relative to each
#: package. Modal's default for ``add_local_python_source`` ships ``*.py`` only, which left
#: ``kernelbench/data/measured_rates.json`` behind and made every timed GPU result a crash. These
#: are the suffixes of the package data pyproject declares (``tests/test_modal_shipped_files.py``
#: checks every declared file is shipped, using Modal's own matcher).
SHIPPED_PATTERNS: tuple[str, ...] = ("**/*.py", "**/*.json", "**/*.j2", "**/*.md")


@dataclass(frozen=True)
class ImageRecipe:
    base_image: str
    python_version: str
    apt_packages: tuple[str, ...]
    #: (packages, extra index URL or None), installed in this order.
    pip_steps: tuple[tuple[tuple[str, ...], str | None], ...]
    env: dict[str, str] = field(default_factory=dict)
    local_packages: tuple[str, ...] = LOCAL_PACKAGES
    shipped_patterns: tuple[str, ...] = SHIPPED_PATTERNS

    def pinned(self) -> dict[str, str]:
        """Package name -> pinned version, over every pip step."""
        out: dict[str, str] = {}
        for packages, _index in self.pip_steps:
            for spec in packages:
                name, sep, version = spec.partition("==")
                if sep:
                    out[name.lower()] = version
        return out

    def steps(self) -> list[tuple[str, Any]]:
        """The build steps in order, as (kind, argument); local sources always come last."""
        out: list[tuple[str, Any]] = [("from_registry", (self.base_image, self.python_version))]
        if self.apt_packages:
            out.append(("apt_install", self.apt_packages))
        for packages, index in self.pip_steps:
            out.append(("pip_install", (packages, index)))
        if self.env:
            out.append(("env", dict(self.env)))
        out.append(("add_local_python_source", (self.local_packages, self.shipped_patterns)))
        return out


def recipe_for(gpu: str) -> ImageRecipe:
    """The image for one GPU type: same layers for all, except ``TORCH_CUDA_ARCH_LIST``."""
    spec = versions.GPUS[gpu]
    pins = versions.pip_pins()
    torch_step = (pins[:2], versions.TORCH_INDEX_URL)
    rest_step = (pins[2:], None)
    env = {
        "TORCH_CUDA_ARCH_LIST": spec.cuda_arch,
        "CUDA_HOME": "/usr/local/cuda",
        # The evaluator builds CUDA extensions under this root, publishing each build by rename,
        # so containers sharing the Volume never see half a build.
        "KERNELBENCH_CACHE_DIR": f"{versions.CACHE_MOUNT}/kernelbench",
        "TRITON_CACHE_DIR": f"{versions.CACHE_MOUNT}/triton",
        # Candidate code has no network; make library lookups fail fast instead of hanging. Problems that
        # load a hub model read it from the hub cache Volume (read-only where it is mounted at all).
        "HF_HUB_OFFLINE": "1",
        "HF_DATASETS_OFFLINE": "1",
        "HF_HUB_CACHE": versions.HUB_CACHE_DIR,
        "HF_HUB_DISABLE_TELEMETRY": "1",
        "PYTHONUNBUFFERED": "1",
    }
    return ImageRecipe(
        base_image=versions.CUDA_BASE_IMAGE,
        python_version=versions.PYTHON_VERSION,
        apt_packages=versions.APT_PACKAGES,
        pip_steps=(torch_step, rest_step),
        env=env,
    )


def recipe_for_fetch() -> ImageRecipe:
    """The trusted hub fetch's image: the GPU images' layers (so nothing new is built), online.

    Only the environment differs: the hub is reachable (no offline flags), and ``HF_HUB_CACHE`` is the
    Volume the evaluation functions mount read-only.
    """
    from dataclasses import replace

    base = recipe_for("H100")
    env = {k: v for k, v in base.env.items() if k not in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE")}
    return replace(base, env=env)


def shipped_file_matcher(patterns: tuple[str, ...]) -> Any:
    """Modal's ignore rule for the local packages: everything except ``patterns``, minus caches.

    Modal applies a custom ignore rule *instead of* its default one, so bytecode caches and
    dot-prefixed paths must be excluded here explicitly.
    """
    from modal import FilePatternMatcher

    keep = FilePatternMatcher(*patterns)
    junk = FilePatternMatcher("**/__pycache__", "**/__pycache__/**", "**/*.pyc", "**/.*", "**/.*/**")

    def ignore(path: Path) -> bool:
        return junk(path) or not keep(path)

    return ignore


def build_image(recipe: ImageRecipe) -> Any:
    """A lazy ``modal.Image`` (nothing is built or uploaded until an app runs)."""
    import modal

    image = None
    for kind, arg in recipe.steps():
        if kind == "from_registry":
            base, python = arg
            image = modal.Image.from_registry(base, add_python=python)
        elif kind == "apt_install":
            image = image.apt_install(*arg)
        elif kind == "pip_install":
            packages, index = arg
            image = image.pip_install(*packages, extra_index_url=index) if index else image.pip_install(*packages)
        elif kind == "env":
            image = image.env(arg)
        elif kind == "add_local_python_source":
            packages, patterns = arg
            image = image.add_local_python_source(*packages, ignore=shipped_file_matcher(patterns))
        else:  # pragma: no cover - steps() only produces the kinds above
            raise ValueError(f"unknown image step {kind!r}")
    return image
