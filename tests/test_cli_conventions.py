"""What every command shares (docs/cli.md): exit statuses, one ``--json`` convention, progress bars only on
a terminal, and the repository's ``leaderboard/`` and ``modal_app/`` taken only from a checkout.

Each is checked with the real ``kernelbench`` command in a fresh process. Where a case needs a crash or
a hang of our own (there is no input that makes one), the child process replaces one command's handler
before calling the real ``main``: everything around the handler is the shipped code.
"""

from __future__ import annotations

import argparse
import fcntl
import io
import json
import os
import pty
import shutil
import signal
import struct
import subprocess
import sys
import termios
import zipfile
from pathlib import Path

import pytest
from fixtures.leaderboard import factory as F
from kbtesting import REPO, load_script, repo_env, run_cli

from kernelbench.cli.main import EXIT_CODES, build_parser
from kernelbench.progress import progress_bar

OK_CANDIDATE = REPO / "tests" / "adversarial" / "ok_triton_relu.py"
FAILING_CANDIDATE = REPO / "tests" / "adversarial" / "e12_compiled_not_launched.py"
PROBLEMS_ARGS = ["--source", "directory", "--path", str(F.PROBLEMS_DIR)]


def with_handler(body: str, *argv: str, env: dict[str, str] | None = None) -> subprocess.Popen:
    """``kernelbench ARGV problems list`` started in a child whose handler is ``body`` (indented 4)."""
    code = ("import sys\nimport kernelbench.cli.problems as verb\n\ndef handler(args):\n" + body
            + "\nverb._list = handler\nfrom kernelbench.cli.main import main\n"
            + f"sys.exit(main({[*argv, 'problems', 'list']!r}))\n")
    return subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=env or repo_env())


# ---------------------------------------------------------------------------------------------
# Exit statuses

def test_the_exit_statuses_are_in_the_top_level_help():
    out = run_cli("--help", timeout=120)
    assert out.returncode == 0
    epilog = out.stdout.split("exit status:", 1)[1]
    for code in (0, 1, 2, 3, 130):
        assert f"\n  {code} " in epilog, code
    assert "internal error" in epilog and "bad input" in epilog and "interrupted" in epilog
    assert set(EXIT_CODES) == {0, 1, 2, 3, 130}


def test_success_a_failed_check_and_bad_input_have_their_own_status():
    assert run_cli("problems", "list", "--level", "1", timeout=120).returncode == 0
    failed = run_cli("guard", str(FAILING_CANDIDATE), timeout=120)
    assert failed.returncode == 1, failed.stderr  # the check ran and found an error: not a crash, not bad input
    usage = run_cli("problems", "list", "--level", "7", timeout=120)
    assert usage.returncode == 2 and "unknown level 7" in usage.stderr
    bad = run_cli("problems", "show", "--level", "1", "--problem-id", "999", timeout=120)
    assert bad.returncode == 2 and bad.stderr.strip().splitlines() == [bad.stderr.strip()]
    assert bad.stderr.startswith("error: ") and "Traceback" not in bad.stderr


def test_a_crash_of_our_own_is_status_3_one_line_and_the_traceback_in_a_file(tmp_path):
    env = repo_env({"TMPDIR": str(tmp_path)})
    proc = with_handler("    return {}['no such key']", env=env)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 3, err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in err
    assert lines[0].startswith("kernelbench: internal error (a bug, not your input): KeyError: 'no such key'")
    assert "--debug prints it" in lines[0]
    crash = next(tmp_path.glob("kernelbench-crash-*.txt"))
    assert str(crash) in lines[0]
    assert "Traceback (most recent call last)" in crash.read_text() and "in handler" in crash.read_text()

    debug = with_handler("    return {}['no such key']", "--debug", env=env)
    _, err = debug.communicate(timeout=120)
    assert debug.returncode == 3
    assert "Traceback (most recent call last)" in err and "in handler" in err and "(traceback above)" in err
    assert len(list(tmp_path.glob("kernelbench-crash-*.txt"))) == 1  # --debug writes no file


def test_an_interrupt_is_status_130():
    proc = with_handler("    print('ready', flush=True)\n    import time\n    time.sleep(120)")
    try:
        assert proc.stdout.readline().strip() == "ready"
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=60)
    finally:
        proc.kill()
    assert proc.returncode == 130 and "interrupted" in err


