"""Cycle model of the block-scaled fp8 GEMM (kernelgen/variants/wgmma_fp8.py): tma_cycles.py's persistent
tile walk, producer (TMA issue, transfer, ring) and epilogue terms, with the consumer's K tile replaced by
what it does per 128-K block. No constant is fitted to a measurement.

Per K tile (= scale block), with C consumer warpgroups, one warp of each on every scheduler:

- tensor: the C warpgroups' fp8 wgmmas (e4m3 and e5m2 alike) on the units, wgmma_unit_cycles per warp at
  [wgmma.fp8_macs]
  (tma_cycles' "tensor" term);
- chain: one consumer's dependent path: its own wgmmas, then wait_group 0 ([wgmma.latency]) or its scale
  loads from the stage's scale slots in shared memory ([shared.latency]), whichever is later, then its loop body's
  instructions (the FMAs of the promotion among them) issued one per cycle ([core.issue_width]); a TILE_N 256
  tile runs its two 128-wide N halves one after the other through one block accumulator set (wgmmas, wait,
  promotion, then the next half), so the wait's [wgmma.latency] is on the path once per half;
- fma: the C warps' promotion FFMAs (and the scale products) on the scheduler's fp32 unit
  ([pipes[fma].lanes] per cycle, [pipes[fma].interval], [warp_size]);
- issue: the C warps' loop bodies on the scheduler's issue port ([core.issue_width]);
- producer: the TMA terms of tma_cycles (stage bytes of 1-byte elements).

The K tile takes the largest: with two consumers one's promotion runs under the other's wgmmas
(DeepGEMM's overlap) as long as the chain is shorter than the two warpgroups' tensor time. Per tile, the
epilogue as in tma_cycles, after the tail: the last K block's [wgmma.latency] (per N half) and loop body (its
promotion), which the next tile cannot overlap (the same warps run the epilogue).
"""

from __future__ import annotations

from kernelgen.counting import Counts
from kernelgen.models.schedule import CycleModel, wgmma_unit_cycles
from kernelgen.models.tma_cycles import tma_cycle_model
from kernelgen.spec import GemmSpec
from kernelgen.tiling import Tiling
from sim.hw import HwConfig


def fp8_cycle_model(spec: GemmSpec, t: Tiling, hw: HwConfig, shape: tuple[int, int, int], dram_cycles: float,
                    miss_rate: float, c: Counts, grid_cap: int, boxes: int, halves: int = 1,
                    store: tuple[int, int] | None = None) -> CycleModel:
    """halves: the 128-wide N halves a consumer runs one after the other per K block (wgmma_fp8.halves_of);
    store: (slabs, buffers) of the TMA-store epilogue (tma_cycles' terms), None for registers -> global."""
    assert hw.wgmma is not None
    base = tma_cycle_model(spec, t, hw, shape, dram_cycles, miss_rate, c, grid_cap, boxes, store)
    T = base.terms
    pipes = {p.name: p for p in hw.pipes}
    fma = pipes[hw.pipe_for("fma").name]
    C = t.bm // t.tm  # consumer warpgroups: C warps per scheduler
    own = wgmma_unit_cycles(spec, t, hw)  # one warp's share of its warpgroup's wgmmas ([wgmma.fp8_macs])
    body = sum(c.iter.values()) / hw.core.issue_width  # [core.issue_width]
    wait = max(own + halves * hw.wgmma.latency, hw.shared.latency)  # [wgmma.latency], [shared.latency]
    chain = wait + body
    per_warp_fma = -(-hw.warp_size // fma.lanes) * fma.interval  # [warp_size], [pipes[fma].lanes/interval]
    fma_busy = C * c.iter.get("fma", 0) * per_warp_fma
    issue = C * body
    producer = max(T["tma_issue"], T["tma_transfer"], T["tma_ring"])
    parts = {"tensor": T["tensor"], "chain": chain, "fma": fma_busy, "issue": issue, "producer": producer}
    k_tile = max(parts.values())
    bound = max(parts, key=lambda k: parts[k])
    if bound == "producer":
        bound = max((("tma_issue", T["tma_issue"]), ("tma_transfer", T["tma_transfer"]),
                     ("tma_ring", T["tma_ring"])), key=lambda x: x[1])[0]
    ktiles = -(-shape[2] // t.bk)
    tail = halves * hw.wgmma.latency + body  # the last K block's wait_group 0s and promotion, before the epilogue
    per_tile = ktiles * k_tile + tail + base.post_cycles
    tiles_per_cta = int(T["tiles_per_cta"])
    cta = base.pre_cycles + tiles_per_cta * per_tile + T["store_tail"]  # the last tile's stores drain
    total = max(cta, dram_cycles)
    if dram_cycles > cta:
        bound = "dram"
    terms = {**T, "chain": chain, "promote_fma": fma_busy, "issue": issue, "k_tile": k_tile, "tail": tail,
             "per_tile": per_tile}
    return CycleModel(int(total), int(cta), k_tile, base.pre_cycles, base.post_cycles, 1, tiles_per_cta,
                      base.cores_used, 1, bound, terms)
