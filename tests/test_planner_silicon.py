"""The planner's cycle model against the H200 (issue 11 item 4): the mechanisms it charges, each on its
hwconfig field, and its per-CTA error over the generated GEMMs the H200 measured (benchmarks/planner_silicon.py:
the silicon suite's 9 GEMMs and docs/top4.md's 40 candidates)."""

from __future__ import annotations

import dataclasses
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))


def test_inputs_resident_in_the_l2_up_to_half_its_size() -> None:
    """Without measured hold points ([l2.held_footprints]) a launch starts with its inputs in the L2 up to
    [l2.size] / 2 where [l2.partition_bits] is set (a line both partitions read is held twice): no miss while
    they fit, the first touch at [l2.hit_latency] + half [l2.far_latency]; twice that capacity misses half as
    often, its first touch half DRAM; without partitions the whole [l2.size] holds them."""
    from kernelgen.models.schedule import resident_inputs
    from kernelgen.spec import shorthand
    from sim.hw import load_hw

    hw = load_hw("h200")
    hw = dataclasses.replace(hw, l2=dataclasses.replace(hw.l2, held_footprints=(), held_fractions=()))
    assert hw.l2.partition_bits
    first = hw.l2.hit_latency + hw.l2.far_latency / 2
    assert resident_inputs(shorthand("1024x1024x1024", "f16"), hw, (1024, 1024, 1024), 0.25) == (0.0, first)
    # 4096 x 4096 x 2048 f16: 48 MiB of inputs, inside l2.size (60 MiB) but beyond half of it
    mid = (2048, 4096, 4096)
    foot = (2048 * 4096 + 4096 * 4096) * 2
    assert hw.l2.size / 2 < foot < hw.l2.size
    miss, _ = resident_inputs(shorthand("2048x4096x4096", "f16"), hw, mid, 0.5)
    assert miss == pytest.approx(0.5 * (1 - hw.l2.size / 2 / foot))
    one = dataclasses.replace(hw, l2=dataclasses.replace(hw.l2, partition_bits=[]))
    assert resident_inputs(shorthand("2048x4096x4096", "f16"), one, mid, 0.5)[0] == 0.0
    side = 1
    while 2 * side * side * 2 < hw.l2.size:  # A and B of side^2 f16 each: 2 x (l2.size / 2) in all
        side *= 2
    shape = (side, side, side)
    foot = 2 * side * side * 2
    out = 1 - hw.l2.size / 2 / foot
    miss, lat = resident_inputs(shorthand("x".join(map(str, shape)), "f16"), hw, shape, 0.5)
    assert miss == pytest.approx(0.5 * out) and lat == pytest.approx(out * hw.dram.latency + (1 - out) * first)


def test_inputs_held_as_measured_between_launches() -> None:
    """With [l2.held_footprints] / [l2.held_fractions] (H200, benchmarks/tma_l2res: all of up to ~42 MB held
    between back-to-back launches, nothing from ~58 MB) the part not held misses: 64x4096x4096 (34 MB) starts
    in the L2, 64x7168x4096 (59 MB) streams from DRAM; linear between the points."""
    from kernelgen.models.schedule import beyond_l2
    from kernelgen.spec import shorthand
    from sim.hw import load_hw

    hw = load_hw("h200")
    xs, ys = hw.l2.held_footprints, hw.l2.held_fractions
    assert xs and len(xs) == len(ys)
    assert beyond_l2(shorthand("64x4096x4096", "bf16"), hw, (64, 4096, 4096)) == 0.0
    assert beyond_l2(shorthand("64x7168x4096", "bf16"), hw, (64, 7168, 4096)) == 1.0
    m = (xs[0] + xs[1]) // 2 // (4 * 4096)  # M = N of an M x N x 4096 f16 GEMM whose inputs are halfway
    foot = 2 * m * 4096 * 2
    want = 1 - (ys[0] + (ys[1] - ys[0]) * (foot - xs[0]) / (xs[1] - xs[0]))
    assert beyond_l2(shorthand(f"{m}x{m}x4096", "f16"), hw, (m, m, 4096)) == pytest.approx(want)