# ---------------------------------------------------------------------------------------------
# --json

def test_json_to_a_file_keeps_the_text_and_json_to_stdout_is_only_json(tmp_path):
    target = tmp_path / "problems.json"
    to_file = run_cli("problems", "list", "--level", "1", "--json", str(target), timeout=120)
    assert to_file.returncode == 0, to_file.stderr
    assert "problems from builtin" in to_file.stdout and f"wrote {target}" in to_file.stdout
    listed = json.loads(target.read_text())
    assert listed and {p["level"] for p in listed} == {1}
    for spelling in (["--json"], ["--json", "-"]):
        to_stdout = run_cli("problems", "list", "--level", "1", *spelling, timeout=120)
        assert to_stdout.returncode == 0 and json.loads(to_stdout.stdout) == listed  # nothing else on stdout
    gpus = run_cli("roofline", "--list-gpus", "--json", timeout=120)
    assert gpus.returncode == 0 and "H100" in {g["name"] for g in json.loads(gpus.stdout)}


def test_the_old_spellings_work_hidden_and_say_they_are_deprecated(capsys):
    cases = [(["eval", "--level", "1", "--problem-id", "1", "--kernel", "k.py", "--output", "x.json"], "--output"),
             (["analyze", "--run-dir", "r", "--json-out", "x.json"], "--json-out"),
             (["analyze", "--run-dir", "r", "--output", "x.json"], "--output"),
             (["leaderboard", "validate", "s.json", "--report-json", "x.json"], "--report-json"),
             (["run", "--model", "m", "--level", "1", "--scores-out", "x.json"], "--scores-out")]
    parser = build_parser()
    for argv, spelling in cases:
        args = parser.parse_args(argv)
        assert args.json == "x.json", argv
        command = " ".join(a for a in argv[:2] if not a.startswith("-") and a != "s.json")
        assert capsys.readouterr().err.strip() == (f"kernelbench {command}: warning: {spelling} is deprecated; "
                                                   "use --json x.json")
    helps = [sub.format_help() for sub in _all_subparsers(parser)]
    assert not any("--output" in text for text in helps if "--json [PATH]" in text)
    assert not any(old in text for text in helps for old in ("--json-out", "--report-json", "--scores-out"))
    # eval, analyze, run, demo, problems list and show, roofline, profile, guard, leaderboard validate
    assert sum("--json [PATH]" in text for text in helps) == 10

    for script, argv, spelling in [("compare_baselines", ["ours.json", "--json-out", "x.json"], "--json-out"),
                                   ("bench_baselines", ["--json-out", "x.json"], "--json-out")]:
        assert load_script(script).parse_args(argv).json == "x.json"
        assert f"warning: {spelling} is deprecated; use --json x.json" in capsys.readouterr().err


def _all_subparsers(parser: argparse.ArgumentParser) -> list[argparse.ArgumentParser]:
    found = []
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                found += [sub, *_all_subparsers(sub)]
    return found


