"""Starting and stopping worker processes: scrubbed environment, own process group, captured output.

Workers are started with ``subprocess`` rather than ``multiprocessing`` so that the parent
chooses their environment exactly (no secrets, no inherited state) without touching its own
``os.environ``, and so that a whole process group (a candidate may start children) can be killed.
"""

from __future__ import annotations

import collections
import logging
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kernelbench.evaluation.channel import Channel
from kernelbench.evaluation.isolation import WorkerDirs, bwrap_command, sandbox_owner

log = logging.getLogger(__name__)

_SECRET_NAME = re.compile(
    r"(_API_KEY|_APIKEY|_TOKEN|_SECRET|_SECRET_KEY|_ACCESS_KEY|_PASSWORD|_PASSWD|_CREDENTIALS)$|"
    r"^(MODAL_|HF_TOKEN|HUGGING_FACE_HUB_TOKEN|GITHUB_TOKEN|GH_TOKEN|ACTIONS_RUNTIME_TOKEN|ACTIONS_ID_TOKEN)",
    re.IGNORECASE,
)
OUTPUT_TAIL_BYTES = 64 * 1024
#: The shared-memory names PyTorch gives CUDA IPC reference counters: "/torch_<pid>_<random>_<n>".
_HOST_COPY_NAME = re.compile(r"kbx-arena")


def is_secret_name(name: str) -> bool:
    return bool(_SECRET_NAME.search(name)) or "SECRET" in name.upper() or "PASSWORD" in name.upper()


