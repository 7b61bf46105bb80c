"""The occupancy query's ptxas run (sim/sass/tools.py, sim/timing/regalloc.py) gives the same answer on a
loaded machine or fails loudly: a tool that cannot start or dies of a signal runs again, then is an error,
never a silent switch to the PTX-declared estimate (which changes residency and so the timing); ptxas
rejecting the PTX (the same every time) still gives the marked estimate; the resource report needs no nvdisasm."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from sim.errors import PtxError
from sim.hw import load_hw
from sim.ptx.parser import parse_ptx
from sim.sass import tools
from sim.sass.tools import SassError
from sim.timing import regalloc

SGEMM = Path(__file__).resolve().parent.parent / "examples" / "sgemm_tiled.ptx"


def _fake_runs(monkeypatch, codes: list):
    calls = []

    def run(args, **kw):
        calls.append(args)
        c = codes[min(len(calls), len(codes)) - 1]
        if isinstance(c, Exception):
            raise c
        return subprocess.CompletedProcess(args, c, "out", "")
    monkeypatch.setattr(tools.subprocess, "run", run)
    monkeypatch.setattr(tools.time, "sleep", lambda s: None)
    return calls


def test_a_tool_killed_by_a_signal_runs_again(monkeypatch):
    calls = _fake_runs(monkeypatch, [-9, BlockingIOError(11, "Resource temporarily unavailable"), 0])
    assert tools._run(["ptxas", "-v"], "k.ptx").returncode == 0 and len(calls) == 3


def test_a_tool_that_never_runs_is_an_error(monkeypatch):
    _fake_runs(monkeypatch, [-9])
    with pytest.raises(SassError, match="killed by signal 9 .3 tries"):
        tools._run(["ptxas", "-v"], "k.ptx")


def test_a_tool_that_ran_and_failed_is_returned_once(monkeypatch):
    calls = _fake_runs(monkeypatch, [255])
    assert tools._run(["ptxas", "-v"], "k.ptx").returncode == 255 and len(calls) == 1


def _regs(monkeypatch, exc: Exception):
    prog = parse_ptx(SGEMM.read_text(), str(SGEMM))
    monkeypatch.setattr(regalloc, "find_tool", lambda name: Path("/bin/true"))

    def fails(*a, **k):
        raise exc
    monkeypatch.setattr(regalloc, "resources", fails)
    return regalloc.registers_for_occupancy(prog, prog.kernel(), load_hw("h200"))


def test_ptxas_failing_to_run_is_not_a_silent_estimate(monkeypatch):
    with pytest.raises(SassError, match="registers that set occupancy, failed to run"):
        _regs(monkeypatch, SassError("ptxas killed by signal 9 (3 tries)"))


def test_ptxas_rejecting_the_ptx_gives_the_marked_estimate(monkeypatch):
    regs, src = _regs(monkeypatch, PtxError("ptxas rejected the PTX: bad", "k.ptx", 3))
    assert src.startswith("ptx-declared (estimate: ptxas failed") and regs > 100


def test_resources_need_no_nvdisasm(monkeypatch, tmp_path):
    ptxas = tools.find_tool("ptxas")
    if ptxas is None:
        pytest.skip("ptxas not installed (pip install -e '.[sass]')")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    monkeypatch.setattr(tools, "find_tool", lambda name: ptxas if name == "ptxas" else None)
    r = tools.resources(SGEMM.read_text(), "sm_90a", str(SGEMM))
    assert r["sgemm_tiled"].regs == 32
    assert len(list((tmp_path / "gemm-workbench" / "sass").glob("*.log.json"))) == 1
    monkeypatch.setattr(tools, "_run", lambda *a: pytest.fail("the cached log is read, ptxas not run again"))
    assert tools.resources(SGEMM.read_text(), "sm_90a", str(SGEMM))["sgemm_tiled"].regs == 32


def test_a_tool_version_is_kept_by_the_binary_s_stat(monkeypatch, tmp_path):
    """tool_version asks a binary once (sim/sass/tools.py versions.json, by real path and stat); a binary written
    over is asked again (and, written in the last 2 s, not kept); a script (a wrapper) is always asked."""
    import os
    import shutil

    echo = shutil.which("echo")
    if echo is None or "coreutils" not in subprocess.run([echo, "--version"], capture_output=True, text=True).stdout:
        pytest.skip("no GNU echo binary to stand for a tool")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    tool = tmp_path / "faketool"
    shutil.copy(os.path.realpath(echo), tool)
    old = os.stat(tool).st_mtime_ns - 10 * 1_000_000_000  # (a binary written in the last 2 s is not kept)
    os.utime(tool, ns=(old, old))
    real = subprocess.run
    asked = []

    def run(args, **kw):
        asked.append(args[0])
        return real(args, **kw)

    monkeypatch.setattr(tools.subprocess, "run", run)
    tools.tool_version.cache_clear()
    first = tools.tool_version(tool)
    tools.tool_version.cache_clear()
    assert tools.tool_version(tool) == first and len(asked) == 1 and first != "unknown"
    tool.write_bytes(tool.read_bytes())  # written over: its ctime moves
    for n in (2, 3):
        tools.tool_version.cache_clear()
        assert tools.tool_version(tool) == first and len(asked) == n
    script = tmp_path / "wrapper"
    script.write_text(f"#!/bin/sh\nexec {tool} \"$@\"\n")
    script.chmod(0o755)
    for _ in range(2):
        tools.tool_version.cache_clear()
        assert tools.tool_version(script) == first
    assert len(asked) == 5
    tools.tool_version.cache_clear()
