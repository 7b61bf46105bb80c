"""Session 9 (issue 11) SASS-mode mechanisms for the suite's microbenchmarks: timeline tests on small kernels."""

from __future__ import annotations

import numpy as np
import pytest

from sim.hw import load_hw
from sim.launch import Arg, Launch
from sim.sass.tools import tools_available

needs_tools = pytest.mark.skipif(not tools_available(), reason="SASS mode needs ptxas and nvdisasm")


def _add_lop(n: int) -> str:
    """Per thread: n independent chains, each add.u32 (imm), xor.b32, add.u32, xor.b32 (ptxas: VIADD, LOP3), stored."""
    steps = []
    for s in range(2):
        for k in range(n):
            steps.append(f"add.u32 %r{10 + k}, %r{10 + k}, {4661 + 8 * s + k};\n")
        for k in range(n):
            steps.append(f"xor.b32 %r{10 + k}, %r{10 + k}, %r2;\n")
    init = "".join(f"add.u32 %r{10 + k}, %r1, {k * 977 + 5};\n" for k in range(n))
    stores = "".join(f"st.global.u32 [%rd2+{4 * k}], %r{10 + k};\n" for k in range(n))
    return (".version 8.0\n.target sm_90a\n.address_size 64\n.visible .entry k(.param .u64 k_param_0)\n{\n"
            ".reg .b32 %r<100>;\n.reg .b64 %rd<4>;\nld.param.u64 %rd1, [k_param_0];\n"
            "cvta.to.global.u64 %rd2, %rd1;\nmov.u32 %r1, %tid.x;\nmov.u32 %r2, %ctaid.x;\n"
            + init + "".join(steps) + stores + "ret;\n}\n")


@needs_tools
def test_sass_viadd_issues_to_the_fma_heavy_half(monkeypatch):
    """VIADD takes IMAD's FMA-heavy half (ptxas's stall counts: VIADD->VIADD / IMAD 2, VIADD->LOP3 1; sim.sass.timing
    HEAVY), so with 2 warps per scheduler VIADDs and LOP3s overlap; as ALU instructions they would queue behind
    every LOP3."""
    import sim.sass.timing as timing

    hw = load_hw("h200.yaml")
    text = _add_lop(8)

    def run():
        launch = Launch("k", (1, 1, 1), (256, 1, 1), [Arg("buffer", "u32", array=np.zeros(64, dtype=np.uint32))])
        r = timing.simulate_sass(text, launch, hw, trace=True)
        tracks = {e["tid"]: e["args"]["name"] for e in r.trace or [] if e.get("name") == "thread_name"}
        units = [(e["ts"], e["name"].split()[0], tracks[e["tid"]]) for e in r.trace or []
                 if e.get("ph") == "X" and e["tid"] >= 100000]
        ops = [u for u in units if u[1] in ("VIADD", "LOP3.LUT")]
        return ops, max(t for t, _, _ in ops) - min(t for t, _, _ in ops)

    ops, span = run()
    viadd = [u for u in ops if u[1] == "VIADD"]
    assert len(viadd) >= 8 and {u[2] for u in viadd} == {"unit fma"}
    assert {u[2] for u in ops if u[1] == "LOP3.LUT"} == {"unit alu"}
    monkeypatch.setattr(timing, "HEAVY", tuple(h for h in timing.HEAVY if h != "VIADD"))
    _, span_alu = run()
    assert span < span_alu


def _bars(n: int) -> str:
    """n bar.sync in a row and nothing else (a bare barrier's cost, as benchmarks/sass_probe/micro.py bar_only)."""
    return (".version 8.0\n.target sm_90a\n.address_size 64\n.visible .entry k(.param .u64 k_param_0)\n{\n"
            + "bar.sync 0;\n" * n + "ret;\n}\n")


@needs_tools
def test_sass_barrier_arrivals_take_the_sm_barrier_unit_in_turn():
    """core.barrier_arrive_cycles / barrier_release_latency (H200 bar_only: 13.1 + 2.0 W cycles per barrier of W
    warps): a barrier of 8 warps costs 2 x 4 cycles more than one of 4 warps; without the fields the warps
    arrive at once and every barrier costs the sync pipe's latency whatever the warps."""
    import dataclasses

    from sim.sass.timing import simulate_sass

    hw = load_hw("h200.yaml")
    assert (hw.core.barrier_arrive_cycles, hw.core.barrier_release_latency) == (2, 13)
    hw = dataclasses.replace(hw, core=dataclasses.replace(hw.core, cold_code_stagger=None))  # all start at once

    def cycles(h, warps):
        launch = Launch("k", (1, 1, 1), (32 * warps, 1, 1), [Arg("buffer", "u32", array=np.zeros(1, np.uint32))])
        return simulate_sass(_bars(8), launch, h).cycles

    assert 0 <= cycles(hw, 8) - cycles(hw, 4) - 8 * 2 * 4 <= 2  # 8 barriers, 4 more warps arriving 2 cycles apart
    old = dataclasses.replace(hw, core=dataclasses.replace(hw.core, barrier_arrive_cycles=None,
                                                           barrier_release_latency=None))
    assert cycles(old, 8) - cycles(old, 4) < 8 * 2  # (the second warp of a scheduler issues a cycle later)


@needs_tools
@pytest.mark.parametrize("name", ["block_reduce", pytest.param("divergent_loop", marks=pytest.mark.slow)])
def test_sass_cached_scan_changes_nothing(monkeypatch, name):
    """The scheduler scan's cache (SassTiming.cached: a scheduler with no warp to issue keeps its answer until the
    cycle _eligible named, barrier release / retire only after a control instruction) is a speed-up only: with it
    off (every scheduler looks at every warp every cycle, as before) cycles, per-CTA spans, stall counts, warp
    instructions and outputs are the same (barriers, shuffles, divergence, early exits)."""
    import sim.sass.timing as timing
    from tests.fixtures.cases import by_name
    from validation.calibrate import to_launch

    c = by_name(name)
    sizes = c.sizes
    text = c.ptx_path.read_text()
    hw = load_hw("h200.yaml")

    def run():
        launch = to_launch(c, c.make_args(np.random.default_rng(0), sizes))
        launch.grid, launch.block = c.grid(sizes), c.block(sizes)
        r = timing.simulate_sass(text, launch, hw, str(c.ptx_path))
        return r.cycles, r.cycles_per_cta, r.stalls, r.warp_instructions, {i: v.tobytes() for i, v in r.outputs.items()}

    fast = run()
    monkeypatch.setattr(timing, "ASYNC_WAITS", ("",))  # every opcode counts as one: no cache
    assert run() == fast
