"""Synchronization model: barriers and async-copy waits per K tile, their cost, a deadlock check.

Costs (HwConfig fields): a barrier costs the latency of the pipe serving class "sync"
([pipes[sync].latency]) plus the skew of the slowest warp; an exposed global load costs
[dram.latency] (or [l2.hit_latency] on an L2 hit) unless the pipeline hides it: with `stages`
buffers, stages - 1 K tiles of compute overlap each copy.
"""

from __future__ import annotations

from dataclasses import dataclass

from kernelgen.tiling import Tiling, variant_of
from sim.hw import HwConfig


@dataclass(frozen=True)
class SyncPlan:
    barriers_per_tile: int
    waits_per_tile: int  # cp.async.wait_group per K tile
    wait_depth: int  # N of cp.async.wait_group N
    commit_groups: int  # groups committed per K tile
    barrier_cycles: int
    exposed_latency_per_tile: float
    deadlock_free: bool
    reason: str


def sync_plan(t: Tiling, hw: HwConfig, ktiles: int, compute_cycles_per_tile: float, l2_hit: float,
              ctas_per_core: int) -> SyncPlan:
    sync_lat = _sync_latency(hw)
    mem_lat = l2_hit * hw.l2.hit_latency + (1 - l2_hit) * hw.dram.latency  # [l2.hit_latency], [dram.latency]
    return variant_of(t.variant).sync_plan(t, ktiles, sync_lat, mem_lat, compute_cycles_per_tile, ctas_per_core)


_SYNC_LAT: dict[int, tuple[HwConfig, int]] = {}


def _sync_latency(hw: HwConfig) -> int:
    """[pipes[sync].latency] (20 without a sync pipe), once per hw (the planner asks per candidate)."""
    hit = _SYNC_LAT.get(id(hw))
    if hit is None or hit[0] is not hw:
        try:
            lat = hw.pipe_for("sync").latency  # [pipes[sync].latency]
        except KeyError:
            lat = 20
        hit = _SYNC_LAT[id(hw)] = (hw, lat)
    return hit[1]
