"""The extension cache with a real ``load_inline`` build (a C++ extension: the CPU build of torch
cannot build CUDA, but the cache logic is the same): builders never write the cache, the trusted side
publishes what they built with its hash, later loads check the hash, and a planted artefact is refused."""

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
    compile_cache.set_scope(sys.argv[1])
    compile_cache.install()
    from torch.utils.cpp_extension import load_inline
    m = load_inline(name="kb_cache_probe", cpp_sources="int add_one(int x) { return x + 1; }",
                    functions=["add_one"], extra_cflags=["-O1"], verbose=False)
    print(json.dumps({"value": m.add_one(41), "events": compile_cache.BUILD_EVENTS}))
""")
SCOPE = compile_cache.source_scope("candidate source A")


def _start(cache: Path, build: Path, scope: str = SCOPE) -> subprocess.Popen:
    build.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, compile_cache.CACHE_ENV: str(cache), compile_cache.BUILD_DIR_ENV: str(build), "MAX_JOBS": "1"}
    return subprocess.Popen([sys.executable, "-c", SCRIPT, scope], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


def _result(p: subprocess.Popen) -> dict:
    out, err = p.communicate(timeout=900)
    assert p.returncode == 0, err
    return json.loads(out.strip().splitlines()[-1])


@pytest.mark.slow
def test_builders_never_write_the_cache_and_the_published_entry_is_hashed_and_hit(tmp_path):
    cache = tmp_path / "cache"
    first, second = _start(cache, tmp_path / "b1"), _start(cache, tmp_path / "b2")
    r1, r2 = _result(first), _result(second)
    assert r1["value"] == r2["value"] == 42
    assert not cache.exists() or not any(cache.rglob("*.so")), "a builder wrote the cache itself"
    keys = {e["key"] for e in r1["events"] + r2["events"]}
    assert len(keys) == 1
    key = keys.pop()
    assert compile_cache.publish_builds(tmp_path / "b1", r1["events"], SCOPE, root=cache) == [key]
    assert compile_cache.publish_builds(tmp_path / "b2", r2["events"], SCOPE, root=cache) == []  # already there
    entry = cache / f"src-{SCOPE}" / key
    meta = json.loads((entry / "meta.json").read_text())
    assert meta["sha256"] == compile_cache.sha256_file(entry / "kb_cache_probe.so")
    assert not [p for p in entry.parent.iterdir() if p.name.startswith(".publish-")], "temporary folders left"
    third = _result(_start(cache, tmp_path / "b3"))
    assert third["value"] == 42 and third["events"][0]["cached"] is True
    # Another source's scope does not see the entry: it builds its own.
    other = _result(_start(cache, tmp_path / "b4", compile_cache.source_scope("candidate source B")))
    assert other["events"][0]["cached"] is False
    # An artefact that no longer matches its recorded hash is rebuilt, not loaded.
    (entry / "kb_cache_probe.so").write_bytes(b"not the published artefact")
    fourth = _result(_start(cache, tmp_path / "b5"))
    assert fourth["value"] == 42 and fourth["events"][0]["cached"] is False


def test_publish_refuses_links_bad_paths_and_malformed_reports(tmp_path):
    build, cache = tmp_path / "build", tmp_path / "cache"
    (build / "k").mkdir(parents=True)
    secret = tmp_path / "secret.txt"
    secret.write_text("CANARY-of-the-parent")
    (build / "k" / "x.so").symlink_to(secret)
    (build / "real.so").write_bytes(b"\x7fELF fake")
    (build / "linkdir").symlink_to(tmp_path)
    key = "0" * 32
    events = [
        {"name": "x", "key": key, "cached": False, "artifact": "k/x.so"},             # a link to a secret
        {"name": "y", "key": "1" * 32, "cached": False, "artifact": "linkdir/secret.txt"},  # through a linked folder
        {"name": "z", "key": "2" * 32, "cached": False, "artifact": "../secret.txt"},  # out of the folder
        {"name": "w", "key": "../../etc", "cached": False, "artifact": "real.so"},     # key escaping the cache
        {"name": "bad name", "key": "3" * 32, "cached": False, "artifact": "real.so"},
        "not a dict",
        {"name": "ok", "key": "4" * 32, "cached": False, "artifact": "real.so"},
    ]
    assert compile_cache.publish_builds(build, events, SCOPE, root=cache) == ["4" * 32]
    for f in cache.rglob("*"):
        if f.is_file():
            assert "CANARY" not in f.read_text(errors="replace")
    with pytest.raises(ValueError, match="bad cache scope"):
        compile_cache.publish_builds(build, events, "../x", root=cache)


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
