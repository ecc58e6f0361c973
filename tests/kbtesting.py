"""Helpers that several test files share: small problems on disk, the ``kernelbench`` command in a
fresh process, the repository's scripts as modules, and an in-process stand-in for a Modal function.

Fixtures built on these live in ``conftest.py``. Import this module by name (``from kbtesting import
...``): pytest puts ``tests/`` on the path, as for ``llm_server``. Nothing here fakes a component
that can run: the stand-in replaces only Modal's cloud, and runs the real function body.
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
import textwrap
from collections.abc import Callable, Iterable, Iterator, Mapping
from pathlib import Path
from types import ModuleType

REPO = Path(__file__).resolve().parents[1]
SCRIPTS = REPO / "scripts"


# ---------------------------------------------------------------------------------------------
# Problems

def problem_source(forward: str = "torch.relu(x)", shape: str = "8, 8", imports: str = "") -> str:
    """A small KernelBench problem: ``Model.forward(x)`` returns ``forward`` on one ``torch.randn(shape)``.

    CPU-sized (the built-in suite is sized for an H100). ``imports`` goes first, e.g. the import of a
    package that is not installed, for the tests of problems that cannot run where they are sent.
    """
    return f'''{imports}import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return {forward}


def get_inputs():
    return [torch.randn({shape})]


def get_init_inputs():
    return []
'''


#: A problem whose reference cannot make its inputs (a baseline of it fails with this message).
BROKEN_INPUTS_PROBLEM = '''import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        return x


def get_inputs():
    raise ValueError("inputs cannot be made")


def get_init_inputs():
    return []
'''


def candidate_of(problem: str) -> str:
    """The problem's own ``Model`` as a candidate ``ModelNew`` (correct by construction)."""
    return problem.replace("class Model(", "class ModelNew(").split("def get_inputs")[0]


def write_problems(root: Path, files: Mapping[str, str], level: int = 1) -> Path:
    """Write each ``{file name: source}`` (dedented) under ``root/level<level>/``; return ``root``.

    The layout of a KernelBench checkout's ``KernelBench/`` folder, for ``--source directory``.
    """
    folder = Path(root) / f"level{level}"
    folder.mkdir(parents=True, exist_ok=True)
    for name, code in files.items():
        (folder / name).write_text(textwrap.dedent(code))
    return Path(root)


def load_problems_from(root: Path, files: Mapping[str, str], level: int = 1):
    """:func:`write_problems`, then the :class:`~kernelbench.problems.ProblemSet` loaded from it."""
    from kernelbench.problems import load_directory

    return load_directory(write_problems(root, files, level))


def one_problem(root: Path, code: str, name: str = "1_Relu.py", level: int = 1):
    """One problem written under ``root`` and loaded back (its id is the file name's prefix)."""
    return load_problems_from(root, {name: code}, level).get(level, int(name.split("_", 1)[0]))


# ---------------------------------------------------------------------------------------------
# Processes and scripts

def repo_env(extra: Mapping[str, str] | None = None, base: Mapping[str, str] | None = None) -> dict[str, str]:
    """``base`` (default: this environment) with this repository first on PYTHONPATH, plus ``extra``.

    A child process then imports this checkout's code, whatever else the path held (on the GPU
    machine: the carried wheels), and finds ``leaderboard`` and ``modal_app`` as a checkout does.
    """
    env = dict(os.environ if base is None else base)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO), env.get("PYTHONPATH")) if p)
    env.update(extra or {})
    return env


def run_cli(*args: str, cwd: Path | str | None = None, env: Mapping[str, str] | None = None,
            timeout: float = 600, stdin: int | None = None) -> subprocess.CompletedProcess:
    """``python -m kernelbench.cli.main ARGS`` in a fresh process (text output captured, never raises).

    ``env`` defaults to :func:`repo_env`; pass one to run with exactly that environment.
    """
    return subprocess.run([sys.executable, "-m", "kernelbench.cli.main", *args], capture_output=True, text=True,
                          cwd=cwd, env=repo_env() if env is None else dict(env), timeout=timeout, stdin=stdin)


