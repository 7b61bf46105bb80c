"""Timeline tests of the timing model: tiny PTX, small HwConfigs, exact cycle numbers asserted.

Each test reads the issue cycle of every instruction from the trace (SimPy style: a list of
(text, cycle)) and asserts the gaps the HwConfig fields imply.
"""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest

from sim.hw import load_hw
from sim.launch import Arg, Launch
from sim.ptx.parser import parse_ptx
from sim.timing import simulate, write_trace

HEAD = """.version 9.0
.target sm_90a
.address_size 64
.visible .entry k(.param .u64 k_param_0)
{
.reg .pred %p<8>;
.reg .b32 %r<32>;
.reg .b64 %rd<16>;
.shared .align 16 .b8 sm[4096];
ld.param.u64 %rd1, [k_param_0];
cvta.to.global.u64 %rd2, %rd1;
mov.u32 %r1, %tid.x;
"""


def hw_small(**kw):
    """npu7nm with round numbers: alu 32 lanes (1-cycle occupancy) latency 5, shared latency 10,
    3 cycles per extra pass, L2 hit 20, DRAM 200 (+32 cycles per burst per bank), not_taken, flush 3."""
    hw = load_hw("npu7nm")
    pipes = tuple(dataclasses.replace(p, lanes=32, latency=5) if p.name == "alu" else p for p in hw.pipes)
    hw = dataclasses.replace(
        hw, pipes=pipes,
        shared=dataclasses.replace(hw.shared, latency=10, pass_cycles=3, ports=1),
        l2=dataclasses.replace(hw.l2, hit_latency=20),
        dram=dataclasses.replace(hw.dram, latency=200, bandwidth_gbps=64.0),
        branch=dataclasses.replace(hw.branch, predictor="not_taken", flush_penalty=3, frontend_depth=0),
    )
    for k, v in kw.items():
        hw = dataclasses.replace(hw, **{k: v})
    return hw


def run(body: str, hw=None, threads: int = 32, buf_words: int = 1 << 16, **kw):
    prog = parse_ptx(HEAD + body + "\nret;\n}\n", "t.ptx")
    buf = np.zeros(buf_words, dtype=np.uint32)
    launch = Launch("k", (1, 1, 1), (threads, 1, 1), [Arg("buffer", "u32", array=buf)])
    res = simulate(prog, launch, hw or hw_small(), trace=True, lookahead=1, **kw)
    log = [(e["name"], e["ts"], e["tid"]) for e in res.trace if e.get("ph") == "X" and e["tid"] < 100000]
    return res, log


def t_of(log, text, nth=0, warp=None):
    hits = [ts for name, ts, tid in log if name.startswith(text) and (warp is None or tid == warp)]
    return hits[nth]


def test_raw_stall_equals_producer_latency():
    res, log = run("mul.lo.s32 %r2, %r1, 3;\nadd.s32 %r3, %r2, 1;\nadd.s32 %r4, %r1, 1;")
    assert t_of(log, "add.s32 %r3") - t_of(log, "mul.lo.s32") == 5  # alu latency
    # the independent add issues the cycle after (strict in-order issue here)
    assert t_of(log, "add.s32 %r4") - t_of(log, "add.s32 %r3") == 1


SH = """mov.u32 %r5, sm;
shl.b32 %r2, %r1, {shift};
{mask}
add.s32 %r6, %r5, %r2;
ld.shared.u32 %r3, [%r6];
add.s32 %r4, %r3, 1;
"""


@pytest.mark.parametrize("shift,mask,passes", [
    (2, "", 1),                         # lane i -> word i: conflict-free
    (3, "", 2),                         # lane i -> word 2i: 2-way conflict
    (2, "and.b32 %r2, %r2, 0;", 1),     # every lane reads word 0: broadcast
])
def test_shared_bank_conflict_passes(shift, mask, passes):
    res, log = run(SH.format(shift=shift, mask=mask))
    gap = t_of(log, "add.s32 %r4") - t_of(log, "ld.shared")
    assert gap == 10 + 3 * (passes - 1)  # shared.latency + shared.pass_cycles per extra pass
    assert sum(res.bank_conflicts_by_line.values()) == passes - 1


