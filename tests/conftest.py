"""Shared test configuration and fixtures: GPU tests run only where a CUDA device exists; the fixtures
that several files need (a small problem on disk, the official set pinned to test problems).

Helper functions that are not fixtures live in ``kbtesting.py`` beside this file.
"""

from __future__ import annotations

import pytest
from kbtesting import one_problem, problem_source


def _has_cuda() -> bool:
    try:
        import torch

        return torch.cuda.is_available()
    except Exception:
        return False


def pytest_collection_modifyitems(config, items):
    if _has_cuda():
        return
    skip = pytest.mark.skip(reason="needs an NVIDIA GPU (run with -m gpu on a GPU machine)")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


@pytest.fixture(scope="module")
def relu_problem(tmp_path_factory):
    """Level 1 problem 1, ReLU of one 8x8 input, written to disk and loaded: the smallest real problem."""
    return one_problem(tmp_path_factory.mktemp("relu-problem"), problem_source(), name="1_ReLU.py")


@pytest.fixture
def pin_official(tmp_path, monkeypatch):
    """``pin(folder, revision)``: the problems in ``folder`` become the official KernelBench set for this
    test (a manifest made from their hashes, named by the variable the library reads); returns the identity."""
    from kernelbench.problems import load_directory
    from kernelbench.problems.identity import MANIFEST_ENV, ProblemSetIdentity, ref_of, write_manifest

    def pin(folder, revision: str = "test-rev"):
        pinned = ProblemSetIdentity("kernelbench", revision, {ref_of(p): p.hash for p in load_directory(folder)})
        manifest = tmp_path / "manifest.json"
        write_manifest(pinned, manifest)
        monkeypatch.setenv(MANIFEST_ENV, str(manifest))
        return pinned

    return pin
