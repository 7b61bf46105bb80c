"""SASS timing (sim.sass.timing): cycles follow the control codes; values equal the SASS functional model."""

from __future__ import annotations

import dataclasses
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
from tests.test_timing import t_of

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


RED = HEAD.replace("    .shared .align 4 .b32 buf[64];\n", "") + """    mul.wide.u32 %rd2, %r1, 4;
    add.s64 %rd3, %rd1, %rd2;
    and.b32 %r2, %r1, 3;
    mul.wide.u32 %rd2, %r2, 4;
    add.s64 %rd2, %rd1, %rd2;
    red.global.add.u32 [{a}], 1;
    red.global.add.u32 [{a}+128], 1;
    red.global.add.u32 [{a}+256], 1;
    red.global.add.u32 [{a}+384], 1;
    st.global.f32 [%rd3+512], %f1;
    st.global.f32 [%rd3+640], %f1;
    st.global.f32 [%rd3+768], %f1;
    ret;
}
"""


def _drain_events(ptx: str, hw, start: np.ndarray) -> tuple[list[tuple[str, int, int]], dict[str, int], np.ndarray]:
    """Run ``ptx`` on one warp with out = ``start`` (u32) and a trace: (every timed event as (name, ts, tid)
    for tests.test_timing.t_of, the track of each unit by name, out after the run)."""
    launch = Launch("k", (1, 1, 1), (32, 1, 1), [Arg("buffer", "u32", array=start.copy())])
    r = simulate_sass(ptx, launch, hw, "t.ptx", trace=True)
    assert r.trace is not None
    names = {e["args"]["name"]: e["tid"] for e in r.trace if e.get("name") == "thread_name"}
    log = [(e["name"], e["ts"], e["tid"]) for e in r.trace if e.get("ph") == "X"]
    return log, names, r.outputs[0].view(np.uint32)


@needs_tools
@pytest.mark.parametrize("same, addresses", [(False, 32), (True, 4)])
def test_global_reductions_pass_the_atomic_port_one_address_a_cycle(same, addresses):
    """Each REDG of 32 lanes takes the core's atomic port for one cycle per distinct address (rate
    core.atomic_addresses_per_cycle): 32 distinct addresses 32 cycles apart, 4 (lanes tid & 3) 4 cycles;
    the values are the +1s of every lane (u32, exact). (One address for all lanes is no test: ptxas turns
    it into one lane's REDG of the active count.)"""
    hw = load_hw("h200.yaml")
    hw = dataclasses.replace(hw, core=dataclasses.replace(hw.core, atomic_addresses_per_cycle=1.0))
    start = np.random.default_rng(1).integers(0, 1 << 30, 256, dtype=np.uint32)
    log, units, out = _drain_events(RED.replace("{a}", "%rd2" if same else "%rd3"), hw, start)
    drain = units["unit atomic"]
    reds = [ts for name, ts, tid in log if name.startswith("RED") and tid == drain]
    assert len(reds) == 4
    assert [b - a for a, b in zip(reds, reds[1:], strict=False)] == [addresses] * (len(reds) - 1)
    assert t_of(log, "RED", 1, drain) - t_of(log, "RED", 0, drain) == addresses
    want = start.copy()
    if same:
        for k in range(4):
            want[32 * k:32 * k + 4] += 8
    else:
        for k in range(4):
            want[32 * k:32 * k + 32] += 1
    assert np.array_equal(out[:128], want[:128])


@needs_tools
def test_global_stores_drain_at_the_store_rate():
    """A 32-lane f32 STG carries 128 bytes: at core.store_bytes_per_cycle 8 (no L2 write limit, whole lines
    not drained faster) the store port takes the next one 16 cycles later."""
    hw = load_hw("h200.yaml")
    hw = dataclasses.replace(hw, core=dataclasses.replace(hw.core, store_bytes_per_cycle=8.0,
                                                          full_line_store_bytes_per_cycle=None),
                             l2=dataclasses.replace(hw.l2, write_bandwidth_gbps=None))
    start = np.zeros(256, dtype=np.uint32)
    log, units, out = _drain_events(RED.replace("{a}", "%rd3"), hw, start)
    stg = [ts for name, ts, tid in log if name.startswith("STG") and tid == units["unit store"]]
    assert len(stg) == 3 and [b - a for a, b in zip(stg, stg[1:], strict=False)] == [16, 16]
    assert np.array_equal(out[128:224].view(np.float32), np.tile(np.arange(32, dtype=np.float32), 3))


