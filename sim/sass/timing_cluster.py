"""Thread block clusters in SASS timing (sim/sass/timing.py), placed and synchronised as PTX mode does it
(sim/timing/cluster.py):

- placement (model choice, PTX mode's): the cores are taken in groups of n consecutive cores, n the cluster
  size (cores beyond a whole group stay idle); a cluster's rank r runs on its group's core r, all n CTAs
  started in the same cycle, and a group takes the next cluster of the grid when each of its cores has a
  free CTA slot (PTX mode waits for the whole cluster to finish; here a slot frees per CTA, and the next
  cluster still needs one on every core of the group);
- UCGABAR_WAIT (barrier.cluster.wait): the warps waiting at it are released core.cluster_barrier_latency
  cycles after the cluster's last arrival (UCGABAR_ARV, or a warp's exit), or the sync pipe's latency where
  the hwconfig does not give it (sim.timing.cluster.release_latency);
- an mbarrier change (a SYNCS on a peer's mbarrier, a copy landing in a peer) wakes the sleepers of every CTA
  of the cluster (sim/sass/timing_tma.py); a CTA-to-CTA bulk copy lands shared.remote_extra cycles after
  its bytes streamed, a multicast load in every CTA of its ctaMask at its completion (one L2 read).
"""

from __future__ import annotations

from typing import Any

from sim.errors import UsageError
from sim.sass.exec import cluster_ctas, make_cluster
from sim.sass.exec_cluster import cga_release
from sim.sass.exec_state import Cta


class ClusterTiming:
    def __init__(self, T: Any):
        self.T = T
        self.n = cluster_ctas(T.L)
        hw = T.hw
        self.latency = hw.core.cluster_barrier_latency  # source: h200.yaml core.cluster_barrier_latency
        if self.latency is None:
            self.latency = hw.pipe_for("sync").latency  # source: pipes sync latency (a CTA barrier's release)
        self.live: list[list[Cta]] = []  # the clusters started and not finished

    @staticmethod
    def cores(hw: Any, n: int, ncores: int, file: str) -> int:
        """Cores the launch uses: whole groups of n."""
        if hw.core.count < n:
            raise UsageError(f"a cluster of {n} CTAs needs {n} cores; {hw.name} has {hw.core.count}: give a "
                             "smaller --cluster", file)
        return max(n, ncores // n * n)

    def start(self, most: int | None) -> None:
        """Start clusters of the grid on every group of cores with a free slot on each core (``most``: the
        slots per core to fill, None: all of them)."""
        T, n = self.T, self.n
        limit = T.per_core if most is None else most
        for g in range(len(T.cores) // n):
            group = T.cores[g * n: g * n + n]
            while len(T.todo) >= n and all(len(c.ctas) < limit for c in group):
                items = [T.todo.pop(0) for _ in range(n)]
                ctas = make_cluster(T.L, items)
                self.live.append(ctas)
                for c, cta in zip(group, ctas):
                    T.place(c, cta)

    def release(self) -> None:
        """Release the cluster barrier waits whose cluster has arrived."""
        T = self.T
        for ctas in list(self.live):
            if all(w.done for cta in ctas for w in cta.warps):
                self.live.remove(ctas)
                continue
            released = cga_release(ctas)
            if not released:
                continue
            ids = {id(w) for w in released}
            for c in T.cores:
                for sched in c.scheds:
                    for wt in sched:
                        if id(wt.w) in ids:
                            wt.ready = max(wt.ready, T.t + self.latency)


__all__ = ["ClusterTiming"]