def test_dram_share_is_the_measured_stream_rate_where_arch_is_set() -> None:
    """Where [arch] names a real part the DRAM share per core is what cp.async streams reach with every core
    loading ([dram.stream_bandwidth_gbps], benchmarks/cpasync_stream) over the cores copying, no bank
    fraction; a modelled part (npu7nm: the simulator is its hardware) keeps sim.timing's [dram.burst] /
    [l2.line] bank occupancy."""
    from kernelgen.models.schedule import dram_share
    from sim.hw import load_hw

    hw, npu = load_hw("h200"), load_hw("npu7nm")
    bw = hw.dram.stream_bandwidth_gbps or hw.dram.bandwidth_gbps
    assert dram_share(hw, 132) == pytest.approx(bw * 1e3 / hw.clock_mhz / 132)
    assert dram_share(npu, 16) == pytest.approx(npu.dram.bandwidth_gbps * 1e3 / npu.clock_mhz / 16
                                                * npu.dram.burst / npu.l2.line)


def test_a_tile_waits_for_its_slowest_line() -> None:
    """cp.async.wait_group waits for all of a K tile's copies: a first touch of L2-resident inputs costs a
    far-homed line's [l2.hit_latency] + [l2.far_latency] (H200: one SM's 2 KiB batch 463 cycles), a tile of the
    part not held in the L2 a far-homed DRAM miss, [dram.latency] + [l2.far_latency] / 2; by the fraction of
    tiles missing between."""
    from kernelgen.models.schedule import tile_first_touch
    from sim.hw import load_hw

    hw = load_hw("h200")
    assert hw.l2.far_latency
    hit, miss = hw.l2.hit_latency + hw.l2.far_latency, hw.dram.latency + hw.l2.far_latency / 2
    assert tile_first_touch(hw, 0.0) == hit and tile_first_touch(hw, 1.0) == miss
    assert tile_first_touch(hw, 0.25) == pytest.approx(0.75 * hit + 0.25 * miss)


def _model(shape: str, key: str, dt: str = "bf16", out: str = "bf16", hw=None):
    from planner_silicon import tiling_of

    from kernelgen.planner import plan
    from kernelgen.spec import shorthand
    from sim.hw import load_hw

    t = tiling_of(key)
    return plan(shorthand(shape, dt, out), hw or load_hw("h200"), t.variant, only=[t]).best.model


def test_tiles_in_flight_follow_the_emitted_pipeline() -> None:
    """The mma pipeline and a 2-stage wgmma wait for tile kt and then issue tile kt + S - 1 (S - 1 tiles in
    flight); a wgmma of 3+ stages issues it only after waiting for tile kt + 1 (S - 2 in flight)."""
    assert _model("64x7168x4096", "wgmma_64x64x64_t64x64_s2_p0.0_v8.8").terms["ahead"] == 1
    assert _model("64x7168x4096", "wgmma_64x64x64_t64x64_s3_p0.0_v8.8").terms["ahead"] == 1
    assert _model("64x7168x4096", "wgmma_64x64x64_t64x64_s6_p0.0_v8.8").terms["ahead"] == 4
    assert _model("128x4096x7168", "mma_64x64x64_t32x32_s3_p8.8_v8.8", "f16", "f32").terms["ahead"] == 2


def test_an_iteration_holds_the_round_trip_over_the_tiles_in_flight() -> None:
    """Little's law: with `ahead` K tiles in flight, each for its round trip (first touch, transfer, the
    queue of the misses every core keeps in flight) after the barrier, an iteration takes at least
    (trip + barrier) / ahead; more stages shorten it at a DRAM-streaming shape."""
    it = []
    for s in (3, 4, 6):
        m = _model("64x7168x4096", f"wgmma_64x64x64_t64x64_s{s}_p0.0_v8.8")
        assert m.iter_cycles >= m.terms["trip"] / m.terms["ahead"] * (1 - 1 / 64)
        it.append(m.iter_cycles)
    assert it[0] > it[1] > it[2]