LDG = HEAD.replace("    .shared .align 4 .b32 buf[64];\n", "") + """    mul.wide.u32 %rd2, %r1, 4;
    add.s64 %rd3, %rd1, %rd2;
    ld.global.cg.f32 %f2, [%rd3];
    add.f32 %f3, %f2, %f1;
    st.global.f32 [%rd3], %f3;
    ret;
}
"""


@needs_tools
@pytest.mark.parametrize("warm", [False, True])
def test_warm_l2_load_costs_the_l2_hit_not_dram(warm):
    """With warm_l2 the buffer is in the L2 as after its upload: the LDG's result comes l2.hit_latency after
    issue (+ l2.far_latency when the line is homed in the other partition; no other traffic); cold, it
    comes from DRAM (at least dram.latency - l2.far_latency / 2). out = in + tid."""
    hw = load_hw("h200.yaml")
    x = np.random.default_rng(2).standard_normal(32).astype(np.float32)
    launch = Launch("k", (1, 1, 1), (32, 1, 1), [Arg("buffer", "f32", array=x.copy())])
    r = simulate_sass(LDG, launch, hw, "t.ptx", trace=True, warm_l2=warm)
    assert r.trace is not None
    ldg = next(e for e in r.trace if e.get("ph") == "X" and e["name"].startswith("LDG") and e["tid"] < 100000)
    if warm:  # near or far L2 partition (sim/timing/memory.py), by the buffer's address
        assert ldg["dur"] in (hw.l2.hit_latency, hw.l2.hit_latency + hw.l2.far_latency)
    else:
        assert ldg["dur"] >= hw.dram.latency - hw.l2.far_latency // 2
    assert np.array_equal(r.outputs[0], x + np.arange(32, dtype=np.float32))


@needs_tools
def test_cli_sass_writes_the_trace_and_takes_warm_l2(tmp_path):
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    ex = str(ROOT / "examples" / "sgemm_tiled.ptx")
    tr = tmp_path / "t.json"
    r = subprocess.run([sys.executable, "-m", "sim", "run", ex, "--hw", "h200", "--isa", "sass", "--json",
                        "--warm-l2", "--trace", str(tr)], capture_output=True, text=True, cwd=ROOT, env=env,
                       timeout=600)
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    ev = json.loads(tr.read_text())["traceEvents"]
    warps = [e for e in ev if e.get("ph") == "X" and e["tid"] < 100000]
    assert len(warps) == out["warp_instructions"]
    assert max(e["ts"] for e in warps) < out["cycles"]
    assert any(e.get("name") == "process_name" for e in ev)


@needs_tools
def test_long_stalls_always_yield():
    """The yield polarity (Control.yields: raw bit clear): ptxas sets every stall of 12-15 together with a
    yield, as NBAssembler's scheduler does; checked on the silicon suite's sync microbenchmarks."""
    from sim.sass.listing import disassemble

    ptx = (ROOT / "benchmarks" / "silicon" / "micro" / "sync.ptx").read_text()
    ins = [i for k in disassemble(ptx, "sm_90a", "sync.ptx").values() for i in k.instructions if i.opcode != "NOP"]
    long = [i for i in ins if i.control.stall >= 12]
    assert long and all(i.control.yields for i in long)
    assert any(not i.control.yields for i in ins)


@needs_tools
def test_scheduler_stays_on_a_warp_that_does_not_yield():
    """Warps 0 and 4 share scheduler 0: after an instruction of warp 0 that does not yield, with a stall of
    1 and its next instruction waiting on nothing, warp 0 issues again the next cycle."""
    hw = load_hw("h200.yaml")
    launch = Launch("k", (1, 1, 1), (160, 1, 1), [Arg("buffer", "f32", array=np.full(160, np.nan, np.float32))])
    r = simulate_sass(chain_ptx(False), launch, hw, "t.ptx", trace=True)
    assert r.trace is not None
    from sim.sass.listing import disassemble

    code = {i.pc: i for i in disassemble(chain_ptx(False), "sm_90a", "t.ptx")["k"].instructions}
    w0 = sorted((e["ts"], int(e["args"]["pc"], 16)) for e in r.trace if e.get("ph") == "X" and e["tid"] == 0)
    checked = 0
    for (t, pc), (t2, pc2) in zip(w0, w0[1:], strict=False):
        c, nxt = code[pc].control, code[pc2].control
        if c.stall == 1 and not c.yields and not nxt.waits and code[pc2].opcode.startswith("FFMA"):
            assert t2 == t + 1, (code[pc].text, t, t2)
            checked += 1
    assert checked > 0
    assert np.isfinite(r.outputs[0]).all()