def load_script(name: str) -> ModuleType:
    """``scripts/<name>.py`` imported as a module (``scripts/`` on the path, for the scripts' ``import _kv``)."""
    if str(SCRIPTS) not in sys.path:
        sys.path.insert(0, str(SCRIPTS))
    spec = importlib.util.spec_from_file_location(f"kb_script_{name}", SCRIPTS / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # (a script's dataclasses look their module up while they are made)
    spec.loader.exec_module(module)
    return module


def files_containing(root: Path, needle: str) -> list[Path]:
    """Every file under ``root`` whose text holds ``needle`` (a secret that must not have been written)."""
    return [p for p in root.rglob("*") if p.is_file() and needle in p.read_text(encoding="utf-8", errors="replace")]


# ---------------------------------------------------------------------------------------------
# Modal

class ModalFunctionStandIn:
    """A Modal ``Function``'s ``.map`` and ``.remote`` in this process, around the real function body.

    Modal's cloud is unreachable here; this keeps the contract the runner relies on: inputs in,
    outputs as each finishes (``order`` permutes them when ``order_outputs=False``, as completion
    order is not input order), an exception handed back as a value with ``return_exceptions=True``.
    ``fail`` maps a payload's ``index`` to the exception Modal would give for it after its retries
    (a lost container); ``stop_after`` raises ``raise_after`` once that many outputs were yielded
    (a dropped connection, Ctrl-C). ``calls`` records every payload sent.
    """

    def __init__(self, body: Callable[[dict], object], order: Callable[[int], list[int]] | None = None,
                 fail: Mapping[int, BaseException] | None = None, stop_after: int | None = None,
                 raise_after: BaseException | None = None):
        self.body = body
        self.order = order or (lambda n: list(range(n)))
        self.fail = dict(fail or {})
        self.stop_after = stop_after
        self.raise_after = raise_after
        self.calls: list[dict] = []

    def map(self, inputs: Iterable[dict], order_outputs: bool = True,
            return_exceptions: bool = False) -> Iterator[object]:
        inputs = list(inputs)
        sequence = range(len(inputs)) if order_outputs else self.order(len(inputs))
        for yielded, i in enumerate(sequence):
            if self.stop_after is not None and yielded >= self.stop_after:
                raise self.raise_after
            try:
                out = self.remote(inputs[i])
            except Exception as e:
                if not return_exceptions:
                    raise
                out = e
            yield out

    def remote(self, payload: dict) -> object:
        self.calls.append(payload)
        if payload.get("index") in self.fail:
            raise self.fail[payload["index"]]
        return self.body(payload)


def gpu_environment(gpu: str, driver: str = "580.65") -> dict[str, str]:
    """The environment block a measurement on ``gpu`` records (the GPU machine's versions), for results
    and baseline files that tests write as if measured there."""
    from kernelbench import TIMING_PROTOCOL_VERSION

    return {"device": "cuda:0", "gpu_name": gpu, "driver": driver, "cuda": "13.0", "torch": "2.11.0+cu130",
            "triton": "3.6.0", "timing_protocol": TIMING_PROTOCOL_VERSION}


#: A problem with a learned weight and an init input: ReLU of a 32x64 input times a learned scale,
#: so that a candidate must rebuild the reference's seeded weights to pass.
SCALED_RELU_PROBLEM = '''
import torch
import torch.nn as nn

class Model(nn.Module):
    """Scaled ReLU with a learned scale."""
    def __init__(self, n):
        super().__init__()
        self.scale = nn.Parameter(torch.randn(n))
    def forward(self, x):
        return torch.relu(x) * self.scale

N = 64
def get_inputs():
    return [torch.randn(32, N)]

def get_init_inputs():
    return [N]
'''
CANDIDATE_HEAD = "import torch\nimport torch.nn as nn\n"
SCALED_RELU_INIT = ("    def __init__(self, n):\n        super().__init__()\n"
                    "        self.scale = nn.Parameter(torch.randn(n))\n")


def scaled_relu_candidate(forward_body: str, prefix: str = "", init: str = SCALED_RELU_INIT) -> str:
    """A ``ModelNew`` for :data:`SCALED_RELU_PROBLEM` whose ``forward`` is ``forward_body`` (indented 8);
    ``prefix`` goes between the imports and the class."""
    return CANDIDATE_HEAD + prefix + "class ModelNew(nn.Module):\n" + init + "    def forward(self, x):\n" + forward_body


#: A Triton candidate for a matmul that launches a legal kernel on a scratch buffer and takes the
#: product from PyTorch: the launch guard is satisfied, the work is not the candidate's own.
MATMUL_SCRATCH_DECOY = '''
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def scratch_kernel(ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(ptr + offs, tl.zeros((BLOCK,), dtype=tl.float32), mask=offs < n)


class ModelNew(nn.Module):
    def forward(self, A, B):
        scratch = torch.empty(1024, device=A.device)
        scratch_kernel[(1,)](scratch, 1024, BLOCK=1024)
        return getattr(torch, "mat" + "mul")(A, B)
'''


def run_interpreted(prelude: str, body: str, env_extra: Mapping[str, str] | None = None) -> str:
    """``prelude`` then ``body`` (dedented) in a child Python under Triton's CPU interpreter, which needs
    ``TRITON_INTERPRET=1`` before any kernel is defined; asserts the child got to its end and returns its output."""
    env = {**os.environ, "TRITON_INTERPRET": "1", "PYTHONPATH": str(REPO), **(env_extra or {})}
    code = prelude + textwrap.dedent(body) + "\nprint('CHILD-OK')\n"
    proc = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=600,
                          cwd=str(REPO))
    assert proc.returncode == 0 and "CHILD-OK" in proc.stdout, proc.stdout[-3000:] + proc.stderr[-3000:]
    return proc.stdout