def test_epilogue_waits_only_for_stores_beyond_the_store_buffer() -> None:
    """[core.store_buffer_bytes] are accepted ahead of the drain: a tile that fits ends without waiting; a
    larger one waits for its bytes beyond them at the smaller of [core.store_bytes_per_cycle] and the
    core's share of [l2.write_bandwidth_gbps]."""
    from kernelgen.models.schedule import _drain
    from kernelgen.spec import shorthand
    from kernelgen.tiling import Tiling
    from sim.hw import load_hw

    hw = load_hw("h200")
    buf = hw.core.store_buffer_bytes
    assert buf and hw.core.store_bytes_per_cycle and hw.l2.write_bandwidth_gbps
    spec = shorthand("4096x4096x4096", "f16")  # f32 D
    small = Tiling("mma", 16, 16, 64, 16, 8, 3, 8, 8, 8, 8)  # 1 KiB of f32
    big = Tiling("mma", 128, 256, 64, 64, 64, 2, 8, 8, 8, 8)  # 128 KiB
    assert 16 * 16 * 4 <= buf and _drain(spec, small, hw, 1, 132) == 0.0
    rate = min(hw.core.store_bytes_per_cycle, hw.l2.write_bandwidth_gbps * 1e3 / hw.clock_mhz / 132)
    assert _drain(spec, big, hw, 1, 132) == pytest.approx((128 * 256 * 4 - buf) / rate)
    none = dataclasses.replace(hw, core=dataclasses.replace(hw.core, store_buffer_bytes=None))
    assert _drain(spec, big, none, 1, 132) == pytest.approx(128 * 256 * 4 / rate)


def test_register_banks_only_where_ptxas_does_not_allocate() -> None:
    """The PTX registers' bank cycles load a unit only on a part without [arch] (npu7nm: the simulator's
    registers are the PTX ones); on the H200 ptxas allocates and the pipe rates are measured throughputs."""
    from kernelgen.models.schedule import rf_occupancy
    from sim.hw import load_hw

    h200, npu = load_hw("h200"), load_hw("npu7nm")
    assert h200.arch and not npu.arch
    assert rf_occupancy({"tensor": 2.0}, h200) == {} and rf_occupancy({"tensor": 2.0}, npu) == {"tensor": 2.0}


def test_prediction_within_12_percent_of_the_h200() -> None:
    """Issue 11's target: predicted per-CTA MAPE <= 12% over the 49 generated GEMMs the H200 measured
    (recorded: benchmarks/data/silicon_gpu_2026-11-30.json, top4_2026-11-30d.json); 7.6% on 2026-12-01
    (suite 12.9%, top-4 6.4%; 16.2% / 40.4% / 10.8% before)."""
    import planner_silicon

    from sim.hw import load_hw

    hw = load_hw("h200")
    rs = planner_silicon.rows(hw) + planner_silicon.top4_rows(hw)
    assert len(rs) == 49
    assert planner_silicon.mape(rs) <= 0.12, planner_silicon.mape(rs)


# docs/benchmarks.md's table (bf16 in and out): wgmma_tma measured faster than the cp.async wgmma
# at each (docs/top4-bench.md)
TABLE = ["4096x4096x4096", "6144x6144x6144", "8192x8192x8192", "4096x7168x2048"] + [
    f"{m}x{n}x{k}" for m in (64, 128) for n in (4096, 7168) for k in (4096, 7168)]


def test_tma_beats_the_measured_cp_async_pick_at_64x7168x4096() -> None:
    """benchmarks/data/gpu_bench_auto_2026-12-01b.json: the cp.async wgmma 64x64 s3 ran ~103,800 cycles at
    64x7168x4096 bf16 (B, 59 MB, streamed once from DRAM); benchmarks/data/cpasync_stream_2026-12-01.json: its s4
    32.0 us against wgmma_tma's 64x64 s5, 23.4 us (gpu_bench_auto_2026-12-01c.json); the model puts both behind."""
    from planner_silicon import tiling_of

    from kernelgen.planner import plan
    from kernelgen.spec import shorthand
    from sim.hw import load_hw

    for cp in ("wgmma_64x64x64_t64x64_s3_p0.0_v8.8", "wgmma_64x64x64_t64x64_s4_p0.0_v8.8"):
        ts = [tiling_of(cp), tiling_of("wgmma_tma_64x64x64_t64x64_s5_p0.0_v8.8")]
        p = plan(shorthand("64x7168x4096", "bf16", "bf16"), load_hw("h200"), only=ts)
        assert p.best.tiling.variant == "wgmma_tma", cp


@pytest.mark.slow
@pytest.mark.parametrize("shape", TABLE)
def test_default_pick_is_wgmma_tma_at_the_benchmark_table(shape: str) -> None:
    from kernelgen.planner import plan
    from kernelgen.spec import shorthand
    from sim.hw import load_hw

    assert plan(shorthand(shape, "bf16", "bf16"), load_hw("h200")).best.tiling.variant == "wgmma_tma"
