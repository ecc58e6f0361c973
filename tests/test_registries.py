"""Runners and problem sources: registries with the same "available: ..." error as backends.

A runner or source registered at run time appears in ``--runner`` / ``--source`` and is what
``get_runner`` / ``load_problems`` return; unknown names fail with the list of registered ones.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass

import pytest

from kernelbench.errors import KernelBenchError, SourceError
from kernelbench.problems import (
    SOURCE_REGISTRY,
    ProblemSet,
    ProblemSource,
    UnknownSourceError,
    load_builtin,
    load_problems,
    source_names,
)
from kernelbench.registry import Registry
from kernelbench.runners import REGISTRY as RUNNERS
from kernelbench.runners import RunnerSpec, UnknownRunnerError, get_runner, runner_names


def _parse(argv: list[str]) -> argparse.Namespace:
    from kernelbench.cli.main import build_parser

    return build_parser().parse_args(argv)


@dataclass(frozen=True)
class _Item:
    name: str


def test_registry_lookup_aliases_and_conflicts():
    reg: Registry[_Item] = Registry("widget")
    reg.register(_Item("b"))
    reg.register(_Item("a"), aliases=("alpha",))
    assert reg.names() == ("a", "b") and reg.get("alpha") == _Item("a") and "alpha" in reg
    with pytest.raises(KernelBenchError, match=r"^unknown widget 'c' \(available: a, b\)$"):
        reg.get("c")
    with pytest.raises(ValueError, match="widget 'a' is already registered"):
        reg.register(_Item("a"))
    with pytest.raises(ValueError, match="widget 'alpha' is already registered"):
        reg.register(_Item("alpha"))
    with reg.registered(_Item("c"), aliases=("gamma",)):
        assert reg.names() == ("a", "b", "c") and reg.get("gamma").name == "c"
    assert reg.names() == ("a", "b") and "gamma" not in reg


def test_unknown_runner_names_the_available_ones():
    assert runner_names() == ("local", "modal")
    with pytest.raises(UnknownRunnerError) as info:
        get_runner("slurm")
    assert str(info.value) == "unknown runner 'slurm' (available: local, modal)"
    assert isinstance(info.value, KernelBenchError)
    assert get_runner("local").name == "local"


def test_a_registered_runner_is_offered_and_built(tmp_path):
    made: list[tuple] = []

    class Recorder:
        name = "recorder"

        def run(self, jobs, on_result=None, progress=True):
            return []

    def make(gpu, **options):
        made.append((gpu, options))
        return Recorder()

    kernel = tmp_path / "k.py"
    kernel.write_text("x = 1\n")
    with RUNNERS.registered(RunnerSpec("recorder", "records what it was asked to build", make)):
        args = _parse(["eval", "--level", "1", "--problem-id", "1", "--kernel", str(kernel), "--runner", "recorder"])
        assert args.runner == "recorder"
        assert get_runner("recorder", gpu="L40S", dry_run=True).name == "recorder"
        assert made == [("L40S", {"dry_run": True})]
    assert "recorder" not in runner_names()


def test_unknown_source_names_the_available_ones():
    assert source_names() == ("builtin", "directory", "huggingface", "kernelbench")
    with pytest.raises(UnknownSourceError) as info:
        load_problems("github")
    assert str(info.value) == "unknown problem source 'github' (available: builtin, directory, huggingface, kernelbench)"
    assert isinstance(info.value, SourceError)
    with pytest.raises(SourceError, match="--source directory needs --path"):
        load_problems("local")  # an alias of directory


def test_a_registered_source_is_offered_and_loaded():
    asked: list[tuple] = []

    def load(path, levels):
        asked.append((path, levels))
        return ProblemSet([load_builtin([1]).get(1, 8)], source="tiny")

    with SOURCE_REGISTRY.registered(ProblemSource("tiny", "one problem", load)):
        assert _parse(["problems", "list", "--source", "tiny"]).source == "tiny"
        problems = load_problems("tiny", "somewhere", levels=[1])
        assert [p.name for p in problems] == ["8_ReLU"] and asked == [("somewhere", [1])]
    assert "tiny" not in source_names()
