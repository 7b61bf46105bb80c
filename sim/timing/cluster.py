"""Thread block clusters in the timing model: co-scheduling and the cross-CTA events.

Placement (model choice). The cores are taken in groups of n consecutive cores, n the cluster size
(cores beyond a whole group stay idle; a GPU with fewer cores than n refuses the launch). Each group
stands for SMs of one GPC. A cluster occupies one CTA slot on every core of a group, rank r on the
group's core r, all n CTAs launched in the same cycle; the group's slot frees when the cluster's last
CTA finishes, and the next cluster of the grid starts there. The hardware frees per CTA and places a new
cluster wherever its GPC has n free slots; waiting for the whole cluster is the simplification.

Cross-CTA events. ``barrier.cluster.arrive`` (and a warp's exit, which counts as arrived) rechecks the
cluster barrier of every CTA of the cluster at that cycle; a release costs core.cluster_barrier_latency
(measured on the H200: an arrive + wait round of a 2-CTA cluster, docs/clusters.md), or the sync pipe's
latency as a CTA barrier where the hwconfig does not give it. A remote mbarrier arrive
wakes the waiters of the CTA it lands in, the sync pipe's latency later. A multicast TMA load is one copy
through the issuing core's TMA unit and L2 path (one L2 read) whose bytes land in every destination CTA
at the same completion cycle (sim/timing/tma.py). Loads, stores and atomics on another CTA's shared
memory are timed as shared accesses of the issuing core (same latency and bank model; an assumption:
the SM-to-SM network's latency is not modelled).
"""

from __future__ import annotations

from collections.abc import Generator
from typing import TYPE_CHECKING

import simpy

from sim.cluster import ClusterHooks, link
from sim.errors import UsageError
from sim.functional.ops_mem import CLUSTER_BAR_ID
from sim.timing.tma import wake_mbarrier_waiters

if TYPE_CHECKING:
    from sim.functional.warp import CTA, Warp
    from sim.hw import HwConfig
    from sim.timing.core import Core, CtaT
    from sim.timing.engine import Simulation


def release_latency(hw: HwConfig, w: Warp) -> int:
    """Cycles from a barrier's last arrival to the release of warp w: core.cluster_barrier_latency for
    barrier.cluster.wait (an SM-to-SM round) when the hwconfig gives it, else the sync pipe's latency."""
    if w.bar_id == CLUSTER_BAR_ID and hw.core.cluster_barrier_latency is not None:
        return hw.core.cluster_barrier_latency
    return hw.pipe_for("sync").latency


class TimingHooks(ClusterHooks):
    """The cluster's CTAs on their cores, told of barrier arrivals and remote mbarrier signals."""

    def __init__(self, cts: list[CtaT], cores: list[Core]):
        self.cts = cts
        self.cores = cores
        self.finished = 0

    def barrier_arrived(self, w: Warp) -> None:
        core0 = self.cores[0]
        t = core0.now
        for ct, core in zip(self.cts, self.cores):
            if ct.waiting:
                core._check_barrier(ct, t)

    def mbarrier_signalled(self, cta: CTA, w: Warp) -> None:
        core = self.cores[cta.rank]
        wake_mbarrier_waiters(self.cts[cta.rank], core.now + core.hw.pipe_for("sync").latency)

    def ct_of(self, cta: CTA) -> CtaT:
        return self.cts[cta.rank]


def cluster_cores(sim: Simulation, n: int, ncores: int) -> int:
    """Cores the launch uses: whole groups of n."""
    if sim.hw.core.count < n:
        raise UsageError(f"a cluster of {n} CTAs needs {n} cores; {sim.hw.name} has {sim.hw.core.count}: give a "
                         "smaller --cluster", sim.P.L.file)
    return max(n, ncores // n * n)


def launch_cluster(sim: Simulation, group: int, items: list[tuple[int, tuple[int, int, int]]]) -> None:
    """Launch one cluster's CTAs (rank order) on the cores of `group`, linked (sim/cluster.py)."""
    n = len(items)
    cores = sim.cores[group * n: group * n + n]
    cts = [core.launch(ctaid, idx) for core, (idx, ctaid) in zip(cores, items)]
    cl = link([ct.cta for ct in cts])
    cl.hooks = TimingHooks(cts, cores)


def first_wave(sim: Simulation, n: int) -> None:
    groups = len(sim.cores) // n
    for _slot in range(sim.ctas_per_core):
        for g in range(groups):
            if sim.pending:
                launch_cluster(sim, g, [sim.pending.pop(0) for _ in range(n)])


def cta_done(sim: Simulation, core: Core, ct: CtaT, end: int, n: int) -> None:
    """A CTA of a cluster finished; the cluster's last one frees its group for the next cluster."""
    sim.cta_spans[ct.index] = end - ct.start
    sim.end = max(sim.end, end)
    hooks = ct.cta.cluster.hooks if ct.cta.cluster is not None else None
    assert isinstance(hooks, TimingHooks)
    hooks.finished += 1
    if hooks.finished < n or not sim.pending:
        return
    last = max(c.start + sim.cta_spans.get(c.index, 0) for c in hooks.cts)
    items = [sim.pending.pop(0) for _ in range(n)]
    sim.launching += n
    sim.env.process(_later(sim, core.index // n, items, max(0, last - int(sim.env.now))))


def _later(sim: Simulation, group: int, items: list[tuple[int, tuple[int, int, int]]], delay: int,
           ) -> Generator[simpy.Event, object, None]:
    if delay:
        yield sim.env.timeout(delay)
    sim.launching -= len(items)
    launch_cluster(sim, group, items)


__all__ = ["TimingHooks", "cluster_cores", "cta_done", "first_wave", "launch_cluster", "release_latency"]
