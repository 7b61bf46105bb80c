"""The shared cycle model's L2 read floor (kernelgen/models/schedule.py `l2_tile`): a K tile of every
resident CTA cannot arrive faster than the core's share of [l2.bandwidth_gbps] (or its fill port). Pinned
to the H200 run that found it (benchmarks/data/gpu_bench_auto_2026-12-01b.json): without the floor the
cp.async wgmma 128x128x64 tiles at 4096^3 were predicted at 339,599 cycles and picked, and ran 0.282 ms,
0.71x cuBLAS; wgmma_tma's 256x128 tiles (0.196 ms in the same session's runs) are what the H200 favours."""

from __future__ import annotations

import json
import pathlib

from kernelgen.models.schedule import planner_hw
from kernelgen.planner import plan
from kernelgen.spec import shorthand
from sim.hw import load_hw

DATA = pathlib.Path(__file__).resolve().parent.parent / "benchmarks" / "data" / "gpu_bench_auto_2026-12-01b.json"


def _row(M: int, N: int, K: int, dtype: str) -> dict:
    rows = json.loads(DATA.read_text())["speed"]
    return next(r for r in rows if (r["M"], r["N"], r["K"], r["dtype"]) == (M, N, K, dtype))


def test_l2_floor_keeps_the_cp_async_wgmma_at_the_measured_time() -> None:
    hw = planner_hw(load_hw("h200"))  # the planner's cycles: at [planner_clock_mhz]
    p = plan(shorthand("4096x4096x4096", "bf16"), hw, variant="wgmma", exhaustive=True)
    ev = next(e for e in p.survivors if e.tiling.key() == "wgmma_128x128x64_t64x128_s3_p0.0_v8.8")
    row = _row(4096, 4096, 4096, "bf16")
    assert row["picked"]["key"] == ev.tiling.key() and row["check"]["passed"]
    measured = row["time_ms"] * 1e-3 * hw.clock_mhz * 1e6  # cycles at the planner's clock
    # the floor alone: 1024 CTAs x 2 MiB each through the L2 at its read rate
    floor = 1024 * (128 + 128) * 4096 * 2 / hw.l2_bytes_per_cycle
    assert ev.cycles >= floor
    assert 0.8 <= ev.cycles / measured <= 1.1, (ev.cycles, measured)


def test_default_pick_at_4096_is_the_tma_kernel() -> None:
    p = plan(shorthand("4096x4096x4096", "bf16"), load_hw("h200"), exhaustive=False)
    assert p.survivors[0].tiling.variant == "wgmma_tma"