def test_validate_report_json_still_writes_the_report(tmp_path):
    sub = F.write_submission(tmp_path / "good.json")
    report = tmp_path / "report.json"
    proc = run_cli("leaderboard", "validate", str(sub), "--no-guard", "--report-json", str(report), *PROBLEMS_ARGS,
                   cwd=REPO, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "--report-json is deprecated; use --json" in proc.stderr
    assert json.loads(report.read_text())["files"][0]["passed"] is True


def test_the_word_after_json_is_never_a_file_it_would_destroy(tmp_path):
    # guard: before --json took a path, `guard --json a.py b.py` meant two candidates and JSON on stdout.
    before = OK_CANDIDATE.read_bytes()
    proc = run_cli("guard", "--json", str(OK_CANDIDATE), str(FAILING_CANDIDATE), timeout=120)
    assert OK_CANDIDATE.read_bytes() == before
    reports = json.loads(proc.stdout)
    assert [Path(r["path"]).name for r in reports] == [OK_CANDIDATE.name, FAILING_CANDIDATE.name]
    assert proc.returncode == 1  # the second one fails the guard
    # validate: a submission named after --json is refused, and left as it was.
    first, second = F.write_submission(tmp_path / "a.json"), F.write_submission(tmp_path / "b.json")
    text = first.read_text()
    refused = run_cli("leaderboard", "validate", "--json", str(first), str(second), *PROBLEMS_ARGS, timeout=120)
    assert refused.returncode == 2 and "names a submission file" in refused.stderr
    assert first.read_text() == text


# ---------------------------------------------------------------------------------------------
# Progress bars only on a terminal

def _guard_twenty(tmp_path: Path) -> list[str]:
    """Twenty candidate files: the guard command shows a bar from twenty files on."""
    files = []
    for i in range(20):
        files.append(str(tmp_path / f"c{i}.py"))
        shutil.copy(OK_CANDIDATE, files[-1])
    return files


def test_no_progress_bar_in_a_log_and_one_on_a_terminal(tmp_path):
    files = _guard_twenty(tmp_path)
    logged = run_cli("guard", "--quiet", *files, timeout=120)
    assert logged.returncode == 0, logged.stderr
    assert "\r" not in logged.stderr and "guard:" not in logged.stderr and "file/s" not in logged.stderr

    main_fd, child_fd = pty.openpty()  # stderr on a terminal (24 x 100): the same command draws its bar
    fcntl.ioctl(child_fd, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 100, 0, 0))
    try:
        proc = subprocess.Popen([sys.executable, "-m", "kernelbench.cli.main", "guard", "--quiet", *files],
                                stdout=subprocess.DEVNULL, stderr=child_fd, env=repo_env())
        os.close(child_fd)
        drawn = b""
        while True:
            try:
                chunk = os.read(main_fd, 4096)
            except OSError:  # EIO: the child closed the terminal
                break
            if not chunk:
                break
            drawn += chunk
        assert proc.wait(timeout=120) == 0
    finally:
        os.close(main_fd)
    assert b"\r" in drawn and b"guard" in drawn and b"20/20" in drawn


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_the_one_bar_helper_draws_only_when_asked_and_on_a_terminal(monkeypatch):
    for stream, enabled, drawn in [(io.StringIO(), True, False), (_Terminal(), True, True), (_Terminal(), False, False)]:
        monkeypatch.setattr(sys, "stderr", stream)
        for _ in progress_bar(range(3), desc="items", enabled=enabled):
            pass
        assert ("items" in stream.getvalue()) == drawn, (type(stream).__name__, enabled)


def test_every_bar_goes_through_the_helper():
    """No module builds a tqdm bar of its own (its default draws into logs)."""
    exempt = {REPO / "kernelbench" / "progress.py"}
    users = [p for folder in ("kernelbench", "leaderboard", "modal_app", "scripts") for p in (REPO / folder).rglob("*.py")
             if p not in exempt and "from tqdm import" in p.read_text(encoding="utf-8")]
    assert users == []


# ---------------------------------------------------------------------------------------------
# leaderboard/ and modal_app/ come from a checkout

#: Runs first in each child: drop the import finders of an editable install (``pip install -e``), so
#: that the child sees only its ``PYTHONPATH`` and site-packages, as the case under test sets them up.
NO_EDITABLE = ("import sys\nsys.meta_path[:] = [f for f in sys.meta_path "
               "if not getattr(f, '__module__', '').startswith('__editable__')]\n")


def _child(code: str, site: Path, cwd: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(site)}
    return subprocess.run([sys.executable, "-c", NO_EDITABLE + code], capture_output=True, text=True, cwd=cwd,
                          env=env, timeout=300)


def _site(tmp_path: Path, kernelbench_from: str, foreign: bool) -> Path:
    """A folder on PYTHONPATH with ``kernelbench`` as a link into this checkout (what an editable install
    resolves to) or as a copy (what a wheel installs), and, with ``foreign``, another distribution's
    top-level ``leaderboard``."""
    site = tmp_path / "site"
    site.mkdir()
    if kernelbench_from == "checkout":
        (site / "kernelbench").symlink_to(REPO / "kernelbench", target_is_directory=True)
    else:
        shutil.copytree(REPO / "kernelbench", site / "kernelbench", ignore=shutil.ignore_patterns("__pycache__"))
    if foreign:
        (site / "leaderboard").mkdir()
        (site / "leaderboard" / "__init__.py").write_text("FOREIGN = True\n")
    return site


HELPER = ("from kernelbench.cli.checkout import import_from_checkout\n"
          "m = import_from_checkout('leaderboard.schema', 'kernelbench leaderboard')\nprint(m.__file__)\n")


