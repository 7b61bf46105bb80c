"""What a cold `python -m sim run` imports (issue 17: start-up before the first cycle): a PTX timing run
imports sim.sass.tools (ptxas's register count) but not the SASS listing parser or control codes, which
`sim.sass` loads on first use (sim/sass/__init__.py)."""

from __future__ import annotations

import json
import os
import pathlib
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent

PTX = """.version 8.0
.target sm_90a
.address_size 64
.visible .entry k(.param .u64 k_out)
{
    .reg .b32 %r<4>;
    .reg .b64 %rd<4>;
    ld.param.u64 %rd1, [k_out];
    mov.u32 %r1, %tid.x;
    mul.wide.u32 %rd2, %r1, 4;
    add.s64 %rd3, %rd1, %rd2;
    st.global.u32 [%rd3], %r1;
    ret;
}
"""

def test_python_m_sim_run_imports_no_sass_listing_and_writes_everything(tmp_path, monkeypatch):
    """One cold `python -m sim run` (a PTX timing run): it imports sim.sass.tools (ptxas's register count) but not
    the SASS listing parser or control codes (-X importtime lists every module imported), nor PyYAML (the hwconfig
    comes from load_hw's cache, filled here first), sim.reference (no check to run), subprocess (no tool run) or
    numpy.random (no random buffer);
    sim/__main__.py skips the interpreter's teardown (os._exit) after flushing, and the JSON on stdout, the --out
    buffers and the --trace file are all there, with the command's exit status (bad input:
    tests/test_cli_errors.py)."""
    import numpy as np

    from sim.hw import load_hw

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    monkeypatch.delenv("WORKBENCH_HW_CACHE", raising=False)
    load_hw("npu7nm")
    (tmp_path / "k.ptx").write_text(PTX)
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    r = subprocess.run([sys.executable, "-X", "importtime", "-m", "sim", "run", "k.ptx", "--hw", "npu7nm", "--grid",
                        "2", "--block", "64", "--arg", "zeros:u32:128", "--json", "--quiet", "--out", "out", "--trace",
                        "t.json"], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr[-2000:]
    assert json.loads(r.stdout)["cycles"] > 0
    assert json.loads((tmp_path / "t.json").read_text())
    assert np.load(tmp_path / "out" / "arg0.npy").tolist() == list(range(64)) + [0] * 64
    mods = {line.rsplit("|", 1)[-1].strip() for line in r.stderr.splitlines() if line.startswith("import time:")}
    assert "sim.timing.engine" in mods and "sim.sass.tools" in mods  # the run did go through the timing model
    assert not mods & {"sim.sass.listing", "sim.sass.control", "sim.sass.exec", "sim.sass.timing"}
    later = {"yaml", "sim.reference", "difflib", "subprocess", "numpy.random"}  # (imported where needed)
    assert not mods & later, mods & later


def test_sass_names_still_import():
    import sim.sass as sass
    from sim.sass import Control, SassKernel, disassemble, tools_available

    assert Control.__module__ == "sim.sass.control" and SassKernel.__module__ == "sim.sass.listing"
    assert callable(disassemble) and callable(tools_available)
    assert set(sass.__all__) <= set(dir(sass)) | set(sass._WHERE)
    try:
        sass.not_a_name  # noqa: B018
    except AttributeError as e:
        assert "not_a_name" in str(e)
    else:
        raise AssertionError("sim.sass.not_a_name did not raise AttributeError")


def test_python_m_sim_collects_less_often_and_freezes_its_imports(monkeypatch, capsys):
    """sim/__main__.py: no collection during the imports, then the youngest generation every 10,000 allocations,
    the imports' objects frozen, the collector on again, and the command's exit status handed to os._exit once
    the output is flushed."""
    import gc
    import runpy

    class Exited(Exception):
        pass

    def fake_exit(rc):
        seen.append((rc, gc.get_threshold()[0], gc.get_freeze_count(), gc.isenabled()))
        raise Exited

    seen: list = []
    old = gc.get_threshold()
    monkeypatch.setenv("OPENBLAS_THREAD_TIMEOUT", "20")  # a value the user set is kept
    monkeypatch.setattr(sys, "argv", ["sim", "native", "status"])
    monkeypatch.setattr(os, "_exit", fake_exit)
    for m in ("multiprocessing", "concurrent.futures"):  # pytest's plugins may have imported them
        monkeypatch.delitem(sys.modules, m, raising=False)
    try:
        try:
            runpy.run_module("sim", run_name="__main__")
        except (Exited, SystemExit):
            pass
    finally:
        gc.set_threshold(*old)
        gc.unfreeze()
    assert "compiled timing core" in capsys.readouterr().out
    assert len(seen) == 1 and seen[0][1] == 10_000 and seen[0][2] > 0 and seen[0][3], seen
    assert os.environ["OPENBLAS_THREAD_TIMEOUT"] == "20"


def test_python_m_sim_lets_openblas_workers_sleep_and_restores_the_environment():
    """sim/__main__.py: numpy (OpenBLAS) loads with OPENBLAS_THREAD_TIMEOUT=4 (its workers otherwise spin
    for 2^28 cycles at start: 0.1-0.15 s of process time of a cold reduce6 run), unless the user set it (kept:
    the test above); the variable is gone again once sim.cli is imported, so processes the run starts inherit the
    user's environment."""
    code = ("import os, runpy, sys\n"
            "seen = []\n"
            "class F:\n"
            "    def find_spec(self, name, path=None, target=None):\n"
            "        if name == 'numpy':\n"
            "            seen.append(os.environ.get('OPENBLAS_THREAD_TIMEOUT'))\n"
            "sys.meta_path.insert(0, F())\n"
            "real = os._exit\n"
            "def done(rc):\n"
            "    print(seen, os.environ.get('OPENBLAS_THREAD_TIMEOUT'), rc, flush=True)\n"
            "    real(rc)\n"
            "os._exit = done\n"
            "sys.argv = ['sim', 'native', 'status']\n"
            "runpy.run_module('sim', run_name='__main__')\n")
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    env.pop("OPENBLAS_THREAD_TIMEOUT", None)
    r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr[-2000:]
    assert r.stdout.splitlines()[-1] == "['4'] None 0", r.stdout
