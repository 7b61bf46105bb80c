"""Synchronization model: barriers and async-copy waits per K tile, their cost, a deadlock check.

Costs (HwConfig fields): a barrier costs the latency of the pipe serving class "sync"
([pipes[sync].latency]) plus the skew of the slowest warp; an exposed global load costs
[dram.latency] (or [l2.hit_latency] on an L2 hit) unless the pipeline hides it: with `stages`
buffers, stages - 1 K tiles of compute overlap each copy.
"""

from __future__ import annotations

from dataclasses import dataclass

from kernelgen.tiling import Tiling
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


def _check_pipeline(stages: int, ktiles: int) -> tuple[bool, str]:
    """Replay the commit/wait schedule: at iteration kt, tile kt must be complete after the wait."""
    if stages < 2:
        return False, f"stages(={stages}) must be >= 2 for the cp.async pipeline"
    committed = stages - 1
    for kt in range(min(ktiles, 4 * stages)):
        done = committed - (stages - 2)  # wait_group stages-2 leaves at most that many pending
        if done < kt + 1:
            return False, f"tile {kt} not complete after wait_group {stages - 2}"
        committed += 1  # this iteration issues and commits tile kt + stages - 1
    return True, "every wait is reached by all threads (uniform loop), each waited tile was committed"


def sync_plan(t: Tiling, hw: HwConfig, ktiles: int, compute_cycles_per_tile: float, l2_hit: float,
              ctas_per_core: int) -> SyncPlan:
    try:
        sync_lat = hw.pipe_for("sync").latency  # [pipes[sync].latency]
    except KeyError:
        sync_lat = 20
    mem_lat = l2_hit * hw.l2.hit_latency + (1 - l2_hit) * hw.dram.latency  # [l2.hit_latency], [dram.latency]
    if t.variant == "simt":
        ok, why = True, "two bar.sync per K tile in uniform control flow; no async copies"
        # no prefetch: the copy latency is exposed, except for what other resident CTAs overlap
        exposed = max(0.0, mem_lat - (ctas_per_core - 1) * compute_cycles_per_tile)
        return SyncPlan(2, 0, 0, 0, 2 * sync_lat, exposed, ok, why)
    ok, why = _check_pipeline(t.stages, ktiles)
    exposed = max(0.0, mem_lat - (t.stages - 1) * compute_cycles_per_tile * ctas_per_core)
    return SyncPlan(1, 1, t.stages - 2, 1, sync_lat, exposed, ok, why)
