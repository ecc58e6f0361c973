"""The repository's own tools, ``leaderboard`` and ``modal_app``, for the commands that need them.

The wheel installs only ``kernelbench``: generic top-level names such as ``leaderboard`` would collide
with other distributions in site-packages. ``leaderboard/`` and ``modal_app/`` are folders of the
repository, used from a checkout (the CI workflows, ``modal run modal_app/app.py``, ``modal deploy``).
The few commands that need them (``kernelbench leaderboard ...``; a Modal runner whose app is not
deployed) import them through :func:`import_from_checkout`, which only ever takes them from a checkout
of this repository:

1. when the package already imports from a checkout (run from the repository root, or with it on
   ``PYTHONPATH``), that one;
2. else, when the running ``kernelbench`` sits in a checkout (``pip install -e .``), that checkout is
   put on ``sys.path``;
3. else a one-line error that says how to get a checkout.

A module of the same name from anywhere else (another distribution's ``leaderboard``) is never used.
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import kernelbench
from kernelbench.errors import KernelBenchError

#: The repository's top-level folders that the wheel does not install.
REPOSITORY_PACKAGES = ("leaderboard", "modal_app")


class CheckoutRequired(KernelBenchError):
    """A command needs a folder of the repository that an installed package does not include."""


def _is_checkout(folder: Path, package: str) -> bool:
    """``folder`` is a checkout of this repository that holds ``package``/."""
    return ((folder / "kernelbench" / "__init__.py").is_file() and (folder / "pyproject.toml").is_file()
            and (folder / package / "__init__.py").is_file())


def running_checkout(package: str) -> Path | None:
    """The checkout the running ``kernelbench`` was imported from, if it holds ``package``/."""
    folder = Path(kernelbench.__file__).resolve().parent.parent
    return folder if _is_checkout(folder, package) else None


def _found_in_checkout(package: str) -> bool:
    """Whether ``import package`` already resolves to (or was already made from) a checkout of this repository."""
    module = sys.modules.get(package)
    if module is not None:
        origin = getattr(module, "__file__", None)
    else:
        try:
            spec = importlib.util.find_spec(package)
        except (ImportError, ValueError):
            spec = None
        origin = spec.origin if spec is not None else None
    return origin is not None and _is_checkout(Path(origin).resolve().parent.parent, package)


def _forget(package: str) -> None:
    """Drop a same-named module from elsewhere, so that the checkout's is imported in its place."""
    for name in [n for n in sys.modules if n == package or n.startswith(package + ".")]:
        del sys.modules[name]


def import_from_checkout(module: str, command: str) -> ModuleType:
    """Import ``module`` (e.g. ``leaderboard.validate``, ``modal_app.app``) from a checkout of the repository.

    ``command`` names what needs it, for the error when there is no checkout to take it from.
    Raises :class:`CheckoutRequired` (a one-line error, exit status 2) then.
    """
    package = module.partition(".")[0]
    if package not in REPOSITORY_PACKAGES:
        raise ValueError(f"{package!r} is not one of the repository's own packages ({', '.join(REPOSITORY_PACKAGES)})")
    if not _found_in_checkout(package):
        checkout = running_checkout(package)
        if checkout is None:
            raise CheckoutRequired(
                f"{command} runs from a checkout of the repository ({package}/ is not part of the installed "
                "package): git clone the repository, run `pip install -e .` in it, and run the command there")
        _forget(package)
        sys.path.insert(0, str(checkout))
        importlib.invalidate_caches()
    return importlib.import_module(module)
