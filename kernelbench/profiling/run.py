"""Profile one candidate's forward under Nsight Compute, in the sandbox, and read back a :class:`ProfileReport`.

This process is trusted and creates no CUDA context: it checks that there is a GPU (``nvidia-smi``), an
``ncu`` and the backend's package, writes the problem, the candidate and a spec into a fresh private
folder, and runs ``ncu ... python -m kernelbench.profiling.target`` there, confined like a candidate worker
(bubblewrap: own PID, mount and network namespaces, an unprivileged user) when the sandbox policy allows
one. It then parses ncu's CSV log, marks the candidate's own kernels (the runtime guard's names) and
adds the problem's speed-of-light bound.

Everything that can go wrong before a profile exists is a :class:`ProfileUnavailable` with a one-line
message; ``kernelbench profile`` prints it and exits non-zero, refinement puts it in the prompt as
"profile unavailable: <why>".
"""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from kernelbench.errors import KernelBenchError
from kernelbench.profiling.ncu import FIELDS, NcuError, failure_reason, find_ncu, ncu_command, parse_ncu_csv
from kernelbench.profiling.report import KernelProfile, ProfileReport

log = logging.getLogger(__name__)

#: Seeds of the profiled model and inputs (fixed: a profile is advisory, nothing is judged on it).
INIT_SEED, INPUT_SEED = 42, 1234


class ProfileUnavailable(KernelBenchError):
    """No profile can be taken here (no GPU, no ncu, no permission, a candidate that fails); one line why."""


@dataclass(frozen=True)
class ProfileOptions:
    """Where and how to profile. ``sandbox`` is the evaluator's policy: auto, require or off."""

    device: str = "cuda:0"
    sandbox: str = "auto"
    allow_network: bool = False
    ncu: str | None = None
    timeout_s: float = 600.0
    #: Forward calls before the profiled one (JIT compilation, caches, first-call allocations).
    warmup: int = 2
    #: Also copy ncu's raw CSV log here (what tests/fixtures/ncu/ keeps from a real run).
    keep_csv: str | None = None


def _gpu_name(device: str) -> str:
    from kernelbench.hardware import local_gpu_names

    names = local_gpu_names(timeout_s=20)
    if not names:
        raise ProfileUnavailable("no NVIDIA GPU on this machine (nvidia-smi lists none): Nsight Compute profiles "
                                 "kernels on a local GPU")
    index = 0
    if device.startswith("cuda:"):
        try:
            index = int(device.split(":", 1)[1])
        except ValueError:
            raise ProfileUnavailable(f"bad device {device!r} (write cuda:N)") from None
    elif device != "cuda":
        raise ProfileUnavailable(f"device {device!r} cannot be profiled: Nsight Compute needs a GPU (cuda:N)")
    if index >= len(names):
        raise ProfileUnavailable(f"device {device} does not exist: this machine has {len(names)} GPU(s)")
    return names[index]


def check_profilable(backend: str, options: ProfileOptions) -> tuple[str, str]:
    """(GPU name, ncu path), or :class:`ProfileUnavailable` saying what is missing."""
    from kernelbench.backends import get_backend

    gpu = _gpu_name(options.device)
    try:
        ncu = find_ncu(options.ncu)
    except NcuError as e:
        raise ProfileUnavailable(str(e)) from None
    spec = get_backend(backend)
    missing = spec.missing_packages()
    if missing:
        raise ProfileUnavailable(spec.missing_message(missing))
    return gpu, ncu


