"""The wgmma_tma cycle model against the H200's per-CTA clock64 (issue 14: predicted vs measured per-CTA cycles):
benchmarks/top4.py --table bench --last (benchmarks/data/top4_bench_h200_2026-12-01_run2.json: each kernel's CTA
spans in clock64 and its SM clock from %globaltimer) and benchmarks/tma_trace.py (the ring per K step,
benchmarks/data/tma_trace_h200_2026-12-01.json). docs/wgmma-tma.md section 8."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
RUN = ROOT / "benchmarks/data/top4_bench_h200_2026-12-01_run2.json"
TRACE = ROOT / "benchmarks/data/tma_trace_h200_2026-12-01.json"


def _top4():
    sys.path.insert(0, str(ROOT / "benchmarks"))
    import top4

    return top4


def _rows(**match) -> list[dict]:
    rows = [r for r in json.loads(RUN.read_text())["rows"] if "rank" in r and r.get("measured_cycles_per_cta")]
    return [r for r in rows if all(r.get(k) == v for k, v in match.items())]


def test_large_shapes_run_at_the_power_limited_clock():
    """bf16 8192^3, the four candidates: each SM ran at 1372-1437 MHz (clock64 / %globaltimer), not the 1980 MHz of
    h200.yaml's clock_mhz. The model's bandwidths are bytes per second, so its cycles depend on the clock: at 1980
    MHz it predicts 1.22-1.30x the CTAs' clock64 spans, at each kernel's own clock 0.94-1.01."""
    top4 = _top4()
    rows = _rows(dtype="bf16", shape=[8192, 8192, 8192])
    assert len(rows) == 4 and all(1300 <= r["measured_clock_mhz"] <= 1500 for r in rows)
    for r in rows[3:]:  # one of them (the planner's time: the slow test checks every kernel)
        mc = r["measured_cycles_per_cta"]
        assert 1.2 <= top4.at_clock(r, 1980) / mc <= 1.32
        assert 0.93 <= top4.at_clock(r, r["measured_clock_mhz"]) / mc <= 1.02


def test_m_64_128_picks_per_cta():
    """The picks at M = 64/128, bf16, predicted at the kernel's clock (1772-1795 MHz) / measured per-CTA cycles: within
    0.90-1.10 whether the operands stream from DRAM (N or K 7168: the DRAM trip at the bytes in flight) or stay in
    the L2 between the back-to-back launches (64/128 x 4096 x 4096, 33-34 MB: l2.held; 1.40-1.60 before the hold was
    modelled: docs/wgmma-tma.md section 10)."""
    top4 = _top4()
    for M, N, K in ((64, 7168, 7168), (128, 4096, 7168), (128, 7168, 4096), (64, 4096, 4096)):  # slow test: all
        (r,) = _rows(dtype="bf16", shape=[M, N, K], rank=0)
        q = top4.at_clock(r, r["measured_clock_mhz"]) / r["measured_cycles_per_cta"]
        assert 0.90 <= q <= 1.10, (M, N, K, q)


def test_trace_the_ring_keeps_stages_minus_one_loading():
    """The per-K-step trace (last timed launch), 64x7168x4096 64x64 at 3 / 4 / 6 stages: a stage's trip (issue to
    landed) over the K step is stages - 1 (2, 3, 5 stages loading: the consumer holds the landed one until the next
    K tile's wait_group 1), the consumer holds a stage one K step and ~150 cycles more, and the producer reissues
    within ~50 cycles of the release (not the mechanism). The trip grows with the load (1402 / 1607 / 1986 cycles)."""
    rows = {tuple(r["case"]): r for r in json.loads(TRACE.read_text())["rows"]}
    trips = []
    for stages in (3, 4, 6):
        x = rows[(64, 7168, 4096, 64, 64, 64, stages)]["last"]
        assert abs(x["trip"] / x["interval"] - (stages - 1)) <= 1.0, (stages, x["trip"], x["interval"])
        assert 100 <= x["hold"] - x["interval"] <= 250
        assert x["reissue"] <= 120
        trips.append(x["trip"])
    assert trips == sorted(trips)
    assert all(1700 <= r[m]["clock_mhz"] <= 1850 for r in rows.values() for m in ("upload", "last")
               if r["case"][0] < 4096)


@pytest.mark.slow
def test_every_candidate_per_cta():
    """All 96 kernels of the run (24 shapes x their top 4; 92 still candidates), each predicted at its own clock: MAPE
    4.7%, 90 of 92 within 10% (session 9: 4.9%, 94 of 96)
    (11.5% and 61 before section 10's mechanisms); the picks of the run, 24 of 24 within 10%. The two outside: 64x64
    at 128 x 4096 x 4096 (1.51: 128 CTAs read each A box at once and the L2 serves them faster than its share)."""
    top4 = _top4()
    rows = _rows()
    assert len(rows) == 96
    at = [(top4.at_clock(r, r["measured_clock_mhz"]), r) for r in rows]
    # 4 kernels are no longer candidates (128x64 t64x64 at M = 64: the second consumer wholly beyond M)
    qs = [(a / r["measured_cycles_per_cta"], r) for a, r in at if a is not None]
    assert len(qs) == 92
    assert sum(abs(q - 1) for q, _ in qs) / len(qs) <= 0.055
    assert sum(abs(q - 1) <= 0.10 for q, _ in qs) >= 88
    picks = [(q, r) for q, r in qs if r["rank"] == 0]
    assert sum(abs(q - 1) <= 0.10 for q, _ in picks) == 24


@pytest.mark.slow
def test_run3_own_top4_per_cta():
    """Batch 2's run of this model's own top 4 (benchmarks/data/top4_bench_h200_2026-12-01_run3.json, docs/wgmma-tma.md
    section 10b): the 90 wgmma_tma kernels predicted at their clocks (88 still candidates), 88 within 10% (MAPE 3.6%;
    session 10: 86, the two outside 64x64 s5 at 64x4096x4096, 1.15, until the L2-served trip lost the ring's queue,
    docs/wgmma-tma.md section 13), the 24 picks within 10%."""
    top4 = _top4()
    run3 = ROOT / "benchmarks/data/top4_bench_h200_2026-12-01_run3.json"
    rows = [r for r in json.loads(run3.read_text())["rows"] if "rank" in r and r.get("measured_cycles_per_cta")
            and r["tiling"].startswith("wgmma_tma_")]
    assert len(rows) == 90
    at = [(top4.at_clock(r, r["measured_clock_mhz"]), r) for r in rows]
    # 2 kernels are no longer candidates (128x128 t64x128 at M = 64: the second consumer wholly beyond M)
    qs = [(a / r["measured_cycles_per_cta"], r) for a, r in at if a is not None]
    assert len(qs) == 88
    assert sum(abs(q - 1) <= 0.10 for q, _ in qs) >= 88
    assert all(abs(q - 1) <= 0.10 for q, r in qs if r["rank"] == 0)
