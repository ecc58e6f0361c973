"""The extension cache with a real ``load_inline`` build (a C++ extension: the CPU build of torch
cannot build CUDA, but the cache logic is the same): concurrent writers, atomic publish, hits."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from kernelbench.evaluation import compile_cache

SCRIPT = textwrap.dedent("""
    import json, sys
    from kernelbench.evaluation import compile_cache
    compile_cache.install()
    from torch.utils.cpp_extension import load_inline
    m = load_inline(name="kb_cache_probe", cpp_sources="int add_one(int x) { return x + 1; }",
                    functions=["add_one"], extra_cflags=["-O1"], verbose=False)
    print(json.dumps({"value": m.add_one(41), "events": compile_cache.BUILD_EVENTS}))
""")


def _start(cache: Path) -> subprocess.Popen:
    env = {**os.environ, compile_cache.CACHE_ENV: str(cache), "MAX_JOBS": "1"}
    return subprocess.Popen([sys.executable, "-c", SCRIPT], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)


def _result(p: subprocess.Popen) -> dict:
    out, err = p.communicate(timeout=900)
    assert p.returncode == 0, err
    return json.loads(out.strip().splitlines()[-1])


@pytest.mark.slow
def test_concurrent_builds_publish_one_entry_and_later_runs_hit_it(tmp_path):
    cache = tmp_path / "cache"
    first, second = _start(cache), _start(cache)
    r1, r2 = _result(first), _result(second)
    assert r1["value"] == r2["value"] == 42
    entries = [p for p in cache.iterdir() if not p.name.startswith(".")]
    keys = {e["key"] for e in r1["events"] + r2["events"]}
    assert len(keys) == 1
    assert [p.name for p in entries if p.is_dir() and not p.name.startswith("build-")] == [keys.pop()]
    assert not [p for p in cache.iterdir() if p.name.startswith((".publish-", "build-"))], "temporary folders left"
    third = _result(_start(cache))
    assert third["value"] == 42 and third["events"][0]["cached"] is True


def test_key_changes_with_sources_flags_and_toolchain(monkeypatch):
    base = {"name": "x", "cpp_sources": "int f();", "cuda_sources": "__global__ void k(){}", "functions": ["f"],
            "extra_cuda_cflags": ["-O3"], "verbose": False, "build_directory": "/tmp/a"}
    k = compile_cache.extension_key(base)
    assert compile_cache.extension_key({**base, "verbose": True, "build_directory": "/tmp/b"}) == k
    assert compile_cache.extension_key({**base, "cuda_sources": "__global__ void k2(){}"}) != k
    assert compile_cache.extension_key({**base, "extra_cuda_cflags": ["-O2"]}) != k
    monkeypatch.setenv("TORCH_CUDA_ARCH_LIST", "8.0")
    k80 = compile_cache.extension_key(base)
    monkeypatch.setenv("TORCH_CUDA_ARCH_LIST", "9.0")
    assert compile_cache.extension_key(base) != k80


def test_namespaces_keep_builds_apart(monkeypatch, tmp_path):
    monkeypatch.setenv(compile_cache.CACHE_ENV, str(tmp_path))
    try:
        compile_cache.set_namespace("sub-0123abcd")
        assert compile_cache.cache_root() == tmp_path / "ns-sub-0123abcd"
        compile_cache.set_namespace(None)
        assert compile_cache.cache_root() == tmp_path
        with pytest.raises(ValueError, match="bad cache namespace"):
            compile_cache.set_namespace("../escape")
    finally:
        compile_cache.set_namespace(None)
