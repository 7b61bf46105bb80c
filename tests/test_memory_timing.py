"""Timeline tests of the memory system's throughput and address spaces (sim/timing/memory.py): tiny
PTX on tests/test_timing.py's small HwConfig, exact cycle numbers asserted."""

from __future__ import annotations

import dataclasses

from tests.test_timing import hw_small, run, t_of

# each warp reads 128 contiguous bytes (4 sectors of the L2's 32) that warm_l2 put in the L2
READ = "mul.wide.u32 %rd3, %r1, 4;\nadd.s64 %rd4, %rd2, %rd3;\nld.global.cg.u32 %r2, [%rd4];\nadd.s32 %r3, %r2, 1;\n"


def _l2_bw(bytes_per_cycle: float):
    hw = hw_small()
    return dataclasses.replace(hw, l2=dataclasses.replace(hw.l2, bandwidth_gbps=bytes_per_cycle * hw.clock_mhz / 1e3))


def test_l2_reads_queue_for_the_l2_bandwidth():
    """One CTA (the core has the whole l2.bandwidth_gbps, 8 B/cycle here). Each warp reads two 64-byte
    lines: a line's 64 B hold the path 8 cycles, so warp 0's second line gets it 8 cycles after its
    first, and warp 1's lines, issued a cycle later, queue behind both of warp 0's."""
    hw = _l2_bw(8.0)
    res, log = run(READ, hw, threads=64, buf_words=1024, warm_l2=True)
    ld0, ld1 = t_of(log, "ld.global", warp=0), t_of(log, "ld.global", warp=1)
    use0, use1 = t_of(log, "add.s32 %r3", warp=0), t_of(log, "add.s32 %r3", warp=1)
    assert res.cache["l2_hit_rate"] == 1.0 and hw.l2.line == 64 and 0 < ld1 - ld0 < 8
    assert use0 - ld0 == 20 + 8  # l2.hit_latency after its first line's 64 B
    assert use1 - ld1 == 20 + 24 - (ld1 - ld0)  # after warp 0's 128 B and its own first line; was 20
    # without a limit (null in the YAML) both are plain hits
    res, log = run(READ, hw_small(), threads=64, buf_words=1024, warm_l2=True)
    assert t_of(log, "add.s32 %r3", warp=1) - t_of(log, "ld.global", warp=1) == 20


def test_the_core_port_caps_a_lone_cores_l2_reads():
    """With the L2's bandwidth unlimited (or larger than one core can take), a core still receives at
    most core.fill_bytes_per_cycle (docs/micro-fill.md): 8 B/cycle here gives the same timeline as an
    8 B/cycle L2, and a port wider than the L2 share changes nothing."""
    hw = hw_small()
    port8 = dataclasses.replace(hw, core=dataclasses.replace(hw.core, fill_bytes_per_cycle=8.0))
    _, log = run(READ, port8, threads=64, buf_words=1024, warm_l2=True)
    _, ref = run(READ, _l2_bw(8.0), threads=64, buf_words=1024, warm_l2=True)
    for w in (0, 1):
        assert t_of(log, "add.s32 %r3", warp=w) - t_of(log, "ld.global", warp=w) == \
            t_of(ref, "add.s32 %r3", warp=w) - t_of(ref, "ld.global", warp=w) > 20
    wide = dataclasses.replace(_l2_bw(8.0), core=dataclasses.replace(hw.core, fill_bytes_per_cycle=64.0))
    _, log = run(READ, wide, threads=64, buf_words=1024, warm_l2=True)
    assert [t_of(log, "add.s32 %r3", warp=w) for w in (0, 1)] == [t_of(ref, "add.s32 %r3", warp=w) for w in (0, 1)]


def test_generic_atomic_goes_to_its_real_space():
    """atom.add without a state space on a global address is an L2 read-modify-write (l2.hit_latency
    after a DRAM fill here), not a constant-cache hit; on a shared address it is a shared access."""
    body = "atom.add.u32 %r2, [%rd2], 1;\nadd.s32 %r3, %r2, 1;\n"
    res, log = run(body, threads=1)
    assert t_of(log, "add.s32 %r3") - t_of(log, "atom.add") == 200  # dram.latency: the line was cold
    shared = ("mov.u64 %rd5, sm;\ncvta.shared.u64 %rd6, %rd5;\natom.add.u32 %r2, [%rd6], 1;\n"
              "add.s32 %r3, %r2, 1;\n")
    res, log = run(shared, threads=1)
    assert t_of(log, "add.s32 %r3") - t_of(log, "atom.add") == 10  # shared.latency


