"""The sandbox's parts on their own: what is hidden and shown, the command line, and the CUDA IPC relay."""

from __future__ import annotations

import base64
import os
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
        if os.geteuid() == 0:  # a GPU worker shares the host's PIDs (CUDA IPC), its uid its own
            gpu = isolation.bwrap_command("/bin/bwrap", ["true"], dirs, gpu=True, allow_network=False, cache_root=None)
            assert "--unshare-pid" not in gpu and "--unshare-net" in gpu
    finally:
        dirs.cleanup()


@pytest.mark.skipif(not os.path.isdir("/dev/shm"), reason="no /dev/shm")
def test_cuda_ipc_counters_are_relayed_safely_and_removed_with_the_worker(tmp_path):
    support = _support()
    w = start_worker("candidate", "cpu", "torch", None, init=False,
                     confinement=Confinement(support.bwrap, False, None))
    try:
        assert w.shm_dir is not None and w.shm_dir.parent == Path("/dev/shm")
        assert os.stat(w.shm_dir).st_uid == os.stat(w.dirs.scratch).st_uid, "its /dev/shm is the worker's own"
        (w.shm_dir / "torch_2_4130068536_0").write_bytes(b"\0" * 64)
        secret = tmp_path / "secret"
        secret.write_text("CANARY")
        (w.shm_dir / "torch_2_456").symlink_to(secret)

        def desc(name: str) -> list[dict]:
            return [{"dtype": "float32", "shape": [4], "ipc": {"ref_counter_handle": base64.b64encode(name.encode()).decode()}}]

        out = w.relay_ipc(desc("/torch_2_4130068536_0"))
        relayed = base64.b64decode(out[0]["ipc"]["ref_counter_handle"]).decode()
        assert relayed.startswith("/kb") and relayed.endswith("torch_2_4130068536_0")
        assert os.path.samefile("/dev/shm" + relayed, w.shm_dir / "torch_2_4130068536_0")
        assert w.relay_ipc([{"blob": 0}]) == [{"blob": 0}]  # CPU tensors pass untouched
        with pytest.raises(ValueError, match="not a regular file"):
            w.relay_ipc(desc("/torch_2_456"))
        for bad in ("/../../etc/passwd", "/torch_2_1/x", "torch_2_1", "/psm_secret", "/torch_2_1_2_3_4_5"):
            with pytest.raises(ValueError, match="unexpected"):
                w.relay_ipc(desc(bad))
        linked = "/dev/shm" + relayed
    finally:
        w.kill()
    assert not os.path.exists(linked) and not (w.shm_dir and w.shm_dir.exists())


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


def test_gpu_candidates_are_not_confined_until_the_layout_is_proven(monkeypatch):
    """auto: process isolation with the reason; require: one clear error, nothing evaluated."""
    monkeypatch.delenv(isolation.GPU_OPT_IN_ENV, raising=False)
    isolation.probe.cache_clear()
    try:
        support = isolation.probe(True)
        assert not support.available and "not yet proven on a GPU" in support.message()
        assert "--no-sandbox" in support.message()
        assert isolation.resolve("auto", True) is None
        with pytest.raises(isolation.SandboxUnavailable, match="GPU"):
            isolation.resolve("require", True)
    finally:
        isolation.probe.cache_clear()
