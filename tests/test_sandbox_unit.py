"""The sandbox's parts on their own: what is hidden and shown, the command line, and the host-copy relay."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from kernelbench.evaluation import isolation
from kernelbench.evaluation.parent import start_worker
from kernelbench.evaluation.sandbox import Confinement


def _support() -> isolation.SandboxSupport:
    support = isolation.probe(False)
    if not support.available:
        if os.environ.get("KB_REQUIRE_SANDBOX_TESTS") == "1":
            pytest.fail(support.message())
        pytest.skip(support.message())
    return support


def test_home_cwd_and_temporary_folders_are_hidden_and_python_shows_through(tmp_path, monkeypatch):
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.chdir(tmp_path)
    hidden = isolation.hidden_paths()
    for p in ("/root", "/tmp", str(home), str(tmp_path)):
        if os.path.isdir(p):
            assert os.path.realpath(p) in hidden or p in hidden, p
    assert "/" not in hidden and "/usr" not in hidden
    assert hidden == sorted(hidden, key=lambda p: (p.count("/"), p)), "parents must be hidden before children"
    shown = dict(isolation.exposed_paths(str(home / ".cache" / "kb")))
    # Everything shown is read-only and lies in a hidden folder (elsewhere the read-only root shows it).
    assert all(rw is False for rw in shown.values())
    assert str(home / ".cache" / "kb") in shown
    pkg = str(Path(isolation.__file__).resolve().parents[1])
    if any(pkg.startswith(h + "/") for h in hidden):
        assert pkg in shown


def test_command_line_confines_and_drops_root(tmp_path):
    owner = isolation.sandbox_owner()
    dirs = isolation.WorkerDirs.create("unit", owner)
    try:
        cmd = isolation.bwrap_command("/bin/bwrap", ["python", "-c", "pass"], dirs, gpu=False, allow_network=False,
                                      cache_root=None, shm_dir=None)
        assert cmd[0] == "/bin/bwrap" and cmd[-3:] == ["python", "-c", "pass"]
        for flag in ("--unshare-pid", "--unshare-net", "--unshare-ipc", "--die-with-parent"):  # CPU
            assert flag in cmd
        assert cmd[cmd.index("--proc") + 1] == "/proc"
        assert ["--bind", str(dirs.scratch), str(dirs.scratch)] == cmd[cmd.index(str(dirs.scratch)) - 1:][:3]
        if os.geteuid() == 0:
            assert f"--reuid={owner[0]}" in cmd and "--no-new-privs" in cmd and owner[0] >= isolation.SANDBOX_UID_BASE
            assert isolation.sandbox_owner()[0] != owner[0], "each worker gets a uid of its own"
            assert cmd[cmd.index("--cap-drop") + 1] == "ALL"
        else:
            assert "--unshare-user" in cmd
        open_net = isolation.bwrap_command("/bin/bwrap", ["true"], dirs, gpu=False, allow_network=True,
                                           cache_root=None)
        assert "--unshare-net" not in open_net
        # A GPU worker is as alone as a CPU one (its outputs travel as host copies, not over CUDA IPC).
        gpu = isolation.bwrap_command("/bin/bwrap", ["true"], dirs, gpu=True, allow_network=False, cache_root=None)
        for flag in ("--unshare-pid", "--unshare-net", "--unshare-ipc"):
            assert flag in gpu
    finally:
        dirs.cleanup()


@pytest.mark.skipif(not os.path.isdir("/dev/shm"), reason="no /dev/shm")
def test_host_copies_are_relayed_safely_and_removed_with_the_worker(tmp_path):
    support = _support()
    w = start_worker("candidate", "cpu", "torch", None, init=False,
                     confinement=Confinement(support.bwrap, False, None))
    try:
        assert w.shm_dir is not None and w.shm_dir.parent == Path("/dev/shm")
        uid = os.stat(w.dirs.scratch).st_uid
        assert os.stat(w.shm_dir).st_uid == uid, "its /dev/shm is the worker's own"
        out = w.relay_outputs([{"dtype": "float32", "shape": [4], "device": "cuda:0", "shm": "kbx-arena",
                                "offset": 0}, {"blob": 0}])
        assert out[0]["host_file"] == {"path": str(w.shm_dir / "kbx-arena"), "uid": uid}
        assert out[1] == {"blob": 0}  # CPU tensors pass untouched
        for bad in ("../../etc/passwd", "kbx-arena/x", "kbx-", "/dev/shm/kbx-arena", "torch_2_1", 7):
            with pytest.raises(ValueError, match="unexpected"):
                w.relay_outputs([{"shm": bad}])
        with pytest.raises(ValueError, match="may not name a host file"):
            w.relay_outputs([{"host_file": {"path": "/etc/shadow", "uid": 0}}])
        with pytest.raises(ValueError, match="not CUDA IPC"):
            w.relay_outputs([{"ipc": {}}])
        (w.shm_dir / "kbx-arena").write_bytes(b"\0" * 16)
        shm = w.shm_dir
    finally:
        w.kill()
    assert not shm.exists()


def test_an_unconfined_worker_may_not_send_host_copies():
    w = start_worker("candidate", "cpu", "torch", None, init=False)
    try:
        assert w.shm_dir is None
        with pytest.raises(ValueError, match="only from a sandboxed"):
            w.relay_outputs([{"shm": "kbx-1"}])
        with pytest.raises(ValueError, match="may not name a host file"):
            w.relay_outputs([{"host_file": {"path": "/etc/passwd", "uid": 0}}])
    finally:
        w.kill()


def test_a_confined_worker_sees_only_itself(tmp_path):
    """A real confined worker: its pid namespace, uid and private folders, as the parent finds them."""
    support = _support()
    w = start_worker("candidate", "cpu", "torch", None, init=False,
                     confinement=Confinement(support.bwrap, False, None))
    try:
        assert w.isolation == "sandbox"
        assert w.main_pid != w.proc.pid  # bwrap's child, found by the parent
        assert b"kernelbench.evaluation.worker" in Path(f"/proc/{w.main_pid}/cmdline").read_bytes()
        status = Path(f"/proc/{w.main_pid}/status").read_text()
        nspid = [line for line in status.splitlines() if line.startswith("NSpid:")][0].split()
        assert len(nspid) == 3 and int(nspid[-1]) <= 3, nspid  # host pid, then its own small pid
        if os.geteuid() == 0:
            uid = [line for line in status.splitlines() if line.startswith("Uid:")][0].split()[1:]
            assert len(set(uid)) == 1 and int(uid[0]) >= isolation.SANDBOX_UID_BASE, uid
        assert w.dirs is not None and w.dirs.scratch.is_dir()
        root = w.dirs.root
    finally:
        w.kill()
    assert not root.exists(), "private folders are removed with the worker"


def test_the_gpu_probe_also_starts_the_cuda_driver():
    """On a GPU the probe runs cuInit inside the sandbox (a machine without libcuda passes: nothing to start)."""
    support = _support()
    isolation.probe.cache_clear()
    try:
        gpu = isolation.probe(True)
        assert gpu.available == support.available, gpu
        prog = "import sys\nalone = True" + isolation._CUDA_PROBE.replace("libcuda.so.1", "libkb-no-such-lib.so")
        assert subprocess.run([sys.executable, "-c", prog]).returncode == 0, "no driver library: no GPU to start"
    finally:
        isolation.probe.cache_clear()