def test_barrier_releases_when_last_warp_arrives():
    body = """shr.u32 %r2, %r1, 5;
setp.eq.s32 %p1, %r2, 0;
@%p1 bra DONE;
mul.lo.s32 %r3, %r1, 7;
mul.lo.s32 %r4, %r3, 7;
mul.lo.s32 %r5, %r4, 7;
DONE:
bar.sync 0;
add.s32 %r9, %r1, 1;
"""
    hw = hw_small()
    res, log = run(body, hw, threads=64)
    bars = [ts for name, ts, tid in log if name.startswith("bar.sync")]
    after = [ts for name, ts, tid in log if name.startswith("add.s32 %r9")]
    assert len(bars) == 2 and len(after) == 2
    sync = hw.pipe_for("sync").latency
    assert min(after) == max(bars) + sync  # released by the last arrival, sync latency later
    assert max(after) == max(bars) + sync + 1  # one scheduler: the second warp the next cycle


BR = """setp.ne.s32 %p1, %r1, {v};
@%p1 bra SKIP;
add.s32 %r2, %r1, 1;
SKIP:
add.s32 %r3, %r1, 2;
"""


def test_mispredicted_branch_costs_the_flush():
    # not_taken predictor: a taken branch (every lane != 99) is a misprediction
    res, log = run(BR.format(v=99))
    assert t_of(log, "add.s32 %r3") - t_of(log, "@%p1 bra") == 1 + 3  # flush_penalty 3
    assert res.flushes == [{"line": res.flushes[0]["line"], "count": 1, "text": "@%p1 bra SKIP;", "cycles": 3}]
    # a correctly predicted (not taken: %tid.x == tid for no lane... use != -1 -> taken; so == here)
    res2, log2 = run(BR.format(v=99).replace("setp.ne", "setp.eq"))
    assert t_of(log2, "add.s32 %r2") - t_of(log2, "@%p1 bra") == 1
    assert res2.flushes == []


def test_branch_predictor_none_waits_for_resolution():
    hw = hw_small(branch=dataclasses.replace(hw_small().branch, predictor="none"))
    res, log = run(BR.format(v=99), hw)
    lat = hw.pipe_for("branch").latency
    assert t_of(log, "add.s32 %r3") - t_of(log, "@%p1 bra") == lat + 3


GL = """ld.global.cg.u32 %r2, [%rd2];
add.s32 %r3, %r2, 1;
ld.global.cg.u32 %r4, [%rd2+4];
add.s32 %r5, %r4, 1;
"""


def test_l2_miss_then_hit_cost_their_latencies():
    res, log = run(GL, threads=1)
    assert t_of(log, "add.s32 %r3") - t_of(log, "ld.global.cg.u32 %r2") == 200  # dram.latency
    assert t_of(log, "add.s32 %r5") - t_of(log, "ld.global.cg.u32 %r4") == 20  # l2.hit_latency
    assert res.cache["l2_hit_rate"] == 0.5
    assert res.dram_bytes == 32  # one sector


