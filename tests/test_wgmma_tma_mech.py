"""The wgmma_tma ring's memory side (kernelgen/models/tma_cycles.py, docs/wgmma-tma.md section 10): the L2's hold on
the inputs between back-to-back launches (l2.held_*) and the DRAM trip under load (tma.dram_idle_trip /
dram_peak_gbps), unit checks of the two functions."""

from __future__ import annotations

import dataclasses

from kernelgen.models.schedule import beyond_l2
from kernelgen.spec import shorthand
from sim.hw import load_hw


def test_l2_hold_interpolates_measured_points():
    """schedule.beyond_l2 (the part of the inputs the L2 does not hold from the previous launch), which the wgmma_tma
    ring takes: linear between the measured [l2.held_*] points, flat beyond them."""
    hw = load_hw("h200")
    l2 = dataclasses.replace(hw.l2, held_footprints=(10, 20, 40), held_fractions=(1.0, 0.5, 0.1))
    h = dataclasses.replace(hw, l2=l2)

    def held(foot: int) -> float:  # a 1 x N x foot/2 bf16 GEMM: its inputs are foot bytes (+ 2 K of A)
        return 1.0 - beyond_l2(shorthand(f"1x{foot // 2 - 1}x1", "bf16", "bf16"), h, (1, foot // 2 - 1, 1))

    assert held(4) == 1.0 and held(10) == 1.0
    assert abs(held(16) - 0.7) < 1e-9 and abs(held(30) - 0.3) < 1e-9
    assert abs(held(100) - 0.1) < 1e-9


def _model(shape: tuple[int, int, int], bm: int, bn: int, tm: int, stages: int, dtype: str = "bf16"):
    from kernelgen.planner import plan
    from kernelgen.spec import shorthand
    from kernelgen.variants import get

    spec = shorthand("x".join(map(str, shape)), dtype, dtype)
    key = f"wgmma_tma_{bm}x{bn}x64_t{tm}x{bn}_s{stages}_p0.0_v8.8"
    (t,) = [t for t in get("wgmma_tma").tilings(spec) if t.key() == key]
    return plan(spec, load_hw("h200"), "wgmma_tma", only=[t]).best


def test_dram_trip_table_interpolates_and_extends():
    from kernelgen.models.tma_cycles import _interp

    xs, ys = (10, 20, 40), (100, 200, 300)
    assert _interp(xs, ys, 5) == 100 and _interp(xs, ys, 15) == 150 and _interp(xs, ys, 30) == 250
    assert _interp(xs, ys, 60) == 400  # the last segment's slope beyond the last point


def test_inputs_held_between_launches_up_to_40_mib():
    """h200: 64x4096x4096 (33.6 MB of inputs) stays in the L2 for the next launch, every stage L2-served (p_stage 0);
    64x7168x4096 (59 MB) does not: every stage waits for DRAM (one wave)."""
    hw = load_hw("h200")
    assert beyond_l2(shorthand("64x4096x4096", "bf16", "bf16"), hw, (64, 4096, 4096)) == 0.0
    assert beyond_l2(shorthand("64x7168x4096", "bf16", "bf16"), hw, (64, 7168, 4096)) == 1.0
    assert _model((64, 4096, 4096), 64, 64, 64, 6).model.terms["p_stage"] == 0.0
    assert _model((64, 7168, 4096), 64, 64, 64, 6).model.terms["p_stage"] == 1.0


def test_six_stages_beat_five_at_n_k_7168():
    """The DRAM trip grows with the bytes in flight, but less than the stages: 64x7168x7168 64x64 steps faster with 6
    stages than with 5 (H200: 50,912 vs 56,798 cycles per CTA, bf16, top4 run 2); the fixed-trip model tied them."""
    s5, s6 = _model((64, 7168, 7168), 64, 64, 64, 5), _model((64, 7168, 7168), 64, 64, 64, 6)
    assert s6.cycles_per_cta < 0.95 * s5.cycles_per_cta
    assert s6.model.terms["tma_trip"] > s5.model.terms["tma_trip"]


def test_consumer_step_follows_the_traced_minima():
    """The consumer's step (full wait to the release of the previous stage, tensor pipe free) against the trace's
    minima (benchmarks/data/tma_mech_h200_2026-12-01.json) for one consumer: 64x64 154, 128x64 t128 217-233 within
    20% (its wgmma issue spacing). Two consumers wait for the tensor pipe's queue ([wgmma.queue]; the later one's
    release, benchmarks/tma_step.py, tests/test_wgmma_tma_queue.py): 256x128 t128 (16 wgmmas per K tile) holds a
    stage 250-400 cycles longer than 128x256 t64 (8), measured 819-839 vs 572-634 (session 9's model: 338 vs 183)."""
    steps = {(64, 64, 64): 154, (128, 64, 128): 225}
    for (bm, bn, tm), meas in steps.items():
        hold = _model((64, 4096, 7168), bm, bn, tm, 4).model.terms["tma_hold"]
        assert abs(hold / meas - 1) <= 0.20, (bm, bn, tm, hold)
    big = _model((4096, 4096, 4096), 256, 128, 128, 3).model.terms["tma_hold"]
    wide = _model((4096, 4096, 4096), 128, 256, 64, 3).model.terms["tma_hold"]
    assert 250 <= big - wide <= 400, (big, wide)


def test_ring_identity_holds_for_the_traced_means():
    """The trace (last launch): stages x mean K step = mean trip + mean hold + mean reissue within 3% for every case,
    the identity the model's ring term is built on."""
    import json
    from pathlib import Path

    data = json.loads((Path(__file__).resolve().parent.parent / "benchmarks/data/tma_mech_h200_2026-12-01.json")
                      .read_text())
    n = 0
    for r in data["trace"]:
        x = r.get("last") or {}
        if x.get("interval_mean") and x.get("reissue_mean") is not None:
            lhs = r["case"][6] * x["interval_mean"]
            assert abs((x["trip_mean"] + x["hold_mean"] + x["reissue_mean"]) / lhs - 1) <= 0.03, r["case"]
            n += 1
    assert n >= 12
