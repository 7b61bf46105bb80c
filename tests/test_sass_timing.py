"""SASS timing (sim.sass.timing): cycles follow the control codes; values equal the SASS functional model."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from sim.hw import load_hw
from sim.launch import Arg, Launch
from sim.sass import tools_available
from sim.sass.exec import run_sass_functional
from sim.sass.timing import simulate_sass

ROOT = Path(__file__).resolve().parent.parent
needs_tools = pytest.mark.skipif(not tools_available(), reason='ptxas/nvdisasm not found: pip install -e ".[sass]"')

HEAD = """.version 8.0
.target sm_90a
.address_size 64
.visible .entry k(.param .u64 out)
{
    .reg .f32 %f<40>;
    .reg .b32 %r<8>;
    .reg .b64 %rd<4>;
    .shared .align 4 .b32 buf[64];
    ld.param.u64 %rd1, [out];
    cvta.to.global.u64 %rd1, %rd1;
    mov.u32 %r1, %tid.x;
    cvt.rn.f32.u32 %f1, %r1;
"""


def chain_ptx(dependent: bool, n: int = 32) -> str:
    """n FMAs: one chain through %f2 (dependent) or 8 chains %f2..%f9 (independent), summed at the end."""
    body = [f"    add.f32 %f{i}, %f1, 0f{int(np.float32(i).view(np.uint32)):08X};" for i in range(2, 10)]
    for j in range(n):
        r = 2 if dependent else 2 + j % 8
        body.append(f"    fma.rn.f32 %f{r}, %f{r}, %f1, 0f3F800001;")
    body += [f"    add.f32 %f2, %f2, %f{i};" for i in range(3, 10)]
    body += ["    mul.wide.u32 %rd2, %r1, 4;", "    add.s64 %rd3, %rd1, %rd2;", "    st.global.f32 [%rd3], %f2;",
             "    ret;", "}"]
    return HEAD + "\n".join(body) + "\n"


SHARED_USE = HEAD + """    mul.wide.u32 %rd2, %r1, 4;
    mov.u32 %r2, buf;
    shl.b32 %r3, %r1, 2;
    add.u32 %r4, %r2, %r3;
    st.shared.f32 [%r4], %f1;
    bar.sync 0;
    xor.b32 %r5, %r3, 4;
    add.u32 %r6, %r2, %r5;
    ld.shared.f32 %f2, [%r6];
    add.f32 %f3, %f2, %f1;
    add.s64 %rd3, %rd1, %rd2;
    st.global.f32 [%rd3], %f3;
    ret;
}
"""


def _launch() -> Launch:
    return Launch("k", (1, 1, 1), (32, 1, 1), [Arg("buffer", "f32", array=np.full(32, np.nan, np.float32))])


def _timed(ptx: str):
    hw = load_hw("h200.yaml")
    r = simulate_sass(ptx, _launch(), hw, "t.ptx")
    ref = run_sass_functional(ptx, _launch(), hw.arch or "", "t.ptx")
    assert np.array_equal(r.outputs[0].view(np.uint32), ref.outputs[0].view(np.uint32))
    assert not np.isnan(r.outputs[0]).any()
    return r


@needs_tools
def test_dependent_chain_is_slower_than_independent_chains():
    """A dependent FFMA chain waits out each FFMA's stall count (>= the fma latency); eight independent
    chains issue back to back: the dependent one takes longer by at least (latency - 1) per FMA."""
    hw = load_hw("h200.yaml")
    dep, ind = _timed(chain_ptx(True)), _timed(chain_ptx(False))
    lat = hw.pipe_for("fma").latency
    assert dep.cycles_per_cta[0] - ind.cycles_per_cta[0] >= 32 * (lat - 1) // 2, (dep.cycles, ind.cycles)
    assert dep.warp_instructions == ind.warp_instructions


@needs_tools
def test_shared_load_use_waits_on_its_scoreboard_barrier():
    """The add after ld.shared waits on the LDS's write barrier: the CTA lasts at least the shared latency
    past the barrier, and the wait is counted as a scoreboard stall; out[i] = tid(i^1) + tid(i)."""
    hw = load_hw("h200.yaml")
    r = _timed(SHARED_USE)
    tid = np.arange(32, dtype=np.float32)
    assert np.array_equal(r.outputs[0], tid[np.arange(32) ^ 1] + tid)
    assert r.stalls["scoreboard"] >= hw.shared.latency - 4
    assert r.cycles_per_cta[0] >= hw.shared.latency + hw.pipe_for("sync").latency


@needs_tools
def test_cli_times_sass_without_functional():
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    ex = str(ROOT / "examples" / "sgemm_tiled.ptx")
    r = subprocess.run([sys.executable, "-m", "sim", "run", ex, "--hw", "h200", "--isa", "sass", "--json"],
                       capture_output=True, text=True, cwd=ROOT, env=env, timeout=600)
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["isa"] == "sass" and out["cycles"] > 0 and len(out["cycles_per_cta"]) == out["ctas_simulated"]
    assert out["check"]["passed"]