# thread 0 reads the word at byte offset A, then (dependent: the word read is 0) at B, then A and B again
CHASE = """setp.ne.u32 %p1, %r1, 0;
@%p1 bra DONE;
ld.global.cg.u32 %r2, [%rd2+{a}];
cvt.u64.u32 %rd5, %r2;
add.s64 %rd6, %rd2, %rd5;
ld.global.cg.u32 %r3, [%rd6+{b}];
cvt.u64.u32 %rd7, %r3;
add.s64 %rd8, %rd2, %rd7;
ld.global.cg.u32 %r4, [%rd8+{a}];
cvt.u64.u32 %rd9, %r4;
add.s64 %rd10, %rd2, %rd9;
ld.global.cg.u32 %r5, [%rd10+{b}];
add.s32 %r6, %r5, 1;
DONE:
"""


def _gaps(log):
    """Issue-to-issue gaps of the four loads and the final add: each is the previous load's latency + 2
    ALU ops (cvt, add: 2 x 5 cycles)."""
    ts = [t_of(log, "ld.global", nth=i) for i in range(4)] + [t_of(log, "add.s32 %r6")]
    return [b - a for a, b in zip(ts, ts[1:])]


def _partitioned(**l2):
    hw = hw_small()
    return dataclasses.replace(hw, l2=dataclasses.replace(hw.l2, partition_bits=(12,), far_latency=50, **l2))


def test_first_touch_across_the_l2_partitions_costs_far_latency_once():
    """Lines 4 KiB apart are homed in different partitions (partition_bits: bit 12); the core (index 0)
    is attached to partition 0. With the buffer warm in the L2 (as after its upload) the first read of
    the far-homed line costs l2.hit_latency + l2.far_latency, the near one l2.hit_latency; the second
    reads of both are near (the far read left a copy). Unpartitioned, every read is a plain hit."""
    res, log = run(CHASE.format(a=0, b=4096), _partitioned(), threads=32, buf_words=4096, warm_l2=True)
    alu = 5 + 5  # cvt + add before the next load issues
    g = _gaps(log)
    assert sorted(g[:2]) == [20 + alu, 20 + 50 + alu] and g[2:] == [20 + alu, 20]
    _, log = run(CHASE.format(a=0, b=4096), hw_small(), threads=32, buf_words=4096, warm_l2=True)
    assert _gaps(log) == [20 + alu, 20 + alu, 20 + alu, 20]


def test_dram_miss_near_and_far_homed():
    """Cold: a miss of the near-homed line costs dram.latency - far_latency / 2, the far-homed one
    dram.latency + far_latency / 2 (their mean is dram.latency); the rereads are near hits."""
    _, log = run(CHASE.format(a=0, b=4096), _partitioned(), threads=32, buf_words=4096)
    alu = 10
    g = _gaps(log)
    assert sorted(g[:2]) == [200 - 25 + alu, 200 + 25 + alu] and g[2:] == [20 + alu, 20]


def test_a_miss_fills_the_aligned_fill_block():
    """l2.fill 64 with 32-byte sectors: reading sector 0 of a cold line brings sector 1 too, so the read
    at +32 hits; without fill it is a second DRAM miss (merged into nothing: the first fill is done)."""
    hw = hw_small()
    assert hw.l2.sector == 32 and hw.l2.line >= 64
    filled = dataclasses.replace(hw, l2=dataclasses.replace(hw.l2, fill=64))
    _, log = run(CHASE.format(a=0, b=32), filled, threads=32, buf_words=4096)
    assert _gaps(log)[1] == 20 + 10
    _, log = run(CHASE.format(a=0, b=32), hw, threads=32, buf_words=4096)
    assert _gaps(log)[1] >= 200 + 10
