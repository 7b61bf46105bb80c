"""Mechanisms of the H200 the timing model charges, as timeline tests with exact cycles: the constant caches
are empty at every launch (sim/timing/constant.py: PTX mode's ld.param, SASS mode's c[bank][offset] operands;
docs/const-cold.md); barrier.cluster.wait releases core.cluster_barrier_latency after the cluster's last
arrival (sim/timing/cluster.py, docs/clusters.md); atomics are performed in their line's home L2 partition and
far reads cross the partition crossbar (sim/timing/memory.py, crossbar.py); SASS DEPBAR counts; a global store
drains by its bytes or its lines (docs/micro-store.md)."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from sim.hw import Constant, load_hw
from sim.launch import Arg, Launch
from sim.ptx.parser import parse_ptx
from sim.sass.tools import tools_available
from sim.timing import simulate
from sim.timing.constant import ConstantCache
from tests.test_timing import hw_small, run, t_of

CC = Constant(line=64, miss_latency=100, user_miss_latency=300, ldc_latency=30, param_base=528)


def test_constant_lines_miss_once_and_merge_in_flight():
    c = ConstantCache(CC)
    assert c.read(10, 0, [528]) == 110  # cold: the line 512..575 arrives miss_latency later
    assert c.read(30, 0, [560]) == 110  # same line, in flight: waits for that fill
    assert c.read(200, 0, [540]) == 200  # there: a hit
    assert c.read(200, 0, [576]) == 300 and c.read(200, 3, [528]) == 500  # next line; __constant__ data
    assert c.peek(0, [600]) == 300 and c.peek(0, [4096]) == 0


def test_ptx_ld_param_waits_for_the_cold_constant_line():
    """HEAD's ld.param is the launch's first constant read: its consumer waits constant.miss_latency; a
    second read of the line hits (the lsu pipe's latency). Without hw.constant it is a hit."""
    body = "ld.param.u64 %rd5, [k_param_0];\nadd.s64 %rd6, %rd5, 1;\n"
    res, log = run(body, hw_small(constant=CC))
    lsu = hw_small().pipe_for("lsu").latency
    assert t_of(log, "cvta.to.global") - t_of(log, "ld.param") == 100
    second = t_of(log, "ld.param.u64 %rd5")
    assert t_of(log, "add.s64 %rd6") - second == lsu
    _, log = run(body, hw_small())
    assert t_of(log, "cvta.to.global", warp=0) - t_of(log, "ld.param", warp=0) == lsu


CLUSTER = """.version 8.0
.target sm_90a
.address_size 64
.visible .entry k(.param .u64 k_param_0)
{
.reg .b32 %r<4>;
.reg .b64 %rd<8>;
ld.param.u64 %rd1, [k_param_0];
cvta.to.global.u64 %rd2, %rd1;
mov.u32 %r1, %ctaid.x;
mov.u64 %rd3, %clock64;
barrier.cluster.arrive;
barrier.cluster.wait;
mov.u64 %rd4, %clock64;
sub.s64 %rd5, %rd4, %rd3;
mul.wide.u32 %rd6, %r1, 8;
add.s64 %rd7, %rd2, %rd6;
st.global.u64 [%rd7], %rd5;
ret;
}
"""


def _cluster_round(hw) -> list[int]:
    launch = Launch("k", (2, 1, 1), (32, 1, 1), [Arg("buffer", "u64", array=np.zeros(2, dtype=np.uint64))],
                    cluster=(2, 1, 1))
    res = simulate(parse_ptx(CLUSTER, "c.ptx"), launch, hw)
    return [int(x) for x in res.outputs[0]]


def test_cluster_barrier_releases_after_its_own_latency():
    """The same round with core.cluster_barrier_latency 339 (h200.yaml, measured) and unset (the sync pipe's
    20-cycle release, as a CTA barrier): the clock64 span differs by exactly 339 - 20 in both CTAs."""
    hw = load_hw("h200.yaml")
    assert hw.core.cluster_barrier_latency == 339
    new = _cluster_round(hw)
    old = _cluster_round(dataclasses.replace(hw, core=dataclasses.replace(hw.core, cluster_barrier_latency=None)))
    assert [a - b for a, b in zip(new, old)] == [339 - hw.pipe_for("sync").latency] * 2


@pytest.mark.skipif(not tools_available(), reason="SASS mode needs ptxas and nvdisasm")
def test_sass_ldc_waits_for_a_cold_line_and_immediates_do_not():
    """SASS mode, one warp: the kernel's first instruction, LDC R1, c[0x0][0x28], issues at once and its
    result comes constant.miss_latency later (the line is cold at launch); ULDC.64 c[0x0][0x208] (an immediate
    operand of the line constant.imm_ready has there at launch) issues right after it; the LDC of the parameter
    (line 0x200) misses too. Without hw.constant an
    LDC takes the alu pipe's latency."""
    from sim.sass.timing import simulate_sass

    text = ".version 8.0\n.target sm_90a\n.address_size 64\n.visible .entry k(.param .u64 k_param_0)\n{\n" \
           ".reg .b32 %r<4>;\n.reg .b64 %rd<4>;\nld.param.u64 %rd1, [k_param_0];\ncvta.to.global.u64 %rd2, %rd1;\n" \
           "mov.u32 %r1, %tid.x;\nst.global.u32 [%rd2], %r1;\nret;\n}\n"
    hw = load_hw("h200.yaml")

    def events(h):
        launch = Launch("k", (1, 1, 1), (32, 1, 1), [Arg("buffer", "u32", array=np.zeros(4, dtype=np.uint32))])
        r = simulate_sass(text, launch, h, trace=True)
        return [(e["name"], e["ts"], e["ts"] + e["dur"]) for e in r.trace or [] if e.get("ph") == "X"
                and e["tid"] < 100000]

    ev = events(dataclasses.replace(hw, constant=dataclasses.replace(hw.constant, miss_latency=300)))
    ldc = [e for e in ev if e[0].startswith("LDC")]
    uldc = next(e for e in ev if e[0].startswith("ULDC.64"))
    assert ldc[0][0].startswith("LDC R1") and ldc[0][1:] == (0, 300) and uldc[1] < 10
    assert all(e[2] - e[1] == 300 for e in ldc[1:] if "0x21" in e[0])  # the parameter's line: cold too
    ev = events(dataclasses.replace(hw, constant=None))
    assert next(e for e in ev if e[0].startswith("LDC R1"))[2] == hw.pipe_for("alu").latency


ATOMS = """atom.global.add.u32 %r2, [%rd2], 0;
add.s32 %r3, %r2, 1;
atom.global.add.u32 %r4, [%rd2+4096], 0;
add.s32 %r5, %r4, 1;
atom.global.add.u32 %r6, [%rd2], 0;
add.s32 %r7, %r6, 1;
atom.global.add.u32 %r8, [%rd2+4096], 0;
add.s32 %r9, %r8, 1;
"""


def test_atomics_pay_the_hop_to_the_home_partition_every_time():
    """Lines 4 KiB apart are homed in different partitions (l2.partition_bits: bit 12), the buffer is in the
    L2: an atomic with return on the near-homed line costs l2.hit_latency, on the far-homed one
    l2.hit_latency + l2.far_latency, and again the second time (the read-modify-write happens at the home,
    no copy is left near, unlike a read's)."""
    hw = hw_small()
    part = dataclasses.replace(hw, l2=dataclasses.replace(hw.l2, partition_bits=(12,), far_latency=50))
    _, log = run(ATOMS, part, threads=1, buf_words=4096, warm_l2=True)
    gaps = [t_of(log, f"add.s32 %r{r}") - t_of(log, f"atom.global.add.u32 %r{r - 1}") for r in (3, 5, 7, 9)]
    assert sorted(gaps[:2]) == [20, 70] and gaps[2:] == gaps[:2]
    _, log = run(ATOMS, hw, threads=1, buf_words=4096, warm_l2=True)
    assert [t_of(log, f"add.s32 %r{r}") - t_of(log, f"atom.global.add.u32 %r{r - 1}") for r in (3, 5, 7, 9)] == [20] * 4


XBAR = """mul.wide.u32 %rd3, %r1, 4;
add.s64 %rd4, %rd2, %rd3;
ld.global.cg.u32 %r2, [%rd4];
ld.global.cg.u32 %r3, [%rd4+8192];
ld.global.cg.u32 %r4, [%rd4+4096];
ld.global.cg.u32 %r5, [%rd4+12288];
add.s32 %r6, %r2, 1;
add.s32 %r7, %r3, 1;
add.s32 %r8, %r4, 1;
add.s32 %r9, %r5, 1;
"""


def _xbar_latencies(bytes_per_cycle: float | None) -> list[int]:
    hw = hw_small()
    bw = None if bytes_per_cycle is None else bytes_per_cycle * hw.clock_mhz / 1e3
    hw = dataclasses.replace(hw, l2=dataclasses.replace(hw.l2, partition_bits=(12,), far_latency=50,
                                                         far_bandwidth_gbps=bw))
    _, log = run(XBAR, hw, threads=32, buf_words=8192, warm_l2=True)
    return [t_of(log, f"add.s32 %r{r}") - t_of(log, "ld.global", nth=r - 6) for r in (6, 7, 8, 9)]


def test_far_reads_queue_for_the_partition_crossbar():
    """Four warp loads of 128 B (two 64 B lines each) from the L2: lines at +0 / +8 KiB share a home, +4 / +12 KiB
    the other (l2.partition_bits: bit 12). The far pair pays l2.far_latency; with l2.far_bandwidth_gbps at 8 B
    per cycle its lines also cross one at a time, 8 cycles each: the first load's second line waits 8, the
    second load (issued a cycle later) waits for the first's 16 cycles and its own first line's 8."""
    free = _xbar_latencies(None)
    near, far = sorted([free[:2], free[2:]])
    assert near == [20, 20] and far == [70, 70]
    got = _xbar_latencies(8.0)
    far_at = slice(0, 2) if free[:2] == far else slice(2, 4)
    assert got[far_at] == [70 + 8, 70 + 16 + 8 - 1]
    assert [x for i, x in enumerate(got) if i not in range(far_at.start, far_at.stop)] == near


def _cp_async_groups(wait: int) -> str:
    copies = "".join(f"cp.async.cg.shared.global [%r3+{512 * (i + 1)}], [%rd6+{4096 * (i + 1)}], 16;\n"
                     for i in range(8))
    return (".version 8.0\n.target sm_90a\n.address_size 64\n"
            ".visible .entry k(.param .u64 k_param_0)\n{\n.reg .b32 %r<8>;\n.reg .b64 %rd<8>;\n"
            ".shared .align 16 .b8 sm[8192];\nld.param.u64 %rd1, [k_param_0];\ncvta.to.global.u64 %rd2, %rd1;\n"
            "mov.u32 %r1, %tid.x;\nshl.b32 %r2, %r1, 4;\nmov.u32 %r4, sm;\nadd.s32 %r3, %r4, %r2;\n"
            "mul.wide.u32 %rd5, %r2, 1;\nadd.s64 %rd6, %rd2, %rd5;\n"
            "cp.async.cg.shared.global [%r3], [%rd6], 16;\ncp.async.commit_group;\n" + copies
            + f"cp.async.commit_group;\ncp.async.wait_group {wait};\nld.shared.u32 %r5, [%r3];\n"
            "st.global.u32 [%rd6], %r5;\ncp.async.wait_group 0;\nret;\n}\n")


@pytest.mark.skipif(not tools_available(), reason="SASS mode needs ptxas and nvdisasm")
def test_sass_depbar_keeps_the_newest_groups_in_flight():
    """cp.async.wait_group 1 becomes DEPBAR.LE SB0, 0x1 (nvdisasm prints the count in hex): it waits for the
    first group (one copy) only, while the second (eight copies, 4 KiB through the core's L2 port) is in flight;
    wait_group 0 (DEPBAR.LE SB0, 0x0) waits for both."""
    from sim.sass.timing import simulate_sass

    hw = load_hw("h200.yaml")

    def times(wait: int):
        launch = Launch("k", (1, 1, 1), (32, 1, 1), [Arg("buffer", "u32", array=np.zeros(16384, dtype=np.uint32))])
        r = simulate_sass(_cp_async_groups(wait), launch, hw, trace=True, warm_l2=True)
        ev = sorted(((e["name"], e["ts"], e["ts"] + e["dur"]) for e in r.trace or [] if e.get("ph") == "X"
                     and e["tid"] < 100000), key=lambda e: e[1])
        copies = [e for e in ev if e[0].startswith("LDGSTS")]
        first_wait = next(e for e in ev if e[0].startswith("DEPBAR"))
        return first_wait, copies[0][2], max(c[2] for c in copies[1:])

    (name, at, _), first, second = times(1)
    assert name.endswith("0x1") and first <= at < second - 40
    (name, at, _), first, second = times(0)
    assert name.endswith("0x0") and at >= second


def _stores(stride: int) -> str:
    """Four st.global.u32 per thread, lane i at byte i * stride (4: one 128 B line per warp store; 128: 32 lines)."""
    body = "".join(f"st.global.u32 [%rd4+{k * 4096}], %r1;\n" for k in range(4))
    return (".version 8.0\n.target sm_90a\n.address_size 64\n.visible .entry k(.param .u64 k_param_0)\n{\n"
            ".reg .b32 %r<4>;\n.reg .b64 %rd<6>;\nld.param.u64 %rd1, [k_param_0];\ncvta.to.global.u64 %rd2, %rd1;\n"
            f"mov.u32 %r1, %tid.x;\nmul.wide.u32 %rd3, %r1, {stride};\nadd.s64 %rd4, %rd2, %rd3;\n" + body
            + "ret;\n}\n")


@pytest.mark.skipif(not tools_available(), reason="SASS mode needs ptxas and nvdisasm")
def test_sass_scattered_stores_drain_by_lines():
    """One warp, four STG.E: a store writing one whole line (lane i at 4 i) takes the store port 128 /
    full_line_store_bytes_per_cycle cycles after the one before (benchmarks/sass_probe st_f32); half of each of two
    lines (8 i) 128 / store_bytes_per_cycle; 4 B in each of 32 lines (128 i) 32 / store_lines_per_cycle cycles.
    Without core.full_line_store_bytes_per_cycle a whole line drains as a partial one."""
    from sim.sass.timing import simulate_sass

    hw = load_hw("h200.yaml")
    c = hw.core
    assert c.store_bytes_per_cycle and c.store_lines_per_cycle and c.full_line_store_bytes_per_cycle == 32

    def gaps(stride: int, h=hw) -> list[int]:
        launch = Launch("k", (1, 1, 1), (32, 1, 1), [Arg("buffer", "u32", array=np.zeros(8192, dtype=np.uint32))])
        r = simulate_sass(_stores(stride), launch, h, trace=True)
        ts = sorted(e["ts"] for e in r.trace or [] if e.get("ph") == "X" and e["tid"] >= 100000
                    and e["name"].startswith("STG"))
        return [b - a for a, b in zip(ts, ts[1:])]

    assert gaps(4) == [round(128 / c.full_line_store_bytes_per_cycle)] * 3
    assert all(abs(g - 128 / c.store_bytes_per_cycle) <= 1 for g in gaps(8))
    assert gaps(128) == [round(32 / c.store_lines_per_cycle)] * 3
    old = dataclasses.replace(hw, core=dataclasses.replace(c, full_line_store_bytes_per_cycle=None))
    assert all(abs(g - 128 / c.store_bytes_per_cycle) <= 1 for g in gaps(4, old))


L1READS = """ld.global.u32 %r2, [%rd2];
add.s32 %r3, %r2, 1;
ld.global.u32 %r4, [%rd2+32];
add.s32 %r5, %r4, 1;
ld.global.u32 %r6, [%rd2+4];
add.s32 %r7, %r6, 1;
"""


def test_the_l1_fills_only_the_sectors_it_misses():
    """An L1 of 64 B lines and 32 B sectors, the buffer in the L2: the first read misses the L1 (l2.hit_latency),
    the read of the line's other sector misses again (the first fill brought one sector), a second read of the
    first sector hits (l1.hit_latency)."""
    from sim.hw import Cache

    hw = hw_small(l1=Cache(size=4096, line=64, sector=32, assoc=4, policy="lru", hit_latency=7))
    _, log = run(L1READS, hw, threads=1, buf_words=1024, warm_l2=True)
    gaps = [t_of(log, f"add.s32 %r{r}") - t_of(log, f"ld.global.u32 %r{r - 1}") for r in (3, 5, 7)]
    assert gaps == [20, 20, 7]


def test_a_far_copy_in_flight_is_waited_for():
    """Three one-warp CTAs on three cores (partitions 0, 1, 0) read the same line at once. Core 1 reads it near
    (l2.hit_latency); for cores 0 and 2 it is far-homed: core 0's read crosses (+ l2.far_latency) and leaves a
    copy in partition 0, which core 2's read, issued before that copy exists, waits for instead of hitting it."""
    from sim.launch import Arg as A
    from tests.test_timing import HEAD

    hw = hw_small()
    hw = dataclasses.replace(hw, core=dataclasses.replace(hw.core, count=3),
                             l2=dataclasses.replace(hw.l2, partition_bits=(12,), far_latency=50))
    lats = {}
    for off in (0, 4096):
        body = f"ld.global.cg.u32 %r2, [%rd2+{off}];\nadd.s32 %r3, %r2, 1;\n"
        launch = Launch("k", (3, 1, 1), (32, 1, 1), [A("buffer", "u32", array=np.zeros(2048, dtype=np.uint32))])
        res = simulate(parse_ptx(HEAD + body + "ret;\n}\n", "t.ptx"), launch, hw, trace=True, lookahead=1,
                       warm_l2=True)
        ev = {(e["pid"], e["name"].split()[0]): e["ts"] for e in res.trace or [] if e.get("ph") == "X"
              and e["tid"] < 100000}
        lats[off] = [ev[(c, "add.s32")] - ev[(c, "ld.global.cg.u32")] for c in range(3)]
    assert sorted(lats.values()) == [[20, 70, 20], [70, 20, 70]]  # without the wait core 2's far line took 20


def test_a_sampled_sass_run_takes_whole_cores_as_the_grid_deals_them():
    """528 CTAs on 132 cores at 4 resident per core: a sample of 16 is the four CTAs the grid deals to each of
    its first four cores (0-3, 132-135, ...) on four cores, not the first 16 CTAs on 16 cores alone."""
    from sim.sass.timing import sampled

    hw = load_hw("h200.yaml")
    run, cores = sampled(hw, list(range(528)), 16, 4)
    assert cores == 4 and run == [c + w for w in (0, 132, 264, 396) for c in range(4)]
    assert sampled(hw, list(range(100)), None, 4) == (list(range(100)), None)


@pytest.mark.skipif(not tools_available(), reason="SASS mode needs ptxas and nvdisasm")
def test_sass_cold_code_reaches_the_schedulers_in_turn():
    """Two CTAs of four warps (one per scheduler) on one core that has not run the launch's code: warp w of each
    issues its first instruction w x core.cold_code_stagger cycles after the launch (the schedulers receive the
    code in turn); without the field all start at once."""
    from sim.sass.timing import simulate_sass

    text = ".version 8.0\n.target sm_90a\n.address_size 64\n.visible .entry k(.param .u64 k_param_0)\n{\n" \
           ".reg .b32 %r<4>;\n.reg .b64 %rd<4>;\nld.param.u64 %rd1, [k_param_0];\ncvta.to.global.u64 %rd2, %rd1;\n" \
           "mov.u32 %r1, %tid.x;\nst.global.u32 [%rd2], %r1;\nret;\n}\n"
    hw = load_hw("h200.yaml")
    one = dataclasses.replace(hw, core=dataclasses.replace(hw.core, count=1))

    def firsts(h):
        launch = Launch("k", (2, 1, 1), (128, 1, 1), [Arg("buffer", "u32", array=np.zeros(4, dtype=np.uint32))])
        r = simulate_sass(text, launch, h, trace=True)
        first: dict[int, int] = {}
        for e in r.trace or []:
            if e.get("ph") == "X" and e["tid"] < 100000:
                first[e["tid"]] = min(first.get(e["tid"], 1 << 30), e["ts"])
        return [first[w] for w in sorted(first)]

    s = hw.core.cold_code_stagger
    assert s == 37
    got = firsts(one)
    assert got[:4] == [0, s, 2 * s, 3 * s] and all(0 < b - a <= 4 for a, b in zip(got[:4], got[4:]))
    assert firsts(dataclasses.replace(one, core=dataclasses.replace(one.core, cold_code_stagger=None)))[:4] == [0] * 4


def _imad_lop(n: int) -> str:
    """One warp: n independent mad.lo.u32 (IMAD) interleaved with n independent xor.b32 (LOP3), each stored."""
    body = "".join(f"mad.lo.u32 %r{10 + k}, %r1, %r2, {k + 3};\nxor.b32 %r{40 + k}, %r2, %r{70 + k};\n"
                   for k in range(n))
    movs = "".join(f"add.u32 %r{70 + k}, %r1, {k * 977 + 5};\n" for k in range(n))
    stores = "".join(f"st.global.u32 [%rd2+{8 * k}], %r{10 + k};\nst.global.u32 [%rd2+{8 * k + 4}], %r{40 + k};\n"
                     for k in range(n))
    return (".version 8.0\n.target sm_90a\n.address_size 64\n.visible .entry k(.param .u64 k_param_0)\n{\n"
            ".reg .b32 %r<100>;\n.reg .b64 %rd<4>;\nld.param.u64 %rd1, [k_param_0];\n"
            "cvta.to.global.u64 %rd2, %rd1;\nmov.u32 %r1, %tid.x;\nmov.u32 %r2, %ctaid.x;\n"
            + movs + body + stores + "ret;\n}\n")


@pytest.mark.skipif(not tools_available(), reason="SASS mode needs ptxas and nvdisasm")
def test_sass_imad_takes_the_fma_heavy_half_beside_the_alu():
    """pipes[fma].heavy_lanes (NVIDIA: GH100's IMAD issue to the FMA-heavy half of the FP32 pipe, LOP3 to the
    ALU): IMADs of one warp issue 32 / heavy_lanes cycles apart on the fma pipe while LOP3s go to the alu pipe
    in between; without the field every IMAD is an ALU instruction and takes the alu pipe 2 cycles like LOP3."""
    from sim.sass.timing import HEAVY, simulate_sass

    hw = load_hw("h200.yaml")
    assert hw.pipe_for("fma").heavy_lanes == 16
    text = _imad_lop(8)

    def issue(h):
        launch = Launch("k", (1, 1, 1), (32, 1, 1), [Arg("buffer", "u32", array=np.zeros(64, dtype=np.uint32))])
        r = simulate_sass(text, launch, h, trace=True)
        ev = sorted((e["ts"], e["name"]) for e in r.trace or [] if e.get("ph") == "X" and e["tid"] < 100000)
        return [(t, n.split()[0].split(".")[0]) for t, n in ev if n.split()[0].split(".")[0] in ("IMAD", "LOP3")]

    new = issue(hw)
    imads = [t for t, op in new if op in HEAVY]
    assert len(imads) >= 8 and all(b - a >= 2 for a, b in zip(imads, imads[1:]))
    old = issue(dataclasses.replace(hw, pipes=tuple(dataclasses.replace(p, heavy_lanes=None) for p in hw.pipes)))
    span = [max(t for t, _ in x) - min(t for t, _ in x) for x in (new, old)]
    assert span[0] < span[1]  # the two pipes overlap


def test_immediate_constant_lines_miss_once():
    c = ConstantCache(dataclasses.replace(CC, imm_line=32, imm_miss_latency=86, imm_ready=(512,)))
    assert c.imm_read(5, [(0, 0x208)]) == 5  # the descriptor's line is there at launch
    assert c.imm_read(5, [(0, 0x238)]) == 91 and c.imm_read(40, [(0, 0x220)]) == 91  # cold, then in flight
    assert c.imm_read(100, [(0, 0x23c), (0, 0x208)]) == 100 and c.imm_read(100, [(3, 0x238)]) == 186
    assert ConstantCache(CC).imm_read(7, [(0, 0x400)]) == 7  # no imm_line: immediates never wait


@pytest.mark.skipif(not tools_available(), reason="SASS mode needs ptxas and nvdisasm")
def test_sass_immediate_operand_waits_for_its_line():
    """The sixth parameter (c[0x0][0x238], a line not there at launch) reaches its IMADs through ULDC: the warp
    stalls at the ULDC constant.imm_miss_latency cycles (Nsight Compute's imc_miss), the ULDC.64 of the
    descriptor's line (ready at launch) does not; without constant.imm_line no immediate waits."""
    from sim.sass.timing import simulate_sass

    text = (".version 8.0\n.target sm_90a\n.address_size 64\n.visible .entry k(.param .u64 k_param_0, "
            ".param .u64 k_param_1, .param .u64 k_param_2, .param .u64 k_param_3, .param .u64 k_param_4, "
            ".param .u32 k_param_5)\n{\n.reg .b32 %r<8>;\n.reg .b64 %rd<4>;\nld.param.u64 %rd1, [k_param_0];\n"
            "cvta.to.global.u64 %rd2, %rd1;\nmov.u32 %r1, %tid.x;\nld.param.u32 %r2, [k_param_5];\n"
            "mul.lo.u32 %r3, %r1, %r2;\nmul.lo.u32 %r5, %r3, %r2;\nst.global.u32 [%rd2], %r5;\nret;\n}\n")
    hw = load_hw("h200.yaml")
    assert hw.constant is not None and hw.constant.imm_miss_latency == 86

    def issue(h):
        launch = Launch("k", (1, 1, 1), (32, 1, 1), [Arg("buffer", "u32", array=np.zeros(4, dtype=np.uint32))]
                        + [Arg("scalar", "u64", value=0)] * 4 + [Arg("scalar", "u32", value=7)])
        r = simulate_sass(text, launch, h, trace=True)
        ev = [(e["name"], e["ts"]) for e in r.trace or [] if e.get("ph") == "X" and e["tid"] < 100000]
        before = max(t for n, t in ev if n.startswith("LDC.64"))
        return next(t for n, t in ev if n.startswith("ULDC UR4, c[0x0][0x238]")) - before, \
            next(t for n, t in ev if n.startswith("ULDC.64")) - next(t for n, t in ev if n.startswith("IMAD R5"))

    assert issue(hw) == (87, 1)  # the LDC.64 issues, the ULDC waits for its line
    assert issue(dataclasses.replace(hw, constant=dataclasses.replace(hw.constant, imm_line=None))) == (1, 1)


@pytest.mark.skipif(not tools_available(), reason="SASS mode needs ptxas and nvdisasm")
def test_sass_s2r_result_after_its_latency():
    """S2R SR_TID.X's consumer issues core.s2r_latency cycles after it (benchmarks/sass_probe s2r case); without
    the field the alu pipe's latency, so the consumer issues as soon as the instructions before it have."""
    from sim.sass.timing import simulate_sass

    text = ".version 8.0\n.target sm_90a\n.address_size 64\n.visible .entry k(.param .u64 k_param_0)\n{\n" \
           ".reg .b32 %r<4>;\n.reg .b64 %rd<4>;\nld.param.u64 %rd1, [k_param_0];\ncvta.to.global.u64 %rd2, %rd1;\n" \
           "mov.u32 %r1, %tid.x;\nmul.lo.u32 %r2, %r1, %r1;\nst.global.u32 [%rd2], %r2;\nret;\n}\n"
    hw = load_hw("h200.yaml")
    assert hw.core.s2r_latency == 26

    def gap(h) -> int:
        launch = Launch("k", (1, 1, 1), (32, 1, 1), [Arg("buffer", "u32", array=np.zeros(4, dtype=np.uint32))])
        r = simulate_sass(text, launch, h, trace=True)
        ev = [(e["name"], e["ts"]) for e in r.trace or [] if e.get("ph") == "X" and e["tid"] < 100000]
        s2r = next(t for n, t in ev if n.startswith("S2R"))
        return next(t for n, t in ev if n.startswith("IMAD R")) - s2r

    assert gap(hw) == 26
    assert gap(dataclasses.replace(hw, core=dataclasses.replace(hw.core, s2r_latency=None))) < 26  # program order