def scrubbed_environment(base: Mapping[str, str] | None = None, extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """A copy of ``base`` (default: this process's environment) without secrets, plus ``extra``."""
    env = {k: v for k, v in (os.environ if base is None else base).items() if not is_secret_name(k)}
    if extra:
        env.update(extra)
    return env


@dataclass(frozen=True)
class Confinement:
    """How a candidate or compile worker is sandboxed (see :mod:`kernelbench.evaluation.isolation`)."""

    bwrap: str
    allow_network: bool = False
    #: The extension cache, shown read-only inside (only the parent writes it).
    cache_root: str | None = None


def private_environment(dirs: WorkerDirs, confinement: Confinement | None) -> dict[str, str]:
    """Every cache and temporary path a worker may write points into its own folders.

    HOME moves too: inside a sandbox the user's home is hidden, and Triton, Inductor, Hugging Face and
    torch's extension builder all default to folders under it.
    """
    from kernelbench.evaluation import compile_cache, transport

    scratch, build = str(dirs.scratch), str(dirs.build)
    env = {"HOME": scratch, "XDG_CACHE_HOME": os.path.join(scratch, ".cache"),
           "TRITON_CACHE_DIR": os.path.join(scratch, ".triton", "cache"),
           "TORCHINDUCTOR_CACHE_DIR": os.path.join(scratch, "inductor"),
           "TORCH_EXTENSIONS_DIR": os.path.join(build, "torch_extensions"),
           compile_cache.BUILD_DIR_ENV: build, compile_cache.CACHE_ENV: str(compile_cache.base_root())}
    from kernelbench.backends import all_backends

    for spec in all_backends():  # the DSLs' own compile caches (CuTe's defaults to the shared /tmp)
        for var, rel in spec.private_dirs_env.items():
            env[var] = os.path.join(scratch, rel)
    if confinement is not None:
        # Alone in its PID namespace, the worker's CUDA IPC handles cannot be opened by the reference.
        env.update({"TMPDIR": "/tmp", "USER": "kbsandbox", "LOGNAME": "kbsandbox", transport.HOST_COPY_ENV: "1"})
    return env


class _TailReader(threading.Thread):
    """Drains a pipe, keeping only its last bytes, so a flood of output costs neither memory nor disk."""

    def __init__(self, stream, limit: int = OUTPUT_TAIL_BYTES):
        super().__init__(daemon=True)
        self.stream = stream
        self.limit = limit
        self.chunks: collections.deque[bytes] = collections.deque()
        self.size = 0
        self.total = 0
        self.lock = threading.Lock()

    def run(self) -> None:
        while True:
            try:
                data = self.stream.read1(65536) if hasattr(self.stream, "read1") else self.stream.read(65536)
            except (OSError, ValueError):
                break
            if not data:
                break
            with self.lock:
                self.chunks.append(data)
                self.size += len(data)
                self.total += len(data)
                while self.size > self.limit and len(self.chunks) > 1:
                    self.size -= len(self.chunks.popleft())

    def tail(self) -> str:
        with self.lock:
            data = b"".join(self.chunks)[-self.limit:]
        text = data.decode("utf-8", errors="replace")
        if self.total > len(data):
            text = f"[... {self.total - len(data)} earlier bytes dropped ...]\n" + text
        return text


class WorkerProcess:
    """One worker: a child process, its channel, and the tails of its stdout and stderr."""

    def __init__(self, role: str, device: str, env: Mapping[str, str], cwd: str | None = None,
                 confinement: Confinement | None = None, template: bool = False,
                 launcher: Callable[[socket.socket, str], Any] | None = None):
        """``template``: start a reference template (``worker/template.py``) rather than a worker. ``launcher``: how
        the process comes to be instead of a new Python (a reference template's fork: ``parent/template.py``), called
        with the worker's end of the channel and its working folder, returning an object like ``subprocess.Popen``
        (``pid``, ``stdout``, ``stderr``, ``poll``, ``wait``, ``kill``)."""
        if launcher is not None and (confinement is not None or role != "reference" or template):
            raise ValueError("only an unconfined reference worker is forked from a template")
        self.role = role
        #: A reference's problems set up so far (parent/session.py reuses one for several, REUSE_ENV).
        self.problems_served = 0
        self._kill_lock = threading.Lock()
        self.device = device
        self.confinement = confinement
        parent_sock, child_sock = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        child_fd = child_sock.fileno()
        self._tmpdir = None
        #: Private scratch and build folders (candidate and compile workers): the parent publishes
        #: what was built there into the extension cache after the worker has exited.
        self.dirs: WorkerDirs | None = None
        self.after_exit: Callable[[WorkerProcess], None] | None = None
        env = dict(env)
        if confinement is not None or role in ("candidate", "compile"):
            owner = sandbox_owner() if confinement is not None else None
            self.dirs = WorkerDirs.create(role, owner)
            cwd = str(self.dirs.scratch)
            env.update(private_environment(self.dirs, confinement))
            from kernelbench.evaluation.compare import fused_wanted

            if role == "candidate" and device.startswith("cuda") and fused_wanted():
                from kernelbench.evaluation import fingerprint_kernel

                # The fingerprint kernel a trusted reference worker compiled: its Init loads it instead of compiling.
                fingerprint_kernel.seed_cache(Path(env["TRITON_CACHE_DIR"]), owner)
        elif cwd is None:
            self._tmpdir = tempfile.TemporaryDirectory(prefix=f"kb-{role}-")
            cwd = self._tmpdir.name
        pkg_root = str(Path(__file__).resolve().parents[2])
        env["PYTHONPATH"] = pkg_root + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
        env.setdefault("PYTHONUNBUFFERED", "1")
        cmd = [sys.executable, "-m", "kernelbench.evaluation.worker", "--fd", str(child_fd),
               "--role", role, "--device", device] + (["--template"] if template else [])
        #: The sandbox's /dev/shm, a folder of the host's /dev/shm (see :meth:`relay_outputs`).
        self.shm_dir: Path | None = None
        self._shm_tag = uuid.uuid4().hex[:12]
        if confinement is not None and os.path.isdir("/dev/shm"):
            self.shm_dir = Path(tempfile.mkdtemp(prefix=f"kb-shm-{self._shm_tag}-", dir="/dev/shm"))
            if os.geteuid() == 0:  # the worker's own uid, the one its other folders were given
                st = os.stat(self.dirs.scratch)
                os.chown(self.shm_dir, st.st_uid, st.st_gid)
            # Passable, not listable: the reference opens the host copies by name (no candidate sees this path).
            self.shm_dir.chmod(0o711)
        self._shm_uid = os.stat(self.shm_dir).st_uid if self.shm_dir is not None else -1
        #: The reference has read this candidate's shared export buffer (parent/sharing.py): its exports may name it.
        self.shares = False
        #: The candidate's probe of that buffer, until the reference reads it: (fill byte, size, Blobs with its fd).
        self.share_probe: tuple | None = None
        if confinement is not None:
            cmd = bwrap_command(confinement.bwrap, cmd, self.dirs, gpu=device.startswith("cuda") and role != "compile",
                                allow_network=confinement.allow_network, cache_root=confinement.cache_root,
                                shm_dir=str(self.shm_dir) if self.shm_dir else None)
        if launcher is not None:
            try:
                self.proc = launcher(child_sock, cwd)
            except BaseException:
                child_sock.close()
                parent_sock.close()
                if self._tmpdir is not None:
                    self._tmpdir.cleanup()
                raise
        else:
            self.proc = subprocess.Popen(
                cmd, env=env, cwd=cwd, pass_fds=(child_fd,), stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True,
            )
        child_sock.close()
        self.channel = Channel(parent_sock)
        self._out = _TailReader(self.proc.stdout)
        self._err = _TailReader(self.proc.stderr)
        self._out.start()
        self._err.start()
        self.started = time.monotonic()
        self.info: dict = {}
        self.preloaded: list[str] = []  # modules a reference worker imported at start (baselines)
        self._main_pid: int | None = None
        self._main_pidfd: int | None = None  # (pause/resume: a pid reused after the worker's death is never signalled)
        self._pidfd_lock = threading.Lock()

    def relay_outputs(self, descs: object) -> object:
        """Tensor descriptors made openable by the reference, or ValueError for one it must not open.

        A sandboxed candidate writes each CUDA tensor to a file of its private /dev/shm (a folder of the
        host's; see transport.HOST_COPY_ENV); the parent names the host path and the worker's uid, and the
        reference opens only a regular file of that uid, never through a link. Descriptors that name a
        host file themselves, or (sandboxed) a CUDA IPC handle, are refused; so are descriptors of a shared
        buffer unless the reference has read this candidate's (``shares``, parent/sharing.py).
        """
        if not isinstance(descs, list):
            return descs
        out = []
        for d in descs:
            if isinstance(d, dict):
                if "host_file" in d:
                    raise ValueError("a tensor description may not name a host file")
                name = d.get("shm")
                if "shared" in d:
                    if not self.shares:
                        raise ValueError("shared tensors come only from a sandboxed candidate whose buffer the "
                                         "reference has read")
                    if any(k in d for k in ("shm", "ipc", "blob")):
                        raise ValueError("a shared tensor description names one place for its data")
                elif self.shm_dir is None:
                    if name is not None:
                        raise ValueError("host copies come only from a sandboxed candidate")
                elif "ipc" in d:
                    raise ValueError("a sandboxed candidate sends host copies, not CUDA IPC handles")
                elif name is not None:
                    if not isinstance(name, str) or not _HOST_COPY_NAME.fullmatch(name):
                        raise ValueError(f"unexpected host copy name {str(name)[:80]!r}")
                    d = {**d, "host_file": {"path": str(self.shm_dir / name), "uid": self._shm_uid}}
            out.append(d)
        return out

    def _remove_shm(self) -> None:
        if self.shm_dir is None:
            return
        shutil.rmtree(self.shm_dir, ignore_errors=True)
        self.shm_dir = None

    @property
    def isolation(self) -> str:
        return "sandbox" if self.confinement is not None else "process"

    @property
    def main_pid(self) -> int:
        """The host pid of the Python worker (inside a sandbox, ``proc`` is bwrap, two levels above it).

        Looked up while the worker is still trusted code (right after it said it is ready) and kept:
        a candidate cannot later pass one of its own children off as the worker.
        """
        if self._main_pid is None:
            self._main_pid = self.proc.pid
            if self.confinement is not None:
                from kernelbench.evaluation.cpu_affinity import descendants

                for pid in descendants(self.proc.pid):
                    try:
                        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
                    except OSError:
                        continue
                    argv = cmdline.split(b"\0")
                    if argv[1:3] == [b"-m", b"kernelbench.evaluation.worker"]:
                        self._main_pid = pid
                        break
        return self._main_pid

    @property
    def pid(self) -> int:
        return self.proc.pid

    def alive(self) -> bool:
        return self.proc.poll() is None

    def exit_description(self) -> str:
        code = self.proc.poll()
        if code is None:
            return "still running"
        if self.confinement is not None and code > 128:
            code = 128 - code  # bwrap reports its child's death by signal N as exit status 128 + N
        if code < 0:
            try:
                name = signal.Signals(-code).name
            except ValueError:
                name = f"signal {-code}"
            return f"killed by {name}"
        return f"exited with status {code}"

    def output_tail(self, limit: int = 4000) -> str:
        self._out.join(timeout=0.5)
        self._err.join(timeout=0.5)
        parts = []
        err = self._err.tail()[-limit:]
        out = self._out.tail()[-limit:]
        if err.strip():
            parts.append("stderr:\n" + err)
        if out.strip():
            parts.append("stdout:\n" + out)
        return "\n".join(parts)

    def kill(self) -> None:
        """Kill the worker and anything it started (once at a time: a reference exiting in the background can be
        killed by an abort meanwhile)."""
        with self._kill_lock:
            self._kill()
        with self._pidfd_lock:
            if self._main_pidfd is not None:
                os.close(self._main_pidfd)
                self._main_pidfd = None

    def pause(self) -> bool:
        """Stop the worker's main process (SIGSTOP) where it stands: a spare's Init or warm-up under way as a timing
        begins (parent/session.py: PAUSE_INITS_ENV). False where it could not be stopped (gone, no pidfd)."""
        return self._signal_main(signal.SIGSTOP)

    def resume(self) -> bool:
        """Let a paused worker go on (SIGCONT)."""
        return self._signal_main(signal.SIGCONT)

    def _signal_main(self, sig: int) -> bool:
        """Through a pidfd of the main process, opened at the first signal while the worker is still a spare (trusted
        code only), so that a pid reused after its death is never signalled."""
        with self._pidfd_lock:
            try:
                if self._main_pidfd is None:
                    if not self.alive():
                        return False
                    self._main_pidfd = os.pidfd_open(self.main_pid)
                signal.pidfd_send_signal(self._main_pidfd, sig)
                return True
            except (OSError, AttributeError):  # gone, or no pidfds here
                return False

    def _kill(self) -> None:
        if self.share_probe is not None:  # a probe never read (the load failed): its descriptor goes too
            self.share_probe[2].close_fds()
            self.share_probe = None
        kill_tree = getattr(self.proc, "kill_tree", None)  # a reference template's fork (parent/template.py)
        if kill_tree is not None:
            kill_tree()
        elif self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                self.proc.kill()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            log.warning("worker %s did not die after SIGKILL", self.proc.pid)
        self.channel.close()
        if self._tmpdir is not None:
            self._tmpdir.cleanup()
            self._tmpdir = None
        self._remove_shm()
        if self.dirs is not None:
            hook, self.after_exit = self.after_exit, None
            if hook is not None:
                try:
                    hook(self)
                except Exception:
                    log.exception("after-exit step of a %s worker failed", self.role)
            self.dirs.cleanup()
            self.dirs = None

    def close(self, timeout: float = 5.0) -> None:
        """Ask politely, then kill."""
        if self.proc.poll() is None:
            try:
                self.channel.send({"cmd": "exit"})
                self.proc.wait(timeout=timeout)
            except Exception:
                pass
        self.kill()