def profile_candidate(problem, source: str, backend: str, precision: str = "fp32",
                      options: ProfileOptions | None = None) -> ProfileReport:
    """Profile one forward of ``source``'s ``ModelNew`` on ``problem``; raises :class:`ProfileUnavailable`."""
    from kernelbench.evaluation import compile_cache, isolation
    from kernelbench.evaluation.guards.runtime import own_kernel_names
    from kernelbench.evaluation.sandbox import Confinement, private_environment, scrubbed_environment

    options = options or ProfileOptions()
    gpu, ncu = check_profilable(backend, options)
    try:
        support = isolation.resolve(options.sandbox, gpu=True, allow_network=options.allow_network)
    except isolation.SandboxUnavailable as e:
        raise ProfileUnavailable(str(e)) from None
    confinement = Confinement(support.bwrap, options.allow_network, str(compile_cache.base_root())) \
        if support is not None and support.bwrap else None
    dirs = isolation.WorkerDirs.create("profile", isolation.sandbox_owner() if confinement else None)
    try:
        scratch = dirs.scratch
        (scratch / "problem.py").write_text(problem.code, encoding="utf-8")
        (scratch / "candidate.py").write_text(source, encoding="utf-8")
        spec_path = scratch / "spec.json"
        spec_path.write_text(json.dumps({
            "problem": str(scratch / "problem.py"), "candidate": str(scratch / "candidate.py"),
            "device": options.device if options.device != "cuda" else "cuda:0", "precision": precision,
            "init_seed": INIT_SEED, "input_seed": INPUT_SEED, "warmup": options.warmup,
            "cache_scope": compile_cache.source_scope(source)}))
        log_path = scratch / "ncu.csv"
        target = [sys.executable, "-m", "kernelbench.profiling.target", str(spec_path)]
        command = ncu_command(ncu, target, str(log_path))
        if confinement is not None:
            if confinement.cache_root:
                Path(confinement.cache_root).mkdir(parents=True, exist_ok=True)
            run_cmd = isolation.bwrap_command(confinement.bwrap, command, dirs, gpu=True,
                                              allow_network=options.allow_network, cache_root=confinement.cache_root)
        else:
            run_cmd = command
        env = scrubbed_environment(extra=private_environment(dirs, confinement))
        pkg_root = str(Path(__file__).resolve().parents[2])
        env["PYTHONPATH"] = pkg_root + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
        log.info("profiling %s: %s", problem.key, " ".join(run_cmd))
        try:
            out = subprocess.run(run_cmd, env=env, cwd=str(scratch), capture_output=True, text=True,
                                 timeout=options.timeout_s, stdin=subprocess.DEVNULL)
        except subprocess.TimeoutExpired:
            raise ProfileUnavailable(f"ncu did not finish within {options.timeout_s:g} s") from None
        except OSError as e:
            raise ProfileUnavailable(f"could not start ncu: {e}") from None
        ncu_log = log_path.read_text(encoding="utf-8", errors="replace") if log_path.exists() else ""
        if options.keep_csv and ncu_log:
            from kernelbench.io_utils import atomic_write_text

            atomic_write_text(options.keep_csv, ncu_log)
        reason = failure_reason("\n".join((ncu_log, out.stdout, out.stderr)), out.returncode)
        if reason:
            raise ProfileUnavailable(reason)
        status_path = scratch / "status.json"
        status = json.loads(status_path.read_text()) if status_path.exists() else None
        if status is not None and not status.get("ok"):
            raise ProfileUnavailable(f"the candidate failed before it could be profiled: {status.get('type')}: "
                                     f"{str(status.get('message', '')).splitlines()[0][:300] if status.get('message') else ''}")
        if status is None or out.returncode != 0:
            tail = (out.stderr.strip().splitlines() or out.stdout.strip().splitlines() or ["no output"])[-1]
            raise ProfileUnavailable(f"ncu exited with status {out.returncode} before the forward was profiled: "
                                     f"{tail[:300]}")
        try:
            launches = parse_ncu_csv(ncu_log)
        except NcuError as e:
            raise ProfileUnavailable(f"{e}; ncu's log begins: {ncu_log[:200]!r}") from None
        return _report(problem, source, backend, precision, gpu, launches, own_kernel_names(source), run_cmd,
                       "sandbox" if confinement is not None else "process", ncu_log)
    finally:
        dirs.cleanup()


def _report(problem, source: str, backend: str, precision: str, gpu: str, launches, own_names: set[str],
            command: list[str], isolation_kind: str, raw_csv: str = "") -> ProfileReport:
    kernels = []
    for la in launches:
        values = {k: v for k, v in la.values.items() if k in FIELDS}
        kernels.append(KernelProfile(launch_id=la.launch_id, kernel=la.kernel, stream=la.stream,
                                     own=any(n and n in la.kernel for n in own_names), **values))
    report = ProfileReport(level=problem.level, problem_id=problem.problem_id, problem_name=problem.name,
                           backend=backend, precision=precision, gpu=gpu, kernels=kernels,
                           isolation=isolation_kind, ncu_command=list(command))
    add_roofline(report, problem)
    return report


def add_roofline(report: ProfileReport, problem) -> None:
    """The problem's speed-of-light bound on the report's GPU (or a note saying why there is none)."""
    if report.gpu is None:
        report.notes.append("no speed-of-light bound: the GPU is unknown")
        return
    from kernelbench.roofline import check_speed_of_light

    total_ms = report.total_us / 1000.0 if report.total_us > 0 else None
    chk = check_speed_of_light(problem, report.gpu, report.precision, total_ms)
    if chk.info is None:
        report.notes.append(f"no speed-of-light bound: {chk.unavailable_reason}")
        return
    report.sol_bound_ms = chk.info.bound_ms
    report.sol_bound_by = chk.info.bound_by


__all__ = ["INIT_SEED", "INPUT_SEED", "ProfileOptions", "ProfileUnavailable", "add_roofline", "check_profilable",
           "profile_candidate"]