def test_warm_l2_starts_with_the_buffers_in_the_l2():
    res, log = run(GL, threads=1, buf_words=1024, warm_l2=True)
    assert t_of(log, "add.s32 %r3") - t_of(log, "ld.global.cg.u32 %r2") == 20  # l2.hit_latency, not DRAM
    assert res.cache["l2_hit_rate"] == 1.0 and res.dram_bytes == 0
    # a buffer larger than the L2 keeps only its most recently copied lines: its start misses
    hw = hw_small()
    res, log = run(GL, hw, threads=1, buf_words=2 * hw.l2.size // 4, warm_l2=True)
    assert t_of(log, "add.s32 %r3") - t_of(log, "ld.global.cg.u32 %r2") == 200


def test_two_warps_on_one_dram_bank_queue():
    from sim.functional.memory import GLOBAL_BASE
    from sim.timing.units import Dram

    hw = hw_small()
    dram = Dram(hw, sharing_cores=1)  # one CTA: this core has the whole bandwidth
    # warp 1 reads the first other L2 line that the address hash puts in warp 0's bank
    step = hw.l2.line
    stride = next(k * step for k in range(1, 4096)
                  if dram.bank_of(GLOBAL_BASE + k * step) == dram.bank_of(GLOBAL_BASE))
    other = next(k * step for k in range(1, 4096)
                 if dram.bank_of(GLOBAL_BASE + k * step) != dram.bank_of(GLOBAL_BASE))
    body = """shr.u32 %r2, %r1, 5;
mul.wide.u32 %rd3, %r2, {stride};
add.s64 %rd4, %rd2, %rd3;
ld.global.cg.u32 %r3, [%rd4];
add.s32 %r4, %r3, 1;
"""
    res, log = run(body.format(stride=stride), hw, threads=64)
    per_core_bw = hw.dram_bytes_per_cycle / 1  # 64 B/cycle
    burst_cycles = hw.dram.banks * hw.dram.burst / per_core_bw  # one burst holds its bank 32 cycles
    ld0, ld1 = t_of(log, "ld.global", warp=0), t_of(log, "ld.global", warp=1)
    use0, use1 = t_of(log, "add.s32 %r4", warp=0), t_of(log, "add.s32 %r4", warp=1)
    assert use0 - ld0 == 200
    assert use1 - ld1 == 200 + (burst_cycles - (ld1 - ld0))  # queued behind warp 0's burst
    # a different bank does not queue
    res, log = run(body.format(stride=other), hw, threads=64)
    ld1, use1 = t_of(log, "ld.global", warp=1), t_of(log, "add.s32 %r4", warp=1)
    assert use1 - ld1 == 200


def test_dram_hash_spreads_power_of_two_row_strides():
    from sim.timing.units import Dram

    hw = load_hw("h200")
    d = Dram(hw)
    rows = [d.bank_of(0x7F0000000000 + r * 2048) for r in range(256)]  # 1024 f16 per row
    assert len(set(rows)) >= hw.dram.banks // 2  # without the hash: 2 banks


def test_clock_reads_the_issue_cycle():
    body = """mov.u64 %rd5, %clock64;
mul.lo.s32 %r2, %r1, 3;
add.s32 %r3, %r2, 1;
mov.u64 %rd6, %clock64;
sub.s64 %rd7, %rd6, %rd5;
st.global.u64 [%rd2], %rd7;
"""
    res, log = run(body, threads=1)
    got = int(res.outputs[0].view(np.uint64)[0])
    assert got == t_of(log, "mov.u64 %rd6") - t_of(log, "mov.u64 %rd5")
    assert t_of(log, "mov.u64 %rd6") == t_of(log, "add.s32 %r3") + 1  # issued the cycle after the add
    assert t_of(log, "add.s32 %r3") - t_of(log, "mul.lo.s32") == 5


def _fixture(name):
    from tests.fixtures.cases import by_name
    from validation.calibrate import to_launch

    c = by_name(name)
    args = c.make_args(np.random.default_rng(0), c.sizes)
    return c, args, to_launch


@pytest.mark.parametrize("name", ["block_reduce", "cp_async_v4", "mma_f16_m16n8k16", "divergent_loop"])
def test_outputs_equal_functional(name):
    from sim.functional.runner import run_functional
    from sim.ptx.parser import parse_file

    c, args, to_launch = _fixture(name)
    prog = parse_file(str(c.ptx_path))
    f = run_functional(prog, to_launch(c, [a.copy() if isinstance(a, np.ndarray) else a for a in args]))
    r = simulate(prog, to_launch(c, args), load_hw("h200"))
    assert r.warp_instructions == f.warp_instructions
    for i in f.outputs:
        assert np.array_equal(f.outputs[i].view(np.uint8), r.outputs[i].view(np.uint8))


def test_deterministic_and_json(tmp_path):
    from sim.ptx.parser import parse_file

    c, args, to_launch = _fixture("sgemm_tiled")
    prog = parse_file(str(c.ptx_path))
    hw = load_hw("h200")
    a = simulate(prog, to_launch(c, [x.copy() if isinstance(x, np.ndarray) else x for x in args]), hw, trace=True)
    b = simulate(prog, to_launch(c, args), hw, trace=True)
    ja, jb = a.to_json(), b.to_json()
    assert ja == jb and a.trace == b.trace
    for key in ("cycles", "warp_instructions", "ipc", "utilization", "stalls", "flushes"):
        assert key in ja
    json.dumps(ja)
    write_trace(a, tmp_path / "t.json")
    ev = json.loads((tmp_path / "t.json").read_text())["traceEvents"]
    assert any(e.get("ph") == "X" for e in ev) and any(e.get("ph") == "M" for e in ev)
    assert a.cycles > 0 and 0 < a.utilization["fma"] <= 1


def test_ctas_in_waves_on_one_core_all_finish():
    """More CTAs than a core holds: each next CTA launches when the previous one's results are in.
    A scheduler left without warps in between must not retire (regression: the last CTA never ran)."""
    hw = hw_small()  # npu7nm: one core; 1024 threads per CTA fill it
    body = """mul.wide.u32 %rd3, %r1, 4;
add.s64 %rd4, %rd2, %rd3;
ld.global.cg.u32 %r3, [%rd4];
add.s32 %r4, %r3, 1;
st.global.u32 [%rd4], %r4;
"""
    prog = parse_ptx(HEAD + body + "\nret;\n}\n", "t.ptx")
    buf = np.arange(1024, dtype=np.uint32)
    launch = Launch("k", (3, 1, 1), (1024, 1, 1), [Arg("buffer", "u32", array=buf)])
    res = simulate(prog, launch, hw)
    assert res.occupancy["ctas_per_core"] == 1
    assert len(res.cycles_per_cta) == 3 and res.cycles >= sum(res.cycles_per_cta)
    assert np.array_equal(res.outputs[0], np.arange(1024, dtype=np.uint32) + 3)  # three CTAs added one each


def _placement(grid: int, cores: int, **kw):
    hw = hw_small()
    hw = dataclasses.replace(hw, core=dataclasses.replace(hw.core, count=cores))
    prog = parse_ptx(HEAD + "add.s32 %r2, %r1, 1;\nret;\n}\n", "t.ptx")
    launch = Launch("k", (grid, 1, 1), (32, 1, 1), [Arg("buffer", "u32", array=np.zeros(64, np.uint32))])
    res = simulate(prog, launch, hw, trace=True, **kw)
    by_core: dict[int, set[int]] = {}
    for e in res.trace:
        if e.get("ph") == "X" and e["tid"] < 100000:
            by_core.setdefault(e["pid"], set()).add(e["tid"])
    return res, {c: len(w) for c, w in sorted(by_core.items())}


def test_ctas_spread_breadth_first_over_the_cores():
    """The H200 runs a grid of G <= SMs CTAs on G SMs and deals a larger wave evenly (docs/placement.md):
    3 one-warp CTAs on 4 cores use 3 cores, 6 use all 4 (2, 2, 1, 1), never packed onto one core."""
    res, warps = _placement(3, 4)
    assert res.occupancy["ctas_per_core"] > 6 and warps == {0: 1, 1: 1, 2: 1}
    assert len(set(res.cycles_per_cta)) == 1  # alone on its core, every CTA takes the same time
    _, warps = _placement(6, 4)
    assert warps == {0: 2, 1: 2, 2: 1, 3: 1}


def test_sample_takes_whole_cores_as_the_grid_deals_them():
    """sample_ctas=2 of 8 CTAs on 4 cores: the CTAs the whole grid gives core 0 (CTAs 0 and 4), on one core."""
    res, warps = _placement(8, 4, sample_ctas=2)
    assert warps == {0: 2} and res.ctas_simulated == 2 and res.ctas_total == 8


# ---- memory system: misses in flight, sectors, write-back, L1 invalidation --------------------


def test_second_warp_waits_for_the_miss_in_flight():
    """Two warps load the same line a few cycles apart: the second finds it allocated but not filled,
    and gets its data with the first warp's DRAM fill, not l2.hit_latency after its own issue."""
    res, log = run("ld.global.cg.u32 %r2, [%rd2];\nadd.s32 %r3, %r2, 1;\n", threads=64)
    ld0, ld1 = t_of(log, "ld.global", warp=0), t_of(log, "ld.global", warp=1)
    use0, use1 = t_of(log, "add.s32 %r3", warp=0), t_of(log, "add.s32 %r3", warp=1)
    assert 0 < ld1 - ld0 < 20
    # was ld1 + 20: a hit 180 cycles before the data existed; now with the fill (one issue slot later)
    assert use0 - ld0 == 200 and use1 - use0 in (0, 1) and use1 - ld1 > 180
    assert res.dram_bytes == 32  # one fetch for both


def test_l2_lines_fill_by_sector():
    """A line holds the sectors fetched into it: the next sector of the same line is a miss of its own."""
    res, log = run("ld.global.cg.u32 %r2, [%rd2];\nadd.s32 %r3, %r2, 1;\n"
                   "ld.global.cg.u32 %r4, [%rd2+32];\nadd.s32 %r5, %r4, 1;\n", threads=1)
    assert t_of(log, "add.s32 %r5") - t_of(log, "ld.global.cg.u32 %r4") == 200  # was an l2.hit_latency hit
    assert res.dram_bytes == 64 and res.cache["l2_hit_rate"] == 0.0


def test_evicted_dirty_lines_are_written_back():
    """L2 of one set of 2 ways: stores to 3 lines of it evict the first, whose written sector goes to
    DRAM; the stores themselves fetch nothing."""
    hw = hw_small()
    hw = dataclasses.replace(hw, l2=dataclasses.replace(hw.l2, size=2 * hw.l2.line, assoc=2))
    line = hw.l2.line
    body = "".join(f"st.global.u32 [%rd2+{i * line}], %r1;\n" for i in range(3))
    res, _ = run(body, hw, threads=1)
    assert res.dram_bytes == hw.l2.sector
    res, _ = run("".join(f"st.global.u32 [%rd2+{i * line}], %r1;\n" for i in range(2)), hw, threads=1)
    assert res.dram_bytes == 0  # both fit: nothing written back during the kernel


def test_store_invalidates_the_l1_line():
    """ld.ca fills the L1; a store to the line drops it there, so the next ld.ca goes to the L2."""
    from sim.hw import Cache

    hw = hw_small(l1=Cache(size=4096, line=64, sector=32, assoc=4, policy="lru", hit_latency=8))
    ld = "ld.global.ca.u32 %r{d}, [%rd2];\nadd.s32 %r{u}, %r{d}, 1;\n"
    res, log = run(ld.format(d=2, u=3) + ld.format(d=4, u=5), hw, threads=1)
    assert t_of(log, "add.s32 %r5") - t_of(log, "ld.global.ca.u32 %r4") == 8  # l1.hit_latency
    res, log = run(ld.format(d=2, u=3) + "st.global.u32 [%rd2+4], %r3;\n" + ld.format(d=4, u=5), hw, threads=1)
    assert t_of(log, "add.s32 %r5") - t_of(log, "ld.global.ca.u32 %r4") == 20  # l2.hit_latency


def test_occupancy_counts_the_registers_ptxas_allocates():
    """h200.yaml names sm_90a: residency uses ptxas' register count (sgemm_tiled: 32, not the 157
    registers the PTX declares); npu7nm names no architecture, so the declared count stays, marked."""
    from pathlib import Path

    from sim.launch import launch_from_metadata, read_metadata
    from sim.sass.tools import find_tool
    from sim.timing.regalloc import registers_for_occupancy

    path = Path(__file__).resolve().parent.parent / "examples" / "sgemm_tiled.ptx"
    prog = parse_ptx(path.read_text(), str(path))
    k = prog.kernel()
    regs, src = registers_for_occupancy(prog, k, load_hw("npu7nm"))
    assert src.startswith("ptx-declared (estimate") and regs > 100
    if find_tool("ptxas") is None or find_tool("nvdisasm") is None:
        pytest.skip("ptxas/nvdisasm not installed (pip install -e '.[sass]')")
    regs, src = registers_for_occupancy(prog, k, load_hw("h200"))
    assert src == "ptxas" and regs == 32
    res = simulate(prog, launch_from_metadata(read_metadata(prog.text), np.random.default_rng(0)), load_hw("h200"))
    assert res.occupancy["regs_source"] == "ptxas" and res.occupancy["ctas_per_core"] == 8  # threads-limited
