"""Where a baseline file lives: one per GPU type, in one folder per problem set."""

from __future__ import annotations

from pathlib import Path

from kernelbench.hardware import gpu_label
from kernelbench.problems.identity import KERNELBENCH


def baseline_path_for_gpu(gpu_name: str, root: str | Path = "baselines") -> Path:
    """``baselines/<family>.json``, the file ``kernelbench analyze --gpu`` uses.

    Any spelling of a GPU gives its family's file, so a local A100 run (``NVIDIA A100-SXM4-80GB``),
    a Modal ``--gpu A100-80GB`` run and ``analyze --gpu A100`` all read and write ``A100.json``.
    """
    return Path(root) / f"{gpu_label(gpu_name)}.json"


def baselines_dir_for(set_name: str, root: str | Path = "baselines") -> Path:
    """Where a problem set's ``<GPU>.json`` files live: ``baselines/kernelbench/`` for the official set,
    ``baselines/`` for the built-in suite (and any other). One folder per set, so the board of one set
    never picks up the times of another's problems that share a file name's id."""
    return Path(root) / KERNELBENCH if set_name == KERNELBENCH else Path(root)


def find_baseline_for_gpu(gpu_name: str, set_name: str, folder: str | Path = "baselines") -> Path:
    """The baseline file to score ``set_name``'s problems on this GPU, given a baselines ``folder``.

    ``folder`` may be the baselines root (``baselines``: the official set's file is then
    ``baselines/kernelbench/<GPU>.json``, the built-in suite's ``baselines/<GPU>.json``) or a set's own
    folder (``baselines/kernelbench``, or a folder of your own): the set's folder under it is used where it
    holds the file, else the folder itself. Whichever file is picked, consumers still check its recorded
    problem set and names against the problems they score, so a wrong pick is an error, never a score.
    """
    own = baseline_path_for_gpu(gpu_name, baselines_dir_for(set_name, folder))
    flat = baseline_path_for_gpu(gpu_name, folder)
    return own if own.is_file() or not flat.is_file() else flat
