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
