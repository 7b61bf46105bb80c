"""The mypyc-compiled timing core (sim/timing/native.py): used only when built for the current sources,
and then with the same results as the Python core."""

from __future__ import annotations

import os
import pathlib
import shutil
import subprocess
import sys

import pytest

from sim.timing import native

ROOT = pathlib.Path(__file__).resolve().parent.parent


def test_no_build_or_disabled_means_the_python_core(tmp_path, monkeypatch):
    monkeypatch.setenv("WORKBENCH_NATIVE_DIR", str(tmp_path))
    assert native.install() is False  # nothing built there
    d = native.cache_dir()
    d.mkdir(parents=True)
    (d / native.MANIFEST).write_text('{"sim.timing.warp": "x.so"}')
    assert native.install() is False  # an incomplete build (or, in this process, the core already imported)
    monkeypatch.setenv("WORKBENCH_NATIVE", "0")
    assert native.install() is False
    assert not any(isinstance(f, native._Finder) for f in sys.meta_path) or native.active()


def test_the_build_key_follows_the_sources_and_what_they_import(tmp_path, monkeypatch):
    assert "sim.timing.memory" in native.MODULES and "sim.timing.units" in native.MODULES  # compiled with the core
    for m in (*native.MODULES, "sim.functional.record"):
        dst = tmp_path.joinpath(*m.split(".")).with_suffix(".py")
        dst.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(native._source(m), dst)
    monkeypatch.setattr(native, "_root", lambda: tmp_path)
    monkeypatch.setenv("WORKBENCH_NATIVE_DIR", str(tmp_path / "cache"))
    (tmp_path / "cache").mkdir()
    keys = {native.key()}
    for name in ("timing/warp.py", "functional/record.py"):  # a compiled source; a module it imports
        f = tmp_path / "sim" / name
        f.write_text(f.read_text() + "\n# edited\n")
        keys.add(native.key())
    assert len(keys) == 3  # each edit makes the build stale: the Python files run


def test_the_build_key_is_kept_by_the_files_stats_and_hashed_again_when_one_changes(tmp_path, monkeypatch):
    """key() hashes the sources once and keeps the key with their stats (native.KEYS); a changed stat (an edit
    of the same size included: its ctime moves), another interpreter or a damaged KEYS file hash again; a key
    is not kept while a source is younger than native.RACY_S."""
    import time

    def backdate(f):
        old = time.time_ns() - 10 * 1_000_000_000
        os.utime(f, ns=(old, old))

    for m in (*native.MODULES, "sim.functional.record"):
        dst = tmp_path.joinpath(*m.split(".")).with_suffix(".py")
        dst.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(native._source(m), dst)
        backdate(dst)
    monkeypatch.setattr(native, "_root", lambda: tmp_path)
    monkeypatch.setenv("WORKBENCH_NATIVE_DIR", str(tmp_path / "cache"))
    (tmp_path / "cache").mkdir()
    hashed = []
    real = native._hash_sources

    def counting():
        hashed.append(1)
        return real()

    monkeypatch.setattr(native, "_hash_sources", counting)
    k0 = native.key()
    assert native.key() == k0 and len(hashed) == 1  # the second start reads the kept key
    kept = (tmp_path / "cache" / native.KEYS).read_text()
    assert str(tmp_path) in kept and "record.py" in kept
    f = tmp_path / "sim" / "functional" / "record.py"
    text = f.read_text()
    f.write_text(text.replace("a", "b", 1))  # same size, other content
    k1 = native.key()
    assert len(hashed) == 2 and k1 != k0
    assert native.key() == k1 and len(hashed) == 3  # just written: not kept
    f.write_text(text)
    backdate(f)
    assert native.key() == k0 and len(hashed) == 4
    assert native.key() == k0 and len(hashed) == 4
    (tmp_path / "cache" / native.KEYS).write_text("{not json")
    assert native.key() == k0 and len(hashed) == 5
    assert native.key() == k0 and len(hashed) == 5
    monkeypatch.setattr(native.sys, "version", native.sys.version + " other")
    native.key()
    assert len(hashed) == 6


_RUN = """
import hashlib, json, sys
sys.path.insert(0, {root!r})
from sim.hw import load_hw
from sim.result import jsonable
from sim.timing import native, simulate
from tests.test_timing_speed import _sgemm
prog, L = _sgemm(64)
r = simulate(prog, L, load_hw("h200"), trace=True)
h = hashlib.sha256(json.dumps([r.to_json(), r.trace], sort_keys=True, default=jsonable).encode())
for k in sorted(r.outputs):
    h.update(r.outputs[k].tobytes())
print(native.active(), h.hexdigest())
"""


@pytest.mark.skipif(os.environ.get("WORKBENCH_LONG") != "1", reason="builds the core with mypyc (40-90 s)")
def test_the_compiled_core_gives_the_python_core_results(tmp_path):
    pytest.importorskip("mypyc")
    if shutil.which("cc") is None and shutil.which("gcc") is None:
        pytest.skip("no C compiler")
    env = dict(os.environ, WORKBENCH_NATIVE_DIR=str(tmp_path), PYTHONPATH=str(ROOT))
    subprocess.run([sys.executable, "-m", "sim", "native", "build", "--quiet"], cwd=ROOT, env=env, check=True)
    code = _RUN.format(root=str(ROOT))
    fast = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, check=True, capture_output=True, text=True)
    slow = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=dict(env, WORKBENCH_NATIVE="0"), check=True,
                          capture_output=True, text=True)
    assert fast.stdout.split()[0] == "True" and slow.stdout.split()[0] == "False"
    assert fast.stdout.split()[1] == slow.stdout.split()[1]