def test_from_the_repository_root_the_checkouts_own_package_is_used():
    proc = _child(HELPER, REPO, REPO)
    assert proc.returncode == 0, proc.stderr
    assert Path(proc.stdout.strip()) == REPO / "leaderboard" / "schema.py"


@pytest.mark.parametrize("foreign", [False, True])
def test_an_editable_install_finds_its_checkout_and_never_a_foreign_package(tmp_path, foreign):
    site = _site(tmp_path, "checkout", foreign)
    seen = _child("import importlib.util\nprint(importlib.util.find_spec('leaderboard') is not None)\n" + HELPER,
                  site, tmp_path)
    assert seen.returncode == 0, seen.stderr
    found_plainly, module_file = seen.stdout.split()
    assert found_plainly == str(foreign)  # only the foreign one is importable without the helper
    assert Path(module_file) == REPO / "leaderboard" / "schema.py"
    # The whole command, end to end, from outside the checkout.
    sub = F.write_submission(tmp_path / "entry.json")
    proc = _child("from kernelbench.cli.main import main\n"
                  f"sys.exit(main(['leaderboard', 'to-run', {str(sub)!r}, '--runs-dir', 'runs']))\n", site, tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "runs" / "entry_level1" / "level_1_problem_1_sample_0_kernel.py").is_file()


@pytest.mark.parametrize("foreign", [False, True])
def test_an_installed_wheel_says_to_use_a_checkout(tmp_path, foreign):
    site = _site(tmp_path, "wheel", foreign)
    sub = F.write_submission(tmp_path / "entry.json")
    proc = _child("from kernelbench.cli.main import main\n"
                  f"sys.exit(main(['leaderboard', 'to-run', {str(sub)!r}]))\n", site, tmp_path)
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines() == [
        "error: kernelbench leaderboard runs from a checkout of the repository (leaderboard/ is not part of the "
        "installed package): git clone the repository, run `pip install -e .` in it, and run the command there"]
    assert not (tmp_path / "runs").exists()
    modal = _child("from kernelbench.cli.common import load_modal_app\n"
                   "try:\n    load_modal_app()\nexcept Exception as e:\n    print(type(e).__name__, e)\n", site, tmp_path)
    assert modal.stdout.startswith("CheckoutRequired a Modal app that is not deployed"), modal.stdout + modal.stderr
    assert "modal_app/ is not part of the installed package" in modal.stdout


@pytest.mark.slow
def test_the_wheel_installs_kernelbench_alone(tmp_path):
    """Built from a copy of the sources, as pip builds it for a user: the build requirement builds, and the
    wheel holds ``kernelbench`` (with its data files) and no ``leaderboard`` or ``modal_app``."""
    try:
        import tomllib
    except ModuleNotFoundError:  # Python 3.10
        tomllib = None
    if tomllib is not None:
        requires = tomllib.loads((REPO / "pyproject.toml").read_text())["build-system"]["requires"]
        assert "setuptools>=77" in requires  # the SPDX `license = "MIT"` string needs 77 or later
    src = tmp_path / "src"
    src.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(REPO / name, src / name)
    for folder in ("kernelbench", "leaderboard", "modal_app"):
        shutil.copytree(REPO / folder, src / folder, ignore=shutil.ignore_patterns("__pycache__"))
    command = [sys.executable, "-m", "pip", "wheel", str(src), "--no-deps", "-w", str(tmp_path / "dist"), "-q"]
    try:  # the requirement already here (this environment): build offline with it, else let pip fetch it
        import setuptools

        if int(setuptools.__version__.split(".")[0]) >= 77:
            command.append("--no-build-isolation")
    except ImportError:
        pass
    built = subprocess.run(command, capture_output=True, text=True, timeout=600)
    assert built.returncode == 0, built.stdout + built.stderr
    (wheel,) = (tmp_path / "dist").glob("kernelbench-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    assert {n.split("/")[0] for n in names} == {"kernelbench", wheel.name.split("-py3")[0] + ".dist-info"}
    for needed in ("kernelbench/cli/checkout.py", "kernelbench/problems/builtin/level1/8_ReLU.py",
                   "kernelbench/solutions/triton/level1/8_ReLU.py"):
        assert needed in names, needed
    assert any(n.startswith("kernelbench/prompts/") and not n.endswith(".py") for n in names)
